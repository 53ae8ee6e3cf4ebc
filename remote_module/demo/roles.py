"""The demo's roles: the master drives training and reports, the parameter server ``ps`` owns
the remote embedding (it only serves RPC calls), and each trainer trains the local head."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import Tensor, nn
from torch.nn import functional
from torch.nn.parallel import DistributedDataParallel

from remote_module.demo import report
from remote_module.demo.config import FIRST_TRAINER, PS, STANDBY, DemoConfig, worker_name
from remote_module.demo.data import NUM_CLASSES, Bags, SyntheticBags
from remote_module.demo.report import Evaluation, TrainerStats

# How often a trainer tells the master's progress bar about its steps.
PROGRESS_INTERVAL_S = 0.1


def master(config: DemoConfig) -> None:
    """Create the remote embedding on ``ps``, train on every trainer, then report (and
    checkpoint where ``--checkpoint`` asks)."""
    import remote_module.examples.generated  # noqa: F401  (build-time stubs register here)
    from remote_module import RemoteModule
    from remote_module.examples.embedding import EmbeddingBagInterface, RemoteEmbeddingBag

    checkpoint = torch.load(config.resume, weights_only=True) if config.resume else None
    failover: dict[str, Any] = {}
    if config.kill_owner_at is not None:  # a standby keeps the table's newest checkpoint
        failover = {"standby": [f"{STANDBY}/cpu"], "checkpoint_every": config.checkpoint_every}
    embedding: Any = RemoteModule(
        f"{worker_name(PS)}/cpu",
        RemoteEmbeddingBag,
        args=(config.num_embeddings, config.embedding_dim, config.seed),
        kwargs={"sparse": True},  # each step updates the rows it touched, not the table
        module_interface_cls=EmbeddingBagInterface,
        timeout=config.timeout,
        wire_dtype=None if config.wire_dtype is None else getattr(torch, config.wire_dtype),
        **failover,
    )
    if checkpoint is not None:
        embedding.load_remote_state_dict(checkpoint["embedding"])
    head_state = checkpoint["head"] if checkpoint is not None else None
    first_step = int(checkpoint["steps"]) if checkpoint is not None else 0
    progress = report.Progress(config.trainers * config.steps) if config.progress else None
    progress_rref = None if progress is None else rpc.RRef(progress)
    started = time.perf_counter()
    try:
        futures = [
            rpc.rpc_async(
                worker_name(rank),
                _train,
                args=(
                    embedding,
                    config,
                    rank - FIRST_TRAINER,
                    head_state,
                    first_step,
                    progress_rref,
                ),
                timeout=config.timeout + 5.0 * config.steps,  # a whole training run
            )
            for rank in range(FIRST_TRAINER, FIRST_TRAINER + config.trainers)
        ]
        stats: list[TrainerStats] = [future.wait() for future in futures]
    finally:
        if progress is not None:
            progress.close()
    elapsed = time.perf_counter() - started
    summary = report.summary(config, stats, elapsed, first_step, _after_failover(embedding))
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
    if config.plot and report.plot(summary, config.plot):
        print(f"loss and accuracy curves: {config.plot}")


class Features(nn.Module):
    """The scripted part of the hybrid model: the remote lookup, then a local normalisation."""

    def __init__(self, embedding: nn.Module) -> None:
        super().__init__()
        self.embedding = embedding

    def forward(self, indices: Tensor, offsets: Tensor) -> Tensor:
        pooled = self.embedding.forward(indices, offsets)
        return pooled * torch.rsqrt(pooled.pow(2).mean(dim=1, keepdim=True) + 1e-6)


def _after_failover(embedding: Any) -> float:
    """The embedding's weight norm; the master's own copy meets a killed parameter server
    here first, and asks again on the new owner."""
    from remote_module import OwnerFailover

    try:
        return float(embedding.weight_norm())
    except OwnerFailover:
        return float(embedding.weight_norm())


def _features(embedding: Any, config: DemoConfig) -> nn.Module:
    """The feature extractor, scripted (``torch.jit.script``, without torch's deprecation
    notice: the demo scripts on purpose); with ``--kill-owner-at`` eager, so that its calls
    raise OwnerFailover and count towards the owner's checkpoints (TorchScript code sends
    straight to the owner it was scripted with, and raises torch's own error)."""
    from remote_module import _torchscript

    features = Features(embedding)
    if config.kill_owner_at is not None:
        return features
    return _torchscript.script(features, "the demo's feature extractor")


