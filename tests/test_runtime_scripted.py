"""``torch.jit.script`` on a RemoteModule built with an interface: every interface method,
defaults and keyword arguments, a scripted model that holds a RemoteModule, and what a
scripted RemoteModule refuses (the README's "How it differs from upstream" says what is ours).

This process is ``worker0``; modules live on ``worker1`` and ``worker2``.
"""

from __future__ import annotations

import inspect
import pickle
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import Tensor, nn
from torch.distributed.optim import DistributedOptimizer

from remote_module import RemoteModule
from remote_module._generator import api
from remote_module.runtime import registry
from tests.support import runtime_helpers as helpers
from tests.support.expected import PICKLE_ERROR
from tests.support.interfaces import LinearInterface, ScaledLinear, ShapesInterface, local_scaled
from tests.support.rpc_group import ROOT, checkout_env

pytestmark = pytest.mark.rpc_group(3)  # see tests/conftest.py


@pytest.fixture(scope="module")
def scripted(scaled_rm: RemoteModule) -> torch.jit.ScriptModule:
    return torch.jit.script(scaled_rm)


class Hybrid(nn.Module):
    """A local model that uses a remote one through two of its interface methods."""

    def __init__(self, remote: nn.Module) -> None:
        super().__init__()
        self.remote = remote
        self.head = nn.Linear(4, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.remote.forward(x)) + self.remote.weight_sum()


class ScoredUser(nn.Module):
    """Uses a NamedTuple result's field and a keyword argument inside TorchScript."""

    def __init__(self, remote: nn.Module) -> None:
        super().__init__()
        self.remote = remote

    def forward(self, x: Tensor) -> float:
        return self.remote.total(x, bonus=2.0) + self.remote.forward(x).score


@torch.jit.script
def call_through_interface(module: LinearInterface, x: Tensor) -> Tensor:
    return module.forward(x, 2.0)


def test_scripted_every_method_matches_python(
    scaled_rm: RemoteModule, scripted: torch.jit.ScriptModule, x: Tensor
) -> None:
    local = local_scaled(scaled_rm)
    torch.testing.assert_close(scripted.forward(x, 2.0), local(x, 2.0))
    torch.testing.assert_close(scripted(x, 2.0), scaled_rm(x, 2.0))
    torch.testing.assert_close(scripted.forward_async(x, 2.0).wait(), local(x, 2.0))
    assert scripted.weight_sum() == pytest.approx(local.weight_sum())
    assert scripted.weight_sum_async().wait() == pytest.approx(local.weight_sum())
    assert scripted.describe("v", 3) == "v3"
    assert scripted.describe_async("v", 3).wait() == "v3"


def test_scripted_defaults_and_keyword_arguments(
    scaled_rm: RemoteModule, scripted: torch.jit.ScriptModule, x: Tensor
) -> None:
    local = local_scaled(scaled_rm)
    torch.testing.assert_close(scripted.forward(x), local(x))
    torch.testing.assert_close(scripted(x, scale=3.0), local(x, 3.0))
    torch.testing.assert_close(scripted.forward_async(x, scale=0.5).wait(), local(x, 0.5))
    assert scripted.describe() == "w2"
    assert scripted.describe(times=7) == "w7"
    assert scripted.describe(prefix="p") == "p2"
    assert scripted.describe_async(times=4).wait() == "w4"


def test_legacy_keyword_scripts_too(x: Tensor) -> None:
    rm = RemoteModule("worker2/cpu", ScaledLinear, _module_interface_cls=LinearInterface)
    torch.testing.assert_close(torch.jit.script(rm)(x), rm(x))


def test_an_interface_made_with_the_decorator_calls_and_scripts() -> None:
    # @remote_module.interface on a Protocol with `...` bodies: the scriptable family.
    from tests.support.decorated import Summed, SummerInterface
    from tests.support.decorated_module import Summer

    rm = RemoteModule("worker1/cpu", Summer, module_interface_cls=SummerInterface)
    assert rm.is_scriptable
    result = rm(torch.ones(2, 3), scale=2.0)
    assert type(result) is Summed and result.total.item() == 12.0 and result.items == 6
    assert rm.features_async().wait() == 3
    scripted = torch.jit.script(rm)
    assert scripted.forward(torch.ones(2, 3)).total.item() == 6.0


def test_without_interface_does_not_script() -> None:
    # Not torch's NotSupportedError at the **kwargs of _non_scriptable.py: what to do instead.
    rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, 4))
    for scripted in (rm, Hybrid(rm)):  # alone, and inside a model being scripted
        with pytest.raises(TypeError) as raised:
            torch.jit.script(scripted)
        assert str(raised.value) == (
            "RemoteModule without an interface cannot be scripted: torch.jit.script needs a "
            "RemoteModule built with a @torch.jit.interface (or @remote_module.interface) "
            "class, passed as module_interface_cls="
        )


