"""The CLI and the runtime print none of torch's TorchScript deprecation warnings for the
TorchScript they use on purpose (``DeprecationWarning`` on torch 2.13, ``FutureWarning`` on
2.14), and hide nothing else: a user's own ``torch.jit.script`` still warns. A user's own
program, as the docs show it (training a scripted hybrid), prints nothing of ours: no warning
raised with our code on the stack, and on stderr nothing but what torch prints on its own for
plain RPC use (``tests/support/torchs_own.py``; the demo's runs are held to it in
``tests/test_demo.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from remote_module import _compat
from remote_module import _torchscript as torchscript
from remote_module.demo import quiet
from tests.support import torchs_own

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
    assert torchs_own.stdout_without_torchs(run.stdout).startswith("done")
    assert "torch.jit" not in run.stderr and "TorchScript" not in run.stderr, run.stderr
    assert torchs_own.not_torchs(run.stderr) == [], run.stderr


def test_a_users_training_program_prints_nothing_of_ours(tmp_path: Path) -> None:
    run = _run("-m", "tests.support.quiet_program", str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    trained = torchs_own.stdout_without_torchs(run.stdout)
    assert trained.startswith("trained [") and trained.count("\n") == 1, run.stdout
    losses = [float(loss) for loss in trained[len("trained [") : -2].split(",")]
    assert losses[-1] < losses[0], losses
    seen = [w for rank in range(3) for w in json.loads((tmp_path / f"{rank}.json").read_text())]
    # Raised with our code on the stack: only the one the program asks for on purpose.
    ours = [w["message"] for w in seen if w["ours"]]
    assert len(ours) == 1 and "names another worker" in ours[0], ours
    # Every other warning is torch's own, as Python shows it; so is every line on stderr.
    shown = [f"{w['where']}: {w['category']}: {w['message']}" for w in seen if not w["ours"]]
    assert [line for line in shown if torchs_own.not_torchs(line)] == []
    assert torchs_own.not_torchs(run.stderr) == [], run.stderr[-3000:]


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


def _optim_notice(category: type[Warning]) -> None:
    """DistributedOptimizer's notice as torch raises it: past every filter, from its own code."""
    code = (
        "import warnings\n"
        "with warnings.catch_warnings():\n"
        "    warnings.simplefilter('always')\n"
        f"    warnings.warn(message, {category.__name__}, stacklevel=1)\n"
    )
    optim = os.path.join(os.path.dirname(torch.__file__), "distributed", "optim", "optimizer.py")
    exec(compile(code, optim, "exec"), {"message": NOTICE})


NOTICE = "`TorchScript` support for functional optimizers is deprecated and will be removed"


def test_the_demo_hides_torchs_notices_from_torchs_own_code_only() -> None:
    with warnings.catch_warnings(record=True) as caught:  # restores filters and showwarning
        warnings.simplefilter("always")
        quiet.hide_torchs_notices()
        _optim_notice(DeprecationWarning)  # hidden
        for message, category in [
            (NOTICE, DeprecationWarning),  # not from torch's code: shown
            ("`torch.jit.script` is deprecated", FutureWarning),  # ours would be: shown
            ("something else is deprecated", DeprecationWarning),
        ]:
            warnings.warn(message, category, stacklevel=1)
    assert [(str(w.message), w.category) for w in caught] == [
        (NOTICE, DeprecationWarning),
        ("`torch.jit.script` is deprecated", FutureWarning),
        ("something else is deprecated", DeprecationWarning),
    ]


def test_the_gloo_connection_lines_are_dropped_from_stdout_and_nothing_else(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with quiet.without_gloos_connection_lines():
        os.write(1, b"[Gloo] Rank 1 is connected to 3 peer ranks. ")
        os.write(1, b"Expected number of connected peer ranks is : 3\n")
        print("kept", flush=True)
        os.write(1, b"[Gloo] Rank 1 is connected to 3 peer ranks, and more\n")
    print("after")
    assert capfd.readouterr().out == (
        "kept\n[Gloo] Rank 1 is connected to 3 peer ranks, and more\nafter\n"
    )
