"""Surviving an owner's death: standbys that keep a RemoteModule's newest checkpoint, and one
promotion when its owner is gone (API.md, "Surviving an owner's death").

A RemoteModule built with ``standby=[...]`` has a :class:`Plan` in its record: its identity
(made once, at construction), its *seats* (the owner, then each standby, in order), the seat
that owns it now, and the recipe that builds it (``module_cls``, its arguments, the interface).
The plan travels with every copy sent over RPC. Three sides, one section each below:

- **the owner** cuts checkpoints (its module's ``state_dict()`` and ``training`` flag), on
  ``rm.checkpoint()`` or by itself after every N-th call (``checkpoint_every``), and sends
  them to the standbys after it directly, never through a caller;
- **a standby** keeps, per identity, the newest checkpoint that reached it whole (a message
  RPC delivers complete or not at all) and decides the promotion: the first request builds
  the module and loads that checkpoint; every later request, from any holder, gets the same
  module. A promoted standby is the owner from then on, and checkpoints to the seats after it;
- **a holder** (the creator, every copy) decides nothing: when an operation of its
  RemoteModule fails because the owner is gone (:func:`remote_module.runtime.errors.owner_gone`;
  never a module's own error or a timeout), it asks the seats after that owner, in order,
  to take over, moves itself to the first that answers (:func:`_move`: the one place that
  changes a RemoteModule's owner), and raises :class:`OwnerFailover`. The operation is not
  retried: its distributed autograd context died with the owner.

Checkpoints are ordered by ``(seat, version)``: the seat that cut it, then its number. A
promoted standby numbers on from the checkpoint it loaded, and a standby ignores checkpoints
from an owner it has seen replaced (an old owner still alive after ``rm.fail_over()``).
What a standby keeps (the recipe it was sent, its newest checkpoint, the promoted module)
lives as long as its process: it cannot know when the last holder is gone.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
import torch.distributed.rpc as rpc
from torch import nn
from torch.futures import Future

from remote_module._torchscript import script_module
from remote_module.runtime import keys, owner, registry
from remote_module.runtime.device import is_device_map_set, target, worker_info
from remote_module.runtime.errors import (
    CreationFailure,
    OwnerFailover,
    RemoteFailure,
    creation_failure,
    failure,
    owner_gone,
)
from remote_module.runtime.record import Record
from remote_module.runtime.replies import wait_returning_rrefs

__all__ = [
    "Plan",
    "Recipe",
    "Seat",
    "checkpoint",
    "counted",
    "fail_over",
    "failed",
    "failed_later",
    "file_counted",
    "held",
    "make_plan",
    "off_cpu",
    "promote",
    "receive",
    "seats",
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


class Ticket(NamedTuple):
    """What the owner is told of a RemoteModule with each counted call and checkpoint: whose
    it is, which seat it holds, how often to checkpoint, and to whom."""

    identity: str
    position: int
    every: int | None
    standbys: tuple[str, ...]


# --- Construction ----------------------------------------------------------------------------


def seats(
    owner_worker: str | int, owner_device: str, owner_text: str, standby: Any, every: Any
) -> tuple[Seat, ...] | None:
    """The seats of a new RemoteModule (its owner, then each standby); None without standbys.
    Raises ``ValueError`` naming a bad ``standby`` entry or ``checkpoint_every``."""
    if standby is None or (isinstance(standby, (list, tuple)) and not standby):
        if every is not None:
            raise ValueError(
                f"RemoteModule checkpoint_every={every!r} needs standby workers to send the "
                "checkpoints to: pass standby=[...]"
            )
        return None
    if isinstance(standby, str) or not isinstance(standby, Sequence):
        raise ValueError(
            f"RemoteModule standby must be a list of remote devices (such as ['ps2/cpu']), "
            f"got {standby!r}"
        )
    if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        raise ValueError(
            f"RemoteModule checkpoint_every must be an int >= 1 (calls between checkpoints), "
            f"got {every!r}"
        )
    chosen = [Seat(str(worker_info(owner_worker).name), owner_device, owner_text)]
    for entry in standby:
        chosen.append(_standby_seat(entry, chosen))
    return tuple(chosen)


def make_plan(seats: tuple[Seat, ...], every: int | None, recipe: Recipe) -> Plan:
    """The plan of a new RemoteModule, owned by its first seat; its identity made here."""
    return Plan(os.urandom(16).hex(), seats, 0, every, recipe)


def off_cpu(seats: tuple[Seat, ...]) -> bool:
    """Whether any seat puts the module on a device other than the CPU."""
    return any(torch.device(seat.device).type != "cpu" for seat in seats)


def _standby_seat(entry: Any, seats: list[Seat]) -> Seat:
    if not isinstance(entry, str):
        raise ValueError(f"RemoteModule standby {entry!r} is not a remote device string")
    try:
        on, device, _ = target(entry)
        name = str(worker_info(on).name)
    except (ValueError, RuntimeError) as error:
        raise ValueError(f"RemoteModule standby {entry!r} is not usable: {error}") from None
    if name == seats[0].worker:
        raise ValueError(
            f"RemoteModule standby {entry!r} names the owner itself ({name!r}); a standby must "
            "be another worker"
        )
    if any(seat.worker == name for seat in seats[1:]):
        raise ValueError(f"RemoteModule standby {entry!r} names worker {name!r} twice")
    return Seat(name, device, entry)


# --- The holder: meeting a dead owner --------------------------------------------------------


def failed(remote_module: Any, error: Exception, method: str, at: int) -> Exception:
    """The exception an operation of ``remote_module`` sent to seat ``at`` raises for
    ``error``: with a plan and a dead owner, the :class:`OwnerFailover` of its promotion (or
    the RuntimeError saying no standby answered); otherwise :func:`errors.failure`'s."""
    plan: Plan | None = remote_module._rm_record.failover
    if plan is None or not owner_gone(error):
        return failure(error, method, _owner_name(remote_module))
    try:
        promotion = _take_over(remote_module, plan, at)
    except _NoStandby as none:
        dead = plan.seats[at].worker
        return RuntimeError(
            f"RemoteModule.{method} on worker {dead!r} failed: worker {dead!r} is gone: its "
            f"connection closed, and no standby took the module over (tried {none})"
        )
    return _failover_error(method, promotion)


