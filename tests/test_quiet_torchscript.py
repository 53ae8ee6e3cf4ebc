"""The CLI and the runtime print none of torch's TorchScript deprecation warnings for the
TorchScript they use on purpose (``DeprecationWarning`` on torch 2.13, ``FutureWarning`` on
2.14), and hide nothing else: a user's own ``torch.jit.script`` still warns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import torch

from remote_module import _compat
from remote_module import _torchscript as torchscript

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="default")
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )


def test_cli_prints_no_torchscript_warning(tmp_path: Path) -> None:
    run = _run(
        "-m",
        "remote_module.codegen",
        "tests.scorer.interfaces:ScorerInterface",
        "tests.scorer.model:ScorerProtocol",
        "--output-dir",
        str(tmp_path),
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""


def test_caller_and_owner_print_no_torchscript_warning() -> None:
    run = _run("-m", "tests.support.quiet_torchscript")
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("done")
    assert "torch.jit" not in run.stderr and "TorchScript" not in run.stderr, run.stderr


# What torch itself still prints for such a program (the README lists them): its own RPC
# start-up, the user's own torch.jit.script, and torch.distributed.optim's own TorchScript
# (its interfaces and scripted functional optimizers, at import and on the owners).
TORCHS_OWN = (
    "You are using a Backend <class 'torch.distributed.distributed_c10d.ProcessGroupGloo'>",
    "`torch.jit.script` is deprecated",
    "`torch.jit.interface` is deprecated",
    "`TorchScript` support for functional optimizers is deprecated",
)


def test_a_three_worker_program_warns_nothing_of_ours(tmp_path: Path) -> None:
    run = _run("-m", "tests.support.quiet_program", str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    seen = [w for rank in range(3) for w in json.loads((tmp_path / f"{rank}.json").read_text())]
    # Raised with our code on the stack: only the one the program asks for on purpose.
    ours = [w["message"] for w in seen if w["ours"]]
    assert len(ours) == 1 and "names another worker" in ours[0], ours
    others = {w["message"] for w in seen if not w["ours"]}
    assert {message for message in others if not message.startswith(TORCHS_OWN)} == set()


def test_only_torchs_two_messages_are_silenced() -> None:
    def double(x: int) -> int:
        return 2 * x

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torchscript.on_purpose():
            torchscript.script(double, "a test")
            warnings.warn("something else", DeprecationWarning, stacklevel=1)
            warnings.warn("`torch.jit.script` is deprecated", UserWarning, stacklevel=1)
        torch.jit.script(double)  # the user's own: still warned about
    messages = [(type(w.message), str(w.message)) for w in caught]
    assert (DeprecationWarning, "something else") in messages
    assert (UserWarning, "`torch.jit.script` is deprecated") in messages
    deprecations = [m for k, m in messages if k in (DeprecationWarning, FutureWarning)]
    warns = any(text.startswith("`torch.jit.script`") for text, _ in _compat.TORCHSCRIPT_NOTICES)
    assert sum("`torch.jit.script` is deprecated" in m for m in deprecations) == int(warns)


def test_the_notices_are_known_as_torch_words_them() -> None:
    # on_purpose skips its filter swap where the filters already drop these texts: they must
    # be torch's own (a new wording would make that check guess).
    def triple(x: int) -> int:
        return 3 * x

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.jit.script(triple)

        @torch.jit.interface
        class _Interface:
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                pass

    notices = [(str(w.message), type(w.message)) for w in caught if "torch.jit." in str(w.message)]
    # Exactly what this torch says: both notices from 2.10, none before (remote_module._compat).
    assert set(notices) == set(_compat.TORCHSCRIPT_NOTICES)
    assert {w.filename for w in caught} <= {torch.jit._script.__file__}


def test_no_filter_swap_where_the_filters_already_drop_the_notices() -> None:
    def quadruple(x: int) -> int:
        return 4 * x

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for category in (DeprecationWarning, FutureWarning):
            warnings.filterwarnings("ignore", message="`torch.jit.", category=category)
        filters = warnings.filters
        with torchscript.on_purpose():
            assert warnings.filters is filters  # left as they are
            torchscript.script(quadruple, "a test")
            warnings.warn("something else", DeprecationWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["something else"]
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.filterwarnings(  # one line only: which line torch warns from is not known
            "ignore", message="`torch.jit.", category=DeprecationWarning, lineno=1
        )
        filters = warnings.filters
        with torchscript.on_purpose():
            # swapped for the section (where this torch warns at all: 2.10 and later)
            assert (warnings.filters is not filters) == bool(_compat.TORCHSCRIPT_NOTICES)
