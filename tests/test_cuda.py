"""What RemoteModule promises on CUDA, against a real RPC group, on a module placed on
``cuda:0``.

CPU tensors in args and kwargs reach the owner on its device; results of every shape come back
on CPU (no device map is set); scripted calls, ``_async`` twins, distributed autograd with
``DistributedOptimizer``, ``train``/``eval`` and remote checkpoints work on a CUDA owner.

This process is ``worker0``; every module lives on ``worker1``. Skipped without a CUDA device.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import Tensor, nn
from torch.distributed.optim import DistributedOptimizer

from remote_module import RemoteModule
from tests.support import runtime_helpers as helpers
from tests.support import wire_helpers
from tests.support.interfaces import LinearInterface, ScaledLinear, ShapesInterface
from tests.support.rpc_group import RPC_TIMEOUT_S

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.rpc_group(2),  # see tests/conftest.py
]

OWNER = "worker1"
DEVICE = "cuda:0"
DEVICE_TYPE = torch.device(DEVICE).type
LR = 0.1


@pytest.fixture
def x() -> Tensor:
    """Overrides the shared ``x``: values of both signs."""
    return torch.linspace(-1.0, 1.0, 8).reshape(2, 4)


def make(module_cls: Any, interface: Any = None, args: tuple[Any, ...] = ()) -> Any:
    """A RemoteModule on ``worker1/cuda:0`` (typed ``Any``: its methods are generated)."""
    return RemoteModule(
        f"{OWNER}/{DEVICE}",
        module_cls,
        args=args,
        module_interface_cls=interface,
        timeout=RPC_TIMEOUT_S,
    )


def owner_devices(rm: RemoteModule) -> list[str]:
    """The device type of each entry of the owner's state dict."""
    return list(on_owner(helpers.owner_state_devices, rm).values())


def on_owner(fn: Any, rm: RemoteModule) -> Any:
    return rpc.rpc_sync(OWNER, fn, (rm.module_rref,), timeout=RPC_TIMEOUT_S)


def cpu_copy(rm: RemoteModule) -> ScaledLinear:
    """A local ScaledLinear with the owner's weights, which must arrive on CPU."""
    state = rm.remote_state_dict()
    assert {value.device.type for value in state.values()} == {"cpu"}
    local = ScaledLinear()
    local.load_state_dict(state)
    return local


class Parent(nn.Module):
    """Holds a RemoteModule as a submodule: scripted, its calls may leave defaults out."""

    def __init__(self, remote: Any) -> None:
        super().__init__()
        self.remote = remote

    def forward(self, x: Tensor) -> tuple[Tensor, str]:
        return self.remote.forward(x), self.remote.describe()


def assert_all_on_cpu(value: Any, count: int) -> None:
    found = wire_helpers.tensors_in(value)
    assert len(found) == count
    assert [t.device.type for t in found] == ["cpu"] * count


def test_scripted_calls_through_the_interface(x: Tensor) -> None:
    rm = make(ScaledLinear, LinearInterface)
    assert owner_devices(rm) == [DEVICE_TYPE] * 2
    scripted = torch.jit.script(rm)

    # An interface type has no defaults in TorchScript: every argument is given, by position
    # or by keyword; defaults are used through a scripted parent that holds the RemoteModule.
    @torch.jit.script
    def run(module: LinearInterface, x: Tensor) -> tuple[Tensor, Tensor, float, str]:
        return (
            module.forward(x, 2.0),
            module.forward(x, scale=0.5),
            module.weight_sum(),
            module.describe(prefix="v", times=5),
        )

    positional, keyword, weight_sum, text = run(scripted, x)
    default, default_text = torch.jit.script(Parent(rm))(x)
    assert_all_on_cpu([positional, keyword, default], 3)
    local = cpu_copy(rm)
    with torch.no_grad():
        torch.testing.assert_close(positional, local(x, 2.0))
        torch.testing.assert_close(keyword, local(x, 0.5))
        torch.testing.assert_close(default, local(x))
        torch.testing.assert_close(scripted(x, 3.0), local(x, 3.0))
    assert weight_sum == pytest.approx(local.weight_sum(), abs=1e-4)
    assert (text, default_text) == ("v5", "w2")


def test_async_twins_return_on_cpu(x: Tensor) -> None:
    rm = make(ScaledLinear, LinearInterface)
    local = cpu_copy(rm)
    plain = rm.forward_async(x).wait()
    scaled = rm.forward_async(x, scale=2.0).wait()
    assert_all_on_cpu([plain, scaled], 2)
    with torch.no_grad():
        torch.testing.assert_close(plain, local(x))
        torch.testing.assert_close(scaled, local(x, 2.0))
    assert rm.weight_sum_async().wait() == pytest.approx(local.weight_sum(), abs=1e-4)
    assert rm.describe_async(times=4).wait() == "w4"


