"""The typed model of a ``@torch.jit.interface`` class: interface -> methods -> arguments.

The model is parsed once from the class's Python annotations and signatures (TorchScript
drops default values, Python keeps them), is frozen, and renders itself: templates write
``{{ method.signature }}`` and never join commas or format defaults themselves.

Example::

    >>> from remote_module.codegen import parse_interface
    >>> print(parse_interface(MyModuleInterface).methods[0])
    def forward(self, x: Tensor, scale: float = 1.0) -> Tensor
"""

from __future__ import annotations

import builtins
import hashlib
import inspect
import keyword
import math
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "RESERVED_METHOD_NAMES",
    "Argument",
    "Interface",
    "Method",
    "TypeRef",
    "parse_interface",
]

# Names the generated remote functions use for their own parameters and locals.
_INTERNAL_PREFIX = "_rm_"

# Methods of RemoteModule itself; an interface method with one of these names (or whose
# ``_async`` twin has one) would shadow the runtime, so it is refused.
RESERVED_METHOD_NAMES = frozenset(
    {
        "on",
        "device",
        "is_device_map_set",
        "is_scriptable",
        "generated_methods",
        "module_rref",
        "timeout",
        "training",
        "remote_parameters",
        "get_module_rref",
        "init_from_module_rref",
        "remote_state_dict",
        "load_remote_state_dict",
        "train",
        "eval",
    }
    | {name for name in dir(torch.nn.Module) if not name.startswith("_")} - {"forward"}
)

_SCALARS: dict[Any, str] = {
    torch.Tensor: "Tensor",
    int: "int",
    float: "float",
    bool: "bool",
    str: "str",
    complex: "complex",
    torch.device: "torch.device",
    torch.dtype: "torch.dtype",
    typing.Any: "Any",
}


@dataclass(frozen=True)
class TypeRef:
    """A TorchScript type as the generator knows it.

    ``kind`` is one of ``tensor``, ``scalar``, ``none``, ``list``, ``tuple``, ``dict``,
    ``optional``, ``union``, ``named_tuple`` or ``class``. ``text`` is the annotation the
    generated code writes, e.g. ``Dict[str, List[Tensor]]``.
    """

    kind: str
    text: str
    args: tuple[TypeRef, ...] = ()
    # For named types (``named_tuple``, ``class``): where the generated module imports it.
    module: str = ""
    qualname: str = ""
    fields: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.text

    @property
    def contains_tensor(self) -> bool:
        """True when a value of this type can hold a tensor the generator knows how to move."""
        if self.kind == "tensor":
            return True
        if self.kind == "dict":  # keys stay where they are: moving them would rehash
            return self.args[1].contains_tensor
        return self.kind != "class" and any(arg.contains_tensor for arg in self.args)

    @property
    def mover_name(self) -> str:
        """Name of the generated function that moves the tensors inside a value of this type."""
        digest = hashlib.sha256(self.text.encode()).hexdigest()[:10]
        return f"{_INTERNAL_PREFIX}move_{digest}"

    @property
    def mover_lines(self) -> tuple[str, ...]:
        """Body of this type's mover: ``value`` in, the same value with its tensors on
        ``device`` out. Only types that hold tensors have one."""
        if self.kind == "tensor":
            return ("return value.to(device)",)
        if self.kind == "list":
            return (f"return [{self.args[0].move('item')} for item in value]",)
        if self.kind == "dict":
            return (f"return {{key: {self.args[1].move('item')} for key, item in value.items()}}",)
        if self.kind == "optional":
            return ("if value is None:", "    return None", f"return {self.args[0].move('value')}")
        if self.kind == "tuple":
            items = [arg.move(f"value[{index}]") for index, arg in enumerate(self.args)]
            return (f"return ({', '.join(items)},)",)
        if self.kind == "named_tuple":
            items = [
                arg.move(f"value.{name}") for name, arg in zip(self.fields, self.args, strict=True)
            ]
            return (f"return {self.text}({', '.join(items)})",)
        if self.kind == "union":
            lines: list[str] = []
            for member in self.args:
                if member.contains_tensor:
                    lines += [
                        f"if isinstance(value, {member.text}):",
                        f"    return {member.move('value')}",
                    ]
            return (*lines, "return value")
        raise AssertionError(f"no mover for {self.text}")

    def move(self, expression: str, device: str = "device") -> str:
        """Source that moves the tensors in ``expression`` (of this type) to ``device``."""
        if not self.contains_tensor:
            return expression
        return f"{self.mover_name}({expression}, {device})"

    def named_types(self) -> Iterable[TypeRef]:
        """Every NamedTuple or script class this type mentions, itself included."""
        if self.kind in ("named_tuple", "class"):
            yield self
        for arg in self.args:
            yield from arg.named_types()

    def movable_types(self) -> Iterable[TypeRef]:
        """This type and every type inside it that needs a generated mover (post-order)."""
        if not self.contains_tensor:
            return
        for arg in self.args:
            yield from arg.movable_types()
        yield self


