"""The owner side: everything a message runs for remote_module on the process it reaches.

Every function a message names is defined in this module, and no message names anything of
ours before it: generated remote functions travel as their module's and their own names
(:func:`run` finds them), a RemoteModule sent over RPC travels as :func:`receive` and its
state. A process that first meets remote_module through messages (an owner started with
plain ``init_rpc``, a worker that first receives a RemoteModule) therefore imports it through
this module alone: importing it imports its parents first, and ``remote_module``'s
``__init__`` loads the whole runtime, caller side included, before any message's own code
runs. However many first messages arrive at once, their threads wait on this one module's
import lock; none can hold a submodule's lock while another holds the package's, which is
how Python hands out half-initialised modules.

What the owner keeps lives in :data:`remote_module.runtime.owner.state.STATE`; the key table
is ``table``, checkpoints and the standby's store ``checkpoints``, module creation
``creation``. Calls counted for ``checkpoint_every`` are counted by
``checkpoints.count``, from :func:`run`, :func:`keyed_module` and
:func:`counted_elsewhere`, and their checkpoints sent from here.
"""

from __future__ import annotations

import collections
import functools
import io
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.distributed.rpc as rpc
from torch.futures import Future
from torch.nn.parameter import Parameter

from remote_module import _shared
from remote_module.runtime import registry, values
from remote_module.runtime.batching import Batching
from remote_module.runtime.errors import (
    CreationFailure,
    RemoteFailure,
    creation_failure,
    remote_failure,
    short,
)
from remote_module.runtime.owner import batches, checkpoints, creation, graphs, table
from remote_module.runtime.owner.creation import create_module, local_module, owned_rref
from remote_module.runtime.owner.state import Recipe, Seat

__all__ = [
    "Call",
    "FirstReply",
    "check_created",
    "counted_elsewhere",
    "create",
    "create_with_interface",
    "cut_checkpoint",
    "describe_for_graphs",
    "fake_run",
    "file_keyed",
    "keep_checkpoint",
    "keyed_module",
    "load_generated",
    "load_script_module",
    "load_state_dict",
    "name_for_graphs",
    "parameter_rrefs",
    "promote",
    "receive",
    "reference_for_graphs",
    "request",
    "retire",
    "run",
    "state_dict",
    "train",
    "type_name",
]

# The reply to a RemoteModule's first call (Call.first): the result and the module's key in
# the table (None when it has none), or why the module could not be created. (What the call
# raised, a RemoteFailure as for every call, is read before.)
FirstReply = tuple[Any, int | None] | CreationFailure


# --- Creating a module ---------------------------------------------------------------------------


def create(recipe: bytes, tensors: list[torch.Tensor], device: str) -> Any:
    """A RemoteModule without an interface: the value of its ``rpc.remote``, the module or
    why it could not be created (``creation.from_recipe``)."""
    return creation.from_recipe(recipe, tensors, device)


def check_created(module_rref: rpc.RRef[Any]) -> CreationFailure | None:
    """Why the module of a RemoteModule without an interface could not be created, or None
    once it exists (``creation.failure_of``)."""
    return creation.failure_of(module_rref)


def create_with_interface(
    module_cls: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    device: str,
    interface_cls: Any,
) -> rpc.RRef[Any] | CreationFailure:
    """Create the module; for a TorchScript interface, script it and reply with an
    interface-typed RRef to it, for a Protocol a plain RRef. When ``module_cls`` fails, why
    (as data). The generated module is loaded by :func:`load_generated`, which the caller
    sends beside this request."""
    scripted = _shared.is_script_interface(interface_cls)
    try:
        module = create_module(module_cls, args, kwargs, device)
        module_rref = owned_rref(module, interface_cls, scripted, "on its owner")
    except Exception as error:
        return creation_failure(error)
    return module_rref


def load_generated(
    module_name: str, interface_cls: Any, move_tensors: bool, wire: bool = False
) -> None:
    """Make sure this owner can run the remote functions of ``module_name``."""
    registry.ensure_module(module_name, interface_cls, move_tensors, wire)


# --- Calls ---------------------------------------------------------------------------------------


class Call(NamedTuple):
    """A call of a RemoteModule's method as its owner reads it (the one message every Python
    call sends, followed by the call's arguments): which generated function runs, on which
    module, and what to do around it. Its caller's route builds it once per method
    (``remote_module.runtime.caller.route``)."""

    function: tuple[str, str]  # the remote function: its generated module's and its own names
    reference: Any  # the module: its key in the table, or its RRef
    device: str
    is_device_map_set: bool
    first: bool  # a first call: file the module under a new key, reply (result, key)
    wire_dtype: torch.dtype | None  # the arguments arrive cast (what restores them first)
    ticket: tuple[Any, ...] | None  # counted for checkpoint_every (a Ticket as a tuple)
    batching: Batching | None = None  # merged with concurrent calls (owner.batches)


