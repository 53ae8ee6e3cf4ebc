"""Surviving an owner's death: standbys that keep a RemoteModule's newest checkpoint, and one
promotion when its owner is gone (API.md, "Surviving an owner's death").

A RemoteModule built with ``standby=[...]`` has a :class:`Plan` in its record: its identity
(made once, at construction), its *seats* (the owner, then each standby, in order), the seat
that owns it now, and the recipe that builds it (``module_cls``, its arguments, the interface).
The plan travels with every copy sent over RPC. Three sides; the owner's and the standby's
are ``remote_module.runtime.owner`` (its ``checkpoints``), the holder's is here:

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

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed.rpc as rpc
from torch.futures import Future

from remote_module.runtime import owner
from remote_module.runtime.caller import keys, route
from remote_module.runtime.caller.arguments import is_device_map_set, target, worker_info
from remote_module.runtime.caller.record import Plan, Promotion, Record
from remote_module.runtime.caller.replies import wait_returning_rrefs
from remote_module.runtime.errors import (
    CreationFailure,
    OwnerFailover,
    RemoteFailure,
    failure,
    owner_gone,
    short,
)
from remote_module.runtime.owner.state import Recipe, Seat

__all__ = [
    "checkpoint",
    "fail_over",
    "failed",
    "failed_later",
    "make_plan",
    "off_cpu",
    "owner_name",
    "seats",
]


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
        if plan is None and owner_gone(error):
            _keep_until_exit(remote_module)  # its owner for good: it never moves
        creator = remote_module._rm_record.creator
        return failure(error, method, owner_name(remote_module), creator)
    try:
        promotion = _take_over(remote_module, plan, at, owner_dead=True)
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
        if plan is None and owner_gone(error):
            _keep_until_exit(remote_module)
        creator = remote_module._rm_record.creator
        result.set_exception(failure(error, method, owner_name(remote_module), creator))
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
        rpc.rpc_async(plan.seats[at].worker, owner.retire, (plan.identity, at))
    except RuntimeError:
        pass
    return promotion.new_owner


class _NoStandby(Exception):
    """No seat after the failed owner answered; the text lists each one and why."""


def _take_over(remote_module: Any, plan: Plan, at: int, owner_dead: bool = False) -> Promotion:
    """Move ``remote_module`` off seat ``at`` to the first later seat that takes it over (the
    seat decides which module that is); once per failed seat on this holder. Where the owner
    at seat ``at`` is dead, what this holder held of it is kept until the process ends
    (:func:`_keep_until_exit`), whether a standby takes over or none does."""
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
                future = rpc.rpc_async(seat.worker, owner.promote, request, timeout=0)
                reply = wait_returning_rrefs(future, timeout, started)  # the reply is an RRef
            except Exception as error:  # gone, unreachable or too slow: the next one
                tried.append(f"{seat.worker!r}: {short(error)}")
                continue
            if isinstance(reply, CreationFailure):
                tried.append(f"{seat.worker!r}: {reply.error_type}: {reply.message}")
                continue
            module_rref, version, now_at = reply
            if owner_dead:
                _keep_until_exit(remote_module)
            _move(remote_module, plan, now_at, module_rref)
            plan.last = Promotion(failed_owner, plan.seats[now_at].worker, version)
            return plan.last
        if owner_dead:
            _keep_until_exit(remote_module)
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
    route.choose(remote_module)  # to the new owner, with no key there yet


# RRefs to owners that died, from this process's RemoteModules that met the death (by id:
# each once), never released while RPC runs. Releasing a user RRef sends its owner a delete,
# which torch retries with backoff and logs on stderr at every try to a dead owner ("RPC agent
# for ... encountered error when sending outgoing request #N to ps: eof", several per RRef over
# seconds); after rpc.shutdown() a release sends nothing. An RRef is only a handle here: what it
# referred to died with its owner.
_dead_owners_rrefs: dict[int, Any] = {}
_dead_owners_lock = threading.Lock()


def _keep_until_exit(remote_module: Any) -> None:
    """Keep what ``remote_module`` holds of its dead owner (its module's RRef, and the keeper
    RRef of a scripted module's key there) for as long as this process lives. Called where the
    RemoteModule cannot move meanwhile (under its plan's lock, or without a plan)."""
    record: Record = remote_module._rm_record
    held = [remote_module.__dict__.get("module_rref"), record.keeper, record.reference]
    with _dead_owners_lock:
        _dead_owners_rrefs.update((id(r), r) for r in held if isinstance(r, rpc.PyRRef))


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
            f"RemoteModule.{method} on worker {owner_name(remote_module)!r} failed: this "
            "RemoteModule has no standby (build it with standby=[...]; one made by "
            "init_from_module_rref has none)"
        )
    return plan


def owner_name(remote_module: Any) -> str:
    """The worker that owns ``remote_module``'s module now (its RRef's owner, else ``on``)."""
    try:
        return str(remote_module.module_rref.owner_name())
    except RuntimeError:
        return str(remote_module.on)


def checkpoint(remote_module: Any) -> int:
    """``rm.checkpoint()``: the owner sends its module's state to every standby; the version,
    once every standby holds it. Once no standby remains (each promoted, or passed over as
    gone), a RuntimeError: no version is returned that no standby holds."""
    plan = _plan_of(remote_module, "checkpoint")
    at = plan.position
    if not plan.standby_workers():
        raise RuntimeError(
            f"RemoteModule.checkpoint on worker {plan.seats[at].worker!r} failed: no standby "
            "remains (each was promoted or is gone), so no worker could hold the checkpoint; "
            "calls go on as without standby"
        )
    try:
        reply = rpc.rpc_sync(
            remote_module.module_rref.owner(),
            owner.cut_checkpoint,
            (remote_module.module_rref, tuple(plan.ticket)),
            timeout=remote_module.timeout,
        )
    except Exception as error:  # the owner gone (a promotion), or too slow
        raise failed(remote_module, error, "checkpoint", at) from error
    if isinstance(reply, RemoteFailure):
        raise reply.error("checkpoint", owner_name(remote_module), remote_module._rm_record.creator)
    return int(reply)


# identity -> [calls not yet told, the module's RRef, the ticket]: the calls that scripted
# holders of this process send from TorchScript (kept while the process lives: a scripted
# model outlives the Python RemoteModule it was scripted from, and TorchScript passes only
# the identity).
_scripted: dict[str, list[Any]] = {}
_scripted_lock = threading.Lock()


def count_scripted(remote_module: Any) -> str | None:
    """At ``torch.jit.script``: what its TorchScript calls are counted as (the identity),
    None without ``checkpoint_every``. They are counted here, and the owner told of every
    N-th (one message per N calls, not one per call)."""
    ticket = remote_module._rm_record.ticket
    if ticket is None:
        return None
    with _scripted_lock:
        _scripted[ticket[0]] = [0, remote_module.module_rref, ticket]
    return str(ticket[0])


def scripted_call(identity: str) -> None:
    """Count one call sent from TorchScript; at every N-th, tell the owner, which counts them
    with every other holder's (``owner.counted_elsewhere``)."""
    with _scripted_lock:
        entry = _scripted.get(identity)
        if entry is None:
            return
        entry[0] += 1
        every = entry[2][2]
        if entry[0] < every:
            return
        entry[0] = 0
        module_rref, ticket = entry[1], entry[2]
    try:
        rpc.rpc_async(module_rref.owner(), owner.counted_elsewhere, (module_rref, ticket, every))
    except RuntimeError:  # the owner gone: the call itself says so
        pass
