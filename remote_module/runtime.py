"""``RemoteModule``: an ``nn.Module`` that lives on another RPC worker, drop-in for
``torch.distributed.nn.RemoteModule``.

The caller holds an RRef to the module on its owner plus generated methods (``forward``,
``forward_async`` and, with an interface, every other interface method) installed as
exported methods, so ``torch.jit.script`` compiles a RemoteModule built with an interface.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import io
import itertools
import numbers
import time
import types
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, TypeVar

import torch
import torch.distributed.rpc as rpc
from torch import nn
from torch.distributed.rpc.internal import _internal_rpc_pickler
from torch.nn.parameter import Parameter

from remote_module._calls import move_to_device, wait_returning_rrefs
from remote_module._scripting import use_script_stubs
from remote_module.codegen import registry

__all__ = ["RemoteDevice", "RemoteModule", "parse_remote_device"]

_PARSE_ERROR = "Could not parse remote_device: {}. The valid format is '<workername>/<device>'"
_NOT_SUPPORTED = "Method ``{}`` not supported for RemoteModule"
_SCRIPTED_OVER_RPC_ERROR = (
    "Passing a script RemoteModule over RPC is not supported. Please create a RemoteModule in "
    "the sender, send the `module_rref` to the receiver, and create a new instance on the "
    "receiver end by passing this `module_rref`."
)
_UNSET_TIMEOUT = float(rpc.constants.UNSET_RPC_TIMEOUT)

# What crosses the wire when a RemoteModule is sent over RPC, in this order.
_PICKLED_ATTRIBUTES = (
    "on",
    "device",
    "is_device_map_set",
    "is_scriptable",
    "generated_methods",
    "module_rref",
)
# Local state that stays behind: nn.Module's own bookkeeping, the call timeout, a cached name.
_MODULE_BOOKKEEPING = frozenset(nn.Module().__dict__) - {"training"}
_LOCAL_ATTRIBUTES = _MODULE_BOOKKEEPING | {"training", "timeout", "_remote_type_name"}

T = TypeVar("T", bound="RemoteModule")


class RemoteDevice(NamedTuple):
    """A parsed ``remote_device``: the owner (worker name or rank) and the device on it."""

    on: str | int
    device: torch.device


def parse_remote_device(remote_device: str) -> RemoteDevice:
    """Parse ``"<workername>/<device>"``, ``"rank:<n>/<device>"`` or a bare worker name.

    Example::

        >>> parse_remote_device("rank:1/cpu")
        RemoteDevice(on=1, device=device(type='cpu'))
    """
    if not isinstance(remote_device, str):
        raise ValueError(_PARSE_ERROR.format(remote_device))
    return _parse_remote_device(remote_device)


@functools.lru_cache(maxsize=256)
def _parse_remote_device(remote_device: str) -> RemoteDevice:
    error = ValueError(_PARSE_ERROR.format(remote_device))
    fields = remote_device.split("/")
    if len(fields) == 2:
        owner, device = fields
    elif len(fields) == 1 and not _is_local_device(fields[0]):
        owner, device = fields[0], "cpu"
    else:
        raise error
    if not owner or not _encodable(owner):
        raise error
    parsed_device = torch.device(device)  # torch's own RuntimeError for a bad device
    parts = owner.split(":")
    if len(parts) == 1:
        return RemoteDevice(owner, parsed_device)
    if len(parts) == 2 and parts[0] == "rank" and parts[1].isascii() and parts[1].isdigit():
        return RemoteDevice(int(parts[1]), parsed_device)
    raise error


class _RemoteModuleType(type):
    """The metaclass of :class:`RemoteModule`: ``dir()`` of a RemoteModule class, and of an
    instance through ``RemoteModule.__dir__``, lists what a RemoteModule has: what its classes
    define (subclasses and mixins included, RemoteModule's private helpers not) and
    ``__call__``; not nn.Module's methods, which raise on a RemoteModule or need local state.
    ``torch.jit.script`` walks this list several times on every call."""

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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _internal_rpc_pickler._register_reducer(cls, _reduce_remote_module)

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
        ) -> None: ...

    else:
        # Short on purpose: torch.jit.script reads and parses __init__'s source on every call.
        # inspect.signature(RemoteModule) shows _construct's signature (set below the class).
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__()
            self._construct(*args, **kwargs)

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
    ) -> None:
        args, kwargs = _check_arguments(args, kwargs)
        interface_cls = _pick_interface(module_interface_cls, _module_interface_cls)
        move_tensors = self._prepare(remote_device, interface_cls, timeout)
        module_name = self._generated_module_name(interface_cls, move_tensors)
        creating = f"RemoteModule: creating {_callable_name(module_cls)}"
        if interface_cls is None:
            # Asynchronous: a module_cls that fails surfaces on the first call.
            with _failures_named(creating, repr(self.on)):
                self.module_rref = rpc.remote(
                    self.on,
                    _create_module,
                    (module_cls, args, kwargs, self.device),
                    timeout=self.timeout,
                )
            self._install(registry.non_scriptable_module())
        else:
            # One round trip: the owner loads the generated module, creates and scripts the
            # module; meanwhile this side loads the same generated module.
            started = time.monotonic()
            future = rpc.rpc_async(
                self.on,
                _create_scripted_module,
                (module_cls, args, kwargs, self.device, interface_cls, move_tensors, module_name),
                timeout=0,  # bounded below; the reply carries an RRef (see wait_returning_rrefs)
            )
            self._install(registry.ensure_module(module_name, interface_cls, move_tensors))
            with _failures_named(creating, repr(self.on)):
                self.__dict__["module_rref"] = wait_returning_rrefs(future, self.timeout, started)
        if isinstance(module_cls, type):
            self.__dict__["_remote_type_name"] = module_cls.__qualname__

    @staticmethod
    def init_from_module_rref(
        remote_device: str,
        module_rref: rpc.RRef,
        module_interface_cls: Any = None,
        *,
        _module_interface_cls: Any = None,
        timeout: float | None = None,
    ) -> RemoteModule:
        """A RemoteModule over an existing module RRef (for example one received over RPC).

        Several RemoteModules can share one remote module this way; it is also how a scripted
        RemoteModule reaches another worker: send ``rm.get_module_rref()`` and rebuild it there.
        """
        remote_module = RemoteModule.__new__(RemoteModule)
        nn.Module.__init__(remote_module)
        interface_cls = _pick_interface(module_interface_cls, _module_interface_cls)
        move_tensors = remote_module._prepare(remote_device, interface_cls, timeout)
        module_name = remote_module._generated_module_name(interface_cls, move_tensors)
        remote_module.module_rref = module_rref
        if interface_cls is not None:
            # The owner may never have compiled this interface's remote functions.
            future = rpc.rpc_async(
                module_rref.owner(),
                _ensure_generated_module,
                (module_name, interface_cls, move_tensors),
                timeout=remote_module.timeout,
            )
            generated = registry.ensure_module(module_name, interface_cls, move_tensors)
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
            self.module_rref.owner(), _parameter_rrefs, (self.module_rref, recurse), timeout=0
        )
        with self._failures_named("remote_parameters"):
            return wait_returning_rrefs(future, self.timeout, started)

    def get_module_rref(self) -> rpc.RRef[nn.Module]:
        """The RRef to the module on its owner."""
        return self.module_rref

    def remote_state_dict(self) -> dict[str, torch.Tensor]:
        """The owner's ``state_dict()``, its tensors on this side's CPU."""
        return self._on_owner("remote_state_dict", _state_dict_on_owner, self.module_rref)

    def load_remote_state_dict(
        self, state_dict: dict[str, torch.Tensor], strict: bool = True
    ) -> Any:
        """``load_state_dict`` on the owner; returns its ``(missing_keys, unexpected_keys)``."""
        cpu_state = move_to_device(dict(state_dict), torch.device("cpu"))
        return self._on_owner(
            "load_remote_state_dict", _load_state_dict_on_owner, self.module_rref, cpu_state, strict
        )

    def train(self: T, mode: bool = True) -> T:
        """Set training mode on the owner's module and here; returns ``self``."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self._on_owner("train", _train_on_owner, self.module_rref, mode)
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
        """Called by ``torch.jit.script``: hands torch the exported methods parsed once per
        process instead of on every call (see ``remote_module._scripting``)."""
        if self.is_scriptable:
            use_script_stubs(
                self,
                [*self.generated_methods, RemoteModule.__getstate__, RemoteModule.__setstate__],
            )
        return self

    @property
    def __jit_ignored_attributes__(self) -> list[str]:
        """Attributes ``torch.jit.script`` need not try (and fail) to type on every call: the
        generated methods, which it compiles from their source anyway, and their list."""
        methods = self.__dict__.get("generated_methods", ())
        return ["generated_methods", *(method.__name__ for method in methods)]

    def __dir__(self) -> list[str]:
        # What the class lists, the RemoteModule's own attributes and its generated methods;
        # not nn.Module's bookkeeping (hooks, empty parameter dicts), which torch.jit.script
        # would walk on every call.
        own = (name for name in self.__dict__ if name not in _MODULE_BOOKKEEPING)
        return sorted({*dir(type(self)), *own})

    def __repr__(self) -> str:
        return (
            f"RemoteModule(on={self.on!r}, device={self.device!r}, "
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

    def _prepare(self, remote_device: str, interface_cls: Any, timeout: float | None) -> bool:
        """Set the local attributes; returns whether tensors move to a non-CPU device."""
        if not rpc._is_current_rpc_agent_set():
            raise AssertionError("RemoteModule only works in RPC.")
        parsed = parse_remote_device(remote_device)
        agent = rpc._get_current_rpc_agent()
        # Plain values: straight into __dict__, past nn.Module.__setattr__'s type checks.
        self.__dict__.update(
            on=parsed.on,
            device=str(parsed.device),
            is_device_map_set=bool(agent._get_device_map(_worker_info(agent, parsed.on))),
            is_scriptable=interface_cls is not None,
            timeout=_check_timeout(timeout),
        )
        return parsed.device.type != "cpu"

    def _generated_module_name(self, interface_cls: Any, move_tensors: bool) -> str:
        if interface_cls is None:
            return registry.non_scriptable_module().__name__
        return registry.scriptable_module_name(interface_cls, move_tensors)

    def _install(self, generated: types.ModuleType) -> None:
        methods = list(generated._generated_methods)
        self.__dict__["generated_methods"] = methods
        for method in methods:
            self.__dict__[method.__name__] = types.MethodType(torch.jit.export(method), self)
        _check_attributes(self)

    def _on_owner(self, method: str, fn: Callable[..., Any], *args: Any) -> Any:
        with self._failures_named(method):
            return rpc.rpc_sync(self.module_rref.owner(), fn, args, timeout=self.timeout)

    def _failures_named(self, method: str) -> contextlib.AbstractContextManager[None]:
        return _failures_named(f"RemoteModule.{method}", repr(self.module_rref.owner_name()))

    def _remote_module_type(self) -> str:
        name = self.__dict__.get("_remote_type_name")
        if name is None:
            try:
                name = self._on_owner("__repr__", _type_name_on_owner, self.module_rref)
            except RuntimeError:
                return "<unreachable>"
            self._remote_type_name = name
        return name


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


RemoteModule.parameters._rm_unsupported = True  # type: ignore[attr-defined]
RemoteModule.__init__.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    RemoteModule._construct
)

# nn.Module methods that would need the module's local state.
for _name in (
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
):
    setattr(RemoteModule, _name, _unsupported(_name))
del _name


@contextlib.contextmanager
def _failures_named(what: str, owner: str) -> Iterator[None]:
    """Re-raise an RPC failure (timeout, lost peer) naming the step and the owner."""
    try:
        yield
    except RuntimeError as error:
        raise RuntimeError(f"{what} on worker {owner} failed: {error}") from error


def _raise_not_supported(name: str) -> NoReturn:
    raise ValueError(_NOT_SUPPORTED.format(name))


def _pick_interface(module_interface_cls: Any, legacy: Any) -> Any:
    if (
        module_interface_cls is not None
        and legacy is not None
        and module_interface_cls is not legacy
    ):
        raise ValueError(
            "pass the interface as module_interface_cls or _module_interface_cls, not both"
        )
    return module_interface_cls if module_interface_cls is not None else legacy


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


def _check_arguments(args: Any, kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if args is None:
        args = ()
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"RemoteModule args must be a tuple or list, got {type(args).__name__}")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, (dict, Mapping)) or not all(isinstance(key, str) for key in kwargs):
        raise TypeError(f"RemoteModule kwargs must be a mapping with str keys, got {kwargs!r:.100}")
    return tuple(args), dict(kwargs)


