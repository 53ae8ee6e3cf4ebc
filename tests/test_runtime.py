"""What ``remote_module.RemoteModule`` promises at run time, upstream's behaviour and ours where
the README's "How it differs from upstream" says they differ, exercised the way a user would:
through a real three-worker RPC group.

This process is ``worker0``; modules live on ``worker1`` (and ``worker2``). Everything that
scripts a RemoteModule is in ``test_runtime_scripted.py``.
"""

from __future__ import annotations

import collections
import io
import pickle
import re
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import nn
from torch.distributed.optim import DistributedOptimizer
from torch.distributed.rpc.internal import _internal_rpc_pickler

import remote_module
from remote_module import RemoteDevice, RemoteModule, parse_remote_device
from remote_module.runtime.values import move_to_device
from tests.support import runtime_helpers as helpers
from tests.support.expected import (
    NOT_A_MODULE_ERROR,
    PICKLE_ERROR,
    PICKLED_ATTRIBUTES,
    bad_remote_device_error,
    unsupported_method_error,
)
from tests.support.interfaces import LinearInterface, ScaledLinear, ShapesInterface, local_scaled
from tests.support.key_table_helpers import call_until_keyed

pytestmark = pytest.mark.rpc_group(3)  # see tests/conftest.py

LINEAR_METHODS = [
    "forward_async",
    "forward",
    "weight_sum_async",
    "weight_sum",
    "describe_async",
    "describe",
]
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def owner_state(rm: RemoteModule) -> dict[str, torch.Tensor]:
    return rpc.rpc_sync(rm.get_module_rref().owner(), helpers.owner_state_dict, (rm.module_rref,))


def owner_training(rm: RemoteModule) -> bool:
    return rpc.rpc_sync(rm.get_module_rref().owner(), helpers.training_flag, (rm.module_rref,))


# --- remote_device ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("remote_device", "on", "device"),
    [
        ("worker1/cpu", "worker1", "cpu"),
        ("rank:1/cpu", 1, "cpu"),
        ("worker1", "worker1", "cpu"),
        ("rank:2", 2, "cpu"),
    ],
)
def test_remote_device_forms(remote_device: str, on: Any, device: str, x: torch.Tensor) -> None:
    rm = RemoteModule(remote_device, nn.Linear, args=(4, 3))
    assert (rm.on, rm.device) == (on, device)
    assert rm.get_module_rref().owner_name() == f"worker{2 if on in (2, 'worker2') else 1}"
    assert rm(x).shape == (2, 3)


def test_parse_remote_device_is_public() -> None:
    assert parse_remote_device("rank:1/cpu") == RemoteDevice(1, torch.device("cpu"))
    assert parse_remote_device("worker1") == RemoteDevice("worker1", torch.device("cpu"))
    assert parse_remote_device("trainer/cuda:1") == RemoteDevice("trainer", torch.device("cuda:1"))


@pytest.mark.parametrize(
    "remote_device",
    [
        "worker1/cpu/extra",
        "rank:x/cpu",
        "/cpu",
        "rank:-1/cpu",
        "rank:1:2/cpu",
        "",
        "cpu",
        "worker1/",
    ],
)
def test_bad_remote_device_is_a_value_error(remote_device: str) -> None:
    with pytest.raises(ValueError) as raised:
        RemoteModule(remote_device, nn.Linear, args=(4, 3))
    assert str(raised.value) == bad_remote_device_error(remote_device)


@pytest.mark.parametrize("device", ["bogus", "cuda:x"])
def test_bad_device_fails_with_torchs_type_and_words_quoting_the_remote_device(
    device: str,
) -> None:
    with pytest.raises(RuntimeError) as expected:
        torch.device(device)
    with pytest.raises(RuntimeError) as raised:
        RemoteModule(f"worker1/{device}", nn.Linear, args=(4, 3))
    assert type(raised.value) is type(expected.value)
    assert str(raised.value).startswith(f"Invalid device in remote_device 'worker1/{device}': ")
    assert str(raised.value).endswith(f"({expected.value})")


# --- attributes and calls -----------------------------------------------------------------


def test_attributes_without_interface(linear_rm: RemoteModule) -> None:
    assert linear_rm.on == "worker1"
    assert linear_rm.device == "cpu"
    assert linear_rm.is_device_map_set is False
    assert linear_rm.is_scriptable is False
    assert [m.__name__ for m in linear_rm.generated_methods] == ["forward_async", "forward"]
    assert isinstance(linear_rm.module_rref, rpc.PyRRef)
    assert linear_rm.get_module_rref() is linear_rm.module_rref
    assert linear_rm.get_module_rref().owner_name() == "worker1"


def test_attributes_with_interface(scaled_rm: RemoteModule) -> None:
    assert (scaled_rm.on, scaled_rm.device) == ("worker1", "cpu")
    assert scaled_rm.is_device_map_set is False
    assert scaled_rm.is_scriptable is True
    assert [m.__name__ for m in scaled_rm.generated_methods] == LINEAR_METHODS
    assert scaled_rm.get_module_rref().owner_name() == "worker1"


def test_forward_forward_async_and_call(linear_rm: RemoteModule, x: torch.Tensor) -> None:
    local = linear_rm.get_module_rref().to_here()
    expected = local(x)
    torch.testing.assert_close(linear_rm.forward(x), expected)
    torch.testing.assert_close(linear_rm(x), expected)
    future = linear_rm.forward_async(x)
    # what rpc.rpc_async returns: torch._C.Future (torch.futures.Future wraps the same type)
    assert isinstance(future, (torch.futures.Future, torch._C.Future))
    torch.testing.assert_close(future.wait(), expected)


