"""The structured views a template renders from: one per interface (:class:`InterfaceView`)
and one per method (:class:`MethodView`), each giving the finished pieces, on both sides of
the call (caller methods and senders, owner-side remote functions and their twins), built from
the names in ``remote_module._generator.api``, laid out by ``remote_module._generator.layout``, with
the walkers of ``remote_module._generator.walkers``.

Example::

    >>> view = InterfaceView(parse_interface(MyModuleInterface), move=True)
    >>> view.methods[0].remote
    '_remote_forward'
"""

from __future__ import annotations

from collections.abc import Sequence

from remote_module._generator.api import (
    Binding,
    async_name,
    imports,
    remote_name,
    typed_class_name,
)
from remote_module._generator.layout import Expr, ImportLine, wrapped
from remote_module._generator.model import (
    Interface,
    InterfaceKind,
    Kind,
    Method,
    string_literal,
)
from remote_module._generator.walkers import (
    Walker,
    decodable_types,
    movable_types,
    wait_decoder_name,
    walk,
    walker_name,
)
from remote_module._shared import (
    CALL_PREFIX,
    INTERNAL_PREFIX,
    KEYED_SUFFIX,
    PREFIX_SCRIPT_TYPES,
    WIRE_SUFFIX,
)

__all__ = ["InterfaceView", "MethodView"]


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
        # The scriptable family's body of both (the module found, passed in).
        self.run = f"{INTERNAL_PREFIX}run_{method.name}"
        self.wire = f"{self.remote}{WIRE_SUFFIX}"
        self.hints = f"{INTERNAL_PREFIX}{method.name}_hints"
        self.wire_result = f"{INTERNAL_PREFIX}{method.name}_wire_result"
        self.returns = str(method.returns)
        self.future_returns = f"Future[{method.returns}]"
        # What the typed class declares: a Future that asyncio can also await.
        self.awaitable_returns = f"_rm.AwaitableFuture[{method.returns}]"
        self.arguments = tuple(arg.name for arg in method.arguments)
        # A wire dtype changes what TorchScript sends only where the method carries tensors.
        self.uses_wire = view.script and any(t.contains_tensor for t in method.types)
        self.decodes = method.returns.contains_named_tuple
        self.decoder = walker_name(interface, "decode", method.returns) if self.decodes else ""
        self.wait_decoder = wait_decoder_name(interface, method.returns) if self.decodes else ""
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
    def python_async_call(self) -> tuple[str, ...]:
        """The arguments of ``_rm.call_async``: those of ``_rm.call``, and the decoder where the
        result holds NamedTuples (the runtime decodes as it completes the future: a ``then``
        would return torch's own future, which asyncio cannot await)."""
        if not self.decodes:
            return self.python_call
        return (*self.python_call, f"decode={self.decoder}")

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
    def run_params(self) -> tuple[str, ...]:
        """The body's (scriptable family): the module itself in place of its RRef."""
        module = f"{INTERNAL_PREFIX}module: {self._interface.name}"
        return (module, *self.remote_params[1:])

    def run_call(self, module: str) -> Expr:
        """The body called with ``module`` (how the remote function or its twin found it)."""
        rest = (name for name, _ in self._view.prefix[1:])
        return Expr(self.run, (module, *rest, *self.arguments))

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
            types = decodable_types(self.interface)
        else:
            types = movable_types(self.interface) if self.script else ()
        return tuple(Walker(self.interface, kind, t) for t in types if t.kind is not Kind.TENSOR)

    @property
    def wait_decoders(self) -> tuple[tuple[str, str, str, str], ...]:
        """``(name, parameter, result type, decoder)`` of each result type whose futures are
        decoded in TorchScript (by ``fork``), in method order."""
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
    if attribute == "module_rref":  # the RRef; or, eager, a key or an RRef
        return f"{INTERNAL_PREFIX}{'rref' if script else 'module_ref'}"
    return f"{INTERNAL_PREFIX}{attribute}"


def _present(default: str | None) -> tuple[str, ...]:
    return () if default is None else (default,)
