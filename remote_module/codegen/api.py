"""Views of the model for generated code: one name or one declaration at a time.

Like torchgen's ``api/`` layer, these turn the model into the pieces a template needs
(:class:`Binding` declarations, names of generated functions, import lines); the templates and
their macros assemble the code. Nothing here emits more than one line of code.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from remote_module._contract import (
    CALL_PREFIX,
    INTERNAL_PREFIX,
    KEYED_SUFFIX,
    PREFIX_SCRIPT_TYPES,
    REMOTE_PREFIX,
    WIRE_SUFFIX,
)
from remote_module.codegen.model import Interface, InterfaceKind, Method, TypeRef

__all__ = [
    "Binding",
    "ImportLine",
    "async_name",
    "caller_bindings",
    "decodable_types",
    "decoder_name",
    "hints_name",
    "imports",
    "module_file_name",
    "movable_types",
    "mover_name",
    "prefix_values",
    "remote_bindings",
    "remote_name",
    "typed_class_name",
]


@dataclass(frozen=True)
class Binding:
    """One parameter as generated code declares it."""

    name: str
    annotation: str
    default: str | None = None

    def decl(self) -> str:
        """``name: annotation`` or ``name: annotation = default``."""
        text = f"{self.name}: {self.annotation}"
        return text if self.default is None else f"{text} = {self.default}"


@dataclass(frozen=True)
class ImportLine:
    """``from module import names``; names sorted as linters sort them (classes, then the rest)."""

    module: str
    names: tuple[str, ...]


def remote_name(method: Method) -> str:
    """The function that runs on the owner (``_remote_forward`` for ``forward``)."""
    return f"{REMOTE_PREFIX}{method.name}"


def async_name(method: Method) -> str:
    return f"{method.name}_async"


def hints_name(method: Method) -> str:
    """The module-level tuple of caller-side type checks for ``method``."""
    return f"{INTERNAL_PREFIX}{method.name}_hints"


def typed_class_name(interface: Interface) -> str:
    """The typed RemoteModule subclass generated for ``interface``."""
    return f"Remote{interface.name}"


def caller_bindings(method: Method) -> tuple[Binding, ...]:
    """The interface's parameters as the caller-side methods declare them (defaults kept)."""
    return tuple(Binding(arg.name, str(arg.type), arg.default) for arg in method.arguments)


def remote_bindings(interface: Interface, method: Method) -> tuple[Binding, ...]:
    """The remote function's parameters: the call prefix, then the interface's arguments
    without defaults (callers always send every argument)."""
    return prefix_bindings(interface) + tuple(
        Binding(arg.name, str(arg.type)) for arg in method.arguments
    )


def prefix_bindings(interface: Interface) -> tuple[Binding, ...]:
    """The call prefix as remote functions declare it: a TorchScript remote function takes
    the module's interface-typed RRef; an eager one a reference (its key in the owner's table,
    or its RRef) that ``owner_module`` resolves."""
    script = interface.kind is InterfaceKind.SCRIPT
    return tuple(
        Binding(
            prefix_parameter(name, script),
            PREFIX_SCRIPT_TYPES[name].format(interface=interface.name) if script else "Any",
        )
        for name in CALL_PREFIX
    )


def argument_decls(method: Method) -> tuple[str, ...]:
    """The interface's arguments declared without their defaults: ``x: Tensor``."""
    return tuple(f"{arg.name}: {arg.type}" for arg in method.arguments)


def prefix_parameter(attribute: str, script: bool = True) -> str:
    """The remote function's parameter for the call-prefix value ``attribute``."""
    if attribute == "module_rref" and not script:
        return f"{INTERNAL_PREFIX}module_ref"  # a key or an RRef
    return f"{INTERNAL_PREFIX}{attribute}"


def prefix_values(receiver: str) -> tuple[str, ...]:
    """What a TorchScript caller sends as the call prefix: ``receiver.<attribute>`` each."""
    return tuple(f"{receiver}.{name}" for name in CALL_PREFIX)


def movable_types(interface: Interface) -> tuple[TypeRef, ...]:
    """Types that need a generated mover (they hold tensors), inner ones first."""
    return _distinct(
        (type_ for method in interface.methods for type_ in method.types),
        lambda type_: type_.contains_tensor,
    )