def test_scripted_hybrid_model_matches_python(scaled_rm: RemoteModule, x: Tensor) -> None:
    model = Hybrid(scaled_rm)
    expected = model(x)
    scripted_model = torch.jit.script(model)
    torch.testing.assert_close(scripted_model(x), expected)
    local = local_scaled(scaled_rm)
    torch.testing.assert_close(expected, model.head(local(x)) + local.weight_sum())


def test_script_function_takes_the_scripted_remote_module(
    scaled_rm: RemoteModule, scripted: torch.jit.ScriptModule, x: Tensor
) -> None:
    torch.testing.assert_close(call_through_interface(scripted, x), scaled_rm(x, 2.0))


def test_named_tuple_and_optional_defaults_scripted(x: Tensor) -> None:
    rm = RemoteModule(
        "worker2/cpu", helpers.ScoredModule, module_interface_cls=helpers.ScoredInterface
    )
    scripted = torch.jit.script(rm)
    # from Python the NamedTuple arrives as a plain tuple (as with upstream's RPC); its
    # fields are typed inside TorchScript (ScoredUser below)
    value, score = scripted(x)
    torch.testing.assert_close(value, 2 * x)
    assert score == 1.5
    assert scripted.total(x) == pytest.approx(float(x.sum()) + 0.5)
    assert scripted.total(x, bonus=1.0) == pytest.approx(float(x.sum()) + 1.0)
    assert scripted.total(x, extra=x, bonus=1.0) == pytest.approx(2 * float(x.sum()) + 1.0)
    assert torch.jit.script(ScoredUser(rm))(x) == pytest.approx(float(x.sum()) + 3.5)


def test_shapes_interface_scripts(x: Tensor) -> None:
    """``tests.support.interfaces.Pair`` is a NamedTuple the interface names: the RemoteModule
    scripts and its results keep their structure."""
    rm = RemoteModule("worker2/cpu", helpers.ShapesModule, module_interface_cls=ShapesInterface)
    scripted = torch.jit.script(rm)
    total, many, named = scripted(x, x, [x], {"a": x})
    torch.testing.assert_close(total, 2 * x)
    torch.testing.assert_close(many[0], 2 * x)
    torch.testing.assert_close(named["a"], x + 1)
    total, many, named = scripted(x)
    assert (list(many), dict(named)) == ([], {})
    first, second = scripted.pair(x)
    torch.testing.assert_close(first, 3 * x)
    assert second == 7


def test_interface_naming_a_script_class_resolves(x: Tensor) -> None:
    """``Box`` is a TorchScript class the interface names: the generated code compiles on
    both sides and the RemoteModule scripts. (Box values themselves are not sent: this torch's
    RPC cannot unpickle script-class objects: the README's "Known limits".)"""
    rm = RemoteModule("worker1/cpu", helpers.BoxModule, module_interface_cls=helpers.BoxInterface)
    assert sorted(m.__name__ for m in rm.generated_methods) == [
        "boxed",
        "boxed_async",
        "forward",
        "forward_async",
        "unbox",
        "unbox_async",
    ]
    torch.testing.assert_close(rm(x), x + 1)
    scripted = torch.jit.script(rm)
    torch.testing.assert_close(scripted(x), x + 1)
    torch.testing.assert_close(scripted.forward_async(x).wait(), x + 1)


