"""Surviving an owner's death (API.md, "Surviving an owner's death"): standbys, checkpoints and
one promotion, each rule on real processes, owners killed with SIGKILL.

One group (this process is ``worker0``):

- ``worker1``, ``worker2``: standbys that stay alive;
- ``worker3``: an owner that stays alive (the rules that must *not* promote, planned moves)
  and a holder of copies sent over RPC;
- ``worker4``: killed with the modules of all three families on it;
- ``worker5``: killed while two holders (here and ``worker3``) hold one RemoteModule;
- ``worker6`` with ``worker7``, its only standby: both killed (no standby answers);
- ``worker8``: killed in the middle of a checkpoint.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import Any

import pytest
import torch
import torch.distributed.rpc as rpc

import remote_module
from remote_module import OwnerFailover, RemoteModule
from remote_module.runtime.caller import failover
from tests.support import failover_helpers as helpers
from tests.support.reliability_helpers import debug_counts, wait_bounded

WORLD_SIZE = 9
TIMEOUT = 5.0  # the RemoteModule timeout: every wait below is bounded by it
SLACK = 10.0  # scheduling on 2 shared cores, on top of the bound under test
# Not graceful: members die on purpose.
pytestmark = pytest.mark.rpc_group(WORLD_SIZE, graceful=False)


def ones(value: float = 1.0) -> torch.Tensor:
    return torch.full((2,), float(value))


def kill(group: list[subprocess.Popen[bytes]], *workers: str) -> None:
    for worker in workers:
        process = group[int(worker.removeprefix("worker")) - 1]
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def held(worker: str, rm: RemoteModule) -> tuple[int, int] | None:
    return rpc.rpc_sync(worker, helpers.held, (rm._rm_record.failover.identity,), timeout=30)


def poll_held(worker: str, rm: RemoteModule, wanted: tuple[int, int], limit_s: float) -> Any:
    """Polls ``worker`` until it holds ``wanted`` of ``rm`` (or ``limit_s`` passes)."""
    deadline = time.monotonic() + limit_s
    while True:
        now = held(worker, rm)
        if (now is not None and now >= wanted) or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


FAMILIES = {
    "no interface": {},
    "torch.jit.interface": {"module_interface_cls": helpers.AccumulatorInterface},
    "typing.Protocol": {"module_interface_cls": helpers.AccumulatorProtocol},
}


# --- What must not promote, and bad options ---------------------------------------------------


@pytest.mark.parametrize(
    ("standby", "named"),
    [
        (["worker1/"], "worker1/"),
        (["worker3/cpu"], "worker3/cpu"),  # the owner itself
        (["rank:3/cpu"], "rank:3/cpu"),  # the owner itself, by rank
        (["nobody/cpu"], "nobody/cpu"),
        (["worker1/cpu", "worker1"], "worker1"),
        ("worker1/cpu", "worker1/cpu"),  # a string, not a list
        ([1], "1"),
        (["worker1/gpu:x"], "worker1/gpu:x"),
    ],
)
def test_a_bad_standby_raises_value_error_naming_it(standby: Any, named: str) -> None:
    with pytest.raises(ValueError, match="standby") as raised:
        RemoteModule("worker3/cpu", helpers.Accumulator, standby=standby)
    assert named in str(raised.value)


@pytest.mark.parametrize("every", [0, -1, 1.5, True, "5"])
def test_a_bad_checkpoint_every_raises_value_error(every: Any) -> None:
    with pytest.raises(ValueError, match="checkpoint_every"):
        RemoteModule(
            "worker3/cpu", helpers.Accumulator, standby=["worker1/cpu"], checkpoint_every=every
        )


def test_checkpoint_every_without_standby_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"checkpoint_every.*standby"):
        RemoteModule("worker3/cpu", helpers.Accumulator, checkpoint_every=5)


def test_without_standby_checkpoint_and_fail_over_say_so() -> None:
    rm = RemoteModule("worker3/cpu", helpers.Accumulator)
    via_rref = RemoteModule.init_from_module_rref("worker3/cpu", rm.get_module_rref())
    for holder in (rm, via_rref):
        for operation in (holder.checkpoint, holder.fail_over):
            with pytest.raises(RuntimeError, match="no standby") as raised:
                operation()
            name = operation.__name__
            assert str(raised.value).startswith(f"RemoteModule.{name} on worker 'worker3' failed:")


@pytest.mark.parametrize("family", FAMILIES)
def test_a_module_that_raises_does_not_promote(family: str) -> None:
    rm = RemoteModule(
        "worker3/cpu", helpers.Raising, standby=["worker1/cpu"], timeout=TIMEOUT, **FAMILIES[family]
    )
    # A scripted module's raise ValueError(...) comes back as a ValueError too (API.md).
    with pytest.raises(ValueError, match="Raising refuses") as raised:
        rm(ones())
    assert not isinstance(raised.value, OwnerFailover)
    with pytest.raises(ValueError, match="Raising refuses") as raised:
        rm.forward_async(ones()).wait()
    assert not isinstance(raised.value, OwnerFailover)
    assert rm.on == "worker3"
    assert rm.module_rref.owner_name() == "worker3"


def test_a_timeout_does_not_promote() -> None:
    short = 0.5
    rm = RemoteModule("worker3/cpu", helpers.Sleeping, standby=["worker1/cpu"], timeout=short)
    assert torch.equal(rm(torch.zeros(2)), torch.zeros(2))
    started = time.monotonic()
    with pytest.raises(RuntimeError) as raised:
        rm(torch.full((2,), 4 * short))
    assert time.monotonic() - started < short + SLACK
    assert not isinstance(raised.value, OwnerFailover)
    assert "timeout" in str(raised.value).lower() or "timed out" in str(raised.value).lower()
    assert rm.on == "worker3"
    assert torch.equal(rm(torch.zeros(2)), torch.zeros(2))  # the same owner serves it still


# --- Checkpoints and planned moves (owner alive) ----------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_checkpoint_reaches_every_standby_in_order_of_versions(family: str) -> None:
    rm = RemoteModule(
        "worker3/cpu",
        helpers.Accumulator,
        standby=["worker1/cpu", "worker2/cpu"],
        timeout=TIMEOUT,
        **FAMILIES[family],
    )
    assert held("worker1", rm) is None
    rm(ones())
    assert rm.checkpoint() == 1
    assert held("worker1", rm) == held("worker2", rm) == (0, 1)
    rm(ones())
    assert rm.checkpoint() == 2
    assert held("worker1", rm) == held("worker2", rm) == (0, 2)


def _counted_on_worker3(every: int, family: str) -> RemoteModule:
    """An Accumulator on worker3 of ``family``, worker1 its standby, checkpointed every
    ``every`` calls."""
    return RemoteModule(
        "worker3/cpu",
        helpers.Accumulator,
        standby=["worker1/cpu"],
        checkpoint_every=every,
        timeout=TIMEOUT,
        **FAMILIES[family],
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_checkpoint_every_n_calls_from_any_holder(family: str) -> None:
    # Scripted modules are counted where their keyed calls look them up on the owner, the
    # others by the Python function that runs the call there: both, from every holder.
    every = 3
    rm = _counted_on_worker3(every, family)
    for _ in range(every - 1):
        rm(ones())
    assert held("worker1", rm) is None
    rm.forward_async(ones()).wait()  # the N-th call (an _async one counts too)
    assert poll_held("worker1", rm, (0, 1), TIMEOUT + SLACK) == (0, 1)
    # Calls through a copy on another worker count as well.
    for _ in range(every):
        assert (
            rpc.rpc_sync("worker3", helpers.forward_through, (rm, ones()), timeout=30) is not None
        )
    assert poll_held("worker1", rm, (0, 2), TIMEOUT + SLACK) == (0, 2)
    for _ in range(2 * every):
        rm(ones())
    assert poll_held("worker1", rm, (0, 4), TIMEOUT + SLACK) == (0, 4)
    # The newest checkpoint holds (at least) the calls before the last one counted.
    assert rm.fail_over() == "worker1"
    assert rm(torch.zeros(2))[0] >= 4 * every - 1


def test_checkpoint_every_counts_the_calls_torchscript_sends() -> None:
    # A scripted holder counts its calls where it sends them (in Python, beside TorchScript)
    # and tells the owner every N-th; the owner counts them with every other holder's.
    every = 3
    rm = _counted_on_worker3(every, "torch.jit.interface")
    scripted = torch.jit.script(rm)
    for _ in range(every - 1):
        scripted.forward(ones())
    assert held("worker1", rm) is None
    scripted.forward_async(ones()).wait()  # the N-th
    assert poll_held("worker1", rm, (0, 1), TIMEOUT + SLACK) == (0, 1)
    for _ in range(every):  # eager and scripted calls of one RemoteModule count together
        rm(ones())
    assert poll_held("worker1", rm, (0, 2), TIMEOUT + SLACK) == (0, 2)
    # A RemoteModule without checkpoint_every scripts to code that counts nothing.
    plain = torch.jit.script(
        RemoteModule("worker3/cpu", helpers.Accumulator, **FAMILIES["torch.jit.interface"])
    )
    assert "count_call" not in plain.forward_async.code
    assert "count_call" in scripted.forward_async.code
    assert rm.fail_over() == "worker1"
    assert rm(torch.zeros(2))[0] >= 2 * every - 1


@pytest.mark.parametrize("family", FAMILIES)
def test_fail_over_moves_the_module_with_its_checkpoint_and_the_standbys_follow(
    family: str,
) -> None:
    rm = RemoteModule(
        "worker3/cpu",
        helpers.Accumulator,
        standby=["worker1/cpu", "worker2/cpu"],
        timeout=TIMEOUT,
        **FAMILIES[family],
    )
    assert torch.equal(rm(ones(2)), ones(2))
    assert rm.checkpoint() == 1
    assert rm.fail_over() == "worker1"
    assert (rm.on, rm.module_rref.owner_name(), rm.standby) == (
        "worker1",
        "worker1",
        ["worker2/cpu"],
    )
    assert torch.equal(rm(ones(1)), ones(3))  # the checkpoint's state, then this call
    # The new owner checkpoints to the standby after it, numbering on.
    assert rm.checkpoint() == 2
    assert held("worker2", rm) == (1, 2)
    assert rm.fail_over() == "worker2"
    assert rm.standby is None
    assert torch.equal(rm(ones(1)), ones(4))
    params = rm.remote_parameters()
    assert [p.owner_name() for p in params] == ["worker2"]
    with pytest.raises(RuntimeError, match="no standby"):
        rm.fail_over()


def test_a_checkpoint_that_did_not_arrive_whole_is_never_used() -> None:
    # The standby side of the protocol, driven from here as an owner would: a newer version
    # replaces the held one, an older or repeated one does not, and a promoted standby takes
    # no checkpoints (it owns the module).
    rm = RemoteModule("worker3/cpu", helpers.Accumulator, standby=["worker1/cpu"], timeout=TIMEOUT)
    identity = rm._rm_record.failover.identity
    from remote_module.runtime import owner

    def send(seat: int, version: int, value: float) -> bool:
        state = {"total": ones(value), "scale": torch.ones(2)}
        message = (identity, seat, version, state, True)
        return bool(rpc.rpc_sync("worker1", owner.keep_checkpoint, message, timeout=30))

    assert send(0, 2, 20.0)
    assert send(0, 1, 10.0)  # older: it holds a newer one
    assert held("worker1", rm) == (0, 2)
    assert rm.fail_over() == "worker1"
    assert torch.equal(rm(torch.zeros(2)), ones(20.0))
    assert not send(0, 3, 30.0)  # worker1 owns it now
    assert torch.equal(rm(torch.zeros(2)), ones(20.0))


# --- An owner killed with the modules of every family on it -----------------------------------


@pytest.fixture(scope="module")
def killed_with_families(group: list[subprocess.Popen[bytes]]) -> dict[str, Any]:
    victim = "worker4"
    rms = {
        family: RemoteModule(
            f"{victim}/cpu",
            helpers.Accumulator,
            standby=["worker1/cpu", "worker2/cpu"],
            timeout=TIMEOUT,
            **options,
        )
        for family, options in FAMILIES.items()
    }
    fresh = RemoteModule(
        f"{victim}/cpu",
        helpers.Accumulator,
        args=(2, 5.0),
        standby=["worker2/cpu"],
        timeout=TIMEOUT,
    )
    asynchronous = RemoteModule(
        f"{victim}/cpu", helpers.Accumulator, standby=["worker1/cpu"], timeout=TIMEOUT
    )
    # One of each family whose only standby takes it over: none remains after that.
    last_standby = {
        family: RemoteModule(
            f"{victim}/cpu",
            helpers.Accumulator,
            standby=["worker2/cpu"],
            checkpoint_every=2,
            timeout=TIMEOUT,
            **options,
        )
        for family, options in FAMILIES.items()
    }
    # One each for the operations besides the generated methods that meet the death first.
    others = {
        name: RemoteModule(
            f"{victim}/cpu", helpers.Accumulator, standby=["worker2/cpu"], timeout=TIMEOUT
        )
        for name in ("train", "remote_state_dict", "load_remote_state_dict", "remote_parameters")
    }
    for rm in rms.values():
        rm(ones(3))
        assert rm.checkpoint() == 1
        rm(ones(4))  # after the checkpoint: lost with the owner
    for rm in last_standby.values():
        rm(ones(1))
        assert rm.checkpoint() == 1
    assert torch.equal(fresh(ones(1)), ones(6))
    asynchronous(ones(7))
    asynchronous.checkpoint()
    scripted = torch.jit.script(rms["torch.jit.interface"])
    assert torch.equal(scripted.forward(torch.zeros(2)), ones(7))
    kill(group, victim)
    outcomes: dict[str, Any] = {}
    for family, rm in rms.items():
        started = time.monotonic()
        try:
            rm(ones(100))
        except Exception as error:
            outcomes[family] = (error, time.monotonic() - started)
    try:
        fresh(ones(100))
    except Exception as error:
        outcomes["fresh"] = (error, 0.0)
    try:
        wait_bounded(asynchronous.forward_async(ones(100)), TIMEOUT + SLACK)
    except Exception as error:
        outcomes["async"] = (error, 0.0)
    operations = {
        "train": lambda rm: rm.train(False),
        "remote_state_dict": lambda rm: rm.remote_state_dict(),
        "load_remote_state_dict": lambda rm: rm.load_remote_state_dict(
            {"total": ones(9), "scale": torch.ones(2)}
        ),
        "remote_parameters": lambda rm: rm.remote_parameters(),
    }
    for name, rm in others.items():
        try:
            operations[name](rm)
        except Exception as error:
            outcomes[name] = (error, 0.0)
    return {
        "others": others,
        "last_standby": last_standby,
        "rms": rms,
        "fresh": fresh,
        "async": asynchronous,
        "scripted": scripted,
        "outcomes": outcomes,
    }


def test_what_the_holders_held_of_the_dead_owner_is_never_released(
    killed_with_families: dict[str, Any],
) -> None:
    # Releasing an RRef sends its owner a delete that torch retries for seconds, logging each
    # try to a dead owner on stderr: each RemoteModule moved off worker4 (nine here) keeps its
    # module's RRef, and a scripted family's its keeper, while RPC runs.
    kept = [rref.owner_name() for rref in failover._dead_owners_rrefs.values()]
    assert kept.count("worker4") >= 9 + 1, kept
    deadline = time.monotonic() + TIMEOUT  # the deletions to live owners, answered
    while debug_counts()["num_pending_futures"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert debug_counts()["num_pending_futures"] == 0, "a deletion is retried (a dead owner)"


@pytest.mark.parametrize("family", FAMILIES)
def test_after_a_kill_calls_reach_the_standby_with_the_checkpointed_state(
    killed_with_families: dict[str, Any], family: str
) -> None:
    error, took_s = killed_with_families["outcomes"][family]
    assert isinstance(error, OwnerFailover), repr(error)
    assert isinstance(error, RuntimeError)
    assert (error.failed_owner, error.new_owner, error.checkpoint_version) == (
        "worker4",
        "worker1",
        1,
    )
    for name in ("forward", "worker4", "worker1", "1"):
        assert name in str(error)
    assert took_s < TIMEOUT + SLACK
    rm = killed_with_families["rms"][family]
    assert (rm.on, rm.module_rref.owner_name(), rm.standby) == (
        "worker1",
        "worker1",
        ["worker2/cpu"],
    )
    # The checkpoint held 3; the call after it (4) and the failed one (100) are gone.
    assert torch.equal(rm(torch.zeros(2)), ones(3))
    assert torch.equal(rm.forward_async(ones(1)).wait(), ones(4))
    assert [p.owner_name() for p in rm.remote_parameters()] == ["worker1"]
    assert rm.remote_state_dict()["total"].tolist() == [4.0, 4.0]


def test_with_no_checkpoint_yet_the_standby_builds_a_fresh_module(
    killed_with_families: dict[str, Any],
) -> None:
    error, _ = killed_with_families["outcomes"]["fresh"]
    assert isinstance(error, OwnerFailover), repr(error)
    assert (error.new_owner, error.checkpoint_version) == ("worker2", None)
    assert torch.equal(killed_with_families["fresh"](torch.zeros(2)), ones(5))  # as built


def test_an_async_call_that_meets_the_death_raises_owner_failover(
    killed_with_families: dict[str, Any],
) -> None:
    error, _ = killed_with_families["outcomes"]["async"]
    assert isinstance(error, OwnerFailover), repr(error)
    assert (error.failed_owner, error.new_owner, error.checkpoint_version) == (
        "worker4",
        "worker1",
        1,
    )
    assert "forward" in str(error)
    assert torch.equal(killed_with_families["async"](torch.zeros(2)), ones(7))


@pytest.mark.parametrize(
    "operation", ["train", "remote_state_dict", "load_remote_state_dict", "remote_parameters"]
)
def test_every_operation_that_meets_the_death_promotes(
    killed_with_families: dict[str, Any], operation: str
) -> None:
    error, _ = killed_with_families["outcomes"][operation]
    assert isinstance(error, OwnerFailover), repr(error)
    assert (error.failed_owner, error.new_owner, error.checkpoint_version) == (
        "worker4",
        "worker2",
        None,
    )
    assert operation in str(error)
    rm = killed_with_families["others"][operation]
    assert rm.on == "worker2"
    assert torch.equal(rm(torch.zeros(2)), torch.zeros(2))  # a fresh module: no checkpoint


@pytest.mark.parametrize("family", FAMILIES)
def test_once_no_standby_remains_checkpoint_raises_and_none_is_cut(
    killed_with_families: dict[str, Any], family: str
) -> None:
    rm = killed_with_families["last_standby"][family]
    with pytest.raises(OwnerFailover) as raised:
        rm(ones(1))
    assert (raised.value.new_owner, raised.value.checkpoint_version) == ("worker2", 1)
    assert rm.standby is None
    with pytest.raises(RuntimeError) as refused:
        rm.checkpoint()  # before: version 2, which no standby received
    assert not isinstance(refused.value, OwnerFailover)
    assert str(refused.value) == (
        "RemoteModule.checkpoint on worker 'worker2' failed: no standby remains (each was "
        "promoted or is gone), so no worker could hold the checkpoint; calls go on as "
        "without standby"
    )
    # checkpoint_every=2 cuts none any more, and calls go on as without standby.
    identity = rm._rm_record.failover.identity
    before = rpc.rpc_sync("worker2", helpers.cut, (identity,), timeout=30)
    for step in range(1, 6):
        assert torch.equal(rm(ones(1)), ones(1 + step))
    assert rm.forward_async(ones(1)).wait()[0] == 7.0
    assert rpc.rpc_sync("worker2", helpers.cut, (identity,), timeout=30) == before == 1


def test_torchscript_keeps_the_owner_it_was_scripted_with_until_scripted_again(
    killed_with_families: dict[str, Any],
) -> None:
    old = killed_with_families["scripted"]
    with pytest.raises(RuntimeError):
        old.forward(torch.zeros(2))
    rm = killed_with_families["rms"]["torch.jit.interface"]
    again = torch.jit.script(rm)
    assert torch.equal(again.forward(torch.zeros(2)), rm(torch.zeros(2)))


# --- Two holders on two workers meet one death ------------------------------------------------


def test_two_holders_meet_the_kill_and_end_on_one_module(
    group: list[subprocess.Popen[bytes]],
) -> None:
    rm = RemoteModule(
        "worker5/cpu",
        helpers.Accumulator,
        module_interface_cls=helpers.AccumulatorProtocol,
        standby=["worker1/cpu", "worker2/cpu"],
        timeout=TIMEOUT,
    )
    rm(ones(2))
    assert rm.checkpoint() == 1
    assert rpc.rpc_sync("worker3", helpers.keep, ("two holders", rm), timeout=30) == "worker5"
    kill(group, "worker5")
    # Both holders meet the dead owner at about the same time.
    there = rpc.rpc_async("worker3", helpers.call_kept, ("two holders", torch.zeros(2)), timeout=60)
    with pytest.raises(OwnerFailover) as raised:
        rm(torch.zeros(2))
    kind, (outcome, copy_owner) = wait_bounded(there, 2 * TIMEOUT + SLACK)
    assert kind == "failover", outcome
    assert outcome == ("worker5", "worker1", 1)
    assert (raised.value.new_owner, copy_owner, rm.on) == ("worker1", "worker1", "worker1")
    # One module: a write through one holder is read through the other.
    assert torch.equal(rm(ones(10)), ones(12))
    kind, (value, _) = rpc.rpc_sync(
        "worker3", helpers.call_kept, ("two holders", ones(1)), timeout=30
    )
    assert kind == "ok" and torch.equal(value, ones(13))
    assert torch.equal(rm(torch.zeros(2)), ones(13))
    # A copy sent after the failover goes to the new owner directly.
    assert rpc.rpc_sync("worker3", helpers.keep, ("after", rm), timeout=30) == "worker1"
    rpc.rpc_sync("worker3", helpers.drop_kept, timeout=30)


# --- No standby alive -------------------------------------------------------------------------


def test_with_no_standby_alive_a_named_runtime_error_comes_within_the_timeouts(
    group: list[subprocess.Popen[bytes]],
) -> None:
    short = 2.0
    rm = RemoteModule("worker6/cpu", helpers.Accumulator, standby=["worker7/cpu"], timeout=short)
    bare = RemoteModule("worker6/cpu", helpers.Accumulator, timeout=short)  # no standby at all
    rm(ones())
    bare(ones())
    rm.checkpoint()
    kill(group, "worker6", "worker7")
    started = time.monotonic()
    with pytest.raises(RuntimeError) as raised:
        rm(ones())
    took_s = time.monotonic() - started
    assert not isinstance(raised.value, OwnerFailover)
    for name in ("forward", "worker6", "worker7", "no standby"):
        assert name in str(raised.value), str(raised.value)
    assert took_s < short * 1 + SLACK  # at most the timeout per standby
    assert rm.on == "worker6"
    with pytest.raises(RuntimeError, match="worker 'worker6' is gone"):
        bare(ones())
    # Neither will release its RRef on the dead owner (torch would retry, and log, the delete).
    kept = failover._dead_owners_rrefs
    assert id(rm.module_rref) in kept and id(bare.module_rref) in kept


# --- A checkpoint cut off by the owner's death ------------------------------------------------


def test_a_checkpoint_cut_off_by_the_owners_death_is_not_used(
    group: list[subprocess.Popen[bytes]],
) -> None:
    rm = RemoteModule("worker8/cpu", helpers.Stalling, standby=["worker1/cpu"], timeout=TIMEOUT)
    rm(ones(2))
    assert rm.checkpoint() == 1
    rm(ones(3))
    rm(ones(-1))  # arms the owner: its next state_dict() blocks
    outcome: dict[str, Any] = {}

    def checkpoint() -> None:
        try:
            outcome["version"] = rm.checkpoint()
        except Exception as error:
            outcome["error"] = error

    thread = threading.Thread(target=checkpoint, daemon=True)
    thread.start()
    assert rpc.rpc_sync("worker8", helpers.stalled, (TIMEOUT + SLACK,), timeout=60)
    kill(group, "worker8")
    thread.join(TIMEOUT + SLACK)
    assert not thread.is_alive()
    error = outcome.get("error")
    assert isinstance(error, OwnerFailover), outcome
    assert (error.new_owner, error.checkpoint_version) == ("worker1", 1)
    assert "checkpoint" in str(error)
    assert torch.equal(rm(torch.zeros(2)), ones(2))  # version 1's state, not 5


def test_owner_failover_is_exported() -> None:
    assert remote_module.OwnerFailover is OwnerFailover
    assert issubclass(OwnerFailover, RuntimeError)


def test_a_typed_class_takes_the_same_options() -> None:
    from remote_module.examples.embedding import RemoteEmbeddingBag
    from remote_module.examples.generated import RemoteEmbeddingBagInterface

    typed = RemoteEmbeddingBagInterface(
        "worker3/cpu",
        RemoteEmbeddingBag,
        args=(10, 4),
        standby=["worker1/cpu"],
        checkpoint_every=2,
        timeout=TIMEOUT,
    )
    indices, offsets = torch.tensor([1, 2, 3]), torch.tensor([0])
    before = typed(indices, offsets)
    typed.weight_norm()
    assert poll_held("worker1", typed, (0, 1), TIMEOUT + SLACK) == (0, 1)  # after 2 calls
    assert typed.fail_over() == "worker1"
    assert torch.equal(typed(indices, offsets), before)  # the checkpointed table
    with pytest.raises(ValueError, match="standby"):
        RemoteEmbeddingBagInterface("worker3/cpu", RemoteEmbeddingBag, args=(10, 4), standby=[""])
