"""``torch.export.export`` of a model that holds RemoteModules (API.md, "Compiling and
exporting"): one ``torch.ops.remote_module`` op per remote call, named by the key of its
RemoteModule (the owner's worker name and the module's id there); the program equals eager,
runs after ``torch.export.save``/``load`` in another process of the group and after a planned
failover, and trains as eager does under distributed autograd."""

from __future__ import annotations

import gc
import re
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch.distributed.optim import DistributedOptimizer

from remote_module import RemoteModule
from tests.support.compile_helpers import (
    Affine,
    AffineProtocol,
    Hybrid,
    graph_filed,
    run_saved_program,
)
from tests.support.interfaces import LinearInterface, ScaledLinear

pytestmark = pytest.mark.rpc_group(3)

X = torch.linspace(-1, 1, 8).reshape(2, 4)
FAMILIES = {
    "plain": lambda **options: RemoteModule("worker1/cpu", Affine, **options),
    "protocol": lambda **options: RemoteModule(
        "worker1/cpu", Affine, module_interface_cls=AffineProtocol, **options
    ),
    "scripted": lambda **options: RemoteModule(
        "worker1/cpu", ScaledLinear, module_interface_cls=LinearInterface, **options
    ),
}


def _remote_calls(program: torch.export.ExportedProgram) -> list[Any]:
    return [
        node
        for node in program.graph.nodes
        if node.op == "call_function" and str(node.target).startswith("remote_module.")
    ]


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("strict", [False, True])
def test_one_op_per_remote_call_named_by_its_key(family: str, strict: bool) -> None:
    model = Hybrid(FAMILIES[family](), calls=2)
    program = torch.export.export(model, (X,), strict=strict)
    calls = _remote_calls(program)
    assert [str(node.target) for node in calls] == ["remote_module.call.default"] * 2
    key = calls[0].args[0]
    assert re.fullmatch(r"worker1/\d+", key), key
    assert calls[1].args[0] == key  # one RemoteModule, one key
    torch.testing.assert_close(program.module()(X), model(X))
    torch.testing.assert_close(program.module()(X * 3), model(X * 3))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_saved_program_runs_in_another_process_of_the_group(family: str, tmp_path: Path) -> None:
    model = Hybrid(FAMILIES[family]())
    path = tmp_path / "hybrid.pt2"
    torch.export.save(torch.export.export(model, (X,)), str(path))
    # worker2 never saw this RemoteModule: it loads the program, resolves the key with the
    # owner, and runs it there.
    got = rpc.rpc_sync("worker2", run_saved_program, (str(path), X))
    torch.testing.assert_close(got, model(X))


def test_a_program_runs_after_a_planned_failover(tmp_path: Path) -> None:
    rm = FAMILIES["protocol"](standby=["worker2/cpu"])
    model = Hybrid(rm)
    program = torch.export.export(model, (X,))
    expected = model(X)
    rm.checkpoint()
    assert rm.fail_over() == "worker2"
    torch.testing.assert_close(program.module()(X), expected)  # the same key, the new owner
    assert rm.on == "worker2"


def test_a_program_trains_as_eager_under_distributed_autograd() -> None:
    first, second = FAMILIES["plain"](), FAMILIES["plain"]()
    second.load_remote_state_dict(first.remote_state_dict())
    eager, exported = Hybrid(first), Hybrid(second)
    exported.local.load_state_dict(eager.local.state_dict())
    program = torch.export.export(exported, (X,)).module()
    local = dict(program.named_parameters())
    for model, forward, params in (
        (eager, eager, list(eager.local.parameters())),
        (exported, program, list(local.values())),
    ):
        optimizer = DistributedOptimizer(
            torch.optim.SGD, [*model.remote.remote_parameters(), *map(rpc.RRef, params)], lr=0.1
        )
        for _ in range(2):
            with dist_autograd.context() as context:
                dist_autograd.backward(context, [forward(X).pow(2).sum()])
                optimizer.step(context)
    expected, got = first.remote_state_dict(), second.remote_state_dict()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(local["local.weight"], eager.local.weight, rtol=1e-5, atol=1e-6)


def test_a_key_whose_module_is_gone_is_named(tmp_path: Path) -> None:
    model = Hybrid(FAMILIES["plain"]())
    program = torch.export.export(model, (X,))
    (call,) = _remote_calls(program)
    number = int(call.args[0].rpartition("/")[2])
    path = tmp_path / "gone.pt2"
    torch.export.save(program, str(path))
    del model, program, call  # the module's last RRef: its owner frees it
    gc.collect()
    deadline = time.monotonic() + 30  # the deletion reaches the owner asynchronously
    while rpc.rpc_sync("worker1", graph_filed, (number,)) and time.monotonic() < deadline:
        time.sleep(0.02)
    with pytest.raises(RuntimeError, match=rf"no RemoteModule has id {number} on this worker"):
        rpc.rpc_sync("worker2", run_saved_program, (str(path), X))
