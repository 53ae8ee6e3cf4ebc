"""``RemoteModule(..., wire_dtype=torch.int8)``: floating tensors cross as 8-bit codes with a
float32 scale per block of ``INT8_BLOCK`` values, each value within half a step of its block
and zeros exact, restored to their own dtype and shape; smaller tensors cross as bf16;
integer and bool tensors untouched; nested values; scripted and eager calls; gradients
straight through under distributed autograd. Against a real three-worker RPC group."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import Tensor, nn

from remote_module import RemoteModule
from remote_module._shared import INT8_BLOCK, INT8_MIN_VALUES, cast_tensor, restore_tensor
from tests.support import wire_helpers
from tests.support.interfaces import Pair
from tests.support.wire_helpers import (
    Affine,
    Keeper,
    TensorInterface,
    TensorProtocol,
)

pytestmark = pytest.mark.rpc_group(3)

FAMILIES = [None, TensorProtocol, TensorInterface]
FAMILY_IDS = ["no-interface", "protocol", "script"]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    return wire_helpers.spy_on_sends(monkeypatch)


def _half_steps(x: Tensor) -> Tensor:
    """Each value's bound: half its block's step (the block's largest magnitude / 127), blocks
    of ``INT8_BLOCK`` values in contiguous order, the last one possibly short."""
    flat = x.detach().reshape(-1).double()
    padded = torch.cat([flat, flat.new_zeros(-flat.numel() % INT8_BLOCK)])
    largest = padded.view(-1, INT8_BLOCK).abs().amax(dim=1)
    return (largest / 127 / 2).repeat_interleave(INT8_BLOCK)[: flat.numel()].view(x.shape)


def _assert_within_half_a_step(got: Tensor, want: Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    error = (got.double() - want.double()).abs()
    bound = _half_steps(want) * (1 + 1e-5)  # float32 arithmetic's own rounding
    worst = int((error - bound).argmax())
    assert bool((error <= bound).all()), (
        f"value {worst} off by {error.view(-1)[worst]:.3g}, bound {bound.view(-1)[worst]:.3g}"
    )


def _blocks_of_every_kind() -> Tensor:
    """Large values, then small ones, then zeros, then a short last block, in one tensor."""
    torch.manual_seed(0)
    large = torch.randn(INT8_BLOCK) * 100
    small = torch.randn(INT8_BLOCK) * 1e-3
    zeros = torch.zeros(INT8_BLOCK)
    tail = torch.randn(300)
    return torch.cat([large, small, zeros, tail]).view(4, -1)


# --- The codes themselves, in this process ---------------------------------------------------


@pytest.mark.parametrize("count", [INT8_MIN_VALUES, 1000, INT8_BLOCK, 3 * INT8_BLOCK + 1, 9000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_value_is_within_half_a_step_of_its_block(count: int, dtype: torch.dtype) -> None:
    torch.manual_seed(count)
    x = (torch.randn(count) * torch.logspace(-4, 4, count)).to(dtype)  # blocks of every scale
    carried: list[Tensor] = []
    codes = cast_tensor(x, torch.int8, carried)
    assert codes.dtype == torch.int8 and codes.shape == x.shape
    assert carried[1].dtype == torch.float32 and carried[1].numel() == -(-count // INT8_BLOCK)
    _assert_within_half_a_step(restore_tensor(codes, carried), x)
    assert carried == []


def test_contiguous_order_and_the_small_tensor_threshold() -> None:
    x = _blocks_of_every_kind()
    transposed = x.t()  # not contiguous: its blocks follow the transposed tensor's own order
    carried: list[Tensor] = []
    restored = restore_tensor(cast_tensor(transposed, torch.int8, carried), carried)
    _assert_within_half_a_step(restored, transposed)
    small = torch.randn(INT8_MIN_VALUES - 1)
    carried = []
    wired = cast_tensor(small, torch.int8, carried)
    assert wired.dtype == torch.bfloat16
    assert torch.equal(restore_tensor(wired, carried), small.bfloat16().float())


# --- Calls of real RemoteModules --------------------------------------------------------------


@pytest.mark.parametrize("interface", FAMILIES, ids=FAMILY_IDS)
def test_each_block_keeps_its_own_step_both_ways(
    interface: Any, sent: list[tuple[Any, ...]]
) -> None:
    x = _blocks_of_every_kind()
    rm = RemoteModule("worker1/cpu", Keeper, module_interface_cls=interface, wire_dtype=torch.int8)
    for call in (rm.forward, lambda x: rm.forward_async(x).wait()):
        sent.clear()
        result = call(x)
        received = rpc.rpc_sync("worker1", wire_helpers.kept, (rm.module_rref,))
        _assert_within_half_a_step(received, x)
        _assert_within_half_a_step(result, received)
        assert torch.equal(received.view(-1)[2 * INT8_BLOCK : 3 * INT8_BLOCK], torch.zeros(1024))
        assert torch.equal(result.view(-1)[2 * INT8_BLOCK : 3 * INT8_BLOCK], torch.zeros(1024))
        # the small block's error is bounded by its own step, far finer than the large one's
        small = slice(INT8_BLOCK, 2 * INT8_BLOCK)
        error = (result.view(-1)[small] - x.view(-1)[small]).abs().max()
        assert error < _half_steps(x).view(-1)[0] / 1e4
        on_wire = [t for args in sent for t in wire_helpers.tensors_in(args) if t.numel() > 1]
        assert sorted((str(t.dtype), tuple(t.shape)) for t in on_wire) == [
            ("torch.float32", (4,)),  # one scale per block (sent ahead of the arguments)
            ("torch.int8", tuple(x.shape)),  # the codes, in the tensor's shape: 1 byte a value
        ]


def test_dtypes_shapes_and_nested_values_without_an_interface(sent: list[tuple[Any, ...]]) -> None:
    torch.manual_seed(1)
    wide = torch.randn(3, 700, dtype=torch.float64)
    half = torch.randn(40, 40).half()
    brain = torch.randn(2048).bfloat16()
    small = torch.randn(10)
    ids, flags = torch.arange(600), torch.rand(700) > 0.5
    own_codes = torch.randint(-128, 127, (900,), dtype=torch.int8)
    rm = RemoteModule("worker1/cpu", wire_helpers.KeeperAnything, wire_dtype=torch.int8)
    args = ({"a": [wide, half], "b": (brain, ids)}, Pair(small, 3))
    (nested, pair), kwargs = rm(*args, flags=flags, own=own_codes)
    assert isinstance(pair, Pair) and pair.second == 3
    assert pair.first.dtype == torch.float32 and pair.first.shape == (10,)
    torch.testing.assert_close(pair.first, small, rtol=1e-2, atol=1e-2)  # crossed as bf16
    _assert_within_half_a_step(nested["a"][0], wide)  # twice quantized, the same codes
    for got, want in ((nested["a"][1], half), (nested["b"][0], brain)):
        assert got.dtype == want.dtype and got.shape == want.shape
        # half a step, then the rounding to the tensor's own dtype (a few bits coarser)
        error = (got.float() - want.float()).abs()
        assert bool((error <= _half_steps(want.float()) * 1.6).all())
    assert torch.equal(nested["b"][1], ids) and torch.equal(kwargs["flags"], flags)
    assert torch.equal(kwargs["own"], own_codes)
    on_wire = {(t.dtype, tuple(t.shape)) for args in sent for t in wire_helpers.tensors_in(args)}
    assert {
        (torch.int8, (3, 700)),
        (torch.int8, (40, 40)),
        (torch.int8, (2048,)),
        (torch.bfloat16, (10,)),
        (torch.int64, (600,)),
    } <= on_wire
    assert not any(dtype in on_wire for dtype in (torch.float32, torch.float64))


def test_scripted_calls_send_codes_too() -> None:
    x = _blocks_of_every_kind()
    typed = RemoteModule(
        "worker1/cpu", Keeper, module_interface_cls=TensorInterface, wire_dtype=torch.int8
    )
    scripted = torch.jit.script(typed)
    for result in (scripted(x), scripted.forward_async(x).wait()):
        received = rpc.rpc_sync("worker1", wire_helpers.kept, (typed.module_rref,))
        _assert_within_half_a_step(received, x)
        _assert_within_half_a_step(result, received)


def _gradients(call: Any, module_rref: Any) -> tuple[list[Tensor], list[Tensor]]:
    """The gradients of x and of the weight through ``call`` (a RemoteModule of
    :class:`Affine`, or its scripted form) under distributed autograd, and the exact ones."""
    torch.manual_seed(3)
    x = torch.randn(64, 32, requires_grad=True)
    target = torch.randn(64, 48)
    local = Affine()
    (torch.tanh(local.linear(x)) * target).sum().backward()
    assert x.grad is not None and local.linear.weight.grad is not None
    exact = [x.grad.clone(), local.linear.weight.grad.clone()]
    with dist_autograd.context() as context_id:
        result = call(x)
        dist_autograd.backward(context_id, [(result * target).sum()])
        got_weight = rpc.rpc_sync("worker1", wire_helpers.weight_grad, (module_rref, context_id))
        got = [dist_autograd.get_gradients(context_id)[x], got_weight]
    return got, exact


def _assert_close_to_exact(got: list[Tensor], exact: list[Tensor]) -> None:
    for grad, want in zip(got, exact, strict=True):
        torch.testing.assert_close(grad, want, rtol=0.05, atol=0.02 * float(want.abs().max()))


@pytest.mark.parametrize("interface", FAMILIES, ids=FAMILY_IDS)
def test_gradients_flow_straight_through(interface: Any, sent: list[tuple[Any, ...]]) -> None:
    rm = RemoteModule("worker1/cpu", Affine, module_interface_cls=interface, wire_dtype=torch.int8)
    sent.clear()
    _assert_close_to_exact(*_gradients(rm, rm.module_rref))
    # x crossed as codes with its gradient's path: a bf16 zero of its shape, one value stored
    paths = [t for args in sent for t in wire_helpers.tensors_in(args) if t.requires_grad]
    assert [(t.dtype, t.shape, t.stride()) for t in paths] == [
        (torch.bfloat16, torch.Size([64, 32]), (0, 0))
    ]


def test_gradients_flow_straight_through_a_scripted_model() -> None:
    rm = RemoteModule(
        "worker1/cpu", Affine, module_interface_cls=TensorInterface, wire_dtype=torch.int8
    )
    _assert_close_to_exact(*_gradients(torch.jit.script(rm), rm.module_rref))


@pytest.mark.parametrize(
    "wire_dtype", [torch.float32, torch.float64, torch.uint8, torch.bool, "int8", 8]
)
def test_any_other_wire_dtype_is_a_value_error_naming_the_accepted_ones(wire_dtype: Any) -> None:
    with pytest.raises(ValueError) as raised:
        RemoteModule("worker1/cpu", nn.Linear, args=(2, 2), wire_dtype=wire_dtype)
    message = str(raised.value)
    assert all(name in message for name in ("torch.bfloat16", "torch.float16", "torch.int8"))
    assert repr(wire_dtype) in message


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_block_with_a_non_finite_value_comes_back_as_nans_and_only_that_block(
    bad: float,
) -> None:
    x = torch.randn(2 * INT8_BLOCK)
    x[5] = bad
    carried: list[Tensor] = []
    restored = restore_tensor(cast_tensor(x, torch.int8, carried), carried)
    assert bool(restored[:INT8_BLOCK].isnan().all())  # loud, never a plausible wrong value
    _assert_within_half_a_step(restored[INT8_BLOCK:], x[INT8_BLOCK:])
