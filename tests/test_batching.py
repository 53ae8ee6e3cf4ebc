"""``batching=remote_module.Batching(...)`` (API.md, "Many callers: batching"): concurrent calls
of a RemoteModule's batched methods, from any holder in any process, are merged on the owner;
each gets exactly what it would have got alone (results and gradients), calls that cannot be
merged go into other batches, a failing call fails alone, and calls of different distributed
autograd contexts never share a batch. Real processes: worker0 and worker2 call, worker1 owns.

How a test gets a batch it can predict: a first call whose row holds ``HOLD`` finds the module
idle, runs at once and waits on the owner for the gate; the calls sent meanwhile queue behind
it (the test polls the owner until they have); the gate opens; they run as one batch."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import Tensor

import remote_module
from remote_module import Batching, RemoteModule
from tests.support import batching_helpers as helpers
from tests.support.batching_helpers import Rows, RowsInterface, RowsProtocol, Unsplittable

pytestmark = pytest.mark.rpc_group(3)

WAIT_S = 60.0
_tags = itertools.count()


def _rows(interface: Any = None, **options: Any) -> tuple[RemoteModule, str]:
    tag = f"rows{next(_tags)}"
    batching = options.pop("batching", Batching(max_batch_size=64))
    rm = RemoteModule(
        "worker1/cpu",
        Rows,
        args=(tag,),
        module_interface_cls=interface,
        batching=batching,
        **options,
    )
    return rm, tag


def _queued_behind_a_held_call(
    rm: Any, tag: str, calls: list[Callable[[], Any]], queued: int | None = None
) -> tuple[Any, list[Any]]:
    """Run ``calls`` while a held call runs: they queue (``queued`` calls on the owner: one
    each unless given), then run as a batch. The held call's result and theirs, in order."""
    rpc.rpc_sync("worker1", helpers.close_gate)
    first = rm.forward_async(helpers.held())
    results: list[Any] = [None] * len(calls)
    threads = [
        threading.Thread(target=lambda i=i, call=call: results.__setitem__(i, _outcome(call)))
        for i, call in enumerate(calls)
    ]
    try:
        _wait_owner_runs_held(tag)
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + WAIT_S
        while rpc.rpc_sync("worker1", helpers.queued) < (queued or len(calls)):
            assert time.monotonic() < deadline, "the calls never queued on the owner"
            time.sleep(0.01)
    finally:
        rpc.rpc_sync("worker1", helpers.open_gate)
    for thread in threads:
        thread.join(WAIT_S)
    return first.wait(), results


def _wait_owner_runs_held(tag: str) -> None:
    """Until the owner is inside the held run (it leads: later calls queue behind it)."""
    deadline = time.monotonic() + WAIT_S
    while not rpc.rpc_sync("worker1", helpers.runs, (tag,)):
        assert time.monotonic() < deadline, "the held call never ran"
        time.sleep(0.01)


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as error:
        return error


# --- Construction -----------------------------------------------------------------------------


def test_bad_options_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="max_batch_size must be an int >= 1"):
        Batching(max_batch_size=0)
    with pytest.raises(ValueError, match="max_wait_ms must be a number >= 0"):
        Batching(max_batch_size=4, max_wait_ms=-1.0)
    with pytest.raises(ValueError, match="names method 'score', which RowsProtocol does not"):
        RemoteModule(
            "worker1/cpu",
            Rows,
            args=("x",),
            module_interface_cls=RowsProtocol,
            batching=Batching(4, methods=("score",)),
        )
    with pytest.raises(ValueError, match="names method 'score', which Rows does not have"):
        RemoteModule("worker1/cpu", Rows, args=("x",), batching=Batching(4, methods=("score",)))
    with pytest.raises(ValueError, match=r"must be a remote_module\.Batching"):
        RemoteModule("worker1/cpu", Rows, args=("x",), batching=4)
    assert remote_module.Batching is Batching


# --- Merged calls -----------------------------------------------------------------------------


