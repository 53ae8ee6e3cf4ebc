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
  ``remote_module.runtime.pending``);
- ``reference``, ``keeper``, ``filing``: the module's key in the owner's table and what keeps
  it there (see ``remote_module.runtime.keys``);
- ``failover``: with standbys, its failover plan (which seat owns it now, who can take over,
  how to build it there), and ``ticket``, what a call tells the owner when it counts calls
  for ``checkpoint_every`` (see ``remote_module.runtime.failover``).

Each field has one owner of its transitions: ``creation`` is set by the constructor and
taken by ``remote_module.runtime.pending``, which sets and clears ``pending`` (set by
``init_from_module_rref`` too); the three key
fields by ``remote_module.runtime.keys``; a promotion (``remote_module.runtime.failover``)
changes the owner, in one place, and resets them; the rest is set once, by
``remote_module.runtime.construction``.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from torch.futures import Future

if TYPE_CHECKING:
    from remote_module.runtime.failover import Plan
    from remote_module.runtime.pending import Creation

__all__ = ["Record"]


class Record:
    """What one RemoteModule knows of itself beyond its public attributes."""

    __slots__ = (
        "creation",
        "creator",
        "failover",
        "filing",
        "generated",
        "keeper",
        "pending",
        "reference",
        "ticket",
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