def test_non_scriptable_forward_takes_keyword_arguments(linear_rm: RemoteModule) -> None:
    local = linear_rm.get_module_rref().to_here()
    x = torch.ones(1, 4)
    torch.testing.assert_close(linear_rm.forward(input=x), local(x))
    torch.testing.assert_close(linear_rm.forward_async(input=x).wait(), local(x))


def test_module_cls_may_be_a_function(x: torch.Tensor) -> None:
    rm = RemoteModule("worker2/cpu", helpers.make_linear, args=(4,), kwargs={"out_features": 5})
    assert rm(x).shape == (2, 5)


def test_every_interface_method_and_its_async_twin(
    scaled_rm: RemoteModule, x: torch.Tensor
) -> None:
    local = local_scaled(scaled_rm)
    expected = local(x, 2.0)
    torch.testing.assert_close(scaled_rm.forward(x, 2.0), expected)
    torch.testing.assert_close(scaled_rm.forward_async(x, 2.0).wait(), expected)
    torch.testing.assert_close(scaled_rm(x, 2.0), expected)
    # weight_sum takes no argument at all
    assert scaled_rm.weight_sum() == pytest.approx(local.weight_sum())
    assert scaled_rm.weight_sum_async().wait() == pytest.approx(local.weight_sum())
    assert scaled_rm.describe("v", 3) == "v3"
    assert scaled_rm.describe_async("v", 3).wait() == "v3"
    for name in LINEAR_METHODS:
        assert callable(getattr(scaled_rm, name))


def test_interface_defaults_and_keyword_arguments(scaled_rm: RemoteModule, x: torch.Tensor) -> None:
    local = local_scaled(scaled_rm)
    torch.testing.assert_close(scaled_rm.forward(x), local(x))
    torch.testing.assert_close(scaled_rm(x, scale=3.0), local(x, 3.0))
    torch.testing.assert_close(scaled_rm.forward_async(x=x, scale=0.5).wait(), local(x, 0.5))
    assert scaled_rm.describe() == "w2"
    assert scaled_rm.describe(times=7) == "w7"
    assert scaled_rm.describe(prefix="p") == "p2"
    assert scaled_rm.describe_async(times=4, prefix="q").wait() == "q4"


def test_shapes_interface_keyword_arguments(x: torch.Tensor) -> None:
    rm = RemoteModule("worker2/cpu", helpers.ShapesModule, module_interface_cls=ShapesInterface)
    total, many, named = rm.forward(x, maybe=x, many=[x], named={"a": x})
    torch.testing.assert_close(total, 2 * x)
    torch.testing.assert_close(many[0], 2 * x)
    torch.testing.assert_close(named["a"], x + 1)
    first, second = rm.pair(x)
    torch.testing.assert_close(first, 3 * x)
    assert second == 7


def test_shapes_interface_defaults(x: torch.Tensor) -> None:
    """``many: list[Tensor] = ()`` and ``named: dict[str, Tensor] = ()`` are the interface's
    own defaults: leaving them out must work, with caller-side checks on."""
    rm = RemoteModule("worker2/cpu", helpers.ShapesModule, module_interface_cls=ShapesInterface)
    total, many, named = rm.forward(x)
    torch.testing.assert_close(total, 2 * x)
    assert (list(many), dict(named)) == ([], {})
    total, many, named = rm.forward(x, named={"a": x})
    assert list(many) == []
    torch.testing.assert_close(named["a"], x + 1)


def test_named_tuple_results_keep_their_values(x: torch.Tensor) -> None:
    rm = RemoteModule(
        "worker1/cpu", helpers.ScoredModule, module_interface_cls=helpers.ScoredInterface
    )
    value, score = rm.forward(x)
    torch.testing.assert_close(value, 2 * x)
    assert score == 1.5
    assert rm.total(x) == pytest.approx(float(x.sum()) + 0.5)
    assert rm.total(x, bonus=1.0, extra=x) == pytest.approx(2 * float(x.sum()) + 1.0)


@pytest.mark.parametrize("keyword", ["module_interface_cls", "_module_interface_cls"])
def test_both_interface_keywords(keyword: str, x: torch.Tensor) -> None:
    rm = RemoteModule("worker2/cpu", ScaledLinear, **{keyword: LinearInterface})
    assert rm.is_scriptable is True
    assert [m.__name__ for m in rm.generated_methods] == LINEAR_METHODS
    torch.testing.assert_close(rm(x), local_scaled(rm)(x))


def test_interface_as_fifth_positional_argument(x: torch.Tensor) -> None:
    rm = RemoteModule("worker1/cpu", ScaledLinear, (4, 2), {}, LinearInterface)
    assert rm.is_scriptable
    assert rm(x).shape == (2, 2)


# --- training and optimisation ------------------------------------------------------------


@pytest.mark.parametrize("with_interface", [False, True], ids=["plain", "interface"])
def test_distributed_autograd_and_optimizer_change_remote_weights(
    with_interface: bool, x: torch.Tensor
) -> None:
    interface = LinearInterface if with_interface else None
    rm = RemoteModule("worker1/cpu", ScaledLinear, module_interface_cls=interface)
    params = rm.remote_parameters()
    assert len(params) == 2
    assert all(isinstance(p, rpc.PyRRef) for p in params)
    assert {p.owner_name() for p in params} == {"worker1"}
    assert sorted(tuple(p.to_here().shape) for p in params) == [(4,), (4, 4)]
    before = rm.remote_state_dict()
    optimizer = DistributedOptimizer(torch.optim.SGD, params, lr=0.1)
    with dist_autograd.context() as context_id:
        loss = rm(x).sum()
        dist_autograd.backward(context_id, [loss])
        optimizer.step(context_id)
    after = rm.remote_state_dict()
    for key in before:
        assert not torch.equal(before[key], after[key]), key
    # d(sum(xW^T + b))/db = batch size; SGD moves the bias by lr * 2
    torch.testing.assert_close(after["linear.bias"], before["linear.bias"] - 0.2)


