"""Checkpoints, on the owner and on its standbys (``remote_module.runtime.caller.failover`` is the
holders' side, with the whole design).

- **The owner** counts a RemoteModule's calls (:func:`count`, the one place calls are counted
  for ``checkpoint_every``, whoever sent them) and cuts checkpoints (:func:`snapshot`: its
  module's ``state_dict()`` and ``training`` flag); ``remote_module.runtime.owner`` sends them
  to the standbys after it directly, never through a caller.
- **A standby** keeps, per identity, the newest checkpoint that reached it whole
  (:func:`keep`: a message RPC delivers complete or not at all) and decides the promotion
  (:func:`promote`): the first request builds the module and loads that checkpoint; every later
  request, from any holder, gets the same module. A promoted standby is the owner from then on.

Checkpoints are ordered by ``(seat, version)``: the seat that cut it, then its number. What a
standby keeps lives as long as its process: it cannot know when the last holder is gone. All
of it is kept in ``remote_module.runtime.owner.state.STATE``.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed.rpc as rpc
from torch import nn
from torch.futures import Future

from remote_module import _compat
from remote_module.runtime import registry
from remote_module.runtime.errors import CreationFailure, creation_failure
from remote_module.runtime.owner.creation import create_module, owned_rref
from remote_module.runtime.owner.state import STATE, Owned, Recipe, Seat, Standing, Ticket

__all__ = [
    "count",
    "held",
    "keep",
    "owned_for",
    "promote",
    "retire",
    "send",
    "send_if_due",
    "snapshot",
    "standing_for",
]

Snapshot = tuple[dict[str, torch.Tensor], bool]


def owned_for(sent: tuple[Any, ...]) -> Owned:
    """What this owner keeps of the RemoteModule a ticket names (sent as a plain tuple)."""
    owned = STATE.owned.get(sent[0])
    if owned is None or owned.ticket != sent:
        ticket = Ticket._make(sent)
        with STATE.lock:
            owned = STATE.owned.get(ticket.identity)
            if owned is None:
                owned = STATE.owned[ticket.identity] = Owned(ticket, 0)
            elif owned.ticket != ticket and ticket.position >= owned.ticket.position:
                owned.ticket = ticket
    return owned


def count(owned: Owned, module: Any, calls: int = 1) -> Snapshot | None:
    """Count ``calls`` calls of ``owned``'s module: past every N-th, the snapshot to send
    (none once no standby remains to receive it)."""
    ticket = owned.ticket
    every = ticket.every
    with owned.lock:
        before = owned.calls
        owned.calls += calls
        due = (
            every is not None
            and owned.calls // every > before // every
            and not owned.retired
            and bool(ticket.standbys)
        )
    if not due:
        return None
    if _compat.is_cpp_script_module(module):
        module = _compat.wrap_cpp_module(module)
    return snapshot(module)


def snapshot(module: nn.Module) -> Snapshot:
    """The module's state as it is now (copies: later updates do not reach it)."""
    state = collections.OrderedDict(
        (name, value.detach().to("cpu", copy=True) if isinstance(value, torch.Tensor) else value)
        for name, value in module.state_dict().items()
    )
    return state, bool(module.training)


def retire(identity: str, position: int) -> None:
    """The old owner after ``fail_over()``: it cuts no more checkpoints of ``identity``."""
    owned = STATE.owned.get(identity)
    if owned is not None and owned.ticket.position <= position:
        owned.retired = True


def standing_for(identity: str) -> Standing:
    """What this standby keeps of ``identity``."""
    standing = STATE.standing.get(identity)
    if standing is None:
        with STATE.lock:
            standing = STATE.standing.setdefault(identity, Standing())
    return standing


