"""Golden files: ``tests/golden/`` holds the rendered modules of ``tests/golden_interfaces.py``.

A change to a template or the model shows up here as a diff to review; run
``scripts/regen-golden`` to accept it.
"""

import difflib
import importlib
import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from remote_module._generator import api
from remote_module._generator.cli import plan
from remote_module._generator.model import Kind, Method
from remote_module.codegen import StaleGeneratedModuleWarning, parse_interface
from remote_module.runtime import registry
from tests import golden_interfaces

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
REGEN = ROOT / "scripts" / "regen-golden"
HOW_TO_FIX = "run scripts/regen-golden and review the diff"

# Interface -> its golden module; the same list scripts/regen-golden passes to the CLI.
INTERFACES = {
    "MinimalInterface": "minimal_interface",
    "MultiMethodInterface": "multi_method_interface",
    "ContainersInterface": "containers_interface",
}
SPECS = [f"tests.golden_interfaces:{name}" for name in INTERFACES]
FILES = sorted([f"{module}.py" for module in INTERFACES.values()] + ["__init__.py"])


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return {file.name: file.source for file in plan(SPECS)}


def test_regen_script_renders_these_interfaces() -> None:
    assert os.access(REGEN, os.X_OK), f"{REGEN} is not executable"
    text = REGEN.read_text(encoding="utf-8")
    assert re.findall(r"tests\.golden_interfaces:\w+", text) == SPECS
    assert "--output-dir tests/golden" in text


def test_golden_directory_holds_exactly_the_rendered_files(rendered: dict[str, str]) -> None:
    assert sorted(rendered) == FILES
    present = sorted(
        path.name for path in GOLDEN.iterdir() if path.is_file() and path.suffix == ".py"
    )
    assert present == FILES, f"tests/golden/ does not hold the rendered files; {HOW_TO_FIX}"


@pytest.mark.parametrize("name", FILES)
def test_golden_file_matches_current_render(name: str, rendered: dict[str, str]) -> None:
    path = GOLDEN / name
    if not path.exists():
        pytest.fail(f"tests/golden/{name} is missing; {HOW_TO_FIX}")
    golden = path.read_bytes()
    current = rendered[name].encode("utf-8")
    if golden != current:
        diff = difflib.unified_diff(
            golden.decode("utf-8").splitlines(),
            rendered[name].splitlines(),
            f"tests/golden/{name}",
            "current render",
            lineterm="",
        )
        shown = "\n".join(list(diff)[:60])
        pytest.fail(f"tests/golden/{name} differs from the current render; {HOW_TO_FIX}\n{shown}")


@pytest.mark.parametrize("name", FILES)
def test_golden_file_compiles(name: str) -> None:
    path = GOLDEN / name
    compile(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)), "exec")


@pytest.fixture(scope="module")
def golden_modules() -> Iterator[dict[str, object]]:
    """The golden modules, imported (each registers itself; the registry is restored after)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "_registered", dict(registry._registered))
        patch.setattr(registry, "_stale", dict(registry._stale))
        patch.setattr(
            registry, "_registered_non_scriptable", list(registry._registered_non_scriptable)
        )
        modules = {}
        with warnings.catch_warnings():
            warnings.simplefilter("error", StaleGeneratedModuleWarning)
            for interface, module in INTERFACES.items():
                name = f"tests.golden.{module}"
                try:
                    modules[interface] = importlib.import_module(name)
                except StaleGeneratedModuleWarning as stale:
                    pytest.fail(f"{stale}; {HOW_TO_FIX}")
                registry.register(name)  # again, should an earlier test have imported it
        yield modules


def _holds_tensors(method: Method) -> bool:
    return any(type_.contains_tensor for type_ in method.types)


@pytest.mark.parametrize("interface", list(INTERFACES))
def test_golden_module_is_the_one_used(interface: str, golden_modules: dict[str, object]) -> None:
    cls = getattr(golden_interfaces, interface)
    module = golden_modules[interface]
    assert registry.scriptable_module_name(cls, True) == f"tests.golden.{INTERFACES[interface]}"
    names = [fn.__name__ for fn in module._generated_methods]  # type: ignore[attr-defined]
    methods = parse_interface(cls).methods
    assert names == [name for m in methods for name in (api.async_name(m), m.name)]


@pytest.mark.parametrize("interface", list(INTERFACES))
def test_golden_remote_functions_script(interface: str, golden_modules: dict[str, object]) -> None:
    cls = getattr(golden_interfaces, interface)
    module = golden_modules[interface]
    model = parse_interface(cls)
    assert any(_holds_tensors(method) for method in model.methods)
    remote_functions = module._remote_functions  # type: ignore[attr-defined]
    assert [fn.__name__ for fn in remote_functions] == [api.remote_name(m) for m in model.methods]
    for method in model.methods:
        fn = torch.jit.script(getattr(module, api.remote_name(method)))
        # The remote function and its keyed twin share one body, which gets the module.
        body = torch.jit.script(getattr(module, f"_rm_run_{method.name}"))
        assert f"._rm_run_{method.name}\n" in fn.code
        # Tensors move through the generated movers (a tensor alone through the contract's
        # ``move_tensor``); the body's ``.code`` calls exactly the movers this method's types
        # need, and the remote function's inlined graph holds the ``aten::to`` they do.
        code = body.code
        called = set(re.findall(r"\b_rm_move_\w+\b", code))
        if "remote_module._shared.move_tensor" in code:
            called.add("_rm.move_tensor")
        types = [arg.type for arg in method.arguments] + [method.returns]
        needed = {api.walker_name(model, "move", t) for t in types if t.contains_tensor}
        assert called == needed, method.name
        moves = str(fn.inlined_graph).count("aten::to(")
        assert (moves > 0) is _holds_tensors(method), method.name
    for type_ in api.movable_types(model):
        mover = torch.jit.script(_function(module, api.walker_name(model, "move", type_)))
        assert isinstance(mover, torch.jit.ScriptFunction)
        assert ("torch.to(" in mover.code) is (type_.kind is Kind.TENSOR), str(type_)


def _function(module: object, name: str) -> object:
    """A name generated code calls: the contract's (``_rm.move_tensor``) or the module's own."""
    if name.startswith("_rm."):
        return getattr(module._rm, name.removeprefix("_rm."))  # type: ignore[attr-defined]
    return getattr(module, name)


def test_minimal_forward_moves_argument_in_and_result_out(
    golden_modules: dict[str, object],
) -> None:
    forward = torch.jit.script(golden_modules["MinimalInterface"]._remote_forward)  # type: ignore[attr-defined]
    assert str(forward.inlined_graph).count("aten::to(") == 2
