"""Calls of the compiled route recorded for distributed autograd, and their backward.

Inside a distributed autograd context, a compiled call that the graph wants gradients of is
made as an eager call is: its tensors sent with ``requires_grad``, so distributed autograd
records the send and the reply on both sides, exactly as for an eager call (the owner keeps
nothing of ours; its side lives and dies with the context). What the op returns is detached
(an op's outputs carry no history), so the recording keeps the reply's tensors, under a
handle the op returns beside the result.

The op's backward (:func:`backward`) runs autograd from the kept reply with the graph's
gradients: the reply's receive functions send them to the owner, whose distributed autograd
engine runs the module's backward (its parameters' gradients land in the owner's side of the
context, where ``DistributedOptimizer`` reads them) and sends the arguments' gradients back.
They arrive at :class:`_Capture`, through which the arguments were sent; the backward waits
for them (bounded by the RemoteModule's timeout) and hands them to the graph. Eager and
compiled calls of one RemoteModule may mix in one context: each kind has its own send and
receive functions, and the owner's engine waits for neither.

A recording is dropped by its backward, or, if its context ends without one, by the next
recording made in this process.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import torch

from remote_module import _compat

__all__ = ["Recording", "backward", "start"]

_DEFAULT_TIMEOUT = 60.0  # torch's default RPC timeout, where the RemoteModule sets none
_lock = threading.Lock()
_handles = itertools.count()
_recordings: dict[int, Recording] = {}


class Recording:
    """One recorded call: its context, the reply's tensors, and its arguments' gradients once
    they came back."""

    __slots__ = ("arrived", "context", "grads", "handle", "method", "outputs", "sent", "where")

    def __init__(self, context: int, method: str, where: str) -> None:
        self.context = context
        self.method = method
        self.where = where  # the owner, for errors
        self.handle = next(_handles)
        self.outputs: list[torch.Tensor] = []
        self.grads: tuple[torch.Tensor | None, ...] = ()
        self.sent = 0  # the arguments sent with requires_grad, whose gradients come back
        self.arrived = threading.Event()


class _Capture(torch.autograd.Function):
    """The identity the wanted arguments are sent through: its backward is where their
    gradients arrive from the owner (all at once: one send, one receive function)."""

    @staticmethod
    def forward(ctx: Any, recording: Recording, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.recording = recording
        ctx.set_materialize_grads(False)
        return tuple(tensor.view_as(tensor) for tensor in tensors)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[None, ...]:
        recording: Recording = ctx.recording
        recording.grads = grads
        recording.arrived.set()
        return (None,) * (len(grads) + 1)


def start(
    remote_module: Any, method: str, tensors: list[torch.Tensor], wants: list[bool]
) -> tuple[list[torch.Tensor], Recording | None]:
    """The tensors to send for a call that wants gradients of ``tensors`` where ``wants``
    says, and its recording; outside a distributed autograd context nothing is recorded (as
    for an eager call): the tensors as they are, and None."""
    context = _compat.current_context_id()
    if context is None:
        return tensors, None
    _drop_ended()
    recording = Recording(context, method, str(remote_module.on))
    wanted = [
        tensor.detach().requires_grad_() for tensor, w in zip(tensors, wants, strict=True) if w
    ]
    recording.sent = len(wanted)
    with torch.enable_grad():
        captured = iter(_Capture.apply(recording, *wanted) if wanted else ())
    with _lock:
        _recordings[recording.handle] = recording
    return [
        next(captured) if w else tensor for tensor, w in zip(tensors, wants, strict=True)
    ], recording


def backward(
    remote_module: Any,
    handle: int,
    inputs: list[torch.Tensor],
    grads: list[torch.Tensor | None],
) -> list[torch.Tensor]:
    """The gradients of the wanted arguments (``inputs``) of the call recorded under
    ``handle``, given the gradients of its result's tensors; zeros where none reached them
    (a call made outside a context, or a result that carries no gradient back) and for
    inputs past those sent (the op's anchor). With no argument sent, the owner's backward is
    started and not waited for: distributed autograd's backward waits for it."""
    with _lock:
        recording = _recordings.pop(handle, None)
    zeros = [torch.zeros_like(tensor) for tensor in inputs]
    if recording is None:
        return zeros
    pairs = [
        (output, grad)
        for output, grad in zip(recording.outputs, grads, strict=True)
        if grad is not None and output.requires_grad
    ]
    if not pairs:
        return zeros
    torch.autograd.backward([output for output, _ in pairs], [grad for _, grad in pairs])
    if not recording.sent:
        return zeros
    timeout = remote_module.timeout
    seconds = timeout if timeout is not None and timeout > 0 else _DEFAULT_TIMEOUT
    if not recording.arrived.wait(seconds):
        raise RuntimeError(
            f"RemoteModule.{recording.method} on worker {recording.where!r} failed: the "
            f"gradients of its arguments did not come back within {seconds} s"
        )
    got = [*recording.grads, *zeros[recording.sent :]]
    return [grad if grad is not None else zero for grad, zero in zip(got, zeros, strict=True)]


def _drop_ended() -> None:
    """Drop the recordings of contexts that ended without a backward."""
    with _lock:
        ended = [h for h, r in _recordings.items() if not _compat.context_alive(r.context)]
        for handle in ended:
            del _recordings[handle]
