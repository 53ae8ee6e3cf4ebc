"""The demo's settings and the names of its roles."""

from __future__ import annotations

from dataclasses import dataclass

MASTER, PS, FIRST_TRAINER = 0, 1, 2
# With --kill-owner-at, one more worker (the last rank) stands by for the parameter server.
STANDBY = "ps-standby"
# The --wire-dtype choices: the embeddings and their gradients cross the wire in that dtype.
WIRE_DTYPES = ("bfloat16", "float16", "int8")


@dataclass(frozen=True)
class DemoConfig:
    """One run's settings: the flags of ``remote-module demo``."""

    trainers: int = 2
    steps: int = 300
    batch_size: int = 64
    embedding_dim: int = 16
    num_embeddings: int = 100_000
    lr: float = 0.3
    seed: int = 0
    eval_every: int = 50
    plot: str | None = None
    json: str | None = None
    checkpoint: str | None = None
    resume: str | None = None
    timeout: float = 120.0
    progress: bool = False
    kill_owner_at: int | None = None
    checkpoint_every: int = 50
    wire_dtype: str | None = None  # a name in WIRE_DTYPES; None: tensors cross as they are

    @property
    def world_size(self) -> int:
        """master, ps, the trainers, and with ``--kill-owner-at`` the standby."""
        return FIRST_TRAINER + self.trainers + (self.kill_owner_at is not None)

    def name(self, rank: int) -> str:
        """The RPC name of ``rank`` in this run (the standby's included)."""
        if self.kill_owner_at is not None and rank == self.world_size - 1:
            return STANDBY
        return worker_name(rank)


def worker_name(rank: int) -> str:
    """The RPC name of ``rank``: ``master``, ``ps``, then ``trainer0``, ``trainer1``, ..."""
    if rank == MASTER:
        return "master"
    if rank == PS:
        return "ps"
    return f"trainer{rank - FIRST_TRAINER}"