class _Failover:
    """A trainer's side of ``--kill-owner-at``: the lead trainer has the parameter server
    killed at the chosen step; every trainer that meets the dead owner (an ``OwnerFailover``
    from any remote call, or a failed backward pass or optimizer step, which a cheap
    RemoteModule call then tells apart from other errors) rebuilds its optimizer from the
    new owner's parameters and redoes the step."""

    def __init__(self, config: DemoConfig, index: int) -> None:
        self.kill_at = config.kill_owner_at
        self.lead = index == 0
        self.every = config.checkpoint_every
        self.trainers = config.trainers

    def kill_if_due(self, step: int) -> None:
        """At the chosen step, between two steps of every trainer, the lead trainer has the
        parameter server SIGKILL itself and waits until it is gone; the trainers then meet
        the dead owner at the same step, and their DDP collectives stay in step."""
        if step != self.kill_at:
            return
        dist.barrier()
        if self.lead:
            dying = rpc.rpc_async(worker_name(PS), _die)  # no reply ever comes
            try:
                dying.wait()
            except RuntimeError:  # its connection closed: it is gone
                pass
        dist.barrier()

    def superseded(self, optimizer: Any, failover: Any) -> None:
        """``optimizer`` is replaced after ``failover``: its RRef to the optimizer on the dead
        owner is kept while this process lives (:data:`_DEAD_OWNERS_RREFS`)."""
        dead = failover.failed_owner
        _DEAD_OWNERS_RREFS.extend(
            rref for rref in optimizer.remote_optimizers if rref.owner_name() == dead
        )

    def met(self, embedding: Any, error: Exception) -> Any:
        """The OwnerFailover behind ``error``, or None where the owner is alive (the error
        is then the caller's to raise)."""
        from remote_module import OwnerFailover

        if isinstance(error, OwnerFailover):
            return error
        try:
            embedding.remote_parameters()  # promotes if the owner is gone
        except OwnerFailover as failover:
            return failover
        return None

    def record(
        self, stats: TrainerStats, failover: Any, step: int, took_s: float, calls: int
    ) -> None:
        version = failover.checkpoint_version
        lost_calls = calls - (version or 0) * self.every  # all holders' calls count
        stats.failovers.append(
            {
                "step": step,
                "failed_owner": failover.failed_owner,
                "new_owner": failover.new_owner,
                "checkpoint_version": version,
                "seconds": round(took_s, 3),
                "steps_lost": max(0, round(lost_calls / self.trainers)),
            }
        )


# What the trainers' replaced optimizers hold on a killed parameter server. Releasing an RRef
# sends its owner a delete message, which torch retries and logs at every try to a dead owner
# ("... encountered error when sending outgoing request #N to ps: eof"); after rpc.shutdown()
# a release sends nothing. (RemoteModule keeps its own RRefs to a dead owner likewise.)
_DEAD_OWNERS_RREFS: list[Any] = []


