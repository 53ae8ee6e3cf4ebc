"""Before and after, side by side in one run: ``python -m benchmarks.compare REV [--only NAME
...] [--rounds N] [--repeats N] [--json PATH]``.

Runs ``benchmarks.run`` alternately on the code of git revision REV (exported to a temporary
directory with ``git archive``: the package, the benchmarks and their stubs as committed there)
and on this working tree, ``--rounds`` times each, in rotating order (before after, after
before, ...), so that both meet the same machine load. Prints, per figure, row and
implementation, the median and min-max of the paired per-repeat ratios (against the row's
reference) over every repeat of every round, before and after; ``--json`` writes them with
each round's full report.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.spec import rotated

ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT_S = 3600.0
SIDES = ("before", "after")


def _export(revision: str, into: Path) -> None:
    """The tree of ``revision`` into the directory ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", revision],
        capture_output=True,
        check=True,
        timeout=120,
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True, timeout=120)


def _run(tree: Path, only: Sequence[str], repeats: int, out: Path) -> dict[str, Any]:
    """One ``benchmarks.run`` on ``tree``'s code; its JSON report."""
    command = [sys.executable, "-m", "benchmarks.run", "--repeats", str(repeats)]
    command += ["--json", str(out), *(["--only", *only] if only else [])]
    done = subprocess.run(
        command,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise RuntimeError(f"benchmarks.run on {tree} failed: {done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def _paired_ratios(report: dict[str, Any]) -> dict[tuple[str, str, str], list[float]]:
    """Every paired per-repeat ratio in ``report``: (figure, row, impl) -> ratios."""
    ratios: dict[tuple[str, str, str], list[float]] = {}
    for figure_name, figure in report["figures"].items():
        for row_name, row in figure["rows"].items():
            reference = row["reference"]
            if reference is None:
                continue
            base = row["impls"][reference]["samples"]
            for impl, stats in row["impls"].items():
                if impl != reference:
                    paired = [a / b for a, b in zip(stats["samples"], base, strict=True)]
                    ratios[(figure_name, row_name, f"{impl}/{reference}")] = paired
    return ratios


def compare(revision: str, only: Sequence[str], rounds: int, repeats: int) -> dict[str, Any]:
    reports: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory(prefix="remote-module-compare-") as workdir:
        before = Path(workdir) / "before"
        before.mkdir()
        _export(revision, before)
        trees = {"before": before, "after": ROOT}
        for index in range(rounds):
            for side in rotated(list(SIDES), index):
                print(f"[compare] round {index + 1}/{rounds}: {side}", file=sys.stderr, flush=True)
                out = Path(workdir) / f"{side}-{index}.json"
                reports[side].append(_run(trees[side], only, repeats, out))
    merged: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    for side in SIDES:
        for report in reports[side]:
            for key, values in _paired_ratios(report).items():
                merged.setdefault(key, {s: [] for s in SIDES})[side].extend(values)
    return {
        "revision": revision,
        "rounds": rounds,
        "repeats": repeats,
        "ratios": {
            "/".join(key): {
                side: _spread(values) | {"samples": values} for side, values in sides.items()
            }
            for key, sides in merged.items()
        },
        "reports": reports,
    }


def _spread(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan")}
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def table(result: dict[str, Any]) -> str:
    lines = [f"paired ratios, {result['rounds']} rounds x {result['repeats']} repeats a side"]
    width = max((len(key) for key in result["ratios"]), default=10)
    lines.append(f"{'figure/row/ratio'.ljust(width)}  before (median [min-max])  after")
    for key, sides in result["ratios"].items():
        cells = [
            f"{s['median']:.3f}x [{s['min']:.3f}-{s['max']:.3f}]"
            for s in (sides["before"], sides["after"])
        ]
        lines.append(f"{key.ljust(width)}  {cells[0].ljust(25)}  {cells[1]}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__)
    parser.add_argument("revision", help="the git revision measured as 'before'")
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = compare(args.revision, args.only, args.rounds, args.repeats)
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
