"""One round of ``tests/test_fresh_processes.py``: this process is ``worker0`` (the caller) of a
new RPC group whose other members are fresh workers (``tests.support.fresh_worker``: plain
``init_rpc``, ``remote_module`` never imported). It keeps every RPC thread of the fresh workers
busy, sends them their first messages at once, checks each outcome, and exits 0 when all are as
the contract says (API.md, Runtime: "A process may first meet ``remote_module`` through
messages"), 1 otherwise, with one line per failure on stdout.

Run as ``python -m tests.support.fresh_caller SCENARIO`` where SCENARIO is

- ``owner``: a fresh owner (``worker1``) gets constructions of the three families and their
  first calls (sync and ``_async``), first calls through ``init_from_module_rref``, state-dict
  requests, parameters, ``train``, ``checkpoint`` to a fresh standby (``worker2``) and
  RemoteModules in RPC arguments;
- ``receiver``: fresh receivers (``worker2``, ``worker3``) get RemoteModules in RPC arguments
  and call them; the modules live here and on a fresh owner (``worker1``), which so gets its
  first calls from the receivers while this process constructs;
- ``failures``: a fresh owner (``worker1``, started with ``RM_FRESH_FAIL_IMPORT``) gets
  constructions whose module's constructor raises and whose module cannot be imported there
  (``tests.support.fresh_broken``), beside good ones.

The order of the first messages is set, not left to chance: each operation is a *first* step
that returns once its first message is sent (a construction, which never waits for the owner;
an ``_async`` call; an ``rpc_async``) and the *rest*, which may wait. The first steps run one
after another in the listed order (a relay of threads), so the messages a fresh owner unpickles
first, one per busy RPC thread, name different parts of ``remote_module`` (the owner's creation
functions, the first call's key table, the wire format); everything after that runs at once.

torch RPC cannot start a second group in one process, hence one process per round.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import torch
import torch.distributed.rpc as rpc
from torch import Tensor

from remote_module import RemoteModule
from remote_module._process import end_processes, exit_now, free_port
from tests.support import fresh_broken
from tests.support import fresh_modules as fm
from tests.support.fresh_worker import MARK
from tests.support.rpc_group import ROOT, checkout_env

RPC_TIMEOUT_S = 60.0  # the group's default RPC timeout: no failure may take this long
RM_TIMEOUT_S = 20.0  # every RemoteModule's timeout (and every plain RPC's here)
PROMPT_S = RM_TIMEOUT_S * 0.75  # each operation's bound from the start, short of a timeout
BUSY_S = 1.5  # how long each RPC thread of a fresh worker is kept busy first
THREADS = 16  # RPC threads of each fresh worker (torch's default): all busy when the burst comes
ROUND_LIMIT_S = 100.0  # the whole round, start-up and shutdown included (watchdog)
OWNER, STANDBY = "worker1", "worker2"
SCENARIOS = {"owner": 3, "receiver": 4, "failures": 2}  # world size of each

X = torch.arange(8, dtype=torch.float32).reshape(2, 4)
FAMILIES: dict[str, dict[str, Any]] = {
    "plain": {},
    "jit": {"module_interface_cls": fm.AffineInterface},
    "protocol": {"module_interface_cls": fm.AffineProtocol},
}


class Operation(NamedTuple):
    """``rest(first())``: ``first`` returns once the operation's first message is sent (the
    relay runs the ``first`` steps in order); ``None``: the whole operation is in ``rest``."""

    first: Callable[[], Any] | None
    rest: Callable[[Any], None]


def expected(seed: int) -> Tensor:
    """What ``Affine(seed)`` returns for ``X``, computed here."""
    with torch.no_grad():
        return fm.Affine(seed)(X)


def affine(owner: str, seed: int, family: str, **options: Any) -> RemoteModule:
    return RemoteModule(
        f"{owner}/cpu", fm.Affine, args=(seed,), timeout=RM_TIMEOUT_S, **FAMILIES[family], **options
    )


def check_result(result: Any, seed: int) -> None:
    torch.testing.assert_close(result, expected(seed), rtol=0, atol=0)


def check_call(rm: RemoteModule, seed: int, mode: str) -> None:
    check_result(rm(X) if mode == "sync" else rm.forward_async(X).wait(), seed)


def check_state_dict(rm: RemoteModule, seed: int) -> None:
    got = rm.remote_state_dict()
    want = fm.Affine(seed).state_dict()
    assert list(got) == list(want), (list(got), list(want))
    for name, value in want.items():
        torch.testing.assert_close(got[name], value, rtol=0, atol=0)


def check_parameters(rm: RemoteModule, seed: int) -> None:
    got = [rref.to_here(timeout=RM_TIMEOUT_S) for rref in rm.remote_parameters()]
    want = [parameter.detach() for parameter in fm.Affine(seed).parameters()]
    assert len(got) == len(want), (len(got), len(want))
    for value, parameter in zip(got, want, strict=True):
        torch.testing.assert_close(value, parameter, rtol=0, atol=0)


def check_load(rm: RemoteModule, seed: int) -> None:
    rm.load_remote_state_dict(fm.Affine(seed + 500).state_dict())
    check_call(rm, seed + 500, "sync")


def check_train(rm: RemoteModule, seed: int) -> None:
    assert rm.train(False) is rm
    assert not rm.training
    check_call(rm, seed, "async")


def check_checkpoint(rm: RemoteModule, seed: int) -> None:
    assert rm.checkpoint() == 1
    check_call(rm, seed, "sync")


def send_received(worker: str, rm: RemoteModule, mode: str) -> Any:
    """``rm`` sent to ``worker`` in RPC arguments, to be called there (``sync``: an RPC thread
    of ``worker`` waits for the reply; ``async``: ``@rpc.functions.async_execution``)."""
    function = fm.call_received if mode == "sync" else fm.call_received_async
    return rpc.rpc_async(worker, function, (rm, X), timeout=RM_TIMEOUT_S)


# --- Scenarios "owner" and "receiver" ------------------------------------------------------

Check = Callable[[RemoteModule, int], None]


def label(check: Check) -> str:
    return check.__name__.removeprefix("check_")


def called(mode: str) -> Check:
    def check(rm: RemoteModule, seed: int) -> None:
        check_call(rm, seed, mode)

    check.__name__ = f"first call {mode}"
    return check


class Burst:
    """A scenario's operations, added in relay order, and what they need prepared before the
    fresh workers are made busy: modules created on fresh workers by plain ``rpc.remote``
    (torch only: those stay fresh), whose RRefs the burst wraps with ``init_from_module_rref``,
    so that a first message can be a first call; and RemoteModules owned here, to send."""

    def __init__(self, rrefs: dict[str, int], here: list[str]) -> None:
        self.ops: dict[str, Operation] = {}
        self.seeds = iter(range(1, 1000))
        self.rrefs = {
            worker: [(seed, rpc.remote(worker, fm.Affine, (seed,))) for seed in self.take(count)]
            for worker, count in rrefs.items()
        }
        for made in self.rrefs.values():
            for _, rref in made:
                rref.to_here(timeout=RM_TIMEOUT_S)  # created before the burst
        self.here: dict[str, list[tuple[int, RemoteModule]]] = {family: [] for family in FAMILIES}
        for family in here:
            seed = next(self.seeds)
            self.here[family].append((seed, affine("worker0", seed, family)))

    def take(self, count: int) -> list[int]:
        return [next(self.seeds) for _ in range(count)]

    def add(self, name: str, operation: Operation) -> None:
        assert name not in self.ops, name
        self.ops[name] = operation

    def built(self, owner: str, family: str, check: Check, **options: Any) -> None:
        """Relayed: a construction (it never waits for the owner); then ``check``."""
        seed = next(self.seeds)
        self.add(
            f"{family} construction on {owner} #{seed}, then {label(check)}",
            Operation(lambda: affine(owner, seed, family, **options), lambda rm: check(rm, seed)),
        )

    def from_rref(self, owner: str, family: str, check: Check | None) -> None:
        """``init_from_module_rref`` over a prepared RRef. ``check`` None: relayed up to its
        first ``forward_async``; a Protocol interface: relayed up to its construction (which
        asks the owner to load); else not relayed."""
        seed, rref = self.rrefs[owner].pop()
        options = {} if family == "plain" else FAMILIES[family]
        name = f"init_from_module_rref ({family}) on {owner} #{seed}, then "

        def wrap() -> RemoteModule:
            return RemoteModule.init_from_module_rref(
                f"{owner}/cpu", rref, timeout=RM_TIMEOUT_S, **options
            )

        if check is None:
            self.add(
                name + "first call async",
                Operation(
                    lambda: wrap().forward_async(X),
                    lambda future: check_result(future.wait(), seed),
                ),
            )
        elif family == "protocol":
            self.add(name + label(check), Operation(wrap, lambda rm: check(rm, seed)))
        else:
            self.add(name + label(check), Operation(None, lambda _: check(wrap(), seed)))

    def received(self, receiver: str, family: str, mode: str) -> None:
        """Relayed: a RemoteModule prepared here, sent to ``receiver`` and called there."""
        seed, rm = self.here[family].pop()
        self.add(
            f"{receiver} receives a {family} RemoteModule of worker0 #{seed}, calls it {mode}",
            Operation(
                lambda: send_received(receiver, rm, mode),
                lambda future: check_result(future.wait(), seed),
            ),
        )

    def received_new(self, receiver: str, owner: str, family: str, mode: str) -> None:
        """Not relayed (sending one with an interface waits for its creation): a new
        RemoteModule on ``owner``, sent to ``receiver`` and called there."""
        seed = next(self.seeds)
        self.add(
            f"{receiver} receives a new {family} RemoteModule of {owner}, calls it {mode}",
            Operation(
                None,
                lambda _: check_result(
                    send_received(receiver, affine(owner, seed, family), mode).wait(), seed
                ),
            ),
        )


def owner_operations() -> dict[str, Operation]:
    """Every kind of first message a fresh owner may get. The relay sends first
    constructions (the owner's creation functions) and first calls through
    ``init_from_module_rref`` (the key table) in turn, one per busy RPC thread, then
    RemoteModules received in arguments, checkpoints and requests: the threads freed together
    unpickle names in different submodules at once."""
    burst = Burst(rrefs={OWNER: 13}, here=["plain", "plain"])
    for index in range(THREADS // 2):
        family = list(FAMILIES)[index % len(FAMILIES)]
        burst.built(OWNER, family, called(("sync", "async")[index % 2]))
        burst.from_rref(OWNER, "plain", None)
    burst.received(OWNER, "plain", "async")
    burst.received(OWNER, "plain", "sync")
    burst.from_rref(OWNER, "protocol", called("sync"))
    for family in FAMILIES:
        burst.built(OWNER, family, check_checkpoint, standby=[f"{STANDBY}/cpu"])
    burst.built(OWNER, "jit", check_state_dict)
    burst.built(OWNER, "protocol", check_load)
    # After the relay, at once: requests as the first operation of a RemoteModule.
    for check in (check_state_dict, check_parameters, check_load, check_train):
        burst.from_rref(OWNER, "plain", check)
    return burst.ops


def receiver_operations() -> dict[str, Operation]:
    """RemoteModules of each family sent to fresh receivers in RPC arguments and called
    there: owned here (relayed, in turn with first calls of modules the receiver owns itself)
    and by a fresh owner (constructed in the burst). At most two calls per receiver wait on
    one of its RPC threads (``sync``), fewer than it has (torch completes the reply on another
    one); the others reply with the call's future (``async``)."""
    receivers = ["worker2", "worker3"]
    sent = ["plain", "jit", "protocol", "plain"]
    burst = Burst(rrefs=dict.fromkeys(receivers, len(sent)), here=sent * len(receivers))
    for receiver in receivers:
        for family in sent:
            burst.received(receiver, family, "sync" if family == "protocol" else "async")
            burst.from_rref(receiver, "plain", None)
    for receiver in receivers:
        for index, family in enumerate(FAMILIES):
            burst.received_new(receiver, OWNER, family, "sync" if index == 1 else "async")
    return burst.ops


# --- Scenario "failures" --------------------------------------------------------------------

# The owner's failures, as (exception type, text) pairs one of which the caller's error must
# name. A failed import is an ImportError; CPython 3.11 gives each thread that waited on the same
# import while it failed a KeyError naming the module instead, and a thread whose unpickler
# took the module half-made while it failed an AttributeError naming it (seen once in 30 runs
# of the suite): the owner's failure too.
CONSTRUCTOR_RAISES = [("ValueError", "RaisingInit refuses to be built")]
IMPORT_FAILS = [
    ("ImportError", fresh_broken.IMPORT_ERROR),
    ("KeyError", fresh_broken.__name__),
    ("AttributeError", f"on <module '{fresh_broken.__name__}'"),
]


def expect_failure(rm: RemoteModule, mode: str, failures: list[tuple[str, str]]) -> None:
    """The first call of ``rm`` (``mode``) raises, and the error names the owner and the
    owner's own failure."""
    try:
        result = rm(X) if mode == "sync" else rm.forward_async(X).wait()
    except Exception as error:
        message = f"{type(error).__name__}: {error}"
        named = any(kind in message and text in message for kind, text in failures)
        assert named, f"not the owner's failure {failures[0]}: {message}"
        assert OWNER in message, f"the owner is not named: {message}"
        return
    raise AssertionError(f"no error; the call returned {result!r}")


def failing(module_cls: type[torch.nn.Module], family: str) -> RemoteModule:
    return RemoteModule(f"{OWNER}/cpu", module_cls, timeout=RM_TIMEOUT_S, **FAMILIES[family])


def failure_operations() -> dict[str, Operation]:
    """Constructions whose module's constructor raises on the fresh owner, or whose module's
    import fails there, and their first calls, beside good ones."""
    ops: dict[str, Operation] = {}
    seeds = iter(range(1, 100))
    cases = {
        "constructor raises": (fm.RaisingInit, CONSTRUCTOR_RAISES),
        "import fails on the owner": (fresh_broken.Unimportable, IMPORT_FAILS),
    }
    for family in FAMILIES:
        for case, (module_cls, failures) in cases.items():
            for mode in ("sync", "async"):
                ops[f"{family}: {case}, first call {mode}"] = Operation(
                    functools.partial(failing, module_cls, family),
                    functools.partial(expect_failure, mode=mode, failures=failures),
                )
        seed = next(seeds)
        ops[f"{family}: a good construction beside them"] = Operation(
            functools.partial(affine, OWNER, seed, family),
            functools.partial(check_call, seed=seed, mode="sync"),
        )
    return ops


OPERATIONS: dict[str, Callable[[], dict[str, Operation]]] = {
    "owner": owner_operations,
    "receiver": receiver_operations,
    "failures": failure_operations,
}


# --- The round ------------------------------------------------------------------------------


def start_workers(scenario: str, port: int, logs: Path) -> list[subprocess.Popen[bytes]]:
    world_size = SCENARIOS[scenario]
    workers = []
    for rank in range(1, world_size):
        env = checkout_env()
        env.pop(fresh_broken.FAIL_IMPORT_ENV, None)
        if scenario == "failures" and rank == 1:
            env[fresh_broken.FAIL_IMPORT_ENV] = "1"
        command = [sys.executable, "-m", "tests.support.fresh_worker"]
        command += [str(value) for value in (rank, world_size, port, THREADS, RPC_TIMEOUT_S)]
        with (
            open(logs / f"worker{rank}.out", "wb") as out,
            open(logs / f"worker{rank}.err", "wb") as err,
        ):
            workers.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=err))
    return workers


