"""What the demo shows: one progress bar, the summary table, the JSON summary, the plot."""

from __future__ import annotations

import math
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from remote_module.demo.config import DemoConfig
from remote_module.demo.data import HELD_OUT_BAGS, NUM_CLASSES


@dataclass(frozen=True)
class Evaluation:
    """Accuracy and mean cross-entropy on the whole held-out split after ``step`` steps."""

    step: int
    accuracy: float
    loss: float


@dataclass
class TrainerStats:
    """What one trainer measured; the master combines them into the summary."""

    losses: list[float] = field(default_factory=list)
    evaluations: list[Evaluation] = field(default_factory=list)
    remote_calls: int = 0
    remote_seconds: float = 0.0
    seconds: float = 0.0
    samples: int = 0
    head_state: dict[str, Any] | None = None
    # Each OwnerFailover this trainer met (with --kill-owner-at): see _Failover.
    failovers: list[dict[str, Any]] = field(default_factory=list)


class Progress:
    """The run's one progress bar, on the master: every trainer's steps together. Trainers
    call :meth:`advance` through an RRef."""

    def __init__(self, total: int) -> None:
        from tqdm import tqdm

        # A thread lock, not tqdm's default multiprocessing one, whose semaphore a worker
        # ending with os._exit leaves behind (a warning when the demo ends).
        tqdm.set_lock(threading.RLock())
        self._lock = threading.Lock()  # trainers' calls arrive on several RPC threads
        self._bar = tqdm(total=total, desc="starting trainers", unit="step", file=sys.stderr)

    def advance(self, steps: int, loss: float | None, accuracy: float | None) -> None:
        """Count ``steps`` more steps; show the lead trainer's latest ``loss`` and held-out
        ``accuracy`` when given."""
        with self._lock:
            if self._bar.n == 0:  # the first steps: rates count from here, not from set-up
                self._bar.set_description("training", refresh=False)
                self._bar.reset()
            if loss is not None and accuracy is not None:
                self._bar.set_postfix(
                    {"loss": f"{loss:.3f}", "held-out acc": f"{accuracy:.1%}"}, refresh=False
                )
            self._bar.update(steps)

    def close(self) -> None:
        """Draw the bar a last time and end its line."""
        with self._lock:
            self._bar.close()