def _check_attributes(remote_module: RemoteModule) -> None:
    """Every attribute either crosses the wire or is known to stay local."""
    methods = {method.__name__ for method in remote_module.generated_methods}
    for name in remote_module.__dict__:
        if (
            name not in _PICKLED_ATTRIBUTES
            and name not in _LOCAL_ATTRIBUTES
            and name not in methods
        ):
            raise AttributeError(
                f"RemoteModule attribute {name!r} is neither sent over RPC nor known to be local"
            )


def _callable_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__


# --- On the owner -------------------------------------------------------------------------


def _create_module(
    module_cls: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], device: str
) -> nn.Module:
    module = module_cls(*args, **kwargs)
    if not isinstance(module, nn.Module):
        raise ValueError(
            "Expect `module_cls(*args, **kwargs)` returns an instance of <class nn.Module>, "
            f"but it returns an instance of {type(module)}."
        )
    if device != "cpu" or not _plain_module_on_cpu(module):
        module = module.to(device)
    return module


def _plain_module_on_cpu(module: nn.Module) -> bool:
    """Whether ``module.to("cpu")`` would change nothing: no ``to``/``_apply`` of its own and
    every parameter and buffer on the CPU. ``.to()`` walks every submodule and tensor even
    then, at a cost comparable to creating a small module; user methods such as
    ``parameters()`` are not called here."""
    pending = [module]
    while pending:
        current = pending.pop()
        cls = type(current)
        if cls.to is not nn.Module.to or cls._apply is not nn.Module._apply:
            return False
        for tensor in itertools.chain(current._parameters.values(), current._buffers.values()):
            if tensor is not None and tensor.device.type != "cpu":
                return False
        pending.extend(child for child in current._modules.values() if child is not None)
    return True


