"""The 8-bit wire's coding itself (``remote_module._int8``, through ``_shared``), in this
process: the wire format bit for bit against a plain whole-tensor statement of it, for every
floating dtype, pieces and short last blocks; the decoded values of the tensor's own dtype;
the caller's tensor untouched; one thread for the coding, the caller's own count restored;
the per-thread work buffer reused and bounded."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import torch
from torch import Tensor

from remote_module import _int8, _shared
from remote_module._shared import INT8_BLOCK, INT8_PIECE

WAIT_S = 30.0


def _reference(x: Tensor) -> tuple[Tensor, Tensor]:
    """The wire format, stated plainly: float32 values in contiguous order, padded with zeros
    to whole blocks; a block's scale is its largest magnitude / 127, each code the value times
    127 / that magnitude, rounded (ties to even); a block with a NaN or an infinity: codes 0."""
    flat = x.detach().reshape(-1).float()
    rows = torch.cat([flat, flat.new_zeros(-flat.numel() % INT8_BLOCK)]).view(-1, INT8_BLOCK)
    largest = torch.maximum(rows.amax(dim=1), rows.amin(dim=1).neg())
    inverse = torch.where(largest > 0, 127.0 / largest, torch.zeros_like(largest))
    codes = (rows * inverse.unsqueeze(1)).round()
    codes[~torch.isfinite(largest)] = 0
    return codes.to(torch.int8).view(-1)[: flat.numel()].view(x.shape), largest / 127.0


def _values(codes: Tensor, scales: Tensor, dtype: torch.dtype) -> Tensor:
    """Each code times its block's scale in float32, then in ``dtype``."""
    flat = codes.reshape(-1).float()
    per_value = scales.repeat_interleave(INT8_BLOCK)[: flat.numel()]
    return (flat * per_value).to(dtype).view(codes.shape)


def _same(got: Tensor, want: Tensor) -> bool:
    """Equal, NaNs in the same places counting as equal."""
    return got.dtype == want.dtype and bool(((got == want) | (got.isnan() & want.isnan())).all())


@pytest.mark.parametrize(
    "count", [512, 1000, INT8_BLOCK, 3 * INT8_BLOCK + 1, INT8_PIECE, 2 * INT8_PIECE + 700]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_codes_and_values_are_the_wire_format_bit_for_bit(count: int, dtype: torch.dtype) -> None:
    torch.manual_seed(count)
    x = (torch.randn(count) * torch.logspace(-3, 3, count)).to(dtype)  # blocks of every scale
    x[count // 3 : count // 3 + INT8_BLOCK] = 0  # zeros, across a block boundary
    if count > 2 * INT8_BLOCK:
        x[INT8_BLOCK + 5] = float("nan")
        x[-3] = float("inf")
    before = x.clone()
    codes, scales = _shared._quantize(x)
    want_codes, want_scales = _reference(x)
    assert codes.dtype == torch.int8 and codes.shape == x.shape
    assert torch.equal(codes, want_codes)
    assert _same(scales, want_scales) and scales.numel() == -(-count // INT8_BLOCK)
    assert _same(x, before)  # the caller's tensor is never written
    values = _shared._dequantize(codes, scales, torch.empty(0, dtype=dtype))
    assert _same(values, _values(codes, scales, dtype))
    if count > 2 * INT8_BLOCK:  # a block with a NaN or an infinity: NaNs, every value
        assert bool(values.view(-1)[INT8_BLOCK : 2 * INT8_BLOCK].isnan().all())
        last = (count - 3) // INT8_BLOCK * INT8_BLOCK
        assert bool(values.view(-1)[last : last + INT8_BLOCK].isnan().all())


def test_a_non_contiguous_tensor_is_coded_in_its_own_order() -> None:
    x = torch.randn(700, 9).t()
    codes, scales = _shared._quantize(x)
    want_codes, want_scales = _reference(x.contiguous())
    assert torch.equal(codes, want_codes) and torch.equal(scales, want_scales)


@pytest.fixture
def two_threads() -> Iterator[None]:
    """This thread's count at 2 for the test (whatever the machine has), restored after."""
    own = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(own)


@pytest.mark.usefixtures("two_threads")
def test_coding_runs_on_one_thread_and_restores_the_callers_count() -> None:
    before = torch.get_num_threads()
    with _int8.one_thread():
        inside = torch.get_num_threads()
    assert (inside, torch.get_num_threads()) == (1, before)
    # Per thread: another thread coding leaves this one's count alone.
    entered, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def code() -> None:
        with _int8.one_thread():
            seen.append(torch.get_num_threads())
            entered.set()
            release.wait(WAIT_S)

    worker = threading.Thread(target=code)
    worker.start()
    try:
        assert entered.wait(WAIT_S)
        assert torch.get_num_threads() == before
    finally:
        release.set()
        worker.join(WAIT_S)
    assert seen == [1] and not worker.is_alive()


def test_the_work_buffer_is_reused_and_bounded() -> None:
    x = torch.randn(3 * INT8_PIECE + 5)
    _shared._quantize(x)
    buffer = _int8._scratch.buffer
    assert buffer is not None and buffer.numel() <= INT8_PIECE
    _shared._quantize(torch.randn(INT8_PIECE // 2))
    _shared._quantize(x.double())
    assert _int8._scratch.buffer is buffer