def warm_up() -> None:
    """Load here what the operations need (the generated modules of both interfaces), so that
    their first messages leave at once, not one by one behind this process's own renders."""
    for family in FAMILIES:
        check_call(affine("worker0", 0, family), 0, "sync")


def one_line(text: str, limit: int = 600) -> str:
    """``text`` on one line (torch's remote errors carry the owner's frames on many)."""
    flat = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    return flat if len(flat) <= limit else flat[:limit] + " ..."


def run_at_once(operations: dict[str, Operation], fresh: list[str]) -> tuple[list[str], float]:
    """Keep every RPC thread of each ``fresh`` worker busy, then start all ``operations``, each
    on a thread of its own: the relay of first steps, then everything else at once. What
    failed (one line each), and the longest an operation took."""
    outcomes: dict[str, tuple[float, str | None]] = {}
    barrier = threading.Barrier(len(operations) + 1)
    relayed = [name for name, operation in operations.items() if operation.first is not None]
    turns = {name: threading.Event() for name in relayed}  # set: this one's first step is done
    previous = dict(zip(relayed[1:], relayed, strict=False))
    relay_done = turns[relayed[-1]] if relayed else threading.Event()
    if not relayed:
        relay_done.set()

    def run(name: str, operation: Operation) -> None:
        barrier.wait(timeout=RM_TIMEOUT_S)
        started = time.monotonic()
        problem = None
        try:
            value = None
            if operation.first is not None:
                before = previous.get(name)
                try:
                    if before is not None:
                        assert turns[before].wait(RM_TIMEOUT_S), f"{before}: its turn never ended"
                    value = operation.first()
                finally:
                    turns[name].set()
            else:
                assert relay_done.wait(RM_TIMEOUT_S), "the relay never ended"
            operation.rest(value)
        except BaseException as error:  # reported below
            problem = one_line(f"{type(error).__name__}: {error}")
        outcomes[name] = (time.monotonic() - started, problem)

    threads = [
        threading.Thread(target=run, args=item, name=item[0], daemon=True)
        for item in operations.items()
    ]
    for thread in threads:
        thread.start()
    busy = [
        rpc.rpc_async(worker, fm.busy, (BUSY_S,), timeout=RM_TIMEOUT_S)
        for worker in fresh
        for _ in range(THREADS)
    ]
    barrier.wait(timeout=RM_TIMEOUT_S)
    started = time.monotonic()
    deadline = started + PROMPT_S + 1.0  # past PROMPT_S an operation has failed anyway
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    failures = []
    for name in operations:
        if name not in outcomes:
            failures.append(f"{name}: still waiting {time.monotonic() - started:.1f} s in")
            continue
        elapsed, problem = outcomes[name]
        if problem is not None:
            failures.append(f"{name}: failed after {elapsed:.1f} s: {problem}")
        elif elapsed > PROMPT_S:
            failures.append(f"{name}: took {elapsed:.1f} s (bound {PROMPT_S} s)")
    for future in busy:
        future.wait()  # bounded by its RPC timeout
    return failures, max((elapsed for elapsed, _ in outcomes.values()), default=0.0)


