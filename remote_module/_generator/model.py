"""The typed model of an interface: interface -> methods -> arguments -> types.

An interface is a ``@torch.jit.interface`` class (the scriptable family of generated code) or
a ``typing.Protocol`` (the eager family), read by ``remote_module._generator.parse``. The model is
frozen data with tuple fields (NamedTuples: immutable and hashable like frozen dataclasses, at
a fifth of their import cost, which the first construction of an interface without build-time
code pays), and prints itself back as source: ``str(method)`` is the method's signature, in
the builtin spelling (``list[Tensor]``, ``Tensor | None``) that TorchScript, type checkers and
linters all accept. Names and declarations for generated code are views
(``remote_module._generator.api``); the code itself is in the templates.

Example::

    >>> from remote_module.codegen import parse_interface
    >>> print(parse_interface(MyModuleInterface).methods[0])
    def forward(self, x: Tensor, scale: float = 1.0) -> Tensor
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterator
from typing import NamedTuple

__all__ = [
    "Argument",
    "Interface",
    "InterfaceKind",
    "Kind",
    "Method",
    "TypeRef",
    "string_literal",
]


class Kind(enum.Enum):
    """What a :class:`TypeRef` is."""

    TENSOR = "tensor"
    SCALAR = "scalar"  # int, float, bool, str, complex, torch.device, torch.dtype, Any
    NONE = "none"
    LIST = "list"
    TUPLE = "tuple"
    DICT = "dict"
    OPTIONAL = "optional"
    UNION = "union"
    NAMED_TUPLE = "named_tuple"
    CLASS = "class"  # a @torch.jit.script class (or any class, in a Protocol interface)


class InterfaceKind(enum.Enum):
    """Which family of generated code an interface gets."""

    SCRIPT = "script"  # @torch.jit.interface: scripted owner, TorchScript remote functions
    PROTOCOL = "protocol"  # typing.Protocol: eager owner, Python remote functions


class TypeRef(NamedTuple):
    """A type as the generator knows it.

    ``name`` is the scalar's or named type's name as generated code writes it; containers
    keep their element types in ``args``. Named types (``NAMED_TUPLE``, ``CLASS``) also
    carry where generated code imports them from and, for a NamedTuple, its field names (the
    field types are ``args``).
    """

    kind: Kind
    name: str = ""
    args: tuple[TypeRef, ...] = ()
    module: str = ""
    qualname: str = ""
    fields: tuple[str, ...] = ()

    def __str__(self) -> str:
        """The annotation, in builtin spelling: ``dict[str, list[Tensor]]``, ``int | None``."""
        if self.kind is Kind.LIST:
            return f"list[{self.args[0]}]"
        if self.kind is Kind.TUPLE:
            return f"tuple[{', '.join(map(str, self.args)) or '()'}]"
        if self.kind is Kind.DICT:
            return f"dict[{self.args[0]}, {self.args[1]}]"
        if self.kind is Kind.OPTIONAL:
            return f"{self.args[0]} | None"
        if self.kind is Kind.UNION:
            return " | ".join(map(str, self.args))
        return self.name

    @property
    def contains_tensor(self) -> bool:
        """Whether a value of this type can hold a tensor that generated code moves or casts.
        Dict keys stay as they are (moving them would rehash); script classes are opaque."""
        if self.kind is Kind.TENSOR:
            return True
        if self.kind is Kind.DICT:
            return self.args[1].contains_tensor
        return self.kind is not Kind.CLASS and any(arg.contains_tensor for arg in self.args)

    @property
    def contains_named_tuple(self) -> bool:
        """Whether a value of this type holds a NamedTuple (which TorchScript's wire loses)."""
        if self.kind is Kind.NAMED_TUPLE:
            return True
        if self.kind is Kind.DICT:
            return self.args[1].contains_named_tuple
        return any(arg.contains_named_tuple for arg in self.args)

    def walk(self) -> Iterator[TypeRef]:
        """This type and every type inside it, inner types first (post-order)."""
        for arg in self.args:
            yield from arg.walk()
        yield self


class Argument(NamedTuple):
    """One argument of an interface method, as written in its signature."""

    name: str
    type: TypeRef
    default: str | None = None  # the default as source text, or None when there is none

    def __str__(self) -> str:
        """``name: Type`` or ``name: Type = default``."""
        text = f"{self.name}: {self.type}"
        return text if self.default is None else f"{text} = {self.default}"


class Method(NamedTuple):
    """One method of the interface; ``forward`` included."""

    name: str
    arguments: tuple[Argument, ...]
    returns: TypeRef

    def __str__(self) -> str:
        params = ", ".join(["self", *map(str, self.arguments)])
        return f"def {self.name}({params}) -> {self.returns}"

    @property
    def types(self) -> tuple[TypeRef, ...]:
        """The argument types, then the result type."""
        return (*(argument.type for argument in self.arguments), self.returns)


class Interface(NamedTuple):
    """An interface class, read into methods and the types they name."""

    module: str
    name: str
    kind: InterfaceKind
    methods: tuple[Method, ...]

    def __str__(self) -> str:
        return "\n".join([f"class {self.name}:", *(f"    {m}" for m in self.methods)])

    @property
    def qualified_name(self) -> str:
        """``module.Name``: how the generated code and its header name the interface."""
        return f"{self.module}.{self.name}"

    @property
    def fingerprint(self) -> str:
        """A stable digest of everything in the interface that changes the generated code."""
        named = "\n".join(
            f"{t.module}.{t.qualname}{t.fields}{tuple(str(a) for a in t.args)}"
            for t in self.named_types
        )
        text = f"{self.qualified_name}\n{self.kind.value}\n{self}\n{named}\n"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def named_types(self) -> tuple[TypeRef, ...]:
        """The NamedTuples and classes the signatures name, sorted by name."""
        found: dict[str, TypeRef] = {}
        for method in self.methods:
            for type_ in method.types:
                for inner in type_.walk():
                    if inner.kind in (Kind.NAMED_TUPLE, Kind.CLASS):
                        found[inner.name] = inner
        return tuple(found[name] for name in sorted(found))


def string_literal(text: str) -> str:
    """``repr(text)`` in the quotes formatters prefer: double, unless the text holds one."""
    literal = repr(text)
    if literal.startswith("'") and '"' not in text:
        return f'"{literal[1:-1]}"'
    return literal