def test_nested_async_results_come_back_on_cpu(x: Tensor) -> None:
    shapes = make(helpers.ShapesModule, ShapesInterface)
    result = shapes.forward_async(x, x + 1, [x, 2 * x], {"a": x, "b": -x}).wait()
    assert_all_on_cpu(result, 5)
    total, many, named = result
    torch.testing.assert_close(total, 2 * x + 1)
    torch.testing.assert_close(list(many), [2 * x, 4 * x])
    torch.testing.assert_close(dict(named), {"a": x + 1, "b": 1 - x})
    first, second = shapes.pair_async(x).wait()
    assert_all_on_cpu(first, 1)
    torch.testing.assert_close(first, 3 * x)
    assert second == 7

    nested = make(helpers.Nested).forward_async(x).wait()
    assert_all_on_cpu(nested, 6)
    torch.testing.assert_close(nested["tuple"][1], x + 1)
    torch.testing.assert_close(nested["list"][1][0], 2 * x)


@pytest.mark.parametrize(
    ("module_cls", "interface", "prefix", "out"),
    [(nn.Linear, None, "", 2), (ScaledLinear, LinearInterface, "linear.", 4)],
    ids=["plain", "interface"],
)
def test_distributed_autograd_and_optimizer_on_cuda(
    module_cls: Any, interface: Any, prefix: str, out: int, x: Tensor
) -> None:
    args = (4, out) if interface is None else ()
    rm = make(module_cls, interface, args)
    params = rm.remote_parameters()
    assert len(params) == 2
    assert {p.owner_name() for p in params} == {OWNER}
    before = rm.remote_state_dict()
    optimizer = DistributedOptimizer(torch.optim.SGD, params, lr=LR)
    with dist_autograd.context() as context_id:
        loss = rm(x).sum()
        assert loss.device.type == "cpu"
        dist_autograd.backward(context_id, [loss])
        optimizer.step(context_id)
    after = rm.remote_state_dict()
    assert owner_devices(rm) == [DEVICE_TYPE] * 2
    # loss = sum(x W^T + b): dW = ones(out, 1) @ x.sum(0), db = batch size
    weight_grad = torch.ones(out, 1) @ x.sum(0, keepdim=True)
    bias_grad = torch.full((out,), float(x.shape[0]))
    weight, bias = prefix + "weight", prefix + "bias"
    torch.testing.assert_close(after[weight], before[weight] - LR * weight_grad)
    torch.testing.assert_close(after[bias], before[bias] - LR * bias_grad)


@pytest.mark.parametrize("interface", [None, LinearInterface], ids=["plain", "interface"])
def test_train_and_eval_return_self_on_cuda(interface: Any) -> None:
    rm = make(ScaledLinear, interface)
    assert on_owner(helpers.training_flag, rm) is True
    assert rm.train(False) is rm
    assert rm.training is False
    assert on_owner(helpers.training_flag, rm) is False
    assert rm.train() is rm
    assert on_owner(helpers.training_flag, rm) is True
    assert rm.eval() is rm
    assert rm.training is False
    assert on_owner(helpers.training_flag, rm) is False


@pytest.mark.parametrize("interface", [None, LinearInterface], ids=["plain", "interface"])
def test_load_cpu_state_dict_into_cuda_owner(interface: Any, x: Tensor) -> None:
    rm = make(ScaledLinear, interface)
    weight = torch.arange(16, dtype=torch.float32).reshape(4, 4) / 10
    bias = torch.full((4,), 0.5)
    state = {"linear.weight": weight, "linear.bias": bias}
    missing, unexpected = rm.load_remote_state_dict(state, strict=True)
    assert (list(missing), list(unexpected)) == ([], [])
    assert owner_devices(rm) == [DEVICE_TYPE] * 2
    result = rm(x)
    assert result.device.type == "cpu"
    torch.testing.assert_close(result, x @ weight.T + bias)
    back = rm.remote_state_dict()
    torch.testing.assert_close(dict(back), state)


def test_keyword_only_cpu_tensors_arrive_on_cuda(x: Tensor) -> None:
    report = make(helpers.AnyDeviceReport)
    assert report(named=x) == [DEVICE_TYPE]
    assert report(first=x, rest={"a": [x, (x,)]}) == [DEVICE_TYPE] * 3
    assert report.forward_async(only=x).wait() == [DEVICE_TYPE]
    assert report(x, label="text", count=3) == [DEVICE_TYPE]
    assert x.device.type == "cpu"


@pytest.mark.parametrize("wire_dtype", [torch.bfloat16, torch.int8])
def test_a_wire_dtype_with_gradients_on_cuda(wire_dtype: torch.dtype) -> None:
    """Codes (or casts) and the gradient's path, on a CUDA owner: values back within their
    bound, gradients against the exact ones."""
    torch.manual_seed(0)
    x = torch.randn(64, 32, requires_grad=True)
    rm = RemoteModule(f"{OWNER}/{DEVICE}", nn.Linear, args=(32, 16), wire_dtype=wire_dtype)
    local = nn.Linear(32, 16)
    local.load_state_dict(rm.remote_state_dict())
    (local(x) * 2).sum().backward()
    assert x.grad is not None
    with dist_autograd.context() as context_id:
        result = rm(x)
        dist_autograd.backward(context_id, [(result * 2).sum()])
        grad = dist_autograd.get_gradients(context_id)[x]
    assert result.device.type == "cpu"
    torch.testing.assert_close(result, local(x), rtol=0.05, atol=0.05)
    torch.testing.assert_close(grad, x.grad, rtol=0.02, atol=0.02)
