"""What runs on a RemoteModule's owner and on its standbys when it has standbys (see
``remote_module.runtime.failover``, the holders' side, for the whole design).

- **The owner** cuts checkpoints (its module's ``state_dict()`` and ``training`` flag), on
  ``rm.checkpoint()`` (:func:`cut_checkpoint`) or by itself after every N-th call
  (``checkpoint_every``: eager calls run through :func:`counted`, a scripted module's keyed
  calls are counted where the owner looks the module up, filed by :func:`file_counted`, the
  calls of a scripted holder where it sends them, told here by :func:`counted_elsewhere`), and
  sends them to the standbys after it directly, never through a caller.
- **A standby** keeps, per identity, the newest checkpoint that reached it whole
  (:func:`receive`: a message RPC delivers complete or not at all) and decides the promotion
  (:func:`promote`): the first request builds the module and loads that checkpoint; every later
  request, from any holder, gets the same module. A promoted standby is the owner from then on.

Checkpoints are ordered by ``(seat, version)``: the seat that cut it, then its number. What a
standby keeps lives as long as its process: it cannot know when the last holder is gone.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.distributed.rpc as rpc
from torch import nn
from torch.futures import Future

from remote_module._torchscript import script_module
from remote_module.runtime import keys, owner, registry, requests
from remote_module.runtime.errors import (
    CreationFailure,
    RemoteFailure,
    creation_failure,
    owner_gone,
)

__all__ = [
    "Recipe",
    "Seat",
    "Ticket",
    "counted",
    "counted_elsewhere",
    "cut_checkpoint",
    "file_counted",
    "held",
    "promote",
    "receive",
    "retire",
    "short",
]


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
    it is, which seat it holds, how often to checkpoint, and to whom."""

    identity: str
    position: int
    every: int | None
    standbys: tuple[str, ...]


def short(error: BaseException) -> str:
    """One line of why ``error`` happened, for a message listing several."""
    if owner_gone(error):
        return "gone: its connection closed"
    return str(error).split("\n", 1)[0][:200]


# --- The owner: cutting checkpoints ----------------------------------------------------------


class _Owned:
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


_owned: dict[str, _Owned] = {}
_owned_lock = threading.Lock()


def _owned_for(sent: tuple[Any, ...]) -> _Owned:
    """What this owner keeps of the RemoteModule a ticket names (sent as a plain tuple: a
    NamedTuple's class would travel by name with every counted call)."""
    owned = _owned.get(sent[0])
    if owned is None or owned.ticket != sent:
        ticket = Ticket._make(sent)
        with _owned_lock:
            owned = _owned.get(ticket.identity)
            if owned is None:
                owned = _owned[ticket.identity] = _Owned(ticket, 0)
            elif owned.ticket != ticket and ticket.position >= owned.ticket.position:
                owned.ticket = ticket
    return owned


def counted(
    reference: Any,
    device: str,
    is_device_map_set: bool,
    ticket: tuple[Any, ...],
    remote_fn: Callable[..., Any],
    *args: Any,
    **kwargs: Any,
) -> Any:
    """A call of a RemoteModule with ``checkpoint_every``, sent in place of its remote function
    (with the same call prefix, the module's key where it has one): run it, count it, and
    after every N-th call start a checkpoint in the background (the reply does not wait)."""
    result = remote_fn(reference, device, is_device_map_set, *args, **kwargs)
    if type(reference) is int:
        module = keys.module_for(reference)  # an eager module's key (never a scripted one's)
    else:
        module = requests.local_module(reference)
    _tick(_owned_for(ticket), module)
    return result


def file_counted(
    module_rref: rpc.RRef[Any],
    module_name: str,
    interface_cls: Any,
    move_tensors: bool,
    ticket: tuple[Any, ...],
) -> tuple[int, rpc.RRef[Any]]:
    """``keys.file_keyed`` for a scripted module with ``checkpoint_every``: its keyed calls
    (TorchScript, at the scripted floor) are counted where they look the module up, not by
    :func:`counted`, which would make each a Python call."""
    key, keeper = keys.file_keyed(module_rref, module_name, interface_cls, move_tensors)
    owned = _owned_for(ticket)
    keys.tick_on_call(key, lambda module: _tick(owned, module))
    return key, keeper


