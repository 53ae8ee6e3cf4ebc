"""``remote-module-codegen`` as users run it: a subprocess, exit codes, files on disk."""

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from remote_module._generator.cli import main
from remote_module._shared import __version__
from tests.support import torchs_own

ROOT = Path(__file__).resolve().parent.parent
PROG = "remote-module-codegen"
SPECS = ["tests.support.interfaces:LinearInterface", "tests.support.interfaces:ShapesInterface"]
FILES = ["__init__.py", "linear_interface.py", "shapes_interface.py"]
TIMEOUT_S = 120

BAD_DEFAULTS = """
import torch
from torch import Tensor


@torch.jit.interface
class TensorDefault:
    def forward(self, x: Tensor, bias: Tensor = torch.ones(1)) -> Tensor:
        pass


@torch.jit.interface
class MatrixDefault:
    def forward(self, x: Tensor, bias: Tensor = torch.ones(2, 2)) -> Tensor:
        pass


@torch.jit.interface
class Unannotated:
    def forward(self, x, scale: float = 1.0) -> Tensor:
        pass
"""


def _command(console_script: bool = False) -> list[str]:
    if not console_script:
        return [sys.executable, "-m", "remote_module.codegen"]
    script = Path(sys.executable).parent / PROG
    found = str(script) if script.exists() else shutil.which(PROG)
    assert found, f"console script {PROG} is not installed"
    return [found]


def _start(args: Sequence[str], console_script: bool = False, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*_command(console_script), *args],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _python_path(directory: Path) -> str:
    return os.pathsep.join(filter(None, [str(directory), os.environ.get("PYTHONPATH")]))


def _probe_prints_ok(probe: str, path: Path) -> None:
    """Run ``probe`` in a new interpreter with ``path`` importable: it must print ``ok`` (and
    where it starts RPC, nothing else but torch's own)."""
    run = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": _python_path(path)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert run.returncode == 0, run.stderr
    assert torchs_own.stdout_without_torchs(run.stdout) == "ok\n"


