"""Values on their way to and from the owner: the walkers that rebuild them with their tensors
moved or cast (where no types are known; generated walkers do the same from the types), a
``wire_dtype``'s casts on both sides (``owner.run`` runs a call of one on the owner), and
the caller-side argument checks of RemoteModules built with an interface (typeguard)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from remote_module._shared import cast_tensor, restore_tensor

__all__ = [
    "cast_to_wire",
    "check_arguments",
    "from_wire",
    "move_to_device",
    "restore_from_wire",
    "set_type_checking",
    "to_wire",
    "type_checking",
    "unnamed",
]

_type_checking = [True]


def set_type_checking(enabled: bool) -> None:
    """Turn caller-side argument checks of RemoteModules built with an interface on or off
    (on by default). Off saves a few microseconds per call; a wrong type then fails on the
    owner instead, after the round trip."""
    _type_checking[0] = bool(enabled)


def type_checking() -> bool:
    """Whether caller-side argument checks are on."""
    return _type_checking[0]


def move_to_device(value: Any, device: torch.device) -> Any:
    """``value`` with every tensor inside (lists, tuples, NamedTuples, dicts) on ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return _rebuilt(value, lambda item: move_to_device(item, device))


def check_arguments(method: str, args: tuple[Any, ...], hints: Sequence[tuple[Any, ...]]) -> None:
    """The caller-side type checks of ``method`` (when they are on): a ``TypeError`` naming
    the method and the argument."""
    if _type_checking[0]:
        _check_arguments(method, args, hints)


def cast_to_wire(
    value: Any, dtype: torch.dtype, sent: list[torch.Tensor], named: bool = True
) -> Any:
    """``value`` with every floating tensor inside cast to ``dtype``; an empty tensor of each
    one's own dtype appended to ``sent``, in order (``_shared.cast_tensor`` each). Python
    calls of a RemoteModule with a ``wire_dtype`` cast this way, both ways (the generated
    TorchScript casters of scripted callers do the same from the types, tensor for tensor).
    ``named=False``: NamedTuples become plain tuples."""
    if isinstance(value, torch.Tensor):
        return cast_tensor(value, dtype, sent)
    return _rebuilt(value, lambda item: cast_to_wire(item, dtype, sent, named), named)


def unnamed(value: Any) -> Any:
    """``value`` with every NamedTuple inside as a plain tuple: what a TorchScript function's
    result is sent back as from Python (TorchScript makes its NamedTuples of a class that does
    not pickle; the caller's generated code names them again)."""
    if isinstance(value, torch.Tensor):
        return value
    return _rebuilt(value, unnamed, named=False)


def restore_from_wire(value: Any, sent: list[torch.Tensor]) -> Any:
    """The inverse of :func:`cast_to_wire`: floating tensors back to the dtypes in ``sent``."""
    if isinstance(value, torch.Tensor):
        return restore_tensor(value, sent)
    return _rebuilt(value, lambda item: restore_from_wire(item, sent))


def to_wire(
    wire_dtype: torch.dtype, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None
) -> tuple[list[torch.Tensor], tuple[Any, ...], Mapping[str, Any] | None]:
    """A Python call of a RemoteModule with a ``wire_dtype``, as it is sent (the owner's
    ``owner.run`` runs it): the arguments' floating tensors cast to ``wire_dtype``; returns
    each one's own dtype (carried beside them), the arguments and the keyword arguments.
    Every Python call takes this way, whatever the family: the generated code has no wire
    half of its own outside TorchScript (scripted callers run the generated casters)."""
    carried: list[torch.Tensor] = []
    cast = cast_to_wire(args, wire_dtype, carried)
    if kwargs:
        kwargs = cast_to_wire(dict(kwargs), wire_dtype, carried)
    return carried, cast, kwargs


def from_wire(reply: tuple[Any, list[torch.Tensor]]) -> Any:
    """The result of a call with a ``wire_dtype`` (the owner's ``run`` reply: the
    result and the dtypes it carries), cast back."""
    result, carried = reply
    return restore_from_wire(result, carried)


def _rebuilt(value: Any, convert: Callable[[Any], Any], named: bool = True) -> Any:
    """``value`` (a tuple, NamedTuple, list or dict; else itself) with ``convert`` applied to
    its items in order; ``named=False``: a NamedTuple as a plain tuple."""
    if isinstance(value, tuple):
        items = [convert(item) for item in value]
        if hasattr(value, "_fields"):
            return type(value)(*items) if named else tuple(items)
        return type(value)(items)
    if isinstance(value, list):
        return [convert(item) for item in value]
    if isinstance(value, dict):
        return type(value)((key, convert(item)) for key, item in value.items())
    return value


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