def _create_scripted_module(
    module_cls: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    device: str,
    interface_cls: Any,
    move_tensors: bool,
    module_name: str,
) -> rpc.RRef:
    # Load the remote functions before the first call can reach this worker.
    registry.ensure_module(module_name, interface_cls, move_tensors)
    module = _create_module(module_cls, args, kwargs, device)
    if not isinstance(module, torch.jit.ScriptModule):
        module = torch.jit.script(module)
    if not isinstance(module, torch.jit.ScriptModule):
        return rpc.RRef(module)  # TorchScript is disabled (PYTORCH_JIT=0): a plain module
    return rpc.RRef(module, interface_cls)


def _local_module(module_rref: rpc.RRef) -> nn.Module:
    """The module an RRef owns here; an interface-typed RRef yields the bare C++ script module,
    which gets its Python wrapper back (``train``, ``state_dict``, ``parameters``)."""
    module = module_rref.local_value()
    if isinstance(module, torch._C.ScriptModule):
        return torch.jit._recursive.wrap_cpp_module(module)
    return module


def _ensure_generated_module(module_name: str, interface_cls: Any, move_tensors: bool) -> None:
    registry.ensure_module(module_name, interface_cls, move_tensors)


def _parameter_rrefs(module_rref: rpc.RRef, recurse: bool) -> list[rpc.RRef[Parameter]]:
    return [rpc.RRef(param) for param in _local_module(module_rref).parameters(recurse)]