def _die() -> None:
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def _train(
    embedding: Any,
    config: DemoConfig,
    index: int,
    head_state: dict[str, Any] | None,
    first_step: int,
    progress: rpc.RRef[report.Progress] | None,
) -> TrainerStats:
    # Only trainers use it, and its import costs a second: it scripts torch's optimizers.
    from torch.distributed.optim import DistributedOptimizer

    if config.batch_size <= 0:
        raise ValueError(f"--batch-size must be positive, got {config.batch_size}")
    features = _features(embedding, config)
    torch.manual_seed(config.seed)  # the head starts the same in every run
    head = nn.Linear(config.embedding_dim, NUM_CLASSES)
    if head_state is not None:
        head.load_state_dict(head_state)
    model = DistributedDataParallel(head)

    def optimizer_now() -> Any:  # again after a failover: the new owner's parameters
        parameters = embedding.remote_parameters() + [rpc.RRef(p) for p in model.parameters()]
        return DistributedOptimizer(torch.optim.Adagrad, parameters, lr=config.lr)

    optimizer = optimizer_now()
    data = SyntheticBags(config.num_embeddings, config.seed)
    held_out = data.held_out().share(index, config.trainers)
    stats = TrainerStats()
    reporter = _ProgressReporter(progress, lead=index == 0)
    failover = _Failover(config, index)
    calls = 0  # this trainer's calls of the embedding, for the updates a failover lost

    def evaluate(step: int) -> Evaluation:
        nonlocal calls, optimizer
        began = time.perf_counter()
        while True:
            try:
                calls += 1
                return _evaluate(features, head, held_out, step)
            except RuntimeError as error:
                met = failover.met(embedding, error)
                if met is None:
                    raise
                failover.superseded(optimizer, met)
                optimizer = optimizer_now()
                took_s = time.perf_counter() - began
                failover.record(stats, met, step, took_s, (calls - 1) * config.trainers)

    stats.evaluations.append(evaluate(first_step))
    started = time.perf_counter()
    for step in range(first_step, first_step + config.steps):
        batch = data.training_batch(step, index, config.batch_size)
        failover.kill_if_due(step)
        # A failover met in this step: it, when the failed attempt began, and how many calls
        # of this trainer had reached the old owner.
        pending: tuple[Any, float, int] | None = None
        while True:  # once, or again after a failover
            attempt_started = time.perf_counter()
            try:
                with dist_autograd.context() as context_id:
                    calls += 1
                    pooled = features(batch.indices, batch.offsets)
                    stats.remote_seconds += time.perf_counter() - attempt_started
                    stats.remote_calls += 1
                    if pending is not None:  # the first call that reached the new owner
                        met, failed_at, reached = pending
                        took_s = time.perf_counter() - failed_at
                        failover.record(stats, met, step, took_s, reached * config.trainers)
                        pending = None
                    loss = functional.cross_entropy(model(pooled), batch.labels)
                    dist_autograd.backward(context_id, [loss])
                    optimizer.step(context_id)
            except RuntimeError as error:
                met = failover.met(embedding, error)
                if met is None:
                    raise
                failover.superseded(optimizer, met)
                optimizer = optimizer_now()
                if pending is None:  # the calls that reached the old owner: all but this one
                    pending = (met, attempt_started, calls - 1)
                continue
            break
        stats.losses.append(float(loss.item()))
        done = step + 1
        last = done == first_step + config.steps
        if last or (config.eval_every and (done - first_step) % config.eval_every == 0):
            stats.evaluations.append(evaluate(done))
        reporter.step(stats.losses[-1], stats.evaluations[-1].accuracy, last)
    stats.seconds = time.perf_counter() - started
    stats.samples = config.steps * config.batch_size
    stats.head_state = {k: v.detach().clone() for k, v in head.state_dict().items()}
    return stats


def _evaluate(features: Any, head: nn.Module, bags: Bags, step: int) -> Evaluation:
    """Every trainer scores its share of the held-out split through the remote embedding;
    the sums meet in one all-reduce, so each trainer gets the whole split's figures."""
    with torch.no_grad():
        logits = head(features(bags.indices, bags.offsets))
        totals = torch.stack(
            [
                (logits.argmax(dim=1) == bags.labels).sum().double(),
                functional.cross_entropy(logits, bags.labels, reduction="sum").double(),
                torch.tensor(len(bags.labels), dtype=torch.float64),
            ]
        )
    dist.all_reduce(totals)
    correct, loss_sum, count = totals.tolist()
    return Evaluation(step, correct / count, loss_sum / count)


class _ProgressReporter:
    """A trainer's side of the master's progress bar: its steps, at most every
    ``PROGRESS_INTERVAL_S``; the lead trainer adds its loss and the held-out accuracy."""

    def __init__(self, progress: rpc.RRef[report.Progress] | None, lead: bool) -> None:
        self.progress = progress
        self.lead = lead
        self.pending = 0
        self.sent_at = time.monotonic()

    def step(self, loss: float, accuracy: float, last: bool) -> None:
        if self.progress is None:
            return
        self.pending += 1
        if not last and time.monotonic() - self.sent_at < PROGRESS_INTERVAL_S:
            return
        figures = (loss, accuracy) if self.lead else (None, None)
        future = self.progress.rpc_async().advance(self.pending, *figures)
        self.pending, self.sent_at = 0, time.monotonic()
        if last:
            future.wait()  # the bar shows every step before the master closes it
