"""Run the benchmark suite: ``python -m benchmarks.run [--json PATH] [--plot PATH]
[--repeats N] [--size smoke|full] [--only NAME ...]``.

Every figure runs in its own worker processes on 127.0.0.1 (``benchmarks.worker``): rank 0
measures, rank 1 owns the modules. The construction and first-call figures start a new pair
for every repeat and implementation (the fresh-sequence figure for every row too), the import
figure a new interpreter (``benchmarks.importtime``), and the shaped-link figure puts rank 1
in a network namespace behind a veth pair shaped with ``tc`` (skipped, saying why, without
root and iproute2). Within a figure the implementations are interleaved A B A B; the table
shows per implementation the median and min-max over the repeats, and the median of the
per-repeat paired ratios against the row's reference (the floor, unless noted).

``--json`` writes ``{"meta": {...}, "figures": {figure: {"description", "launch", "rows":
{row: {"unit", "higher_is_better", "reference", "description", "impls": {impl: {"median",
"min", "max", "samples"}}, "ratios": {impl: {"median", "min", "max"}}}}}}}``; the
``type_check`` row adds ``"overhead_pct"`` (the checks timed alone, as % of the call).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.spec import DEFAULT_REPEATS, FIGURES, OURS, SHAPED_RATE, SIZES, Figure, rotated
from remote_module import _hosts
from remote_module._process import end_processes, free_port

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("remote_module", "benchmarks")
# Per process pair (or single process): start-up, calibration and every repeat.
PAIR_TIMEOUT_S = {"smoke": 120.0, "full": 400.0}
FRESH_TIMEOUT_S = {"smoke": 120.0, "full": 180.0}
# One sample per fresh process pair, and those vary most: four per repeat in a full run (a
# 4 ms figure whose samples span 3-10 ms), one in a smoke run (which only shows it works).
FRESH_REPEATS_FACTOR: dict[str, int] = {"smoke": 1, "full": 4}
# How a rank says that the rendezvous port went to another process first, and how many ports
# a pair tries.
PORT_TAKEN = "EADDRINUSE"
PORT_ATTEMPTS = 3

Samples = dict[str, dict[str, list[float]]]


class BenchmarkError(RuntimeError):
    """A worker failed or timed out; the message carries the tail of its output."""


class Skipped(Exception):
    """A figure this machine cannot run; the message says why."""


# --- Processes ------------------------------------------------------------------------------


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text[-limit:]


def on_loopback(rank: int) -> tuple[list[str], dict[str, str]]:
    """How to start a rank on this machine: no command prefix, no extra environment."""
    return [], {}


def run_workers(
    figure: Figure,
    size: str,
    repeats: int,
    workdir: Path,
    tag: str,
    timeout_s: float,
    impl: str | None = None,
    hosts_of: Any = on_loopback,
    row: str | None = None,
) -> Any:
    """Start the figure's process(es), wait (bounded), return what rank 0 wrote.
    ``hosts_of(rank)`` gives a rank's command prefix and environment (its host); ``row``:
    the one row a ``pair_per_row`` figure's pair measures. A rendezvous port taken by another
    process between :func:`free_port` and rank 0's listen is tried again with another one
    (on a shared machine one pair in ~100 lost that race and ended the whole run)."""
    run = partial(_run_workers, figure, size, repeats, workdir, tag, timeout_s, impl, hosts_of, row)
    for attempt in range(1, PORT_ATTEMPTS):
        try:
            return run()
        except BenchmarkError as error:
            if PORT_TAKEN not in str(error):
                raise
            print(f"[{tag}] rendezvous port taken, trying another ({attempt})", file=sys.stderr)
    return run()


def _run_workers(
    figure: Figure,
    size: str,
    repeats: int,
    workdir: Path,
    tag: str,
    timeout_s: float,
    impl: str | None,
    hosts_of: Any,
    row: str | None,
) -> Any:
    out = workdir / f"{tag}.json"
    port = free_port()
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    # The owner (and a trio's standby) first.
    ranks = [0] if figure.launch == "single" else [1, 2, 0] if figure.launch == "trio" else [1, 0]
    processes: dict[int, subprocess.Popen[bytes]] = {}
    logs: dict[int, Path] = {}
    try:
        for rank in ranks:
            logs[rank] = workdir / f"{tag}.rank{rank}.log"
            prefix, rank_env = hosts_of(rank)
            command = [
                *prefix,
                sys.executable,
                "-m",
                "benchmarks.worker",
                figure.name,
                str(rank),
                str(port),
                size,
                str(repeats),
                str(out),
            ]
            if impl is not None:
                command.append(impl)
                if row is not None:
                    command.append(row)
            with open(logs[rank], "wb") as log:
                processes[rank] = subprocess.Popen(
                    command,
                    cwd=ROOT,
                    env={**env, **rank_env},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
        _wait_all(processes, logs, tag, timeout_s, killed={1} if figure.kills_owner else set())
    finally:
        end_processes(list(processes.values()), grace_s=0)
    return json.loads(out.read_text())


def _wait_all(
    processes: dict[int, subprocess.Popen[bytes]],
    logs: dict[int, Path],
    tag: str,
    timeout_s: float,
    killed: frozenset[int] | set[int] = frozenset(),
) -> None:
    """Until every process exits 0 (the ranks in ``killed``: or by SIGKILL, on purpose); the
    first failure (or the deadline) raises at once."""
    deadline = time.monotonic() + timeout_s
    pending = dict(processes)
    while pending:
        for rank, process in list(pending.items()):
            code = process.poll()
            if code is None:
                continue
            if code != 0 and not (rank in killed and code == -signal.SIGKILL):
                raise BenchmarkError(f"{tag}: rank {rank} exited with {code}\n" + _tail(logs[rank]))
            del pending[rank]
        if not pending:
            return
        if time.monotonic() > deadline:
            rank = min(pending)
            raise BenchmarkError(
                f"{tag}: rank {rank} did not finish within {timeout_s:.0f} s\n" + _tail(logs[rank])
            )
        time.sleep(0.02)


def figure_repeats(figure: Figure, repeats: int, size: str) -> int:
    """How many samples each implementation of ``figure`` gets for ``--repeats repeats``."""
    return FRESH_REPEATS_FACTOR[size] * repeats if figure.launch == "fresh" else repeats


def collect(figure: Figure, size: str, repeats: int, workdir: Path) -> Samples:
    """Raw samples ``{row: {impl: [value per repeat]}}`` of one figure."""
    if figure.launch == "interpreter":
        return _collect_imports(figure, repeats)
    if figure.launch == "shaped":
        return _collect_shaped(figure, size, repeats, workdir)
    if figure.launch == "demo":
        return _collect_demo(figure, size, repeats, workdir)
    if figure.launch != "fresh" and not figure.pair_per_repeat:
        samples: Samples = run_workers(
            figure, size, repeats, workdir, figure.name, PAIR_TIMEOUT_S[size]
        )
        return samples
    if figure.launch != "fresh":  # one repeat per pair, the pairs' samples in order
        samples = {row.name: {impl: [] for impl in row.impls} for row in figure.rows}
        for repeat in range(repeats):
            values = run_workers(
                figure, size, 1, workdir, f"{figure.name}-{repeat}", PAIR_TIMEOUT_S[size]
            )
            for row, by_impl in values.items():
                for impl, repeat_values in by_impl.items():
                    samples[row][impl].extend(repeat_values)
        return samples
    samples = {row.name: {impl: [] for impl in row.impls} for row in figure.rows}
    # Which row each pair measures (None: every row) and its implementations.
    groups: list[tuple[str | None, list[str]]] = [
        (None, list(dict.fromkeys(impl for row in figure.rows for impl in row.impls)))
    ]
    if figure.pair_per_row:
        groups = [(row.name, list(row.impls)) for row in figure.rows]
    for repeat in range(figure_repeats(figure, repeats, size)):
        for only, impls in groups:
            for impl in rotated(impls, repeat):  # one fresh pair each
                tag = "-".join(part for part in (figure.name, only, impl, str(repeat)) if part)
                values = run_workers(
                    figure, size, 1, workdir, tag, FRESH_TIMEOUT_S[size], impl=impl, row=only
                )
                for row, value in values.items():
                    samples[row][impl].append(value)
    return samples


def compile_byte_code() -> None:
    """Byte-compile remote_module and the benchmarks, as an install leaves a package: fresh
    processes then load what upstream's (compiled at torch's install) loads, not source."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "compileall",
            "-q",
            str(ROOT / "remote_module"),
            str(ROOT / "benchmarks"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )


def warm_render_cache() -> None:
    """Render the in-memory modules of the interfaces without build-time stubs once, as any
    earlier process on a user's machine would have: the ``scriptable_first_no_codegen`` row
    and ``fresh_sequence``'s ``no_stubs`` row then measure what every later first
    construction costs (the render cache warm), in each of their samples alike."""
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from benchmarks.fresh_interfaces import PlainFirstInterface, PlainSecondInterface\n"
            "from benchmarks.interfaces import UngeneratedTinyInterface\n"
            "from remote_module.runtime import registry\n"
            "for interface in (UngeneratedTinyInterface, PlainFirstInterface, "
            "PlainSecondInterface):\n"
            "    registry.scriptable_module(interface, False)\n",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )


def _collect_imports(figure: Figure, repeats: int) -> Samples:
    """A new interpreter per repeat and implementation (``benchmarks.importtime``)."""
    (row,) = figure.rows
    samples: Samples = {row.name: {impl: [] for impl in row.impls}}
    for repeat in range(repeats + 1):  # the first round warms the file system's caches
        for impl in row.impls:
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.importtime", impl],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=FRESH_TIMEOUT_S["full"],
            )
            if done.returncode != 0:
                raise BenchmarkError(f"{figure.name}/{impl}: {done.stderr[-2000:]}")
            if repeat:
                samples[row.name][impl].append(float(done.stdout.strip().splitlines()[-1]))
    return samples