def test_remote_parameters_recurse() -> None:
    nested = RemoteModule("worker1/cpu", ScaledLinear)
    assert nested.remote_parameters(recurse=False) == []
    assert len(nested.remote_parameters(recurse=True)) == 2
    flat = RemoteModule("worker1/cpu", nn.Linear, args=(2, 2))
    assert len(flat.remote_parameters(recurse=False)) == 2


@pytest.mark.parametrize("with_interface", [False, True], ids=["plain", "interface"])
def test_train_and_eval(with_interface: bool) -> None:
    interface = LinearInterface if with_interface else None
    rm = RemoteModule("worker1/cpu", ScaledLinear, module_interface_cls=interface)
    assert rm.training is True
    assert owner_training(rm) is True
    assert rm.train(False) is rm
    assert rm.training is False
    assert owner_training(rm) is False
    assert rm.train() is rm
    assert (rm.training, owner_training(rm)) == (True, True)
    assert rm.eval() is rm
    assert (rm.training, owner_training(rm)) == (False, False)
    assert rm.train(mode=True) is rm
    assert (rm.training, owner_training(rm)) == (True, True)


def test_train_rejects_a_non_boolean(linear_rm: RemoteModule) -> None:
    with pytest.raises(ValueError):
        linear_rm.train("yes")  # type: ignore[arg-type]
    assert linear_rm.training is True


# --- what cannot work remotely ------------------------------------------------------------


def _hook(*args: Any) -> None:
    return None


UNSUPPORTED: list[tuple[str, tuple[Any, ...]]] = [
    ("to", ("cpu",)),
    ("to", (torch.float64,)),
    ("cuda", ()),
    ("cpu", ()),
    ("half", ()),
    ("float", ()),
    ("double", ()),
    ("bfloat16", ()),
    ("type", (torch.float64,)),
    ("apply", (_hook,)),
    ("buffers", ()),
    ("named_buffers", ()),
    ("named_parameters", ()),
    ("children", ()),
    ("named_children", ()),
    ("modules", ()),
    ("named_modules", ()),
    ("state_dict", ()),
    ("load_state_dict", ({},)),
    ("zero_grad", ()),
    ("requires_grad_", ()),
    ("share_memory", ()),
    ("register_buffer", ("extra", torch.zeros(1))),
    ("register_parameter", ("extra", None)),
    ("add_module", ("extra", nn.Identity())),
    ("get_submodule", ("linear",)),
    ("register_forward_hook", (_hook,)),
    ("register_forward_pre_hook", (_hook,)),
    ("register_full_backward_hook", (_hook,)),
]


@pytest.mark.parametrize(
    ("name", "args"), UNSUPPORTED, ids=[f"{name}-{i}" for i, (name, _) in enumerate(UNSUPPORTED)]
)
@pytest.mark.parametrize("fixture", ["linear_rm", "scaled_rm"])
def test_unsupported_methods_raise(
    name: str, args: tuple[Any, ...], fixture: str, request: pytest.FixtureRequest
) -> None:
    rm = request.getfixturevalue(fixture)
    with pytest.raises(ValueError) as raised:
        getattr(rm, name)(*args)
    assert str(raised.value) == unsupported_method_error(name)


