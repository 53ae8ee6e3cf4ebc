"""Reliability (issue 5, parts 1, 2 and 4): timeouts on every call, load with memory back to
baseline, and an owner killed mid-flight. Part 3 (torch's fault-injecting agent) is in
``test_reliability_faults.py``: it needs a group on another RPC backend, and a process can
host only one RPC group.

One group of real processes serves the module (this process is ``worker0``):

- ``worker1``: the owner of part 1's blocking modules and part 4's first owner;
- ``worker2``: part 4's second owner, and part 2's healthy owner;
- ``worker3``, ``worker4``: part 4's callers that run as RPC functions;
- ``worker5``: part 2's victim, killed with SIGKILL (so its tests run last).

Blocking is deterministic: modules from ``reliability_helpers`` block their owner's handler on
a gate that each test opens when it is done.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.distributed.rpc as rpc
from torch import Tensor

from remote_module import RemoteModule
from tests.support import reliability_helpers as helpers
from tests.support.reliability_helpers import OWNER_KEYS

TIMEOUT = 0.5  # the RemoteModule timeout of the blocking tests
SLACK = 1.5  # scheduling on 2 shared cores: an error must come within TIMEOUT + SLACK
PROMPT = 5.0  # a call that should just work, on a loaded machine
OWNER = "worker1"
VICTIM = "worker5"
WORLD_SIZE = 6
# Not graceful: part 2 kills a member, and a timed-out call that returns RRefs leaks them on the
# owner (test_timed_out_call_leaves_nothing_on_the_owner), which would stall a graceful
# shutdown for minutes. The group fixture (tests/conftest.py) yields the worker processes.
pytestmark = pytest.mark.rpc_group(WORLD_SIZE, graceful=False)

# Counters that return to their baseline once every RemoteModule and future is gone: the
# owner's (OWNER_KEYS) and the agent's.
AGENT_KEYS = ("agent.client_active_calls", "agent.server_active_async_calls")


def x_of(value: float, width: int = 2) -> Tensor:
    return torch.full((1, width), float(value))


def on(worker: str, fn: Callable[..., Any], *args: Any, timeout: float = 30.0) -> Any:
    return rpc.rpc_sync(worker, fn, args, timeout=timeout)


def assert_names(error: BaseException, *names: str) -> None:
    text = str(error)
    where = "".join(traceback.format_tb(error.__traceback__)[-2:])
    for name in names:
        assert name in text, f"{name!r} not in the error: {text[:500]}\nraised at:\n{where}"


@contextlib.contextmanager
def bounded(limit_s: float) -> Iterator[dict[str, float]]:
    """Times the block; fails when it took longer than ``limit_s``."""
    measured: dict[str, float] = {}
    start = time.monotonic()
    try:
        yield measured
    finally:
        measured["elapsed_s"] = time.monotonic() - start
    assert measured["elapsed_s"] < limit_s, f"took {measured['elapsed_s']:.2f} s (> {limit_s} s)"


def counts(worker: str, keys: tuple[str, ...] = OWNER_KEYS + AGENT_KEYS) -> dict[str, int]:
    """``worker``'s RRef and agent counters after a ``gc.collect()`` on both sides."""
    gc.collect()
    info = helpers.debug_counts() if worker == "worker0" else on(worker, helpers.debug_counts)
    return {key: info[key] for key in keys}


def settle(
    worker: str, baseline: dict[str, int], limit_s: float = 15.0
) -> tuple[dict[str, int], float]:
    """Polls ``worker``'s counters until they equal ``baseline`` (or ``limit_s`` passes);
    returns the last counters and how long it took."""
    start = time.monotonic()
    while True:
        now = counts(worker, tuple(baseline))
        if now == baseline or time.monotonic() - start > limit_s:
            return now, time.monotonic() - start
        time.sleep(0.2)


# --- Part 1: timeouts everywhere -----------------------------------------------------------


@pytest.fixture
def gate(group: list[subprocess.Popen[bytes]]) -> Iterator[None]:
    """The owner's gate is closed during the test (its blocking modules block) and opened
    after it, so nothing stays blocked into the next test."""
    on(OWNER, helpers.close_gate)
    try:
        yield
    finally:
        on(OWNER, helpers.open_gate)


@pytest.fixture(scope="class")
def blocking(group: list[subprocess.Popen[bytes]]) -> RemoteModule:
    return RemoteModule(f"{OWNER}/cpu", helpers.Blocking, timeout=TIMEOUT)