def _collect_demo(figure: Figure, size: str, repeats: int, workdir: Path) -> Samples:
    """``remote-module demo`` once per repeat and wire dtype (float32: none), in rotating
    order: its held-out accuracy and its wall time, set-up included."""
    samples: Samples = {row.name: {impl: [] for impl in row.impls} for row in figure.rows}
    impls = list(figure.rows[0].impls)
    steps = ["--trainers", "1", "--steps", "10", "--eval-every", "0"] if size == "smoke" else []
    for repeat in range(repeats):
        for impl in rotated(impls, repeat):
            summary = workdir / f"demo-{impl}-{repeat}.json"
            wire = [] if impl == "float32" else ["--wire-dtype", impl]
            command = [sys.executable, "-m", "remote_module", "demo", "--json", str(summary)]
            started = time.perf_counter()
            done = subprocess.run(
                [*command, *wire, *steps],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=PAIR_TIMEOUT_S[size],
            )
            wall = time.perf_counter() - started
            if done.returncode != 0:
                raise BenchmarkError(f"{figure.name}/{impl}: {done.stderr[-2000:]}")
            accuracy = json.loads(summary.read_text())["held_out_accuracy"]
            samples["held_out_accuracy"][impl].append(100 * accuracy)
            samples["wall"][impl].append(wall)
    return samples


def _collect_shaped(figure: Figure, size: str, repeats: int, workdir: Path) -> Samples:
    """The pair across two network namespaces joined by a veth pair shaped to
    ``SHAPED_RATE`` each way: rank 1 (the owner) inside the namespace."""
    name = f"rmbench{os.getpid() % 100000}"
    reason = _hosts.unavailable(name)
    if reason is not None:
        raise Skipped(reason)
    with _hosts.two_hosts(name, rate=SHAPED_RATE) as hosts:

        def hosts_of(rank: int) -> tuple[list[str], dict[str, str]]:
            interface = hosts.owner_if if rank == 1 else hosts.host_if
            env = {
                "RM_BENCH_ADDR": hosts.host_addr,  # rank 0 hosts the rendezvous
                "RM_BENCH_LINK": hosts.host_if,  # whose counters rank 0 reads
                "TP_SOCKET_IFNAME": interface,
                "GLOO_SOCKET_IFNAME": interface,
            }
            return (hosts.enter if rank == 1 else []), env

        samples: Samples = run_workers(
            figure, size, repeats, workdir, figure.name, PAIR_TIMEOUT_S[size], hosts_of=hosts_of
        )
    return samples