@pytest.mark.parametrize("fixture", ["linear_rm", "scaled_rm"])
def test_parameters_points_to_remote_parameters(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    rm = request.getfixturevalue(fixture)
    with pytest.raises(ValueError) as raised:
        rm.parameters()
    assert str(raised.value) == (
        f"{unsupported_method_error('parameters')}. Please use ``remote_parameters`` instead."
    )


def test_module_cls_returning_a_non_module_without_interface(x: torch.Tensor) -> None:
    with pytest.raises(ValueError, match=re.escape(NOT_A_MODULE_ERROR)):
        rm = RemoteModule("worker1/cpu", helpers.not_a_module, args=(3,))
        rm(x)  # at the latest here


def test_module_cls_returning_a_non_module_with_interface(x: torch.Tensor) -> None:
    with pytest.raises(ValueError, match=re.escape(NOT_A_MODULE_ERROR)):
        rm = RemoteModule("worker1/cpu", helpers.not_a_module, module_interface_cls=LinearInterface)
        rm(x)


@pytest.mark.parametrize("fixture", ["linear_rm", "scaled_rm"])
def test_python_pickling_is_refused(fixture: str, request: pytest.FixtureRequest) -> None:
    rm = request.getfixturevalue(fixture)
    with pytest.raises(RuntimeError) as raised:
        pickle.dumps(rm)
    assert str(raised.value) == PICKLE_ERROR
    with pytest.raises(RuntimeError) as raised:
        torch.save(rm, io.BytesIO())
    assert str(raised.value) == PICKLE_ERROR


# --- over RPC -----------------------------------------------------------------------------


class _UnsentRRef:
    """Stands in for the module RRef: serializing a real one outside an RPC would leave a fork
    the owner waits for at shutdown."""

    def _serialize(self) -> str:
        return "serialized rref"


def test_exactly_six_attributes_cross_the_wire_in_order(scaled_rm: RemoteModule) -> None:
    probe = RemoteModule.__new__(RemoteModule)
    nn.Module.__init__(probe)
    probe.__dict__.update(vars(scaled_rm))
    probe._rm_record = scaled_rm._rm_record
    probe.module_rref = _UnsentRRef()
    probe.local_note = "stays here"
    # what the RPC pickler does with a RemoteModule
    receive, values = _internal_rpc_pickler._class_reducer_dict[RemoteModule](probe)
    # the owner side's receive, then the rebuilder and the class's name, then the six, the
    # options set, the failover plan (None: no standby)
    assert receive.__module__ == "remote_module.runtime.owner"
    assert values[1] == ("remote_module.runtime.caller.module", "RemoteModule")
    *sent, options, plan = values[2:]
    assert plan is None
    assert len(sent) == len(PICKLED_ATTRIBUTES)
    assert tuple(sent[:4]) == ("worker1", "cpu", False, True)
    assert "serialized rref" in sent[5:]
    assert "stays here" not in sent and "stays here" not in options.values()
    assert options == {}  # built without options: none travel


@pytest.mark.parametrize("with_interface", [False, True], ids=["plain", "interface"])
@pytest.mark.parametrize("receiver", ["worker1", "worker2"], ids=["owner", "third-party"])
def test_sent_over_rpc(with_interface: bool, receiver: str, x: torch.Tensor) -> None:
    interface = LinearInterface if with_interface else None
    rm = RemoteModule("worker1/cpu", ScaledLinear, module_interface_cls=interface)
    rm.local_note = "stays here"  # not one of the six: must not travel
    names = [m.__name__ for m in rm.generated_methods]

    arrived = rpc.rpc_sync(receiver, helpers.describe_received, (rm,))
    assert arrived["type"] == "RemoteModule"
    # Built without options: exactly upstream's keys, in order (torch's own test compares
    # them), the six then the re-installed methods; nothing local travels.
    assert arrived["keys"] == [*PICKLED_ATTRIBUTES, *names]
    assert (arrived["timeout"], arrived["wire_dtype"]) == (-1.0, "None")
    assert arrived["on"] == rm.on
    assert arrived["device"] == rm.device
    assert arrived["is_device_map_set"] == rm.is_device_map_set
    assert arrived["is_scriptable"] == rm.is_scriptable
    assert arrived["methods"] == names
    assert arrived["bound"] == sorted(names)
    assert arrived["owner"] == "worker1"
    for part in ("worker1", "cpu", "ScaledLinear"):
        assert part in arrived["repr"]

    there = rpc.rpc_sync(receiver, helpers.call_remote_module, (rm, x))
    torch.testing.assert_close(there, rm(x))
    torch.testing.assert_close(there, local_scaled(rm)(x))


@pytest.mark.parametrize("with_interface", [False, True], ids=["plain", "interface"])
def test_options_travel_where_set(with_interface: bool, x: torch.Tensor) -> None:
    interface = LinearInterface if with_interface else None
    rm = RemoteModule(
        "worker1/cpu",
        ScaledLinear,
        module_interface_cls=interface,
        timeout=7.5,
        wire_dtype=torch.bfloat16,
    )
    names = [m.__name__ for m in rm.generated_methods]
    arrived = rpc.rpc_sync("worker2", helpers.describe_received, (rm,))
    assert arrived["keys"] == [*PICKLED_ATTRIBUTES, *names, "timeout", "wire_dtype"]
    assert (arrived["timeout"], arrived["wire_dtype"]) == (7.5, "torch.bfloat16")
    there = rpc.rpc_sync("worker2", helpers.call_remote_module, (rm, x))
    torch.testing.assert_close(there, rm(x))
    only_timeout = RemoteModule("worker1/cpu", ScaledLinear, timeout=3.0)
    arrived = rpc.rpc_sync("worker2", helpers.describe_received, (only_timeout,))
    assert arrived["keys"][-1] == "timeout" and "wire_dtype" not in arrived["keys"]


@pytest.mark.parametrize("with_interface", [False, True], ids=["plain", "interface"])
def test_init_from_module_rref_here(with_interface: bool, x: torch.Tensor) -> None:
    interface = LinearInterface if with_interface else None
    rm = RemoteModule("worker1/cpu", ScaledLinear, module_interface_cls=interface)
    again = RemoteModule.init_from_module_rref(
        "worker1/cpu", rm.get_module_rref(), module_interface_cls=interface
    )
    assert again.get_module_rref() is rm.get_module_rref()
    assert again.is_scriptable is with_interface
    assert [m.__name__ for m in again.generated_methods] == [
        m.__name__ for m in rm.generated_methods
    ]
    torch.testing.assert_close(again(x), rm(x))
    torch.testing.assert_close(again.forward_async(x).wait(), rm(x))
    for part in ("worker1", "cpu", "ScaledLinear"):
        assert part in repr(again)
    if with_interface:
        assert again.weight_sum() == pytest.approx(rm.weight_sum())


@pytest.mark.parametrize("given", ["worker2/cpu", "rank:2/cpu"])
def test_init_from_module_rref_names_the_rrefs_owner(given: str, x: torch.Tensor) -> None:
    # Upstream's own test passes another worker's name: accepted, but calls, `on` and repr
    # are the RRef's owner's, and a warning says once that the given worker was not used.
    rm = RemoteModule("worker1/cpu", ScaledLinear)
    with pytest.warns(UserWarning, match=rf"{re.escape(given)!s}.*not used.*'worker1'") as said:
        again = RemoteModule.init_from_module_rref(given, rm.get_module_rref())
    assert [w.filename for w in said] == [__file__]  # points at the caller's line
    assert again.on == "worker1" and again.device == "cpu"
    assert "on='worker1'" in repr(again)
    torch.testing.assert_close(again(x), rm(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        twice = RemoteModule.init_from_module_rref(given, rm.get_module_rref())
        here = RemoteModule.init_from_module_rref("worker1/cpu", rm.get_module_rref())
    assert twice.on == here.on == "worker1"


def test_init_from_module_rref_legacy_keyword(x: torch.Tensor, scaled_rm: RemoteModule) -> None:
    again = RemoteModule.init_from_module_rref(
        "worker1/cpu", scaled_rm.get_module_rref(), _module_interface_cls=LinearInterface
    )
    assert again.describe(times=1) == "w1"
    torch.testing.assert_close(again(x, scale=2.0), scaled_rm(x, scale=2.0))


@pytest.mark.parametrize("with_interface", [False, True], ids=["plain", "interface"])
def test_init_from_module_rref_on_another_worker(with_interface: bool, x: torch.Tensor) -> None:
    interface = LinearInterface if with_interface else None
    rm = RemoteModule("worker1/cpu", ScaledLinear, module_interface_cls=interface)
    result, text = rpc.rpc_sync(
        "worker2", helpers.rebuild_and_call, ("worker1/cpu", rm.get_module_rref(), interface, x)
    )
    torch.testing.assert_close(result, rm(x))
    for part in ("worker1", "cpu", "ScaledLinear"):
        assert part in text


# --- repr ---------------------------------------------------------------------------------


def test_repr_names_owner_device_and_class(
    linear_rm: RemoteModule, scaled_rm: RemoteModule
) -> None:
    for rm, cls in ((linear_rm, "Linear"), (scaled_rm, "ScaledLinear")):
        text = repr(rm)
        assert "worker1" in text
        assert "cpu" in text
        assert cls in text
    by_function = RemoteModule("worker2", helpers.make_linear, args=(2, 2))
    assert "worker2" in repr(by_function)
    assert "Linear" in repr(by_function)
    by_rank = repr(RemoteModule("rank:1/cpu", nn.Linear, args=(2, 2)))
    assert "worker1" in by_rank or "on=1" in by_rank
    assert "Linear" in by_rank


# --- a parent module that holds a RemoteModule --------------------------------------------


class Parent(nn.Module):
    def __init__(self, remote: RemoteModule) -> None:
        super().__init__()
        self.remote = remote
        self.local = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.local(self.remote(x))


@pytest.fixture
def parent() -> Parent:
    return Parent(RemoteModule("worker1/cpu", ScaledLinear, module_interface_cls=LinearInterface))


def test_parent_sees_only_local_state(parent: Parent, x: torch.Tensor) -> None:
    assert list(parent.parameters()) == [parent.local.weight, parent.local.bias]
    assert [name for name, _ in parent.named_parameters()] == ["local.weight", "local.bias"]
    assert list(parent.state_dict()) == ["local.weight", "local.bias"]
    assert list(parent.buffers()) == []
    assert parent.remote in list(parent.modules())
    assert [name for name, _ in parent.named_modules()] == ["", "remote", "local"]
    assert "RemoteModule(" in repr(parent)
    assert parent(x).shape == (2, 2)
    parent.zero_grad()
    parent.load_state_dict(parent.state_dict())


def test_parent_to_moves_only_local_state(parent: Parent, x: torch.Tensor) -> None:
    assert parent.to("cpu") is parent
    assert parent.to(torch.float64) is parent
    assert parent.local.weight.dtype == torch.float64
    assert {v.dtype for v in parent.remote.remote_state_dict().values()} == {torch.float32}
    assert parent.to(torch.float32) is parent
    assert parent(x).shape == (2, 2)


def test_parent_train_and_eval_reach_the_owner(parent: Parent) -> None:
    assert parent.eval() is parent
    assert (parent.training, parent.local.training, parent.remote.training) == (False,) * 3
    assert owner_training(parent.remote) is False
    assert parent.train() is parent
    assert (parent.training, parent.remote.training) == (True, True)
    assert owner_training(parent.remote) is True


def test_direct_calls_still_raise_inside_a_parent(parent: Parent) -> None:
    with pytest.raises(ValueError, match="remote_parameters"):
        parent.remote.parameters()
    with pytest.raises(ValueError, match=re.escape("Method ``state_dict`` not supported")):
        parent.remote.state_dict()
    with pytest.raises(ValueError, match=re.escape("Method ``named_modules`` not supported")):
        list(parent.remote.named_modules())


# --- checkpoints of the remote module -----------------------------------------------------


@pytest.mark.parametrize("with_interface", [False, True], ids=["plain", "interface"])
def test_remote_state_dict_round_trip(with_interface: bool, x: torch.Tensor) -> None:
    interface = LinearInterface if with_interface else None
    rm = RemoteModule("worker1/cpu", ScaledLinear, module_interface_cls=interface)
    state = rm.remote_state_dict()
    assert list(state) == ["linear.weight", "linear.bias"]
    assert all(t.device.type == "cpu" for t in state.values())
    reference = owner_state(rm)
    for key, value in state.items():
        torch.testing.assert_close(value, reference[key])
    original = rm(x)

    zeros = {key: torch.zeros_like(value) for key, value in state.items()}
    rm.load_remote_state_dict(zeros)
    torch.testing.assert_close(rm(x), torch.zeros(2, 4))
    torch.testing.assert_close(owner_state(rm)["linear.weight"], torch.zeros(4, 4))

    rm.load_remote_state_dict(state, strict=True)
    torch.testing.assert_close(rm(x), original)


def test_load_remote_state_dict_strictness(x: torch.Tensor) -> None:
    rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, 4))
    partial = collections.OrderedDict(weight=torch.zeros(4, 4))
    with pytest.raises(RuntimeError, match="bias"):
        rm.load_remote_state_dict(partial)
    with pytest.raises(RuntimeError, match="bias"):
        rm.load_remote_state_dict(partial, strict=True)
    missing, unexpected = rm.load_remote_state_dict(partial, strict=False)
    assert list(missing) == ["bias"]
    assert list(unexpected) == []
    bias = rm.remote_state_dict()["bias"]
    torch.testing.assert_close(rm(x), bias.expand(2, 4))
    extra = {"weight": torch.ones(4, 4), "bias": torch.zeros(4), "surplus": torch.zeros(1)}
    missing, unexpected = rm.load_remote_state_dict(extra, strict=False)
    assert (list(missing), list(unexpected)) == ([], ["surplus"])
    torch.testing.assert_close(rm(x), x.sum(dim=1, keepdim=True).expand(2, 4))


def torchs_own_error(fails: Callable[[], object]) -> str:
    """The message of the RuntimeError ``fails()`` raises here: what the owner's torch says of
    the same failure, in this torch's wording (which changes between versions: 2.15 prefixes
    "addmm: " to "mat1 and mat2 shapes cannot be multiplied"), so that tests pin our part."""
    with pytest.raises(RuntimeError) as raised:
        fails()
    return str(raised.value)


def test_a_failed_remote_operation_names_method_owner_and_error_without_its_traceback() -> None:
    rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, 4))
    partial = {"weight": torch.zeros(4, 4)}
    with pytest.raises(RuntimeError) as raised:
        rm.load_remote_state_dict(partial)
    message = str(raised.value)
    owners = torchs_own_error(lambda: nn.Linear(4, 4).load_state_dict(partial))
    assert message == (
        f"RemoteModule.load_remote_state_dict on worker 'worker1' failed: RuntimeError: {owners}"
    ), message
    assert '"bias"' in message  # the missing key, named
    assert "Traceback" not in message and "On WorkerInfo" not in message
    # The remote traceback stays reachable.
    assert "Traceback (most recent call last)" in raised.value.remote_traceback  # type: ignore[attr-defined]
    assert "load_state_dict" in raised.value.remote_traceback  # type: ignore[attr-defined]