def mover_name(type_: TypeRef) -> str:
    """The generated function that moves the tensors inside a value of ``type_``."""
    return f"{INTERNAL_PREFIX}move_{_digest(type_)}"


def decodable_types(interface: Interface) -> tuple[TypeRef, ...]:
    """Result types that need a generated decoder (they hold NamedTuples), inner ones first."""
    return _distinct(
        (method.returns for method in interface.methods),
        lambda type_: type_.contains_named_tuple,
    )


def waited_types(interface: Interface) -> tuple[TypeRef, ...]:
    """Method result types whose futures need a decoding callback, in method order."""
    found: dict[str, TypeRef] = {}
    for method in interface.methods:
        if method.returns.contains_named_tuple:
            found.setdefault(str(method.returns), method.returns)
    return tuple(found.values())


def caster_name(type_: TypeRef) -> str:
    """The generated function that casts the floating tensors in ``type_`` to a wire dtype."""
    return f"{INTERNAL_PREFIX}cast_{_digest(type_)}"


def restorer_name(type_: TypeRef) -> str:
    """The generated function that casts them back to their own dtypes."""
    return f"{INTERNAL_PREFIX}restore_{_digest(type_)}"


def uses_wire(method: Method) -> bool:
    """Whether ``method`` carries tensors, so that a ``wire_dtype`` changes what it sends."""
    return any(type_.contains_tensor for type_ in method.types)


def wire_name(method: Method) -> str:
    """The remote function of ``method`` for RemoteModules with a ``wire_dtype``."""
    return f"{remote_name(method)}{WIRE_SUFFIX}"


def keyed_name(method: Method) -> str:
    """The TorchScript remote function of ``method`` that finds the module by its key in the
    owner's table (Python calls) instead of through its RRef (TorchScript calls)."""
    return f"{remote_name(method)}{KEYED_SUFFIX}"


def keyed_bindings(interface: Interface, method: Method) -> tuple[Binding, ...]:
    """The keyed remote function's parameters: the module's key, then the rest of
    :func:`remote_bindings`."""
    key = Binding(f"{INTERNAL_PREFIX}module_key", "int")
    return (key, *remote_bindings(interface, method)[1:])


def script_sender_name(method: Method, future: bool, wire: bool) -> str:
    """The function a TorchScript-family caller method's TorchScript branch calls."""
    twin = "_async" if future else ""
    return f"{INTERNAL_PREFIX}{method.name}{twin}_script{'_wire' if wire else ''}"


def python_sender_name(method: Method, future: bool) -> str:
    """The function a TorchScript-family caller method's Python branch calls."""
    return f"{INTERNAL_PREFIX}{method.name}{'_async' if future else ''}_python"


def wire_reply_name(method: Method) -> str:
    """The function that turns a wire call's reply into ``method``'s result."""
    return f"{INTERNAL_PREFIX}{method.name}_wire_reply"


def wire_result_name(method: Method) -> str:
    """The same from the reply's future."""
    return f"{INTERNAL_PREFIX}{method.name}_wire_result"


def decoder_name(type_: TypeRef) -> str:
    """The generated function that gives a value of ``type_`` its NamedTuple classes back."""
    return f"{INTERNAL_PREFIX}decode_{_digest(type_)}"


def imports(interface: Interface) -> tuple[ImportLine, ...]:
    """What the generated module imports of the user's code: the interface and every type
    its signatures name, one line per module, sorted by module."""
    by_module: dict[str, set[str]] = {interface.module: {interface.name}}
    for named in interface.named_types:
        by_module.setdefault(named.module, set()).add(named.name)
    return tuple(
        ImportLine(module, tuple(sorted(names, key=_import_order)))
        for module, names in sorted(by_module.items())
    )


def module_file_name(interface_name: str) -> str:
    """The generated module's file: the interface's name in snake case."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", interface_name)
    return f"{snake.lower()}.py"


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


def _import_order(name: str) -> tuple[int, str]:
    """isort's default order of imported names: CONSTANTS, Classes, then the rest."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


def _digest(type_: TypeRef) -> str:
    return hashlib.sha256(str(type_).encode()).hexdigest()[:10]
