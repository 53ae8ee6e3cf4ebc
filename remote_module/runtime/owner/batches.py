"""The owner's batches: concurrent calls of a batched method merged into one run (API.md,
"Many callers: batching"; the option and the merge are ``remote_module.runtime.batching``).

Every batched call runs :func:`run` on the RPC thread that received it. Calls of one module's
method wait in one queue. A call that finds the queue idle runs at once, alone. Calls that
arrive while a batch runs queue; when it is done, the oldest leads the next batch: it takes
every queued call that can share its batch (the same signature: arguments' layout, tensors'
dtypes, devices, trailing shapes and gradients, and the same distributed autograd context) up
to the batch's rows, waits until ``max_wait_ms`` after its own arrival for more where the batch
is not full, runs the method once on the merged arguments, and hands each call its rows. Each
queued call is woken alone, when its batch is done or when it leads. A batch's calls share one
context, and the leader runs it on its own thread, where that context is current (as it is
for each call's own thread): the module's graph is recorded as for one call, and each call's
reply carries its own rows' share of it.

When the merged run raises, the leader runs its calls again one by one: a call that fails alone
gets its own error; the others get their results. A result that cannot be split by rows fails
that batch's calls with a ``ValueError`` naming the method and the shape, and the method runs
unbatched from then on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from remote_module import _compat
from remote_module.runtime import batching, layouts

__all__ = ["run"]

_lock = threading.Lock()
# (module, method) -> its queue; an entry lives while it has calls.
_queues: dict[tuple[Any, str], _Queue] = {}
# (module, method) of a result that cannot be split by rows: they run unbatched.
_unsplittable: dict[tuple[Any, str], str] = {}


class _Queue:
    __slots__ = ("calls", "gathering", "leading")

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self.leading = False
        self.gathering: _Call | None = None  # a leader waiting up to max_wait_ms for more


class _Call:
    """One batched call waiting for its rows: what it merges, and what it got."""

    __slots__ = (
        "args",
        "arrived",
        "done",
        "error",
        "kwargs",
        "layout",
        "leads",
        "result",
        "rows",
        "signature",
        "tensors",
        "wake",
    )

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.args = args
        self.kwargs = kwargs
        self.tensors: list[torch.Tensor] = []
        self.layout = layouts.skeleton((args, kwargs), self.tensors)
        signature = batching.signature(self.layout, self.tensors)
        self.signature = None if signature is None else (signature, _compat.current_context_id())
        self.rows = batching.rows_of(self.tensors) if signature is not None else 0
        self.arrived = time.monotonic()
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.leads = False  # the call leads the next batch
        # Woken alone (done, leading, or a gathering leader's new arrival), never by another
        # call's arrival: with n calls queued, one condition for all woke n threads a call.
        self.wake = threading.Condition(_lock)


def run(
    module: Any,
    method: str,
    run_method: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: batching.Batching,
) -> Any:
    """``run_method(*args, **kwargs)``, merged with the concurrent calls of ``method`` of
    ``module`` that can share its batch (see the module docstring)."""
    key = (module, method)
    call = _Call(args, kwargs)
    if call.signature is None or key in _unsplittable:
        return run_method(*args, **kwargs)
    with _lock:
        queue = _queues.get(key)
        if queue is None:
            queue = _queues[key] = _Queue()
        queue.calls.append(call)
        if queue.gathering is not None:  # a leader gathering a batch may take it
            queue.gathering.wake.notify()
        queued = queue.leading
        if queued:
            while not (call.done or call.leads):
                call.wake.wait()
            if call.done:
                return _outcome(call)
        queue.leading = True
        # A call that found the module idle runs at once; a batch formed while another ran
        # may wait up to max_wait_ms after its first call for more.
        batch = _gather(queue, call, options.max_wait_ms if queued else 0.0, options)
    try:
        _run_batch(key, method, run_method, batch)
    finally:
        with _lock:
            for member in batch:
                if not member.done:  # the leader was interrupted (not an Exception)
                    member.error = RuntimeError(f"the batch of {method!r} was interrupted")
                    member.done = True
                member.wake.notify()
            queue.leading = False
            if queue.calls:
                queue.leading = queue.calls[0].leads = True
                queue.calls[0].wake.notify()
            else:
                del _queues[key]
    return _outcome(call)


def _gather(
    queue: _Queue, leader: _Call, wait_ms: float, options: batching.Batching
) -> list[_Call]:
    """The leader's batch, taken off the queue (the lock held): every queued call that can
    share it, oldest first, up to the rows allowed; waiting up to ``wait_ms`` after the
    leader's arrival for more while there is room."""
    deadline = leader.arrived + wait_ms / 1000.0
    while True:
        batch, rows = [], 0
        for call in queue.calls:
            if call.signature == leader.signature and rows + call.rows <= options.max_batch_size:
                batch.append(call)
                rows += call.rows
        if batch[0] is not leader:  # more rows than allowed: the leader alone
            batch = [leader]
        remaining = deadline - time.monotonic()
        if rows >= options.max_batch_size or remaining <= 0:
            break
        queue.gathering = leader
        leader.wake.wait(remaining)
        queue.gathering = None
    for call in batch:
        queue.calls.remove(call)
    return batch


def _run_batch(
    key: tuple[Any, str], method: str, run_method: Callable[..., Any], batch: list[_Call]
) -> None:
    if len(batch) == 1:
        _alone(run_method, batch[0])
        return
    try:
        merged = batching.merge([call.tensors for call in batch])
        args, kwargs = layouts.rebuild(batch[0].layout, merged)
        result = run_method(*args, **kwargs)
    except Exception:  # one call may be at fault: each runs alone, and fails alone
        for call in batch:
            _alone(run_method, call)
        return
    try:
        parts = batching.split(method, result, [call.rows for call in batch])
    except ValueError as error:
        _unsplittable[key] = str(error)
        for call in batch:
            call.error, call.done = error, True
        return
    for call, part in zip(batch, parts, strict=True):
        call.result, call.done = part, True


def _alone(run_method: Callable[..., Any], call: _Call) -> None:
    try:
        call.result = run_method(*call.args, **call.kwargs)
    except Exception as error:
        call.error = error
    call.done = True


def _outcome(call: _Call) -> Any:
    if call.error is not None:
        raise call.error
    return call.result
