"""How a RemoteModule comes to life, four ways, through one initialiser.

- the constructor without an interface (:func:`construct`): ``rpc.remote`` of
  ``owner.create``, asynchronous; a ``module_cls`` that fails surfaces at the first call
  (or send over RPC);
- the constructor with an interface (:func:`construct`): a request to
  ``owner.create_with_interface``, which creates (and scripts) the module, sent and not
  awaited; the first operation that needs the module takes the reply (and the owner's load of
  the generated module may follow in a second request: ``remote_module.runtime.caller.pending``);
- :func:`from_module_rref`: over an existing RRef (``RemoteModule.init_from_module_rref``);
- :func:`received`: a RemoteModule that arrived over RPC (``remote_module.runtime.wire``).

Each ends in :func:`initialise`, which sets the public attributes in upstream's order, the
generated methods and the RemoteModule's record (``remote_module.runtime.caller.record``).
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch
import torch.distributed.rpc as rpc
from torch import nn
from torch.futures import Future

from remote_module import _compat, _shared
from remote_module.runtime import owner, registry
from remote_module.runtime.batching import Batching
from remote_module.runtime.caller import arguments, failover, replies, route
from remote_module.runtime.caller.arguments import is_device_map_set, target
from remote_module.runtime.caller.record import LIVE, Creation, Plan, Record
from remote_module.runtime.errors import failure
from remote_module.runtime.owner.state import Recipe

T = TypeVar("T", bound=nn.Module)

__all__ = [
    "LOCAL_ATTRIBUTES",
    "MODULE_BOOKKEEPING",
    "OPTIONS",
    "OPTION_DEFAULTS",
    "PICKLED_ATTRIBUTES",
    "Placement",
    "complete",
    "construct",
    "from_module_rref",
    "initialise",
    "received",
]

_UNSET_TIMEOUT = float(rpc.constants.UNSET_RPC_TIMEOUT)

# What crosses the wire when a RemoteModule is sent over RPC, in this order (see
# remote_module.runtime.wire): the generated methods travel as their module's name.
PICKLED_ATTRIBUTES = (
    "on",
    "device",
    "is_device_map_set",
    "is_scriptable",
    "generated_methods",
    "module_rref",
)
# Local state that stays behind: nn.Module's own bookkeeping. Everything else a RemoteModule
# knows is in its record, not in its __dict__.
MODULE_BOOKKEEPING = frozenset(nn.Module().__dict__) - {"training"}
# The options a RemoteModule is built with, and their defaults: they travel with it where
# set (see wire); one that arrived over RPC reads the defaults from its class.
OPTION_DEFAULTS: dict[str, Any] = {
    "timeout": _UNSET_TIMEOUT,
    "wire_dtype": None,
    "standby": None,
    "batching": None,
}
OPTIONS = tuple(OPTION_DEFAULTS)
LOCAL_ATTRIBUTES = MODULE_BOOKKEEPING | {"training", *OPTIONS}


class Placement:
    """The first four attributes that cross the wire, in their order: where the module lives
    and how it is called. (A plain class: a NamedTuple cost ~0.1 ms of every import.)"""

    __slots__ = ("device", "is_device_map_set", "is_scriptable", "on")

    def __init__(
        self, on: str | int, device: str, is_device_map_set: bool, is_scriptable: bool
    ) -> None:
        self.on = on
        self.device = device
        self.is_device_map_set = is_device_map_set
        self.is_scriptable = is_scriptable

    def __iter__(self) -> Iterator[Any]:
        return iter((self.on, self.device, self.is_device_map_set, self.is_scriptable))


def initialise(
    remote_module: Any,
    placement: Placement,
    module_rref: Any,
    generated: types.ModuleType,
    timeout: float = _UNSET_TIMEOUT,
    wire_dtype: torch.dtype | None = None,
    record: Record | None = None,
    arrived: bool = False,
    standby: list[str] | None = None,
    batching: Batching | None = None,
) -> None:
    """Give ``remote_module`` its state: the six attributes that cross the wire, in upstream's
    order, then nn.Module's bookkeeping, its options and the generated methods; and its
    record. ``module_rref`` is None while a construction's reply is untaken: it is not in
    ``__dict__`` then (reading it takes the reply: ``remote_module.runtime.caller.pending``). One
    that ``arrived`` over RPC has in its ``__dict__`` exactly what upstream's has (the six,
    then the generated methods; torch's own test compares the keys), plus the options its
    sender set: nn.Module's bookkeeping and the options' defaults it reads from
    its class (see ``RemoteModule``) until scripting gives it its own (:func:`complete`)."""
    state = remote_module.__dict__  # plain values, past nn.Module.__setattr__'s checks
    methods = list(getattr(generated, _shared.GENERATED_METHODS))
    state.update(zip(PICKLED_ATTRIBUTES, (*placement, methods, module_rref), strict=True))
    if module_rref is None:
        del state["module_rref"]
    options = {
        "timeout": timeout,
        "wire_dtype": wire_dtype,
        "standby": standby,
        "batching": batching,
    }
    if not arrived:
        nn.Module.__init__(remote_module)
        state.update(options)
    for method in methods:
        state[method.__name__] = types.MethodType(torch.jit.export(method), remote_module)
    if arrived:
        state.update(
            (name, value) for name, value in options.items() if value != OPTION_DEFAULTS[name]
        )
    remote_module._rm_record = record = record if record is not None else Record(generated)
    LIVE[record.local_id] = remote_module  # for the compiled route (runtime.caller.ops)
    _check_attributes(remote_module, methods)
    if module_rref is not None:  # else once the construction's reply is taken (pending)
        route.choose(remote_module)


def complete(remote_module: Any) -> None:
    """Give a RemoteModule that arrived over RPC the state TorchScript reads from its
    ``__dict__`` (nn.Module's bookkeeping, the options), as one built here has it."""
    state = remote_module.__dict__
    if "_parameters" not in state:
        for name, value in vars(nn.Module()).items():
            state.setdefault(name, value)
    for name, value in OPTION_DEFAULTS.items():
        state.setdefault(name, value)


def _check_attributes(remote_module: Any, methods: list[Any]) -> None:
    """Every attribute either crosses the wire or is known to stay local."""
    names = {method.__name__ for method in methods}
    for name in remote_module.__dict__:
        if name not in PICKLED_ATTRIBUTES and name not in LOCAL_ATTRIBUTES and name not in names:
            raise AttributeError(
                f"RemoteModule attribute {name!r} is neither sent over RPC nor known to be local"
            )


def construct(
    remote_module: Any,
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
    """``RemoteModule(...)``: see the class's docstring. Sends the creation and returns: it
    never blocks on the owner (pytorch#58098)."""
    args, kwargs = arguments.check_args(args, kwargs)
    interface_cls = arguments.pick_interface(
        type(remote_module), module_interface_cls, _module_interface_cls
    )
    placement, move_tensors = _placement(remote_device, interface_cls)
    seconds = arguments.check_timeout(timeout)
    wire_dtype = arguments.check_wire_dtype(wire_dtype)
    batching = arguments.check_batching(batching, interface_cls, module_cls)
    seats = failover.seats(placement.on, placement.device, remote_device, standby, checkpoint_every)
    if seats is not None:  # the module's calls may go to any seat: one generated module for all
        move_tensors = move_tensors or failover.off_cpu(seats)
    creator = arguments.callable_name(module_cls)
    if interface_cls is None:
        module_rref = _create(placement, module_cls, args, kwargs, creator)
        generated = registry.non_scriptable_module()
        module_name = None
    else:
        creating = (module_cls, args, kwargs, placement.device, interface_cls)
        sent = time.monotonic()  # a request that took the timeout to send is late
        future = _create_with_interface(placement, creating, creator)  # before the parse below
        arrivals = replies.watch(future)  # the reply is judged by when it came
        module_name = registry.scriptable_module_name(interface_cls, move_tensors)
        loading = (module_name, interface_cls, move_tensors, wire_dtype is not None)
        try:  # the owner's load of the generated module, beside the creation
            load = rpc.rpc_async(placement.on, owner.load_generated, loading, timeout=seconds)
        except RuntimeError as error:
            raise failure(error, f"RemoteModule: creating {creator}", placement.on) from error
        loading_started = time.monotonic()
        generated = registry.ensure_module(*loading)  # as the owner creates and loads its own
        # Not counted: this side's own load and compile hold the GIL, and with it the callback
        # that notes when the reply came.
        sent += time.monotonic() - loading_started
        creation = Creation(future, sent, arrivals, creator)
        module_rref = None  # until the creation's reply is taken (runtime.caller.pending)
    plan = None
    if seats is not None:
        recipe = Recipe(
            module_cls,
            args,
            kwargs,
            interface_cls,
            module_name,
            move_tensors,
            wire_dtype is not None,
            placement.is_scriptable,
        )
        plan = failover.make_plan(seats, checkpoint_every, recipe)
    type_name = module_cls.__qualname__ if isinstance(module_cls, type) else None
    record = Record(generated, creator, type_name, plan)
    record.fake = arguments.check_fake(fake)
    record.twin_recipe = (module_cls, args, kwargs)  # the compiled route's meta twin
    if interface_cls is not None:
        record.creation = creation
        record.pending = load
    standbys = None if seats is None else [seat.text for seat in seats[1:]]
    initialise(
        remote_module,
        placement,
        module_rref,
        generated,
        seconds,
        wire_dtype,
        record,
        standby=standbys,
        batching=batching,
    )


def _create(
    placement: Placement,
    module_cls: Callable[..., nn.Module],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    creator: str,
) -> Any:
    """Without an interface: ``rpc.remote`` of ``owner.create``, sent first and not awaited; a
    ``module_cls`` that fails surfaces on the first call. No RPC deadline (0): a creation whose
    reply came after one would leave the module's OwnerRRef on the owner for good (torch drops
    a late reply's RRef bookkeeping); the timeout bounds the first call instead. ``module_cls``
    and its arguments travel pickled inside the message (see ``owner.create``)."""
    try:
        recipe, tensors = _compat.rpc_serialize((module_cls, args, kwargs))
        return rpc.remote(
            placement.on, owner.create, (recipe, tensors, placement.device), timeout=0
        )
    except RuntimeError as error:
        raise failure(error, f"RemoteModule: creating {creator}", placement.on) from error


def _create_with_interface(
    placement: Placement, creating: tuple[Any, ...], creator: str
) -> Future[Any]:
    """With an interface: ``owner.create_with_interface``, sent and not awaited (the first
    operation that needs the module takes the reply: ``runtime.caller.pending``), without an
    RPC deadline (its reply carries an RRef: ``runtime.caller.replies``): the caller judges it
    against the timeout from when it was sent, less its own load."""
    try:
        return rpc.rpc_async(placement.on, owner.create_with_interface, creating, timeout=0)
    except RuntimeError as error:
        raise failure(error, f"RemoteModule: creating {creator}", placement.on) from error


def from_module_rref(
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
    """``RemoteModule.init_from_module_rref``: see its docstring."""
    fake = arguments.check_fake(fake)
    remote_module = cls.__new__(cls)
    interface_cls = arguments.pick_interface(cls, module_interface_cls, _module_interface_cls)
    placement, move_tensors = _placement(remote_device, interface_cls, module_rref)
    seconds = arguments.check_timeout(timeout)
    wire_dtype = arguments.check_wire_dtype(wire_dtype)
    batching = arguments.check_batching(batching, interface_cls, None)
    if interface_cls is None:
        generated = registry.non_scriptable_module()
        record = Record(generated)
        record.fake = fake
        initialise(
            remote_module,
            placement,
            module_rref,
            generated,
            seconds,
            wire_dtype,
            record,
            batching=batching,
        )
        return remote_module
    # The owner may never have compiled this interface's remote functions: asked, not awaited
    # (what reaches them waits for it, as after a first construction: runtime.pending).
    module_name = registry.scriptable_module_name(interface_cls, move_tensors)
    wired = wire_dtype is not None
    try:
        future = rpc.rpc_async(
            module_rref.owner(),
            owner.load_generated,
            (module_name, interface_cls, move_tensors, wired),
            timeout=seconds,
        )
    except RuntimeError as error:
        what = "RemoteModule.init_from_module_rref"
        raise failure(error, what, module_rref.owner_name()) from error
    generated = registry.ensure_module(module_name, interface_cls, move_tensors, wired)
    record = Record(generated)
    record.fake = fake
    record.pending = future
    initialise(
        remote_module,
        placement,
        module_rref,
        generated,
        seconds,
        wire_dtype,
        record,
        batching=batching,
    )
    return remote_module


def received(
    cls: type[T],
    placement: Placement,
    generated: types.ModuleType,
    module_rref: Any,
    options: dict[str, Any],
    plan: Plan | None = None,
) -> T:
    """A RemoteModule that arrived over RPC: its sender's placement, module, the options it
    set (the defaults for the others) and its failover plan."""
    remote_module = cls.__new__(cls)
    timeout = options.get("timeout", _UNSET_TIMEOUT)
    wire_dtype = options.get("wire_dtype")
    record = Record(generated, failover=plan)
    initialise(
        remote_module,
        placement,
        module_rref,
        generated,
        timeout,
        wire_dtype,
        record,
        arrived=True,
        standby=options.get("standby"),
        batching=options.get("batching"),
    )
    return remote_module


def _placement(
    remote_device: str, interface_cls: Any, module_rref: Any = None
) -> tuple[Placement, bool]:
    """Where the module lives (on ``module_rref``'s owner, where there is one already), and
    whether tensors move to a non-CPU device there."""
    if not _compat.rpc_started():
        raise AssertionError("RemoteModule only works in RPC.")
    on, device, off_cpu = target(remote_device)
    if module_rref is not None:
        owner_name = str(module_rref.owner_name())
        if on not in (owner_name, module_rref.owner().id):
            arguments.warn_owner_differs(remote_device, owner_name)
        on = owner_name
    scriptable = interface_cls is not None and _shared.is_script_interface(interface_cls)
    return Placement(on, device, is_device_map_set(on), scriptable), off_cpu
