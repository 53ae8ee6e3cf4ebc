"""What the demo shows: the progress bar, the summary table, the JSON summary, the plot."""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

from remote_module.demo.config import DemoConfig

if TYPE_CHECKING:
    from remote_module.demo.roles import TrainerStats


def progress(config: DemoConfig, index: int) -> Any:
    if index != 0 or not config.progress:
        return None
    from tqdm import tqdm

    # One bar in one process: a thread lock, not tqdm's default multiprocessing one, whose
    # semaphore a worker ending with os._exit leaves behind (a warning when the demo ends).
    tqdm.set_lock(threading.RLock())
    return tqdm(total=config.steps, desc="trainer0", unit="step", file=sys.stderr)


def summary(
    config: DemoConfig, stats: list[TrainerStats], elapsed: float, first_step: int, norm: float
) -> dict[str, Any]:
    calls = sum(s.remote_calls for s in stats)
    lead = stats[0].losses
    window = max(1, min(10, len(lead) // 4))
    return {
        "trainers": config.trainers,
        "steps": config.steps,
        "first_step": first_step,
        "batch_size": config.batch_size,
        "embedding_dim": config.embedding_dim,
        "num_embeddings": config.num_embeddings,
        "seconds": round(elapsed, 3),
        "samples_per_s": round(sum(s.samples for s in stats) / elapsed, 1),
        "steps_per_s": round(config.steps / max(s.seconds for s in stats), 2),
        "remote_calls": calls,
        "mean_remote_call_ms": round(1000 * sum(s.remote_seconds for s in stats) / calls, 3),
        "first_loss": round(lead[0], 4),
        "last_loss": round(lead[-1], 4),
        "first_loss_mean": round(sum(lead[:window]) / window, 4),
        "last_loss_mean": round(sum(lead[-window:]) / window, 4),
        "embedding_weight_norm": round(norm, 4),
        "losses": [round(loss, 5) for loss in lead],
    }


def table(summary: dict[str, Any]) -> str:
    rows = [
        ("steps", f"{summary['steps']} x {summary['trainers']} trainers"),
        ("samples/s", f"{summary['samples_per_s']:.1f}"),
        ("remote calls", str(summary["remote_calls"])),
        ("mean remote-call latency", f"{summary['mean_remote_call_ms']:.2f} ms"),
        ("first loss (mean of first steps)", f"{summary['first_loss_mean']:.4f}"),
        ("last loss (mean of last steps)", f"{summary['last_loss_mean']:.4f}"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def plot(losses: list[float], path: str, first_step: int) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "remote-module demo: --plot needs matplotlib: pip install 'remote-module[plot]'",
            file=sys.stderr,
        )
        return
    figure, axis = plt.subplots(figsize=(6, 3.5))
    axis.plot(range(first_step, first_step + len(losses)), losses, linewidth=1)
    axis.set_xlabel("step")
    axis.set_ylabel("cross-entropy loss (trainer0)")
    axis.set_title("remote_module demo")
    figure.tight_layout()
    figure.savefig(path, format="png")
    plt.close(figure)