def _finish(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    stdout, stderr = process.communicate(timeout=TIMEOUT_S)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _run(args: Sequence[str], console_script: bool = False) -> subprocess.CompletedProcess[str]:
    return _finish(_start(args, console_script))


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {
        path.name: (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(directory.iterdir())
        if path.is_file()
    }


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same specs rendered twice into separate directories (module and console script),
    and once with ``--no-cuda``, concurrently."""
    base = tmp_path_factory.mktemp("cli")
    directories = {
        "module": base / "first" / "gen_first",
        "script": base / "second" / "gen_second",
        "no_cuda": base / "third" / "gen_no_cuda",
    }
    runs = [
        _start([*SPECS, "--output-dir", str(directories["module"])]),
        _start([*SPECS, "--output-dir", str(directories["script"])], console_script=True),
        _start([*SPECS, "--output-dir", str(directories["no_cuda"]), "--no-cuda"]),
    ]
    for run in map(_finish, runs):
        assert run.returncode == 0, run.stderr
        assert run.stdout == ""
    return directories


def test_writes_one_module_per_interface(generated: dict[str, Path]) -> None:
    for directory in generated.values():
        assert sorted(path.name for path in directory.iterdir()) == FILES
    init = ast.parse((generated["module"] / "__init__.py").read_text(encoding="utf-8"))
    imported = {
        alias.name
        for node in init.body
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None
        for alias in node.names
    }
    assert imported == {"linear_interface", "shapes_interface"}


def test_output_is_deterministic_across_directories_and_entry_points(
    generated: dict[str, Path],
) -> None:
    first = {name: data for name, (data, _) in _snapshot(generated["module"]).items()}
    second = {name: data for name, (data, _) in _snapshot(generated["script"]).items()}
    assert first == second
    for name, data in first.items():
        text = data.decode("utf-8")
        assert str(generated["module"]) not in text, name
        assert str(ROOT) not in text, name


def test_generated_package_is_importable(generated: dict[str, Path]) -> None:
    probe = textwrap.dedent(
        """
        import warnings
        from remote_module.codegen import StaleGeneratedModuleWarning
        from remote_module.runtime import registry
        warnings.simplefilter("error", StaleGeneratedModuleWarning)
        import gen_first
        from tests.support.interfaces import LinearInterface, ShapesInterface
        expected = {LinearInterface: "linear_interface", ShapesInterface: "shapes_interface"}
        for cls, module in expected.items():
            assert registry.scriptable_module_name(cls, True) == f"gen_first.{module}"
            generated = getattr(gen_first, module)
            names = [fn.__name__ for fn in generated._generated_methods]
            assert names[:2] == ["forward_async", "forward"], names
        print("ok")
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": _python_path(generated["module"].parent)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "ok\n"


def test_second_run_rewrites_nothing(generated: dict[str, Path], tmp_path: Path) -> None:
    directory = tmp_path / "again"
    shutil.copytree(generated["module"], directory, copy_function=shutil.copy2)
    before = _snapshot(directory)
    run = _run([*SPECS, "--output-dir", str(directory)])
    assert run.returncode == 0, run.stderr
    assert _snapshot(directory) == before  # same bytes and same st_mtime_ns


def test_check_passes_when_fresh(generated: dict[str, Path]) -> None:
    before = _snapshot(generated["module"])
    run = _run([*SPECS, "--output-dir", str(generated["module"]), "--check"])
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
    assert _snapshot(generated["module"]) == before


def test_check_fails_on_a_missing_or_edited_file(
    generated: dict[str, Path], tmp_path: Path
) -> None:
    missing = tmp_path / "missing"
    edited = tmp_path / "edited"
    for directory in (missing, edited):
        shutil.copytree(generated["module"], directory)
    (missing / "shapes_interface.py").unlink()
    with (edited / "linear_interface.py").open("a", encoding="utf-8") as file:
        file.write("# a local edit\n")
    edited_bytes = (edited / "linear_interface.py").read_bytes()
    runs = [
        _start([*SPECS, "--output-dir", str(directory), "--check"])
        for directory in (missing, edited)
    ]
    for run, name, directory in zip(
        map(_finish, runs),
        ["shapes_interface.py", "linear_interface.py"],
        [missing, edited],
        strict=True,
    ):
        assert run.returncode == 1, run.stderr
        assert str(directory / name) in run.stderr
        assert len(run.stderr.splitlines()) == 1, run.stderr
        assert "Traceback" not in run.stderr
    assert not (missing / "shapes_interface.py").exists()  # --check writes nothing
    assert (edited / "linear_interface.py").read_bytes() == edited_bytes


def test_no_cuda_emits_no_movers(generated: dict[str, Path]) -> None:
    for name in ("linear_interface.py", "shapes_interface.py"):
        moving = (generated["module"] / name).read_text(encoding="utf-8")
        staying = (generated["no_cuda"] / name).read_text(encoding="utf-8")
        # Tensors move through the contract's move_tensor, containers of them through a
        # generated mover each (ShapesInterface has some).
        assert "_rm.move_tensor(" in moving and "_rm_target" in moving
        assert ("def _rm_move_" in moving) is (name == "shapes_interface.py")
        assert "def _rm_move_" not in staying
        assert "_rm_move_" not in staying
        assert "move_tensor" not in staying and "_rm_target" not in staying
        assert "MOVES_CPU_TENSORS_TO_DEVICE = False" in staying


def test_non_scriptable_module_only_for_remote_modules_own_build(tmp_path: Path) -> None:
    """A user package gets no non_scriptable.py (remote_module ships it); ``--non-scriptable``
    writes the one remote_module ships, byte for byte, whatever ``--no-cuda`` says."""
    shipped = ROOT / "remote_module" / "_non_scriptable.py"
    for flags in ([], ["--no-cuda"]):
        out = tmp_path / f"own{len(flags)}"
        run = _run(["--non-scriptable", *flags, "--output-dir", str(out)])
        assert run.returncode == 0, run.stderr
        assert sorted(path.name for path in out.iterdir()) == ["__init__.py", "non_scriptable.py"]
        assert (out / "non_scriptable.py").read_bytes() == shipped.read_bytes()


def test_an_old_non_scriptable_module_left_in_a_package_does_no_harm(
    generated: dict[str, Path], tmp_path: Path
) -> None:
    """A user package generated by an older version holds a non_scriptable.py. The new
    ``__init__.py`` does not import it, ``--check`` does not mind it, RemoteModules without an
    interface use the one remote_module ships, and importing it anyway only says it is stale."""
    package = tmp_path / "gen_old"
    shutil.copytree(generated["module"], package)
    from remote_module import codegen

    old = codegen.render_non_scriptable().replace(
        f'GENERATOR_VERSION = "{__version__}"', 'GENERATOR_VERSION = "0.1.0"'
    )
    assert 'GENERATOR_VERSION = "0.1.0"' in old
    (package / "non_scriptable.py").write_text(old, encoding="utf-8")
    check = _run([*SPECS, "--output-dir", str(package), "--check"])
    assert (check.returncode, check.stderr) == (0, "")
    probe = textwrap.dedent(
        """
        import warnings
        from remote_module.codegen import StaleGeneratedModuleWarning
        from remote_module.runtime import registry
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", StaleGeneratedModuleWarning)
            import gen_old
            stale = [w for w in caught if w.category is StaleGeneratedModuleWarning]
            assert not stale, [str(w.message) for w in stale]
            assert "gen_old.non_scriptable" not in __import__("sys").modules
            import gen_old.non_scriptable
        stale = [str(w.message) for w in caught if w.category is StaleGeneratedModuleWarning]
        assert len(stale) == 1 and "generated by remote_module 0.1.0" in stale[0], stale
        shipped = registry.non_scriptable_module()
        assert shipped.__name__ == "remote_module._non_scriptable", shipped
        print("ok")
        """
    )
    _probe_prints_ok(probe, tmp_path)


def test_a_registered_non_scriptable_module_serves_remote_modules_without_an_interface(
    tmp_path: Path,
) -> None:
    """RemoteModules without an interface use the module remote_module ships until a
    ``--non-scriptable`` build registers itself; then they use that one."""
    run = _run(["--non-scriptable", "--output-dir", str(tmp_path / "gen_own")])
    assert run.returncode == 0, run.stderr
    probe = textwrap.dedent(
        """
        import sys
        import torch
        import torch.distributed.rpc as rpc
        from torch import nn
        from remote_module import RemoteModule
        from remote_module._process import free_port

        options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{free_port()}")
        rpc.init_rpc("worker0", rank=0, world_size=1, rpc_backend_options=options)
        try:
            x = torch.ones(1, 3)
            shipped = RemoteModule("worker0/cpu", nn.Linear, (3, 2))
            assert shipped(x).shape == (1, 2)
            assert shipped.forward.__module__ == "remote_module._non_scriptable"
            import gen_own.non_scriptable

            own = RemoteModule("worker0/cpu", nn.Linear, (3, 2))
            assert own.forward.__module__ == "gen_own.non_scriptable", own.forward.__module__
            local = nn.Linear(3, 2)
            own.load_remote_state_dict(local.state_dict())
            assert torch.equal(own(x), local(x))
        finally:
            rpc.shutdown()
        print("ok")
        """
    )
    _probe_prints_ok(probe, tmp_path)


# Bad input: exit 2, one line on stderr naming the problem, no traceback. Every case runs
# through ``main()`` in this process; the ones marked ``True`` also as a real subprocess (each
# subprocess pays for importing torch, so not all of them).
BAD_INPUTS: dict[str, tuple[list[str], str, bool]] = {
    "no arguments": ([], "required", True),
    "no output dir": (["tests.support.interfaces:LinearInterface"], "--output-dir", False),
    "missing module": (
        ["nomodule:X", "--output-dir", "{out}"],
        "No module named 'nomodule' (run from the directory that holds it, or add that "
        "directory with --path DIR)",
        True,
    ),
    "missing submodule": (
        ["tests.support.nothing_here:X", "--output-dir", "{out}"],
        "No module named 'tests.support.nothing_here' (run from the directory",
        False,
    ),
    "missing attribute": (
        ["tests.support.interfaces:Missing", "--output-dir", "{out}"],
        "Missing",
        False,
    ),
    "not a class": (["os:path", "--output-dir", "{out}"], "os:path", True),
    "not an interface": (
        ["tests.support.interfaces:ScaledLinear", "--output-dir", "{out}"],
        "tests.support.interfaces.ScaledLinear",
        False,
    ),
    "no colon": (["foo", "--output-dir", "{out}"], "'foo'", False),
    "bad default": (
        ["cli_bad_defaults:TensorDefault", "--output-dir", "{out}"],
        "cli_bad_defaults.TensorDefault.forward, argument 'bias'",
        True,
    ),
    "bad multi-line default": (
        ["cli_bad_defaults:MatrixDefault", "--output-dir", "{out}"],
        "cli_bad_defaults.MatrixDefault.forward, argument 'bias'",
        False,
    ),
    "unannotated argument": (
        ["cli_bad_defaults:Unannotated", "--output-dir", "{out}"],
        "cli_bad_defaults.Unannotated.forward, argument 'x' has no type annotation",
        True,
    ),
    "missing import root": (
        ["--path", "/nonexistent/root", "x:Y", "--output-dir", "{out}"],
        "--path /nonexistent/root: no such directory",
        False,
    ),
}


@pytest.fixture(scope="module")
def bad_input_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding ``cli_bad_defaults.py`` (interfaces with non-literal defaults)."""
    base = tmp_path_factory.mktemp("bad")
    (base / "cli_bad_defaults.py").write_text(BAD_DEFAULTS, encoding="utf-8")
    return base


def _argv(case: str, out: Path) -> list[str]:
    return [arg.replace("{out}", str(out)) for arg in BAD_INPUTS[case][0]]


def _assert_one_line_error(case: str, returncode: int, stdout: str, stderr: str) -> None:
    assert returncode == 2, stderr
    assert "Traceback" not in stderr + stdout
    assert stdout == ""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"{PROG}: error: ")
    assert BAD_INPUTS[case][1] in lines[0]


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_exits_2_with_one_line(
    case: str,
    bad_input_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.syspath_prepend(str(bad_input_dir))
    out = tmp_path / "out"
    returncode = main(_argv(case, out))
    captured = capsys.readouterr()
    _assert_one_line_error(case, returncode, captured.out, captured.err)
    assert not out.exists()  # nothing written


@pytest.fixture(scope="module")
def bad_runs(
    bad_input_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]]]:
    """The subprocess cases, run concurrently: (output dir, finished process)."""
    base = tmp_path_factory.mktemp("bad_out")
    started = {}
    for case, (_, _, as_subprocess) in BAD_INPUTS.items():
        if as_subprocess:
            out = base / case.replace(" ", "_")
            started[case] = (out, _start(_argv(case, out), PYTHONPATH=_python_path(bad_input_dir)))
    return {case: (out, _finish(process)) for case, (out, process) in started.items()}


@pytest.mark.parametrize("case", [case for case, spec in BAD_INPUTS.items() if spec[2]])
def test_bad_input_exits_2_with_one_line_in_a_subprocess(
    case: str, bad_runs: dict[str, tuple[Path, subprocess.CompletedProcess[str]]]
) -> None:
    out, run = bad_runs[case]
    _assert_one_line_error(case, run.returncode, run.stdout, run.stderr)
    assert not out.exists()


# --- Explaining itself ---------------------------------------------------------------------


def test_version_prints_the_generator_version() -> None:
    run = _run(["--version"])
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"{PROG} {__version__}"


def test_help_explains_every_flag_and_its_default() -> None:
    run = _run(["--help"])
    assert run.returncode == 0, run.stderr
    text = " " + " ".join(run.stdout.split("positional arguments:", 1)[1].split())  # no usage
    for flag, default in [
        ("MODULE:INTERFACE", "(default: none"),
        ("--output-dir DIR", "(required)"),
        ("--path DIR", "(default: only the current directory)"),
        ("--check", "(default: write)"),
        ("--no-cuda", "(default: movement generated)"),
        ("--non-scriptable", "(default: not written)"),
    ]:
        after = text.split(f" {flag} ", 1)[1]
        assert default in after.split(" --", 1)[0], flag
    assert "--version" in text
    assert "``" not in run.stdout and "::" not in run.stdout  # plain text, no reST


def test_path_adds_import_roots_so_it_runs_from_anywhere(tmp_path: Path) -> None:
    roots = [tmp_path / "first", tmp_path / "second"]
    for root, name in zip(roots, ("first_pkg", "second_pkg"), strict=True):
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text("", encoding="utf-8")
        (root / name / "scorer.py").write_text(
            "from typing import Protocol\n\nfrom torch import Tensor\n\n\n"
            "class ScorerProtocol(Protocol):\n"
            "    def forward(self, x: Tensor) -> Tensor: ...\n",
            encoding="utf-8",
        )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    specs = ["first_pkg.scorer:ScorerProtocol", "second_pkg.scorer:ScorerProtocol"]
    out = tmp_path / "out"
    without = subprocess.run(
        [*_command(), *specs, "--output-dir", str(out)],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert without.returncode == 2 and "cannot import first_pkg.scorer" in without.stderr
    paths = [arg for root in roots for arg in ("--path", str(root))]
    specs = specs[:1]  # the two interfaces share a name: one package each would clash
    run = subprocess.run(
        [*_command(console_script=True), *specs, *paths, "--output-dir", str(out)],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert run.returncode == 0, run.stderr
    assert (out / "scorer_protocol.py").read_text(encoding="utf-8").count("first_pkg.scorer") > 0
