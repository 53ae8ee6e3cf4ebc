"""``scripts/stress``, the load harness, run as a subprocess on tiny synthetic test modules in
``tmp_path``: its line per run, its summary, its exit status, and that neither its busy-looping
processes nor a run's pytest outlive it (on a timeout, a SIGTERM or a SIGKILL of the harness).
No RPC.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

STRESS = Path(__file__).resolve().parent.parent / "scripts" / "stress"

MODULES = {
    "pass": "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n",
    "fail": "def test_ok():\n    pass\n\n\ndef test_bad():\n    assert False\n",
    "abort": "import os\n\n\ndef test_abort():\n    os.abort()\n",
    # What torch prints at exit, after pytest gave its output back: it reaches the log.
    "leak": (
        "import atexit\n\n"
        "atexit.register(print, '[W rref_context.cpp] RRef Leaks: 1 OwnerRRef')\n\n\n"
        "def test_ok():\n    pass\n"
    ),
    # A child pytest that died (the suite's conftest): the parent exits 0, its output tells.
    "child_fatal": (
        "import atexit\n\n"
        "atexit.register(print, 'Fatal Python error: Aborted')\n\n\n"
        "def test_ok():\n    pass\n"
    ),
    # Writes its pid where the test finds it, then outlasts any timeout here.
    "sleep": (
        "import os, pathlib, time\n\n\n"
        "def test_sleep():\n"
        "    pathlib.Path(os.environ['STRESS_TEST_PID_FILE']).write_text(str(os.getpid()))\n"
        "    time.sleep(120)\n"
    ),
}

RUN_LINE = re.compile(
    r"^run (?P<i>\d+)/(?P<n>\d+)  (?P<file>\S+)  (?P<outcome>pass|fail|abort|timeout)  "
    r"(?P<seconds>[\d.]+) s  \[(?P<counts>[^\]]*)\]  leak signs (?P<leaks>\d+)"
    r"(?: \((?P<kinds>[^)]*)\))?  load (?P<load>[\d.]+)",
    re.MULTILINE,
)
SUMMARY = re.compile(
    r"^summary: (?P<runs>\d+) runs: (?P<passed>\d+) passed, (?P<failed>\d+) failed, "
    r"(?P<aborted>\d+) aborted, (?P<timed_out>\d+) timed out",
    re.MULTILINE,
)
BUSY_PIDS = re.compile(r"\(busy pids: (?P<pids>[\d ]+|none)\)")


def _module(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"test_synthetic_{kind}.py"
    path.write_text(MODULES[kind])
    return path


def _command(tmp_path: Path, *files: Path, runs: int = 2, timeout: float = 60) -> list[str]:
    return [
        sys.executable,
        str(STRESS),
        *map(str, files),
        "--runs",
        str(runs),
        "--busy",
        "1",
        "--timeout",
        str(timeout),
        "--python",
        sys.executable,
        # Out of the repository: its own rootdir, none of this suite's conftest or settings.
        "--pytest-args",
        f"-p no:randomly --rootdir {tmp_path}",
        "--log-dir",
        str(tmp_path / "logs"),
    ]


def _stress(
    tmp_path: Path, *files: Path, runs: int = 2, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, STRESS_TEST_PID_FILE=str(tmp_path / "pid"))
    return subprocess.run(
        _command(tmp_path, *files, runs=runs, timeout=timeout),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _wait_until(condition: Callable[[], bool], what: str, limit_s: float = 15) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {limit_s} s")
        time.sleep(0.05)


def _busy_pids(output: str) -> list[int]:
    match = BUSY_PIDS.search(output)
    assert match, output
    assert match.group("pids") != "none", output
    return [int(pid) for pid in match.group("pids").split()]


def _assert_gone(pids: list[int]) -> None:
    _wait_until(lambda: not any(_alive(pid) for pid in pids), f"processes {pids} gone")


def _check(
    done: subprocess.CompletedProcess[str], outcome: str, runs: int = 2
) -> list[re.Match[str]]:
    """The header came first, one line per run with ``outcome``, a matching summary; the busy
    process is gone. Returns the run lines."""
    out = done.stdout + done.stderr
    assert done.stdout.startswith("stress: torch "), out
    header = done.stdout.splitlines()[0]
    assert "busy 1 " in header and f"runs {runs}," in header, header
    pids = _busy_pids(header)
    assert len(pids) == 1, header
    lines = list(RUN_LINE.finditer(done.stdout))
    assert [m["i"] for m in lines] == [str(i) for i in range(1, runs + 1)], out
    assert all(m["n"] == str(runs) and m["outcome"] == outcome for m in lines), out
    summary = SUMMARY.search(done.stdout)
    assert summary, out
    counts = {k: int(v) for k, v in summary.groupdict().items()}
    expected = {"passed": 0, "failed": 0, "aborted": 0, "timed_out": 0}
    expected[
        {"pass": "passed", "fail": "failed", "abort": "aborted", "timeout": "timed_out"}[outcome]
    ] = runs
    assert counts == {"runs": runs, **expected}, out
    assert re.search(r"^duration: min [\d.]+ s, median [\d.]+ s, max [\d.]+ s$", out, re.M), out
    log_dir = Path(done.args[done.args.index("--log-dir") + 1])
    assert f"logs {log_dir}" in out, out
    assert len(list(log_dir.glob("run*.log"))) == runs, out
    _assert_gone(pids)
    return lines


def test_passing_module(tmp_path: Path) -> None:
    done = _stress(tmp_path, _module(tmp_path, "pass"))
    lines = _check(done, "pass")
    assert all(m["counts"] == "2 passed" and m["leaks"] == "0" for m in lines), done.stdout
    assert "leaked-RRef signs: 0:" in done.stdout
    assert "result: OK" in done.stdout
    assert done.returncode == 0, done.stdout + done.stderr


def test_failing_module(tmp_path: Path) -> None:
    done = _stress(tmp_path, _module(tmp_path, "fail"))
    lines = _check(done, "fail")
    assert all(m["counts"] == "1 failed, 1 passed" for m in lines), done.stdout
    assert "result: FAILED" in done.stdout
    assert done.returncode == 1, done.stdout + done.stderr


def test_aborting_module(tmp_path: Path) -> None:
    done = _stress(tmp_path, _module(tmp_path, "abort"))
    lines = _check(done, "abort")
    assert all(m["counts"] == "no summary" for m in lines), done.stdout
    assert done.stdout.count("rc -6 (SIGABRT)") == 2, done.stdout
    assert done.returncode == 1, done.stdout + done.stderr


def test_fatal_sign_in_output_is_an_abort(tmp_path: Path) -> None:
    """pytest exited 0, but its output shows a fatal error (a child pytest's, in the suite)."""
    done = _stress(tmp_path, _module(tmp_path, "child_fatal"))
    lines = _check(done, "abort")
    assert all(m["counts"] == "1 passed" for m in lines), done.stdout
    assert done.stdout.count("fatal: 'Fatal Python error'") == 2, done.stdout
    assert done.returncode == 1, done.stdout + done.stderr


def test_leak_sign_fails_a_passing_run(tmp_path: Path) -> None:
    done = _stress(tmp_path, _module(tmp_path, "leak"))
    lines = _check(done, "pass")
    assert all(m["leaks"] == "1" and m["kinds"] == "RRef Leaks: 1" for m in lines), done.stdout
    assert "leaked-RRef signs: 2: 'RRef Leaks' 2, 'Timed out waiting" in done.stdout
    assert "result: FAILED" in done.stdout
    assert done.returncode == 1, done.stdout + done.stderr


def test_several_files_each_run(tmp_path: Path) -> None:
    files = _module(tmp_path, "pass"), _module(tmp_path, "fail")
    done = _stress(tmp_path, *files)
    lines = list(RUN_LINE.finditer(done.stdout))
    assert [(m["i"], Path(m["file"]).name, m["outcome"]) for m in lines] == [
        ("1", files[0].name, "pass"),
        ("1", files[1].name, "fail"),
        ("2", files[0].name, "pass"),
        ("2", files[1].name, "fail"),
    ], done.stdout
    assert "summary: 4 runs: 2 passed, 2 failed, 0 aborted, 0 timed out" in done.stdout
    assert done.returncode == 1
    _assert_gone(_busy_pids(done.stdout))


def test_timeout_ends_the_run(tmp_path: Path) -> None:
    done = _stress(tmp_path, _module(tmp_path, "sleep"), runs=1, timeout=3)
    lines = _check(done, "timeout", runs=1)
    assert 3 <= float(lines[0]["seconds"]) < 60, done.stdout
    assert done.returncode == 1
    _assert_gone([int((tmp_path / "pid").read_text())])  # the sleeping pytest, killed


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_nothing_outlives_the_harness(tmp_path: Path, sig: signal.Signals) -> None:
    """SIGTERM: the harness ends its run and busy process and prints its summary. SIGKILL: the
    busy process sees its parent gone and exits by itself."""
    pid_file = tmp_path / "pid"
    harness = subprocess.Popen(
        _command(tmp_path, _module(tmp_path, "sleep"), runs=1, timeout=100),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, STRESS_TEST_PID_FILE=str(pid_file)),
    )
    try:
        assert harness.stdout is not None
        header = harness.stdout.readline()
        busy = _busy_pids(header)
        _wait_until(lambda: pid_file.exists() and pid_file.read_text() != "", "the run started")
        harness.send_signal(sig)
        rest = harness.stdout.read()
        harness.wait(timeout=30)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    sleeper = int(pid_file.read_text())
    _assert_gone(busy)
    if sig == signal.SIGTERM:
        assert "summary: 0 runs: 0 passed, 0 failed, 0 aborted, 0 timed out (interrupted)" in rest
        assert harness.returncode == 1, rest
        _assert_gone([sleeper])
    else:
        # The run's pytest is in a session of its own, which a killed harness cannot end.
        try:
            os.kill(sleeper, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize(
    "args",
    [["--runs", "0"], ["--busy", "-1"], ["--timeout", "0"], ["--python", "/nonexistent/python"]],
)
def test_bad_arguments(tmp_path: Path, args: list[str]) -> None:
    module = _module(tmp_path, "pass")
    done = subprocess.run(
        [sys.executable, str(STRESS), str(module), *args], capture_output=True, text=True
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "usage: scripts/stress" in done.stderr


def test_missing_test_file(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(STRESS), str(tmp_path / "nope.py")], capture_output=True, text=True
    )
    assert done.returncode == 2 and "no test file" in done.stderr, done.stderr