# --- Statistics -----------------------------------------------------------------------------


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(figure: Figure, samples: Samples, repeats: int, size: str) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for row in figure.rows:
        measured = samples[row.name]
        missing = [impl for impl in row.impls if not measured.get(impl)]
        if missing:
            raise BenchmarkError(f"{figure.name}/{row.name}: no samples for {missing}")
        entry: dict[str, Any] = {
            "unit": row.unit,
            "higher_is_better": row.higher_is_better,
            "reference": row.reference,
            "description": row.description,
            "impls": {
                impl: {**_spread(measured[impl]), "samples": measured[impl]} for impl in row.impls
            },
            "ratios": {},
        }
        if row.reference is not None:
            reference = measured[row.reference]
            for impl in row.impls:
                if impl == row.reference:
                    continue
                paired = [a / b for a, b in zip(measured[impl], reference, strict=True)]
                entry["ratios"][impl] = _spread(paired)
        rows[row.name] = entry
    if figure.name == "failover":  # what the failover adds beyond building the module there
        deaths = samples["death_to_first_call"][OURS]
        builds = samples["death_to_first_call"]["standby_build"]
        rows["death_to_first_call"]["beyond_build_ms"] = _spread(
            [death - build for death, build in zip(deaths, builds, strict=True)]
        )
    if figure.name == "type_check":  # the checks' share of a call: timed alone / call
        checks = samples["checks_alone"]["checks"]
        calls = samples["sync_scriptable"]["off"]
        rows["sync_scriptable"]["overhead_pct"] = _spread(
            [check / call * 100.0 for check, call in zip(checks, calls, strict=True)]
        )
    return {
        "description": figure.description,
        "launch": figure.launch,
        "repeats": figure_repeats(figure, repeats, size),
        "rows": rows,
    }


# --- Output ---------------------------------------------------------------------------------


def _number(value: float) -> str:
    if value == 0 or not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if magnitude < 1 else f"{value:.2f}"


def table(report: dict[str, Any]) -> str:
    header = ("figure", "row", "impl", "median", "min-max", "unit", "ratio (median [min-max])")
    lines: list[tuple[str, ...]] = [header]
    for figure_name, figure in report["figures"].items():
        for row_name, row in figure["rows"].items():
            for impl, stats in row["impls"].items():
                ratio = row["ratios"].get(impl)
                if ratio is not None:
                    text = (
                        f"{ratio['median']:.3f}x {row['reference']} "
                        f"[{ratio['min']:.3f}-{ratio['max']:.3f}]"
                    )
                elif impl == row["reference"]:
                    text = "(reference)"
                else:
                    text = ""
                if impl == "on" and "overhead_pct" in row:
                    pct = row["overhead_pct"]
                    text += (
                        f"; checks = {pct['median']:.1f}% of the call "
                        f"[{pct['min']:.1f}-{pct['max']:.1f}]"
                    )
                lines.append(
                    (
                        figure_name,
                        row_name,
                        impl,
                        _number(stats["median"]),
                        f"{_number(stats['min'])}-{_number(stats['max'])}",
                        row["unit"],
                        text,
                    )
                )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    rendered = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]
    rendered.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(rendered)


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise BenchmarkError(
            f'--plot needs matplotlib ({error}); install it with: pip install -e ".[plot]"'
        ) from None
    return plt


