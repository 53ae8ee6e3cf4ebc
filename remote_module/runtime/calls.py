"""Sending a generated method's call and waiting for it, outside TorchScript.

Generated code calls :func:`call` and :func:`call_async` (through
``remote_module.runtime.contract``); in TorchScript the same methods take a compiled branch
that sends directly (no checks, native errors). A call first waits for what is not ready yet
(``remote_module.runtime.pending``).
"""

from __future__ import annotations

import functools
import operator
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import torch
import torch._C._dynamo.eval_frame as _eval_frame
import torch.distributed.rpc as rpc
from torch.futures import Future

from remote_module._contract import CALL_PREFIX
from remote_module.runtime import keys
from remote_module.runtime.record import Record

try:  # what rpc.rpc_async calls for a TorchScript function, minus its per-call bookkeeping
    from torch._C._distributed_rpc import _invoke_rpc_torchscript
except ImportError:  # pragma: no cover - a torch built without it
    _invoke_rpc_torchscript = None  # type: ignore[assignment]

__all__ = ["call", "call_async", "take_creation"]

_call_prefix = operator.attrgetter(*CALL_PREFIX)  # one C call per send
# The prefix after the module's reference (its key, or its RRef), which eager calls send first.
_after_reference = operator.attrgetter(*CALL_PREFIX[1:])

R = TypeVar("R")


def call(
    remote_module: Any,
    method: str,
    remote_fn: Callable[..., R],
    args: tuple[Any, ...],
    hints: Sequence[tuple[Any, ...]] | None,
    kwargs: Mapping[str, Any] | None = None,
) -> R:
    """Run ``method`` on the owner and wait for its result (with a ``wire_dtype``, its
    floating tensors cast for the wire both ways: see ``values.to_wire``)."""
    if torch.compiler.is_compiling():  # torch.compile: one clean graph break, here
        return _call_eagerly(remote_module, method, remote_fn, args, hints, kwargs)
    at = remote_module._rm_record.seat()  # the seat it goes to (see runtime.failover)
    future, first, filing, wired = _start(remote_module, method, remote_fn, args, hints, kwargs, at)
    try:
        result = future.wait()
    except Exception as error:  # the RPC's own error, or what the module raised there
        from remote_module.runtime import failover  # (its import: 2 ms, on first need)

        raise failover.failed(remote_module, error, method, at) from error
    if filing is not None:
        _await_filing(remote_module, filing)
    if first:
        result = _settle_first_call(remote_module, result)
    return _from_wire(result) if wired else result


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
    future, first, filing, wired = _start(remote_module, method, remote_fn, args, hints, kwargs, at)
    result: Future[R] = Future()

    def settle(done: Future[Any]) -> None:
        # Never raise here: torch would log the error and leave ``result`` pending forever.
        # torch's stubs type set_exception's argument as the result type.
        try:
            value = done.wait()
        except Exception as error:  # the RPC's own error, or what the module raised there
            from remote_module.runtime import failover

            failover.failed_later(remote_module, error, method, at, result)
            return
        try:
            if first:
                value = _settle_first_call(remote_module, value)
            result.set_result(_from_wire(value) if wired else value)
        except Exception as error:  # a failed creation, raised once as it is named
            result.set_exception(error)  # type: ignore[arg-type]

    if filing is None:
        future.add_done_callback(settle)
    else:
        _when_both_done(future, filing, lambda: settle(future))
    return result


def take_creation(remote_module: Any) -> None:
    """Take a construction's reply where one is in flight (``pending.created``; pending loads
    with the first construction that leaves one, an interface's, not with the package)."""
    if remote_module._rm_record.creation is not None:
        from remote_module.runtime import pending

        pending.created(remote_module)


def _start(
    remote_module: Any,
    method: str,
    remote_fn: Callable[..., Any],
    args: tuple[Any, ...],
    hints: Sequence[tuple[Any, ...]] | None,
    kwargs: Mapping[str, Any] | None,
    at: int = 0,
) -> tuple[Future[Any], bool, Future[Any] | None, bool]:
    """Send a call (through the wire dtype's casts where there is one, and counted by the
    owner with ``checkpoint_every``): what :func:`_send` returns, and whether the call was
    cast for the wire."""
    # Its reply (an RRef) first, even if the checks fail: none may arrive after rpc.shutdown().
    take_creation(remote_module)
    wire_dtype = remote_module.wire_dtype
    wired = wire_dtype is not None
    if wired:  # sent as values.call_wired, which runs remote_fn there (values.to_wire)
        from remote_module.runtime import values

        carried, args, kwargs = values.to_wire(method, wire_dtype, args, hints, kwargs)
        remote_fn, args, hints = values.call_wired, (remote_fn, wire_dtype, carried, *args), None
    ticket = remote_module._rm_record.ticket
    return (*_send(remote_module, method, remote_fn, args, hints, kwargs, wired, at, ticket), wired)


