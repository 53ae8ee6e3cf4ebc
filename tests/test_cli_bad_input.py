"""``remote-module-codegen`` on interfaces TorchScript or the generator refuses (issue 46): exit 2
and one line on stderr that names the interface (qualified), the method, the argument or the
return, and what is wrong; never TorchScript's source excerpt flattened into the line, never a
traceback, never generated code for a type it cannot carry."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from remote_module._generator.cli import main

PROG = "remote-module-codegen"
HEADER = """\
from typing import NamedTuple, Protocol, Set

import torch
from torch import Tensor

import remote_module


class Plain:
    def __init__(self, value: int) -> None:
        self.value = value


@torch.jit.script
class Scripted:
    def __init__(self, value: int) -> None:
        self.value = value
"""

# case: (the interface's class body after HEADER, the spec's class, the whole message)
CASES: dict[str, tuple[str, str, str]] = {
    "no return annotation": (
        """
        @torch.jit.interface
        class NoReturn:
            def forward(self, x: Tensor):
                pass
        """,
        "NoReturn",
        "{m}.NoReturn.forward has no return annotation; annotate it",
    ),
    "no return annotation, remote_module.interface": (
        """
        @remote_module.interface
        class NoReturn(Protocol):
            def forward(self, x: Tensor): ...
        """,
        "NoReturn",
        "{m}.NoReturn.forward has no return annotation; annotate it",
    ),
    "plain class argument": (
        """
        @torch.jit.interface
        class PlainArgument:
            def forward(self, x: Tensor, p: Plain) -> Tensor:
                pass
        """,
        "PlainArgument",
        "{m}.PlainArgument.forward, argument 'p': type {m}.Plain is a plain class; decorate it "
        "with @torch.jit.script or make it a NamedTuple (TorchScript would guess the types of "
        "its attributes)",
    ),
    "plain class result": (
        """
        @torch.jit.interface
        class PlainResult:
            def forward(self, x: Tensor) -> list[Plain]:
                pass
        """,
        "PlainResult",
        "{m}.PlainResult.forward, return type: type {m}.Plain is a plain class; decorate it "
        "with @torch.jit.script or make it a NamedTuple (TorchScript would guess the types of "
        "its attributes)",
    ),
    "variadic argument": (
        """
        @torch.jit.interface
        class Variadic:
            def forward(self, x: Tensor, *rest: Tensor) -> Tensor:
                pass
        """,
        "Variadic",
        "{m}.Variadic.forward, argument 'rest': variadic positional parameters are not "
        "supported in interfaces",
    ),
    "keyword-only argument": (
        """
        @torch.jit.interface
        class KeywordOnly:
            def forward(self, x: Tensor, *, scale: float = 1.0) -> Tensor:
                pass
        """,
        "KeywordOnly",
        "{m}.KeywordOnly.forward, argument 'scale': keyword-only parameters are not supported "
        "in interfaces",
    ),
    "unsupported type": (
        """
        @torch.jit.interface
        class SetArgument:
            def forward(self, x: Tensor, s: Set[int]) -> Tensor:
                pass
        """,
        "SetArgument",
        "{m}.SetArgument.forward, argument 's': unsupported type typing.Set[int]",
    ),
    "unknown name": (
        """
        @torch.jit.interface
        class UnknownName:
            def forward(self, x: "Missing") -> Tensor:
                pass
        """,
        "UnknownName",
        "{m}.UnknownName.forward, argument 'x': cannot resolve its annotation: name 'Missing' "
        "is not defined",
    ),
    "unknown name in a NamedTuple": (
        """
        class Row(NamedTuple):
            a: "Missing"


        class RowProtocol(Protocol):
            def forward(self, x: Row) -> Tensor: ...
        """,
        "RowProtocol",
        "{m}.RowProtocol.forward, argument 'x', type {m}.Row, field 'a': cannot resolve its "
        "annotation: name 'Missing' is not defined",
    ),
    "a body that is not pass": (
        """
        @torch.jit.interface
        class Body:
            def forward(self, x: Tensor) -> Tensor:
                return x
        """,
        "Body",
        "{m}.Body.forward: TorchScript refuses it: interfaces declarations should contain "
        "'pass' statement",
    ),
    "a base class": (
        """
        class Base:
            pass


        @torch.jit.interface
        class Derived(Base):
            def forward(self, x: Tensor) -> Tensor:
                pass
        """,
        "Derived",
        "{m}.Derived: TorchScript refuses it: TorchScript interface does not support "
        "inheritance yet. Please directly inherit from 'object' or 'nn.Module'",
    ),
    "a script class TorchScript refuses": (
        """
        @torch.jit.script
        class Starred:
            def __init__(self, *values: int) -> None:
                self.values = values


        @torch.jit.interface
        class Fine:
            def forward(self, x: Tensor) -> Tensor:
                pass
        """,
        "Fine",
        "{m}:Fine: cannot import {m}: Compiled functions can't take variable number of "
        "arguments or use keyword-only arguments with defaults ({path}, line {line})",
    ),
}


def _write(directory: Path, case: str) -> tuple[str, str, str]:
    """The case's module in ``directory``: its spec and the message expected."""
    body, cls, message = CASES[case]
    module = "cli_bad_" + "".join(c if c.isalnum() else "_" for c in case)
    path = directory / f"{module}.py"
    text = HEADER + textwrap.dedent(body)
    path.write_text(text, encoding="utf-8")
    line = text[: text.find("*values")].count("\n") + 1  # where TorchScript points, if at all
    return f"{module}:{cls}", message.format(m=module, path=path, line=line), module


@pytest.mark.parametrize("case", CASES)
def test_a_refused_interface_exits_2_with_one_line_naming_it(
    case: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    spec, message, module = _write(tmp_path, case)
    out = tmp_path / "out"
    try:
        assert main([spec, "--output-dir", str(out)]) == 2
    finally:
        sys.modules.pop(module, None)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"{PROG}: error: {message}\n"
    assert not out.exists()


@pytest.mark.parametrize("case", ["no return annotation", "plain class argument"])
def test_a_refused_interface_exits_2_with_one_line_in_a_subprocess(
    case: str, tmp_path: Path
) -> None:
    # As issue 46 saw them: TorchScript's text flattened into one line; code generated, exit 0.
    spec, message, _ = _write(tmp_path, case)
    root = Path(__file__).resolve().parent.parent
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    run = subprocess.run(
        [sys.executable, "-m", "remote_module.codegen", spec, "--output-dir", "out"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (run.returncode, run.stdout, run.stderr) == (2, "", f"{PROG}: error: {message}\n")
    assert not (tmp_path / "out").exists()


def test_the_classes_an_interface_may_name_still_generate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A @torch.jit.script class in a TorchScript interface; a plain class in a Protocol, whose
    # module runs eagerly.
    module = "cli_good_classes"
    body = """
    @torch.jit.interface
    class ScriptedArgument:
        def forward(self, x: Tensor, s: Scripted) -> Tensor:
            pass


    class PlainProtocol(Protocol):
        def forward(self, x: Tensor, p: Plain) -> Plain: ...
    """
    (tmp_path / f"{module}.py").write_text(HEADER + textwrap.dedent(body), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    specs = [f"{module}:ScriptedArgument", f"{module}:PlainProtocol"]
    try:
        assert main([*specs, "--output-dir", str(out)]) == 0
    finally:
        sys.modules.pop(module, None)
    assert (out / "scripted_argument.py").exists() and (out / "plain_protocol.py").exists()
