"""``RemoteModule``: an ``nn.Module`` that lives on another RPC worker, drop-in for
``torch.distributed.nn.RemoteModule``.

The caller holds an RRef to the module on its owner plus generated methods (``forward``,
``forward_async`` and, with an interface, every other interface method) installed as
exported methods, so ``torch.jit.script`` compiles a RemoteModule built with an interface.
"""

from __future__ import annotations

import contextlib
import inspect
import numbers
import time
import types
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import torch
import torch.distributed.rpc as rpc
from torch import nn
from torch.nn.parameter import Parameter

from remote_module._torchscript import use_script_stubs
from remote_module.runtime import owner, registry, wire
from remote_module.runtime.calls import (
    ask_owner_to_load,
    creation_error,
    wait_for_owner,
    wait_returning_rrefs,
)
from remote_module.runtime.device import parse_remote_device
from remote_module.runtime.values import move_to_device

__all__ = ["RemoteModule"]

_NOT_SUPPORTED = "Method ``{}`` not supported for RemoteModule"
# What Python calls keep in a RemoteModule's __dict__, which TorchScript never reads.
_PYTHON_CALL_STATE = ("_rm_reference", "_rm_keeper", "_rm_filing", "_rm_pending")
_UNSET_TIMEOUT = float(rpc.constants.UNSET_RPC_TIMEOUT)

T = TypeVar("T", bound="RemoteModule")


class _RemoteModuleType(type):
    """The metaclass of :class:`RemoteModule`: ``dir()`` of a RemoteModule class, and of an
    instance through ``RemoteModule.__dir__``, lists what a RemoteModule has: what its classes
    define (subclasses and mixins included, RemoteModule's private helpers not) and
    ``__call__``; not nn.Module's methods, which raise on a RemoteModule or need local state.
    ``torch.jit.script`` walks this list several times on every call: with nn.Module's ~200
    names, scripting a RemoteModule again cost about 0.3 ms more."""

    def __dir__(cls) -> list[str]:
        classes = [klass for klass in cls.__mro__ if klass not in (nn.Module, object)]
        # Cached per class, recomputed when a class in between gains or loses an attribute.
        version = tuple(len(vars(klass)) for klass in classes)
        cached = _class_dirs.get(cls)
        if cached is None or cached[0] != version:
            names = {"__call__"}
            for klass in classes:
                names.update(
                    name
                    for name, value in vars(klass).items()
                    if not (klass is RemoteModule and _hidden(name))
                    and not getattr(value, "_rm_unsupported", False)
                )
            cached = _class_dirs[cls] = (version, sorted(names))
        return list(cached[1])


def _hidden(name: str) -> bool:
    """RemoteModule's private helpers, and the property torch reads (listed, torch would try
    to compile it)."""
    return name == "__jit_ignored_attributes__" or (
        name.startswith("_") and not name.startswith("__")
    )


_class_dirs: weakref.WeakKeyDictionary[type, tuple[tuple[int, ...], list[str]]] = (
    weakref.WeakKeyDictionary()
)


