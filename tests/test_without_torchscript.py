"""Where TorchScript is unavailable (``torch.jit.script`` and ``torch.jit.interface`` raise in
every process, as torch plans), what does not need it keeps working: ``import remote_module``,
RemoteModules without an interface and with a ``typing.Protocol`` interface across real RPC
workers, and the CLI for Protocol interfaces. What needs TorchScript raises one RuntimeError
that says so.

Each check runs in fresh processes whose ``sitecustomize`` (``tests/support/no_torchscript_site``)
removes TorchScript before anything is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "tests" / "support" / "no_torchscript_site"


def _run(*args: str, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    path = [str(SITE), str(ROOT), *([str(extra_path)] if extra_path else [])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )


@pytest.fixture(scope="module")
def generated(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("without_torchscript")
    run = _run(
        "-m",
        "remote_module.codegen",
        "tests.scorer.model:ScorerProtocol",
        "--output-dir",
        str(root / "gen_protocol"),
    )
    return root, run


@pytest.fixture(scope="module")
def seen(generated: tuple[Path, subprocess.CompletedProcess[str]]) -> dict[str, Any]:
    root, cli = generated
    assert cli.returncode == 0, cli.stderr
    run = _run("-m", "tests.support.no_torchscript", str(root), extra_path=root)
    assert run.returncode == 0, run.stderr[-4000:]
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def test_the_processes_had_no_torchscript(seen: dict[str, Any]) -> None:
    assert seen["script_patched"] is True


def test_compiling_and_exporting_need_no_torchscript(seen: dict[str, Any]) -> None:
    # One graph, no break; compiled and exported results equal eager.
    assert seen["compiled_plain"] == [1, 0, True, True]
    assert seen["compiled_protocol"] == [1, 0, True, True]


def test_the_interface_decorator_gives_a_protocol_interface(seen: dict[str, Any]) -> None:
    assert seen["decorated"] == [False, 12.0, 3]


def test_remote_module_without_interface(seen: dict[str, Any]) -> None:
    assert seen["plain"] == [[3, 2], [3, 2]]
    assert seen["plain_parameters"] == 2
    assert seen["plain_eval"] is True


def test_remote_module_with_a_protocol_interface(seen: dict[str, Any]) -> None:
    assert seen["protocol"] == ["Scored", False, 3]
    assert seen["protocol_async"] == "Scored"


def test_typed_class_generated_without_torchscript(
    generated: tuple[Path, subprocess.CompletedProcess[str]], seen: dict[str, Any]
) -> None:
    root, cli = generated
    assert cli.stderr == ""
    assert sorted(path.name for path in (root / "gen_protocol").glob("*.py")) == [
        "__init__.py",
        "scorer_protocol.py",
    ]
    assert seen["typed"] == ["RemoteScorerProtocol", "Scored"]


def test_what_needs_torchscript_raises_one_clear_error(seen: dict[str, Any]) -> None:
    kind, message = seen["needs_torchscript"]
    assert kind == "TorchScriptUnavailableError"
    assert message.startswith("TorchScript is unavailable in this process")
    assert "_remote_forward" in message and "FakeScriptInterface" in message
    assert "typing.Protocol" in message


def test_cli_on_a_torchscript_interface_says_torchscript_is_unavailable() -> None:
    run = _run(
        "-m",
        "remote_module.codegen",
        "tests.support.interfaces:LinearInterface",  # a plain @torch.jit.interface
        "--output-dir",
        os.devnull,
    )
    assert run.returncode == 2
    (line,) = run.stderr.splitlines()
    assert line.startswith("remote-module-codegen: error: tests.support.interfaces:LinearInterface")
    assert "TorchScript is unavailable" in line