def _untraced(fn: Callable[..., R]) -> Callable[..., R]:
    """``torch.compiler.disable(fn)``: Dynamo breaks the graph at a call of it and runs it with
    no frame of it traced. Made here from torch's C hook (loaded with torch) because
    ``torch.compiler.disable`` imports ``torch._dynamo``: 1.7 s on every import of ours."""

    def untraced(*args: Any, **kwargs: Any) -> R:
        prior = _eval_frame.set_eval_frame(None)
        try:
            return fn(*args, **kwargs)
        finally:
            _eval_frame.set_eval_frame(prior)

    code = untraced.__code__
    functools.update_wrapper(untraced, fn)
    untraced._torchdynamo_disable = True  # type: ignore[attr-defined]
    untraced._torchdynamo_disable_msg = None  # type: ignore[attr-defined]
    untraced._torchdynamo_orig_callable = fn  # type: ignore[attr-defined]
    # Its own frame is not compiled either (torch's twin lives in a file Dynamo skips).
    skip = _eval_frame._FrameExecStrategy(
        _eval_frame._FrameAction.SKIP, _eval_frame._FrameAction.DEFAULT
    )
    _eval_frame.set_code_exec_strategy(code, skip)
    return untraced


# What torch.compile runs in place of call/call_async, untraced: Dynamo breaks the graph at
# the call instead of tracing into RPC internals it cannot follow (and warning about them).
_call_eagerly = _untraced(call)
_call_async_eagerly = _untraced(call_async)


def _check_arguments(method: str, args: tuple[Any, ...], hints: Sequence[tuple[Any, ...]]) -> None:
    """``values.check_arguments``, loaded with the first call that checks (an interface's):
    this name is rebound to it then, so later calls pay no import statement (0.6 us each)."""
    global _check_arguments
    from remote_module.runtime.values import check_arguments

    _check_arguments = check_arguments
    check_arguments(method, args, hints)


def _from_wire(reply: tuple[Any, list[torch.Tensor]]) -> Any:
    from remote_module.runtime import values

    return values.from_wire(reply)


def _await_filing(remote_module: Any, filing: Future[Any]) -> None:
    """Hold a call that asked the owner to file its module until the owner's reply is in (or
    the RemoteModule's timeout passes; a filing that fails or is late leaves the RemoteModule
    on the RRef path). The reply carries the keeper RRef: one that arrived after the program
    had gone on to ``rpc.shutdown()`` would reach an RRef context already shut, its keeper's
    deletion never sent, and the owner would wait out torch's 100 s for that RRef at its own
    shutdown. A call's caller holds its result, so waiting for the call is waiting for this
    too. The owner files while it runs the call; this waits longer only while it compiles
    the keyed functions, once per owner process and interface."""
    from remote_module.runtime.replies import wait_returning_rrefs

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


def _send(
    remote_module: Any,
    method: str,
    remote_fn: Any,
    args: tuple[Any, ...],
    hints: Sequence[tuple[Any, ...]] | None,
    kwargs: Mapping[str, Any] | None,
    wired: bool = False,
    at: int = 0,
    ticket: tuple[Any, ...] | None = None,
) -> tuple[Future[Any], bool, Future[Any] | None]:
    """Send the call; returns its future, whether it is the RemoteModule's first eager call
    (whose reply is a ``keys.FirstReply``), and the request to file a scripted module that
    this call sent beside it, if any. ``wired``: ``remote_fn`` is a Python function that
    takes the call prefix as the family's remote functions do (``values.call_wired``,
    ``standby.counted``): the module's RRef in a scriptable family (whose remote functions
    take it), else as any eager call (its key). ``at``: the seat it goes to. ``ticket``: the
    owner counts the call for ``checkpoint_every`` (``standby.counted`` runs it there)."""
    if hints is not None:
        _check_arguments(method, args, hints)
    record: Record = remote_module._rm_record
    if record.pending is not None:  # the owner still loads (the creation: taken in _start)
        from remote_module.runtime import pending

        pending.wait_for_owner(remote_module, method)
    module_rref = remote_module.module_rref
    try:
        if remote_module.is_scriptable:  # TorchScript remote functions take the RRef
            if not wired:
                return _send_script(remote_module, record, remote_fn, args, kwargs, ticket)
            remote_fn, args = _counted(remote_fn, args, ticket)
            prefixed = (*_call_prefix(remote_module), *args)
            future = rpc.rpc_async(
                module_rref.owner(), remote_fn, prefixed, kwargs, timeout=remote_module.timeout
            )
            return future, False, None
        # A Python remote function: the module's key in the owner's table once it has one,
        # else a first call that sends the RRef and gets the key back (see runtime.keys).
        remote_fn, args = _counted(remote_fn, args, ticket)
        reference = record.reference
        if reference is None:
            first_args = (remote_fn, *_call_prefix(remote_module), *args)
            future = rpc.rpc_async(
                module_rref.owner(), keys.first_call, first_args, kwargs, remote_module.timeout
            )
            return future, True, None
        rpc_args = (reference, *_after_reference(remote_module), *args)
        future = rpc.rpc_async(
            module_rref.owner(), remote_fn, rpc_args, kwargs, timeout=remote_module.timeout
        )
        return future, False, None
    except RuntimeError as error:
        from remote_module.runtime import failover

        raise failover.failed(remote_module, error, method, at) from error


