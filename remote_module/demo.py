"""``remote-module demo``: the DDP + RPC hybrid pattern, trained for real on local workers.

Roles (ranks): 0 ``master`` drives training and checkpoints, 1 ``ps`` owns a large
``nn.EmbeddingBag`` as a scriptable ``RemoteModule`` (its stubs generated at build time into
``remote_module/examples/generated``), 2.. ``trainer<i>`` each hold a local ``nn.Linear``
head under ``DistributedDataParallel`` (gloo). Trainers run a ``torch.jit.script``-compiled
feature extractor that calls the remote embedding, then train with distributed autograd and
``DistributedOptimizer`` over ``remote_parameters()`` plus the local head.

By default every worker is spawned here on 127.0.0.1. With ``RANK``/``WORLD_SIZE``/
``MASTER_ADDR``/``MASTER_PORT`` set (``torchrun`` sets them) this process joins as that rank.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import Tensor, nn
from torch.distributed.optim import DistributedOptimizer
from torch.nn.parallel import DistributedDataParallel

from remote_module._process import end_processes, exit_now, free_ports

__all__ = ["DemoConfig", "Features", "SyntheticBags", "main"]

MASTER, PS, FIRST_TRAINER = 0, 1, 2
NUM_CLASSES = 4
BAG_SIZE = 8


@dataclass(frozen=True)
class DemoConfig:
    trainers: int = 2
    steps: int = 300
    batch_size: int = 32
    embedding_dim: int = 16
    num_embeddings: int = 100_000
    lr: float = 0.2
    seed: int = 0
    plot: str | None = None
    json: str | None = None
    checkpoint: str | None = "remote_module_demo.pt"
    resume: str | None = None
    timeout: float = 120.0
    progress: bool = True


@dataclass
class TrainerStats:
    losses: list[float] = field(default_factory=list)
    remote_calls: int = 0
    remote_seconds: float = 0.0
    seconds: float = 0.0
    samples: int = 0
    head_state: dict[str, Any] | None = None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``remote-module demo``."""
    config = _parse(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if world_size != FIRST_TRAINER + config.trainers:
            print(
                f"remote-module demo: error: WORLD_SIZE={world_size} but --trainers "
                f"{config.trainers} needs {FIRST_TRAINER + config.trainers} processes "
                "(master, ps, trainers)",
                file=sys.stderr,
            )
            return 2
        addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
        master_port = int(os.environ.get("MASTER_PORT", "29500"))
        exit_now(
            _run_worker(rank, world_size, config, addr, master_port, master_port + 1, from_env=True)
        )
    return _spawn_all(config)


# --- Local launch -------------------------------------------------------------------------


def _spawn_all(config: DemoConfig) -> int:
    """Start every worker on 127.0.0.1, wait, and clean up on success, error and Ctrl-C."""
    world_size = FIRST_TRAINER + config.trainers
    port, store_port = free_ports(2)
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(
            target=_spawned_worker,
            args=(rank, world_size, config, port, store_port),
            name=_worker_name(rank),
            daemon=False,
        )
        for rank in range(world_size)
    ]
    for process in processes:
        process.start()
    try:
        return _supervise(processes, config)
    except KeyboardInterrupt:
        print("\nremote-module demo: interrupted; stopping workers", file=sys.stderr)
        return 130
    finally:
        end_processes(processes, grace_s=5.0, terminate=True)


def _supervise(processes: list[Any], config: DemoConfig) -> int:
    master = processes[MASTER]
    deadline = time.monotonic() + config.timeout + 60 + config.steps * 2.0
    while True:
        failed = [p for p in processes if p.exitcode not in (None, 0)]
        if failed:
            names = ", ".join(f"{p.name} (exit {p.exitcode})" for p in failed)
            print(f"remote-module demo: failed: {names}", file=sys.stderr)
            return 1
        if master.exitcode == 0:
            for process in processes:
                process.join(timeout=30)
            return 0 if all(p.exitcode == 0 for p in processes) else 1
        if time.monotonic() > deadline:
            print("remote-module demo: timed out waiting for the workers", file=sys.stderr)
            return 1
        master.join(timeout=0.2)