def failed_later(
    remote_module: Any, error: Exception, method: str, at: int, result: Future[Any]
) -> None:
    """:func:`failed`, for an ``_async`` call: ``result`` gets the exception. A promotion waits
    on RPCs, so it runs on a thread of its own, never in an RPC callback."""
    plan: Plan | None = remote_module._rm_record.failover
    if plan is None or not owner_gone(error):
        result.set_exception(failure(error, method, _owner_name(remote_module)))
        return

    def promote_then_fail() -> None:
        result.set_exception(failed(remote_module, error, method, at))

    threading.Thread(target=promote_then_fail, name="remote-module-failover", daemon=True).start()


def fail_over(remote_module: Any) -> str:
    """``rm.fail_over()``: promote the first standby now; the new owner's worker name."""
    plan = _plan_of(remote_module, "fail_over")
    at = plan.position
    try:
        promotion = _take_over(remote_module, plan, at)
    except _NoStandby as none:
        raise RuntimeError(
            f"RemoteModule.fail_over: no standby took the module over from worker "
            f"{plan.seats[at].worker!r} (tried {none})"
        ) from None
    # A planned move: the old owner, alive, stops checkpointing (best effort, not awaited).
    try:
        rpc.rpc_async(plan.seats[at].worker, retire, (plan.identity, at))
    except RuntimeError:
        pass
    return promotion.new_owner


class _NoStandby(Exception):
    """No seat after the failed owner answered; the text lists each one and why."""


