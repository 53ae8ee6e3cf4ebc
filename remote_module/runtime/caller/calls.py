"""Sending a generated method's call and waiting for it, outside TorchScript.

Generated code calls :func:`call` and :func:`call_async` (through
``remote_module.runtime.contract``); in TorchScript the same methods take a compiled branch
that sends directly (no checks, native errors). A call first takes the construction's reply
and waits for the owner's load of the generated module (``remote_module.runtime.caller.pending``).

What a call sends (:func:`_send`):

- a scripted module (a TorchScript interface), no ``wire_dtype``: its compiled remote
  function by name, with the module's RRef, until the owner has filed the module for it
  (asked beside the first call); then the keyed twin, with the key;
- everything else: ``owner.call`` (``owner.first_call`` the first time, which files the
  module and replies with its key) naming the generated function by its module's and its own
  names, wrapped in ``owner.call_wired`` with a ``wire_dtype`` and ``owner.counted`` with
  ``checkpoint_every``.
"""

from __future__ import annotations

import operator
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import torch
import torch.distributed.rpc as rpc
from torch.futures import Future

from remote_module import _compat
from remote_module._shared import CALL_PREFIX
from remote_module.runtime import owner, values
from remote_module.runtime.caller import failover, keys, pending
from remote_module.runtime.caller.record import Record
from remote_module.runtime.caller.replies import wait_returning_rrefs

__all__ = ["call", "call_async"]

_call_prefix = operator.attrgetter(*CALL_PREFIX)  # one C call per send
# The prefix after the module's reference (its key, or its RRef), which eager calls send first.
_after_reference = operator.attrgetter(*CALL_PREFIX[1:])

R = TypeVar("R")


class _Sent:
    """A call on its way: its future, whether it is the first eager call (whose reply carries
    the module's key), the filing request sent beside it, and whether it is cast for the wire."""

    __slots__ = ("filing", "first", "future", "wired")

    def __init__(
        self,
        future: Future[Any],
        first: bool = False,
        filing: Future[Any] | None = None,
        wired: bool = False,
    ) -> None:
        self.future = future
        self.first = first
        self.filing = filing
        self.wired = wired


def call(
    remote_module: Any,
    method: str,
    remote_fn: Callable[..., R],
    args: tuple[Any, ...],
    hints: Sequence[tuple[Any, ...]] | None,
    kwargs: Mapping[str, Any] | None = None,
) -> R:
    """Run ``method`` on the owner and wait for its result."""
    if torch.compiler.is_compiling():  # torch.compile: one clean graph break, here
        return _call_eagerly(remote_module, method, remote_fn, args, hints, kwargs)
    at = remote_module._rm_record.seat()  # the seat it goes to (see runtime.failover)
    sent = _start(remote_module, method, remote_fn, args, hints, kwargs, at)
    try:
        result = sent.future.wait()
    except Exception as error:  # the RPC's own error, or what the module raised there
        raise failover.failed(remote_module, error, method, at) from error
    if sent.filing is not None:
        _await_filing(remote_module, sent.filing)
    return _settle(remote_module, sent, result)


def call_async(
    remote_module: Any,
    method: str,
    remote_fn: Callable[..., R],
    args: tuple[Any, ...],
    hints: Sequence[tuple[Any, ...]] | None,
    kwargs: Mapping[str, Any] | None = None,
) -> Future[R]:
    """Run ``method`` on the owner and return a future of its result.

    The future is chained to the RPC's, so that its errors are those of :func:`call`, naming
    the owner and the method (torch's own name neither), with or without a RemoteModule
    ``timeout``; a RemoteModule's first eager call settles its key there, and a call with a
    ``wire_dtype`` casts its result back.
    """
    if torch.compiler.is_compiling():  # torch.compile: one clean graph break, here
        return _call_async_eagerly(remote_module, method, remote_fn, args, hints, kwargs)
    at = remote_module._rm_record.seat()  # the seat it goes to (see runtime.failover)
    sent = _start(remote_module, method, remote_fn, args, hints, kwargs, at)
    result: Future[R] = Future()

    def settle(done: Future[Any]) -> None:
        # Never raise here: torch would log the error and leave ``result`` pending forever.
        # torch's stubs type set_exception's argument as the result type.
        try:
            value = done.wait()
        except Exception as error:  # the RPC's own error, or what the module raised there
            failover.failed_later(remote_module, error, method, at, result)
            return
        try:
            result.set_result(_settle(remote_module, sent, value))
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
    at: int,
) -> _Sent:
    """Check the arguments, wait for what is not ready, and send the call."""
    # Its reply (an RRef) first, even if the checks fail: none may arrive after rpc.shutdown().
    pending.created(remote_module)
    if hints is not None:
        values.check_arguments(method, args, hints)
    record: Record = remote_module._rm_record
    if record.pending is not None:  # the owner still loads the generated module
        pending.wait_for_owner(remote_module, method)
    try:
        return _send(remote_module, record, remote_fn, args, kwargs)
    except RuntimeError as error:
        raise failover.failed(remote_module, error, method, at) from error