def run(call: Call, *args: Any, **kwargs: Any) -> Any:
    """Run ``call`` with the call's own arguments: on a first call, file the module under a
    new key (``table.file``; a C++ scripted module keeps its RRef) and reply with it; with a
    wire dtype, restore the arguments (``values.restore_from_wire``, ``args[0]`` says how) and
    cast the result (the reply: the result and what restores it); with batching, merge it
    with the concurrent calls of the method (``batches.run``); with a ticket, count the call
    and start a checkpoint in the background after every N-th (the reply does not wait).
    What the module (or any of this) raises is the reply, as a :class:`RemoteFailure`: torch
    would print it here and put its traceback in the caller's text."""
    try:
        reference = call.reference
        key = None
        if call.first:
            failed = creation.failure_of(reference)
            if failed is not None:  # the reply says why (creation.from_recipe)
                return failed
            key = table.file(reference.local_value())
            if key is not None:
                reference = key
        remote_fn = registry.remote_function(call.function)
        wire_dtype = call.wire_dtype
        if wire_dtype is not None:
            carried, *rest = args
            args = values.restore_from_wire(tuple(rest), carried)
            if kwargs:
                kwargs = values.restore_from_wire(kwargs, carried)
        batching = call.batching
        if batching is None:
            result = remote_fn(reference, call.device, call.is_device_map_set, *args, **kwargs)
        else:
            result = _batched(call, batching, remote_fn, reference, args, kwargs)
        if wire_dtype is not None:
            back: list[torch.Tensor] = []
            named = not registry.in_script_family(remote_fn)
            result = (values.cast_to_wire(result, wire_dtype, back, named), back)
        elif type(result) is not torch.Tensor and registry.in_script_family(remote_fn):
            result = values.unnamed(result)  # (batched, or counted before its key)
        if call.ticket is not None:
            _count(reference, call.ticket)
        return (result, key) if call.first else result
    except Exception as error:
        return _as_failure(error)


def _batched(
    call: Call,
    batching: Batching,
    remote_fn: Callable[..., Any],
    reference: Any,
    args: Any,
    kwargs: Any,
) -> Any:
    """The call merged with the concurrent calls of its method (``batches.run``)."""
    module = table.module_for(reference)  # (the RRef's local value, without a key)
    method = functools.partial(remote_fn, reference, call.device, call.is_device_map_set)
    name = call.function[1].removeprefix(_shared.REMOTE_PREFIX)
    return batches.run(module, name, method, args, kwargs, batching)


def _count(reference: Any, ticket: tuple[Any, ...]) -> None:
    if type(reference) is int:
        module = table.module_for(reference)  # an eager module's key (never a scripted one's)
    else:
        module = local_module(reference)
    owned = checkpoints.owned_for(ticket)
    checkpoints.send_if_due(keep_checkpoint, owned, checkpoints.count(owned, module))


def file_keyed(
    module_rref: rpc.RRef[Any],
    module_name: str,
    interface_cls: Any,
    move_tensors: bool,
    ticket: tuple[Any, ...] | None = None,
) -> tuple[int, rpc.RRef[table.Keeper]]:
    """File a scripted module for the keyed remote functions of ``module_name`` (compiled here
    first), its keyed calls counted for ``ticket``'s checkpoints where given: its key, and
    the keeper that holds it there."""
    registry.ensure_module(module_name, interface_cls, move_tensors, keyed=True)
    owned = None if ticket is None else checkpoints.owned_for(ticket)
    return table.file_keyed(module_rref.local_value(), owned)


def keyed_module(key: int) -> Any:
    """The module filed under ``key``: what every keyed call of a scripted module looks up (a
    ``@torch.jit.ignore`` function of its generated module calls this), counted here where
    its filing asked."""
    module, owned = table.keyed_module(key)
    if owned is not None:
        checkpoints.send_if_due(keep_checkpoint, owned, checkpoints.count(owned, module))
    return module


# --- Graphs: the compiled route (owner/graphs.py) --------------------------------------------


def name_for_graphs(
    module_rref: rpc.RRef[Any], description: Any, interface_cls: Any, scripted: bool
) -> tuple[int, rpc.RRef[table.Keeper] | None]:
    """File the module under a key that compiled graphs and exported programs name it by
    (``graphs.name``)."""
    return graphs.name(module_rref, description, interface_cls, scripted)


def describe_for_graphs(key: int) -> Any:
    """The description of the module filed under ``key`` for graphs (``graphs.describe``)."""
    return graphs.describe(key)


def reference_for_graphs(key: int) -> rpc.RRef[Any] | RemoteFailure:
    """An RRef to the module filed under ``key`` for graphs (``graphs.reference``)."""
    return graphs.reference(key)


