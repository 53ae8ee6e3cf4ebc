"""The main job: ``remote-module demo`` end to end, at a small size, in real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import remote_module
from remote_module.__main__ import main as remote_module_main
from remote_module._process import free_port
from remote_module.demo import cli, launch
from remote_module.demo.config import DemoConfig
from tests.support import torchs_own

ROOT = Path(__file__).resolve().parent.parent
# Small enough for seconds of training, large enough to learn the held-out split.
SMALL = ["--steps", "40", "--batch-size", "16", "--num-embeddings", "2000"]
# The one line of the demo's own on stderr a run below may print: it was asked for a plot.
NO_MATPLOTLIB = "remote-module demo: --plot needs matplotlib: pip install 'remote-module[plot]'"


def _noise(result: subprocess.CompletedProcess[str], dead: str | None = None) -> list[str]:
    """What a run printed besides its report, its own errors and what torch prints on its own
    for plain RPC use with a worker killed (``dead``): nothing is ours. The demo hides torch's
    own warnings for its own calls (``remote_module.demo.quiet``), so only the lines of
    ``dead``'s death are torch's; and torch 2.8's Gloo lines stay off stdout."""
    on_stderr = torchs_own.not_torchs(result.stderr, dead)
    gloo = [line for line in result.stdout.splitlines() if "[Gloo]" in line]
    torchs_warnings = [line for line in result.stderr.splitlines() if "Warning: " in line]
    return [line for line in on_stderr if line != NO_MATPLOTLIB] + gloo + torchs_warnings


def _demo(
    *args: str, cwd: Path, timeout: float = 180, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **extra_env)
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
        "--eval-every",
        "20",
        "--json",
        "summary.json",
        "--plot",
        "loss.png",
        "--checkpoint",
        "ckpt.pt",
        cwd=work,
        # Shows the DeprecationWarnings Python hides by default, in every worker too.
        PYTHONWARNINGS="default",
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
        "held_out_accuracy",
        "evaluations",
    }
    assert expected <= summary.keys()
    assert summary["steps"] == 40 and summary["trainers"] == 2
    assert summary["remote_calls"] == 80
    assert summary["samples_per_s"] > 0 and summary["mean_remote_call_ms"] > 0
    assert len(summary["losses"]) == 40
    assert summary["last_loss_mean"] < summary["first_loss_mean"] - 0.05, summary["losses"]
    assert "remote calls" in result.stdout and "last loss" in result.stdout
    assert "held-out accuracy" in result.stdout


