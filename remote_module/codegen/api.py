"""Views of the model for generated code: the finished pieces a template puts in place.

Like torchgen's ``api/`` layer, these turn the model into what a template needs: names of
generated functions (derived from the types they handle), declarations, argument lists,
expressions, import lines, and :func:`wrapped`, which lays out one call or ``def`` line the way
``ruff format`` does. The templates hold the code's shape (statements, branches, which piece
goes where) and never build a piece of code themselves.

Example::

    >>> view = InterfaceView(parse_interface(MyModuleInterface), move=True)
    >>> view.methods[0].remote
    '_remote_forward'
    >>> wrapped("return _rm.call", ["self", '"forward"', "_remote_forward"], indent=4)
    '    return _rm.call(self, "forward", _remote_forward)'
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from remote_module._contract import (
    CALL_PREFIX,
    INTERNAL_PREFIX,
    KEYED_SUFFIX,
    PREFIX_SCRIPT_TYPES,
    REMOTE_PREFIX,
    WIRE_SUFFIX,
)
from remote_module.codegen.model import (
    Interface,
    InterfaceKind,
    Kind,
    Method,
    TypeRef,
    string_literal,
)

__all__ = [
    "LINE_LENGTH",
    "Binding",
    "Expr",
    "ImportLine",
    "InterfaceView",
    "MethodView",
    "Walker",
    "async_name",
    "imports",
    "module_file_name",
    "movable_types",
    "remote_name",
    "typed_class_name",
    "walker_name",
    "wrapped",
    "wrapped_comprehension",
]

# ruff format's default line length: the output is clean for a user's formatter as it stands.
LINE_LENGTH = 88

# What each walker kind takes beside the value, in its own body (the same names TorchScript
# and Python both read), and the prefix of its generated functions' names.
_WALKER_PARAMS = {
    "move": ("device: torch.device",),
    "decode": (),
    "cast": ("dtype: torch.dtype", "sent: list[Tensor]"),
    "restore": ("sent: list[Tensor]",),
}
_WALKER_EXTRA = {"move": ("device",), "decode": (), "cast": ("dtype", "sent"), "restore": ("sent",)}
# The tensor leaf helpers of the contract (remote_module._contract), as generated code calls them.
_TENSOR_HELPERS = {
    "move": "_rm.move_tensor",
    "cast": "_rm.cast_tensor",
    "restore": "_rm.restore_tensor",
}
_WAIT = "wait_decode"  # the decoders that wait for a future first
# Type names longer than this in a walker's name are cut, a digest of the type added.
_LONGEST_TYPE_NAME = 40


class Binding(NamedTuple):
    """One parameter as generated code declares it."""

    name: str
    annotation: str
    default: str | None = None

    def decl(self) -> str:
        """``name: annotation`` or ``name: annotation = default``."""
        text = f"{self.name}: {self.annotation}"
        return text if self.default is None else f"{text} = {self.default}"


class ImportLine(NamedTuple):
    """``from module import names``; names sorted as linters sort them (classes, then the rest)."""

    module: str
    names: tuple[str, ...]

    @property
    def text(self) -> str:
        """The import, on one line where it fits, else one name per line."""
        line = f"from {self.module} import {', '.join(self.names)}"
        if len(line) <= LINE_LENGTH:
            return line
        return wrapped(f"from {self.module} import ", self.names)


class Expr(NamedTuple):
    """A call of ``callee`` with ``args`` (strings, or calls themselves), or (``callee``
    empty) the expression ``args[0]`` as it is: a value a walker leaves alone."""

    callee: str
    args: tuple[str | Expr, ...]

    def __str__(self) -> str:
        if not self.callee:
            return str(self.args[0])
        return f"{self.callee}({', '.join(map(str, self.args))})"

    def line(self, indent: int = 0, lead: str = "", tail: str = "") -> str:
        """The expression after ``lead`` (``"return "``, ``"x = "``), wrapped."""
        if not self.callee:
            return f"{' ' * indent}{lead}{self.args[0]}{tail}"
        return wrapped(self.callee, self.args, tail, indent, lead=lead)


def wrapped(
    head: str,
    items: Sequence[str | Expr],
    tail: str = "",
    indent: int = 0,
    *,
    lead: str = "",
    tuple_: bool = False,
    brackets: str = "()",
) -> str:
    """``head(items)tail`` at ``indent``, on one line where it fits in :data:`LINE_LENGTH`
    characters, else one item per line with a trailing comma, as ``ruff format`` writes it
    (an item that is a call, :class:`Expr`, wrapped the same way on its own lines where it
    does not fit on one). ``lead`` goes before ``head`` (``"return "``); ``tuple_``: the
    brackets make a tuple, so one item takes a trailing comma.

    Example::

        >>> wrapped("x = ", ["a"], tuple_=True)
        'x = (a,)'
    """
    pad = " " * indent
    head = f"{lead}{head}"
    opening, closing = brackets[0], brackets[1]
    joined = ", ".join(map(str, items)) + ("," if tuple_ and len(items) == 1 else "")
    line = f"{pad}{head}{opening}{joined}{closing}{tail}"
    if len(line) <= LINE_LENGTH or not items:
        return line
    inner = "".join(
        f"{item.line(indent + 4, tail=',')}\n" if isinstance(item, Expr) else f"{pad}    {item},\n"
        for item in items
    )
    return f"{pad}{head}{opening}\n{inner}{pad}{closing}{tail}"


def wrapped_comprehension(
    lead: str, brackets: str, element: str, clause: str, indent: int = 0
) -> str:
    """``lead[element clause]`` as ``ruff format`` lays out a comprehension: on one line where
    it fits, else its body on a line of its own inside the brackets, else the element and the
    ``for`` clause on a line each."""
    pad = " " * indent
    opening, closing = brackets[0], brackets[1]
    line = f"{pad}{lead}{opening}{element} {clause}{closing}"
    if len(line) <= LINE_LENGTH:
        return line
    body = f"{pad}    {element} {clause}"
    if len(body) <= LINE_LENGTH:
        return f"{pad}{lead}{opening}\n{body}\n{pad}{closing}"
    return f"{pad}{lead}{opening}\n{pad}    {element}\n{pad}    {clause}\n{pad}{closing}"


def define(name: str, params: Sequence[str], returns: str, indent: int = 0, body: str = "") -> str:
    """A ``def`` line (``body``: what follows the colon on the same line, e.g. `` ...``)."""
    return wrapped(f"def {name}", params, f" -> {returns}:{body}", indent)


def remote_name(method: Method) -> str:
    """The function that runs on the owner (``_remote_forward`` for ``forward``)."""
    return f"{REMOTE_PREFIX}{method.name}"


def async_name(method: Method) -> str:
    return f"{method.name}_async"


def typed_class_name(interface: Interface) -> str:
    """The typed RemoteModule subclass generated for ``interface``."""
    return f"Remote{interface.name}"


def movable_types(interface: Interface) -> tuple[TypeRef, ...]:
    """Types whose values hold tensors (moved, cast), inner ones first."""
    return _distinct(
        (type_ for method in interface.methods for type_ in method.types),
        lambda type_: type_.contains_tensor,
    )


def walker_name(interface: Interface, kind: str, type_: TypeRef) -> str:
    """What generated code calls to walk a value of ``type_`` with a walker of ``kind``
    ("move", "decode", "cast", "restore"): for a tensor the contract's leaf helper
    (``_rm.move_tensor``), else the generated function named after the type
    (``_rm_move_list_Tensor``)."""
    if type_.kind is Kind.TENSOR:
        return _TENSOR_HELPERS[kind]
    return f"{INTERNAL_PREFIX}{kind}_{_type_names(interface)[str(type_)]}"


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


class MethodView:
    """The pieces generated code needs for one interface method, on both sides."""

    def __init__(self, view: InterfaceView, method: Method) -> None:
        interface = view.interface
        self._interface = interface
        self._view = view
        self.method = method
        self.name = method.name
        self.async_name = async_name(method)
        self.remote = remote_name(method)
        self.keyed = f"{self.remote}{KEYED_SUFFIX}"
        self.wire = f"{self.remote}{WIRE_SUFFIX}"
        self.hints = f"{INTERNAL_PREFIX}{method.name}_hints"
        self.wire_result = f"{INTERNAL_PREFIX}{method.name}_wire_result"
        self.returns = str(method.returns)
        self.future_returns = f"Future[{method.returns}]"
        self.arguments = tuple(arg.name for arg in method.arguments)
        # A wire dtype changes what TorchScript sends only where the method carries tensors.
        self.uses_wire = view.script and any(t.contains_tensor for t in method.types)
        self.decodes = method.returns.contains_named_tuple
        self.decoder = walker_name(interface, "decode", method.returns) if self.decodes else ""
        self.wait_decoder = (
            f"{INTERNAL_PREFIX}{_WAIT}_{_type_names(interface)[self.returns]}"
            if self.decodes
            else ""
        )
        # The remote function moves tensors to the module's device and back.
        self.moves = view.move and any(t.contains_tensor for t in method.types)
        self.moves_result = method.returns.contains_tensor

    # --- caller side ------------------------------------------------------------------------

    @property
    def params(self) -> tuple[str, ...]:
        """The generated method's parameters: the interface's, defaults kept."""
        declared = (Binding(a.name, str(a.type), a.default).decl() for a in self.method.arguments)
        return ("self: _rm.RemoteModule", *declared)

    @property
    def typed_params(self) -> tuple[str, ...]:
        """The same, as the typed class declares them."""
        return ("self", *self.params[1:])

    @property
    def hints_line(self) -> str:
        """The caller-side type checks: ``(name, type)`` or ``(name, type, default)`` each."""
        entries = [
            wrapped("", [string_literal(arg.name), str(arg.type), *_present(arg.default)])
            for arg in self.method.arguments
        ]
        return wrapped(f"{self.hints} = ", entries, tuple_=True)

    @property
    def python_call(self) -> tuple[str, ...]:
        """The arguments of ``_rm.call`` / ``_rm.call_async`` (the Python branch)."""
        arguments = wrapped("", self.arguments, tuple_=True)
        return ("self", string_literal(self.name), self.remote, arguments, self.hints)

    @property
    def python_async_decoded(self) -> str:
        """The Python branch of ``m_async`` where the result is decoded: the call's future
        decoded by ``then``, as one statement or two, whichever takes fewer lines."""
        call = Expr("_rm.call_async", self.python_call)
        chained = call.line(4, "return ", f".then({self.wait_decoder})")
        stepwise = (
            f"{call.line(4, '_rm_future = ')}\n    return _rm_future.then({self.wait_decoder})"
        )
        return min(stepwise, chained, key=lambda text: text.count("\n"))

    @property
    def python_sync_decoded(self) -> str:
        """The Python branch of ``m`` where the result is decoded, likewise."""
        call = Expr("_rm.call", self.python_call)
        nested = Expr(self.decoder, (call,)).line(4, "return ")
        stepwise = f"{call.line(4, '_rm_result = ')}\n    return {self.decoder}(_rm_result)"
        return min(stepwise, nested, key=lambda text: text.count("\n"))

    def await_async(self, indent: int) -> str:
        """The sync method's TorchScript branch: the ``_async`` twin's future."""
        head = f"_rm_future: {self.future_returns} = self.{self.async_name}"
        return wrapped(head, self.arguments, indent=indent)

    @property
    def sent(self) -> tuple[str, ...]:
        """What a TorchScript caller sends: the call prefix, then the arguments."""
        return (*_prefix_values(), *self.arguments)

    @property
    def wired(self) -> tuple[str | Expr, ...]:
        """The same with a wire dtype: the dtype and the list that carries each cast
        tensor's own dtype after the prefix, then the arguments, their tensors cast."""
        extra = ("self.wire_dtype", "_rm_carried")
        arguments = (
            walk(self._interface, "cast", arg.type, arg.name, extra)
            for arg in self.method.arguments
        )
        return (*_prefix_values(), *extra, *arguments)

    def rpc_call(self, function: str, sent: str) -> Expr:
        """TorchScript's ``rpc_async`` of ``function`` with ``sent`` (the module's owner in
        ``_rm_owner``)."""
        return Expr("_rm.rpc_async", ("_rm_owner", function, sent, "{}", "self.timeout"))

    @property
    def decoded_send(self) -> Expr:
        """The TorchScript send of a result that holds NamedTuples: its future decoded."""
        return Expr("_rm.fork", (self.wait_decoder, self.rpc_call(self.remote, "_rm_sent")))

    @property
    def wired_send(self) -> Expr:
        """The TorchScript send with a wire dtype: its future cast back (and decoded)."""
        return Expr("_rm.fork", (self.wire_result, self.rpc_call(self.wire, "_rm_wired")))

    @property
    def wire_result_params(self) -> tuple[str, ...]:
        return (f"future: Future[tuple[{self.returns}, list[Tensor]]]",)

    @property
    def wire_value(self) -> Expr:
        """A wire reply's result (``reply``) cast back, decoded."""
        returns = self.method.returns
        restored = walk(self._interface, "restore", returns, "reply[0]", ("reply[1]",))
        return walk(self._interface, "decode", returns, restored, ())

    # --- owner side -------------------------------------------------------------------------

    @property
    def remote_params(self) -> tuple[str, ...]:
        """The remote function's parameters: the call prefix, then the interface's arguments
        without defaults (callers always send every argument)."""
        return (*self._view.prefix_params, *self._argument_decls)

    @property
    def keyed_params(self) -> tuple[str, ...]:
        """The keyed twin's: the module's key in place of its RRef."""
        return (f"{INTERNAL_PREFIX}module_key: int", *self.remote_params[1:])

    @property
    def wire_params(self) -> tuple[str, ...]:
        """The wire twin's: the wire dtype and the carried dtypes after the prefix."""
        wire = (
            f"{INTERNAL_PREFIX}wire_dtype: torch.dtype",
            f"{INTERNAL_PREFIX}carried: list[Tensor]",
        )
        return (*self._view.prefix_params, *wire, *self._argument_decls)

    @property
    def wire_returns(self) -> str:
        return f"tuple[{self.returns}, list[Tensor]]"

    @property
    def plain_call(self) -> Expr:
        """The wire twin's call of the remote function: the prefix, then the arguments."""
        return Expr(self.remote, (*(name for name, _ in self._view.prefix), *self.arguments))

    @property
    def module_call(self) -> Expr:
        """The interface method called on the module."""
        return Expr(f"{INTERNAL_PREFIX}module.{self.name}", self.arguments)

    @property
    def moved_call(self) -> Expr:
        """The same with every tensor-holding argument moved to ``_rm_target``."""
        moved = (
            walk(self._interface, "move", arg.type, arg.name, ("_rm_target",))
            for arg in self.method.arguments
        )
        return Expr(f"{INTERNAL_PREFIX}module.{self.name}", tuple(moved))

    @property
    def result_on_cpu(self) -> Expr:
        return walk(self._interface, "move", self.method.returns, "_rm_result", (_CPU,))

    @property
    def restored_arguments(self) -> tuple[tuple[str, Expr], ...]:
        """``("x = ", x back in its own dtype)`` for every tensor-holding argument."""
        return tuple(
            (
                f"{arg.name} = ",
                walk(self._interface, "restore", arg.type, arg.name, ("_rm_carried",)),
            )
            for arg in self.method.arguments
            if arg.type.contains_tensor
        )

    @property
    def result_on_wire(self) -> Expr:
        extra = ("_rm_wire_dtype", "_rm_back")
        return walk(self._interface, "cast", self.method.returns, "_rm_result", extra)

    @property
    def _argument_decls(self) -> tuple[str, ...]:
        return tuple(f"{arg.name}: {arg.type}" for arg in self.method.arguments)


