"""The ops of the compiled route, in torch's op namespace ``remote_module``: one per remote
call of a compiled or exported graph (``remote_module::call``), and its backward
(``remote_module::call_backward``). Registered when remote_module is imported, so that a
program saved with ``torch.export.save`` loads in any process that imported it.

``call(key, method, layout, tensors, ints, floats, wants, anchor) -> tensors``:

- ``key`` names the RemoteModule in any process of the RPC group: ``"<owner>/<id>"``, the
  module's id in its owner's table (:func:`key_of` files it there once, with what rebuilds a
  RemoteModule over it; :func:`resolve` finds it here, or asks the owner);
- ``layout``, ``tensors``, ``ints`` and ``floats`` are the call's arguments
  (``remote_module.runtime.layouts``);
- ``wants`` says which of the tensors the graph wants a gradient for;
- ``anchor``, given where grad mode is on and no tensor argument wants a gradient (a remote
  first layer), is a 0-d tensor that requires grad: it makes the result require grad as the
  eager call's does (the owner's parameters may want gradients), so the backward reaches the
  owner; its own gradient is zeros.

It runs the RemoteModule's generated method, so the call goes the RemoteModule's route with
everything a route carries (wire dtype, timeout, failover, counting). It returns the result's
tensors and, last, a handle: where the call was recorded for distributed autograd, the
backward finds its recording by it (:mod:`remote_module.runtime.caller.recorded`). Its fake
kernel gives the result's tensors without running the module
(``remote_module.runtime.caller.fakes``) and notes the result's layout, which the traced code
rebuilds the result from (:func:`result_layout`).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import torch
import torch.distributed.rpc as rpc

from remote_module import _shared
from remote_module.runtime import layouts, owner
from remote_module.runtime.caller import fakes, pickling, recorded
from remote_module.runtime.caller.record import LIVE
from remote_module.runtime.errors import RemoteFailure, failure

__all__ = ["key_of", "resolve", "result_layout"]

_lock = threading.Lock()
# key -> the RemoteModule of this process it names (made here, or rebuilt from its owner's
# description: those are kept, as a RemoteModule holds its module).
_named: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_rebuilt: dict[str, Any] = {}
# (key, method, argument layout) -> the result's layout.
_results: dict[tuple[str, str, str], Any] = {}


def key_of(local_id: str) -> str:
    """The key of this process's RemoteModule ``local_id``: filed on its owner the first time
    (``owner.name_for_graphs``), with what rebuilds a RemoteModule over it elsewhere."""
    remote_module = LIVE[local_id]
    record = remote_module._rm_record
    if record.graph_key is None:
        module_rref = remote_module.module_rref  # the construction's reply taken
        description = pickling.describe(remote_module)
        interface_cls = getattr(record.generated, _shared.INTERFACE_CLASS, None)
        naming = (module_rref, description, interface_cls, remote_module.is_scriptable)
        try:
            number, keeper = rpc.rpc_sync(
                module_rref.owner(),
                owner.name_for_graphs,
                naming,
                timeout=0,  # the reply may carry an RRef (runtime.caller.replies)
            )
        except Exception as error:
            raise failure(error, "torch.compile", module_rref.owner_name()) from error
        record.graph_keeper = keeper
        record.graph_key = f"{module_rref.owner_name()}/{number}"
    with _lock:
        _named[record.graph_key] = remote_module
    return str(record.graph_key)


def resolve(key: str) -> Any:
    """The RemoteModule ``key`` names: this process's own, or one rebuilt from its owner's
    description (asked once)."""
    with _lock:
        found = _named.get(key) or _rebuilt.get(key)
    if found is not None:
        return found
    worker, _, number = key.rpartition("/")
    if not worker or not number.isdigit():
        raise ValueError(f"remote_module: {key!r} is not a RemoteModule key ('<owner>/<id>')")
    description = _ask(worker, owner.describe_for_graphs, int(number), key)
    # Its interface compiled here first: a scripted module's RRef is typed as it.
    pickling.load_described(description)
    module_rref = _ask(worker, owner.reference_for_graphs, int(number), key)
    remote_module = pickling.rebuild_described(description, module_rref)
    with _lock:
        _rebuilt[key] = remote_module
    return remote_module


def _ask(worker: str, request: Any, number: int, key: str) -> Any:
    try:  # (no deadline: a reply may carry an RRef)
        reply = rpc.rpc_sync(worker, request, (number,), timeout=0)
    except Exception as error:
        raise failure(error, f"resolving {key!r}", worker) from error
    if isinstance(reply, RemoteFailure):
        raise reply.error(f"resolving {key!r}", worker)
    return reply


def result_layout(key: str, method: str, layout: str) -> Any:
    """The layout of ``method``'s result for arguments of ``layout`` (noted by the op)."""
    with _lock:
        found = _results.get((key, method, layout))
    if found is None:
        raise RuntimeError(
            f"remote_module: no result layout for {method} of {key} (the op did not run)"
        )
    return found


def _note(key: str, method: str, layout: str, result: Any) -> list[torch.Tensor]:
    """``result``'s tensors, its layout noted for :func:`result_layout`."""
    tensors: list[torch.Tensor] = []
    tree = layouts.result_skeleton(result, tensors)
    noted = (key, method, layout)
    if _results.get(noted) != tree:  # (a graph's every call after its first: the same)
        layouts.encode(tree)  # its NamedTuple classes noted, where traced code reads them
        with _lock:
            _results[noted] = tree
    return tensors


