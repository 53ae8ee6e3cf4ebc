"""``torchscript.script_module``, the owner's scripting of each new module: it gives what
``torch.jit.script`` gives, module for module, while doing torch's class-level work (the
``__init__`` attribute check, the search for methods to compile) once per class; a module that
overrides anything torch's search reads gets torch's own search."""

import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from remote_module import _torchscript as torchscript

pytestmark = pytest.mark.skipif(
    not torchscript._PIPELINE_SUPPORTED, reason="this torch lacks torch.jit._recursive's helpers"
)


def _twice(x: Tensor, y: Tensor) -> Tensor:
    return 2 * x + y


class Block(nn.Module):
    """Most of what TorchScript reads in a module: submodules of every container kind, a
    buffer, a constant, an exported, an ignored and an unused method, an ignored property."""

    # Lists, as TorchScript reads them.
    __constants__ = ["width"]  # noqa: RUF012
    __jit_ignored_attributes__ = ["described"]  # noqa: RUF012

    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.width = width
        self.body = nn.Sequential(nn.Linear(width, width), nn.ReLU())
        self.heads = nn.ModuleList([nn.Linear(width, 2), nn.Linear(width, 2)])
        self.named = nn.ModuleDict({"a": nn.Identity()})
        self.register_buffer("shift", torch.arange(float(width)))
        self.calls = 0

    def forward(self, x: Tensor) -> Tensor:
        """Run the block."""
        y = self.named["a"](self.body(x) + self.shift)
        return _twice(self.heads[0](y), self.heads[1](y)) * self.width

    @torch.jit.export
    def scale(self, x: Tensor) -> Tensor:
        """Exported beside forward."""
        return x * len(self.heads)

    @torch.jit.ignore
    def describe(self) -> str:
        return f"Block({self.width})"

    @torch.jit.unused
    def unused(self, x: Tensor) -> Tensor:
        return x

    @property
    def described(self) -> str:
        return self.describe()


class Overloaded(nn.Module):
    """A module with overloaded methods (torch compiles their overloads, never the method)."""

    # (No "type:" comments here: TorchScript would read them as signatures.)
    @torch.jit._overload_method
    def pick(self, x: int) -> int: ...

    @torch.jit._overload_method
    def pick(self, x: Tensor) -> Tensor: ...  # noqa: F811

    def pick(self, x: Any) -> Any:  # noqa: F811
        return x

    def forward(self, x: Tensor) -> Tensor:
        return self.pick(x) + self.pick(1)


class BadInit(nn.Module):
    """An ``__init__`` torch's attribute check warns of: an empty, annotated list."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[int] = []

    def forward(self, x: Tensor) -> Tensor:
        return x


def _extra(self: nn.Module, x: Tensor) -> Tensor:
    return x + 1


def _add_one(module: nn.Module, inputs: tuple[Tensor], output: Tensor) -> Tensor:
    return output + 1


def _with_hook(module: nn.Module) -> nn.Module:
    module.register_forward_hook(_add_one)  # one hook for all: one concrete type for all
    return module


def _with_exported_attribute(module: nn.Module) -> nn.Module:
    module.extra = types.MethodType(torch.jit.export(_extra), module)
    return module


# name -> (a new module, an input for its forward)
CASES: dict[str, tuple[Callable[[], nn.Module], Tensor]] = {
    "linear": (lambda: nn.Linear(4, 3), torch.randn(2, 4)),
    "linear_without_bias": (lambda: nn.Linear(4, 3, bias=False), torch.randn(2, 4)),
    "block": (Block, torch.randn(3, 4)),
    "block_with_a_hook": (lambda: _with_hook(Block()), torch.randn(3, 4)),
    "overloaded": (Overloaded, torch.randn(2)),
    "exported_instance_attribute": (
        lambda: _with_exported_attribute(nn.Linear(4, 3)),
        torch.randn(2, 4),
    ),
}


@pytest.fixture
def infer_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The modules torch's own method search runs for, and ``("check", class)`` for each run
    of its attribute check, in order."""
    calls: list[Any] = []
    infer = torchscript._PIPELINE["infer_methods_to_compile"]
    checker = torchscript._PIPELINE["AttributeTypeIsSupportedChecker"]

    def counted_infer(module: nn.Module) -> Any:
        calls.append(module)
        return infer(module)

    class CountedChecker(checker):  # type: ignore[misc,valid-type]
        def check(self, module: nn.Module) -> None:
            calls.append(("check", type(module)))
            super().check(module)

    pipeline = dict(torchscript._PIPELINE)
    pipeline.update(
        infer_methods_to_compile=counted_infer, AttributeTypeIsSupportedChecker=CountedChecker
    )
    monkeypatch.setattr(torchscript, "_PIPELINE", pipeline)
    yield calls