def _counted(
    remote_fn: Any, args: tuple[Any, ...], ticket: tuple[Any, ...] | None
) -> tuple[Any, tuple[Any, ...]]:
    """``remote_fn`` and its arguments, or with a ticket ``standby.counted`` running it (it
    takes the call prefix too)."""
    if ticket is None:
        return remote_fn, args
    from remote_module.runtime import standby

    return standby.counted, (ticket, remote_fn, *args)


def _send_script(
    remote_module: Any,
    record: Record,
    remote_fn: Any,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
    ticket: tuple[Any, ...] | None = None,
) -> tuple[Future[Any], bool, Future[Any] | None]:
    """Send a call of a TorchScript remote function (a Python function where TorchScript is
    disabled): its keyed twin with the module's key once the owner has filed the module for
    this RemoteModule, else the function itself with the module's RRef.

    The RRef costs a protocol message of its own on every call (the owner acknowledges the
    fork it received), about a third of a tiny call. The first Python call that could go
    keyed asks the owner to file the module (``keys.file_keyed``) beside the call itself;
    the call waits for that reply too (:func:`_await_filing`), and later calls go keyed.
    Returns what :func:`_send` does."""
    reference = record.reference
    if reference is None:
        reference = keys.adopt_key(record, remote_module.module_rref)
    twin = keys.keyed_twin(remote_fn)
    if type(reference) is int and twin is not None:
        # With a ticket the owner counts it as it looks the module up (failover.file_counted).
        keyed_args = (reference, *_after_reference(remote_module), *args)
        return _send_by_name(remote_module, twin, keyed_args, kwargs), False, None
    if ticket is not None:
        counted, counted_args = _counted(remote_fn, args, ticket)
        prefixed = (*_call_prefix(remote_module), *counted_args)
        future = _send_python(remote_module, counted, prefixed, kwargs)
    else:
        prefixed = (*_call_prefix(remote_module), *args)
        future = _send_by_name(remote_module, remote_fn, prefixed, kwargs)
    filing = None
    if reference is None and twin is not None and record.filing is None:
        if ticket is None:
            filing = keys.ask_owner_to_file(record, remote_module.module_rref)
        else:  # its keyed calls counted for checkpoint_every
            from remote_module.runtime import standby

            filing = keys.ask_owner_to_file(
                record, remote_module.module_rref, standby.file_counted, ticket
            )
    return future, False, filing


def _send_python(
    remote_module: Any, fn: Any, rpc_args: tuple[Any, ...], kwargs: Mapping[str, Any] | None
) -> Future[Any]:
    return rpc.rpc_async(
        remote_module.module_rref.owner(), fn, rpc_args, kwargs, timeout=remote_module.timeout
    )


def _send_by_name(
    remote_module: Any,
    remote_fn: Any,
    rpc_args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
) -> Future[Any]:
    script_name = _script_names.get(remote_fn)
    if script_name is None:
        script_name = _script_names.setdefault(remote_fn, _script_name(remote_fn))
    if not script_name or torch.autograd._profiler_enabled():  # torch's own path, recorded
        return rpc.rpc_async(
            remote_module.module_rref.owner(),
            remote_fn,
            rpc_args,
            kwargs,
            timeout=remote_module.timeout,
        )
    # As rpc.rpc_async sends it (a script call by qualified name), without resolving the
    # worker and the name again on every call: 1.7 us of Python per call instead of 3.1 us.
    return _invoke_rpc_torchscript(
        remote_module.module_rref.owner_name(),
        script_name,
        rpc_args,
        dict(kwargs or {}),
        remote_module.timeout,
        False,
    )


def _settle_first_call(remote_module: Any, reply: keys.FirstReply) -> Any:
    return keys.settle_first_call(
        remote_module._rm_record, remote_module.module_rref, reply, _owner_name(remote_module)
    )


# remote function -> its TorchScript qualified name, or "" for a Python function
_script_names: dict[Any, str] = {}


def _script_name(remote_fn: Any) -> str:
    """The qualified name the owner compiled ``remote_fn`` under; "" where TorchScript is
    disabled (PYTORCH_JIT=0: the owner runs the Python function)."""
    if _invoke_rpc_torchscript is None or not torch.jit._state._enabled.enabled:
        return ""
    return str(torch._jit_internal._qualified_name(remote_fn))


def _owner_name(remote_module: Any) -> str:
    try:
        return str(remote_module.module_rref.owner_name())
    except RuntimeError:
        return str(remote_module.on)