@pytest.mark.parametrize("interface", [None, RowsProtocol, RowsInterface])
def test_concurrent_calls_run_once_and_each_gets_its_rows(interface: Any) -> None:
    rm, tag = _rows(interface)
    inputs = [torch.full((rows, 4), float(i + 1)) for i, rows in enumerate((1, 2, 3, 1))]
    held, results = _queued_behind_a_held_call(
        rm, tag, [lambda x=x: rm(x, scale=2.0) for x in inputs]
    )
    assert rpc.rpc_sync("worker1", helpers.runs, (tag,)) == [1, 7]  # one batch
    alone = RemoteModule("worker1/cpu", Rows, args=("alone",))  # the same seed, unbatched
    for x, got in zip(inputs, results, strict=True):
        torch.testing.assert_close(got, alone(x, scale=2.0))
    torch.testing.assert_close(held, alone(helpers.held()))


def test_calls_from_other_processes_and_async_and_every_method_merge() -> None:
    rm, tag = _rows(RowsProtocol, batching=Batching(16, methods=("forward", "split")))
    x = torch.full((2, 4), 0.5)
    other_process = lambda: rpc.rpc_sync("worker2", _call_from_elsewhere, (rm, x))  # noqa: E731
    _, results = _queued_behind_a_held_call(
        rm, tag, [other_process, lambda: rm.forward_async(x).wait(), lambda: rm(x)]
    )
    assert rpc.rpc_sync("worker1", helpers.runs, (tag,)) == [1, 6]
    for got in results:
        torch.testing.assert_close(got, results[-1])
    low, high = rm.split(x)  # a second batched method, alone (nothing else running)
    assert (low.shape, high.shape) == ((2, 1), (2, 2))


def _call_from_elsewhere(rm: Any, x: Tensor) -> Tensor:
    result: Tensor = rm(x)
    return result


