"""Replies that carry or create RRefs (a construction's, ``remote_parameters``', a filing's
keeper): their requests go without an RPC deadline, and the RemoteModule's timeout is kept
here, on the caller. A reply that comes after the caller gave up is still unpickled and its
RRefs released, so the owner forgets them; an RPC deadline would drop the reply's RRef
bookkeeping and leave them on the owner for good (and stall ``rpc.shutdown``)."""

from __future__ import annotations

import queue
import time
from typing import Any

import torch.distributed.rpc as rpc
from torch.futures import Future

__all__ = ["wait_returning_rrefs", "watch"]


def watch(future: Future[Any]) -> queue.SimpleQueue[float]:
    """When ``future`` completes, the ``time.monotonic()`` it did: registered as soon as a
    request is sent, so that :func:`wait_returning_rrefs` judges the reply by when it came,
    not by when this side, busy meanwhile, looked."""
    arrivals: queue.SimpleQueue[float] = queue.SimpleQueue()
    future.add_done_callback(lambda _: arrivals.put(time.monotonic()))
    return arrivals


def wait_returning_rrefs(
    future: Future[Any],
    timeout: float,
    started: float,
    arrivals: queue.SimpleQueue[float] | None = None,
) -> Any:
    """Wait for a reply that carries RRefs, sent at ``started`` (``time.monotonic()``), and
    take it if it came within ``timeout`` (an unset timeout means the RPC agent's default);
    else raise, also where it has come by now (a reply the caller was too busy to look at in
    time is on time; one whose request took the timeout to send is not).

    The RPC itself is sent without a deadline: a reply that arrives after the caller gave up
    is still unpickled and its RRefs released, so the owner forgets them; an RPC timeout would
    drop the reply and leave its RRefs on the owner forever.
    """
    if timeout <= 0:
        timeout = rpc.get_rpc_timeout()
    if timeout > 0:
        if arrivals is None:
            arrivals = watch(future)
        deadline = started + timeout
        try:
            arrived = arrivals.get(timeout=max(deadline - time.monotonic(), 0.0))
        except queue.Empty:
            arrived = deadline + 1.0
        if arrived > deadline:
            raise RuntimeError(f"RPC ran for more than the RemoteModule timeout ({timeout} s)")
    return future.wait()