@dataclass(frozen=True)
class Argument:
    """One argument of an interface method, as written in its signature."""

    name: str
    type: TypeRef
    default: str | None = None  # the default as source text, or None when there is none

    def __str__(self) -> str:
        return self.decl

    @property
    def decl(self) -> str:
        """``name: Type`` or ``name: Type = default``."""
        text = f"{self.name}: {self.type.text}"
        return text if self.default is None else f"{text} = {self.default}"


@dataclass(frozen=True)
class Method:
    """One method of the interface; ``forward`` included."""

    name: str
    arguments: tuple[Argument, ...]
    returns: TypeRef

    def __str__(self) -> str:
        return f"def {self.name}({self.params_decl}) -> {self.returns.text}"

    @property
    def async_name(self) -> str:
        return f"{self.name}_async"

    @property
    def remote_name(self) -> str:
        """The function that runs on the owner (``_remote_forward`` for ``forward``)."""
        return f"_remote_{self.name}"

    @property
    def params_decl(self) -> str:
        """The parameter list of the caller-side stubs: ``self, x: Tensor, k: int = 1``."""
        return ", ".join(["self", *(arg.decl for arg in self.arguments)])

    @property
    def params_remote_decl(self) -> str:
        """The interface's arguments as the remote function declares them (no defaults)."""
        return "".join(f", {arg.name}: {arg.type.text}" for arg in self.arguments)

    @property
    def call_args(self) -> str:
        """The interface's arguments passed on by position: ``x, k``."""
        return ", ".join(arg.name for arg in self.arguments)

    @property
    def rpc_args(self) -> str:
        """The tuple the stubs send: module RRef, device, device-map flag, then the arguments."""
        names = ["self.module_rref", "self.device", "self.is_device_map_set"]
        return "(" + ", ".join(names + [arg.name for arg in self.arguments]) + ",)"

    @property
    def call_args_tuple(self) -> str:
        """The arguments as the body of a tuple display: ``x, k,`` (empty for none)."""
        return "".join(f"{arg.name}, " for arg in self.arguments).rstrip(" ")

    @property
    def hints(self) -> str:
        """The caller-side type checks as source: ``(("x", Tensor), ("k", int, 1),)``; a
        default, when there is one, is accepted as it is."""
        entries = "".join(
            f"({arg.name!r}, {arg.type.text}), "
            if arg.default is None
            else f"({arg.name!r}, {arg.type.text}, {arg.default}), "
            for arg in self.arguments
        )
        return f"({entries.rstrip(' ')})"

    @property
    def moved_arguments(self) -> tuple[Argument, ...]:
        return tuple(arg for arg in self.arguments if arg.type.contains_tensor)