_CPU = 'torch.device("cpu")'


class InterfaceView:
    """The pieces of one interface's generated module; ``move``: whether its remote
    functions move tensors to the module's device."""

    def __init__(self, interface: Interface, move: bool) -> None:
        self.interface = interface
        self.move = bool(move)
        self.script = interface.kind is InterfaceKind.SCRIPT
        self.typed_class = typed_class_name(interface)
        self.imports = imports(interface)
        self.methods = tuple(MethodView(self, method) for method in interface.methods)

    @property
    def names_tensor(self) -> bool:
        """Whether the module's code names ``Tensor`` (an annotation, a hint, a wire list)."""
        return any(
            inner.kind is Kind.TENSOR
            for method in self.interface.methods
            for type_ in method.types
            for inner in type_.walk()
        )

    @property
    def typing_import(self) -> str:
        """What the module imports from ``typing``: ``TYPE_CHECKING`` (the typed class), and
        ``Any`` where an annotation names it (an eager remote function's call prefix, an
        interface's own ``Any``)."""
        any_named = not self.script or any(
            inner.kind is Kind.SCALAR and inner.name == "Any"
            for method in self.interface.methods
            for type_ in method.types
            for inner in type_.walk()
        )
        return ImportLine(
            "typing", ("TYPE_CHECKING", "Any") if any_named else ("TYPE_CHECKING",)
        ).text

    @property
    def check_fresh(self) -> str:
        arguments = ("__name__", "GENERATOR_VERSION", "INTERFACE_FINGERPRINT", self.interface.name)
        return wrapped("_rm.check_fresh", arguments)

    @property
    def prefix(self) -> tuple[tuple[str, str], ...]:
        """The call prefix as remote functions take it: ``(parameter, annotation)`` each. A
        TorchScript remote function takes the module's interface-typed RRef; an eager one a
        reference (its key in the owner's table, or its RRef) that ``owner_module`` resolves."""
        return tuple(
            (
                _prefix_parameter(name, self.script),
                PREFIX_SCRIPT_TYPES[name].format(interface=self.interface.name)
                if self.script
                else "Any",
            )
            for name in CALL_PREFIX
        )

    @property
    def prefix_params(self) -> tuple[str, ...]:
        return tuple(f"{name}: {annotation}" for name, annotation in self.prefix)

    @property
    def module_lookup(self) -> str:
        """How a remote function finds the module: its RRef's local value, or (eager) the
        reference resolved by the runtime."""
        reference = self.prefix[0][0]
        if self.script:
            return f"{reference}.local_value()"
        return f"_rm.owner_module({reference})"

    def walkers(self, kind: str) -> tuple[Walker, ...]:
        """The generated walkers of ``kind``, inner types first: movers where tensors move;
        decoders for result types that hold NamedTuples; casters and restorers (the
        TorchScript half of a wire dtype) in the scriptable family. A tensor needs none."""
        if kind == "move":
            types = movable_types(self.interface) if self.move else ()
        elif kind == "decode":
            types = _distinct(
                (method.returns for method in self.interface.methods),
                lambda type_: type_.contains_named_tuple,
            )
        else:
            types = movable_types(self.interface) if self.script else ()
        return tuple(Walker(self.interface, kind, t) for t in types if t.kind is not Kind.TENSOR)

    @property
    def wait_decoders(self) -> tuple[tuple[str, str, str, str], ...]:
        """``(name, parameter, result type, decoder)`` of each result type whose futures are
        decoded (a Python ``then`` callback, a TorchScript ``fork``), in method order."""
        found: dict[str, tuple[str, str, str, str]] = {}
        for method in self.methods:
            if method.decodes:
                found.setdefault(
                    method.returns,
                    (
                        method.wait_decoder,
                        f"future: {method.future_returns}",
                        method.returns,
                        method.decoder,
                    ),
                )
        return tuple(found.values())

    def listing(self, name: str, functions: Sequence[str]) -> str:
        """``name = [functions]``, wrapped."""
        return wrapped(f"{name} = ", functions, brackets="[]")

    @property
    def generated_methods(self) -> tuple[str, ...]:
        return tuple(name for method in self.methods for name in (method.async_name, method.name))

    @property
    def remote_functions(self) -> tuple[str, ...]:
        return tuple(method.remote for method in self.methods)

    @property
    def wire_functions(self) -> tuple[str, ...]:
        return tuple(method.wire for method in self.methods if method.uses_wire)

    @property
    def keyed_functions(self) -> tuple[str, ...]:
        return tuple(method.keyed for method in self.methods)


def _prefix_values() -> tuple[str, ...]:
    """What a TorchScript caller sends as the call prefix: ``self.<attribute>`` each."""
    return tuple(f"self.{name}" for name in CALL_PREFIX)


def _prefix_parameter(attribute: str, script: bool) -> str:
    """The remote function's parameter for the call-prefix value ``attribute``."""
    if attribute == "module_rref" and not script:
        return f"{INTERNAL_PREFIX}module_ref"  # a key or an RRef
    return f"{INTERNAL_PREFIX}{attribute}"


def _present(default: str | None) -> tuple[str, ...]:
    return () if default is None else (default,)


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


def _import_order(name: str) -> tuple[int, str]:
    """isort's default order of imported names: CONSTANTS, Classes, then the rest."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:6]
