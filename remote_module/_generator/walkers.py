"""Walkers: the generated functions that rebuild a value of a type container by container,
down to its tensors (moved to a device, cast to the wire dtype and back) or its NamedTuples
(rebuilt as the declared class), named after the type they handle (``_rm_move_list_Tensor``,
``_rm_decode_Scored``; a short digest only where two types would share a name). A tensor
alone needs no generated walker: the contract's leaf helper (``_rm.move_tensor``) walks it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Sequence

from remote_module._generator.layout import Expr
from remote_module._generator.model import Interface, Kind, TypeRef
from remote_module._shared import INTERNAL_PREFIX

__all__ = [
    "Walker",
    "decodable_types",
    "movable_types",
    "wait_decoder_name",
    "walk",
    "walker_name",
]

# What each walker kind takes beside the value, in its own body (the same names TorchScript
# and Python both read), and the prefix of its generated functions' names.
_WALKER_PARAMS = {
    "move": ("device: torch.device",),
    "decode": (),
    "cast": ("dtype: torch.dtype", "sent: list[Tensor]"),
    "restore": ("sent: list[Tensor]",),
}
_WALKER_EXTRA = {"move": ("device",), "decode": (), "cast": ("dtype", "sent"), "restore": ("sent",)}
# The tensor leaf helpers of the contract (remote_module._shared), as generated code calls them.
_TENSOR_HELPERS = {
    "move": "_rm.move_tensor",
    "cast": "_rm.cast_tensor",
    "restore": "_rm.restore_tensor",
}
_WAIT = "wait_decode"  # the decoders that wait for a future first
# Type names longer than this in a walker's name are cut, a digest of the type added.
_LONGEST_TYPE_NAME = 40


def movable_types(interface: Interface) -> tuple[TypeRef, ...]:
    """Types whose values hold tensors (moved, cast), inner ones first."""
    return _distinct(
        (type_ for method in interface.methods for type_ in method.types),
        lambda type_: type_.contains_tensor,
    )


def decodable_types(interface: Interface) -> tuple[TypeRef, ...]:
    """Result types whose values hold NamedTuples (decoded), inner ones first."""
    return _distinct(
        (method.returns for method in interface.methods),
        lambda type_: type_.contains_named_tuple,
    )


def wait_decoder_name(interface: Interface, type_: TypeRef) -> str:
    """The generated function that waits for a future of ``type_`` and decodes its value."""
    return f"{INTERNAL_PREFIX}{_WAIT}_{_type_names(interface)[str(type_)]}"


def walker_name(interface: Interface, kind: str, type_: TypeRef) -> str:
    """What generated code calls to walk a value of ``type_`` with a walker of ``kind``
    ("move", "decode", "cast", "restore"): for a tensor the contract's leaf helper
    (``_rm.move_tensor``), else the generated function named after the type
    (``_rm_move_list_Tensor``)."""
    if type_.kind is Kind.TENSOR:
        return _TENSOR_HELPERS[kind]
    return f"{INTERNAL_PREFIX}{kind}_{_type_names(interface)[str(type_)]}"


class Walker:
    """One generated walker: a function that rebuilds a value of ``type`` container by
    container, down to its tensors, which it hands to the contract's leaf helper of ``kind``
    (decoders: down to the NamedTuples, which they rebuild as the declared class)."""

    def __init__(self, interface: Interface, kind: str, type_: TypeRef) -> None:
        self._interface = interface
        self.kind = kind
        self.type = type_
        self.name = walker_name(interface, kind, type_)
        self.returns = str(type_)
        self.params = (f"value: {type_}", *_WALKER_PARAMS[kind])

    def inner(self, type_: TypeRef, expression: str) -> Expr:
        """``expression`` (of ``type_``, inside the value) walked: the call of its walker."""
        return walk(self._interface, self.kind, type_, expression, _WALKER_EXTRA[self.kind])

    @property
    def items(self) -> tuple[Expr, ...]:
        """A tuple's or NamedTuple's items, walked. A mover reads a NamedTuple by field (it
        walks the module's own value); the others by position (a NamedTuple that crossed
        TorchScript's wire is a plain tuple)."""
        by_field = self.kind == "move" and self.type.kind is Kind.NAMED_TUPLE
        return tuple(
            self.inner(arg, f"value.{field}" if by_field else f"value[{index}]")
            for index, (arg, field) in enumerate(zip(self.type.args, self._fields(), strict=True))
        )

    @property
    def element(self) -> str:
        """A list's item, or a dict's ``key: item``, walked (in a comprehension)."""
        if self.type.kind is Kind.DICT:
            return f"key: {self.inner(self.type.args[1], 'item')}"
        return str(self.inner(self.type.args[0], "item"))

    @property
    def optional(self) -> Expr:
        """An Optional's value, walked, where it is not None."""
        return self.inner(self.type.args[0], "value")

    @property
    def union_cases(self) -> tuple[tuple[str, Expr], ...]:
        """A union's members that hold tensors, each with its walked value (TorchScript
        refines ``value`` by a parameterized isinstance check; Python cannot)."""
        return tuple(
            (str(member), self.inner(member, "value"))
            for member in self.type.args
            if member.contains_tensor
        )

    def _fields(self) -> tuple[str, ...]:
        return self.type.fields or tuple("" for _ in self.type.args)


def walk(
    interface: Interface,
    kind: str,
    type_: TypeRef,
    expression: str | Expr,
    extra: Sequence[str],
) -> Expr:
    """``expression`` (of ``type_``) walked by the walker of ``kind``, which takes ``extra``
    beside the value; the expression itself where nothing in the type needs walking."""
    needed = type_.contains_named_tuple if kind == "decode" else type_.contains_tensor
    if not needed:
        return Expr("", (expression,))
    return Expr(walker_name(interface, kind, type_), (expression, *extra))


@functools.cache
def _type_names(interface: Interface) -> dict[str, str]:
    """Every type the interface's signatures hold (inner ones included) -> the part of its
    walkers' names that says which type they handle: ``list_Tensor``, ``dict_str_Scored``,
    ``Tensor_or_None``. Where two types would get the same name (nesting that the name does
    not show, a class named like a container, a method's helper of that name), each gets a
    short digest of its type."""
    types: dict[str, TypeRef] = {}
    for method in interface.methods:
        for type_ in method.types:
            for inner in type_.walk():
                types.setdefault(str(inner), inner)
    by_name: dict[str, list[str]] = {}
    for text, type_ in types.items():
        by_name.setdefault(_type_name(type_), []).append(text)
    taken = _method_helpers(interface)
    names = {}
    for name, texts in by_name.items():
        clash = len(texts) > 1 or any(
            f"{INTERNAL_PREFIX}{kind}_{name}" in taken for kind in (*_WALKER_PARAMS, _WAIT)
        )
        for text in texts:
            if clash or len(name) > _LONGEST_TYPE_NAME:
                names[text] = f"{name[: _LONGEST_TYPE_NAME - 7]}_{_digest(text)}"
            else:
                names[text] = name
    return names


def _type_name(type_: TypeRef) -> str:
    if type_.kind is Kind.LIST:
        return f"list_{_type_name(type_.args[0])}"
    if type_.kind is Kind.DICT:
        return f"dict_{_type_name(type_.args[0])}_{_type_name(type_.args[1])}"
    if type_.kind is Kind.TUPLE:
        return "_".join(["tuple", *map(_type_name, type_.args)])
    if type_.kind is Kind.OPTIONAL:
        return f"{_type_name(type_.args[0])}_or_None"
    if type_.kind is Kind.UNION:
        return "_or_".join(map(_type_name, type_.args))
    return re.sub(r"\W", "_", type_.name)


def _method_helpers(interface: Interface) -> set[str]:
    """The names of the module-level helpers generated per method."""
    return {
        f"{INTERNAL_PREFIX}{method.name}{suffix}"
        for method in interface.methods
        for suffix in ("_hints", "_wire_result")
    }


def _distinct(
    types: Iterable[TypeRef], predicate: Callable[[TypeRef], bool]
) -> tuple[TypeRef, ...]:
    """Every distinct type in ``types`` and inside them for which ``predicate`` holds, inner
    types before the types holding them, in order of appearance."""
    found: dict[str, TypeRef] = {}
    for type_ in types:
        for inner in type_.walk():
            if predicate(inner):
                found.setdefault(str(inner), inner)
    return tuple(found.values())


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:6]
