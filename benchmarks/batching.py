"""The ``batching`` figure (issue 47): many callers of one compute-bound module on its owner,
``batching=None`` (``off``) against ``batching=Batching(max_batch_size=64)`` (``on``).

Three processes (the ``trio`` launch): rank 0 and rank 2 call, rank 1 owns. ``n`` callers are
``n`` threads, spread over the two calling processes (1: one on rank 0; 4: two each; 16: eight
each), each making one-row ``forward`` calls in a closed loop (the next call once the last
returned) for a window of time. Per window and caller count: calls/s (each process's calls
over its own window, summed) and the p50 and p95 latency of every call of both processes.
Implementations take turns in rotating order within each repeat, a window each.

``max_wait_ms`` stays 0 (the default): a call that finds the module idle leads its batch, and a
leader with a wait waits that long even when no other call is coming, which a lone caller
would pay on every call; at 16 callers the calls that queue behind a running batch fill the
next one without waiting.

The owner runs the module on one intra-op thread, for both implementations: the three
processes share this machine's two cores, and with torch's default team of two OpenMP
threads a run of more than one row waited at each kernel's barrier for a thread another
process held (on the loaded development machine, 4 to 64 rows through the module took 15-48
ms on two threads and 3.5-14 ms on one; one row 1.6-1.9 ms either way).

The owner serves each batched call on the RPC thread that received it, and a queued call holds
its thread until its batch has run: with ``n`` callers up to ``n`` calls hold threads at once,
besides what the owner's other messages need: the figure's agents have
``spec.BATCHING_RPC_THREADS`` (``num_worker_threads``; TensorPipe's default is 16, the suite's
other figures use 8).
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import torch
import torch.distributed.rpc as rpc
from torch import Tensor, nn

import remote_module
from benchmarks.spec import BATCHING_CALLERS, Figure, Sizes, rotated

OWNER = "worker1"
OTHER_CALLER = "worker2"
FEATURES = 2048  # two 2048 x 2048 float32 layers: 32 MiB of weights, far beyond any cache
CALLERS = BATCHING_CALLERS
IMPLS = ("off", "on")
BATCHING = remote_module.Batching(max_batch_size=64)  # max_wait_ms=0.0: see the docstring
WINDOW_FACTOR = 5  # a window lasts WINDOW_FACTOR * Sizes.min_time_s (1 s in a full run)
MIN_CALLS = 2  # per caller and window (a smoke run's windows are this)
WARM_S = 0.3  # every implementation at the most callers, once, before the repeats

Results = dict[str, dict[str, list[float]]]


class Mlp(nn.Module):
    """The compute-bound module: two 2048-wide layers, and counts of its runs and rows (how
    many rows a run took: the batches the owner made)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(FEATURES, FEATURES)
        self.second = nn.Linear(FEATURES, FEATURES)
        self.runs = 0
        self.rows = 0
        self.lock = threading.Lock()

    def forward(self, x: Tensor) -> Tensor:
        with self.lock:
            self.runs += 1
            self.rows += x.shape[0]
        with torch.no_grad():  # inference: what batching serves
            return self.second(self.first(x).relu())


def one_intra_op_thread() -> None:
    """On the owner: its modules run on one intra-op thread (see the module docstring)."""
    torch.set_num_threads(1)


def counts(module_rref: rpc.RRef[Mlp]) -> tuple[int, int]:
    """On the owner: the module's runs and rows so far."""
    module = module_rref.local_value()
    return module.runs, module.rows


# --- The callers -------------------------------------------------------------------------------

# On rank 2: the RemoteModules rank 0 sent, by implementation (each files its own key there).
_HELD: dict[str, Any] = {}


def hold(impl: str, rm: Any) -> None:
    """On rank 2: keep ``rm`` for the windows to come, and make its first call."""
    _HELD[impl] = rm
    rm(torch.zeros(1, FEATURES))


