"""``RemoteModule``: an ``nn.Module`` that lives on another RPC worker, drop-in for
``torch.distributed.nn.RemoteModule``.

The caller holds an RRef to the module on its owner plus generated methods (``forward``,
``forward_async`` and, with an interface, every other interface method) installed as
exported methods, so ``torch.jit.script`` compiles a RemoteModule built with an interface.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.distributed.rpc as rpc
from torch import nn
from torch.nn.parameter import Parameter

from remote_module import _torchscript
from remote_module._shared import COUNTING
from remote_module.runtime import owner
from remote_module.runtime.batching import Batching
from remote_module.runtime.caller import construction, failover, pending, pickling, refused
from remote_module.runtime.caller.record import Record
from remote_module.runtime.caller.replies import wait_returning_rrefs
from remote_module.runtime.errors import RemoteFailure
from remote_module.runtime.values import move_to_device

__all__ = ["RemoteModule"]

T = TypeVar("T", bound="RemoteModule")


class RemoteModule(nn.Module, metaclass=refused.RemoteModuleType):
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
            half the bytes on a network link. ``torch.int8``: 8-bit codes with a float32
            scale per block of 1,024 values (each value within half its block's step;
            tensors of fewer than 512 values cross as bf16): a quarter of float32's bytes.
            Gradients flow through both under distributed autograd. On one machine either
            costs more than it saves. ``None`` (the default) sends tensors as they are.
        standby: remote devices, in order of preference, of workers that keep the module's
            newest checkpoint and take it over when its owner dies (raising
            ``remote_module.OwnerFailover`` from the operation that met the death).
        checkpoint_every: with ``standby``, the owner checkpoints to the standbys by itself
            after every N-th call (``rm.checkpoint()`` does it now).
        batching: a :class:`remote_module.Batching`: concurrent calls of its methods, from
            any holder, merged on the owner (their rows concatenated, the method run once).
        fake: for ``torch.compile`` and ``torch.export``: ``fake(method_name, *args,
            **kwargs)`` gets fake tensors and returns the method's result in fake tensors, as
            a ``torch.library.register_fake`` function does. Without it the shapes come from
            the module built on the meta device here, or from the owner.

    Example::

        >>> rm = RemoteModule("worker1/cpu", nn.Linear, args=(16, 4))
        >>> rm(torch.ones(2, 16)).shape
        torch.Size([2, 4])
    """

    # Its record (runtime.caller.record): in a slot, not in __dict__, which TorchScript walks
    # when scripting and upstream's tests compare.
    __slots__ = ("_rm_record",)

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
        standby: list[str] | None
        batching: Batching | None
        _rm_bound_interface: Any
        _rm_record: Record

        # The generated methods (installed per instance): anything, for type checkers; a
        # typed class (``Remote<Interface>``) declares exactly its interface's methods.
        def __getattr__(self, name: str) -> Any: ...

    else:

        def __getattr__(self, name: str) -> Any:
            # Only for what __dict__ lacks: module_rref while a construction's reply is
            # untaken (taking it: runtime.pending), nn.Module's lookups otherwise.
            if name == "module_rref":
                return pending.module_rref(self)
            return nn.Module.__getattr__(self, name)

    # The interface a generated typed class (``Remote<Interface>``) is bound to.
    _rm_bound_interface = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        pickling.register(cls, pickling.reduce_remote_module)

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
        standby: list[str] | None = None,
        checkpoint_every: int | None = None,
        fake: Callable[..., Any] | None = None,
        batching: Batching | None = None,
    ) -> None:
        construction.construct(
            self,
            remote_device,
            module_cls,
            args,
            kwargs,
            module_interface_cls,
            _module_interface_cls=_module_interface_cls,
            timeout=timeout,
            wire_dtype=wire_dtype,
            standby=standby,
            checkpoint_every=checkpoint_every,
            fake=fake,
            batching=batching,
        )

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
        fake: Callable[..., Any] | None = None,
        batching: Batching | None = None,
    ) -> T:
        """A RemoteModule over an existing module RRef (for example one received over RPC).

        Several RemoteModules can share one remote module this way; it is also how a scripted
        RemoteModule reaches another worker: send ``rm.get_module_rref()`` and rebuild it there.
        """
        return construction.from_module_rref(
            cls,
            remote_device,
            module_rref,
            module_interface_cls,
            _module_interface_cls=_module_interface_cls,
            timeout=timeout,
            wire_dtype=wire_dtype,
            fake=fake,
            batching=batching,
        )

    def remote_parameters(self, recurse: bool = True) -> list[rpc.RRef[Parameter]]:
        """RRefs to the remote module's parameters, for ``DistributedOptimizer``."""
        pending.created(self)  # a failed creation raises as it is named
        at = self._rm_record.seat()
        started = time.monotonic()
        try:
            future = rpc.rpc_async(
                self.module_rref.owner(),
                owner.request,  # what it raises comes back as data (see _on_owner)
                (owner.parameter_rrefs, self.module_rref, recurse),
                timeout=0,
            )
            result = wait_returning_rrefs(future, self.timeout, started)
        except Exception as error:  # the RPC itself failed: a timeout, a lost owner
            raise failover.failed(self, error, "remote_parameters", at) from error
        if isinstance(result, RemoteFailure):
            raise result.error(
                "remote_parameters", self.module_rref.owner_name(), self._rm_record.creator
            )
        return result

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

    def checkpoint(self) -> int:
        """Copy the module's state (``state_dict()`` and ``training``) from the owner to every
        standby, owner to standby directly; its version (1, 2, ...), once every standby
        holds it. Needs ``standby=[...]``."""
        return failover.checkpoint(self)

    def fail_over(self) -> str:
        """Promote the first standby now, with the owner alive or not (a planned move: call
        :meth:`checkpoint` first to carry the newest state); the new owner's worker name.
        TorchScript code that holds this RemoteModule keeps calling the owner it was
        scripted with: script it again."""
        return failover.fail_over(self)

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
            interface = getattr(self._rm_record.generated, "INTERFACE", None)
            built = (
                "without an interface"
                if interface is None
                else f"with the typing.Protocol interface {interface}"
            )
            raise TypeError(
                f"{type(self).__name__} {built} cannot be scripted: torch.jit.script needs a "
                "RemoteModule built with a @torch.jit.interface (or @remote_module.interface) "
                "class, passed as module_interface_cls="
            )
        methods: list[Callable[..., Any]] = [
            *self.generated_methods,
            RemoteModule.__getstate__,
            RemoteModule.__setstate__,
        ]
        _torchscript.parse_script_stubs(methods)  # while the owner may still create and load
        # Scripted calls go straight to the owner's compiled remote functions.
        pending.wait_for_owner(self, "torch.jit.script")
        construction.complete(self)  # what TorchScript reads from __dict__
        # torch scripts a twin of this RemoteModule (the same state and record), whose methods
        # are the stubs: this one keeps its methods, so that torch.compile and torch.export
        # still trace it afterwards (Dynamo before 2.13 cannot trace a stub).
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin._rm_record = self._rm_record
        # checkpoint_every: its TorchScript calls are counted (None: TorchScript compiles none)
        twin.__dict__[COUNTING] = failover.count_scripted(self)
        _torchscript.use_script_stubs(twin, methods)
        return twin

    @property
    def __jit_ignored_attributes__(self) -> list[str]:
        """Attributes ``torch.jit.script`` need not try (and fail) to type on every call: the
        generated methods, which it compiles from their source anyway, and their list."""
        methods = self.__dict__.get("generated_methods", ())
        return ["generated_methods", *(m.__name__ for m in methods)]

    def __dir__(self) -> list[str]:
        # What the class lists, the RemoteModule's own attributes and its generated methods;
        # not nn.Module's bookkeeping (hooks, empty parameter dicts), which torch.jit.script
        # would walk on every call.
        own = (
            name
            for name in self.__dict__
            if name not in construction.MODULE_BOOKKEEPING and name != COUNTING
        )
        return sorted({*dir(type(self)), *own, "module_rref"})  # (before the reply is taken too)

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
            refused.raise_not_supported("named_modules")
        return refused.leaf(self, memo, prefix, remove_duplicate)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        destination = kwargs.get("destination", args[0] if args else None)
        if destination is None:
            refused.raise_not_supported("state_dict")
        return destination

    def _apply(self: T, fn: Any, recurse: bool = True) -> T:
        return self

    # ... while direct calls that cannot work remotely say so.

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        if refused.walked_by_torch(sys._getframe(1)):  # a leaf to torch's tracers
            return iter(())
        refused.raise_not_supported("parameters", ". Please use ``remote_parameters`` instead.")

    def _on_owner(self, method: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the owner; what it raises there comes back as data and is raised
        here once, named (torch would print it there and put its traceback in the text)."""
        pending.created(self)  # a failed creation raises as it is named
        at = self._rm_record.seat()
        try:
            result = rpc.rpc_sync(
                self.module_rref.owner(), owner.request, (fn, *args), timeout=self.timeout
            )
        except Exception as error:  # the RPC itself failed: a timeout, a lost owner
            raise failover.failed(self, error, method, at) from error
        if isinstance(result, RemoteFailure):
            raise result.error(method, self.module_rref.owner_name(), self._rm_record.creator)
        return result

    def _remote_module_type(self) -> str:
        record = self._rm_record
        if record.type_name is None:
            try:
                record.type_name = self._on_owner("__repr__", owner.type_name, self.module_rref)
            except Exception:  # repr() never raises: an owner gone, or its module
                return "<unreachable>"
        return record.type_name


# How torch's RPC pickler sends a RemoteModule, and a scripted module (refused for a scripted
# RemoteModule): runtime.pickling.
pickling.register(RemoteModule, pickling.reduce_remote_module)
pickling.register(torch.jit.RecursiveScriptModule, pickling.reduce_script_module)
# A RemoteModule received over RPC has in its __dict__ exactly what upstream's has (torch's own
# test compares the keys): nn.Module's bookkeeping and the options' defaults come from here,
# so that it is still callable as rm(x).
_class_defaults = {**vars(nn.Module()), **construction.OPTION_DEFAULTS}
for _name, _value in _class_defaults.items():
    setattr(RemoteModule, _name, _value)
del _class_defaults, _name, _value
refused.install(RemoteModule)