def _send(
    remote_module: Any,
    record: Record,
    remote_fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
) -> _Sent:
    """Send the call as the module docstring says."""
    wire_dtype = remote_module.wire_dtype
    ticket = record.ticket
    module_rref = remote_module.module_rref
    filing = None
    if remote_module.is_scriptable and wire_dtype is None and _compat.jit_enabled():
        # The RRef costs a protocol message of its own on every call (the owner acknowledges
        # the fork it received), about a third of a tiny call: the first Python call asks the
        # owner to file the module beside the call itself, waits for that reply too
        # (_await_filing), and later calls send the keyed twin with the key.
        reference = record.reference
        if reference is None:
            reference = keys.adopt_key(record, module_rref)
        twin = keys.keyed_twin(remote_fn)
        if type(reference) is int and twin is not None:
            keyed_args = (reference, *_after_reference(remote_module), *args)
            return _Sent(_send_by_name(remote_module, twin, keyed_args, kwargs))
        if reference is None and twin is not None and record.filing is None:
            filing = keys.ask_owner_to_file(record, module_rref)
        if ticket is None:
            prefixed = (*_call_prefix(remote_module), *args)
            return _Sent(_send_by_name(remote_module, remote_fn, prefixed, kwargs), filing=filing)
        # Counted on the owner in Python until it is keyed: below.
    # A generated function travels as its module's and its own names (owner.call finds it).
    function: Any = (remote_fn.__module__, remote_fn.__name__)
    if wire_dtype is not None:
        carried, args, kwargs = values.to_wire(wire_dtype, args, kwargs)
        function, args = owner.call_wired, (function, wire_dtype, carried, *args)
    if ticket is not None:
        function, args = owner.counted, (ticket, function, *args)
    timeout = remote_module.timeout
    wired = wire_dtype is not None
    reference = module_rref if remote_module.is_scriptable else record.reference
    if reference is None:  # an eager module's first call: the owner files it, says its key
        message = (function, module_rref, *_after_reference(remote_module), *args)
        future = rpc.rpc_async(module_rref.owner(), owner.first_call, message, kwargs, timeout)
        return _Sent(future, first=True, wired=wired)
    message = (function, reference, *_after_reference(remote_module), *args)
    future = rpc.rpc_async(module_rref.owner(), owner.call, message, kwargs, timeout)
    return _Sent(future, filing=filing, wired=wired)


def _send_by_name(
    remote_module: Any, remote_fn: Any, rpc_args: tuple[Any, ...], kwargs: Mapping[str, Any] | None
) -> Future[Any]:
    """A compiled remote function, sent as ``rpc.rpc_async`` sends a TorchScript function:
    by its qualified name (the owner compiled it under the same one). While the autograd
    profiler runs, through ``rpc.rpc_async`` itself, which records it."""
    module_rref = remote_module.module_rref
    if _compat.profiler_enabled():
        script_fn = torch.jit.script(remote_fn)  # compiled already: torch's cached function
        return rpc.rpc_async(
            module_rref.owner(), script_fn, rpc_args, kwargs, remote_module.timeout
        )
    name = _compat.qualified_name(remote_fn)
    return _compat.invoke_rpc_torchscript(
        module_rref.owner_name(), name, rpc_args, dict(kwargs or {}), remote_module.timeout
    )


def _settle(remote_module: Any, sent: _Sent, value: Any) -> Any:
    """A call's reply as its caller gets it: the first call's key kept, the wire's casts
    undone."""
    if sent.first:
        on = failover.owner_name(remote_module)
        value = keys.settle_first_call(
            remote_module._rm_record, remote_module.module_rref, value, on
        )
    return values.from_wire(value) if sent.wired else value


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


# What torch.compile runs in place of call/call_async, untraced: Dynamo breaks the graph at
# the call instead of tracing into RPC internals it cannot follow (and warning about them).
_call_eagerly = _compat.untraced(call)
_call_async_eagerly = _compat.untraced(call_async)