def _state_dict_on_owner(module_rref: rpc.RRef) -> dict[str, torch.Tensor]:
    state = _local_module(module_rref).state_dict()
    return collections.OrderedDict((key, value.detach().cpu()) for key, value in state.items())


def _load_state_dict_on_owner(
    module_rref: rpc.RRef, state_dict: dict[str, Any], strict: bool
) -> Any:
    result = _local_module(module_rref).load_state_dict(state_dict, strict=strict)
    return (list(result.missing_keys), list(result.unexpected_keys))


def _train_on_owner(module_rref: rpc.RRef, mode: bool) -> None:
    _local_module(module_rref).train(mode)


def _type_name_on_owner(module_rref: rpc.RRef) -> str:
    module = _local_module(module_rref)
    return getattr(module, "original_name", None) or type(module).__qualname__


# --- Over RPC -----------------------------------------------------------------------------


class _GeneratedMethods(NamedTuple):
    """How ``generated_methods`` travels: the module to load, not pickled function objects."""

    module_name: str
    interface_cls: Any
    move_tensors: bool


def _reduce_remote_module(remote_module: RemoteModule) -> tuple[Any, tuple[Any, ...]]:
    generated = remote_module.generated_methods[0].__globals__
    spec = _GeneratedMethods(
        generated["__name__"],
        generated.get("_rm_module_interface_cls"),
        bool(generated.get("MOVES_CPU_TENSORS_TO_DEVICE", False)),
    )
    values = {name: getattr(remote_module, name) for name in _PICKLED_ATTRIBUTES}
    values["generated_methods"] = spec
    values["module_rref"] = remote_module.module_rref._serialize()
    return _receive_remote_module, (type(remote_module), *values.values())


def _receive_remote_module(cls: type[RemoteModule], *values: Any) -> RemoteModule:
    attributes = dict(zip(_PICKLED_ATTRIBUTES, values, strict=True))
    spec = attributes["generated_methods"]  # replaced by the loaded methods, in its place
    remote_module = cls.__new__(cls)
    nn.Module.__init__(remote_module)
    remote_module.__dict__.update(attributes)
    remote_module.module_rref = rpc.PyRRef._deserialize(attributes["module_rref"])
    remote_module.timeout = _UNSET_TIMEOUT
    remote_module._install(registry.ensure_module(*spec))
    return remote_module


def _reduce_script_module(module: torch.jit.RecursiveScriptModule) -> tuple[Any, tuple[Any, ...]]:
    if hasattr(module._c, "module_rref"):
        raise RuntimeError(_SCRIPTED_OVER_RPC_ERROR)
    buffer = io.BytesIO()
    torch.jit.save(module, buffer)
    return _load_script_module, (buffer.getvalue(),)


def _load_script_module(data: bytes) -> torch.jit.ScriptModule:
    return torch.jit.load(io.BytesIO(data))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


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


def _is_local_device(text: str) -> bool:
    try:
        torch.device(text)
    except RuntimeError:
        return False
    return True


_internal_rpc_pickler._register_reducer(RemoteModule, _reduce_remote_module)
_internal_rpc_pickler._register_reducer(torch.jit.RecursiveScriptModule, _reduce_script_module)
