"""The one record a RemoteModule keeps of itself beside its public attributes.

A RemoteModule's public attributes (``on``, ``device``, ``module_rref``, the generated
methods, ...) are what upstream's has and what TorchScript reads. Everything else the runtime
needs to call it lives here, in one object with named fields, held in a slot of the
RemoteModule (not in its ``__dict__``, which TorchScript walks and torch's tests compare):

- ``generated``: its generated module (the one its methods came from);
- ``creator``: the name of ``module_cls``, for errors, and ``type_name``, the remote class's
  name for ``repr`` (known at construction, else asked once);
- ``creation``: with an interface, the construction's request while its reply is untaken,
  and ``pending``, the owner's load of the generated module, while it is in flight (see
  ``remote_module.runtime.caller.pending``);
- ``reference``, ``keeper``, ``filing``: the module's key in the owner's table and what keeps
  it there (see ``remote_module.runtime.caller.keys``);
- ``route``: how its calls reach the owner now, chosen from the fields above whenever one of
  them changes (see ``remote_module.runtime.caller.route``); None until the module's RRef is
  known;
- ``failover``: with standbys, its failover plan (which seat owns it now, who can take over,
  how to build it there), and ``ticket``, what a call tells the owner when it counts calls
  for ``checkpoint_every`` (see ``remote_module.runtime.caller.failover``);
- for the compiled route (``remote_module.runtime.caller.ops``): ``local_id``, its number in
  this process (:data:`LIVE`), ``graph_key`` and ``graph_keeper``, the key graphs name it by
  and what holds it on the owner; ``fake``, ``twin_recipe``, ``twin`` and ``fake_answers``,
  what finds a call's result shapes (``remote_module.runtime.caller.fakes``).

Each field has one owner of its transitions (modules of ``remote_module.runtime.caller``):
``creation`` is set by the constructor and taken by ``pending``, which sets and clears
``pending`` (set by ``init_from_module_rref`` too); the three key fields by ``keys``; a
promotion (``failover``) changes the owner, in one place, and resets them; the rest is set
once, by ``construction``. :class:`Creation` and :class:`Plan` are parts of the record.
"""

from __future__ import annotations

import itertools
import queue
import threading
import types
import weakref
from typing import Any, NamedTuple

from torch.futures import Future

from remote_module.runtime.owner.state import Recipe, Seat, Ticket

__all__ = ["LIVE", "Creation", "Plan", "Promotion", "Record"]

# local_id -> every RemoteModule of this process (the compiled route names them by it). A
# string: Dynamo may make an int that differs between traces symbolic, never a string.
LIVE: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_local_ids = itertools.count()


class Record:
    """What one RemoteModule knows of itself beyond its public attributes."""

    __slots__ = (
        "creation",
        "creator",
        "failover",
        "fake",
        "fake_answers",
        "filing",
        "generated",
        "graph_keeper",
        "graph_key",
        "keeper",
        "local_id",
        "pending",
        "reference",
        "route",
        "ticket",
        "twin",
        "twin_recipe",
        "type_name",
    )

    def __init__(
        self,
        generated: types.ModuleType,
        creator: str | None = None,
        type_name: str | None = None,
        failover: Plan | None = None,
    ) -> None:
        self.generated = generated
        self.creator = creator
        self.type_name = type_name
        # The construction's request, its reply not taken yet (see runtime.pending).
        self.creation: Creation | None = None
        # The owner's load of the generated module, in flight (None: nothing to wait for).
        self.pending: Future[Any] | None = None
        # The module's key in the owner's table (int), or its RRef where it has none; None
        # until the first eager call's reply or the filing's reply says which.
        self.reference: Any = None
        # An RRef whose deletion drops a scripted module's key on the owner.
        self.keeper: Any = None
        # The request to file a scripted module for keyed calls, in flight.
        self.filing: Future[Any] | None = None
        # How calls reach the owner now (runtime.caller.route); None until the RRef is known.
        self.route: Any = None
        # The compiled route: this RemoteModule's number here, its key in graphs (and what
        # holds that key on the owner), and what gives its calls' result shapes.
        self.local_id = f"rm{next(_local_ids)}"
        self.graph_key: str | None = None
        self.graph_keeper: Any = None
        self.fake: Any = None
        self.twin_recipe: tuple[Any, Any, Any] | None = None
        self.twin: Any = None
        self.fake_answers: dict[Any, Any] = {}
        # Standbys: the failover plan; with checkpoint_every, the owner counts calls by ticket.
        self.failover = failover
        # (a plain tuple: it travels with every counted call)
        self.ticket: tuple[Any, ...] | None = None
        if failover is not None and failover.every is not None:
            self.ticket = tuple(failover.ticket)

    def seat(self) -> int:
        """The seat of the failover plan that owns the module now (0 without a plan): taken
        before a send, so that a failure is judged against the owner it was sent to."""
        plan = self.failover
        return 0 if plan is None else plan.position

    @property
    def module_name(self) -> str:
        """The generated module's name, which the owner loads it under too."""
        return self.generated.__name__


class Creation:
    """A construction's request to the owner, in flight (or failed: ``error``)."""

    __slots__ = ("arrivals", "creator", "error", "future", "lock", "started")

    def __init__(
        self,
        future: Future[Any],
        started: float,
        arrivals: queue.SimpleQueue[float],
        creator: str,
    ) -> None:
        self.future: Future[Any] | None = future
        self.started = started  # time.monotonic() when it was sent
        self.arrivals = arrivals  # when the reply came (replies.watch)
        self.creator = creator  # the name of module_cls, for errors
        self.error: BaseException | None = None
        self.lock = threading.Lock()  # one thread takes the reply; the others find it taken


class Promotion(NamedTuple):
    """One promotion this holder saw: who failed, who took over, with which checkpoint."""

    failed_owner: str
    new_owner: str
    checkpoint_version: int | None


class Plan:
    """A RemoteModule's failover plan, on one holder (see the module docstring)."""

    __slots__ = ("every", "identity", "last", "lock", "position", "recipe", "seats", "ticket")

    def __init__(
        self,
        identity: str,
        seats: tuple[Seat, ...],
        position: int,
        every: int | None,
        recipe: Recipe,
    ) -> None:
        self.identity = identity
        self.seats = seats
        self.position = position  # the seat that owns the module now
        self.every = every
        self.recipe = recipe
        self.lock = threading.Lock()  # one promotion at a time on this holder
        self.last: Promotion | None = None  # the newest promotion this holder made or met
        self.ticket = self._ticket()

    def _ticket(self) -> Ticket:
        return Ticket(self.identity, self.position, self.every, self.standby_workers())

    def standby_workers(self) -> tuple[str, ...]:
        return tuple(seat.worker for seat in self.seats[self.position + 1 :])

    def standby_texts(self) -> list[str]:
        return [seat.text for seat in self.seats[self.position + 1 :]]

    def sent(self) -> tuple[Any, ...]:
        """What travels with a copy sent over RPC (see :meth:`received`)."""
        return (self.identity, self.seats, self.position, self.every, self.recipe)

    @classmethod
    def received(cls, sent: tuple[Any, ...]) -> Plan:
        identity, seats, position, every, recipe = sent
        return cls(identity, tuple(Seat(*seat) for seat in seats), position, every, recipe)