def test_a_failed_call_names_method_owner_and_error_without_its_traceback() -> None:
    rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, 4))
    with pytest.raises(RuntimeError) as raised:
        rm(torch.ones(2, 3))  # a shape the module refuses
    message = str(raised.value)
    owners = torchs_own_error(lambda: nn.Linear(4, 4)(torch.ones(2, 3)))
    assert message == f"RemoteModule.forward on worker 'worker1' failed: RuntimeError: {owners}"
    assert "Traceback" not in message and "On WorkerInfo" not in message
    assert "Traceback (most recent call last)" in raised.value.remote_traceback  # type: ignore[attr-defined]


@pytest.mark.parametrize("timeout", [None, 30.0], ids=["no timeout", "timeout"])
def test_a_modules_own_error_keeps_its_type_and_is_named_sync_and_async(
    timeout: float | None,
) -> None:
    rm = RemoteModule("worker1/cpu", helpers.Refuses, timeout=timeout)
    for attempt in (lambda: rm(torch.ones(2)), lambda: rm.forward_async(torch.ones(2)).wait()):
        with pytest.raises(ValueError) as raised:
            attempt()
        message = str(raised.value)
        assert message == (
            "RemoteModule.forward on worker 'worker1' failed: "
            "ValueError: refused a tensor of shape (2,)"
        ), message
        assert "Traceback" in raised.value.remote_traceback  # type: ignore[attr-defined]