def counted_elsewhere(module_rref: rpc.RRef[Any], ticket: tuple[Any, ...], calls: int) -> None:
    """``calls`` calls that a scripted holder sent from TorchScript, counted there and told
    here every N-th (``failover.scripted_call``): counted as :func:`counted` counts one."""
    _tick(_owned_for(ticket), requests.local_module(module_rref), calls)


def _tick(owned: _Owned, module: Any, calls: int = 1) -> None:
    """Count ``calls`` calls of ``owned``'s module; past every N-th, a checkpoint in the
    background."""
    every = owned.ticket.every
    with owned.lock:
        before = owned.calls
        owned.calls += calls
        due = every is not None and owned.calls // every > before // every and not owned.retired
    if due:
        if isinstance(module, torch._C.ScriptModule):
            module = torch.jit._recursive.wrap_cpp_module(module)
        _in_background(owned, _snapshot(module))


def _snapshot(module: nn.Module) -> tuple[dict[str, torch.Tensor], bool]:
    """The module's state as it is now (copies: later updates do not reach it)."""
    state = collections.OrderedDict(
        (name, value.detach().to("cpu", copy=True) if isinstance(value, torch.Tensor) else value)
        for name, value in module.state_dict().items()
    )
    return state, bool(module.training)


def _in_background(owned: _Owned, snapshot: tuple[dict[str, torch.Tensor], bool]) -> None:
    """Send ``snapshot`` unless one is on its way; then it goes next (the newest only)."""
    with owned.lock:
        if owned.busy:
            owned.queued = snapshot
            return
        owned.busy = True
    _send_background(owned, snapshot)


def _send_background(owned: _Owned, snapshot: tuple[dict[str, torch.Tensor], bool]) -> None:
    def sent(_: Future[Any]) -> None:
        with owned.lock:
            following, owned.queued = owned.queued, None
            owned.busy = following is not None
        if following is not None:
            _send_background(owned, following)

    try:
        _send(owned, snapshot).add_done_callback(sent)
    except Exception:  # a standby gone: the next checkpoint tries again
        with owned.lock:
            owned.busy = False


def _send(owned: _Owned, snapshot: tuple[dict[str, torch.Tensor], bool]) -> Future[list[Any]]:
    """Send ``snapshot`` to every standby as the next version; a future of each one's reply."""
    with owned.lock:
        owned.version += 1
        version = owned.version
    ticket = owned.ticket
    state, training = snapshot
    message = (ticket.identity, ticket.position, version, state, training)
    futures = [rpc.rpc_async(worker, receive, message) for worker in ticket.standbys]
    done: Future[list[Any]] = torch.futures.collect_all(futures)
    return done.then(lambda _: [version, *futures])


@rpc.functions.async_execution
def cut_checkpoint(module_rref: rpc.RRef[Any], sent: tuple[Any, ...]) -> Future[Any]:
    """``rm.checkpoint()`` on the owner: the version, once every standby holds it; a
    :class:`RemoteFailure` naming a standby that did not take it."""
    answer: Future[Any] = Future()
    try:
        owned = _owned_for(sent)
        ticket = owned.ticket
        if owned.retired:
            raise RuntimeError("this worker is no longer the owner: fail_over() moved the module")
        sending = _send(owned, _snapshot(requests.local_module(module_rref)))
    except Exception as error:
        answer.set_result(_as_failure(error))
        return answer

    def replied(done: Future[list[Any]]) -> None:
        version, *futures = done.wait()
        missed = []
        for worker, future in zip(ticket.standbys, futures, strict=True):
            try:
                future.wait()
            except Exception as error:
                missed.append(f"standby {worker!r}: {short(error)}")
        if missed:
            text = f"checkpoint {version} did not reach every standby ({'; '.join(missed)})"
            answer.set_result(RemoteFailure("RuntimeError", text, ""))
        else:
            answer.set_result(version)

    sending.add_done_callback(replied)
    return answer