@pytest.fixture(scope="class")
def blocking_scripted(group: list[subprocess.Popen[bytes]]) -> RemoteModule:
    # Scripting on the owner may take seconds on a loaded machine: build it with a generous
    # timeout, then use it through a RemoteModule with the short one.
    built = RemoteModule(
        f"{OWNER}/cpu",
        helpers.BlockingScripted,
        module_interface_cls=helpers.HoldInterface,
        timeout=60,
    )
    # Its first call waits for the owner's load of the generated module, which the short
    # timeout below is not about (the gate open, the call returns at once).
    on(OWNER, helpers.open_gate)
    built.nap()
    return RemoteModule.init_from_module_rref(
        f"{OWNER}/cpu", built.get_module_rref(), helpers.HoldInterface, timeout=TIMEOUT
    )


@pytest.fixture(scope="class")
def fast(group: list[subprocess.Popen[bytes]]) -> RemoteModule:
    """A module on the same owner that never blocks."""
    return RemoteModule(f"{OWNER}/cpu", helpers.AddConstant, args=(2.0,), timeout=5.0)


def _blocking_state() -> dict[str, Tensor]:
    return {"linear.weight": torch.zeros(2, 2), "linear.bias": torch.zeros(2)}


# (id, the call, names the error must contain besides the owner)
BLOCKED_CALLS: list[tuple[str, Callable[[RemoteModule, RemoteModule], Any], tuple[str, ...]]] = [
    ("forward", lambda rm, s: rm(x_of(1)), ("forward",)),
    (
        "forward_async",
        lambda rm, s: helpers.wait_bounded(rm.forward_async(x_of(1)), TIMEOUT + SLACK),
        ("forward",),
    ),
    ("interface forward", lambda rm, s: s.forward(x_of(1)), ("forward",)),
    (
        "interface forward_async",
        lambda rm, s: helpers.wait_bounded(s.forward_async(x_of(1)), TIMEOUT + SLACK),
        ("forward",),
    ),
    ("interface method", lambda rm, s: s.nap(), ("nap",)),
    (
        "interface method_async",
        lambda rm, s: helpers.wait_bounded(s.nap_async(), TIMEOUT + SLACK),
        ("nap",),
    ),
    ("remote_parameters", lambda rm, s: rm.remote_parameters(), ("remote_parameters",)),
    ("train", lambda rm, s: rm.train(), ("train",)),
    ("eval", lambda rm, s: rm.eval(), ("train",)),  # eval() is train(False)
    ("remote_state_dict", lambda rm, s: rm.remote_state_dict(), ("remote_state_dict",)),
    (
        "load_remote_state_dict",
        lambda rm, s: rm.load_remote_state_dict(_blocking_state()),
        ("load_remote_state_dict",),
    ),
]