def _spawned_worker(
    rank: int, world_size: int, config: DemoConfig, port: int, store_port: int
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor handles Ctrl-C
    exit_now(_run_worker(rank, world_size, config, "127.0.0.1", port, store_port))


# --- One worker ---------------------------------------------------------------------------


def _run_worker(
    rank: int,
    world_size: int,
    config: DemoConfig,
    addr: str,
    port: int,
    store_port: int,
    from_env: bool = False,
) -> int:
    warnings.filterwarnings("ignore", message="`torch.jit.", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message="You are using a Backend", category=UserWarning)
    options = rpc.TensorPipeRpcBackendOptions(
        # Under torchrun, env:// joins the launcher's own store on MASTER_PORT.
        init_method="env://" if from_env else f"tcp://{addr}:{port}",
        rpc_timeout=config.timeout,
        num_worker_threads=16,
    )
    try:
        # The trainers' gloo group meets at a store the master hosts (MASTER_PORT + 1 under a
        # launcher), and
        # forms before RPC does, so no trainer can be asked to train before DDP can start.
        store = dist.TCPStore(
            addr,
            store_port,
            is_master=rank == MASTER,
            wait_for_workers=False,
            timeout=timedelta(seconds=config.timeout),
        )
        if rank >= FIRST_TRAINER:
            dist.init_process_group(
                "gloo",
                store=dist.PrefixStore("trainers", store),
                rank=rank - FIRST_TRAINER,
                world_size=world_size - FIRST_TRAINER,
            )
        rpc.init_rpc(
            _worker_name(rank), rank=rank, world_size=world_size, rpc_backend_options=options
        )
        if rank == MASTER:
            _master(config)
    except Exception as error:  # one clear line, then the supervisor stops everyone
        print(f"remote-module demo: {_worker_name(rank)}: {_one_line(error)}", file=sys.stderr)
        if os.environ.get("REMOTE_MODULE_DEMO_DEBUG"):
            traceback.print_exc()
        return 1
    rpc.shutdown(graceful=True)
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


def _master(config: DemoConfig) -> None:
    import remote_module.examples.generated  # noqa: F401  (build-time stubs register here)
    from remote_module import RemoteModule
    from remote_module.examples.embedding import EmbeddingBagInterface, RemoteEmbeddingBag

    checkpoint = torch.load(config.resume, weights_only=True) if config.resume else None
    embedding: Any = RemoteModule(
        f"{_worker_name(PS)}/cpu",
        RemoteEmbeddingBag,
        args=(config.num_embeddings, config.embedding_dim, config.seed),
        module_interface_cls=EmbeddingBagInterface,
        timeout=config.timeout,
    )
    if checkpoint is not None:
        embedding.load_remote_state_dict(checkpoint["embedding"])
    head_state = checkpoint["head"] if checkpoint is not None else None
    first_step = int(checkpoint["steps"]) if checkpoint is not None else 0
    started = time.perf_counter()
    futures = [
        rpc.rpc_async(
            _worker_name(rank),
            _trainer,
            args=(embedding, config, rank - FIRST_TRAINER, head_state, first_step),
            timeout=config.timeout + 5.0 * config.steps,  # a whole training run
        )
        for rank in range(FIRST_TRAINER, FIRST_TRAINER + config.trainers)
    ]
    stats: list[TrainerStats] = [future.wait() for future in futures]
    elapsed = time.perf_counter() - started
    summary = _summary(config, stats, elapsed, first_step, embedding.weight_norm())
    print(_table(summary))
    if config.checkpoint:
        torch.save(
            {
                "embedding": embedding.remote_state_dict(),
                "head": stats[0].head_state,
                "steps": first_step + config.steps,
                "config": asdict(config),
            },
            config.checkpoint,
        )
        print(f"checkpoint: {config.checkpoint}")
    if config.json:
        Path(config.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        print(f"summary: {config.json}")
    if config.plot:
        _plot(stats[0].losses, config.plot, first_step)
        print(f"loss curve: {config.plot}")


def _trainer(
    embedding: Any,
    config: DemoConfig,
    index: int,
    head_state: dict[str, Any] | None,
    first_step: int,
) -> TrainerStats:
    if config.batch_size <= 0:
        raise ValueError(f"--batch-size must be positive, got {config.batch_size}")
    features = torch.jit.script(Features(embedding))
    head = nn.Linear(config.embedding_dim, NUM_CLASSES)
    if head_state is not None:
        head.load_state_dict(head_state)
    model = DistributedDataParallel(head)
    parameters = embedding.remote_parameters() + [rpc.RRef(p) for p in model.parameters()]
    optimizer = DistributedOptimizer(torch.optim.Adagrad, parameters, lr=config.lr)
    data = SyntheticBags(config, index)
    criterion = nn.CrossEntropyLoss()
    stats = TrainerStats()
    bar = _progress(config, index)
    started = time.perf_counter()
    for step in range(config.steps):
        indices, offsets, labels = data.batch(first_step + step)
        with dist_autograd.context() as context_id:
            call_started = time.perf_counter()
            pooled = features(indices, offsets)
            stats.remote_seconds += time.perf_counter() - call_started
            stats.remote_calls += 1
            loss = criterion(model(pooled), labels)
            dist_autograd.backward(context_id, [loss])
            optimizer.step(context_id)
        stats.losses.append(float(loss.item()))
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{stats.losses[-1]:.3f}")
    if bar is not None:
        bar.close()
    stats.seconds = time.perf_counter() - started
    stats.samples = config.steps * config.batch_size
    stats.head_state = {k: v.detach().clone() for k, v in head.state_dict().items()}
    return stats


# --- Model and data -----------------------------------------------------------------------


class Features(nn.Module):
    """The scripted part of the hybrid model: the remote lookup, then a local normalisation."""

    def __init__(self, embedding: nn.Module) -> None:
        super().__init__()
        self.embedding = embedding

    def forward(self, indices: Tensor, offsets: Tensor) -> Tensor:
        pooled = self.embedding.forward(indices, offsets)
        return pooled * torch.rsqrt(pooled.pow(2).mean(dim=1, keepdim=True) + 1e-6)


class SyntheticBags:
    """Bags of ids whose label follows a hidden embedding and a hidden linear rule."""

    def __init__(self, config: DemoConfig, trainer: int) -> None:
        truth = torch.Generator().manual_seed(10_000 + config.seed)  # same on every trainer
        self.hidden = torch.randn(config.num_embeddings, 8, generator=truth)
        self.rule = torch.randn(8, NUM_CLASSES, generator=truth)
        self.config = config
        self.trainer = trainer

    def batch(self, step: int) -> tuple[Any, Any, Any]:
        seed = (self.config.seed * 1_000_003 + step) * 64 + self.trainer
        generator = torch.Generator().manual_seed(seed)
        size = self.config.batch_size
        # Skewed like real id traffic: a few hot ids, a long tail.
        uniform = torch.rand(size * BAG_SIZE, generator=generator)
        indices = (uniform.pow(4) * self.config.num_embeddings).long()
        offsets = torch.arange(0, size * BAG_SIZE, BAG_SIZE)
        pooled = self.hidden[indices].view(size, BAG_SIZE, -1).mean(dim=1)
        labels = (pooled @ self.rule).argmax(dim=1)
        return indices, offsets, labels


# --- Output -------------------------------------------------------------------------------


def _progress(config: DemoConfig, index: int) -> Any:
    if index != 0 or not config.progress:
        return None
    from tqdm import tqdm

    # One bar in one process: a thread lock, not tqdm's default multiprocessing one, whose
    # semaphore a worker ending with os._exit leaves behind (a warning when the demo ends).
    tqdm.set_lock(threading.RLock())
    return tqdm(total=config.steps, desc="trainer0", unit="step", file=sys.stderr)


def _summary(
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


def _table(summary: dict[str, Any]) -> str:
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


def _plot(losses: list[float], path: str, first_step: int) -> None:
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


# --- Helpers ------------------------------------------------------------------------------


def _worker_name(rank: int) -> str:
    if rank == MASTER:
        return "master"
    if rank == PS:
        return "ps"
    return f"trainer{rank - FIRST_TRAINER}"


def _one_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):  # the root cause of an RPC error is its innermost message
        if "Error" in line and "On WorkerInfo" not in line and not line.startswith("File"):
            return line[:300]
    return lines[0][:300] if lines else type(error).__name__


def _parse(argv: Sequence[str] | None) -> DemoConfig:
    parser = argparse.ArgumentParser(prog="remote-module demo", description=__doc__.split("\n")[0])
    defaults = DemoConfig()
    parser.add_argument("--trainers", type=int, default=defaults.trainers)
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--embedding-dim", type=int, default=defaults.embedding_dim)
    parser.add_argument("--num-embeddings", type=int, default=defaults.num_embeddings)
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--plot", metavar="PATH", help="write a loss-curve PNG (needs matplotlib)")
    parser.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    parser.add_argument(
        "--checkpoint",
        metavar="PATH",
        default=defaults.checkpoint,
        help="where to save the final checkpoint ('' to skip)",
    )
    parser.add_argument("--resume", metavar="PATH", help="continue from a checkpoint")
    parser.add_argument(
        "--timeout", type=float, default=defaults.timeout, help="seconds that bound every RPC"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    options = parser.parse_args(argv)
    if options.trainers < 1:
        parser.error("--trainers must be at least 1")
    if options.steps < 1:
        parser.error("--steps must be at least 1")
    if options.embedding_dim < 1 or options.num_embeddings < 1:
        parser.error("--embedding-dim and --num-embeddings must be positive")
    if not math.isfinite(options.lr) or options.timeout <= 0:
        parser.error("--lr must be finite and --timeout positive")
    if options.resume and not Path(options.resume).is_file():
        parser.error(f"--resume: no such file: {options.resume}")
    return DemoConfig(
        trainers=options.trainers,
        steps=options.steps,
        batch_size=options.batch_size,
        embedding_dim=options.embedding_dim,
        num_embeddings=options.num_embeddings,
        lr=options.lr,
        seed=options.seed,
        plot=options.plot,
        json=options.json,
        checkpoint=options.checkpoint or None,
        resume=options.resume,
        timeout=options.timeout,
        progress=not options.no_progress,
    )