def _as_failure(error: BaseException) -> RemoteFailure:
    import traceback

    text = "".join(traceback.format_exception(error))
    return RemoteFailure(type(error).__name__, str(error), text)


def retire(identity: str, position: int) -> None:
    """The old owner after ``fail_over()``: it cuts no more checkpoints of ``identity``."""
    owned = _owned.get(identity)
    if owned is not None and owned.ticket.position <= position:
        owned.retired = True


# --- A standby: keeping checkpoints, promoting once ------------------------------------------


class _Standing:
    """What a standby keeps of one RemoteModule."""

    __slots__ = ("held", "lock", "promoted")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # The newest complete checkpoint: (seat, version, state, training).
        self.held: tuple[int, int, dict[str, torch.Tensor], bool] | None = None
        # Once promoted: the module's RRef, the checkpoint it loaded, this seat's position.
        self.promoted: tuple[rpc.RRef[Any], int | None, int] | None = None


_standing: collections.defaultdict[str, _Standing] = collections.defaultdict(_Standing)
_standing_lock = threading.Lock()


def _standing_for(identity: str) -> _Standing:
    with _standing_lock:
        return _standing[identity]


def receive(
    identity: str, seat: int, version: int, state: dict[str, torch.Tensor], training: bool
) -> bool:
    """A checkpoint from the owner at ``seat``: kept when it is newer than the one held.
    Whether this standby now holds it (or a newer one)."""
    standing = _standing_for(identity)
    with standing.lock:
        if standing.promoted is not None:
            return False  # this worker owns the module now
        held = standing.held
        if held is None or (seat, version) > held[:2]:
            held = standing.held = (seat, version, state, training)
        return held[:2] >= (seat, version)


def held(identity: str) -> tuple[int, int] | None:
    """The ``(seat, version)`` of the checkpoint a standby holds for ``identity`` (tests)."""
    standing = _standing_for(identity)
    with standing.lock:
        return None if standing.held is None else standing.held[:2]


def promote(
    identity: str, recipe: Recipe, seats: tuple[Seat, ...], at: int, every: int | None
) -> tuple[rpc.RRef[Any], int | None, int] | CreationFailure:
    """Take the module over, once: build it here from ``recipe`` (scripted with a TorchScript
    interface), load the newest checkpoint held, and own it as seat ``at``. Every later
    request, from any holder, gets the same module. Why it could not, as data."""
    standing = _standing_for(identity)
    with standing.lock:
        if standing.promoted is not None:
            return standing.promoted
        try:
            module_rref, version = _build(recipe, seats[at].device, standing.held)
        except Exception as error:
            return creation_failure(error)
        standbys = tuple(seat.worker for seat in seats[at + 1 :])
        with _owned_lock:
            _owned[identity] = _Owned(Ticket(identity, at, every, standbys), version or 0)
        standing.promoted = (module_rref, version, at)
        standing.held = None  # loaded: this worker owns the module now
        return standing.promoted


def _build(
    recipe: Recipe, device: str, held: tuple[int, int, dict[str, torch.Tensor], bool] | None
) -> tuple[rpc.RRef[Any], int | None]:
    module = owner.create_module(recipe.module_cls, recipe.args, recipe.kwargs, device)
    if recipe.scripted and not isinstance(module, torch.jit.ScriptModule):
        module = script_module(module, f"scripting {type(module).__qualname__} on its standby")
    version = None
    if held is not None:
        _, version, state, training = held
        module.load_state_dict(state)
        module.train(training)
    if recipe.module_name is not None:  # the calls that follow need its remote functions
        registry.ensure_module(
            recipe.module_name, recipe.interface_cls, recipe.move_tensors, recipe.wired
        )
    if recipe.scripted and isinstance(module, torch.jit.ScriptModule):
        return rpc.RRef(module, recipe.interface_cls), version
    return rpc.RRef(module), version