def window(impl: str, threads: int, seconds: float) -> tuple[int, float, list[float]]:
    """On rank 2: :func:`run_callers` with the RemoteModule rank 0 sent."""
    return run_callers(_HELD[impl], threads, seconds)


def run_callers(rm: Any, threads: int, seconds: float) -> tuple[int, float, list[float]]:
    """``threads`` callers, each calling ``rm`` with one row in a closed loop for ``seconds``
    (and at least :data:`MIN_CALLS` times): the calls made, the window they took (from the
    start to the last call's return), and every call's latency in ms."""
    start = threading.Barrier(threads + 1)
    latencies: list[list[float]] = [[] for _ in range(threads)]
    ends = [0.0] * threads
    began = [0.0]

    def caller(index: int) -> None:
        x = torch.randn(1, FEATURES)
        own = latencies[index]
        start.wait()
        deadline = began[0] + seconds
        while True:
            sent = time.perf_counter()
            rm(x)
            done = time.perf_counter()
            own.append((done - sent) * 1e3)
            if done >= deadline and len(own) >= MIN_CALLS:
                break
        ends[index] = done

    workers = [threading.Thread(target=caller, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    began[0] = time.perf_counter()
    start.wait()
    for worker in workers:
        worker.join()
    every = [latency for own in latencies for latency in own]
    return len(every), max(ends) - began[0], every


# --- The figure --------------------------------------------------------------------------------


def _split(callers: int) -> tuple[int, int]:
    """Callers on rank 0 and on rank 2."""
    return (callers + 1) // 2, callers // 2


def _window(modules: dict[str, Any], impl: str, callers: int, seconds: float) -> Any:
    """One window of ``callers`` callers of ``impl``: calls/s, and every latency (ms)."""
    here, there = _split(callers)
    other = None
    if there:
        other = rpc.rpc_async(OTHER_CALLER, window, (impl, there, seconds))
    calls, span, latencies = run_callers(modules[impl], here, seconds)
    rate = calls / span
    if other is not None:
        calls, span, more = other.wait()
        rate += calls / span
        latencies = latencies + more
    return rate, latencies


def _percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def measure(figure: Figure, sizes: Sizes, repeats: int, impl: str | None, row: str | None) -> Any:
    rpc.rpc_sync(OWNER, one_intra_op_thread)
    modules = {
        "off": remote_module.RemoteModule(f"{OWNER}/cpu", Mlp, batching=None),
        "on": remote_module.RemoteModule(f"{OWNER}/cpu", Mlp, batching=BATCHING),
    }
    for name, rm in modules.items():  # keys filed in both calling processes
        rm(torch.zeros(1, FEATURES))
        rpc.rpc_sync(OTHER_CALLER, hold, (name, rm))
    seconds = WINDOW_FACTOR * sizes.min_time_s
    for name in IMPLS:
        _window(modules, name, max(CALLERS), min(seconds, WARM_S))
    results: Results = {}
    for callers in CALLERS:
        for suffix in ("calls_per_s", "p50", "p95"):
            results[f"callers{callers}_{suffix}"] = {name: [] for name in IMPLS}
    batch_rows: dict[str, list[float]] = {name: [] for name in IMPLS}
    for repeat in range(repeats):
        for callers in CALLERS:
            for name in rotated(list(IMPLS), repeat + callers):
                before = rpc.rpc_sync(OWNER, counts, (modules[name].module_rref,))
                rate, latencies = _window(modules, name, callers, seconds)
                after = rpc.rpc_sync(OWNER, counts, (modules[name].module_rref,))
                results[f"callers{callers}_calls_per_s"][name].append(rate)
                results[f"callers{callers}_p50"][name].append(statistics.median(latencies))
                results[f"callers{callers}_p95"][name].append(_percentile(latencies, 0.95))
                if callers == max(CALLERS):
                    runs, rows = after[0] - before[0], after[1] - before[1]
                    batch_rows[name].append(rows / max(1, runs))
    results[f"callers{max(CALLERS)}_rows_per_run"] = batch_rows
    return results
