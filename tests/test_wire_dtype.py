"""``RemoteModule(..., wire_dtype=torch.bfloat16)``: floating-point tensors in arguments and
results cross the wire in that dtype and are cast back to their own dtype on arrival, in
scripted and eager calls alike; other tensors are untouched; gradients flow through the casts
under distributed autograd. Against a real three-worker RPC group."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import Tensor, nn

from remote_module import RemoteModule
from remote_module.runtime import owner, values
from tests.support import wire_helpers
from tests.support.wire_helpers import Precision, PrecisionInterface, PrecisionProtocol

pytestmark = pytest.mark.rpc_group(3)

INTERFACES = [PrecisionInterface, PrecisionProtocol]
SEEN = [4, 8, 8, 2]  # element sizes: float32, int64, float64, float16


@pytest.fixture
def inputs() -> tuple[Tensor, Tensor, list[Tensor]]:
    x = torch.linspace(-1.0, 1.0, 12).reshape(3, 4)
    return x, torch.arange(3), [torch.tensor([0.1, 0.2], dtype=torch.float64), torch.ones(2).half()]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    return wire_helpers.spy_on_sends(monkeypatch)


def _check_result(got: Any, inputs: tuple[Tensor, Tensor, list[Tensor]]) -> None:
    x, ids, extra = inputs
    scaled, incremented, doubled, seen = got
    assert scaled.dtype == torch.float32 and incremented.dtype == torch.int64
    torch.testing.assert_close(scaled, x * 1.5, rtol=1e-2, atol=1e-2)  # bfloat16 on the wire
    assert torch.equal(incremented, ids + 1)
    assert [item.dtype for item in doubled] == [torch.float64, torch.float64]
    torch.testing.assert_close(doubled[0], extra[0], rtol=1e-2, atol=1e-2)
    assert seen == SEEN  # the module got every tensor back in its own dtype


@pytest.mark.parametrize("interface", INTERFACES, ids=["script", "protocol"])
def test_values_and_dtypes_with_an_interface(
    interface: Any, inputs: tuple[Tensor, Tensor, list[Tensor]], sent: list[tuple[Any, ...]]
) -> None:
    rm = RemoteModule(
        "worker1/cpu", Precision, module_interface_cls=interface, wire_dtype=torch.bfloat16
    )
    sent.clear()
    _check_result(rm(*inputs), inputs)
    _check_result(rm.forward_async(*inputs).wait(), inputs)
    _check_result(rm.forward(*inputs), inputs)
    floating = [
        t
        for args in sent
        for t in wire_helpers.tensors_in(args)
        if t.numel() and t.is_floating_point()
    ]
    assert floating and {t.dtype for t in floating} == {torch.bfloat16}
    integers = [
        t for args in sent for t in wire_helpers.tensors_in(args) if not t.is_floating_point()
    ]
    assert integers and {t.dtype for t in integers} == {torch.int64}


def test_values_and_dtypes_without_an_interface(
    inputs: tuple[Tensor, Tensor, list[Tensor]], sent: list[tuple[Any, ...]]
) -> None:
    x, ids, extra = inputs
    rm = RemoteModule("worker1/cpu", wire_helpers.PrecisionAnything, wire_dtype=torch.bfloat16)
    sent.clear()
    for got in (rm(x, ids, extra=extra), rm.forward_async(x, ids, extra=extra).wait()):
        values, seen = got
        assert seen == SEEN
        assert values["x"].dtype == torch.float32 and values["ids"].dtype == torch.int64
        torch.testing.assert_close(values["x"], x * 1.5, rtol=1e-2, atol=1e-2)
        assert [item.dtype for item in values["extra"]] == [torch.float64] * 2
    floating = [
        t
        for args in sent
        for t in wire_helpers.tensors_in(args)
        if t.numel() and t.is_floating_point()
    ]
    assert floating and {t.dtype for t in floating} == {torch.bfloat16}


def test_the_reply_crosses_in_the_wire_dtype(inputs: tuple[Tensor, Tensor, list[Tensor]]) -> None:
    rm = RemoteModule(
        "worker1/cpu", Precision, module_interface_cls=PrecisionProtocol, wire_dtype=torch.float16
    )
    rm(*inputs)  # the first call files the module's key
    generated = rm._rm_record.generated.__dict__
    carried: list[Tensor] = []
    wired = values.cast_to_wire(inputs, torch.float16, carried)
    # What a Python call of it sends: the owner's wire call around the remote function.
    function = (generated["__name__"], "_remote_forward")
    call = owner.Call(function, rm._rm_record.reference, "cpu", False, False, torch.float16, None)
    reply = rpc.rpc_sync("worker1", owner.run, (call, carried, *wired))
    (scaled, incremented, doubled, _), carried = reply
    assert scaled.dtype == torch.float16 and incremented.dtype == torch.int64
    assert [item.dtype for item in doubled] == [torch.float16] * 2
    assert [item.dtype for item in carried] == [torch.float32, torch.float64, torch.float64]


def test_scripted_calls_cast_too(inputs: tuple[Tensor, Tensor, list[Tensor]]) -> None:
    rm = RemoteModule(
        "worker1/cpu", Precision, module_interface_cls=PrecisionInterface, wire_dtype=torch.bfloat16
    )
    scripted = torch.jit.script(rm)
    _check_result(scripted(*inputs), inputs)
    _check_result(scripted.forward_async(*inputs).wait(), inputs)


@pytest.mark.parametrize("interface", [*INTERFACES, None], ids=["script", "protocol", "none"])
def test_gradients_flow_through_the_casts(
    interface: Any, inputs: tuple[Tensor, Tensor, list[Tensor]]
) -> None:
    x = inputs[0].clone().requires_grad_()
    module_cls = Precision if interface is not None else wire_helpers.PrecisionAnything
    grads = []
    for wire_dtype in (None, torch.bfloat16):
        rm = RemoteModule(
            "worker1/cpu", module_cls, module_interface_cls=interface, wire_dtype=wire_dtype
        )
        with dist_autograd.context() as context_id:
            result = rm(x, inputs[1], [])
            scaled = result[0] if interface is not None else result[0]["x"]
            dist_autograd.backward(context_id, [scaled.sum()])
            grads.append(
                rpc.rpc_sync("worker1", wire_helpers.scale_grad, (rm.get_module_rref(), context_id))
            )
    torch.testing.assert_close(grads[1], grads[0], rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(grads[0], x.detach().sum())


@pytest.mark.parametrize("wire_dtype", [torch.float32, torch.float64, "bfloat16", torch.bool])
def test_a_bad_wire_dtype_is_a_value_error(wire_dtype: Any) -> None:
    with pytest.raises(
        ValueError, match=r"wire_dtype must be None, torch\.bfloat16, torch\.float16 or torch\.int8"
    ):
        RemoteModule("worker1/cpu", nn.Linear, args=(2, 2), wire_dtype=wire_dtype)