@dataclass(frozen=True)
class Interface:
    """A ``@torch.jit.interface`` class, read into methods and the types they name."""

    module: str
    name: str
    methods: tuple[Method, ...]

    def __str__(self) -> str:
        return "\n".join([f"class {self.name}:", *(f"    {m}" for m in self.methods)])

    @property
    def qualified_name(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def fingerprint(self) -> str:
        """A stable digest of everything in the interface that changes the generated code."""
        named = "\n".join(
            f"{t.module}.{t.qualname}{t.fields}{tuple(a.text for a in t.args)}"
            for t in self.named_types
        )
        text = f"{self.qualified_name}\n{self}\n{named}\n"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def named_types(self) -> tuple[TypeRef, ...]:
        """The NamedTuples and script classes the signatures name, sorted by name."""
        found: dict[str, TypeRef] = {}
        for method in self.methods:
            for type_ in (method.returns, *(arg.type for arg in method.arguments)):
                for named in type_.named_types():
                    found[named.text] = named
        return tuple(found[name] for name in sorted(found))

    @property
    def imports(self) -> tuple[str, ...]:
        """Import lines the generated module needs for the interface and the types it names."""
        lines = [f"from {self.module} import {self.name} as _rm_module_interface_cls"]
        for named in self.named_types:
            alias = "" if named.text == named.qualname else f" as {named.text}"
            lines.append(f"from {named.module} import {named.qualname}{alias}")
        return tuple(lines)

    @property
    def movable_types(self) -> tuple[TypeRef, ...]:
        """Every type that needs a generated mover, inner types before the types holding them."""
        ordered: dict[str, TypeRef] = {}
        for method in self.methods:
            for type_ in (*(arg.type for arg in method.arguments), method.returns):
                for movable in type_.movable_types():
                    ordered.setdefault(movable.text, movable)
        return tuple(ordered.values())


def parse_interface(interface_cls: object, *, require_script_interface: bool = True) -> Interface:
    """Read ``interface_cls`` into an :class:`Interface`.

    Raises ``ValueError`` naming the class (and the method and argument) when it is not a
    class decorated with ``@torch.jit.interface``, has no ``forward``, or uses a type or
    default value the generator does not support.
    """
    if not inspect.isclass(interface_cls):
        raise ValueError(
            f"{interface_cls!r} is not a class: expected a class decorated with "
            "@torch.jit.interface"
        )
    qualified = f"{interface_cls.__module__}.{interface_cls.__qualname__}"
    if require_script_interface and not getattr(interface_cls, "__torch_script_interface__", False):
        raise ValueError(f"{qualified} is not decorated with @torch.jit.interface")
    if "." in interface_cls.__qualname__:
        raise ValueError(
            f"{qualified} is not defined at module level: generated code must import it"
        )
    _check_importable(qualified, interface_cls)
    functions = [
        (name, value)
        for name, value in vars(interface_cls).items()
        if inspect.isfunction(value) and not name.startswith("__")
    ]
    if "forward" not in dict(functions):
        raise ValueError(f"{qualified} has no method 'forward'")
    # forward first, then the others in declaration order (a stable sort).
    functions.sort(key=lambda item: item[0] != "forward")
    methods = tuple(_parse_method(qualified, name, fn) for name, fn in functions)
    _check_method_names(qualified, methods)
    interface = Interface(interface_cls.__module__, interface_cls.__qualname__, methods)
    _check_named_types(qualified, interface)
    return interface


def _parse_method(interface: str, name: str, fn: Callable[..., Any]) -> Method:
    where = f"{interface}.{name}"
    _check_name(where, "method", name)
    try:
        hints = typing.get_type_hints(fn)
    except Exception as error:  # a NameError or TypeError from a bad annotation
        raise ValueError(f"{where}: cannot resolve its annotations: {error}") from error
    parameters = list(inspect.signature(fn).parameters.values())
    if not parameters or parameters[0].name != "self":
        raise ValueError(f"{where}: the first parameter must be 'self'")
    arguments = []
    for param in parameters[1:]:
        arg_where = f"{where}, argument '{param.name}'"
        if param.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            raise ValueError(
                f"{arg_where}: {param.kind.description} parameters are not supported "
                "by TorchScript interfaces"
            )
        _check_name(where, "argument", param.name)
        # TorchScript reads an unannotated argument as a Tensor; so do we.
        type_ = parse_type(hints.get(param.name, torch.Tensor), arg_where)
        default = None
        if param.default is not inspect.Parameter.empty:
            default = render_literal(param.default, arg_where)
        arguments.append(Argument(param.name, type_, default))
    returns = parse_type(hints.get("return", torch.Tensor), f"{where}, return type")
    return Method(name, tuple(arguments), returns)


# A method named like a builtin would shadow it for the type hints of later methods.
_BUILTIN_NAMES = frozenset(dir(builtins))
# Globals of the generated module that a method or argument name would shadow.
_GENERATED_GLOBALS = frozenset(
    {
        "torch",
        "rpc",
        "Tensor",
        "RRef",
        "Future",
        "Any",
        "Dict",
        "List",
        "Optional",
        "Tuple",
        "Union",
        "GENERATOR_VERSION",
        "INTERFACE",
        "INTERFACE_FINGERPRINT",
        "MOVES_CPU_TENSORS_TO_DEVICE",
        "self",
    }
)


def _check_importable(where: str, cls: type) -> None:
    """Module and class names are written into ``from X import Y`` lines: identifiers only."""
    names = {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__name__": cls.__name__,
    }
    for attribute, value in names.items():
        parts = str(value).split(".") if attribute == "__module__" else [str(value)]
        if not all(part.isidentifier() and not keyword.iskeyword(part) for part in parts):
            raise ValueError(
                f"{where}: {attribute} {value!r} is not a plain dotted identifier, so generated "
                "code cannot import it"
            )


def _check_name(where: str, what: str, name: str) -> None:
    if (
        not name.isidentifier()
        or keyword.iskeyword(name)
        or name.startswith(_INTERNAL_PREFIX)
        or name in _GENERATED_GLOBALS
        or name.startswith("_remote_")
        or (what == "method" and name in _BUILTIN_NAMES)
    ):
        raise ValueError(f"{where}: {what} name {name!r} is not allowed in generated code")


def _check_method_names(interface: str, methods: tuple[Method, ...]) -> None:
    names = {method.name for method in methods}
    for method in methods:
        for generated in (method.name, method.async_name):
            if generated in RESERVED_METHOD_NAMES:
                raise ValueError(
                    f"{interface}.{method.name}: the generated method {generated!r} would "
                    "shadow a RemoteModule attribute; rename it"
                )
        if method.async_name in names:
            raise ValueError(
                f"{interface}.{method.name}: its generated twin {method.async_name!r} "
                "clashes with the interface's own method of that name"
            )


def _check_named_types(interface: str, parsed: Interface) -> None:
    by_text: dict[str, str] = {}
    for method in parsed.methods:
        for type_ in (method.returns, *(arg.type for arg in method.arguments)):
            for named in type_.named_types():
                origin = f"{named.module}.{named.qualname}"
                if by_text.setdefault(named.text, origin) != origin:
                    raise ValueError(
                        f"{interface}.{method.name}: types {by_text[named.text]} and {origin} "
                        f"share the name {named.text!r}; rename one of them"
                    )


def parse_type(annotation: Any, where: str) -> TypeRef:
    """Read a Python annotation into a :class:`TypeRef`; ``where`` names it in errors."""
    if annotation is None or annotation is type(None):
        return TypeRef("none", "None")
    if annotation in _SCALARS:
        kind = "tensor" if annotation is torch.Tensor else "scalar"
        return TypeRef(kind, _SCALARS[annotation])
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (list, typing.List):  # noqa: UP006 - both spellings reach us
        (item,) = args or (None,)
        if item is None:
            raise ValueError(f"{where}: List needs an element type")
        inner = parse_type(item, where)
        return TypeRef("list", f"List[{inner.text}]", (inner,))
    if origin in (tuple, typing.Tuple):  # noqa: UP006
        if len(args) == 2 and args[1] is Ellipsis:
            raise ValueError(f"{where}: Tuple[T, ...] is not supported by TorchScript")
        if args == ((),):  # Tuple[()]
            args = ()
        items = tuple(parse_type(item, where) for item in args)
        body = ", ".join(item.text for item in items) if items else "()"
        return TypeRef("tuple", f"Tuple[{body}]", items)
    if origin in (dict, typing.Dict):  # noqa: UP006
        if len(args) != 2:
            raise ValueError(f"{where}: Dict needs a key and a value type")
        key, value = (parse_type(item, where) for item in args)
        if key.text not in ("str", "int", "float", "bool", "Tensor", "complex"):
            raise ValueError(f"{where}: Dict keys of type {key.text} are not supported")
        return TypeRef("dict", f"Dict[{key.text}, {value.text}]", (key, value))
    if origin in (typing.Union, types.UnionType):
        members = [item for item in args if item is not type(None)]
        inner_types = tuple(parse_type(item, where) for item in members)
        if len(members) == 1 and len(args) == 2:
            (inner,) = inner_types
            return TypeRef("optional", f"Optional[{inner.text}]", (inner,))
        body = ", ".join(item.text for item in inner_types)
        if len(members) != len(args):
            body += ", None"
        return TypeRef("union", f"Union[{body}]", inner_types)
    if inspect.isclass(annotation):
        return _parse_named_type(annotation, where)
    raise ValueError(f"{where}: unsupported type {annotation!r}")


def _parse_named_type(cls: type, where: str) -> TypeRef:
    qualname = cls.__qualname__
    if "<locals>" in qualname or "." in qualname:
        raise ValueError(
            f"{where}: type {cls.__module__}.{qualname} must be defined at module level "
            "so the generated module can import it"
        )
    _check_importable(where, cls)
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        hints = typing.get_type_hints(cls)
        fields = tuple(cls._fields)
        field_types = tuple(parse_type(hints[name], f"{where}, field '{name}'") for name in fields)
        return TypeRef("named_tuple", cls.__name__, field_types, cls.__module__, qualname, fields)
    scripted = torch.jit._state._get_script_class(cls) is not None
    if scripted or getattr(cls, "__torch_script_interface__", False):
        return TypeRef("class", cls.__name__, (), cls.__module__, qualname)
    raise ValueError(
        f"{where}: unsupported type {cls.__module__}.{qualname} (expected a Tensor, a "
        "scalar, a typing container, a NamedTuple or a @torch.jit.script class)"
    )


def render_literal(value: object, where: str) -> str:
    """Source text for a default value; only literals pass, so no code is generated from
    an arbitrary expression."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if type(value) is int:
        return repr(value)
    if type(value) is float:
        if math.isfinite(value):
            return repr(value)
        return f'float("{value}")'
    if type(value) is str:
        return repr(value)
    if type(value) is tuple:
        items = [render_literal(item, where) for item in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    raise ValueError(
        f"{where}: default value {value!r} is not a literal (numbers, strings, bools, None, "
        "or tuples of those)"
    )