class TestTimeouts:
    # The suite's default bound, as a guard against a hang (each call is bounded below): the
    # first one's setup starts the module's group and builds the class's modules, which on a
    # loaded machine can take most of a minute (the faults module's group took over 30 s).
    @pytest.mark.parametrize(
        ("call", "names"),
        [pytest.param(call, names, id=name) for name, call, names in BLOCKED_CALLS],
    )
    def test_call_past_the_timeout_raises_naming_owner_and_method(
        self,
        gate: None,
        blocking: RemoteModule,
        blocking_scripted: RemoteModule,
        fast: RemoteModule,
        call: Callable[[RemoteModule, RemoteModule], Any],
        names: tuple[str, ...],
    ) -> None:
        with bounded(TIMEOUT + SLACK) as took, pytest.raises(RuntimeError) as raised:
            call(blocking, blocking_scripted)
        assert took["elapsed_s"] >= TIMEOUT * 0.9, "raised before the timeout: not a timeout"
        assert_names(raised.value, OWNER, *names)
        print(f"\n[part 1] error after {took['elapsed_s']:.3f} s: {str(raised.value)[:120]}")
        # The caller keeps working: a fast module on the same owner answers ...
        with bounded(PROMPT):
            assert torch.equal(fast(x_of(3)), x_of(5))
        # ... and so does the blocked module once its owner is free again: a bounded poll, as
        # a loaded owner just freed can miss the 0.5 s timeout once more (1 of 28 loaded runs).
        on(OWNER, helpers.open_gate)
        deadline = time.monotonic() + PROMPT
        while True:
            try:
                with bounded(TIMEOUT + SLACK):
                    call(blocking, blocking_scripted)
                break
            except RuntimeError as error:
                late = "timeout" in str(error) or "timed out" in str(error)
                if not late or time.monotonic() > deadline:
                    raise

    @pytest.mark.timeout(60)
    @pytest.mark.parametrize("first_call_after_s", [0.0, TIMEOUT + 0.5])
    def test_construction_with_interface_past_the_timeout_raises_on_first_call(
        self, gate: None, fast: RemoteModule, first_call_after_s: float
    ) -> None:
        # Construction never blocks on the owner, with an interface too (pytorch#58098): it
        # returns at once, and the creation's timeout (counted from the construction) is
        # raised by the first operation, and by every later one, named as the creation's.
        with bounded(SLACK):
            rm = RemoteModule(
                f"{OWNER}/cpu",
                helpers.BlockingScripted,
                args=(True,),  # __init__ blocks on the owner
                module_interface_cls=helpers.HoldInterface,
                timeout=TIMEOUT,
            )
        time.sleep(first_call_after_s)
        for operation in (lambda: rm.forward(x_of(1)), rm.remote_parameters, rm.get_module_rref):
            with bounded(TIMEOUT + SLACK), pytest.raises(RuntimeError) as raised:
                operation()
            assert_names(raised.value, OWNER, "BlockingScripted")
        with bounded(PROMPT):
            assert torch.equal(fast(x_of(3)), x_of(5))

    @pytest.mark.timeout(60)
    @pytest.mark.parametrize("first_call_after_s", [0.0, TIMEOUT + 0.5])
    def test_construction_without_interface_past_the_timeout_raises_on_first_call(
        self, gate: None, fast: RemoteModule, first_call_after_s: float
    ) -> None:
        # Construction without an interface is asynchronous (as upstream): it returns at once
        # and a failure surfaces on the first call, also within the timeout.
        with bounded(SLACK):
            rm = RemoteModule(f"{OWNER}/cpu", helpers.Blocking, args=(True,), timeout=TIMEOUT)
        time.sleep(first_call_after_s)
        with bounded(TIMEOUT + SLACK), pytest.raises(RuntimeError) as raised:
            rm(x_of(1))
        assert_names(raised.value, OWNER, "forward")
        with bounded(PROMPT):
            assert torch.equal(fast(x_of(3)), x_of(5))

    @pytest.mark.timeout(60)
    @pytest.mark.parametrize("interface", [None, helpers.AddInterface], ids=["plain", "interface"])
    @pytest.mark.parametrize(
        ("remote_device", "name"), [("nowhere/cpu", "nowhere"), ("rank:9/cpu", "9")]
    )
    def test_construction_on_a_worker_that_does_not_exist_fails_fast(
        self, remote_device: str, name: str, interface: Any, fast: RemoteModule
    ) -> None:
        with bounded(SLACK), pytest.raises((RuntimeError, ValueError)) as raised:
            RemoteModule(
                remote_device,
                helpers.AddConstant,
                module_interface_cls=interface,
                timeout=TIMEOUT,
            )
        assert_names(raised.value, name)
        with bounded(PROMPT):
            assert torch.equal(fast(x_of(3)), x_of(5))

    @pytest.mark.timeout(60)
    def test_no_rpc_deadline_on_a_message_whose_reply_carries_or_creates_an_rref(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """torch drops the RRef bookkeeping of a reply that comes after its RPC's deadline
        (the owner then keeps the RRef for good): every message whose reply carries or
        creates an RRef is sent without one (0), and the RemoteModule's timeout is enforced
        on the caller."""
        sent: list[tuple[str, float]] = []
        real_remote, real_rpc_async = rpc.remote, rpc.rpc_async

        def remote(
            to: Any, func: Any, args: Any = None, kwargs: Any = None, timeout: Any = -1.0
        ) -> Any:
            sent.append((func.__name__, timeout))
            return real_remote(to, func, args, kwargs, timeout=timeout)

        def rpc_async(
            to: Any, func: Any, args: Any = None, kwargs: Any = None, timeout: Any = -1.0
        ):  # type: ignore[no-untyped-def]
            name = getattr(func, "__name__", str(func))
            if name == "request":  # owner.request(fn, *args): fn is what is asked
                name = args[0].__name__
            sent.append((name, timeout))
            return real_rpc_async(to, func, args, kwargs, timeout=timeout)

        monkeypatch.setattr(rpc, "remote", remote)
        monkeypatch.setattr(rpc, "rpc_async", rpc_async)
        plain = RemoteModule(f"{OWNER}/cpu", helpers.AddConstant, args=(2.0,), timeout=TIMEOUT)
        with_interface = RemoteModule(
            f"{OWNER}/cpu",
            helpers.AddConstant,
            args=(2.0,),
            module_interface_cls=helpers.AddInterface,
            timeout=60,
        )
        with bounded(PROMPT):
            plain.remote_parameters()
            with_interface.forward(x_of(1))  # a scripted module's first Python call files it
        carrying = {"create", "create_with_interface", "parameter_rrefs", "file_keyed"}
        seen = {name: timeout for name, timeout in sent if name in carrying}
        assert seen == dict.fromkeys(carrying, 0), sent

    @pytest.mark.timeout(60)
    @pytest.mark.parametrize(
        "operation",
        [
            "forward",
            "interface forward",
            "remote_parameters",
            "construction with interface",
            "construction without interface",
        ],
    )
    def test_timed_out_call_leaves_nothing_on_the_owner(self, gate: None, operation: str) -> None:
        """After a timed-out call, once the owner finishes and the caller drops its
        RemoteModule, the owner holds no more RRefs than before (no leak, and nothing that
        stalls a graceful shutdown)."""
        baseline = counts(OWNER, OWNER_KEYS)
        with pytest.raises(RuntimeError):
            if operation == "forward":
                rm = RemoteModule(f"{OWNER}/cpu", helpers.Blocking, timeout=TIMEOUT)
                rm(x_of(1))
            elif operation == "interface forward":
                rm = RemoteModule(
                    f"{OWNER}/cpu",
                    helpers.BlockingScripted,
                    module_interface_cls=helpers.HoldInterface,
                    timeout=60,
                )
                rm = RemoteModule.init_from_module_rref(
                    f"{OWNER}/cpu", rm.get_module_rref(), helpers.HoldInterface, timeout=TIMEOUT
                )
                rm.forward(x_of(1))
            elif operation == "remote_parameters":
                rm = RemoteModule(f"{OWNER}/cpu", helpers.Blocking, timeout=TIMEOUT)
                rm.remote_parameters()
            elif operation == "construction with interface":
                rm = RemoteModule(
                    f"{OWNER}/cpu",
                    helpers.BlockingScripted,
                    args=(True,),
                    module_interface_cls=helpers.HoldInterface,
                    timeout=TIMEOUT,
                )
                rm.forward(x_of(1))
            else:
                rm = RemoteModule(f"{OWNER}/cpu", helpers.Blocking, args=(True,), timeout=TIMEOUT)
                rm(x_of(1))
        on(OWNER, helpers.open_gate)
        with contextlib.suppress(NameError):
            del rm
        after, waited = settle(OWNER, baseline, limit_s=5.0)
        assert after == baseline, (
            f"owner {OWNER} still holds RRefs after a timed-out {operation} "
            f"(before {baseline}, after {after}, waited {waited:.1f} s)"
        )


# --- Construction never blocks on the owner -------------------------------------------------

# Each operation that needs the module, as a caller meets it right after the constructor.
WAITING_OPERATIONS: dict[str, Callable[[RemoteModule], Any]] = {
    "forward": lambda rm: rm.forward(x_of(1)),
    "forward_async": lambda rm: rm.forward_async(x_of(1)).wait(),
    "nap": lambda rm: rm.nap() * 0 + rm.forward(x_of(1)),
    "module_rref": lambda rm: rpc.rpc_sync(OWNER, helpers.forward_there, (rm, x_of(1))),
    "get_module_rref": lambda rm: rm.get_module_rref().rpc_sync().forward(x_of(1)),
    "remote_parameters": lambda rm: rm.remote_parameters() or rm.forward(x_of(1)),
    "train": lambda rm: rm.train().forward(x_of(1)),
    "torch.jit.script": lambda rm: torch.jit.script(rm).forward(x_of(1)),
    "sending over RPC": lambda rm: rpc.rpc_sync("worker2", helpers.forward_there, (rm, x_of(1))),
}


class TestConstructionNeverBlocks:
    """With an interface too, the constructor returns once its request is sent
    (pytorch#58098): here the owner is held inside ``module_cls.__init__`` until the test
    opens its gate, and every operation waits for the module to exist."""

    @pytest.mark.timeout(60)
    @pytest.mark.parametrize(
        ("interface", "operation"),
        [(helpers.HoldInterface, operation) for operation in WAITING_OPERATIONS]
        + [
            (helpers.HoldProtocol, operation)
            for operation in WAITING_OPERATIONS
            if operation != "torch.jit.script"  # the eager family does not script
        ],
        ids=lambda value: value if isinstance(value, str) else value.__name__,
    )
    def test_the_constructor_returns_while_the_owner_creates(
        self, gate: None, interface: Any, operation: str
    ) -> None:
        with bounded(PROMPT):  # a blocking construction would wait for the gate: 60 s
            rm = RemoteModule(
                f"{OWNER}/cpu",
                helpers.BlockingScripted,
                args=(True,),  # __init__ holds until the gate opens
                module_interface_cls=interface,
                timeout=60,
            )
        assert "module_rref" not in vars(rm), "the constructor waited for the owner's reply"
        assert "module_rref" in dir(rm)  # what it has, though not taken yet
        outcome: dict[str, Any] = {}
        started = threading.Event()

        def run() -> None:
            started.set()
            try:
                outcome["result"] = WAITING_OPERATIONS[operation](rm)
            except Exception as error:  # reported below
                outcome["error"] = error

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        assert started.wait(PROMPT)
        assert not outcome, f"{operation} finished while the owner was still creating: {outcome}"
        on(OWNER, helpers.open_gate)
        worker.join(PROMPT + 20.0)  # the module's forward holds for the gate, open by now
        assert "error" not in outcome, outcome
        assert torch.equal(outcome["result"], x_of(2)), outcome
        assert vars(rm)["module_rref"].owner_name() == OWNER

    @pytest.mark.timeout(60)
    def test_many_constructions_of_a_new_class_at_once_all_work(self) -> None:
        # The owner scripts a class's first modules on several threads at once (nothing
        # waits between these constructors); torch compiles a class's methods (and its
        # submodules', here nn.EmbeddingBag's) once, and a second compilation beside it
        # raises "Can't redefine method". (The demo's table: no other test here scripts it.)
        import remote_module.examples.generated  # noqa: F401  (its build-time stubs, as the demo)
        from remote_module.examples.embedding import EmbeddingBagInterface, RemoteEmbeddingBag

        with bounded(PROMPT):
            made = [
                RemoteModule(
                    f"{OWNER}/cpu",
                    RemoteEmbeddingBag,
                    args=(100_000, 16, seed),
                    kwargs={"sparse": True},
                    module_interface_cls=EmbeddingBagInterface,
                    timeout=60,
                )
                for seed in range(8)
            ]
        indices, offsets = torch.arange(6), torch.tensor([0, 3])
        for rm in made:
            assert rm(indices, offsets).shape == (2, 16)
        norms = {rm.weight_norm() for rm in made}
        assert len(norms) == len(made)  # eight modules, each its own seed

    @pytest.mark.timeout(60)
    def test_a_failed_creation_is_raised_by_each_operation_named_as_the_creation(
        self, fast: RemoteModule
    ) -> None:
        with bounded(PROMPT):
            rm = RemoteModule(
                f"{OWNER}/cpu",
                helpers.BlockingScripted,
                args=(True, "one too many"),  # TypeError in __init__ on the owner
                module_interface_cls=helpers.HoldInterface,
            )
        for operation in ("forward", "remote_parameters", "module_rref", "torch.jit.script"):
            with bounded(PROMPT), pytest.raises(TypeError) as raised:
                WAITING_OPERATIONS[operation](rm)
            text = str(raised.value)
            assert text.startswith(
                f"RemoteModule: creating BlockingScripted on worker '{OWNER}' failed: TypeError:"
            ), text
            assert "Traceback" not in text
        with bounded(PROMPT):
            assert torch.equal(fast(x_of(3)), x_of(5))


# --- Part 4: load --------------------------------------------------------------------------

LOAD_CALLS = 10_000
RSS_GROWTH_LIMIT_MIB = 50
LOAD_OWNERS = ["worker1", "worker2"]


def memory_snapshot(workers: list[subprocess.Popen[bytes]]) -> dict[str, Any]:
    """RSS (MiB, from /proc/<pid>/status) and RRef/agent counters of each owner, plus this
    process's counters, after a gc.collect() everywhere."""
    snapshot: dict[str, Any] = {"worker0": counts("worker0")}
    for rank, owner in enumerate(LOAD_OWNERS, start=1):
        snapshot[owner] = counts(owner)
        snapshot[f"{owner} rss_mib"] = helpers.rss_kib(workers[rank - 1].pid) / 1024
    return snapshot


LOAD_CALLERS = ["worker3", "worker4"]  # run_four_callers's remote callers (helpers.hammer)
IN_FLIGHT_KEYS = ("num_pending_users", "num_pending_futures", "agent.client_active_calls")


def quiet_snapshot(workers: list[subprocess.Popen[bytes]], limit_s: float = 15.0) -> dict[str, Any]:
    """The baseline of a load test: a ``memory_snapshot`` taken once nothing of an earlier
    test is still on its way (no worker has a pending user, future or outgoing call; the RRef
    deletions of a caller's RemoteModules are such calls) and two polls in a row agree."""
    previous: dict[str, Any] | None = None
    deadline = time.monotonic() + limit_s
    while True:
        snapshot = memory_snapshot(workers)  # its counters hold IN_FLIGHT_KEYS already
        seen = {**snapshot, **{caller: counts(caller, IN_FLIGHT_KEYS) for caller in LOAD_CALLERS}}
        in_flight = {
            worker: {key: seen[worker][key] for key in IN_FLIGHT_KEYS if seen[worker][key]}
            for worker in ["worker0", *LOAD_OWNERS, *LOAD_CALLERS]
        }
        busy = {worker: held for worker, held in in_flight.items() if held}
        same = previous is not None and all(
            snapshot[worker] == previous[worker] for worker in ["worker0", *LOAD_OWNERS]
        )
        if not busy and same:
            return snapshot
        assert time.monotonic() < deadline, f"still in flight after {limit_s} s: {busy}"
        previous = snapshot
        time.sleep(0.2)


def settle_everywhere(before: dict[str, Any], limit_s: float = 15.0) -> dict[str, Any]:
    waited = {
        worker: settle(worker, before[worker], limit_s)[1] for worker in ["worker0", *LOAD_OWNERS]
    }
    return waited


def run_single_caller(interface: Any, count: int, constant: float) -> dict[str, Any]:
    rm = RemoteModule(
        "worker1/cpu",
        helpers.AddConstant,
        args=(constant,),
        module_interface_cls=interface,
        timeout=60.0,
    )
    inputs = helpers.load_inputs(count)
    start = time.monotonic()
    futures = [rm.forward_async(x) for x in inputs]
    sent_s = time.monotonic() - start
    in_flight = sum(not future.done() for future in futures)  # after the last one was sent
    wrong = [
        i
        for i, (future, x) in enumerate(zip(futures, inputs, strict=True))
        if not torch.equal(helpers.wait_bounded(future, 60.0), x + constant)
    ]
    return {
        "wrong": wrong,
        "sent_s": sent_s,
        "in_flight": in_flight,
        "elapsed_s": time.monotonic() - start,
    }


def run_four_callers(count_each: int) -> list[dict[str, Any]]:
    """Callers 0 and 1: threads here; callers 2 and 3: rpc functions on worker3 and worker4.
    Each builds its own modules on both owners, with constants of its own."""
    reports: list[Any] = [None, None]

    def local(caller: int) -> None:
        reports[caller] = helpers.hammer(caller, LOAD_OWNERS, count_each, 60.0)

    threads = [threading.Thread(target=local, args=(caller,), daemon=True) for caller in (0, 1)]
    for thread in threads:
        thread.start()
    remote = [
        rpc.rpc_async(
            f"worker{caller + 1}",
            helpers.hammer,
            (caller, LOAD_OWNERS, count_each, 60.0),
            timeout=120,
        )
        for caller in (2, 3)
    ]
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive(), "a caller thread hangs"
    return reports + [helpers.wait_bounded(future, 120) for future in remote]


@pytest.fixture(scope="class")
def warmed_up(group: list[subprocess.Popen[bytes]]) -> list[subprocess.Popen[bytes]]:
    """One round of each load first, so the baseline is taken with the allocators, thread
    pools and generated code already warm."""
    assert not run_single_caller(None, LOAD_CALLS, 1.0)["wrong"]
    assert all(not report["num_wrong"] for report in run_four_callers(LOAD_CALLS // 4))
    gc.collect()
    return group


class TestLoad:
    @pytest.mark.timeout(120)
    @pytest.mark.parametrize("interface", [None, helpers.AddInterface], ids=["plain", "interface"])
    def test_ten_thousand_calls_in_flight_from_one_caller(
        self, warmed_up: list[subprocess.Popen[bytes]], interface: Any
    ) -> None:
        before = quiet_snapshot(warmed_up)
        run = run_single_caller(interface, LOAD_CALLS, 3.0)
        assert run["wrong"] == [], f"{len(run['wrong'])} results mixed up: {run['wrong'][:20]}"
        self._check_memory(warmed_up, before, f"{LOAD_CALLS} calls, one caller", run)

    @pytest.mark.timeout(120)
    def test_four_concurrent_callers_on_two_owners(
        self, warmed_up: list[subprocess.Popen[bytes]]
    ) -> None:
        before = quiet_snapshot(warmed_up)
        reports = run_four_callers(LOAD_CALLS // 4)
        for report in reports:
            assert report["num_errors"] == 0, report
            assert report["num_wrong"] == 0, report
            assert report["checked"] == LOAD_CALLS // 4, report
        run = {"elapsed_s": max(report["elapsed_s"] for report in reports)}
        self._check_memory(warmed_up, before, "4 callers x 2,500 calls on 2 owners", run)

    @staticmethod
    def _check_memory(
        workers: list[subprocess.Popen[bytes]],
        before: dict[str, Any],
        what: str,
        run: dict[str, Any],
    ) -> None:
        waited = settle_everywhere(before)
        after = memory_snapshot(workers)
        print(f"\n[part 4] {what}: {run}; settled in {waited}")
        for key in before:
            print(f"  {key}: before {before[key]} after {after[key]}")
        for worker in ["worker0", *LOAD_OWNERS]:
            assert after[worker] == before[worker], f"{worker}: {before[worker]} -> {after[worker]}"
        for owner in LOAD_OWNERS:
            growth = after[f"{owner} rss_mib"] - before[f"{owner} rss_mib"]
            assert growth < RSS_GROWTH_LIMIT_MIB, f"{owner} RSS grew {growth:.1f} MiB"


# --- Part 2: owner failure -----------------------------------------------------------------

FAILURE_TIMEOUT = 10.0  # long: pending calls must fail because the owner died, not by timeout


@pytest.fixture(scope="class")
def owner_killed(group: list[subprocess.Popen[bytes]]) -> dict[str, Any]:
    """Modules on worker5 (blocking) and worker2 (healthy); many calls pending on worker5,
    which is then killed with SIGKILL. Returns what each pending call did."""
    healthy = RemoteModule("worker2/cpu", helpers.AddConstant, args=(7.0,), timeout=5.0)
    healthy_scripted = RemoteModule(
        "worker2/cpu",
        helpers.AddConstant,
        args=(8.0,),
        module_interface_cls=helpers.AddInterface,
        timeout=30.0,
    )
    victim = RemoteModule(f"{VICTIM}/cpu", helpers.Blocking, timeout=FAILURE_TIMEOUT)
    victim_scripted = RemoteModule(
        f"{VICTIM}/cpu",
        helpers.BlockingScripted,
        module_interface_cls=helpers.HoldInterface,
        timeout=30.0,
    )
    victim_scripted = RemoteModule.init_from_module_rref(
        f"{VICTIM}/cpu",
        victim_scripted.get_module_rref(),
        helpers.HoldInterface,
        timeout=FAILURE_TIMEOUT,
    )
    assert torch.equal(healthy(x_of(1)), x_of(8))
    # The gate of a fresh worker is closed: every call below blocks on the victim.
    pending = [(f"forward {i}", victim.forward_async(x_of(i))) for i in range(24)]
    pending += [
        (f"interface forward {i}", victim_scripted.forward_async(x_of(i))) for i in range(4)
    ]
    pending += [(f"nap {i}", victim_scripted.nap_async()) for i in range(4)]
    sync_outcome: dict[str, Any] = {}

    def sync_caller() -> None:
        try:
            victim.remote_state_dict()
        except Exception as error:
            sync_outcome["error"] = error
            sync_outcome["at"] = time.monotonic()

    thread = threading.Thread(target=sync_caller, daemon=True)
    thread.start()
    time.sleep(0.5)  # let the calls reach the victim (8 run, the rest queue)
    still_pending = sum(not future.done() for _, future in pending)

    victim_process = group[int(VICTIM.removeprefix("worker")) - 1]
    killed_at = time.monotonic()
    os.kill(victim_process.pid, signal.SIGKILL)
    victim_process.wait(timeout=10)

    outcomes: list[tuple[str, Any, float]] = []
    for name, future in pending:
        try:
            value: Any = helpers.wait_bounded(future, FAILURE_TIMEOUT + SLACK)
        except Exception as error:
            value = error
        outcomes.append((name, value, time.monotonic() - killed_at))
    thread.join(timeout=FAILURE_TIMEOUT + SLACK)
    return {
        "healthy": healthy,
        "healthy_scripted": healthy_scripted,
        "victim": victim,
        "victim_scripted": victim_scripted,
        "still_pending": still_pending,
        "outcomes": outcomes,
        "sync_alive": thread.is_alive(),
        "sync_outcome": sync_outcome,
        "killed_at": killed_at,
    }


class TestOwnerFailure:
    @pytest.mark.timeout(90)
    def test_every_pending_call_errors_within_the_timeout(
        self, owner_killed: dict[str, Any]
    ) -> None:
        outcomes = owner_killed["outcomes"]
        assert owner_killed["still_pending"] == len(outcomes), "calls finished before the kill"
        for name, value, after_s in outcomes:
            assert isinstance(value, RuntimeError), f"{name}: {value!r}"
            assert after_s < FAILURE_TIMEOUT + SLACK, f"{name} errored {after_s:.2f} s after"
            assert_names(value, VICTIM, name.split()[-2])
        assert not owner_killed["sync_alive"], "a synchronous call still waits on a dead owner"
        sync_error = owner_killed["sync_outcome"]["error"]
        assert isinstance(sync_error, RuntimeError)
        assert_names(sync_error, VICTIM, "remote_state_dict")
        latest = max(after_s for _, _, after_s in outcomes)
        print(f"\n[part 2] {len(outcomes)} pending calls errored at most {latest:.3f} s after kill")

    @pytest.mark.timeout(60)
    def test_a_module_on_a_healthy_owner_keeps_working(self, owner_killed: dict[str, Any]) -> None:
        healthy, scripted = owner_killed["healthy"], owner_killed["healthy_scripted"]
        for i in range(20):
            assert torch.equal(healthy(x_of(i)), x_of(i + 7))
            assert torch.equal(scripted.forward(x_of(i)), x_of(i + 8))
        futures = [healthy.forward_async(x_of(i)) for i in range(200)]
        for i, future in enumerate(futures):
            assert torch.equal(helpers.wait_bounded(future, 10), x_of(i + 7))
        fresh = RemoteModule(
            "worker2/cpu",
            helpers.AddConstant,
            args=(9.0,),
            module_interface_cls=helpers.AddInterface,
            timeout=30.0,
        )
        assert torch.equal(fresh(x_of(1)), x_of(10))
        # worker2 itself, as a caller, is unaffected too.
        report = on("worker2", helpers.hammer, 0, ["worker2"], 200, 10.0)
        assert (report["num_wrong"], report["num_errors"], report["checked"]) == (0, 0, 200)

    @pytest.mark.timeout(60)
    def test_a_dead_owner_reads_as_gone(self, owner_killed: dict[str, Any]) -> None:
        # Not TensorPipe's "eof (this error originated at ...)": the method, the owner, and
        # that the owner is gone, for calls pending at the kill and calls made after it.
        gone = f"on worker '{VICTIM}' failed: worker '{VICTIM}' is gone: its connection closed"
        errors = [value for _, value, _ in owner_killed["outcomes"]]
        errors.append(owner_killed["sync_outcome"]["error"])
        for make_call in (
            lambda: owner_killed["victim"](x_of(1)),
            lambda: owner_killed["victim"].remote_parameters(),
            lambda: owner_killed["victim_scripted"].nap(),
            lambda: helpers.wait_bounded(owner_killed["victim"].forward_async(x_of(1)), 10),
        ):
            with bounded(FAILURE_TIMEOUT + SLACK), pytest.raises(RuntimeError) as raised:
                make_call()
            errors.append(raised.value)
        for error in errors:
            assert gone in str(error), str(error)
            assert "originated at" not in str(error), str(error)

    @pytest.mark.timeout(60)
    def test_calls_to_the_dead_owner_fail_fast(self, owner_killed: dict[str, Any]) -> None:
        with bounded(FAILURE_TIMEOUT + SLACK), pytest.raises(RuntimeError) as raised:
            owner_killed["victim"](x_of(1))
        assert_names(raised.value, VICTIM, "forward")
        with bounded(FAILURE_TIMEOUT + SLACK), pytest.raises(RuntimeError) as raised:
            owner_killed["victim_scripted"].nap()
        assert_names(raised.value, VICTIM, "nap")

    @pytest.mark.timeout(60)
    @pytest.mark.parametrize("interface", [None, helpers.AddInterface], ids=["plain", "interface"])
    def test_construction_on_the_dead_owner_fails_fast(
        self, owner_killed: dict[str, Any], interface: Any
    ) -> None:
        # Where it fails (construction, or the first call) depends on when the agent notices;
        # either way the error names the owner. Repeated attempts take both paths.
        for _ in range(20):
            with bounded(FAILURE_TIMEOUT + SLACK):
                try:
                    rm = RemoteModule(
                        f"{VICTIM}/cpu",
                        helpers.AddConstant,
                        module_interface_cls=interface,
                        timeout=FAILURE_TIMEOUT,
                    )
                except RuntimeError as error:
                    assert_names(error, VICTIM, "AddConstant")
                    continue
                # Construction never blocks on the owner (without an interface as upstream, with
                # one too): a failure surfaces on the first call, the creation's named as such.
                with pytest.raises(RuntimeError) as raised:
                    rm(x_of(1))
                named = "forward" if interface is None else "AddConstant"
                assert_names(raised.value, VICTIM, named)
