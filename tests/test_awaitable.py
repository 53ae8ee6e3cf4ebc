"""Awaitable futures (API.md, "Awaitable futures"): every future a RemoteModule's ``m_async``
returns is a ``torch.futures.Future`` that a coroutine can also await, inside a running asyncio
loop, without blocking it; awaiting a failed call raises what the sync call raises.

This process is ``worker0``; modules live on ``worker1``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import torch
import torch.distributed.rpc as rpc
from torch import Tensor, nn
from torch.futures import Future

from remote_module import RemoteModule
from remote_module.runtime.caller import awaitable
from remote_module.runtime.caller.awaitable import AwaitableFuture
from tests.scorer.generated import RemoteScorerInterface, RemoteScorerProtocol
from tests.scorer.model import Scored, Scorer, ScorerProtocol
from tests.support import awaitable_helpers as gate
from tests.support import runtime_helpers as helpers
from tests.support.interfaces import LinearInterface, ScaledLinear

pytestmark = pytest.mark.rpc_group(2)  # see tests/conftest.py

WAIT_S = 30.0  # every wait of these tests is bounded by this

KINDS = ["plain", "protocol", "scripted", "typed script", "typed protocol"]


def _build(kind: str) -> RemoteModule:
    """A RemoteModule of each kind: its ``forward`` takes a ``(3, 4)`` tensor."""
    if kind == "plain":
        return RemoteModule("worker1/cpu", nn.Linear, args=(4, 2))
    if kind == "protocol":
        return RemoteModule("worker1/cpu", Scorer, module_interface_cls=ScorerProtocol)
    if kind == "scripted":
        return RemoteModule("worker1/cpu", ScaledLinear, module_interface_cls=LinearInterface)
    if kind == "typed script":
        return RemoteScorerInterface("worker1/cpu", Scorer)
    return RemoteScorerProtocol("worker1/cpu", Scorer)


def _run(awaited: Callable[[], Awaitable[Any]]) -> Any:
    """``asyncio.run`` of ``await awaited()``, bounded by :data:`WAIT_S`."""

    async def bounded() -> Any:
        return await asyncio.wait_for(awaited(), WAIT_S)

    return asyncio.run(bounded())


def _assert_same(got: Any, want: Any) -> None:
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, Tensor):
        torch.testing.assert_close(got, want)
    else:
        torch.testing.assert_close(tuple(got), tuple(want))


@pytest.fixture
def x() -> Tensor:
    return torch.arange(12, dtype=torch.float32).reshape(3, 4)


@pytest.mark.parametrize("kind", KINDS)
def test_await_gives_what_the_sync_call_gives(kind: str, x: Tensor) -> None:
    rm = _build(kind)
    want = rm.forward(x)

    async def three_awaits() -> list[Any]:
        # The first call files the module, the later ones go by its key: every route awaits.
        return [await rm.forward_async(x) for _ in range(3)]

    for got in _run(three_awaits):
        _assert_same(got, want)


@pytest.mark.parametrize("kind", ["typed script", "typed protocol"])
def test_a_decoded_result_is_awaited_decoded(kind: str, x: Tensor) -> None:
    rm = _build(kind)
    (top,) = _run(lambda: rm.top_async(x, 1))
    assert type(top) is Scored
    assert top.label == rm.top(x, 1)[0].label


def test_a_wire_dtype_call_is_awaited_cast_back(x: Tensor) -> None:
    rm = RemoteModule(
        "worker1/cpu",
        ScaledLinear,
        module_interface_cls=LinearInterface,
        wire_dtype=torch.bfloat16,
    )
    got = _run(lambda: rm.forward_async(x))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, rm.forward(x))


def test_many_awaits_in_flight_while_the_loop_keeps_running() -> None:
    """Four calls wait at the owner's gate, all at once, while a ticker task on the loop keeps
    ticking; the gate opens only after the ticker advanced, so an ``await`` that blocked the
    loop's thread would leave the calls waiting (until the gate's timeout fails them)."""
    rpc.rpc_sync("worker1", gate.close_gate)
    rm = RemoteModule("worker1/cpu", gate.Gated)
    inputs = [torch.full((2,), float(i)) for i in range(4)]

    async def gathered() -> tuple[list[Tensor], int, int]:
        ticks = [0]

        async def ticker() -> None:
            while True:
                ticks[0] += 1
                await asyncio.sleep(0.001)

        ticking = asyncio.create_task(ticker())
        calls = asyncio.gather(*(rm.forward_async(one) for one in inputs))
        # Every call waits at the gate: all four are in flight at once.
        while await asyncio.to_thread(rpc.rpc_sync, "worker1", gate.waiting) < len(inputs):
            assert not calls.done(), calls
            await asyncio.sleep(0.01)
        before = ticks[0]
        while ticks[0] < before + 20:  # the loop runs while the calls wait
            await asyncio.sleep(0.001)
        assert not calls.done()
        await asyncio.to_thread(rpc.rpc_sync, "worker1", gate.open_gate)
        results = await calls
        ticking.cancel()
        return results, before, ticks[0]

    results, before, after = _run(gathered)
    assert after >= before + 20
    for one, result in zip(inputs, results, strict=True):
        torch.testing.assert_close(result, one + 1)


def test_a_cancelled_await_leaves_the_call_to_finish() -> None:
    rpc.rpc_sync("worker1", gate.close_gate)
    rm = RemoteModule("worker1/cpu", gate.Gated)
    future = rm.forward_async(torch.zeros(2))

    async def cancelled() -> bool:
        waiting = asyncio.ensure_future(future)
        await asyncio.sleep(0)
        waiting.cancel()
        try:
            await waiting
        except asyncio.CancelledError:
            return True
        return False

    assert _run(cancelled)
    assert not future.done()
    # The loop is closed now: the call completes all the same, and waking the loop is skipped.
    rpc.rpc_sync("worker1", gate.open_gate)
    torch.testing.assert_close(future.wait(), torch.ones(2))


def test_waking_a_closed_loop_is_skipped() -> None:
    loop = asyncio.new_event_loop()
    woken = loop.create_future()
    loop.close()
    done: Future[None] = Future()
    done.set_result(None)
    awaitable._wake(loop, woken, done)  # no error: nothing awaits any more
    assert not woken.done()


# --- Failures --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [*KINDS, "own error"])
def test_await_raises_what_the_sync_call_raises(kind: str) -> None:
    rm = RemoteModule("worker1/cpu", helpers.Refuses) if kind == "own error" else _build(kind)
    if kind != "own error":  # both failures on the same route: the one by the module's key
        rm.forward(torch.ones(3, 4))
        rm.forward(torch.ones(3, 4))
    bad = torch.ones(3, 5)  # every kind's module takes 4 features
    with pytest.raises(Exception) as sync:
        rm.forward(bad)

    async def awaited() -> None:
        await rm.forward_async(bad)

    with pytest.raises(Exception) as by_await:
        _run(awaited)
    assert type(by_await.value) is type(sync.value)
    assert str(by_await.value) == str(sync.value)
    assert str(sync.value).startswith("RemoteModule.forward on worker 'worker1' failed: ")
    kept = [getattr(raised, "remote_traceback", None) for raised in (sync.value, by_await.value)]
    assert kept[0] is None or ("Traceback" in kept[0] and "Traceback" in kept[1]), kept


def test_awaiting_a_call_that_already_failed_raises_the_same() -> None:
    rm = RemoteModule("worker1/cpu", helpers.Refuses)
    future = rm.forward_async(torch.ones(2))
    with pytest.raises(ValueError) as waited:
        future.wait()
    assert future.done()

    async def awaited() -> None:
        await future

    with pytest.raises(ValueError) as by_await:
        _run(awaited)
    assert str(by_await.value) == str(waited.value)


# --- Still a torch future --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["plain", "scripted"])
def test_the_future_is_a_torch_future(kind: str, x: Tensor) -> None:
    rm = _build(kind)
    want = rm.forward(x)
    future = rm.forward_async(x)
    assert isinstance(future, Future) and isinstance(future, AwaitableFuture)
    torch.testing.assert_close(future.wait(), want)
    torch.testing.assert_close(future.then(lambda done: done.wait() + 1).wait(), want + 1)
    seen: list[Tensor] = []
    called = threading.Event()

    def callback(done: Future[Tensor]) -> None:
        seen.append(done.wait())
        called.set()

    rm.forward_async(x).add_done_callback(callback)
    first, second = torch.futures.wait_all([rm.forward_async(x), rm.forward_async(x)])
    torch.testing.assert_close((first, second), (want, want))
    collected = torch.futures.collect_all([rm.forward_async(x)]).wait()
    torch.testing.assert_close(collected[0].wait(), want)
    assert called.wait(WAIT_S)
    torch.testing.assert_close(seen[0], want)