@pytest.mark.parametrize("remote_device", ["nowhere/cpu", "rank:99/cpu"])
@pytest.mark.parametrize("interface", [None, LinearInterface], ids=["plain", "interface"])
def test_an_unknown_worker_name_and_rank_raise_the_same_type(
    remote_device: str, interface: Any
) -> None:
    with pytest.raises(RuntimeError) as by_runtime_error:
        RemoteModule(remote_device, ScaledLinear, module_interface_cls=interface)
    with pytest.raises(ValueError) as by_value_error:
        RemoteModule(remote_device, ScaledLinear, module_interface_cls=interface)
    assert type(by_runtime_error.value) is type(by_value_error.value)
    assert type(by_runtime_error.value).__name__ == "UnknownWorkerError"
    assert remote_device.split("/")[0].removeprefix("rank:") in str(by_runtime_error.value)


# --- timeouts -----------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_timeout_without_interface(x: torch.Tensor) -> None:
    rm = RemoteModule("worker1/cpu", helpers.Sleepy, kwargs={"delay": 3.0}, timeout=0.5)
    start = time.monotonic()
    with pytest.raises(RuntimeError) as raised:
        rm(x)
    assert time.monotonic() - start < 2.5
    assert "worker1" in str(raised.value)
    assert "forward" in str(raised.value)

    future = rm.forward_async(x)
    start = time.monotonic()
    with pytest.raises(RuntimeError) as raised:
        future.wait()
    assert time.monotonic() - start < 2.5
    assert "worker1" in str(raised.value)
    assert "forward" in str(raised.value)


@pytest.mark.timeout(60)
def test_timeout_with_interface(x: torch.Tensor) -> None:
    # Built with a generous timeout (scripting on the owner takes time); forward sleeps 3 s.
    rm = RemoteModule(
        "worker1/cpu", helpers.Sleepy, module_interface_cls=helpers.SleepyInterface, timeout=1.5
    )
    start = time.monotonic()
    with pytest.raises(RuntimeError) as raised:
        rm.forward(x)
    assert time.monotonic() - start < 2.9
    assert "worker1" in str(raised.value)
    assert "forward" in str(raised.value)

    quick = RemoteModule.init_from_module_rref(
        "worker1/cpu", rm.get_module_rref(), helpers.SleepyInterface, timeout=0.5
    )
    start = time.monotonic()
    with pytest.raises(RuntimeError) as raised:
        quick.nap(3.0)
    assert time.monotonic() - start < 2.5
    assert "worker1" in str(raised.value)
    assert "nap" in str(raised.value)

    future = quick.nap_async(3.0)
    with pytest.raises(RuntimeError, match="nap") as raised:
        future.wait()
    assert "worker1" in str(raised.value)
    # nothing hangs: a call within the bound still goes through
    assert quick.nap(0.0) == 0.0


