"""The constructor's arguments, checked once for every way in (``RemoteModule(...)``,
``init_from_module_rref``, the typed ``Remote<Interface>`` classes): each rule and its
message in one place."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed.rpc as rpc

if TYPE_CHECKING:
    from remote_module.runtime.module import RemoteModule

__all__ = ["callable_name", "check_args", "check_timeout", "check_wire_dtype", "pick_interface"]

_UNSET_TIMEOUT = float(rpc.constants.UNSET_RPC_TIMEOUT)


def pick_interface(cls: type[RemoteModule], module_interface_cls: Any, legacy: Any) -> Any:
    """The interface a RemoteModule of class ``cls`` is built with: the one given (by either
    keyword), or the one a typed class is bound to."""
    if (
        module_interface_cls is not None
        and legacy is not None
        and module_interface_cls is not legacy
    ):
        raise ValueError(
            "pass the interface as module_interface_cls or _module_interface_cls, not both"
        )
    given = module_interface_cls if module_interface_cls is not None else legacy
    bound = cls._rm_bound_interface
    if bound is None or given is None or given is bound:
        return given if given is not None else bound
    raise ValueError(
        f"{cls.__name__} is bound to the interface {bound.__module__}.{bound.__qualname__}; "
        f"module_interface_cls={given!r} does not match it"
    )


# RPC keeps timeouts as 32-bit milliseconds, and 0 ms means "never time out".
_MIN_TIMEOUT_S, _MAX_TIMEOUT_S = 0.001, 2_147_483.0


def check_timeout(timeout: float | None) -> float:
    if timeout is None:
        return _UNSET_TIMEOUT
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, numbers.Real)
        or not _MIN_TIMEOUT_S <= timeout <= _MAX_TIMEOUT_S
    ):
        raise ValueError(
            f"RemoteModule timeout must be a number of seconds between {_MIN_TIMEOUT_S} and "
            f"{_MAX_TIMEOUT_S:.0f}, got {timeout!r}"
        )
    return float(timeout)


def check_wire_dtype(wire_dtype: Any) -> torch.dtype | None:
    if wire_dtype is None or (isinstance(wire_dtype, torch.dtype) and wire_dtype.is_floating_point):
        return wire_dtype
    raise ValueError(
        "RemoteModule wire_dtype must be None or a floating-point torch.dtype such as "
        f"torch.bfloat16 or torch.float16, got {wire_dtype!r}"
    )


def check_args(args: Any, kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if kwargs is None and type(args) is tuple:
        return args, {}  # the common case
    if args is None:
        args = ()
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"RemoteModule args must be a tuple or list, got {type(args).__name__}")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, (dict, Mapping)) or not all(isinstance(key, str) for key in kwargs):
        raise TypeError(f"RemoteModule kwargs must be a mapping with str keys, got {kwargs!r:.100}")
    return tuple(args), dict(kwargs)


def callable_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__
