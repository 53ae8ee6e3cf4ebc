"""Reliability under injected faults (issue 5, part 3): RemoteModule's calls on torch's own
fault-injecting agent (the ``FAULTY_TENSORPIPE`` backend of ``torch.distributed.rpc._testing``).

It fails RRef-protocol messages (which the protocol retries), holds calls back before sending
them, and drops messages nothing retries. Checked: retried RRef messages still give usable
modules that can be sent to a third worker, delays below the timeout give correct results,
delays beyond it raise ``RuntimeError`` naming the owner and the method, and a dropped message
is an error, never a wrong result.

Every member of the group runs the faulty agent (it cannot join a plain TensorPipe group),
each with faults of its own (``FAULTS``), so this module runs in a pytest process of its own.
"""

from __future__ import annotations

import contextlib
import gc
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.distributed.rpc as rpc
from torch import Tensor

from remote_module import RemoteModule
from remote_module._process import end_processes, free_port
from tests.support import reliability_helpers as helpers
from tests.support.faulty_worker import RREF_MESSAGES, backend, faulty_options
from tests.support.reliability_helpers import OWNER_KEYS
from tests.support.rpc_group import start_workers
from tests.support.runtime_helpers import call_remote_module

pytestmark = pytest.mark.own_process  # one RPC group per process (see tests/conftest.py)

OWNER = "worker1"
SLACK = 1.5  # scheduling on 2 shared cores


def x_of(value: float, width: int = 4) -> Tensor:
    return torch.full((1, width), float(value))


def on(worker: str, fn: Callable[..., Any], *args: Any, timeout: float = 60.0) -> Any:
    return rpc.rpc_sync(worker, fn, args, timeout=timeout)


def assert_names(text: str, *names: str) -> None:
    for name in names:
        assert name in text, f"{name!r} not in the error: {text[:500]}"


def owner_counts() -> dict[str, int]:
    """The owner's RRef counters, after a ``gc.collect()`` on every worker (a RemoteModule
    holds its bound generated methods, so only the cycle collector frees it and its RRef)."""
    gc.collect()
    for rank in range(2, len(FAULTS)):
        on(f"worker{rank}", helpers.debug_counts)
    info = on(OWNER, helpers.debug_counts)
    return {key: info[key] for key in OWNER_KEYS}


RETRIED = {"messages_to_fail": list(RREF_MESSAGES), "num_fail_sends": 2}
DELAY_S = 1.0
# worker0-2: RRef-protocol messages fail twice each (the protocol retries them).
# worker3: also holds every Python call (PYTHON_CALL) DELAY_S before sending it.
# worker4: also holds every TorchScript call (SCRIPT_CALL), and drops every rpc.remote
#          (PYTHON_REMOTE_CALL, which nothing retries).
FAULTS: list[dict[str, Any]] = [
    RETRIED,
    RETRIED,
    RETRIED,
    {**RETRIED, "messages_to_delay": {"PYTHON_CALL": DELAY_S}},
    {
        "messages_to_fail": [*RREF_MESSAGES, "PYTHON_REMOTE_CALL"],
        "num_fail_sends": 2,
        "messages_to_delay": {"SCRIPT_CALL": DELAY_S},
    },
]


