"""The package's layers import downward only (ARCHITECTURE.md): no import cycle anywhere inside
``remote_module`` (imports inside functions and type-only ones included), the shared terms and
the TorchScript helpers are leaves, the generator never imports the runtime, the runtime
reaches the generator in one place, the owner side never imports the caller side, and
generated code imports nothing of ours but ``remote_module.runtime.contract``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import remote_module
from remote_module import _shared

PACKAGE = Path(remote_module.__file__).parent
ROOT = PACKAGE.parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _imports(name: str) -> list[tuple[str, bool, bool]]:
    """``(imported module of ours, inside a function, under TYPE_CHECKING)`` for each import
    statement of module ``name``."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # ``from package import submodule`` imports the submodule.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        in_function = False
        parent = parents.get(node)
        while parent is not None:
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                in_function = True
            parent = parents.get(parent)
        for target in targets:
            if target == "remote_module" or target.startswith("remote_module."):
                found.append((target, in_function, _type_checking_only(node, parents)))
    return found


GRAPH = {name: _imports(name) for name in MODULES}


def test_no_import_cycle_inside_the_package() -> None:
    # Imports only type checkers read (under TYPE_CHECKING) count too: they tangle the reading.
    edges = {name: {target for target, _, _ in GRAPH[name]} for name in GRAPH}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        path.append(name)
        for target in sorted(edges[name] & MODULES.keys()):
            if state.get(target) == 1:
                cycle = [*path[path.index(target) :], target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        path.pop()
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name)


def test_the_cycle_check_sees_imports_inside_functions() -> None:
    # The registry loads the build-time non-scriptable module by name; the runtime's door to
    # the generator imports it inside functions: the walk must see those.
    assert ("remote_module._generator.parse", True, False) in GRAPH[
        "remote_module.runtime.generator"
    ]


MAX_LINES = 400  # files by role: none longer (ARCHITECTURE.md)