def plot(report: dict[str, Any], path: str) -> None:
    """A bar chart of every paired ratio (1.0 = the reference)."""
    plt = _pyplot()
    labels: list[str] = []
    values: list[float] = []
    errors: list[tuple[float, float]] = []
    for figure_name, figure in report["figures"].items():
        for row_name, row in figure["rows"].items():
            for impl, ratio in row["ratios"].items():
                labels.append(f"{figure_name}/{row_name}\n{impl} vs {row['reference']}")
                values.append(ratio["median"])
                errors.append((ratio["median"] - ratio["min"], ratio["max"] - ratio["median"]))
    figure_, axes = plt.subplots(figsize=(max(8.0, 0.6 * len(values)), 5.5))
    positions = list(range(len(values)))
    axes.bar(
        positions,
        values,
        yerr=list(zip(*errors, strict=True)) if errors else None,
        color=[
            "tab:blue" if "ours" in label or "\non " in label else "tab:gray" for label in labels
        ],
        capsize=3,
    )
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xticks(positions, labels, rotation=90, fontsize=7)
    axes.set_ylabel("median of per-repeat paired ratios (1 = reference)")
    axes.set_title(
        "remote_module benchmarks: ratios vs reference (time: lower is better; GB/s: higher)"
    )
    figure_.tight_layout()
    figure_.savefig(path, dpi=120)
    plt.close(figure_)


# --- Command line ---------------------------------------------------------------------------


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    names = [figure.name for figure in FIGURES]
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description="remote_module vs torch.distributed.nn.RemoteModule vs the RPC floor.",
    )
    parser.add_argument("--json", metavar="PATH", help="write every sample and summary here")
    parser.add_argument("--plot", metavar="PATH", help="bar chart of the ratios (matplotlib)")
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--repeats", type=int, help="repeats per figure (7 full, 2 smoke)")
    parser.add_argument("--only", nargs="+", choices=names, metavar="NAME", help=", ".join(names))
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be at least 1")
    return args


def _load_average() -> list[float] | None:
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return None


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    repeats = args.repeats or DEFAULT_REPEATS[args.size]
    selected = [figure for figure in FIGURES if not args.only or figure.name in args.only]
    report: dict[str, Any] = {
        "meta": {
            "size": args.size,
            "repeats": repeats,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "load_average_start": _load_average(),
        },
        "figures": {},
        "skipped": {},
    }
    if args.plot:
        try:
            _pyplot()  # fail before the suite runs, not after
        except BenchmarkError as error:
            print(f"benchmarks: error: {error}", file=sys.stderr)
            return 2
    # A terminated runner still ends its workers (the ``finally`` in run_workers).
    signal.signal(signal.SIGTERM, _terminated)
    compile_byte_code()
    warm_render_cache()
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="remote-module-bench-") as workdir:
            for figure in selected:
                figure_start = time.monotonic()
                print(f"[{figure.name}] running ...", file=sys.stderr, flush=True)
                try:
                    samples = collect(figure, args.size, repeats, Path(workdir))
                except Skipped as skipped:
                    report["skipped"][figure.name] = str(skipped)
                    print(f"[{figure.name}] skipped: {skipped}", file=sys.stderr, flush=True)
                    continue
                report["figures"][figure.name] = summarize(figure, samples, repeats, args.size)
                print(
                    f"[{figure.name}] done in {time.monotonic() - figure_start:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
    except BenchmarkError as error:
        print(f"benchmarks: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("benchmarks: interrupted", file=sys.stderr)
        return 130
    report["meta"]["seconds"] = round(time.monotonic() - started, 1)
    report["meta"]["load_average_end"] = _load_average()
    import torch

    report["meta"]["torch"] = torch.__version__
    print(table(report))
    for name, reason in report["skipped"].items():
        print(f"{name}: skipped ({reason})")
    meta = report["meta"]
    print(
        f"\n{args.size} run, {repeats} repeats, {meta['seconds']} s on {meta['cpus']} CPUs; "
        f"load average {meta['load_average_start']} at start, {meta['load_average_end']} at end",
        flush=True,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    if args.plot:
        try:
            plot(report, args.plot)
        except BenchmarkError as error:
            print(f"benchmarks: error: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