@contextlib.contextmanager
def faulty_group(faults: list[dict[str, Any]]) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Like ``rpc_group`` on the ``FAULTY_TENSORPIPE`` backend; rank ``r`` runs with
    ``faults[r]``. Shut down without gathering: a construction that timed out leaves an RRef on
    the owner that a graceful shutdown would wait minutes for."""
    port, world_size = free_port(), len(faults)
    workers = start_workers(
        world_size,
        port,
        worker="tests.support.faulty_worker",
        extra_args=lambda rank: [json.dumps(faults[rank])],
    )
    try:
        rpc.init_rpc(
            "worker0",
            rank=0,
            world_size=world_size,
            backend=backend(),
            rpc_backend_options=faulty_options(port, **faults[0]),
        )
    except BaseException:
        end_processes(workers, grace_s=0)
        raise
    helpers.FAULTS.update(faults[0])
    try:
        yield workers
    finally:
        helpers.FAULTS.clear()
        try:
            rpc.shutdown(graceful=False)
        finally:
            end_processes(workers, grace_s=2.0)


@pytest.fixture(scope="module")
def faults_group() -> Iterator[None]:
    with faulty_group(FAULTS):
        yield


def outcome_error(outcome: dict[str, Any]) -> str:
    assert "results" not in outcome, f"returned a result instead of raising: {outcome}"
    assert outcome.get("error_type") == "RuntimeError", outcome
    return str(outcome["error"])


@pytest.mark.usefixtures("faults_group")
class TestInjectedFaults:
    # No bound of its own: its setup starts the module's group (five processes that import
    # torch), which took over 30 s at a load average of 22 on 2 cores; the suite's default
    # bound covers it.
    def test_every_worker_runs_the_fault_injecting_agent(self) -> None:
        for rank, faults in enumerate(FAULTS):
            description = on(f"worker{rank}", helpers.agent_description)
            assert description == {"agent": "FaultyTensorPipeAgent", "faults": faults}

    @pytest.mark.timeout(90)
    def test_retried_rref_messages_still_give_usable_modules(self) -> None:
        baseline = owner_counts()
        plain = RemoteModule(f"{OWNER}/cpu", helpers.AddConstant, args=(5.0,), timeout=20.0)
        scripted = RemoteModule(
            f"{OWNER}/cpu",
            helpers.AddConstant,
            args=(6.0,),
            module_interface_cls=helpers.AddInterface,
            timeout=20.0,
        )
        for i in range(10):
            assert torch.equal(plain(x_of(i)), x_of(i + 5))
            assert torch.equal(scripted.forward(x_of(i)), x_of(i + 6))
        assert scripted.constant() == 6.0
        # Sent to a third worker: it forks the RRef (RREF_FORK_REQUEST to the owner,
        # RREF_CHILD_ACCEPT back to us), both failing twice before they get through.
        start = time.monotonic()
        assert torch.equal(on("worker2", call_remote_module, plain, x_of(3)), x_of(8))
        fork_s = time.monotonic() - start
        assert fork_s > 0.5, f"the fork took {fork_s:.2f} s: were its messages failed at all?"
        assert torch.equal(on("worker2", call_remote_module, scripted, x_of(4)), x_of(10))
        futures = [plain.forward_async(x_of(i)) for i in range(50)]
        for i, future in enumerate(futures):
            assert torch.equal(helpers.wait_bounded(future, 20), x_of(i + 5))
        # Deleting them sends RREF_USER_DELETE (failing twice too): the owner gets back to
        # where it was.
        del plain, scripted, futures
        start = time.monotonic()
        while (after := owner_counts()) != baseline and time.monotonic() - start < 30:
            time.sleep(0.2)
        waited = time.monotonic() - start
        assert after == baseline, f"before {baseline}, after {after}"
        print(
            f"\n[part 3] fork with retries took {fork_s:.2f} s; deletes settled in {waited:.1f} s"
        )

    @pytest.mark.timeout(60)
    @pytest.mark.parametrize(
        ("caller", "interface"),
        [("worker3", None), ("worker3", helpers.AddInterface), ("worker4", helpers.AddInterface)],
        ids=["python-call-delayed", "python-call-delayed-interface", "script-call-delayed"],
    )
    def test_delays_below_the_timeout_give_correct_results(
        self, caller: str, interface: Any
    ) -> None:
        xs = [x_of(i, 4) for i in range(3)]
        outcome = on(
            caller,
            helpers.attempt,
            f"{OWNER}/cpu",
            helpers.AddConstant,
            (4.0,),
            interface,
            DELAY_S * 4,
            xs,
        )
        assert "error" not in outcome, outcome
        assert len(outcome["results"]) == len(xs)
        for x, result in zip(xs, outcome["results"], strict=True):
            assert torch.equal(result, x + 4)

    @pytest.mark.timeout(60)
    @pytest.mark.parametrize(
        ("caller", "interface", "method", "names"),
        [
            ("worker3", None, "forward", ("forward",)),
            ("worker3", None, "remote_state_dict", ("remote_state_dict",)),
            ("worker4", helpers.AddInterface, "forward", ("forward",)),
            ("worker4", helpers.AddInterface, "constant", ("constant",)),
            ("worker3", helpers.AddInterface, "forward", ("AddConstant",)),  # construction
        ],
        ids=[
            "python-call-delayed-forward",
            "python-call-delayed-state-dict",
            "script-call-delayed-forward",
            "script-call-delayed-method",
            "python-call-delayed-construction",
        ],
    )
    def test_delays_beyond_the_timeout_raise_instead_of_returning(
        self, caller: str, interface: Any, method: str, names: tuple[str, ...]
    ) -> None:
        timeout = DELAY_S * 0.4
        outcome = on(
            caller,
            helpers.attempt,
            f"{OWNER}/cpu",
            helpers.AddConstant,
            (4.0,),
            interface,
            timeout,
            [x_of(1, 4)],
            method,
        )
        assert_names(outcome_error(outcome), OWNER, *names)
        # the sending thread sleeps through the delay; the error is there when it wakes
        assert outcome["elapsed_s"] < DELAY_S + timeout + SLACK, outcome
        print(f"\n[part 3] error after {outcome['elapsed_s']:.3f} s: {outcome['error'][:120]}")

    @pytest.mark.timeout(60)
    def test_init_from_module_rref_past_the_timeout_names_the_owner(self) -> None:
        built = RemoteModule(
            f"{OWNER}/cpu",
            helpers.AddConstant,
            args=(4.0,),
            module_interface_cls=helpers.AddInterface,
            timeout=30.0,
        )
        outcome = on(
            "worker3",
            helpers.attempt_from_rref,
            f"{OWNER}/cpu",
            built.get_module_rref(),
            helpers.AddInterface,
            DELAY_S * 0.4,
            x_of(1, 4),
        )
        assert_names(outcome_error(outcome), OWNER)

    @pytest.mark.timeout(60)
    def test_a_dropped_construction_is_an_error_not_a_result(self) -> None:
        # worker4's rpc.remote never reaches the owner; the first call must fail, naming
        # the owner and the method, within the timeout.
        outcome = on(
            "worker4",
            helpers.attempt,
            f"{OWNER}/cpu",
            helpers.AddConstant,
            (4.0,),
            None,
            2.0,
            [x_of(1, 4)],
            "forward",
            0.5,
        )
        assert_names(outcome_error(outcome), OWNER, "forward")
        assert outcome["elapsed_s"] < 2.0 + SLACK
