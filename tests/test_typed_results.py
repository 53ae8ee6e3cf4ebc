"""Typed remote classes and results of the declared type, across a real RPC group: the
generated ``RemoteScorerInterface`` / ``RemoteScorerProtocol`` (``tests/scorer/generated``),
NamedTuple results alone and nested, from sync calls, ``rm(x)``, ``_async`` futures and
scripted models, and interfaces written as ``typing.Protocol``.

This process is ``worker0``; modules live on ``worker1``, receivers on ``worker2``.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch
import torch.distributed.rpc as rpc
from torch import Tensor

from remote_module import RemoteModule
from tests.scorer import remote
from tests.scorer.generated import RemoteScorerInterface, RemoteScorerProtocol
from tests.scorer.generated import scorer_interface as generated_interface
from tests.scorer.interfaces import ScorerInterface
from tests.scorer.model import Scored, Scorer, ScorerProtocol

INTERFACES = [ScorerInterface, ScorerProtocol]


pytestmark = pytest.mark.rpc_group(3)


@pytest.fixture
def x() -> Tensor:
    return torch.tensor([[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0], [0.0, 0.0, 0.0, 1.0]])


def _local(rm: RemoteModule) -> Scorer:
    local = Scorer()
    local.load_state_dict(rm.remote_state_dict())
    return local


def _assert_scored(got: Any, want: Scored) -> None:
    assert type(got) is Scored, type(got)
    torch.testing.assert_close(got.score, want.score)
    assert got.label == want.label


# --- Typed classes at run time ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "interface", "scriptable"),
    [(RemoteScorerInterface, ScorerInterface, True), (RemoteScorerProtocol, ScorerProtocol, False)],
    ids=["script", "protocol"],
)
def test_typed_class_is_the_remote_module_with_its_interface(
    typed: type[RemoteModule], interface: type, scriptable: bool, x: Tensor
) -> None:
    rm = typed("worker1/cpu", Scorer, timeout=30.0)
    assert isinstance(rm, RemoteModule)
    assert rm.is_scriptable is scriptable
    assert rm.timeout == 30.0
    assert rm._rm_record.generated.__dict__["_rm_module_interface_cls"] is interface
    plain = RemoteModule.init_from_module_rref(
        "worker1/cpu", rm.get_module_rref(), module_interface_cls=interface
    )
    assert [m.__name__ for m in rm.generated_methods] == [
        m.__name__ for m in plain.generated_methods
    ]
    _assert_scored(rm.forward(x), _local(rm).forward(x))


def test_typed_class_refuses_another_interface() -> None:
    with pytest.raises(ValueError, match="RemoteScorerInterface is bound to the interface"):
        RemoteScorerInterface("worker1/cpu", Scorer, module_interface_cls=ScorerProtocol)


@pytest.mark.parametrize("typed", [RemoteScorerInterface, RemoteScorerProtocol])
def test_init_from_module_rref_returns_the_typed_class(
    typed: type[RemoteModule], x: Tensor
) -> None:
    rm = typed("worker1/cpu", Scorer)
    again = typed.init_from_module_rref("worker1/cpu", rm.get_module_rref())
    assert type(again) is typed
    assert again.is_scriptable is rm.is_scriptable
    _assert_scored(again.forward(x), rm.forward(x))


@pytest.mark.parametrize("typed", [RemoteScorerInterface, RemoteScorerProtocol])
def test_a_typed_remote_module_travels_as_its_class(typed: type[RemoteModule], x: Tensor) -> None:
    rm = typed("worker1/cpu", Scorer)
    class_name, result_name, has_fields, result = rpc.rpc_sync(
        "worker2", remote.describe, (rm, x), timeout=60
    )
    assert (class_name, result_name, has_fields) == (typed.__name__, "Scored", True)
    _assert_scored(result, rm.forward(x))


def test_typed_class_scripts_like_its_remote_module(x: Tensor) -> None:
    rm = RemoteScorerInterface("worker1/cpu", Scorer)
    scripted = torch.jit.script(rm)
    got = scripted(x)
    assert got._fields == ("score", "label")
    torch.testing.assert_close(got.score, rm.forward(x).score)


# --- Results have the declared type ----------------------------------------------------------


@pytest.fixture(scope="module", params=INTERFACES, ids=["script", "protocol"])
def scorer(request: pytest.FixtureRequest, group: object) -> RemoteModule:
    return RemoteModule("worker1/cpu", Scorer, module_interface_cls=request.param)


def test_forward_gives_the_named_tuple(scorer: RemoteModule, x: Tensor) -> None:
    want = _local(scorer).forward(x, scale=2.0)
    _assert_scored(scorer.forward(x, scale=2.0), want)
    _assert_scored(scorer(x, 2.0), want)
    _assert_scored(scorer.forward_async(x, scale=2.0).wait(), want)
    assert scorer.forward(x).score.shape == (3,)


def test_named_tuples_nested_in_containers(scorer: RemoteModule, x: Tensor) -> None:
    local = _local(scorer)
    for got, want in zip(scorer.top(x, k=2), local.top(x, k=2), strict=True):
        _assert_scored(got, want)
    for got, want in zip(scorer.top_async(x).wait(), local.top(x), strict=True):
        _assert_scored(got, want)
    _assert_scored(scorer.best(x), local.best(x))
    assert scorer.best(x, threshold=1e9) is None
    assert scorer.best_async(x, 1e9).wait() is None
    table = scorer.table(x)
    assert list(table) == ["max"]
    _assert_scored(table["max"], local.table(x)["max"])
    scored, doubled = scorer.pair_async(x).wait()
    want_scored, want_doubled = local.pair(x)
    _assert_scored(scored, want_scored)
    torch.testing.assert_close(doubled, want_doubled)


def test_plain_results_are_untouched(scorer: RemoteModule) -> None:
    stats = scorer.stats()
    assert type(stats) is dict and set(stats) == {"weight_sum", "bias"}


def test_scripted_model_returning_the_remote_result_gives_a_named_tuple(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", Scorer, module_interface_cls=ScorerInterface)
    want = _local(rm).forward(x, scale=2.0)
    got = torch.jit.script(remote.ForwardsScores(rm))(x)
    # TorchScript's own rendering of a NamedTuple: a named tuple with the same fields.
    assert got._fields == ("score", "label")
    torch.testing.assert_close(got.score, want.score)
    assert got.label == want.label
    (top,) = torch.jit.script(remote.AwaitsScores(rm))(x)
    assert top._fields == ("score", "label")
    assert top.label == _local(rm).top(x, 1)[0].label


def test_methods_returning_plain_values_decode_nothing() -> None:
    """Decoding is generated only where a NamedTuple can be in the result: a method returning
    a tensor or a dict of floats costs exactly what it did without it."""
    source = inspect.getsource(generated_interface)
    stats = source[source.index("\ndef stats_async(") : source.index("\ndef top_async(")]
    assert "_rm_decode_" not in stats and ".then(" not in stats
    forward = source[source.index("\ndef forward_async(") : source.index("\ndef stats_async(")]
    assert "_rm_decode_" in forward


# --- Interfaces without TorchScript ----------------------------------------------------------


def test_protocol_module_is_not_scripted_on_the_owner(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", Scorer, module_interface_cls=ScorerProtocol)
    assert rm.is_scriptable is False
    assert rm._remote_module_type() == "Scorer"  # a plain module, not a RecursiveScriptModule
    assert [m.__name__ for m in rm.generated_methods] == [
        f"{name}{suffix}"
        for name in ("forward", "stats", "top", "best", "table", "pair")
        for suffix in ("_async", "")
    ]


def test_protocol_module_refuses_scripting_naming_the_interface() -> None:
    rm = RemoteModule("worker1/cpu", Scorer, module_interface_cls=ScorerProtocol)
    with pytest.raises(TypeError) as raised:
        torch.jit.script(rm)
    assert "tests.scorer.model.ScorerProtocol" in str(raised.value)
    assert "@torch.jit.interface" in str(raised.value)


def test_protocol_arguments_are_checked_on_the_caller(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", Scorer, module_interface_cls=ScorerProtocol)
    with pytest.raises(TypeError, match=r"RemoteModule.forward: argument 'scale' expected float"):
        rm.forward(x, scale="big")
    with pytest.raises(TypeError, match=r"RemoteModule.top: argument 'k' expected int"):
        rm.top_async(x, k=1.5)
