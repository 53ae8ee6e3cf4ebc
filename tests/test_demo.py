"""The main job: ``remote-module demo`` end to end, at a small size, in real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from remote_module._process import free_port

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--steps", "40", "--batch-size", "16", "--num-embeddings", "2000", "--no-progress"]


def _demo(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "remote_module", "demo", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _children_of(pid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("PPid:") and int(line.split()[1]) == pid:
                found.append(int(status.parent.name))
    return found


@pytest.fixture(scope="module")
def first_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    work = tmp_path_factory.mktemp("demo")
    result = _demo(
        *SMALL,
        "--lr",
        "0.3",
        "--json",
        "summary.json",
        "--plot",
        "loss.png",
        "--checkpoint",
        "ckpt.pt",
        cwd=work,
    )
    return result, work


def test_demo_trains_and_reports(first_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    result, work = first_run
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((work / "summary.json").read_text())
    expected = {
        "steps",
        "trainers",
        "samples_per_s",
        "remote_calls",
        "mean_remote_call_ms",
        "first_loss",
        "last_loss",
        "losses",
    }
    assert expected <= summary.keys()
    assert summary["steps"] == 40 and summary["trainers"] == 2
    assert summary["remote_calls"] == 80
    assert summary["samples_per_s"] > 0 and summary["mean_remote_call_ms"] > 0
    assert len(summary["losses"]) == 40
    assert summary["last_loss_mean"] < summary["first_loss_mean"] - 0.05, summary["losses"]
    assert "remote calls" in result.stdout and "last loss" in result.stdout


def test_demo_writes_a_png_or_says_matplotlib_is_missing(
    first_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, work = first_run
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "needs matplotlib" in result.stderr
        return
    assert (work / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_resumes_from_its_checkpoint(
    first_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, work = first_run
    saved = torch.load(work / "ckpt.pt", weights_only=True)
    assert saved["steps"] == 40
    assert saved["embedding"]["bag.weight"].shape == (2000, 16)
    result = _demo(
        *SMALL,
        "--progress",
        "--steps",
        "5",
        "--resume",
        "ckpt.pt",
        "--json",
        "resumed.json",
        "--checkpoint",
        "ckpt2.pt",
        cwd=work,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # One progress bar ran for both trainers' steps, and no worker left a semaphore behind.
    assert "training" in result.stderr and "10/10" in result.stderr, result.stderr[-3000:]
    assert "leaked semaphore" not in result.stderr, result.stderr[-3000:]
    resumed = json.loads((work / "resumed.json").read_text())
    assert resumed["first_step"] == 40
    # Starting from trained weights, the first resumed losses are near the end of the first run.
    first = json.loads((work / "summary.json").read_text())
    assert resumed["first_loss_mean"] < first["first_loss_mean"]
    assert torch.load(work / "ckpt2.pt", weights_only=True)["steps"] == 45


def test_a_failing_trainer_ends_the_demo_with_a_clear_error(tmp_path: Path) -> None:
    started = time.monotonic()
    result = _demo(*SMALL, "--batch-size", "0", "--checkpoint", "", cwd=tmp_path, timeout=120)
    assert result.returncode != 0
    assert "--batch-size must be positive" in result.stderr
    assert time.monotonic() - started < 100


def test_no_worker_process_is_left_behind(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "remote_module", "demo", *SMALL, "--steps", "3", "--checkpoint", ""],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    children: set[int] = set()
    while process.poll() is None:
        children.update(_children_of(process.pid))
        time.sleep(0.2)
    assert process.wait(timeout=120) == 0
    assert children, "the demo should have spawned worker processes"
    deadline = time.monotonic() + 15  # multiprocessing's helper exits once it sees EOF
    while (alive := [pid for pid in children if Path(f"/proc/{pid}").exists()]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert not alive, f"worker processes left behind: {alive}"


def test_under_torchrun_every_rank_joins_instead_of_spawning(tmp_path: Path) -> None:
    # The multi-host entry point, on one host: torchrun starts the 4 ranks, each joins.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "4",
            "--master-port",
            str(free_port()),
            "-m",
            "remote_module",
            "demo",
            *SMALL,
            "--steps",
            "10",
            "--checkpoint",
            "",
            "--json",
            "torchrun.json",
        ],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "torchrun.json").read_text())
    assert summary["steps"] == 10 and summary["remote_calls"] == 20
