"""Sending a generated method's call and waiting for it, outside TorchScript.

Generated code calls :func:`call` and :func:`call_async` (through
``remote_module.runtime.contract``); in TorchScript the same methods take a compiled branch
that sends directly (no checks, native errors). A call first takes the construction's reply
and waits for the owner's load of the generated module (``remote_module.runtime.caller.pending``),
checks its arguments, then goes the RemoteModule's route (``remote_module.runtime.caller.route``):
what is sent, and how its reply is read, is the route's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import torch
from torch.futures import Future

from remote_module.runtime import values
from remote_module.runtime.caller import compiled, failover, pending
from remote_module.runtime.caller.awaitable import AwaitableFuture
from remote_module.runtime.caller.record import Record
from remote_module.runtime.caller.replies import wait_returning_rrefs
from remote_module.runtime.caller.route import Route, Sent
from remote_module.runtime.errors import RemoteFailure

__all__ = ["call", "call_async"]

R = TypeVar("R")


def call(
    remote_module: Any,
    method: str,
    remote_fn: Callable[..., R],
    args: tuple[Any, ...],
    hints: Sequence[tuple[Any, ...]] | None,
    kwargs: Mapping[str, Any] | None = None,
) -> R:
    """Run ``method`` on the owner and wait for its result."""
    if torch.compiler.is_compiling():  # torch.compile or export: one op of the graph
        return compiled.call(remote_module, method, args, kwargs)
    sent = _start(remote_module, method, remote_fn, args, hints, kwargs)
    try:
        result = sent.future.wait()
    except Exception as error:  # the RPC's own error, or what TorchScript raised there
        if sent.filing is not None:
            _await_filing(remote_module, sent.filing)
        named = failover.failed(remote_module, error, method, sent.route.seat)
        # The module's own error is whole without torch's text (kept as remote_traceback).
        raise named from (None if hasattr(named, "remote_traceback") else error)
    if sent.filing is not None:
        _await_filing(remote_module, sent.filing)
    if type(result) is RemoteFailure:  # what the module raised, sent back by owner.run
        raise _failure(remote_module, method, sent.route, result)
    return sent.route.settle(remote_module, result)


def call_async(
    remote_module: Any,
    method: str,
    remote_fn: Callable[..., R],
    args: tuple[Any, ...],
    hints: Sequence[tuple[Any, ...]] | None,
    kwargs: Mapping[str, Any] | None = None,
    decode: Callable[[R], R] | None = None,
) -> AwaitableFuture[R]:
    """Run ``method`` on the owner and return a future of its result (through ``decode``,
    where given: a result that holds NamedTuples).

    The future is chained to the RPC's, so that its errors are those of :func:`call`, naming
    the owner and the method (torch's own name neither), with or without a RemoteModule
    ``timeout``; a RemoteModule's first eager call settles its key there, and a call with a
    ``wire_dtype`` casts its result back. It is a ``torch.futures.Future`` that asyncio can
    also await (:class:`AwaitableFuture`); the decoding happens here, not in a ``then``,
    whose future would be torch's own.
    """
    if torch.compiler.is_compiling():  # a Future is no tensor: a graph break, run eagerly
        return compiled.call_async(
            remote_module, call_async, method, remote_fn, args, hints, kwargs, decode
        )
    sent = _start(remote_module, method, remote_fn, args, hints, kwargs)
    route = sent.route
    result: AwaitableFuture[R] = AwaitableFuture()

    def settle(done: Future[Any]) -> None:
        # Never raise here: torch would log the error and leave ``result`` pending forever.
        # torch's stubs type set_exception's argument as the result type.
        try:
            value = done.wait()
        except Exception as error:  # the RPC's own error, or what TorchScript raised there
            failover.failed_later(remote_module, error, method, route.seat, result)
            return
        if type(value) is RemoteFailure:  # what the module raised, sent back by owner.run
            result.set_exception(_failure(remote_module, method, route, value))  # type: ignore[arg-type]
            return
        try:
            value = route.settle(remote_module, value)
            result.set_result(value if decode is None else decode(value))
        except Exception as error:  # a failed creation, raised once as it is named
            result.set_exception(error)  # type: ignore[arg-type]

    if sent.filing is None:
        sent.future.add_done_callback(settle)
    else:
        _when_both_done(sent.future, sent.filing, lambda: settle(sent.future))
    return result


def _start(
    remote_module: Any,
    method: str,
    remote_fn: Callable[..., Any],
    args: tuple[Any, ...],
    hints: Sequence[tuple[Any, ...]] | None,
    kwargs: Mapping[str, Any] | None,
) -> Sent:
    """Check the arguments, wait for what is not ready, and send the call its route's way."""
    # Its reply (an RRef) first, even if the checks fail: none may arrive after rpc.shutdown().
    pending.created(remote_module)
    if hints is not None:
        values.check_arguments(method, args, hints)
    record: Record = remote_module._rm_record
    if record.pending is not None:  # the owner still loads the generated module
        pending.wait_for_owner(remote_module, method)
    route = record.route
    try:
        return route.send(remote_module, remote_fn, args, kwargs)
    except RuntimeError as error:
        raise failover.failed(remote_module, error, method, route.seat) from error


def _failure(remote_module: Any, method: str, route: Route, failed: RemoteFailure) -> Exception:
    """The exception a call raises for what its module raised on the owner."""
    return failed.error(method, route.owner_name, remote_module._rm_record.creator)


def _await_filing(remote_module: Any, filing: Future[Any]) -> None:
    """Hold a call that asked the owner to file its module until the owner's reply is in (or
    the RemoteModule's timeout passes; a filing that fails or is late leaves the RemoteModule
    on the RRef path). The reply carries the keeper RRef: one that arrived after the program
    had gone on to ``rpc.shutdown()`` would reach an RRef context already shut, its keeper's
    deletion never sent, and the owner would wait out torch's 100 s for that RRef at its own
    shutdown. The owner files while it runs the call; this waits longer only while it
    compiles the keyed functions, once per owner process and interface."""
    try:
        wait_returning_rrefs(filing, remote_module.timeout, time.monotonic())
    except Exception:  # a failed filing is adopted (and dropped) at the next call
        pass


def _when_both_done(first: Future[Any], second: Future[Any], then: Callable[[], None]) -> None:
    """Run ``then`` once both futures are done (in the callback of whichever is last)."""
    remaining = [2]
    lock = threading.Lock()

    def one_done(_: Future[Any]) -> None:
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            then()

    first.add_done_callback(one_done)
    second.add_done_callback(one_done)