def fake_run(
    module_rref: rpc.RRef[Any],
    method: str,
    layout: str,
    metas: tuple[Any, ...],
    numbers: tuple[Any, Any] = ((), ()),
) -> tuple[str, list[tuple[tuple[int, ...], str]]] | RemoteFailure:
    """``method`` of the module run on fake arguments (``graphs.fake_run``)."""
    try:
        return graphs.fake_run(local_module(module_rref), method, layout, metas, numbers)
    except Exception as error:
        return _as_failure(error)


# --- A RemoteModule's own requests ---------------------------------------------------------------


def request(fn: Callable[..., Any], *args: Any) -> Any:
    """Run one of the requests below; an exception it raises comes back as a
    :class:`RemoteFailure` (torch would print its traceback here and put it in the text)."""
    try:
        return fn(*args)
    except Exception as error:
        return _as_failure(error)


def parameter_rrefs(module_rref: rpc.RRef[Any], recurse: bool) -> list[rpc.RRef[Parameter]]:
    return [rpc.RRef(param) for param in local_module(module_rref).parameters(recurse)]


def state_dict(module_rref: rpc.RRef[Any]) -> dict[str, torch.Tensor]:
    state = local_module(module_rref).state_dict()
    return collections.OrderedDict((key, value.detach().cpu()) for key, value in state.items())


def load_state_dict(module_rref: rpc.RRef[Any], state: dict[str, Any], strict: bool) -> Any:
    result = local_module(module_rref).load_state_dict(state, strict=strict)
    return (list(result.missing_keys), list(result.unexpected_keys))


def train(module_rref: rpc.RRef[Any], mode: bool) -> None:
    local_module(module_rref).train(mode)


def type_name(module_rref: rpc.RRef[Any]) -> str:
    module = local_module(module_rref)
    return getattr(module, "original_name", None) or type(module).__qualname__


# --- Checkpoints and standbys --------------------------------------------------------------------


def counted_elsewhere(module_rref: rpc.RRef[Any], ticket: tuple[Any, ...], calls: int) -> None:
    """``calls`` calls that a scripted holder sent from TorchScript, counted there and told
    here every N-th: counted as :func:`run` counts one."""
    owned = checkpoints.owned_for(ticket)
    checkpoints.send_if_due(
        keep_checkpoint, owned, checkpoints.count(owned, local_module(module_rref), calls)
    )


@rpc.functions.async_execution
def cut_checkpoint(module_rref: rpc.RRef[Any], ticket: tuple[Any, ...]) -> Future[Any]:
    """``rm.checkpoint()`` on the owner: the version, once every standby holds it; a
    :class:`RemoteFailure` naming a standby that did not take it."""
    answer: Future[Any] = Future()
    try:
        owned = checkpoints.owned_for(ticket)
        standbys = owned.ticket.standbys
        if owned.retired:
            raise RuntimeError("this worker is no longer the owner: fail_over() moved the module")
        snapshot = checkpoints.snapshot(local_module(module_rref))
        sending = checkpoints.send(keep_checkpoint, owned, snapshot)
    except Exception as error:
        answer.set_result(_as_failure(error))
        return answer

    def replied(done: Future[list[Any]]) -> None:
        version, *futures = done.wait()
        missed = []
        for worker, future in zip(standbys, futures, strict=True):
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


def keep_checkpoint(
    identity: str, seat: int, version: int, state: dict[str, torch.Tensor], training: bool
) -> bool:
    """On a standby: a checkpoint from the owner at ``seat`` (``checkpoints.keep``)."""
    return checkpoints.keep(identity, seat, version, state, training)


def promote(
    identity: str, recipe: Recipe, seats: tuple[Seat, ...], at: int, every: int | None
) -> tuple[rpc.RRef[Any], int | None, int] | CreationFailure:
    """On a standby: take the module over, once (``checkpoints.promote``)."""
    return checkpoints.promote(identity, recipe, seats, at, every)


def retire(identity: str, position: int) -> None:
    """On the old owner after ``fail_over()``: no more checkpoints of ``identity``."""
    checkpoints.retire(identity, position)


def _as_failure(error: BaseException) -> RemoteFailure:
    """``error`` as data for the caller (``errors.remote_failure``)."""
    return remote_failure(error)


# --- What arrives in a message's arguments -------------------------------------------------------


def receive(rebuild: Callable[..., Any], *sent: Any) -> Any:
    """A RemoteModule that arrived in a message: ``rebuild(*sent)`` (its caller-side
    initialiser, named after this module in the message, so this module loads first)."""
    return rebuild(*sent)


def load_script_module(data: bytes) -> torch.jit.ScriptModule:
    """A scripted module that arrived in a message (saved by the sender)."""
    return torch.jit.load(io.BytesIO(data))
