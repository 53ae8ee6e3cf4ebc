"""The benchmark suite at its smallest size, so it cannot rot. No timing assertions."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.run import FRESH_REPEATS_FACTOR
from benchmarks.spec import FIGURES

ROOT = Path(__file__).resolve().parent.parent
# A hang guard, not a speed bound: idle the smoke run takes about 150 s on 2 cores, and a
# loaded shared host (load average 10-20) has stretched it past 240 s; 6x idle leaves that slack.
HANG_GUARD_S = 900


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@pytest.mark.timeout(HANG_GUARD_S + 60)  # the suite-wide 300 s would cut it first
def test_smoke_suite_runs_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.run",
            "--size",
            "smoke",
            "--repeats",
            "1",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["meta"]["repeats"] == 1
    assert set(report["figures"]) == {figure.name for figure in FIGURES}
    for figure in FIGURES:
        rows = report["figures"][figure.name]["rows"]
        samples_each = report["figures"][figure.name]["repeats"]
        # Fresh-process figures take one sample per process pair, FRESH_REPEATS_FACTOR a repeat.
        fresh = FRESH_REPEATS_FACTOR["smoke"]
        assert samples_each == (fresh if figure.launch == "fresh" else 1), figure.name
        assert set(rows) == {row.name for row in figure.rows}, figure.name
        for row in figure.rows:
            entry = rows[row.name]
            where = f"{figure.name}/{row.name}"
            assert set(entry["impls"]) == set(row.impls), where
            for impl, stats in entry["impls"].items():
                assert len(stats["samples"]) == samples_each, (where, impl)
                for key in ("median", "min", "max"):
                    assert _positive(stats[key]), (where, impl, key, stats[key])
                assert all(_positive(value) for value in stats["samples"]), (where, impl)
            expected = (
                {impl for impl in row.impls if impl != row.reference} if row.reference else set()
            )
            assert set(entry["ratios"]) == expected, where
            for impl, ratio in entry["ratios"].items():
                for key in ("median", "min", "max"):
                    assert _positive(ratio[key]), (where, impl, key, ratio[key])
    assert "figure" in completed.stdout and "ours" in completed.stdout
