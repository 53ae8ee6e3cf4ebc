"""The future an ``_async`` call returns: a ``torch.futures.Future`` that asyncio can await.

``rm.forward_async(x)`` returns an :class:`AwaitableFuture`: a subclass of
``torch.futures.Future``, so everything torch does with a future works on it unchanged
(``wait``, ``then``, ``add_done_callback``, ``torch.futures.wait_all`` and ``collect_all``,
passing it to TorchScript), and a coroutine may also ``await`` it. Awaiting never blocks the
loop's thread: the future's done-callback (which runs on whichever thread completes it, often
an RPC thread) wakes the loop with ``call_soon_threadsafe``, and the coroutine then takes the
value, or the exception, with ``wait()`` on a future already done: the same value, or the
same exception, as the sync call.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Generator
from typing import Any, TypeVar

from torch.futures import Future

__all__ = ["AwaitableFuture"]

T = TypeVar("T")


class AwaitableFuture(Future[T]):
    """A ``torch.futures.Future`` that a coroutine can ``await`` inside a running asyncio
    loop, without blocking it::

        async def score(rm, x):
            return await rm.forward_async(x)  # the result, or the sync call's exception

    Everything else is ``torch.futures.Future``'s (``then`` returns torch's own future).
    """

    def __await__(self) -> Generator[Any, None, T]:
        if not self.done():
            loop = asyncio.get_running_loop()
            woken: asyncio.Future[None] = loop.create_future()
            self.add_done_callback(functools.partial(_wake, loop, woken))
            yield from woken
        return self.wait()


def _wake(loop: asyncio.AbstractEventLoop, woken: asyncio.Future[None], _: Future[Any]) -> None:
    """The done-callback, on the thread that completed the future: wake the loop's waiter."""
    try:
        loop.call_soon_threadsafe(_set_woken, woken)
    except RuntimeError:  # the loop is closed: nothing awaits the future any more
        pass


def _set_woken(woken: asyncio.Future[None]) -> None:
    if not woken.done():  # cancelled with the task that awaited it
        woken.set_result(None)