def keep(
    identity: str, seat: int, version: int, state: dict[str, torch.Tensor], training: bool
) -> bool:
    """A checkpoint from the owner at ``seat``: kept when it is newer than the one held.
    Whether this standby now holds it (or a newer one)."""
    standing = standing_for(identity)
    with standing.lock:
        if standing.promoted is not None:
            return False  # this worker owns the module now
        held = standing.held
        if held is None or (seat, version) > held[:2]:
            held = standing.held = (seat, version, state, training)
        return held[:2] >= (seat, version)


def held(identity: str) -> tuple[int, int] | None:
    """The ``(seat, version)`` of the checkpoint a standby holds for ``identity``."""
    standing = standing_for(identity)
    with standing.lock:
        return None if standing.held is None else standing.held[:2]


def promote(
    identity: str, recipe: Recipe, seats: tuple[Seat, ...], at: int, every: int | None
) -> tuple[rpc.RRef[Any], int | None, int] | CreationFailure:
    """Take the module over, once: build it here from ``recipe`` (scripted with a TorchScript
    interface), load the newest checkpoint held, and own it as seat ``at``. Every later
    request, from any holder, gets the same module. Why it could not, as data."""
    standing = standing_for(identity)
    with standing.lock:
        if standing.promoted is not None:
            return standing.promoted
        try:
            module_rref, version = _build(recipe, seats[at].device, standing.held)
        except Exception as error:
            return creation_failure(error)
        standbys = tuple(seat.worker for seat in seats[at + 1 :])
        with STATE.lock:
            STATE.owned[identity] = Owned(Ticket(identity, at, every, standbys), version or 0)
        standing.promoted = (module_rref, version, at)
        standing.held = None  # loaded: this worker owns the module now
        return standing.promoted


def _build(
    recipe: Recipe, device: str, held: tuple[int, int, dict[str, torch.Tensor], bool] | None
) -> tuple[rpc.RRef[Any], int | None]:
    module = create_module(recipe.module_cls, recipe.args, recipe.kwargs, device)
    version = None
    if held is not None:
        _, version, state, training = held
        module.load_state_dict(state)
        module.train(training)
    if recipe.module_name is not None:  # the calls that follow need its remote functions
        registry.ensure_module(
            recipe.module_name, recipe.interface_cls, recipe.move_tensors, recipe.wired
        )
    return owned_rref(module, recipe.interface_cls, recipe.scripted, "on its standby"), version


# --- Sending checkpoints to the standbys ------------------------------------------------------
# ``keep``: ``owner.keep_checkpoint``, the function the standbys' messages name (defined with
# every other one in ``remote_module.runtime.owner``).


def send_if_due(keep: Callable[..., Any], owned: Owned, due: Snapshot | None) -> None:
    """Send a snapshot that came due in the background, unless one is on its way; then it goes
    next (the newest only)."""
    if due is None:
        return
    with owned.lock:
        if owned.busy:
            owned.queued = due
            return
        owned.busy = True
    _send_in_background(keep, owned, due)


def _send_in_background(keep: Callable[..., Any], owned: Owned, snapshot: Snapshot) -> None:
    def sent(_: Future[Any]) -> None:
        with owned.lock:
            following, owned.queued = owned.queued, None
            owned.busy = following is not None
        if following is not None:
            _send_in_background(keep, owned, following)

    try:
        send(keep, owned, snapshot).add_done_callback(sent)
    except Exception:  # a standby gone: the next checkpoint tries again
        with owned.lock:
            owned.busy = False


def send(keep: Callable[..., Any], owned: Owned, snapshot: Snapshot) -> Future[list[Any]]:
    """Send ``snapshot`` to every standby as the next version; a future of each one's reply."""
    with owned.lock:
        owned.version += 1
        version = owned.version
    ticket = owned.ticket
    state, training = snapshot
    message = (ticket.identity, ticket.position, version, state, training)
    futures = [rpc.rpc_async(worker, keep, message) for worker in ticket.standbys]
    done: Future[list[Any]] = torch.futures.collect_all(futures)
    return done.then(lambda _: [version, *futures])
