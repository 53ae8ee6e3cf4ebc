"""``torch.compile(model, fullgraph=True)`` of a model that holds RemoteModules (API.md,
"Compiling and exporting"): each call of a generated method is one op of one graph, with no
break; results equal eager ones for every family, every method and nested values; training
under distributed autograd with ``DistributedOptimizer`` matches eager step for step, compiled
and eager calls may mix in one context, and nothing is kept after a context ends."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import Tensor, nn
from torch.distributed.optim import DistributedOptimizer

from remote_module import RemoteModule
from remote_module.runtime.caller import recorded
from tests.support.compile_helpers import (
    Affine,
    AffineProtocol,
    Hybrid,
    Labelled,
    MetaShy,
    Nested,
    NestedInterface,
    NestedProtocol,
    labelled_fake,
)
from tests.support.interfaces import LinearInterface, ScaledLinear

pytestmark = pytest.mark.rpc_group(2)

FAMILIES: dict[str, Callable[[], RemoteModule]] = {
    "plain": lambda: RemoteModule("worker1/cpu", Affine),
    "protocol": lambda: RemoteModule("worker1/cpu", Affine, module_interface_cls=AffineProtocol),
    "scripted": lambda: RemoteModule(
        "worker1/cpu", ScaledLinear, module_interface_cls=LinearInterface
    ),
}
X = torch.linspace(-1, 1, 8).reshape(2, 4)


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("calls", [1, 2])  # Hybrid makes one or two remote calls
def test_one_graph_and_no_break(family: str, calls: int, caplog: pytest.LogCaptureFixture) -> None:
    model = Hybrid(FAMILIES[family](), calls)
    expected = model(X)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        explanation = torch._dynamo.explain(model)(X)
        compiled = torch.compile(model, fullgraph=True)
        first, again = compiled(X), compiled(X * 2)
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0)
    ops = [node for graph in explanation.graphs for node in graph.graph.nodes]
    called = [node for node in ops if "remote_module" in str(node.target)]
    assert len(called) == calls, [str(node.target) for node in ops]
    torch.testing.assert_close(first, expected)
    torch.testing.assert_close(again, model(X * 2))
    ours = [w for w in caught if "remote_module" in w.filename or "RemoteModule" in str(w.message)]
    assert ours == [], [str(w.message) for w in ours]
    logged = [r.getMessage() for r in caplog.records if "remote_module" in r.getMessage()]
    assert logged == [], logged


@pytest.mark.parametrize("interface", [NestedInterface, NestedProtocol, None])
def test_every_method_and_nested_values(interface: Any) -> None:
    rm = RemoteModule("worker1/cpu", Nested, module_interface_cls=interface)
    pair = (torch.ones(2, 4), torch.full((2, 4), 0.5))
    table = {"k": torch.arange(3.0)}

    def use(x: Tensor) -> Any:
        parts = rm(x, pair, table, scale=2.0, tag="t", flip=True, maybe=x)
        if interface is None:  # without an interface, forward is the only method
            return parts
        low, high = rm.project(x.relu())
        return parts, low * high.sum(), rm.norm()

    expected = use(X)
    explanation = torch._dynamo.explain(use)(X)
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0)
    got = torch.compile(use, fullgraph=True)(X)
    torch.testing.assert_close(got, expected)
    parts = got if interface is None else got[0]
    assert type(parts).__name__ == "Parts" and list(parts.named) == ["t", "k"]


def test_dynamic_shapes_stay_symbolic() -> None:
    model = Hybrid(FAMILIES["plain"]())
    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    for rows in (2, 3, 5):
        x = torch.linspace(-1, 1, rows * 4).reshape(rows, 4)
        torch.testing.assert_close(compiled(x), model(x))


def _train(pairs: list[tuple[Hybrid, Callable[[Tensor], Tensor]]], steps: int) -> None:
    for _ in range(steps):
        for model, forward in pairs:
            optimizer = DistributedOptimizer(
                torch.optim.SGD,
                [*model.remote.remote_parameters(), *map(rpc.RRef, model.local.parameters())],
                lr=0.1,
            )
            with dist_autograd.context() as context:
                loss = forward(X).pow(2).sum()
                dist_autograd.backward(context, [loss])
                optimizer.step(context)


def _twins(family: str, calls: int = 2) -> tuple[Hybrid, Hybrid]:
    """Two equal hybrids over two equal remote modules."""
    first, second = FAMILIES[family](), FAMILIES[family]()
    second.load_remote_state_dict(first.remote_state_dict())
    eager, compiled = Hybrid(first, calls), Hybrid(second, calls)
    compiled.local.load_state_dict(eager.local.state_dict())
    return eager, compiled


def _assert_same(eager: Hybrid, compiled: Hybrid) -> None:
    expected, got = eager.remote.remote_state_dict(), compiled.remote.remote_state_dict()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(compiled.local.weight, eager.local.weight, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_training_matches_eager_step_for_step(family: str) -> None:
    eager, compiled = _twins(family)
    before = eager.remote.remote_state_dict()
    _train([(eager, eager), (compiled, torch.compile(compiled, fullgraph=True))], steps=3)
    _assert_same(eager, compiled)
    moved = eager.remote.remote_state_dict()
    assert any(not torch.equal(moved[name], before[name]) for name in before)


def test_inductor_and_aot_eager_both_match() -> None:
    eager, compiled = _twins("plain")
    run = torch.compile(compiled, backend="aot_eager", fullgraph=True)
    _train([(eager, eager), (compiled, run)], steps=2)
    _assert_same(eager, compiled)


def test_compiled_and_eager_calls_mix_in_one_context() -> None:
    eager, compiled = _twins("protocol", calls=1)
    run = torch.compile(compiled, fullgraph=True)

    def both(x: Tensor) -> Tensor:
        return run(x) + compiled(x * 0.5)  # the same RemoteModule, compiled and eager

    def both_eager(x: Tensor) -> Tensor:
        return eager(x) + eager(x * 0.5)

    _train([(eager, both_eager), (compiled, both)], steps=2)
    _assert_same(eager, compiled)


def test_nothing_is_kept_after_a_context_without_backward() -> None:
    _, compiled = _twins("plain", calls=1)
    run = torch.compile(compiled, fullgraph=True)
    with dist_autograd.context():
        run(X)  # recorded, never backward
    assert len(recorded._recordings) == 1
    with dist_autograd.context() as context:  # the next recording drops the ended one
        dist_autograd.backward(context, [run(X).sum()])
    assert recorded._recordings == {}


def test_a_result_the_shapes_of_which_only_the_owner_knows() -> None:
    rm = RemoteModule("worker1/cpu", MetaShy)
    received = RemoteModule.init_from_module_rref("worker1/cpu", rm.get_module_rref())
    for remote in (rm, received):  # no meta twin here: the owner's fake run answers
        torch._dynamo.reset()
        compiled = torch.compile(lambda x, remote=remote: remote(x).relu(), fullgraph=True)
        torch.testing.assert_close(compiled(X), remote(X).relu())


def test_fake_gives_the_shapes_and_without_it_the_error_names_it() -> None:
    with_fake = RemoteModule("worker1/cpu", Labelled, fake=labelled_fake)
    scores, label = torch.compile(lambda x: with_fake(x))(X)  # the int: a graph break
    expected = with_fake(X)
    torch.testing.assert_close(scores, expected[0])
    assert label == expected[1] and type(label) is int
    without = RemoteModule("worker1/cpu", Labelled)
    with pytest.raises(Exception, match=r"RemoteModule\.forward: tracing needs .*fake=") as raised:
        torch.compile(lambda x: without(x), fullgraph=True)(X)
    assert "RemoteModule(..., fake=fn)" in str(raised.value)
    with pytest.raises(ValueError, match="fake must be a callable"):
        RemoteModule("worker1/cpu", Labelled, fake="shapes")


def test_an_async_call_in_a_compiled_region_is_a_graph_break() -> None:
    rm = FAMILIES["protocol"]()

    def use(x: Tensor) -> Tensor:
        return rm.forward_async(x * 2).wait() + 1

    explanation = torch._dynamo.explain(use)(X)
    assert explanation.graph_break_count >= 1
    torch.testing.assert_close(torch.compile(use)(X), use(X))


def test_wire_dtype_and_timeout_ride_along() -> None:
    rm = RemoteModule("worker1/cpu", Affine, wire_dtype=torch.bfloat16, timeout=30.0)
    model = Hybrid(rm)
    torch.testing.assert_close(
        torch.compile(model, fullgraph=True)(X), model(X), rtol=2e-2, atol=2e-2
    )


def test_a_remote_module_is_a_leaf_to_torch_and_refuses_user_walks() -> None:
    model = Hybrid(FAMILIES["plain"]())
    torch.compile(model, fullgraph=True)(X)  # Dynamo walked it (and export does: test_export)
    with pytest.raises(ValueError, match="Method ``named_children`` not supported"):
        list(model.remote.named_children())
    with pytest.raises(ValueError, match="Please use ``remote_parameters`` instead"):
        model.remote.parameters()
    assert [name for name, _ in model.named_parameters()] == ["local.weight", "local.bias"]


def test_a_scripted_remote_module_still_compiles_and_exports() -> None:
    rm = FAMILIES["scripted"]()
    scripted = torch.jit.script(rm)  # torch scripts a twin: rm keeps its own methods
    torch.testing.assert_close(scripted(X), rm(X))
    model = Hybrid(rm)
    explanation = torch._dynamo.explain(model)(X)
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0)
    torch.testing.assert_close(torch.compile(model, fullgraph=True)(X), model(X))
    torch.testing.assert_close(torch.export.export(model, (X,)).module()(X), model(X))


@pytest.mark.parametrize("family", ["scripted", "protocol"])
def test_numbers_that_change_from_call_to_call(family: str) -> None:
    rm = (
        FAMILIES["scripted"]()
        if family == "scripted"
        else RemoteModule("worker1/cpu", Nested, module_interface_cls=NestedProtocol)
    )

    def use(x: Tensor, scale: float) -> Any:
        if family == "scripted":
            return rm(x, scale)
        return rm(x, (x, x), {}, scale=scale).total

    compiled = torch.compile(use, fullgraph=True)
    for scale in (0.5, 1.5, 2.5, 3.5):  # torch may make the number symbolic: still one op
        torch.testing.assert_close(compiled(X, scale), use(X, scale))


class RemoteFirst(nn.Module):
    """The parameter-server shape: the remote module is the first layer, so no argument of
    its call wants a gradient; only its owner's parameters (and the local layer's) do."""

    def __init__(self, remote: nn.Module) -> None:
        super().__init__()
        self.remote = remote
        self.local = nn.Linear(remote(X).shape[-1], 4)

    def forward(self, x: Tensor) -> Tensor:
        return self.local(self.remote(x).relu()).tanh()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_remote_first_layer_trains_as_eager(family: str) -> None:
    first, second = FAMILIES[family](), FAMILIES[family]()
    second.load_remote_state_dict(first.remote_state_dict())
    eager, compiled = RemoteFirst(first), RemoteFirst(second)
    compiled.local.load_state_dict(eager.local.state_dict())
    before = first.remote_state_dict()
    _train([(eager, eager), (compiled, torch.compile(compiled, fullgraph=True))], steps=2)
    _assert_same(eager, compiled)  # type: ignore[arg-type]
    moved = first.remote_state_dict()
    assert any(not torch.equal(moved[name], before[name]) for name in before)


@pytest.mark.parametrize("strict", [False, True])
def test_a_remote_first_layer_exports(strict: bool) -> None:
    model = RemoteFirst(FAMILIES["plain"]())
    program = torch.export.export(model, (X,), strict=strict)
    calls = [node for node in program.graph.nodes if "remote_module" in str(node.target)]
    assert [str(node.target) for node in calls] == ["remote_module.call.default"]
    torch.testing.assert_close(program.module()(X), model(X))