class RemoteModule(nn.Module, metaclass=_RemoteModuleType):
    """A module created on a remote worker whose methods run there.

    Args:
        remote_device: ``"<workername>/<device>"``, ``"rank:<n>/<device>"`` or a worker name
            (the device defaults to ``cpu``).
        module_cls: a module class, or any callable returning an ``nn.Module``.
        args, kwargs: passed to ``module_cls`` on the owner.
        module_interface_cls: a ``@torch.jit.interface`` class; the module is scripted on the
            owner, every interface method is generated, and the RemoteModule scripts with
            ``torch.jit.script``. ``_module_interface_cls`` is accepted for upstream code.
        timeout: seconds that bound every call this RemoteModule makes (the RPC default
            when ``None``).
        wire_dtype: ``torch.bfloat16`` or ``torch.float16`` to send floating-point tensors
            (arguments and results) in that dtype, cast back to their own dtype on arrival:
            half the bytes on a network link; on one machine the casts cost about what they
            save. ``None`` (the default) sends tensors as they are.

    Example::

        >>> rm = RemoteModule("worker1/cpu", nn.Linear, args=(16, 4))
        >>> rm(torch.ones(2, 16)).shape
        torch.Size([2, 4])
    """

    # No class-level attribute annotations at run time: TorchScript would read them as
    # attribute types. Type checkers see these.
    if TYPE_CHECKING:
        on: str | int
        device: str
        is_device_map_set: bool
        is_scriptable: bool
        generated_methods: list[Callable[..., Any]]
        module_rref: Any  # rpc.RRef[nn.Module]
        timeout: float
        wire_dtype: torch.dtype | None
        _rm_bound_interface: Any

        # The generated methods (installed per instance): anything, for type checkers; a
        # typed class (``Remote<Interface>``) declares exactly its interface's methods.
        def __getattr__(self, name: str) -> Any: ...

    # The interface a generated typed class (``Remote<Interface>``) is bound to.
    _rm_bound_interface = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wire.register_reducer(cls)

    if TYPE_CHECKING:  # the constructor's signature, as _construct takes it

        def __init__(
            self,
            remote_device: str,
            module_cls: Callable[..., nn.Module],
            args: tuple[Any, ...] | None = None,
            kwargs: dict[str, Any] | None = None,
            module_interface_cls: Any = None,
            *,
            _module_interface_cls: Any = None,
            timeout: float | None = None,
            wire_dtype: torch.dtype | None = None,
        ) -> None: ...

    else:
        # Short on purpose: torch.jit.script reads and parses __init__'s source on every call.
        # inspect.signature(RemoteModule) shows _construct's signature (set below the class).
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._construct(*args, **kwargs)  # calls nn.Module.__init__ once the owner is asked

    def _construct(
        self,
        remote_device: str,
        module_cls: Callable[..., nn.Module],
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
        module_interface_cls: Any = None,
        *,
        _module_interface_cls: Any = None,
        timeout: float | None = None,
        wire_dtype: torch.dtype | None = None,
    ) -> None:
        args, kwargs = _check_arguments(args, kwargs)
        interface_cls = _pick_interface(type(self), module_interface_cls, _module_interface_cls)
        move_tensors = self._prepare(remote_device, interface_cls, timeout, wire_dtype)
        if interface_cls is None:
            # Asynchronous: a module_cls that fails surfaces on the first call. Sent before
            # anything else, nn.Module's own set-up included: the owner starts creating while
            # this side finishes (a first construction's first call waits for the creation).
            try:
                self.__dict__["module_rref"] = rpc.remote(
                    self.on,
                    owner.create_module,
                    (module_cls, args, kwargs, self.device),
                    timeout=self.timeout,
                )
            except RuntimeError as error:
                raise self._creation_failed(error, module_cls) from error
            super().__init__()
            self.__dict__["_rm_creator"] = _callable_name(module_cls)
            self._install(registry.non_scriptable_module())
        else:
            # One round trip: the owner creates (and, for a TorchScript interface, scripts)
            # the module; meanwhile this side sets itself up and loads the generated module.
            started = time.monotonic()
            module_name = self._generated_module_name(interface_cls, move_tensors)
            wire = wire_dtype is not None
            creation = (module_cls, args, kwargs, self.device, interface_cls, module_name, wire)
            future = rpc.rpc_async(
                self.on,
                owner.create_interface_module,
                creation,
                timeout=0,  # bounded below; the reply carries an RRef (see wait_returning_rrefs)
            )
            super().__init__()
            self.__dict__["_rm_creator"] = _callable_name(module_cls)
            self._install(registry.ensure_module(module_name, interface_cls, move_tensors, wire))
            try:
                created = wait_returning_rrefs(future, self.timeout, started)
            except RuntimeError as error:
                raise self._creation_failed(error, module_cls) from error
            if isinstance(created, owner.CreationFailure):
                raise creation_error(self, created, future_owner=self.on)
            module_rref, generated_ready = created
            self.__dict__["module_rref"] = module_rref
            if not generated_ready:
                # The owner loads and compiles the generated module while this returns; the
                # first call (or scripting, or sending this over RPC) waits for it.
                ask_owner_to_load(self)
        if isinstance(module_cls, type):
            self.__dict__["_remote_type_name"] = module_cls.__qualname__

    @classmethod
    def init_from_module_rref(
        cls: type[T],
        remote_device: str,
        module_rref: rpc.RRef[Any],
        module_interface_cls: Any = None,
        *,
        _module_interface_cls: Any = None,
        timeout: float | None = None,
        wire_dtype: torch.dtype | None = None,
    ) -> T:
        """A RemoteModule over an existing module RRef (for example one received over RPC).

        Several RemoteModules can share one remote module this way; it is also how a scripted
        RemoteModule reaches another worker: send ``rm.get_module_rref()`` and rebuild it there.
        """
        remote_module = cls.__new__(cls)
        nn.Module.__init__(remote_module)
        interface_cls = _pick_interface(cls, module_interface_cls, _module_interface_cls)
        move_tensors = remote_module._prepare(remote_device, interface_cls, timeout, wire_dtype)
        module_name = remote_module._generated_module_name(interface_cls, move_tensors)
        remote_module.module_rref = module_rref
        if interface_cls is not None:
            # The owner may never have compiled this interface's remote functions.
            wire = wire_dtype is not None
            future = rpc.rpc_async(
                module_rref.owner(),
                owner.ensure_generated_module,
                (module_name, interface_cls, move_tensors, wire),
                timeout=remote_module.timeout,
            )
            generated = registry.ensure_module(module_name, interface_cls, move_tensors, wire)
            with _failures_named(
                "RemoteModule.init_from_module_rref", repr(module_rref.owner_name())
            ):
                future.wait()
        else:
            generated = registry.non_scriptable_module()
        remote_module._install(generated)
        return remote_module

    def remote_parameters(self, recurse: bool = True) -> list[rpc.RRef[Parameter]]:
        """RRefs to the remote module's parameters, for ``DistributedOptimizer``."""
        started = time.monotonic()
        future = rpc.rpc_async(
            self.module_rref.owner(), owner.parameter_rrefs, (self.module_rref, recurse), timeout=0
        )
        with self._failures_named("remote_parameters"):
            return wait_returning_rrefs(future, self.timeout, started)

    def get_module_rref(self) -> rpc.RRef[nn.Module]:
        """The RRef to the module on its owner."""
        return self.module_rref

    def remote_state_dict(self) -> dict[str, torch.Tensor]:
        """The owner's ``state_dict()``, its tensors on this side's CPU."""
        return self._on_owner("remote_state_dict", owner.state_dict, self.module_rref)

    def load_remote_state_dict(
        self, state_dict: dict[str, torch.Tensor], strict: bool = True
    ) -> Any:
        """``load_state_dict`` on the owner; returns its ``(missing_keys, unexpected_keys)``."""
        cpu_state = move_to_device(dict(state_dict), torch.device("cpu"))
        return self._on_owner(
            "load_remote_state_dict", owner.load_state_dict, self.module_rref, cpu_state, strict
        )

    def train(self: T, mode: bool = True) -> T:
        """Set training mode on the owner's module and here; returns ``self``."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self._on_owner("train", owner.train, self.module_rref, mode)
        self.training = mode
        return self

    def eval(self: T) -> T:
        """``train(False)``."""
        return self.train(False)

    # Exported, so the scripted form refuses too; TorchScript needs the literal text here.
    @torch.jit.export
    def __getstate__(self) -> None:
        raise RuntimeError(
            "Cannot pickle RemoteModule in python pickler. RemoteModule can only be pickled "
            "when using RPC"
        )

    @torch.jit.export
    def __setstate__(self, state: Any) -> None:
        raise RuntimeError(
            "Cannot unpickle RemoteModule in python pickler. RemoteModule can only be unpickled "
            "when using RPC"
        )

    def __prepare_scriptable__(self: T) -> T:
        """Called by ``torch.jit.script``: refuses a RemoteModule that cannot be scripted, and
        hands torch the exported methods parsed once per process instead of on every call
        (see ``remote_module._torchscript``)."""
        if not self.is_scriptable:
            interface = self.generated_methods[0].__globals__.get("INTERFACE")
            if interface is None:
                return self  # no interface: torch refuses it as upstream's is refused
            raise TypeError(
                f"{type(self).__name__} with the typing.Protocol interface {interface} cannot "
                "be scripted: torch.jit.script needs a RemoteModule built with a "
                "@torch.jit.interface class as module_interface_cls"
            )
        # Scripted calls go straight to the owner's compiled remote functions.
        wait_for_owner(self, "torch.jit.script")
        use_script_stubs(
            self, [*self.generated_methods, RemoteModule.__getstate__, RemoteModule.__setstate__]
        )
        return self

    @property
    def __jit_ignored_attributes__(self) -> list[str]:
        """Attributes ``torch.jit.script`` need not try (and fail) to type on every call: the
        generated methods, which it compiles from their source anyway, their list, and the
        state of Python calls (the key, its keeper, pending requests)."""
        methods = self.__dict__.get("generated_methods", ())
        return [*_PYTHON_CALL_STATE, "generated_methods", *(m.__name__ for m in methods)]

    def __dir__(self) -> list[str]:
        # What the class lists, the RemoteModule's own attributes and its generated methods;
        # not nn.Module's bookkeeping (hooks, empty parameter dicts), which torch.jit.script
        # would walk on every call.
        own = (name for name in self.__dict__ if name not in wire.MODULE_BOOKKEEPING)
        return sorted({*dir(type(self)), *own})

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(on={self.on!r}, device={self.device!r}, "
            f"module={self._remote_module_type()}, scriptable={self.is_scriptable})"
        )

    # A parent module's traversal sees a leaf with no local state ...

    def named_modules(
        self, memo: set[nn.Module] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, nn.Module]]:
        if memo is None:  # a direct call, not a parent's traversal
            _raise_not_supported("named_modules")
        return _leaf(self, memo, prefix, remove_duplicate)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        destination = kwargs.get("destination", args[0] if args else None)
        if destination is None:
            _raise_not_supported("state_dict")
        return destination

    def _apply(self: T, fn: Any, recurse: bool = True) -> T:
        return self

    # ... while direct calls that cannot work remotely say so.

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        raise ValueError(
            _NOT_SUPPORTED.format("parameters") + ". Please use ``remote_parameters`` instead."
        )

    def _prepare(
        self,
        remote_device: str,
        interface_cls: Any,
        timeout: float | None,
        wire_dtype: torch.dtype | None = None,
    ) -> bool:
        """Set the local attributes; returns whether tensors move to a non-CPU device."""
        if not rpc._is_current_rpc_agent_set():
            raise AssertionError("RemoteModule only works in RPC.")
        on, device, off_cpu = _target(remote_device)
        # Plain values: straight into __dict__, past nn.Module.__setattr__'s type checks.
        self.__dict__.update(
            on=on,
            device=device,
            is_device_map_set=_is_device_map_set(on),
            is_scriptable=interface_cls is not None and registry.is_script_interface(interface_cls),
            timeout=_UNSET_TIMEOUT if timeout is None else _check_timeout(timeout),
            wire_dtype=None if wire_dtype is None else _check_wire_dtype(wire_dtype),
        )
        return off_cpu

    def _generated_module_name(self, interface_cls: Any, move_tensors: bool) -> str:
        if interface_cls is None:
            return registry.non_scriptable_module().__name__
        return registry.scriptable_module_name(interface_cls, move_tensors)

    def _install(self, generated: types.ModuleType) -> None:
        methods = list(generated._generated_methods)
        self.__dict__["generated_methods"] = methods
        for method in methods:
            self.__dict__[method.__name__] = types.MethodType(torch.jit.export(method), self)
        wire.check_attributes(self)

    def _creation_failed(self, error: RuntimeError, module_cls: Any) -> RuntimeError:
        """An RPC failure of the creation request, naming the creator and the owner."""
        creating = f"RemoteModule: creating {_callable_name(module_cls)}"
        return _failure_named(error, creating, repr(self.on))

    def _on_owner(self, method: str, fn: Callable[..., Any], *args: Any) -> Any:
        with self._failures_named(method):
            return rpc.rpc_sync(self.module_rref.owner(), fn, args, timeout=self.timeout)

    def _failures_named(self, method: str) -> contextlib.AbstractContextManager[None]:
        return _failures_named(f"RemoteModule.{method}", repr(self.module_rref.owner_name()))

    def _remote_module_type(self) -> str:
        name = self.__dict__.get("_remote_type_name")
        if name is None:
            try:
                name = self._on_owner("__repr__", owner.type_name, self.module_rref)
            except RuntimeError:
                return "<unreachable>"
            self._remote_type_name = name
        return name


wire.register_reducer(RemoteModule)
RemoteModule.parameters._rm_unsupported = True  # type: ignore[attr-defined]
RemoteModule.__init__.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    RemoteModule._construct
)


def _leaf(
    module: nn.Module, memo: set[nn.Module], prefix: str, remove_duplicate: bool
) -> Iterator[tuple[str, nn.Module]]:
    if module not in memo:
        if remove_duplicate:
            memo.add(module)
        yield prefix, module


def _unsupported(name: str) -> Callable[..., Any]:
    def method(self: RemoteModule, *args: Any, **kwargs: Any) -> Any:
        _raise_not_supported(name)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = "Not supported for RemoteModule: raises ``ValueError``."
    method._rm_unsupported = True  # type: ignore[attr-defined]  # left out of dir()
    return method


# nn.Module methods that would need the module's local state.
UNSUPPORTED_METHODS = (
    "register_buffer",
    "register_parameter",
    "add_module",
    "register_module",
    "get_submodule",
    "set_submodule",
    "get_parameter",
    "get_buffer",
    "apply",
    "cuda",
    "ipu",
    "xpu",
    "mtia",
    "cpu",
    "type",
    "float",
    "double",
    "half",
    "bfloat16",
    "to",
    "to_empty",
    "register_backward_hook",
    "register_full_backward_hook",
    "register_full_backward_pre_hook",
    "register_forward_pre_hook",
    "register_forward_hook",
    "load_state_dict",
    "named_parameters",
    "buffers",
    "named_buffers",
    "children",
    "named_children",
    "modules",
    "requires_grad_",
    "zero_grad",
    "share_memory",
    "extra_repr",
)
for _name in UNSUPPORTED_METHODS:
    setattr(RemoteModule, _name, _unsupported(_name))
del _name


@contextlib.contextmanager
def _failures_named(what: str, owner_name: str) -> Iterator[None]:
    """Re-raise an RPC failure (timeout, lost peer) naming the step and the owner."""
    try:
        yield
    except RuntimeError as error:
        raise _failure_named(error, what, owner_name) from error


def _failure_named(error: RuntimeError, what: str, owner_name: str) -> RuntimeError:
    return RuntimeError(f"{what} on worker {owner_name} failed: {error}")


def _raise_not_supported(name: str) -> NoReturn:
    raise ValueError(_NOT_SUPPORTED.format(name))


def _pick_interface(cls: type[RemoteModule], module_interface_cls: Any, legacy: Any) -> Any:
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


def _check_timeout(timeout: float | None) -> float:
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


def _check_wire_dtype(wire_dtype: Any) -> torch.dtype | None:
    if wire_dtype is None or (isinstance(wire_dtype, torch.dtype) and wire_dtype.is_floating_point):
        return wire_dtype
    raise ValueError(
        "RemoteModule wire_dtype must be None or a floating-point torch.dtype such as "
        f"torch.bfloat16 or torch.float16, got {wire_dtype!r}"
    )


def _check_arguments(args: Any, kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
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


def _callable_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__


def _target(remote_device: str) -> tuple[str | int, str, bool]:
    """The owner, the device's text, and whether it is not the CPU (every construction asks;
    a program uses a handful of remote devices)."""
    if type(remote_device) is not str:
        parse_remote_device(remote_device)  # raises: not a string
    known = _targets.get(remote_device)
    if known is not None:
        return known
    owner, _, device = remote_device.partition("/")
    target: tuple[str | int, str, bool]
    if device == "cpu" and owner and owner.isascii() and owner.isprintable() and ":" not in owner:
        # "<workername>/cpu", as parse_remote_device reads it, without torch.device and the
        # parse: in a fresh process they cost more than everything else before the request.
        target = (owner, "cpu", False)
    else:
        parsed = parse_remote_device(remote_device)
        target = (parsed.on, str(parsed.device), parsed.device.type != "cpu")
    if len(_targets) < 256:
        _targets[remote_device] = target
    return target


_targets: dict[str, tuple[str | int, str, bool]] = {}


def _is_device_map_set(on: str | int) -> bool:
    """Whether the current RPC agent has a device map to ``on`` (which must be a worker): fixed
    for an agent's lifetime, so asked once per agent and owner."""
    agent = rpc._get_current_rpc_agent()
    if _device_maps_of[0] is not agent:
        _device_maps.clear()
        _device_maps_of[0] = agent
    known = _device_maps.get(on)
    if known is None:
        known = _device_maps[on] = bool(agent._get_device_map(_worker_info(agent, on)))
    return known


# owner -> whether the agent in _device_maps_of has a device map to it
_device_maps: dict[str | int, bool] = {}
_device_maps_of: list[Any] = [None]


def _worker_info(agent: Any, on: str | int) -> Any:
    if isinstance(on, str):
        try:
            return agent.get_worker_info(on)
        except (RuntimeError, TypeError) as error:
            raise RuntimeError(f"RemoteModule: no RPC worker named {on!r} ({error})") from None
    for info in agent.get_worker_infos():
        if info.id == on:
            return info
    raise ValueError(f"RemoteModule: no RPC worker has rank {on}")