def test_no_file_of_ours_is_over_the_line_limit() -> None:
    long = {
        name: lines
        for name, path in MODULES.items()
        if name != "remote_module._non_scriptable"  # generated code aside
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines (split them by role): {long}"


LEAVES = [
    "remote_module._compat",
    "remote_module._int8",
    "remote_module._shared",
    "remote_module._torchscript",
    "remote_module._interface",
]


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaves_import_nothing_of_ours_but_leaves(leaf: str) -> None:
    assert {target for target, _, _ in GRAPH[leaf]} <= set(LEAVES), GRAPH[leaf]


def test_the_generator_never_imports_the_runtime() -> None:
    for name, imports in GRAPH.items():
        if name.startswith("remote_module._generator"):
            for target, _, _ in imports:
                assert target.startswith(("remote_module._generator", *LEAVES)), (name, target)


def test_the_runtime_reaches_the_generator_in_one_place() -> None:
    # (The public face, remote_module.codegen, hands upstream's instantiate_* to the registry:
    # it imports the runtime, and nothing of ours imports it.)
    for name, imports in GRAPH.items():
        if name.startswith("remote_module.runtime") and name != "remote_module.runtime.generator":
            reached = [t for t, _, _ in imports if t.startswith("remote_module._generator")]
            assert reached == [], (name, reached)
        assert all(t != "remote_module.codegen" for t, _, _ in imports), name


def test_the_owner_side_never_imports_the_caller_side() -> None:
    # Every message names remote_module.runtime.owner first; what it loads must not need the
    # caller's side (ARCHITECTURE.md, "The two sides of the runtime").
    owner = [name for name in GRAPH if name.startswith("remote_module.runtime.owner")]
    assert len(owner) >= 4
    for name in owner:
        reached = [t for t, _, _ in GRAPH[name] if t.startswith("remote_module.runtime.caller")]
        assert reached == [], (name, reached)


def _generated_files() -> list[Path]:
    folders = [ROOT / "tests" / "golden", ROOT / "tests" / "scorer" / "generated"]
    folders += [PACKAGE / "examples" / "generated"]
    files = [path for folder in folders for path in sorted(folder.glob("*.py"))]
    return [PACKAGE / "_non_scriptable.py", *files]


@pytest.mark.parametrize("path", _generated_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_generated_code_imports_only_the_runtime_contract(path: Path) -> None:
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    # Of ours: the contract; the interface's own module is the user's (here, the demo's).
    ours = {
        name
        for name in imported
        if name.startswith("remote_module.") and not name.startswith("remote_module.examples.")
    }
    assert ours <= {"remote_module.runtime.contract"}


def test_reserved_names_are_every_public_name_of_the_class() -> None:
    from torch import nn

    from remote_module.runtime.caller import construction
    from remote_module.runtime.caller.module import RemoteModule

    names = {name for klass in RemoteModule.__mro__ for name in vars(klass)}
    names.update(construction.PICKLED_ATTRIBUTES, construction.LOCAL_ATTRIBUTES, vars(nn.Module()))
    public = {name for name in names if not name.startswith("_")} - {"forward"}
    assert public == _shared.RESERVED_NAMES


def test_importing_remote_module_loads_the_whole_runtime_and_no_renderer() -> None:
    # A process that first meets remote_module through messages loads it in one piece, through
    # the owner side (remote_module.runtime.owner): so the package loads every runtime module,
    # and nothing loads later but the generator and Jinja (to render a module in memory),
    # typeguard (with the first checked call), and Dynamo never (about 1.7 s).
    runtime = sorted(
        "remote_module.runtime."
        + str(path.relative_to(ROOT / "remote_module" / "runtime"))
        .removesuffix(".py")
        .removesuffix("/__init__")
        .replace("/", ".")
        for path in (ROOT / "remote_module" / "runtime").rglob("*.py")
        if path.name != "__init__.py" or path.parent.name != "runtime"
    )
    eager = sorted(runtime)
    unwanted = ["torch._dynamo", "jinja2", "typeguard", "remote_module.codegen"]
    unwanted += [name for name in MODULES if name.startswith("remote_module._generator")]
    probe = (
        "import sys, torch\n"
        "import remote_module\n"
        f"missing = set({eager!r}) - set(sys.modules)\n"
        "assert not missing, f'not loaded: {sorted(missing)}'\n"
        f"loaded = set({unwanted!r}) & set(sys.modules)\n"
        "assert not loaded, f'imported: {sorted(loaded)}'\n"
        "from remote_module import OwnerFailover, RemoteDevice, interface, parse_remote_device\n"
        "from remote_module.runtime import errors, remote_device\n"
        "assert OwnerFailover is errors.OwnerFailover\n"
        "assert parse_remote_device is remote_device.parse_remote_device\n"
    )
    assert len(eager) > 15 and "remote_module.runtime.owner" in eager
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=ROOT, timeout=120)


COMPAT = "remote_module._compat"


def _torch_private_names(name: str) -> list[str]:
    """The dotted names module ``name`` reads that reach a private part of torch (a
    component after ``torch`` starting with one underscore) or torch's version."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    aliases: dict[str, str] = {}  # a local name -> the torch module or name it stands for
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "torch":
                    aliases[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else "torch"
                    )
                    found.append(alias.name)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                found.append(f"{node.module}.{alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts = []
            base: ast.AST = node
            while isinstance(base, ast.Attribute):
                parts.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                found.append(".".join([aliases[base.id], *reversed(parts)]))
    private = []
    for dotted in found:
        parts = dotted.split(".")[1:]
        if any(p.startswith("_") and not p.startswith("__") for p in parts) or (
            "__version__" in parts
        ):
            private.append(dotted)
    return sorted(set(private))


@pytest.mark.parametrize("name", sorted(set(MODULES) - {COMPAT}))
def test_only_the_compatibility_module_reaches_private_torch(name: str) -> None:
    # Every difference between torch versions and every private torch name lives in
    # remote_module._compat, with the versions it was checked on (issue: every torch).
    assert _torch_private_names(name) == []


def test_the_private_name_check_sees_what_it_must() -> None:
    assert "torch.__version__" in _torch_private_names(COMPAT)
    assert "torch.distributed.rpc._get_current_rpc_agent" in _torch_private_names(COMPAT)
