"""What generated caller-side methods do outside TorchScript: check, send, wait, name failures.

Generated code calls :func:`call` and :func:`call_async` (through
``remote_module.runtime.contract``); in TorchScript the same methods take a compiled branch
that sends directly (no checks, native errors).
"""

from __future__ import annotations

import operator
import queue
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import torch
import torch.distributed.rpc as rpc
from torch.futures import Future

try:  # what rpc.rpc_async calls for a TorchScript function, minus its per-call bookkeeping
    from torch._C._distributed_rpc import _invoke_rpc_torchscript
except ImportError:  # pragma: no cover - a torch built without it
    _invoke_rpc_torchscript = None  # type: ignore[assignment]

__all__ = [
    "CALL_PREFIX",
    "call",
    "call_async",
    "move_to_device",
    "set_type_checking",
    "type_checking",
    "wait_returning_rrefs",
]

# The RemoteModule attributes every remote function receives first, in this order; the
# generator renders remote functions' parameters and TorchScript senders from this tuple.
CALL_PREFIX = ("module_rref", "device", "is_device_map_set")
_call_prefix = operator.attrgetter(*CALL_PREFIX)  # one C call per send

R = TypeVar("R")

_type_checking = [True]


def set_type_checking(enabled: bool) -> None:
    """Turn caller-side argument checks of RemoteModules built with an interface on or off
    (on by default). Off saves a few microseconds per call; a wrong type then fails on the
    owner instead, after the round trip."""
    _type_checking[0] = bool(enabled)


def type_checking() -> bool:
    """Whether caller-side argument checks are on."""
    return _type_checking[0]


def call(
    remote_module: Any,
    method: str,
    remote_fn: Callable[..., R],
    args: tuple[Any, ...],
    hints: Sequence[tuple[Any, ...]] | None,
    kwargs: Mapping[str, Any] | None = None,
) -> R:
    """Run ``method`` on the owner and wait for its result."""
    try:
        return _send(remote_module, method, remote_fn, args, hints, kwargs).wait()
    except RuntimeError as error:
        raise _named(error, remote_module, method) from error


def call_async(
    remote_module: Any,
    method: str,
    remote_fn: Callable[..., R],
    args: tuple[Any, ...],
    hints: Sequence[tuple[Any, ...]] | None,
    kwargs: Mapping[str, Any] | None = None,
) -> Future[R]:
    """Run ``method`` on the owner and return the RPC's future.

    With a RemoteModule ``timeout``, the future is chained so that its errors name the owner
    and the method (a timeout's own text names neither). Without one it is torch's future
    itself, at the cost of a bare ``rpc_async``: its errors are torch's own, and the RPC
    default timeout applies.
    """
    try:
        future = _send(remote_module, method, remote_fn, args, hints, kwargs)
    except RuntimeError as error:
        raise _named(error, remote_module, method) from error
    if remote_module.timeout < 0:  # no RemoteModule timeout: rpc.constants.UNSET_RPC_TIMEOUT
        return future

    def result(done: Future[Any]) -> Any:
        try:
            return done.wait()
        except RuntimeError as error:
            raise _named(error, remote_module, method) from error

    return future.then(result)


def wait_returning_rrefs(future: Future[Any], timeout: float, started: float) -> Any:
    """Wait for a reply that carries RRefs until ``started + timeout`` (``time.monotonic()``;
    an unset timeout means the RPC agent's default).

    The RPC itself is sent without a deadline: a reply that arrives after the caller gave up
    is still unpickled and its RRefs released, so the owner forgets them; an RPC timeout would
    drop the reply and leave its RRefs on the owner forever.
    """
    if timeout <= 0:
        timeout = rpc.get_rpc_timeout()
    if timeout > 0:
        # SimpleQueue.put and get are C: the RPC thread runs no Python frame to wake this one.
        done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        future.add_done_callback(done.put)
        remaining = started + timeout - time.monotonic()
        try:
            done.get(timeout=max(remaining, 0.0))
        except queue.Empty:
            raise RuntimeError(
                f"RPC ran for more than the RemoteModule timeout ({timeout} s)"
            ) from None
    return future.wait()


def move_to_device(value: Any, device: torch.device) -> Any:
    """``value`` with every tensor inside (lists, tuples, NamedTuples, dicts) on ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        moved = [move_to_device(item, device) for item in value]
        return type(value)(*moved) if hasattr(value, "_fields") else type(value)(moved)
    if isinstance(value, list):
        return [move_to_device(item, device) for item in value]
    if isinstance(value, dict):
        return type(value)((key, move_to_device(item, device)) for key, item in value.items())
    return value


def _send(
    remote_module: Any,
    method: str,
    remote_fn: Any,
    args: tuple[Any, ...],
    hints: Sequence[tuple[Any, ...]] | None,
    kwargs: Mapping[str, Any] | None,
) -> Future[Any]:
    if hints is not None and _type_checking[0]:
        _check_arguments(method, args, hints)
    module_rref = remote_module.module_rref
    rpc_args = (*_call_prefix(remote_module), *args)
    script_name = _script_names.get(remote_fn)
    if script_name is None:
        script_name = _script_names.setdefault(remote_fn, _script_name(remote_fn))
    if script_name and not torch.autograd._profiler_enabled():
        # A compiled remote function, sent as rpc.rpc_async would send it (a script call by
        # qualified name), without resolving the worker and the name again on every call.
        return _invoke_rpc_torchscript(
            module_rref.owner_name(),
            script_name,
            rpc_args,
            dict(kwargs or {}),
            remote_module.timeout,
            False,
        )
    # Python functions, and calls the profiler records: torch's own path.
    return rpc.rpc_async(
        module_rref.owner(), remote_fn, rpc_args, kwargs, timeout=remote_module.timeout
    )


# remote function -> its TorchScript qualified name, or "" for a Python function
_script_names: dict[Any, str] = {}


def _script_name(remote_fn: Any) -> str:
    if _invoke_rpc_torchscript is None or not isinstance(remote_fn, torch.jit.ScriptFunction):
        return ""
    return str(torch._jit_internal._qualified_name(remote_fn))


def _check_arguments(method: str, args: tuple[Any, ...], hints: Sequence[tuple[Any, ...]]) -> None:
    for value, (name, hint, *default) in zip(args, hints, strict=False):
        if hint is torch.Tensor and isinstance(value, torch.Tensor):
            continue  # the common case, without typeguard's overhead
        if default and type(value) is type(default[0]) and value == default[0]:
            continue  # the interface's own default (a tuple for a List, say) is accepted
        problem = _type_problem(value, hint)
        if problem is not None:
            raise TypeError(
                f"RemoteModule.{method}: argument '{name}' expected {_hint_name(hint)}, "
                f"got {type(value).__name__} ({problem})"
            )


def _type_problem(value: Any, hint: Any) -> str | None:
    """What typeguard finds wrong with ``value`` as a ``hint``, or None. typeguard loads on
    the first check, not with ``import remote_module`` (about 15 ms)."""
    from typeguard import TypeCheckError, check_type

    try:
        check_type(value, hint)
    except TypeCheckError as error:
        return str(error)
    return None


def _hint_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def _named(error: RuntimeError, remote_module: Any, method: str) -> RuntimeError:
    try:
        owner = remote_module.module_rref.owner_name()
    except RuntimeError:
        owner = str(remote_module.on)
    return RuntimeError(f"RemoteModule.{method} on worker '{owner}' failed: {error}")
