"""The 8-bit wire's coding (``wire_dtype=torch.int8``): a floating tensor to int8 codes and one
float32 scale per block of values, and back. ``_shared.cast_tensor`` and ``restore_tensor``
call it (TorchScript calls it back into Python); it loads with the first tensor coded, not
with ``import remote_module``. A leaf: torch and the standard library.

How it is coded, and why (16 MiB of float32 on the 2-core development machine, where each
side of a round trip over a 1 Gbit/s link codes once each way, on the call's critical path):

- **One thread.** Coding is a few passes over memory. A kernel on torch's thread team waits
  at its end for every thread of it, and a thread that another process holds the core of
  holds up the whole kernel: on a busy machine a 16 MiB cast on two threads took 2 ms at best,
  10-20 ms typically and up to 1.4 s (each of its 80 large kernels waited); on one thread 2.7 ms
  at best and never over ~30 ms. :func:`one_thread` sets the calling thread's team to one for
  the coding only (``torch.set_num_threads``, a per-thread setting with OpenMP) and restores
  it.
- **Pieces** of ``piece`` values: the work of each piece stays in the core's cache, through
  one float32 work buffer per thread, reused call after call (bounded by ``piece``).
- **No float copy of the whole tensor**, either way: codes are made from the tensor as it is
  (any floating dtype; a non-contiguous one is made contiguous first), and values are decoded
  straight into the result of the tensor's own dtype (through the work buffer for dtypes
  other than float32, so the values are those float32 decoding gives, as before).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
from torch import Tensor

__all__ = ["dequantize", "one_thread", "quantize"]


def quantize(value: Tensor, block: int, piece: int) -> tuple[Tensor, Tensor]:
    """Int8 codes of ``value`` (its shape) and one float32 scale per block of ``block``
    values in contiguous order (the block's largest magnitude / 127; the last block may be
    short): each code is its value / scale rounded to the nearest (ties to even), so it is
    off by at most half a step. A block holding a NaN or an infinity gets codes of 0 and a
    scale that is not finite, so that it decodes to NaNs. ``piece``: a multiple of ``block``."""
    flat = value.detach().reshape(-1)  # the gradient takes the straight path alone
    count = flat.numel()
    whole = count - count % block  # the values in whole blocks
    codes = torch.empty(count, dtype=torch.int8, device=flat.device)
    largest = torch.empty(-(-count // block), dtype=torch.float32, device=flat.device)
    with one_thread():
        for start in range(0, whole, piece):
            stop = min(start + piece, whole)
            _encode(
                flat[start:stop].view(-1, block),
                largest[start // block : stop // block],
                codes[start:stop].view(-1, block),
            )
        if whole < count:
            _encode(flat[whole:].view(1, -1), largest[-1:], codes[whole:].view(1, -1))
        finite = torch.isfinite(largest)
        if not bool(finite.all()):
            for index in (~finite).nonzero().view(-1).tolist():
                codes[index * block : (index + 1) * block] = 0
        scales = largest.div_(127.0)
    return codes.view(value.shape), scales


def dequantize(codes: Tensor, scales: Tensor, like: Tensor, block: int, piece: int) -> Tensor:
    """The values of ``codes`` in ``like``'s dtype (the inverse of :func:`quantize`): each
    code times its block's scale, in float32."""
    flat = codes.reshape(-1)
    count = flat.numel()
    whole = count - count % block
    values = torch.empty(count, dtype=like.dtype, device=flat.device)
    with one_thread():
        for start in range(0, whole, piece):
            stop = min(start + piece, whole)
            _decode(
                flat[start:stop].view(-1, block),
                scales[start // block : stop // block].unsqueeze(1),
                values[start:stop].view(-1, block),
            )
        if whole < count:
            _decode(flat[whole:], scales[-1], values[whole:])
    return values.view(codes.shape)


def _encode(rows: Tensor, largest: Tensor, codes: Tensor) -> None:
    """Codes of ``rows`` (blocks) into ``codes``; each block's largest magnitude into
    ``largest`` (float32; NaN where the block has one, inf where it has an infinity)."""
    torch.maximum(rows.amax(dim=1), rows.amin(dim=1).neg_(), out=largest)
    inverse = torch.where(largest > 0, 127.0 / largest, 0.0)  # NaN, inf: 0 (their codes: below)
    scaled = torch.mul(rows, inverse.unsqueeze(1), out=_work(rows.shape, rows.device))
    codes.copy_(scaled.round_())


def _decode(codes: Tensor, scales: Tensor, values: Tensor) -> None:
    """``codes`` times ``scales`` (float32 arithmetic) into ``values``."""
    if values.dtype == torch.float32:
        values.copy_(codes).mul_(scales)
    else:
        values.copy_(_work(codes.shape, codes.device).copy_(codes).mul_(scales))


class _Scratch(threading.local):
    """Per thread: the float32 work buffer of one piece."""

    buffer: Tensor | None = None


_scratch = _Scratch()


def _work(shape: torch.Size, device: torch.device) -> Tensor:
    """This thread's work buffer, viewed as ``shape`` (grown to it first where it is smaller,
    or on another device)."""
    count = shape.numel()
    buffer = _scratch.buffer
    if buffer is None or buffer.numel() < count or buffer.device != device:
        buffer = _scratch.buffer = torch.empty(count, dtype=torch.float32, device=device)
    return buffer[:count].view(shape)


# --- One thread for the coding ---------------------------------------------------------------


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run torch's kernels on this thread alone inside the block: ``torch.set_num_threads``
    sets the calling thread's team (OpenMP's per-thread count, MKL's per-thread count), and
    the count is restored after."""
    before = torch.get_num_threads()  # this thread's count
    if before == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