def _assert_same_script(ours: Any, torchs: Any, module: nn.Module, x: Tensor) -> None:
    """``ours`` scripts ``module`` as ``torchs`` (torch.jit.script of a twin) does."""
    assert type(ours) is type(torchs)
    assert ours._c._type() == torchs._c._type()  # one concrete type, shared
    assert sorted(ours._c._method_names()) == sorted(torchs._c._method_names())
    assert ours.code == torchs.code
    assert sorted(ours.__dict__) == sorted(torchs.__dict__)
    for name, value in torchs.__dict__.items():
        if isinstance(value, torch._C.ScriptMethod):  # the wrapped compiled methods
            assert ours.__dict__[name].__doc__ == value.__doc__
            assert ours.__dict__[name].__wrapped__.__self__ is module
    assert len(ours._forward_hooks) == len(torchs._forward_hooks)
    assert ours.original_name == torchs.original_name
    for (name, ours_tensor), (_, torchs_tensor) in zip(
        ours.state_dict().items(), torchs.state_dict().items(), strict=True
    ):
        assert ours_tensor.data_ptr() == module.state_dict()[name].data_ptr()
        assert ours_tensor.shape == torchs_tensor.shape
    expected = torch.jit.script(module)(x)  # the same module, scripted by torch
    torch.testing.assert_close(ours(x), expected)


@pytest.mark.parametrize("case", sorted(CASES))
def test_scripts_as_torch_does(case: str) -> None:
    make, x = CASES[case]
    first = make()
    torchscript.script_module(first, "a test")  # cold for this class: torch's search
    for _ in range(2):  # warm: the class's search reused where it applies
        module, twin = make(), make()
        ours = torchscript.script_module(module, "a test")
        torchs = torch.jit.script(twin)
        assert module.__overloads__ == twin.__overloads__  # what torch leaves on the module
        _assert_same_script(ours, torchs, module, x)


def test_a_class_is_searched_and_checked_once(infer_calls: list[Any]) -> None:
    torchscript.script_module(Block(), "a test")  # may be the first of its class
    infer_calls.clear()
    torchscript.script_module(Block(), "a test")
    assert infer_calls == []  # neither searched nor checked: the block and its submodules


def test_a_new_concrete_type_is_searched_by_torch(infer_calls: list[Any]) -> None:
    torchscript.script_module(Block(4), "a test")
    infer_calls.clear()
    module = Block(5)  # a new constant: a new concrete type, compiled now
    scripted = torchscript.script_module(module, "a test")
    assert module in infer_calls
    assert ("check", Block) not in infer_calls  # the class-level check stays done
    torch.testing.assert_close(scripted(torch.ones(1, 5)), module(torch.ones(1, 5)))


@pytest.mark.parametrize(
    "override",
    [
        pytest.param(_with_exported_attribute, id="exported-function-attribute"),
        pytest.param(lambda m: setattr(m, "forward", m.forward) or m, id="forward-attribute"),
        pytest.param(lambda m: setattr(m, "__overloads__", {}) or m, id="overloads-attribute"),
    ],
)
def test_a_module_that_overrides_is_searched_by_torch(
    infer_calls: list[Any], override: Callable[[nn.Module], nn.Module]
) -> None:
    torchscript.script_module(nn.Linear(4, 3), "a test")
    infer_calls.clear()
    module = override(nn.Linear(4, 3))
    scripted = torchscript.script_module(module, "a test")
    assert module in infer_calls
    _assert_same_script(
        scripted, torch.jit.script(override(nn.Linear(4, 3))), module, torch.ones(1, 4)
    )


def test_a_warned_init_is_warned_of_every_time() -> None:
    """torch's check warns of an empty annotated attribute in ``__init__`` on every scripting;
    so does ours (a class it warned of is checked again each time)."""
    for script in (torch.jit.script, lambda m: torchscript.script_module(m, "a test")):
        for _ in range(2):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                script(BadInit())
            assert [w.category for w in caught if "instance-level" in str(w.message)] == [
                UserWarning
            ]


def test_no_warning() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torchscript.script_module(Overloaded(), "a test")
        torchscript.script_module(nn.Bilinear(2, 2, 2), "a test")  # a class new here
        torchscript.script_module(nn.Bilinear(2, 2, 2), "a test")
    assert [str(w.message) for w in caught] == []