def _unaliased(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """``tensors``, contiguous, each one that shares its storage with an earlier one copied: an
    op's outputs may not alias each other (views of one result arrive over RPC as views), and
    its fake kernel says they are contiguous."""
    seen: set[int] = set()
    unaliased = []
    for tensor in tensors:
        storage = tensor.untyped_storage().data_ptr()
        if storage in seen and tensor.numel():
            tensor = tensor.clone(memory_format=torch.contiguous_format)
        else:
            tensor = tensor.contiguous()
        seen.add(storage)
        unaliased.append(tensor)
    return unaliased


# --- remote_module::call ---------------------------------------------------------------------


@torch.library.custom_op(
    "remote_module::call",
    mutates_args=(),
    schema=(
        "(str key, str method, str layout, Tensor[] tensors, SymInt[] ints, float[] floats, "
        "bool[] wants, Tensor? anchor) -> Tensor[]"
    ),
)
def _call(
    key: str,
    method: str,
    layout: str,
    tensors: list[torch.Tensor],
    ints: list[int],
    floats: list[float],
    wants: list[bool],
    anchor: torch.Tensor | None,
) -> list[torch.Tensor]:
    remote_module = resolve(key)
    recording = None
    if any(wants) or anchor is not None:
        tensors, recording = recorded.start(remote_module, method, tensors, wants)
    if recording is None:
        args, kwargs = layouts.arguments(layout, tensors, (ints, floats))
        result = getattr(remote_module, method)(*args, **kwargs)
        # (no recording: handle -1; torch.full makes it in half torch.tensor's time)
        return [
            *_unaliased(_note(key, method, layout, result)),
            torch.full((), -1, dtype=torch.int64),
        ]
    with torch.enable_grad():  # recorded, as an eager call in the context
        args, kwargs = layouts.arguments(layout, tensors, (ints, floats))
        result = getattr(remote_module, method)(*args, **kwargs)
    recording.outputs = _note(key, method, layout, result)
    outputs = _unaliased([output.detach() for output in recording.outputs])
    return [*outputs, torch.tensor(recording.handle)]


@_call.register_fake
def _call_fake(
    key: str,
    method: str,
    layout: str,
    tensors: list[torch.Tensor],
    ints: list[int],
    floats: list[float],
    wants: list[bool],
    anchor: torch.Tensor | None,
) -> list[torch.Tensor]:
    remote_module = resolve(key)
    args, kwargs = layouts.arguments(layout, tensors, (ints, floats))
    result = fakes.fake_result(remote_module, method, args, kwargs)
    # Contiguous, as the real kernel's outputs are (_unaliased).
    found = _note(key, method, layout, result)
    outputs = [torch.empty(tensor.shape, dtype=tensor.dtype) for tensor in found]
    return [*outputs, torch.empty((), dtype=torch.int64)]


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    key, _, _, tensors, _, _, wants, anchor = inputs
    ctx.key = key
    ctx.anchored = anchor is not None
    # What the backward returns has the inputs' structure as torch.library reads it: a list of
    # tensors (or an empty list) is a list, a list of numbers or bools one leaf. (No argument
    # has a default: the dispatcher drops one equal to its default, and the structure with it.)
    ctx.nones = [
        [None] * len(value)
        if isinstance(value, list) and all(isinstance(v, torch.Tensor) for v in value)
        else None
        for value in inputs
    ]
    ctx.wants = list(wants)
    sent = (t for t, w in zip(tensors, wants, strict=True) if w)
    ctx.save_for_backward(output[-1], *sent, *([anchor] if ctx.anchored else []))


def _backward(ctx: Any, grads: list[torch.Tensor | None]) -> tuple[Any, ...]:
    handle, *inputs = ctx.saved_tensors
    answer = list(ctx.nones)
    if inputs:
        # The anchor's gradient (zeros) is an output of the backward graph, so the call
        # (the owner's backward) is never dropped as dead code.
        got = iter(torch.ops.remote_module.call_backward(ctx.key, handle, inputs, list(grads[:-1])))
        answer[3] = [next(got) if w else None for w in ctx.wants]
        if ctx.anchored:
            answer[7] = next(got)
    return tuple(answer)


_call.register_autograd(_backward, setup_context=_setup_context)


# --- remote_module::call_backward ------------------------------------------------------------


@torch.library.custom_op(
    "remote_module::call_backward",
    mutates_args=(),
    schema="(str key, Tensor handle, Tensor[] inputs, Tensor?[] grads) -> Tensor[]",
)
def _call_backward(
    key: str, handle: torch.Tensor, inputs: list[torch.Tensor], grads: list[torch.Tensor | None]
) -> list[torch.Tensor]:
    return recorded.backward(resolve(key), int(handle), inputs, grads)


@_call_backward.register_fake
def _call_backward_fake(
    key: str, handle: torch.Tensor, inputs: list[torch.Tensor], grads: list[torch.Tensor | None]
) -> list[torch.Tensor]:
    return [torch.empty_like(tensor) for tensor in inputs]
