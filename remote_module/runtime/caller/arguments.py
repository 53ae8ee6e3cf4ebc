"""The constructor's arguments, read and checked once for every way in (``RemoteModule(...)``,
``init_from_module_rref``, the typed ``Remote<Interface>`` classes): each rule and its
message in one place. For ``remote_device``: the owner and device a construction reads of it
(:func:`target`), whether RPC has a device map to that worker, its ``WorkerInfo``, and the
warning where it names another worker than a given RRef's owner (the parser is
``remote_module.runtime.remote_device``)."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed.rpc as rpc

from remote_module import _compat
from remote_module._shared import WIRE_DTYPES
from remote_module.runtime.batching import Batching
from remote_module.runtime.errors import UnknownWorkerError
from remote_module.runtime.remote_device import parse_remote_device

__all__ = [
    "callable_name",
    "check_args",
    "check_batching",
    "check_fake",
    "check_timeout",
    "check_wire_dtype",
    "is_device_map_set",
    "pick_interface",
    "target",
    "warn_owner_differs",
    "worker_info",
]

_UNSET_TIMEOUT = float(rpc.constants.UNSET_RPC_TIMEOUT)


def pick_interface(cls: type[Any], module_interface_cls: Any, legacy: Any) -> Any:
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


def check_batching(batching: Any, interface_cls: Any, module_cls: Any) -> Batching | None:
    """``batching=``: None or a :class:`Batching` whose methods the interface (or, without
    one, ``module_cls`` where it is a class) has."""
    if batching is None:
        return None
    if not isinstance(batching, Batching):
        raise ValueError(
            f"RemoteModule batching must be a remote_module.Batching(max_batch_size, "
            f"max_wait_ms=0.0, methods=('forward',)), got {batching!r}"
        )
    owner = interface_cls if interface_cls is not None else module_cls
    if isinstance(owner, type):
        missing = [name for name in batching.methods if not callable(getattr(owner, name, None))]
        if missing:
            raise ValueError(
                f"RemoteModule batching names method {missing[0]!r}, which "
                f"{owner.__qualname__} does not have"
            )
    elif interface_cls is None and batching.methods != ("forward",):
        raise ValueError(
            "RemoteModule batching: without an interface only forward is a method "
            f"(got methods={batching.methods!r})"
        )
    return batching


def check_fake(fake: Any) -> Any:
    """``fake=``: None or a callable (``fn(method_name, *args, **kwargs)``)."""
    if fake is not None and not callable(fake):
        raise ValueError(
            f"RemoteModule fake must be a callable fn(method_name, *args, **kwargs) that "
            f"returns the method's result in fake tensors, got {fake!r}"
        )
    return fake


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
    if wire_dtype is None or any(wire_dtype is accepted for accepted in WIRE_DTYPES):
        return wire_dtype
    raise ValueError(
        "RemoteModule wire_dtype must be None, torch.bfloat16, torch.float16 or torch.int8, "
        f"got {wire_dtype!r}"
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


def target(remote_device: str) -> tuple[str | int, str, bool]:
    """The owner, the device's text, and whether it is not the CPU: what a construction needs
    of ``remote_device``."""
    parsed = parse_remote_device(remote_device)
    return (parsed.on, str(parsed.device), parsed.device.type != "cpu")


def is_device_map_set(on: str | int) -> bool:
    """Whether the current RPC agent has a device map to ``on`` (which must be a worker)."""
    agent = _compat.rpc_agent()
    return bool(agent._get_device_map(_worker_info(agent, on)))


def worker_info(on: str | int) -> Any:
    """The current RPC group's ``WorkerInfo`` of ``on`` (a worker name or rank); an unknown one
    raises :class:`UnknownWorkerError`."""
    return _worker_info(_compat.rpc_agent(), on)


def _worker_info(agent: Any, on: str | int) -> Any:
    if isinstance(on, str):
        try:
            return agent.get_worker_info(on)
        except (RuntimeError, TypeError) as error:
            unknown = f"no RPC worker named {on!r} ({error})"
    else:
        for info in agent.get_worker_infos():
            if info.id == on:
                return info
        unknown = f"no RPC worker has rank {on}"
    raise UnknownWorkerError(f"RemoteModule: {unknown}") from None


# (remote_device, the RRef's owner) pairs already warned of
_warned_owners: set[tuple[str, str]] = set()


def warn_owner_differs(remote_device: str, owner_name: str) -> None:
    """Upstream's own test passes another worker's name; its calls reach the RRef's owner
    anyway. Said once per remote device and owner."""
    if (remote_device, owner_name) in _warned_owners:
        return
    _warned_owners.add((remote_device, owner_name))
    warnings.warn(
        f"RemoteModule.init_from_module_rref: remote_device {remote_device!r} names another "
        f"worker than the RRef's owner {owner_name!r}; it is not used: calls go to "
        f"{owner_name!r}, which `on` and repr() name",
        UserWarning,
        stacklevel=5,  # the caller of init_from_module_rref
    )
