"""``torch.compile`` of a model that holds a RemoteModule (not scripted): the same results as
eager, one clean graph break at each remote call, no warning from torch's compiler about our
code, and gradients through distributed autograd to the remote parameters."""

from __future__ import annotations

import logging
import re
import warnings
from typing import Any

import pytest
import torch
import torch.distributed.autograd as dist_autograd
from torch.distributed.optim import DistributedOptimizer

from remote_module import RemoteModule
from tests.support.compile_helpers import Affine, AffineProtocol, Hybrid
from tests.support.interfaces import LinearInterface, ScaledLinear

pytestmark = pytest.mark.rpc_group(2)

FAMILIES = {
    "plain": lambda: RemoteModule("worker1/cpu", Affine),
    "protocol": lambda: RemoteModule("worker1/cpu", Affine, module_interface_cls=AffineProtocol),
    "scripted": lambda: RemoteModule(
        "worker1/cpu", ScaledLinear, module_interface_cls=LinearInterface
    ),
}


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("calls", [1, 2])  # Hybrid makes one or two remote calls
def test_one_clean_graph_break_at_each_remote_call(
    family: str, calls: int, caplog: pytest.LogCaptureFixture
) -> None:
    model = Hybrid(FAMILIES[family](), calls)
    x = torch.linspace(-1, 1, 8).reshape(2, 4)
    expected = model(x)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        explanation = torch._dynamo.explain(model)(x)
        compiled = torch.compile(model)
        first, again = compiled(x), compiled(x)
    torch.testing.assert_close(first, expected)
    torch.testing.assert_close(again, expected)
    assert explanation.graph_break_count == calls, explanation.break_reasons
    for reason in explanation.break_reasons:
        # torch.compile stops at the call into our runtime, not inside RPC internals
        frames = [frame.filename for frame in reason.user_stack]
        assert frames[-1].endswith("remote_module/runtime/caller/calls.py"), frames
        # (torch 2.6 and 2.7 word it "torch._dynamo.disable()")
        assert re.search(r"torch\.(compiler|_dynamo)\.disable", reason.reason), reason.reason
    compiler = [w for w in caught if "torch/_dynamo" in w.filename or "dynamo" in str(w.message)]
    assert compiler == [], [str(w.message) for w in compiler]
    dynamo_logs = [r.getMessage() for r in caplog.records if r.name.startswith("torch._")]
    assert dynamo_logs == [], dynamo_logs


@pytest.mark.parametrize("family", ["plain", "protocol"])
def test_gradients_reach_the_remote_parameters(family: str) -> None:
    eager_rm, compiled_rm = FAMILIES[family](), FAMILIES[family]()
    compiled_rm.load_remote_state_dict(eager_rm.remote_state_dict())
    eager, compiled = Hybrid(eager_rm), Hybrid(compiled_rm)
    compiled.local.load_state_dict(eager.local.state_dict())
    x = torch.linspace(-1, 1, 8).reshape(2, 4)
    run = torch.compile(compiled)
    for model, forward in ((eager, eager), (compiled, run)):
        optimizer = DistributedOptimizer(
            torch.optim.SGD,
            [
                *model.remote.remote_parameters(),
                *map(torch.distributed.rpc.RRef, model.local.parameters()),
            ],
            lr=0.5,
        )
        with dist_autograd.context() as context:
            dist_autograd.backward(context, [forward(x).sum()])
            optimizer.step(context)
    before = FAMILIES[family]().remote_state_dict()  # a fresh module: what an update moves from
    after_eager, after_compiled = eager_rm.remote_state_dict(), compiled_rm.remote_state_dict()
    for name in after_eager:
        torch.testing.assert_close(after_compiled[name], after_eager[name])
    assert before.keys() == after_eager.keys()
    torch.testing.assert_close(compiled.local.weight, eager.local.weight)
