"""Reading an interface class into the model (``remote_module._generator.model``), with every
check generated code needs: names it could not use, types it cannot carry, defaults that are
not literals, and, for a ``@torch.jit.interface``, agreement with the schema TorchScript
compiled. The CLI and the runtime both parse here, so both check the same.

Example::

    >>> from remote_module._generator.parse import parse_interface
    >>> parse_interface(MyModuleInterface).qualified_name
    'mypkg.scorer.MyModuleInterface'
"""

from __future__ import annotations

import builtins
import inspect
import keyword
import math
import types
import typing
from collections.abc import Callable
from typing import Any

import torch

from remote_module import _compat, _shared
from remote_module._generator.model import (
    Argument,
    Interface,
    InterfaceKind,
    Kind,
    Method,
    TypeRef,
    string_literal,
)
from remote_module._generator.source import decorated_script, type_hints

__all__ = ["interface_kind", "parse_interface", "parse_type", "render_literal"]

_REMOTE_TWIN_SUFFIXES = (_shared.WIRE_SUFFIX, _shared.KEYED_SUFFIX)


def parse_interface(interface_cls: object, kind: InterfaceKind | None = None) -> Interface:
    """Read ``interface_cls`` into an :class:`Interface`.

    ``interface_cls`` is a class decorated with ``@torch.jit.interface`` or a
    ``typing.Protocol`` whose methods are fully annotated; it has a ``forward``. Anything else
    raises ``ValueError`` naming the class (and the method and argument). ``kind`` reads it as
    that family whatever it is (the CLI's check of a class TorchScript refused to compile).
    """
    if not inspect.isclass(interface_cls):
        raise ValueError(
            f"{interface_cls!r} is not a class: expected a class decorated with "
            "@torch.jit.interface or a typing.Protocol"
        )
    qualified = f"{interface_cls.__module__}.{interface_cls.__qualname__}"
    kind = kind or interface_kind(interface_cls)
    if kind is None:
        raise ValueError(
            f"{qualified} is neither decorated with @torch.jit.interface nor a typing.Protocol"
        )
    if "." in interface_cls.__qualname__:
        raise ValueError(
            f"{qualified} is not defined at module level: generated code must import it"
        )
    _check_importable(qualified, interface_cls)
    # Dunders, and private methods (``def __m``, which Python stores mangled as
    # ``_Class__m``): not part of the interface, as TorchScript reads it too.
    functions = [
        (name, value)
        for name, value in vars(interface_cls).items()
        if inspect.isfunction(value)
        and not name.startswith("__")
        and not value.__name__.startswith("__")
    ]
    if "forward" not in dict(functions):
        raise ValueError(f"{qualified} has no method 'forward'")
    # forward first, then the others in declaration order (a stable sort).
    functions.sort(key=lambda item: item[0] != "forward")
    methods = tuple(_parse_method(qualified, kind, name, fn) for name, fn in functions)
    _check_method_names(qualified, methods)
    interface = Interface(interface_cls.__module__, interface_cls.__qualname__, kind, methods)
    _check_named_types(qualified, interface)
    _check_method_names_against_types(interface)
    _cross_check_with_torchscript(interface_cls, interface)
    return interface


def interface_kind(cls: type) -> InterfaceKind | None:
    """Which family ``cls`` belongs to, or None when it is no interface."""
    if _shared.is_script_interface(cls):
        return InterfaceKind.SCRIPT
    if getattr(cls, "_is_protocol", False) and cls is not typing.Protocol:
        return InterfaceKind.PROTOCOL
    return None


def _parse_method(interface: str, kind: InterfaceKind, name: str, fn: Callable[..., Any]) -> Method:
    where = f"{interface}.{name}"
    _check_name(where, "method", name)
    hints = type_hints(fn, where, "argument")
    parameters = list(inspect.signature(fn).parameters.values())
    if not parameters or parameters[0].name != "self":
        raise ValueError(f"{where}: the first parameter must be 'self'")
    arguments = []
    for param in parameters[1:]:
        arg_where = f"{where}, argument '{param.name}'"
        if param.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            raise ValueError(
                f"{arg_where}: {param.kind.description} parameters are not supported in interfaces"
            )
        _check_name(where, "argument", param.name)
        if param.name not in hints:
            # TorchScript would read it as a Tensor: say so instead of guessing.
            raise ValueError(f"{arg_where} has no type annotation; annotate it")
        type_ = parse_type(hints[param.name], arg_where, kind)
        default = None
        if param.default is not inspect.Parameter.empty:
            default = render_literal(param.default, arg_where)
        arguments.append(Argument(param.name, type_, default))
    if "return" not in hints:
        raise ValueError(f"{where} has no return annotation; annotate it")
    returns = parse_type(hints["return"], f"{where}, return type", kind)
    return Method(name, tuple(arguments), returns)