def worker_reports(logs: Path, world_size: int) -> tuple[list[str], str]:
    """Problems in the fresh workers' own reports (one loaded ``remote_module`` before
    ``init_rpc``, or loaded it from elsewhere than this checkout), and their stderr tails."""
    problems, tails = [], []
    for rank in range(1, world_size):
        lines = (logs / f"worker{rank}.out").read_text(errors="replace").splitlines()
        reports = [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith(MARK)]
        first = [report for report in reports if report["phase"] == "before init_rpc"]
        if not first:
            problems.append(f"worker{rank}: no report before init_rpc")
        elif first[0]["remote_module_loaded"]:
            problems.append(f"worker{rank}: not fresh: {first[0]['remote_module_loaded']}")
        for report in reports:
            where = report.get("remote_module_file")
            if where is not None and not where.startswith(str(ROOT)):
                problems.append(f"worker{rank}: remote_module loaded from {where}, not {ROOT}")
        err = (logs / f"worker{rank}.err").read_text(errors="replace")
        errors = [line for line in err.splitlines() if "Error" in line and "Warning" not in line]
        if errors:
            tails.append(f"--- worker{rank} stderr, errors ---\n" + "\n".join(errors[-12:]))
    return problems, "\n".join(tails)


def main(scenario: str) -> NoReturn:
    def too_long() -> None:
        print(f"{scenario}: the round ran past {ROUND_LIMIT_S} s", flush=True)
        exit_now(3)

    timer = threading.Timer(ROUND_LIMIT_S, too_long)
    timer.daemon = True
    timer.start()
    world_size = SCENARIOS[scenario]
    longest = 0.0
    with tempfile.TemporaryDirectory(prefix="rm-fresh-") as folder:
        logs = Path(folder)
        port = free_port()
        workers = start_workers(scenario, port, logs)
        failures: list[str] = []
        try:
            rpc.init_rpc(
                "worker0",
                rank=0,
                world_size=world_size,
                rpc_backend_options=rpc.TensorPipeRpcBackendOptions(
                    init_method=f"tcp://127.0.0.1:{port}",
                    num_worker_threads=32,
                    rpc_timeout=RPC_TIMEOUT_S,
                ),
            )
            warm_up()
            operations = OPERATIONS[scenario]()
            fresh = [f"worker{rank}" for rank in range(1, world_size)]
            for worker in fresh:  # still fresh after the preparation: nothing loaded it
                loaded = rpc.rpc_sync(worker, fm.remote_module_loaded, timeout=RM_TIMEOUT_S)
                assert not loaded, f"{worker} is not fresh before the burst: {loaded}"
            failures, longest = run_at_once(operations, fresh)
            rpc.shutdown(graceful=not failures, timeout=RM_TIMEOUT_S)
        except BaseException:
            failures.append("the round itself failed: " + traceback.format_exc())
        finally:
            end_processes(workers, grace_s=RM_TIMEOUT_S if not failures else 2.0)
        problems, tails = worker_reports(logs, world_size)
        failures += problems
    if failures:
        print(f"{scenario}: {len(failures)} failure(s)", *failures, tails, sep="\n", flush=True)
        exit_now(1)
    print(f"{scenario}: all first messages worked (longest {longest:.1f} s)", flush=True)
    exit_now(0)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        print(f"usage: python -m tests.support.fresh_caller {{{','.join(SCENARIOS)}}}")
        sys.exit(2)
    os.environ.pop(fresh_broken.FAIL_IMPORT_ENV, None)
    main(sys.argv[1])