def test_scripted_calls_are_recorded_by_distributed_autograd(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", ScaledLinear, module_interface_cls=LinearInterface)
    scripted = torch.jit.script(rm)
    before = rm.remote_state_dict()
    optimizer = DistributedOptimizer(torch.optim.SGD, rm.remote_parameters(), lr=0.1)
    with dist_autograd.context() as context_id:
        loss = scripted(x).sum()
        dist_autograd.backward(context_id, [loss])
        optimizer.step(context_id)
    after = rm.remote_state_dict()
    torch.testing.assert_close(after["linear.bias"], before["linear.bias"] - 0.2)


def test_scripted_refuses_pickling(scripted: torch.jit.ScriptModule) -> None:
    with pytest.raises(torch.jit.Error, match=PICKLE_ERROR):
        scripted.__getstate__()


def test_scripting_again_reuses_parsed_methods(
    monkeypatch: pytest.MonkeyPatch, scripted: torch.jit.ScriptModule, x: Tensor
) -> None:
    """A second RemoteModule of a scripted interface (built or rebuilt from its module RRef)
    scripts without parsing any method again, and the scripted copy behaves like the first."""
    from remote_module import _torchscript as _scripting

    parsed: list[str] = []
    make_stub = _scripting._make_stub
    monkeypatch.setattr(
        _scripting, "_make_stub", lambda fn, name: parsed.append(name) or make_stub(fn, name)
    )
    rms = [RemoteModule("worker1/cpu", ScaledLinear, module_interface_cls=LinearInterface)]
    rms.append(
        RemoteModule.init_from_module_rref("worker1/cpu", rms[0].module_rref, LinearInterface)
    )
    for rm in rms:
        again = torch.jit.script(rm)
        local = local_scaled(rm)
        torch.testing.assert_close(again(x), local(x))
        torch.testing.assert_close(again.forward(x, scale=3.0), local(x, 3.0))
        assert again.describe(times=4) == "w4"
        with pytest.raises(torch.jit.Error, match=PICKLE_ERROR):
            again.__getstate__()
    assert parsed == []


@pytest.mark.parametrize("built", ["constructed", "from module_rref"])
def test_scripting_leaves_the_eager_remote_module_as_it_was(built: str, x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", ScaledLinear, module_interface_cls=LinearInterface)
    if built == "from module_rref":
        rm = RemoteModule.init_from_module_rref("worker1/cpu", rm.module_rref, LinearInterface)
    torch.jit.script(rm)
    local = local_scaled(rm)
    torch.testing.assert_close(rm(x), local(x))
    torch.testing.assert_close(rm.forward_async(x, scale=2.0).wait(), local(x, 2.0))
    assert rm.describe("v") == "v2"
    assert rm.weight_sum() == pytest.approx(local.linear.weight.sum().item())
    with pytest.raises(RuntimeError, match=PICKLE_ERROR):
        pickle.dumps(rm)
    with pytest.raises(TypeError, match="argument 'x'"):
        rm.forward("not a tensor")
    # It still travels over RPC and works on arrival.
    result = rpc.rpc_sync("worker2", helpers.call_remote_module, (rm, x))
    torch.testing.assert_close(result, local(x))
    # And a parent that holds it scripts too.
    torch.testing.assert_close(torch.jit.script(Hybrid(rm))(x).shape, torch.Size([2, 2]))


def test_scripting_without_torchs_stub_internals(
    monkeypatch: pytest.MonkeyPatch, x: Tensor
) -> None:
    # Where torch lacks ScriptMethodStub/make_stub, methods stay bound and torch parses them.
    from remote_module import _torchscript as _scripting

    monkeypatch.setattr(_scripting, "_STUBS_SUPPORTED", False)
    rm = RemoteModule("worker1/cpu", ScaledLinear, module_interface_cls=LinearInterface)
    scripted = torch.jit.script(rm)
    torch.testing.assert_close(scripted(x), local_scaled(rm)(x))
    assert not isinstance(vars(rm)["forward"], tuple)  # still the bound method
    torch.testing.assert_close(rm(x), local_scaled(rm)(x))


def test_build_time_stubs_the_owner_never_imported_work_on_the_first_call() -> None:
    # Upstream's race: a RemoteModule on an owner that has not imported the generated code
    # fails its first call. Here the owner imports it while creating the module.
    import remote_module.examples.generated as generated
    from remote_module.examples.embedding import EmbeddingBagInterface, RemoteEmbeddingBag

    stubs = generated.embedding_bag_interface.__name__
    assert not rpc.rpc_sync("worker2", helpers.imported, (stubs,))
    rm = RemoteModule(
        "worker2/cpu", RemoteEmbeddingBag, args=(10, 3), module_interface_cls=EmbeddingBagInterface
    )
    assert rm.generated_methods[0].__module__ == stubs
    indices, offsets = torch.tensor([1, 2, 3, 4]), torch.tensor([0, 2])
    assert rm(indices, offsets).shape == (2, 3)
    assert rpc.rpc_sync("worker2", helpers.imported, (stubs,))
    assert torch.jit.script(rm).weight_norm() == pytest.approx(rm.weight_norm())


class Doubling(RemoteModule):
    """A subclass with a private exported method of its own."""

    @torch.jit.export
    def _twice(self, x: Tensor) -> Tensor:
        return self.forward(x, 1.0) * 2


def test_constructor_signature_and_argument_errors() -> None:
    names = list(inspect.signature(RemoteModule).parameters)
    assert names == [
        "remote_device",
        "module_cls",
        "args",
        "kwargs",
        "module_interface_cls",
        "_module_interface_cls",
        "timeout",
        "wire_dtype",
        "standby",
        "checkpoint_every",
        "fake",
        "batching",
    ]
    with pytest.raises(TypeError, match=r"remote_device.*module_cls"):
        RemoteModule()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="bogus"):
        RemoteModule("worker1/cpu", nn.Linear, bogus=1)  # type: ignore[call-arg]


def test_dir_lists_what_a_remote_module_has(scaled_rm: RemoteModule) -> None:
    listed = dir(scaled_rm)
    for name in (
        "forward",
        "forward_async",
        "weight_sum",
        "describe_async",
        "remote_parameters",
        "remote_state_dict",
        "load_remote_state_dict",
        "get_module_rref",
        "train",
        "eval",
        "module_rref",
        "on",
        "device",
        "__call__",
    ):
        assert name in listed, name
    for name in ("cuda", "to", "parameters", "buffers", "_prepare", "_parameters"):
        assert name not in listed, name


def test_a_subclass_own_private_method_is_listed_and_scripted(x: Tensor) -> None:
    doubling = Doubling("worker1/cpu", ScaledLinear, module_interface_cls=LinearInterface)
    assert "_twice" in dir(doubling)
    torch.testing.assert_close(torch.jit.script(doubling)._twice(x), 2 * doubling(x))


def test_scripted_is_not_sent_over_rpc(scripted: torch.jit.ScriptModule) -> None:
    for args in ((scripted,), ([scripted],)):
        with pytest.raises(RuntimeError) as raised:
            rpc.rpc_sync("worker1", helpers.identity, args=args)
        assert "Passing a script RemoteModule over RPC is not supported" in str(raised.value)


def test_its_module_rref_is_sent_instead(
    scaled_rm: RemoteModule, scripted: torch.jit.ScriptModule, x: Tensor
) -> None:
    result, text = rpc.rpc_sync(
        "worker2",
        helpers.rebuild_and_call,
        ("worker1/cpu", scaled_rm.get_module_rref(), LinearInterface, x),
    )
    torch.testing.assert_close(result, scripted(x))
    assert "ScaledLinear" in text


@pytest.mark.filterwarnings("ignore:`torch.jit.save` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
def test_other_script_modules_still_travel_over_rpc() -> None:
    module = torch.jit.script(nn.Linear(2, 2))
    back = rpc.rpc_sync("worker1", helpers.identity, args=(module,))
    torch.testing.assert_close(back.weight, module.weight)
    ones = torch.ones(1, 2)
    torch.testing.assert_close(back(ones), module(ones))


def test_generated_remote_forward_moves_arguments_to_the_device(x: Tensor) -> None:
    """The compiled ``_remote_forward`` moves each argument to the module's device (a meta
    target: no GPU needed); with a device map set, the result stays there."""
    generated = registry.scriptable_module(ShapesInterface, True)
    assert generated.MOVES_CPU_TENSORS_TO_DEVICE is True
    local = rpc.RRef(torch.jit.script(helpers.ShapesModule()), ShapesInterface)
    total, many, named = generated._remote_forward(local, "meta", True, x, None, [x], {"a": x})
    assert [t.device.type for t in (total, *many, *named.values())] == ["meta"] * 3
    total, many, named = generated._remote_forward(local, "cpu", False, x, None, [x], {"a": x})
    torch.testing.assert_close(total, 2 * x)


def test_generated_movers_cover_every_result_shape(x: Tensor) -> None:
    generated = registry.scriptable_module(ShapesInterface, True)
    model = registry.interface_model(ShapesInterface)
    movers = {
        method.name: getattr(generated, api.walker_name(model, "move", method.returns))
        for method in model.methods
    }
    meta = torch.device("meta")
    total, many, named = movers["forward"]((x, [x, x], {"a": x}), meta)
    assert [t.device.type for t in (total, *many, *named.values())] == ["meta"] * 4
    pair = movers["pair"](helpers.Pair(x, 5), meta)
    assert pair.first.device.type == "meta"
    assert pair.second == 5


NO_JIT_SCRIPT = textwrap.dedent(
    """
    import torch
    import torch.distributed.rpc as rpc
    from remote_module import RemoteModule
    from tests.support.interfaces import LinearInterface, ScaledLinear
    from remote_module._process import free_port
    from tests.support.rpc_group import backend_options

    rpc.init_rpc("worker0", rank=0, world_size=1, rpc_backend_options=backend_options(free_port()))
    try:
        rm = RemoteModule("worker0/cpu", ScaledLinear, module_interface_cls=LinearInterface)
        x = torch.ones(2, 4)
        assert rm.forward(x, scale=2.0).shape == (2, 4)
        assert isinstance(rm.weight_sum(), float)
        assert rm.describe(times=4) == "w4"
        try:
            rm.forward("not a tensor")
        except TypeError as error:
            assert "forward" in str(error)
        else:
            raise AssertionError("no TypeError")
        print("NO-JIT OK")
    finally:
        rpc.shutdown()
    """
)


@pytest.mark.timeout(120)
def test_interface_works_where_torchscript_is_disabled() -> None:
    """With ``PYTORCH_JIT=0`` a RemoteModule built with an interface still works from Python
    (typed stubs from the annotations; only the scriptable output needs TorchScript)."""
    done = subprocess.run(
        [sys.executable, "-c", NO_JIT_SCRIPT],
        cwd=ROOT,
        env=checkout_env(PYTORCH_JIT="0"),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "NO-JIT OK" in done.stdout
