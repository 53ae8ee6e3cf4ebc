"""The one home of what this process keeps as an owner and as a standby, and the shapes of
what it is told.

Every table the owner side reads or writes is a field of :data:`STATE`, one
:class:`OwnerState` per process: the key table (``remote_module.runtime.owner.table``), the
checkpoints it cuts and those it keeps for others (``remote_module.runtime.owner.checkpoints``),
and the generated functions its calls name. Nothing else on the owner side is module-level
state. :class:`Seat`, :class:`Recipe` and :class:`Ticket` are what a RemoteModule with
standbys tells its owners (its holders build them: ``remote_module.runtime.caller.failover``).
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.distributed.rpc as rpc
from torch import nn

__all__ = ["STATE", "Owned", "OwnerState", "Recipe", "Seat", "Standing", "Ticket"]


class Seat(NamedTuple):
    """A place a RemoteModule's module can live: its worker, the device there, and the
    ``remote_device`` text it was given as."""

    worker: str
    device: str
    text: str


class Recipe(NamedTuple):
    """What builds the module on a standby, as the owner built it."""

    module_cls: Callable[..., nn.Module]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    interface_cls: Any  # None: no interface
    module_name: str | None  # the generated module (with an interface)
    move_tensors: bool
    wired: bool
    scripted: bool  # a TorchScript interface: the module is scripted, its RRef typed


class Ticket(NamedTuple):
    """What the owner is told of a RemoteModule with each counted call and checkpoint: whose
    it is, which seat it holds, how often to checkpoint, and to whom. It travels as a plain
    tuple (:meth:`tuple`), so no class is named in a call's message."""

    identity: str
    position: int
    every: int | None
    standbys: tuple[str, ...]


class Owned:
    """A RemoteModule this process owns, as far as checkpoints go."""

    __slots__ = ("busy", "calls", "lock", "queued", "retired", "ticket", "version")

    def __init__(self, ticket: Ticket, version: int) -> None:
        self.ticket = ticket
        self.version = version  # the newest checkpoint cut (or loaded) here
        self.calls = 0
        self.lock = threading.Lock()
        self.busy = False  # a background checkpoint is on its way
        self.queued: tuple[dict[str, torch.Tensor], bool] | None = None
        self.retired = False  # moved away by fail_over(): no checkpoints any more


class Standing:
    """What a standby keeps of one RemoteModule."""

    __slots__ = ("held", "lock", "promoted")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # The newest complete checkpoint: (seat, version, state, training).
        self.held: tuple[int, int, dict[str, torch.Tensor], bool] | None = None
        # Once promoted: the module's RRef, the checkpoint it loaded, this seat's position.
        self.promoted: tuple[rpc.RRef[Any], int | None, int] | None = None


class OwnerState:
    """What one process keeps for the RemoteModules it owns or stands by for."""

    def __init__(self) -> None:
        # Held while an entry of owned or standing is made (reads take no lock).
        self.lock = threading.Lock()
        # Keys of the key table: never reused, so a stale key can never reach another module.
        self.keys = itertools.count(1)
        # key -> eager module, held weakly: the entry lives as long as the module's RRef value.
        self.modules: weakref.WeakValueDictionary[int, nn.Module] = weakref.WeakValueDictionary()
        # key -> scripted module, held while the filing's keeper lives.
        self.held: dict[int, Any] = {}
        # key -> the identity its keyed calls are counted for (checkpoint_every), where any.
        self.counted_keys: dict[int, Owned] = {}
        # identity -> the checkpoints this process cuts as the owner of that RemoteModule.
        self.owned: dict[str, Owned] = {}
        # identity -> what this process keeps as a standby of that RemoteModule.
        self.standing: dict[str, Standing] = {}
        # key -> what rebuilds a RemoteModule over the module filed under it, for graphs
        # that name it (the compiled route): its description, interface and scripted flag.
        self.graphs: dict[int, tuple[Any, Any, bool]] = {}
        # (generated module, function) -> the remote function a call names, once loaded.
        self.functions: dict[tuple[str, str], Callable[..., Any]] = {}


STATE = OwnerState()
