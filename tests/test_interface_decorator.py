"""``@remote_module.interface``: where TorchScript exists it is ``torch.jit.interface`` (without
torch's deprecation warning), also for a ``typing.Protocol`` with ``...`` bodies, which type
checkers accept; where TorchScript is unavailable the class is a ``Protocol`` interface (that
world is tested in ``tests/test_without_torchscript.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Protocol

import pytest
import torch
from torch import Tensor

import remote_module
from remote_module import _interface, _torchscript
from remote_module.codegen import InterfaceKind, parse_interface
from tests.support import decorated, decorated_module

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def test_it_is_a_torchscript_interface_with_the_signatures_as_written() -> None:
    interface = decorated.SummerInterface
    assert isinstance(interface.__torch_script_interface__, str)
    assert (interface.__module__, interface.__qualname__) == (decorated.__name__, "SummerInterface")
    parsed = parse_interface(interface)
    assert parsed.kind is InterfaceKind.SCRIPT
    assert [str(method) for method in parsed.methods] == [
        "def forward(self, x: Tensor, scale: float = 1.0) -> Summed",
        "def features(self) -> int",
    ]
    assert interface.features.__doc__ == "How many features it expects."


def test_torchscript_calls_through_it() -> None:
    def use(summer: decorated.SummerInterface, x: Tensor) -> Tensor:
        return summer.forward(x, 2.0).total

    scripted_use = torch.jit.script(use)
    module = torch.jit.script(decorated_module.Summer())
    assert scripted_use(module, torch.ones(2, 3)).item() == 12.0


def test_a_decorated_interface_says_no_torchscript_deprecation() -> None:
    # A fresh process, every warning an error: importing the decorated module warns nothing.
    probe = "import tests.support.decorated"
    run = subprocess.run(
        [sys.executable, "-W", "error", "-c", probe],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]


def test_a_plain_class_with_pass_bodies_works_too() -> None:
    # What @torch.jit.interface takes, with the new decorator in its place: the same interface.
    plain = decorated_module.PlainSummerInterface
    assert isinstance(plain.__torch_script_interface__, str)
    assert [str(m) for m in parse_interface(plain).methods] == [
        str(m) for m in parse_interface(decorated.SummerInterface).methods
    ]


def test_what_is_not_a_class_is_refused() -> None:
    with pytest.raises(TypeError, match="decorates a class"):
        remote_module.interface(lambda: None)  # type: ignore[type-var]


def test_without_torchscript_it_is_a_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_torchscript, "available", lambda: False)

    class Plain:
        def forward(self, x: Tensor) -> Tensor:
            raise NotImplementedError

    class AlreadyProtocol(Protocol):
        def forward(self, x: Tensor) -> Tensor: ...

    made = _interface.interface(Plain)
    assert made._is_protocol and not hasattr(made, "__torch_script_interface__")  # type: ignore[attr-defined]
    assert made.__qualname__ == Plain.__qualname__
    assert _interface.interface(AlreadyProtocol) is AlreadyProtocol


@pytest.mark.parametrize("checker", ["mypy", "basedpyright"])
def test_type_checkers_accept_the_decorated_protocol(checker: str) -> None:
    target = str(ROOT / "tests" / "support" / "decorated.py")
    if checker == "mypy":
        command = [_tool("mypy"), "--strict", "--no-incremental", "--follow-imports=silent", target]
    else:
        command = [_tool("basedpyright"), target]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    run = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "error" not in output.replace("0 errors", "").lower(), output
    assert "warning" not in output.replace("0 warnings", "").lower(), output