_SCALARS: dict[Any, str] = {
    int: "int",
    float: "float",
    bool: "bool",
    str: "str",
    complex: "complex",
    torch.device: "torch.device",
    torch.dtype: "torch.dtype",
    typing.Any: "Any",
}
_DICT_KEYS = ("str", "int", "float", "bool", "Tensor", "complex")


def parse_type(annotation: Any, where: str, kind: InterfaceKind = InterfaceKind.SCRIPT) -> TypeRef:
    """Read a Python annotation into a :class:`TypeRef`; ``where`` names it in errors."""
    if annotation is None or annotation is type(None):
        return TypeRef(Kind.NONE, "None")
    if annotation is torch.Tensor:
        return TypeRef(Kind.TENSOR, "Tensor")
    if annotation in _SCALARS:
        return TypeRef(Kind.SCALAR, _SCALARS[annotation])
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (list, typing.List):  # noqa: UP006 - both spellings reach us
        if len(args) != 1:
            raise ValueError(f"{where}: list needs an element type")
        return TypeRef(Kind.LIST, args=(parse_type(args[0], where, kind),))
    if origin in (tuple, typing.Tuple):  # noqa: UP006
        if len(args) == 2 and args[1] is Ellipsis:
            raise ValueError(f"{where}: tuple[T, ...] is not supported by TorchScript")
        if args == ((),):  # Tuple[()]
            args = ()
        return TypeRef(Kind.TUPLE, args=tuple(parse_type(item, where, kind) for item in args))
    if origin in (dict, typing.Dict):  # noqa: UP006
        if len(args) != 2:
            raise ValueError(f"{where}: dict needs a key and a value type")
        key, value = (parse_type(item, where, kind) for item in args)
        if str(key) not in _DICT_KEYS:
            raise ValueError(f"{where}: dict keys of type {key} are not supported")
        return TypeRef(Kind.DICT, args=(key, value))
    if origin in (typing.Union, types.UnionType):
        members = tuple(parse_type(item, where, kind) for item in args if item is not type(None))
        if len(members) == 1 and len(args) == 2:
            return TypeRef(Kind.OPTIONAL, args=members)
        if len(members) != len(args):
            members += (TypeRef(Kind.NONE, "None"),)
        if any(member.contains_named_tuple for member in members):
            raise ValueError(
                f"{where}: a union holding a NamedTuple is not supported (its results could "
                "not be given back as that NamedTuple); use Optional or separate methods"
            )
        return TypeRef(Kind.UNION, args=members)
    if inspect.isclass(annotation):
        return _parse_named_type(annotation, where, kind)
    raise ValueError(f"{where}: unsupported type {annotation!r}")


def _parse_named_type(cls: type, where: str, kind: InterfaceKind) -> TypeRef:
    qualname = cls.__qualname__
    if "<locals>" in qualname or "." in qualname:
        raise ValueError(
            f"{where}: type {cls.__module__}.{qualname} must be defined at module level "
            "so the generated module can import it"
        )
    _check_importable(where, cls)
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        hints = type_hints(cls, f"{where}, type {cls.__module__}.{qualname}", "field")
        fields = tuple(cls._fields)
        field_types = tuple(
            parse_type(hints[name], f"{where}, field '{name}'", kind) for name in fields
        )
        return TypeRef(
            Kind.NAMED_TUPLE, cls.__name__, field_types, cls.__module__, qualname, fields
        )
    # A Protocol's methods run eagerly, so any class of the user's may cross (pickled); a
    # TorchScript interface's only script classes.
    user_class = cls.__module__ != "builtins"
    if (kind is InterfaceKind.PROTOCOL and user_class) or _is_script_class(cls):
        return TypeRef(Kind.CLASS, cls.__name__, (), cls.__module__, qualname)
    if user_class:
        raise ValueError(
            f"{where}: type {cls.__module__}.{qualname} is a plain class; decorate it with "
            "@torch.jit.script or make it a NamedTuple (TorchScript would guess the types "
            "of its attributes)"
        )
    raise ValueError(
        f"{where}: unsupported type {cls.__module__}.{qualname} (expected a Tensor, a "
        "scalar, a container, a NamedTuple or a @torch.jit.script class)"
    )