def summary(
    config: DemoConfig, stats: list[TrainerStats], elapsed: float, first_step: int, norm: float
) -> dict[str, Any]:
    """The run's figures, as written by ``--json``: time (``seconds`` from the master's
    start of training, ``training_seconds`` of the trainers' loops alone), throughput, the
    lead trainer's training losses, and every held-out evaluation (``step``, ``accuracy``,
    ``loss``)."""
    calls = sum(s.remote_calls for s in stats)
    training_seconds = max(s.seconds for s in stats)  # the loops, without set-up
    lead = stats[0].losses
    window = max(1, min(10, len(lead) // 4))
    evaluations = [
        {"step": e.step, "accuracy": round(e.accuracy, 4), "loss": round(e.loss, 4)}
        for e in stats[0].evaluations  # every trainer holds the same, all-reduced figures
    ]
    result = {
        "trainers": config.trainers,
        "steps": config.steps,
        "first_step": first_step,
        "batch_size": config.batch_size,
        "embedding_dim": config.embedding_dim,
        "num_embeddings": config.num_embeddings,
        "lr": config.lr,
        "wire_dtype": config.wire_dtype or "float32",
        "seconds": round(elapsed, 3),
        "training_seconds": round(training_seconds, 3),
        "samples_per_s": round(sum(s.samples for s in stats) / training_seconds, 1),
        "steps_per_s": round(config.steps / training_seconds, 2),
        "remote_calls": calls,
        "mean_remote_call_ms": round(1000 * sum(s.remote_seconds for s in stats) / calls, 3),
        "first_loss": round(lead[0], 4),
        "last_loss": round(lead[-1], 4),
        "first_loss_mean": round(sum(lead[:window]) / window, 4),
        "last_loss_mean": round(sum(lead[-window:]) / window, 4),
        "held_out_bags": HELD_OUT_BAGS,
        "held_out_accuracy": evaluations[-1]["accuracy"],
        "held_out_loss": evaluations[-1]["loss"],
        "evaluations": evaluations,
        "embedding_weight_norm": round(norm, 4),
        "losses": [round(loss, 5) for loss in lead],
    }
    if config.kill_owner_at is not None:
        result["failover"] = failover_summary(config, stats)
    return result


def failover_summary(config: DemoConfig, stats: list[TrainerStats]) -> dict[str, Any] | None:
    """With ``--kill-owner-at``: the step the parameter server was killed at, and what each
    trainer met (the step, how long from the failed attempt to its first call on the new
    owner, the checkpoint version loaded, the steps of updates lost); the headline figures
    are the lead trainer's, which killed it, and the slowest takeover."""
    met = [dict(entry, trainer=index) for index, s in enumerate(stats) for entry in s.failovers]
    if not met:
        return {"killed_at_step": config.kill_owner_at, "trainers": []}
    lead = next((entry for entry in met if entry["trainer"] == 0), met[0])
    return {
        "killed_at_step": config.kill_owner_at,
        "step": lead["step"],
        "failed_owner": lead["failed_owner"],
        "new_owner": lead["new_owner"],
        "checkpoint_version": lead["checkpoint_version"],
        "seconds": max(entry["seconds"] for entry in met),
        "steps_lost": lead["steps_lost"],
        "checkpoint_every": config.checkpoint_every,
        "trainers": met,
    }


def table(summary: dict[str, Any]) -> str:
    """The summary as the aligned two-column table the demo prints."""
    before, after = summary["evaluations"][0], summary["evaluations"][-1]
    rows = [
        ("steps", f"{summary['steps']} x {summary['trainers']} trainers"),
        ("embeddings on the wire", summary["wire_dtype"]),
        (
            "time",
            f"{summary['training_seconds']:.1f} s training, "
            f"{summary['seconds']:.1f} s with the trainers' set-up",
        ),
        ("samples/s", f"{summary['samples_per_s']:.1f}"),
        ("remote calls", str(summary["remote_calls"])),
        ("mean remote-call latency", f"{summary['mean_remote_call_ms']:.2f} ms"),
        ("first loss (mean of first steps)", f"{summary['first_loss_mean']:.4f}"),
        ("last loss (mean of last steps)", f"{summary['last_loss_mean']:.4f}"),
        (
            f"held-out accuracy ({summary['held_out_bags']} bags)",
            f"{before['accuracy']:.1%} at step {before['step']} -> "
            f"{after['accuracy']:.1%} at step {after['step']} (chance {1 / NUM_CLASSES:.0%})",
        ),
        (
            "held-out loss",
            f"{before['loss']:.4f} -> {after['loss']:.4f} (chance {math.log(NUM_CLASSES):.4f})",
        ),
    ]
    failover = summary.get("failover")
    if failover is not None and "step" in failover:
        version = failover["checkpoint_version"]
        rows.append(
            (
                "failover",
                f"{failover['failed_owner']} killed at step {failover['step']}; "
                f"{failover['new_owner']} took over in {failover['seconds']:.2f} s from "
                f"checkpoint {version if version is not None else '(none)'}, "
                f"about {failover['steps_lost']} steps of updates lost",
            )
        )
    elif failover is not None:
        rows.append(("failover", "none: no trainer met the killed parameter server"))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def plot(summary: dict[str, Any], path: str) -> bool:
    """Write the training loss with the held-out loss, and the held-out accuracy, as a PNG;
    ``False`` (and a note on stderr) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "remote-module demo: --plot needs matplotlib: pip install 'remote-module[plot]'",
            file=sys.stderr,
        )
        return False
    losses, evaluations = summary["losses"], summary["evaluations"]
    eval_steps = [e["step"] for e in evaluations]
    figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(10, 3.5))
    first = summary["first_step"]
    # A training loss is recorded after its step, so step i's loss sits at i + 1.
    loss_axis.plot(
        range(first + 1, first + 1 + len(losses)),
        losses,
        linewidth=1,
        alpha=0.6,
        label="training (trainer0)",
    )
    loss_axis.plot(eval_steps, [e["loss"] for e in evaluations], marker="o", label="held-out")
    loss_axis.set_xlabel("step")
    loss_axis.set_ylabel("cross-entropy loss")
    loss_axis.legend()
    accuracy_axis.plot(eval_steps, [100 * e["accuracy"] for e in evaluations], marker="o")
    accuracy_axis.axhline(100 / NUM_CLASSES, color="grey", linestyle="--", label="chance")
    accuracy_axis.set_xlabel("step")
    accuracy_axis.set_ylabel("held-out accuracy (%)")
    accuracy_axis.set_ylim(0, 100)
    failover = summary.get("failover")
    if failover is not None and "step" in failover:
        for axis in (loss_axis, accuracy_axis):
            axis.axvline(
                failover["step"],
                color="red",
                linestyle=":",
                label=f"failover ({failover['new_owner']})",
            )
        loss_axis.legend()
    accuracy_axis.legend()
    figure.suptitle(f"remote_module demo (embeddings on the wire: {summary['wire_dtype']})")
    figure.tight_layout()
    figure.savefig(path, format="png")
    plt.close(figure)
    return True