def test_demo_learns_the_held_out_split(
    first_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, work = first_run
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((work / "summary.json").read_text())
    evaluations = summary["evaluations"]
    # Before the first step, every --eval-every steps, after the last.
    assert [e["step"] for e in evaluations] == [0, 20, 40]
    assert all(e.keys() == {"step", "accuracy", "loss"} for e in evaluations)
    before, after = evaluations[0], evaluations[-1]
    assert after["accuracy"] >= 0.9, evaluations  # chance is 0.25
    assert after["accuracy"] - before["accuracy"] >= 0.4, evaluations  # learnt, not given
    assert summary["held_out_accuracy"] == after["accuracy"]
    assert after["loss"] <= before["loss"] / 2, evaluations
    assert summary["last_loss_mean"] <= summary["first_loss_mean"] / 2, summary["losses"]


def test_demo_trains_with_8_bit_embeddings_on_the_wire(
    first_run: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    """The same run with --wire-dtype int8 learns as well (same seed; the full-size figure is
    benchmarks' demo_wire) and says which wire it used, in the table, the JSON and the plot."""
    result = _demo(*SMALL, "--wire-dtype", "int8", "--json", "int8.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "int8.json").read_text())
    default = json.loads((first_run[1] / "summary.json").read_text())
    assert summary["wire_dtype"] == "int8" and default["wire_dtype"] == "float32"
    assert "embeddings on the wire            int8" in result.stdout
    # The label shows only through the ids: the model learns it by training their embeddings,
    # whose gradients came back through the 8-bit wire (chance is 0.25).
    assert summary["held_out_accuracy"] >= 0.9, summary["evaluations"]
    assert abs(summary["held_out_accuracy"] - default["held_out_accuracy"]) <= 0.05


def test_a_wire_dtype_outside_the_choices_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.parse(["--wire-dtype", "float32"])
    assert exited.value.code == 2
    assert "--wire-dtype: invalid choice: 'float32'" in capsys.readouterr().err


def test_killing_the_parameter_server_fails_over_and_training_goes_on(tmp_path: Path) -> None:
    kill_at, every = 20, 10
    result = _demo(
        *SMALL,
        "--kill-owner-at",
        str(kill_at),
        "--checkpoint-every",
        str(every),
        "--eval-every",
        "10",
        "--json",
        "summary.json",
        "--plot",
        "loss.png",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    failover = summary["failover"]
    assert failover["killed_at_step"] == kill_at and failover["step"] == kill_at
    assert (failover["failed_owner"], failover["new_owner"]) == ("ps", "ps-standby")
    # Every trainer met the death at that step and went on from a checkpoint of the
    # background ones (after every 10 calls: one eval and 20 steps per trainer make 42).
    assert [entry["trainer"] for entry in failover["trainers"]] == [0, 1]
    assert all(entry["step"] == kill_at for entry in failover["trainers"])
    assert failover["checkpoint_version"] is not None and failover["checkpoint_version"] >= 1
    assert 0 <= failover["steps_lost"] <= every
    assert 0 < failover["seconds"] < 60
    # Training went on: every step ran, and the held-out split is learnt all the same.
    assert len(summary["losses"]) == 40
    assert summary["remote_calls"] >= 80
    assert summary["held_out_accuracy"] >= 0.9, summary["evaluations"]
    assert "failover" in result.stdout and "ps-standby took over" in result.stdout
    plotted = tmp_path / "loss.png"
    assert plotted.is_file() or "needs matplotlib" in result.stderr
    # Nothing on stderr but TensorPipe's lines for the killed worker and the shutdown without
    # grace: no RRef left to the dead owner and released (torch would retry, and log, its
    # deletion), none still held at the shutdown ("Detected RRef Leaks").
    assert _noise(result, dead="ps") == [], result.stderr[-3000:]


def test_kill_owner_at_must_be_a_step_of_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        cli.parse(["--steps", "10", "--kill-owner-at", "10"])
    assert raised.value.code == 2
    assert "--kill-owner-at" in capsys.readouterr().err


def test_a_run_prints_no_warning_and_no_bar_when_not_on_a_terminal(
    first_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, _ = first_run
    assert result.returncode == 0, result.stderr[-3000:]
    # Not one line, even with -W default (not torch's own either: the demo's own calls).
    assert _noise(result) == [], result.stderr[-3000:]
    assert set(result.stderr.splitlines()) <= {NO_MATPLOTLIB}, result.stderr[-3000:]
    assert "step/s" not in result.stderr and "training" not in result.stderr, result.stderr


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
        "--eval-every",
        "0",
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
    # The embedding and the head both come back: accurate before the first resumed step.
    assert [e["step"] for e in resumed["evaluations"]] == [40, 45]
    assert resumed["evaluations"][0]["accuracy"] >= 0.85, resumed["evaluations"]
    # Starting from trained weights, the first resumed losses are near the end of the first run.
    first = json.loads((work / "summary.json").read_text())
    assert resumed["first_loss_mean"] < first["first_loss_mean"]
    assert torch.load(work / "ckpt2.pt", weights_only=True)["steps"] == 45


def test_a_failing_trainer_ends_the_demo_with_a_clear_error(tmp_path: Path) -> None:
    started = time.monotonic()
    result = _demo(*SMALL, "--batch-size", "0", cwd=tmp_path, timeout=120)
    assert result.returncode != 0
    assert "--batch-size must be positive" in result.stderr
    assert time.monotonic() - started < 100


def test_a_run_leaves_no_worker_process_and_no_file_behind(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "remote_module", "demo", *SMALL, "--steps", "3"],
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
    # No checkpoint (or anything else) unless a flag asks for it.
    assert list(tmp_path.iterdir()) == []


def test_under_torchrun_every_rank_joins_instead_of_spawning(tmp_path: Path) -> None:
    # The multi-host entry point, on one host: torchrun starts the 4 ranks, each joins.
    # --standalone: torchrun binds its store's port itself (a port chosen here first could be
    # taken before it binds), and the demo's trainers meet at that store too.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "4",
            "-m",
            "remote_module",
            "demo",
            *SMALL,
            "--steps",
            "10",
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
    # Every RRef released before shutdown (a leaked one keeps its owner waiting 100 s there).
    assert "RRef Leaks" not in result.stderr, result.stderr[-3000:]


def test_ranks_of_a_launcher_without_a_store_meet_at_rank_0s(tmp_path: Path) -> None:
    # Only RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, as a launcher that hosts no store
    # gives them: rank 0 hosts the store, and init_rpc's env:// store shares that server.
    # (The port is chosen here and bound by rank 0 a moment later: no launcher binds it.)
    port = str(free_port())
    env = {"WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    command = [sys.executable, "-m", "remote_module", "demo", *SMALL, "--steps", "10"]
    ranks = [
        subprocess.Popen(
            [*command, *(["--json", "env.json"] if rank == 0 else [])],
            cwd=tmp_path,
            env=dict(env, RANK=str(rank)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(4)
    ]
    try:
        errors = [rank.communicate(timeout=180)[1] for rank in ranks]
    finally:
        for rank in ranks:
            rank.kill()
    assert [rank.returncode for rank in ranks] == [0, 0, 0, 0], errors
    summary = json.loads((tmp_path / "env.json").read_text())
    assert summary["steps"] == 10 and summary["remote_calls"] == 20


STORE_TIMEOUT_S = 60.0  # a store operation's own bound; none is meant to wait


def _rank_0s_store() -> dist.TCPStore:
    """A store as rank 0 hosts it where the launcher does not, on a free port."""
    return dist.TCPStore(
        "127.0.0.1",
        0,
        is_master=True,
        wait_for_workers=False,
        timeout=timedelta(seconds=STORE_TIMEOUT_S),
        multi_tenant=True,
    )


def test_the_store_host_leaves_only_after_every_rank_says_its_shutdown_is_through() -> None:
    # The race behind test_ranks_of_a_launcher_without_a_store_meet_at_rank_0s (1 of 2 loaded
    # runs before the fix): rank 0 hosts the store, and a rank still in rpc.shutdown's last
    # store step lost its connection when rank 0 had left. Here, rank 0's leave is held until
    # both other ranks of 3 say they are through.
    config = DemoConfig(timeout=60.0)
    host = _rank_0s_store()
    clients = [
        dist.TCPStore("127.0.0.1", host.port, timeout=timedelta(seconds=STORE_TIMEOUT_S))
        for _ in range(2)
    ]
    left = threading.Event()

    def host_leaves() -> None:
        launch._store_host_leaves_last(host, 0, 3, config)
        left.set()

    thread = threading.Thread(target=host_leaves, daemon=True)
    thread.start()
    launch._store_host_leaves_last(clients[0], 1, 3, config)
    # Without the wait the host is gone at once; with it, it waits for rank 2 (a slow host
    # only makes this pass for the wrong reason, never fail for a right one).
    assert not left.wait(timeout=1.0), "rank 0 left while rank 2 was still shutting down"
    launch._store_host_leaves_last(clients[1], 2, 3, config)
    assert left.wait(timeout=config.timeout), "rank 0 did not leave once every rank was through"
    thread.join(timeout=config.timeout)


def test_the_store_host_waits_for_a_silent_rank_no_longer_than_the_rpc_timeout() -> None:
    config = DemoConfig(timeout=0.5)
    host = _rank_0s_store()
    started = time.monotonic()
    launch._store_host_leaves_last(host, 0, 3, config)  # ranks 1 and 2 never say
    waited = time.monotonic() - started
    # At least the timeout; at most the timeout plus 5 s of slack for a loaded machine.
    assert config.timeout <= waited <= config.timeout + 5.0, waited


def test_every_flag_has_help_and_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        remote_module_main(["demo", "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert "``" not in text and "::" not in text, text  # plain text, not reST
    settings = [
        action for action in cli.build_parser()._actions if action.dest not in ("help", "version")
    ]
    assert len(settings) >= 14
    for action in settings:
        assert action.help and "(default: " in action.help, action.option_strings
        assert action.option_strings[0] in text
    assert "(default: 300)" in text  # defaults are rendered, not left as %(default)s


@pytest.mark.parametrize("argv", [["--version"], ["demo", "--version"]])
def test_version(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        remote_module_main(argv)
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"remote-module {remote_module.__version__}\n"