def _is_script_class(cls: type) -> bool:
    """A TorchScript interface, or a class decorated with ``@torch.jit.script``. TorchScript
    also compiles, unasked, a plain class an interface names, guessing its attributes' types
    (an unannotated one becomes a Tensor): that one is refused, as upstream documents none."""
    if _shared.is_script_interface(cls):
        return True
    return _compat.script_class_of(cls) is not None and decorated_script(cls)


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
        return string_literal(value)
    if type(value) is tuple:
        items = [render_literal(item, where) for item in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    raise ValueError(
        f"{where}: default value {value!r} is not a literal (numbers, strings, bools, None, "
        "or tuples of those)"
    )


# --- Names generated code could not use ---------------------------------------------------

# A method named like a builtin would shadow it for the type hints of later methods.
_BUILTIN_NAMES = frozenset(dir(builtins))
# Globals of the generated modules that a method or argument name would shadow.
_GENERATED_GLOBALS = frozenset(
    {
        "torch",
        "Tensor",
        "RRef",
        "Future",
        "Module",
        "Callable",
        "Any",
        "TYPE_CHECKING",
        _shared.GENERATOR_VERSION,
        _shared.INTERFACE,
        _shared.FINGERPRINT,
        _shared.MOVES_TENSORS,
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
        or name.startswith(_shared.INTERNAL_PREFIX)
        or name in _GENERATED_GLOBALS
        or name.startswith(_shared.REMOTE_PREFIX)
        or (what == "method" and name in _BUILTIN_NAMES)
    ):
        raise ValueError(f"{where}: {what} name {name!r} is not allowed in generated code")


def _check_method_names(interface: str, methods: tuple[Method, ...]) -> None:
    reserved = _shared.RESERVED_NAMES
    names = {method.name for method in methods}
    for method in methods:
        for generated in (method.name, f"{method.name}_async"):
            if generated in reserved:
                raise ValueError(
                    f"{interface}.{method.name}: the generated method {generated!r} would "
                    "shadow a RemoteModule attribute; rename it"
                )
        if f"{method.name}_async" in names:
            raise ValueError(
                f"{interface}.{method.name}: its generated twin {method.name + '_async'!r} "
                "clashes with the interface's own method of that name"
            )
        for suffix in _REMOTE_TWIN_SUFFIXES:  # _remote_<name><suffix> is a twin's name
            if f"{method.name}{suffix}" in names:
                twin = f"{_shared.REMOTE_PREFIX}{method.name}{suffix}"
                raise ValueError(
                    f"{interface}.{method.name}: the remote function of its method "
                    f"{method.name + suffix!r} would take the name of {method.name!r}'s "
                    f"{suffix[1:]} twin, {twin}; rename one of them"
                )


def _check_method_names_against_types(interface: Interface) -> None:
    """Methods become functions of the generated module, beside the interface, the types it
    names and its typed class: a method may not take one of their names."""
    taken = {interface.name, f"Remote{interface.name}", *(t.name for t in interface.named_types)}
    for method in interface.methods:
        for generated in (method.name, f"{method.name}_async"):
            if generated in taken:
                raise ValueError(
                    f"{interface.qualified_name}.{method.name}: the generated function "
                    f"{generated!r} would shadow a class of the generated module; rename it"
                )


def _check_named_types(interface: str, parsed: Interface) -> None:
    by_name: dict[str, str] = {}
    for method in parsed.methods:
        for type_ in method.types:
            for named in type_.walk():
                if named.kind not in (Kind.NAMED_TUPLE, Kind.CLASS):
                    continue
                origin = f"{named.module}.{named.qualname}"
                if by_name.setdefault(named.name, origin) != origin:
                    raise ValueError(
                        f"{interface}.{method.name}: types {by_name[named.name]} and {origin} "
                        f"share the name {named.name!r}; rename one of them"
                    )


def _cross_check_with_torchscript(interface_cls: type, model: Interface) -> None:
    """The Python signature is the source of truth (it keeps defaults); TorchScript's compiled
    schema must agree with it on method and argument names."""
    compiled_name = getattr(interface_cls, "__torch_script_interface__", None)
    if not isinstance(compiled_name, str):
        return
    try:
        compiled = _compat.script_interface_named(compiled_name)
    except RuntimeError:
        compiled = None
    if compiled is None:
        return  # TorchScript is disabled or unavailable: nothing to compare with
    for method in model.methods:
        schema = compiled.getMethod(method.name)
        if schema is None:
            raise ValueError(
                f"{model.qualified_name}.{method.name}: TorchScript did not compile it"
            )
        names = [argument.name for argument in schema.arguments][1:]
        if names != [argument.name for argument in method.arguments]:
            raise ValueError(
                f"{model.qualified_name}.{method.name}: TorchScript compiled arguments {names}, "
                f"the Python signature has {[a.name for a in method.arguments]}"
            )