@pytest.mark.parametrize("scriptable", [True, False])
def test_namedtuple_results_of_every_interface_kind(scriptable: bool) -> None:
    """A TorchScript interface's module answers a batched call from Python with the
    NamedTuples TorchScript makes (their class does not pickle): the caller gets the
    interface's own, sync, async and merged, as unbatched."""
    from tests.scorer.generated.scorer_interface import RemoteScorerInterface
    from tests.scorer.generated.scorer_protocol import RemoteScorerProtocol
    from tests.scorer.model import Scored, Scorer

    typed = RemoteScorerInterface if scriptable else RemoteScorerProtocol
    rm = typed("worker1/cpu", Scorer, batching=Batching(8, methods=("forward", "pair")))
    alone = typed("worker1/cpu", Scorer)
    alone.load_remote_state_dict(rm.remote_state_dict())
    x = torch.randn(3, 4)
    got = rm(x, scale=2.0)
    assert type(got) is Scored
    torch.testing.assert_close(got.score, alone(x, scale=2.0).score)
    awaited = rm.forward_async(x).wait()
    assert type(awaited) is Scored and awaited.label == alone(x).label
    pair = rm.pair(x)
    assert type(pair[0]) is Scored
    torch.testing.assert_close(pair[1], alone.pair(x)[1])
    rows = [torch.randn(1, 4) for _ in range(4)]
    results: list[Any] = [None] * len(rows)
    threads = [
        threading.Thread(target=lambda i=i: results.__setitem__(i, _outcome(lambda: rm(rows[i]))))
        for i in range(len(rows))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    for row, result in zip(rows, results, strict=True):
        assert type(result) is Scored, result
        torch.testing.assert_close(result.score, alone(row).score)


def test_calls_that_cannot_be_merged_go_into_other_batches() -> None:
    rm, tag = _rows(RowsProtocol)
    calls = [
        lambda: rm(torch.ones(1, 4), scale=1.0),
        lambda: rm(torch.ones(1, 4), scale=3.0),  # another non-tensor value
        lambda: rm(torch.ones(1, 4, dtype=torch.float64).float(), scale=1.0),
        lambda: rm(torch.ones(2, 4), scale=1.0),
    ]
    _, results = _queued_behind_a_held_call(rm, tag, calls)
    assert not any(isinstance(result, Exception) for result in results), results
    assert sorted(rpc.rpc_sync("worker1", helpers.runs, (tag,))[1:]) == [1, 4]
    torch.testing.assert_close(results[1], results[0] * 3.0)


def test_a_batch_never_passes_max_batch_size_rows() -> None:
    rm, tag = _rows(None, batching=Batching(max_batch_size=3))
    _, results = _queued_behind_a_held_call(rm, tag, [lambda: rm(torch.ones(1, 4))] * 5)
    assert all(isinstance(result, Tensor) for result in results)
    assert max(rpc.rpc_sync("worker1", helpers.runs, (tag,))) <= 3


def test_a_call_that_finds_the_module_idle_runs_at_once_whatever_max_wait_ms() -> None:
    rm, tag = _rows(None, batching=Batching(max_batch_size=8, max_wait_ms=1000 * WAIT_S))
    started = time.monotonic()
    for value in (1.0, 2.0):  # each alone: the module idle when it arrives
        rm(torch.full((1, 4), value))
    assert time.monotonic() - started < WAIT_S / 2, "a lone call waited out max_wait_ms"
    assert rpc.rpc_sync("worker1", helpers.runs, (tag,)) == [1, 1]


def test_a_waiting_batch_runs_once_full_not_at_its_deadline() -> None:
    """A batch formed while another ran waits up to ``max_wait_ms`` after its first call for
    more; the arrival that fills it ends the wait (its leader is woken by it)."""
    wait_ms = 1000 * WAIT_S
    rm, tag = _rows(None, batching=Batching(max_batch_size=2, max_wait_ms=wait_ms))
    rpc.rpc_sync("worker1", helpers.close_gate)
    started = time.monotonic()
    held = rm.forward_async(helpers.held())
    try:
        _wait_owner_runs_held(tag)
        first = rm.forward_async(torch.ones(1, 4))
        deadline = started + WAIT_S
        while rpc.rpc_sync("worker1", helpers.queued) < 1:  # behind the held run
            assert time.monotonic() < deadline, "the first call never queued on the owner"
            time.sleep(0.01)
    finally:
        rpc.rpc_sync("worker1", helpers.open_gate)
    held.wait()  # the held run is done: the first call leads, and waits for more
    second = rm(torch.full((1, 4), 2.0))
    alone = RemoteModule("worker1/cpu", Rows, args=("alone",))  # the same seed, unbatched
    torch.testing.assert_close(first.wait(), alone(torch.ones(1, 4)))
    torch.testing.assert_close(second, alone(torch.full((1, 4), 2.0)))
    assert time.monotonic() - started < WAIT_S / 2, "the batch waited out max_wait_ms"
    assert rpc.rpc_sync("worker1", helpers.runs, (tag,)) == [1, 2]


def test_a_failing_call_fails_alone() -> None:
    rm, tag = _rows(RowsProtocol)
    good = torch.full((1, 4), 2.0)
    _, results = _queued_behind_a_held_call(
        rm, tag, [lambda: rm(good), lambda: rm(helpers.bad()), lambda: rm(good)]
    )
    assert isinstance(results[1], ValueError), results
    assert "RemoteModule.forward on worker 'worker1' failed: ValueError: a bad row" in str(
        results[1]
    )
    torch.testing.assert_close(results[0], results[2])
    # The merged run raised; then each ran alone.
    assert rpc.rpc_sync("worker1", helpers.runs, (tag,))[1:] == [3, 1, 1, 1]


def test_a_result_that_cannot_be_split_by_rows_is_named() -> None:
    tag = f"unsplittable{next(_tags)}"
    rm = RemoteModule("worker1/cpu", Unsplittable, args=(tag,), batching=Batching(8))
    _, results = _queued_behind_a_held_call(rm, tag, [lambda: rm(torch.ones(1, 4))] * 2)
    assert all(isinstance(result, ValueError) for result in results), results
    assert str(results[0]).startswith(
        "RemoteModule.forward on worker 'worker1' failed: ValueError: batching forward: its "
        "result holds a tensor of shape (1, 2), whose dimension 0 is not the batch's 2 rows"
    )
    assert rm(torch.ones(2, 4)).shape == (1, 2)  # from then on, unbatched


# --- Distributed autograd ---------------------------------------------------------------------


def test_gradients_equal_unbatched_and_contexts_never_share_a_batch() -> None:
    rm, tag = _rows(RowsProtocol)
    alone = RemoteModule("worker1/cpu", Rows, args=("alone-grad",))
    inputs = [torch.full((1, 4), float(i)).requires_grad_() for i in (1, 2, 3)]
    grads: dict[int, Any] = {}

    def in_context(index: int, x: Tensor) -> Callable[[], Any]:
        def run() -> Any:
            with dist_autograd.context() as context:
                dist_autograd.backward(context, [rm(x).pow(2).sum()])
                grads[index] = dist_autograd.get_gradients(context)[x]
            return True

        return run

    _queued_behind_a_held_call(rm, tag, [in_context(i, x) for i, x in enumerate(inputs)])
    # Three contexts: three batches of one row each after the held call.
    assert rpc.rpc_sync("worker1", helpers.runs, (tag,))[1:] == [1, 1, 1]
    for index, x in enumerate(inputs):
        with dist_autograd.context() as context:
            dist_autograd.backward(context, [alone(x).pow(2).sum()])
            torch.testing.assert_close(grads[index], dist_autograd.get_gradients(context)[x])


def test_calls_of_one_context_merge_and_their_gradients_equal_unbatched() -> None:
    rm, tag = _rows(RowsProtocol)
    alone = RemoteModule("worker1/cpu", Rows, args=("alone-one-context",))
    inputs = [torch.full((2, 4), float(i)).requires_grad_() for i in (1, 2, 3)]
    expected = []
    for x in inputs:
        with dist_autograd.context() as context:
            dist_autograd.backward(context, [alone(x).pow(2).sum()])
            expected.append(dist_autograd.get_gradients(context)[x])
    got: list[Any] = []

    def one_context() -> bool:
        with dist_autograd.context() as context:
            futures = [rm.forward_async(x) for x in inputs]  # one thread: one context
            loss = sum(future.wait().pow(2).sum() for future in futures)
            dist_autograd.backward(context, [loss])
            grads = dist_autograd.get_gradients(context)
            got.extend(grads[x] for x in inputs)
        return True

    _, results = _queued_behind_a_held_call(rm, tag, [one_context], queued=len(inputs))
    assert results == [True]
    assert rpc.rpc_sync("worker1", helpers.runs, (tag,))[1:] == [6]  # merged: one run
    for want, have in zip(expected, got, strict=True):
        torch.testing.assert_close(have, want)


def test_wire_dtype_counting_and_compiled_calls_ride_along() -> None:
    rm, tag = _rows(
        RowsProtocol,
        wire_dtype=torch.bfloat16,
        standby=["worker2/cpu"],
        checkpoint_every=5,
        fake=helpers.rows_fake,  # (its runs are recorded: tracing must not run it)
    )
    x = torch.full((1, 4), 0.25)
    compiled = torch.compile(lambda value: rm(value), fullgraph=True)
    _, results = _queued_behind_a_held_call(
        rm,
        tag,
        [lambda: rm(x), lambda: rm(x), lambda: rm.forward_async(x).wait(), lambda: compiled(x)],
    )
    assert not any(isinstance(result, Exception) for result in results), results
    for got in results:
        torch.testing.assert_close(got, results[0], rtol=1e-2, atol=1e-2)
    # Five calls (the held one and four more, some merged) count as five: one checkpoint was
    # cut by itself, so the next is the second.
    assert rm.checkpoint() == 2