def test_a_module_with_its_own_to_is_still_moved(x: torch.Tensor) -> None:
    # The owner moves every module to its device, its own to() or _apply() included.
    assert torch.equal(RemoteModule("worker1/cpu", helpers.AppliedFlag)(x), torch.ones_like(x))
    plain = RemoteModule("worker1/cpu", nn.Linear, args=(4, 3))
    assert plain(x).shape == (2, 3)


WRONG_INPUT_SHAPE = (3, 7)  # fails on the owner: mat1 and mat2 shapes cannot be multiplied
# Local twins of the fixtures' modules, for torch's own message of that failure.
LOCAL_TWINS = {"linear_rm": lambda: nn.Linear(4, 3), "scaled_rm": ScaledLinear}


def assert_names_the_owners_error(error: BaseException, fixture: str) -> None:
    """``error`` names the method and the owner, then the owner's RuntimeError as raised there
    (after TorchScript's traceback where the module is scripted)."""
    message = str(error)
    twin = LOCAL_TWINS[fixture]()
    owners = torchs_own_error(lambda: twin(torch.ones(WRONG_INPUT_SHAPE)))
    assert message.startswith("RemoteModule.forward on worker 'worker1' failed: "), message
    assert message.rstrip("\n").endswith(f"RuntimeError: {owners}"), message


@pytest.mark.parametrize(
    ("fixture", "interface"), [("linear_rm", None), ("scaled_rm", LinearInterface)]
)
def test_async_errors_name_owner_and_method_with_a_timeout(
    fixture: str, interface: Any, request: pytest.FixtureRequest
) -> None:
    rm = request.getfixturevalue(fixture)
    timed = RemoteModule.init_from_module_rref("worker1/cpu", rm.module_rref, interface, timeout=30)
    with pytest.raises(RuntimeError) as raised:
        timed.forward_async(torch.ones(WRONG_INPUT_SHAPE)).wait()
    assert_names_the_owners_error(raised.value, fixture)