def _take_over(remote_module: Any, plan: Plan, at: int) -> Promotion:
    """Move ``remote_module`` off seat ``at`` to the first later seat that takes it over (the
    seat decides which module that is); once per failed seat on this holder."""
    with plan.lock:
        if plan.position > at and plan.last is not None:
            return plan.last  # another operation of this holder met the same death
        failed_owner = plan.seats[at].worker
        timeout = remote_module.timeout
        tried = []
        for candidate in range(at + 1, len(plan.seats)):
            seat = plan.seats[candidate]
            request = (plan.identity, plan.recipe, plan.seats, candidate, plan.every)
            started = time.monotonic()
            try:
                future = rpc.rpc_async(seat.worker, promote, request, timeout=0)
                reply = wait_returning_rrefs(future, timeout, started)  # the reply is an RRef
            except Exception as error:  # gone, unreachable or too slow: the next one
                tried.append(f"{seat.worker!r}: {_short(error)}")
                continue
            if isinstance(reply, CreationFailure):
                tried.append(f"{seat.worker!r}: {reply.error_type}: {reply.message}")
                continue
            module_rref, version, now_at = reply
            _move(remote_module, plan, now_at, module_rref)
            plan.last = Promotion(failed_owner, plan.seats[now_at].worker, version)
            return plan.last
        raise _NoStandby("; ".join(tried) or "none: no standby after it")


def _move(remote_module: Any, plan: Plan, at: int, module_rref: Any) -> None:
    """The one place a RemoteModule's owner changes: its public placement (``on``,
    ``device``, ``is_device_map_set``, ``module_rref``, ``standby``) and its record's call
    state (no key on the new owner yet, nothing pending)."""
    seat = plan.seats[at]
    state = remote_module.__dict__
    state["on"] = seat.worker
    state["device"] = seat.device
    state["is_device_map_set"] = is_device_map_set(seat.worker)
    state["module_rref"] = module_rref
    plan.position = at
    plan.ticket = plan._ticket()
    state["standby"] = plan.standby_texts() or None
    record: Record = remote_module._rm_record
    keys.forget(record)
    record.pending = None  # the standby loaded the generated module before it replied
    record.ticket = tuple(plan.ticket) if plan.every is not None else None


def _failover_error(method: str, promotion: Promotion) -> OwnerFailover:
    version = promotion.checkpoint_version
    loaded = (
        f"loaded checkpoint version {version}"
        if version is not None
        else "no checkpoint had reached it: the module is as built"
    )
    qualified = f"RemoteModule.{method}" if method.isidentifier() else method
    return OwnerFailover(
        f"{qualified} on worker {promotion.failed_owner!r} failed: worker "
        f"{promotion.failed_owner!r} is gone; standby {promotion.new_owner!r} took the module "
        f"over ({loaded}). The operation was not retried: redo the step (and build a "
        "DistributedOptimizer again from remote_parameters())",
        failed_owner=promotion.failed_owner,
        new_owner=promotion.new_owner,
        checkpoint_version=version,
    )


def _plan_of(remote_module: Any, method: str) -> Plan:
    plan: Plan | None = remote_module._rm_record.failover
    if plan is None:
        raise RuntimeError(
            f"RemoteModule.{method}: this RemoteModule has no standby (build it with "
            "standby=[...]; one made by init_from_module_rref has none)"
        )
    return plan


def _owner_name(remote_module: Any) -> str:
    try:
        return str(remote_module.module_rref.owner_name())
    except RuntimeError:
        return str(remote_module.on)


def _short(error: BaseException) -> str:
    if owner_gone(error):
        return "gone: its connection closed"
    return str(error).split("\n", 1)[0][:200]


def checkpoint(remote_module: Any) -> int:
    """``rm.checkpoint()``: the owner sends its module's state to every standby; the version,
    once every standby holds it."""
    plan = _plan_of(remote_module, "checkpoint")
    at = plan.position
    try:
        reply = rpc.rpc_sync(
            remote_module.module_rref.owner(),
            cut_checkpoint,
            (remote_module.module_rref, tuple(plan.ticket)),
            timeout=remote_module.timeout,
        )
    except Exception as error:  # the owner gone (a promotion), or too slow
        raise failed(remote_module, error, "checkpoint", at) from error
    if isinstance(reply, RemoteFailure):
        raise reply.error("checkpoint", _owner_name(remote_module))
    return int(reply)


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
        module = owner.local_module(reference)
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


def _tick(owned: _Owned, module: Any) -> None:
    """Count one call of ``owned``'s module; after every N-th, a checkpoint in the background."""
    every = owned.ticket.every
    with owned.lock:
        owned.calls += 1
        due = every is not None and owned.calls % every == 0 and not owned.retired
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
        sending = _send(owned, _snapshot(owner.local_module(module_rref)))
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
                missed.append(f"standby {worker!r}: {_short(error)}")
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
