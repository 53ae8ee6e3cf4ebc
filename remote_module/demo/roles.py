"""The demo's roles: the master drives training, the parameter server ``ps`` owns the
remote embedding (it only serves RPC calls), and each trainer trains a local head."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import Tensor, nn
from torch.distributed.optim import DistributedOptimizer
from torch.nn.parallel import DistributedDataParallel

from remote_module.demo import report
from remote_module.demo.config import FIRST_TRAINER, PS, DemoConfig, worker_name
from remote_module.demo.data import NUM_CLASSES, SyntheticBags


@dataclass
class TrainerStats:
    losses: list[float] = field(default_factory=list)
    remote_calls: int = 0
    remote_seconds: float = 0.0
    seconds: float = 0.0
    samples: int = 0
    head_state: dict[str, Any] | None = None


def master(config: DemoConfig) -> None:
    import remote_module.examples.generated  # noqa: F401  (build-time stubs register here)
    from remote_module import RemoteModule
    from remote_module.examples.embedding import EmbeddingBagInterface, RemoteEmbeddingBag

    checkpoint = torch.load(config.resume, weights_only=True) if config.resume else None
    embedding: Any = RemoteModule(
        f"{worker_name(PS)}/cpu",
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
            worker_name(rank),
            _trainer,
            args=(embedding, config, rank - FIRST_TRAINER, head_state, first_step),
            timeout=config.timeout + 5.0 * config.steps,  # a whole training run
        )
        for rank in range(FIRST_TRAINER, FIRST_TRAINER + config.trainers)
    ]
    stats: list[TrainerStats] = [future.wait() for future in futures]
    elapsed = time.perf_counter() - started
    summary = report.summary(config, stats, elapsed, first_step, embedding.weight_norm())
    print(report.table(summary))
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
        report.plot(stats[0].losses, config.plot, first_step)
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
    bar = report.progress(config, index)
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


class Features(nn.Module):
    """The scripted part of the hybrid model: the remote lookup, then a local normalisation."""

    def __init__(self, embedding: nn.Module) -> None:
        super().__init__()
        self.embedding = embedding

    def forward(self, indices: Tensor, offsets: Tensor) -> Tensor:
        pooled = self.embedding.forward(indices, offsets)
        return pooled * torch.rsqrt(pooled.pow(2).mean(dim=1, keepdim=True) + 1e-6)