@pytest.mark.parametrize("fixture", ["linear_rm", "scaled_rm"])
def test_async_errors_without_a_timeout_name_owner_and_method(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    # As with one (API.md): the future is chained to the RPC's, whose error it names.
    rm = request.getfixturevalue(fixture)
    with pytest.raises(RuntimeError) as raised:
        rm.forward_async(torch.ones(WRONG_INPUT_SHAPE)).wait()
    assert_names_the_owners_error(raised.value, fixture)


@pytest.mark.parametrize("fixture", ["linear_rm", "scaled_rm"])
def test_sync_errors_always_name_owner_and_method(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    rm = request.getfixturevalue(fixture)
    with pytest.raises(RuntimeError) as raised:
        rm.forward(torch.ones(WRONG_INPUT_SHAPE))
    assert_names_the_owners_error(raised.value, fixture)


def test_calls_under_the_profiler_take_rpcs_own_path(
    monkeypatch: pytest.MonkeyPatch, scaled_rm: RemoteModule, x: torch.Tensor
) -> None:
    # Compiled remote functions are sent without rpc.rpc_async's per-call bookkeeping, except
    # while the autograd profiler runs, which rpc.rpc_async records. (Keyed by then: the
    # owner's filing, itself an rpc_async, is in.)
    call_until_keyed(scaled_rm, x)
    sent: list[Any] = []
    rpc_async = rpc.rpc_async

    def spy(*args: Any, **kwargs: Any) -> Any:
        sent.append(args[1])
        return rpc_async(*args, **kwargs)

    monkeypatch.setattr(rpc, "rpc_async", spy)
    expected = local_scaled(scaled_rm)(x)
    sent.clear()
    torch.testing.assert_close(scaled_rm(x), expected)
    assert sent == []
    with torch.autograd.profiler.profile():
        torch.testing.assert_close(scaled_rm(x), expected)
        torch.testing.assert_close(scaled_rm.forward_async(x).wait(), expected)
    # The compiled function itself: rpc.rpc_async sends it as TorchScript, by name.
    assert all(isinstance(fn, torch.jit.ScriptFunction) for fn in sent)
    assert [fn.name for fn in sent] == ["_remote_forward_keyed"] * 2


@pytest.mark.parametrize("timeout", [-1, 0, "x", True])
def test_bad_timeout_is_a_value_error(timeout: Any) -> None:
    with pytest.raises(ValueError):
        RemoteModule("worker1/cpu", nn.Linear, args=(2, 2), timeout=timeout)


# --- caller-side type checks --------------------------------------------------------------


@pytest.fixture
def nothing_sent(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    sent: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        sent.append(args)
        raise AssertionError("sent over RPC")

    monkeypatch.setattr(rpc, "rpc_async", refuse)
    # Compiled remote functions are sent without rpc.rpc_async's per-call bookkeeping.
    monkeypatch.setattr(remote_module._compat, "invoke_rpc_torchscript", refuse)
    return sent


def test_wrong_type_is_refused_before_sending(scaled_rm: RemoteModule, nothing_sent: list) -> None:
    with pytest.raises(TypeError) as raised:
        scaled_rm.forward("not a tensor")  # type: ignore[arg-type]
    assert "forward" in str(raised.value)
    assert "'x'" in str(raised.value)
    with pytest.raises(TypeError, match="forward"):
        scaled_rm.forward_async("not a tensor")  # type: ignore[arg-type]
    with pytest.raises(TypeError) as raised:
        scaled_rm.describe(times="many")  # type: ignore[arg-type]
    assert "describe" in str(raised.value)
    assert "times" in str(raised.value)
    assert nothing_sent == []
    with pytest.raises(AssertionError, match="sent over RPC"):  # a right type is sent
        scaled_rm.forward(torch.ones(1, 4))


@pytest.fixture
def no_type_checking() -> Iterator[None]:
    assert remote_module.type_checking() is True
    remote_module.set_type_checking(False)
    try:
        yield
    finally:
        remote_module.set_type_checking(True)


def test_type_checking_can_be_turned_off(scaled_rm: RemoteModule, no_type_checking: None) -> None:
    assert remote_module.type_checking() is False
    with pytest.raises(RuntimeError):  # now refused by the owner, after the round trip
        scaled_rm.forward("not a tensor")  # type: ignore[arg-type]
    assert scaled_rm.describe(times=1) == "w1"


# --- device movement ----------------------------------------------------------------------


def test_arguments_move_to_a_non_cpu_device_with_interface(x: torch.Tensor) -> None:
    rm = RemoteModule(
        "worker1/meta", helpers.DeviceReport, module_interface_cls=helpers.DeviceReportInterface
    )
    assert rm.device == "meta"
    assert rm.forward(x, [x, x], {"b": x, "a": x}) == ["meta"] * 5


def test_arguments_move_to_a_non_cpu_device_without_interface(x: torch.Tensor) -> None:
    rm = RemoteModule("worker1/meta", helpers.AnyDeviceReport)
    point = helpers.Point(x, "p")
    found = rm(x, [x, (x, {"k": [x]})], point, named={"a": x, "b": (x,)})
    assert found == ["meta"] * 7


def test_generated_module_depends_on_device_movement() -> None:
    on_cpu = RemoteModule(
        "worker1/cpu", helpers.DeviceReport, module_interface_cls=helpers.DeviceReportInterface
    )
    on_meta = RemoteModule(
        "worker1/meta", helpers.DeviceReport, module_interface_cls=helpers.DeviceReportInterface
    )
    cpu_globals = on_cpu._rm_record.generated.__dict__
    meta_globals = on_meta._rm_record.generated.__dict__
    assert meta_globals["MOVES_CPU_TENSORS_TO_DEVICE"] is True
    if cpu_globals["MOVES_CPU_TENSORS_TO_DEVICE"] is False:
        assert cpu_globals["__name__"] != meta_globals["__name__"]


def test_move_to_device_covers_nested_shapes() -> None:
    t = torch.ones(2)
    value = {
        "tensor": t,
        "tuple": (t, 1, "s"),
        "list": [t, [t, None]],
        "point": helpers.Point(t, "label"),
        "ordered": collections.OrderedDict(a=t),
    }
    moved = move_to_device(value, torch.device("meta"))
    assert moved["tensor"].device.type == "meta"
    assert type(moved["tuple"]) is tuple
    assert moved["tuple"][0].device.type == "meta"
    assert moved["tuple"][1:] == (1, "s")
    assert moved["list"][0].device.type == "meta"
    assert moved["list"][1][0].device.type == "meta"
    assert moved["list"][1][1] is None
    assert type(moved["point"]) is helpers.Point
    assert moved["point"].x.device.type == "meta"
    assert moved["point"].label == "label"
    assert type(moved["ordered"]) is collections.OrderedDict
    assert moved["ordered"]["a"].device.type == "meta"
    assert t.device.type == "cpu"  # the input is untouched


@needs_cuda
def test_cuda_results_come_back_on_cpu_without_interface() -> None:
    rm = RemoteModule("worker1/cuda:0", helpers.Nested)
    x = torch.ones(2, 4)
    result = rm(x)
    tensors = [
        result["tensor"],
        *result["tuple"],
        result["list"][0],
        result["list"][1][0],
        result["dict"]["a"],
    ]
    assert all(t.device.type == "cpu" for t in tensors)
    torch.testing.assert_close(result["list"][1][0], 2 * x)
    report = RemoteModule("worker1/cuda:0", helpers.AnyDeviceReport)
    assert report(x, [x], named={"a": x}) == ["cuda"] * 3


@needs_cuda
def test_cuda_results_come_back_on_cpu_with_interface() -> None:
    x = torch.ones(2, 4)
    scaled = RemoteModule("worker1/cuda:0", ScaledLinear, module_interface_cls=LinearInterface)
    assert scaled(x).device.type == "cpu"
    devices = rpc.rpc_sync("worker1", helpers.owner_state_devices, (scaled.module_rref,))
    assert devices == {"linear.weight": "cuda", "linear.bias": "cuda"}
    assert scaled.remote_state_dict()["linear.weight"].device.type == "cpu"
    shapes = RemoteModule(
        "worker1/cuda:0", helpers.ShapesModule, module_interface_cls=ShapesInterface
    )
    total, many, named = shapes.forward(x, x, [x, x], {"a": x})
    assert all(t.device.type == "cpu" for t in [total, *many, *named.values()])
    first, second = shapes.pair(x)
    assert first.device.type == "cpu"
    assert second == 7
    report = RemoteModule(
        "worker1/cuda:0", helpers.DeviceReport, module_interface_cls=helpers.DeviceReportInterface
    )
    assert report(x, [x], {"a": x}) == ["cuda"] * 3


def test_every_name_a_remote_module_has_is_reserved(scaled_rm: RemoteModule) -> None:
    # The generator refuses interface methods named like anything a RemoteModule has: the
    # contract's list holds every public name of a live instance (tests/test_layers.py holds
    # it against the class).
    from remote_module._shared import RESERVED_NAMES

    generated = {method.__name__ for method in scaled_rm.generated_methods}
    names = {*vars(scaled_rm), *dir(type(scaled_rm)), *dir(nn.Module)} - generated
    public = {name for name in names if not name.startswith("_")} - {"forward"}
    assert public <= RESERVED_NAMES
    assert {"remote_parameters", "wire_dtype", "module_rref", "train"} <= RESERVED_NAMES
