"""The flags of ``remote-module demo`` and its entry point."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from remote_module._shared import __version__
from remote_module.demo import launch
from remote_module.demo.config import WIRE_DTYPES, DemoConfig
from remote_module.demo.data import NUM_CLASSES

DESCRIPTION = (
    "Train the DDP + RPC hybrid pattern for real on local workers: a parameter server owns "
    "a large EmbeddingBag as a RemoteModule, trainers train a local head under "
    "DistributedDataParallel, and held-out accuracy shows the model learning. With RANK, "
    "WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (torchrun sets them) this process joins "
    "as that rank instead of spawning every worker."
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``remote-module demo``: parse the flags, then run (or join) the demo."""
    return launch.run(parse(argv))


def parse(argv: Sequence[str] | None) -> DemoConfig:
    """The run's settings from command-line flags; exits with usage on bad input."""
    parser = build_parser()
    options = parser.parse_args(argv)
    if options.trainers < 1:
        parser.error("--trainers must be at least 1")
    if options.steps < 1:
        parser.error("--steps must be at least 1")
    if options.embedding_dim < 1:
        parser.error("--embedding-dim must be positive")
    if options.num_embeddings < NUM_CLASSES:
        parser.error(f"--num-embeddings must be at least {NUM_CLASSES} (one id per class)")
    if options.eval_every < 0:
        parser.error("--eval-every must not be negative")
    if not math.isfinite(options.lr) or options.timeout <= 0:
        parser.error("--lr must be finite and --timeout positive")
    if options.kill_owner_at is not None and not 0 <= options.kill_owner_at < options.steps:
        parser.error("--kill-owner-at must be a step of this run: 0 <= STEP < --steps")
    if options.checkpoint_every < 1:
        parser.error("--checkpoint-every must be at least 1")
    if options.resume and not Path(options.resume).is_file():
        parser.error(f"--resume: no such file: {options.resume}")
    progress = options.progress
    if progress is None:  # a bar only where someone watches
        progress = sys.stdout.isatty() and sys.stderr.isatty()
    return DemoConfig(
        trainers=options.trainers,
        steps=options.steps,
        batch_size=options.batch_size,
        embedding_dim=options.embedding_dim,
        num_embeddings=options.num_embeddings,
        lr=options.lr,
        seed=options.seed,
        eval_every=options.eval_every,
        plot=options.plot,
        json=options.json,
        checkpoint=options.checkpoint or None,
        resume=options.resume,
        timeout=options.timeout,
        progress=progress,
        kill_owner_at=options.kill_owner_at,
        checkpoint_every=options.checkpoint_every,
        wire_dtype=options.wire_dtype,
    )


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``remote-module demo``: every flag with its help and its default."""
    defaults = DemoConfig()
    parser = argparse.ArgumentParser(prog="remote-module demo", description=DESCRIPTION)
    add = parser.add_argument
    add("--version", action="version", version=f"remote-module {__version__}")
    add(
        "--trainers",
        type=int,
        default=defaults.trainers,
        metavar="N",
        help="trainer processes, besides the master and the parameter server "
        "(default: %(default)s)",
    )
    add(
        "--steps",
        type=int,
        default=defaults.steps,
        metavar="N",
        help="training steps per trainer (default: %(default)s)",
    )
    add(
        "--batch-size",
        type=int,
        default=defaults.batch_size,
        metavar="N",
        help="bags per trainer and step (default: %(default)s)",
    )
    add(
        "--embedding-dim",
        type=int,
        default=defaults.embedding_dim,
        metavar="N",
        help="width of the remote embedding (default: %(default)s)",
    )
    add(
        "--num-embeddings",
        type=int,
        default=defaults.num_embeddings,
        metavar="N",
        help="rows of the remote embedding: the ids in the task (default: %(default)s)",
    )
    add(
        "--lr",
        type=float,
        default=defaults.lr,
        help="Adagrad learning rate, for the embedding and the head (default: %(default)s)",
    )
    add(
        "--seed",
        type=int,
        default=defaults.seed,
        help="seed of the data and the initial embedding (default: %(default)s)",
    )
    add(
        "--eval-every",
        type=int,
        default=defaults.eval_every,
        metavar="N",
        help="score the held-out split every N steps, besides before the first and after "
        "the last; 0: only those two (default: %(default)s)",
    )
    add(
        "--plot",
        metavar="PATH",
        help="write loss and accuracy curves as a PNG; needs matplotlib (default: no plot)",
    )
    add(
        "--json",
        metavar="PATH",
        help="write the summary, with every held-out evaluation, as JSON (default: none)",
    )
    add(
        "--checkpoint",
        metavar="PATH",
        help="save the trained embedding and head to PATH at the end (default: none)",
    )
    add(
        "--resume",
        metavar="PATH",
        help="continue from a checkpoint written by --checkpoint (default: a fresh start)",
    )
    add(
        "--timeout",
        type=float,
        default=defaults.timeout,
        metavar="SECONDS",
        help="bound on every RPC and on joining the group (default: %(default)s)",
    )
    add(
        "--kill-owner-at",
        type=int,
        metavar="STEP",
        help="start a standby for the parameter server, SIGKILL the parameter server at this "
        "step, and train on: the standby takes the embedding over from its newest checkpoint "
        "(default: no failover)",
    )
    add(
        "--checkpoint-every",
        type=int,
        default=defaults.checkpoint_every,
        metavar="N",
        help="with --kill-owner-at: the parameter server checkpoints the embedding to its "
        "standby after every N calls (default: %(default)s)",
    )
    add(
        "--wire-dtype",
        choices=WIRE_DTYPES,
        help="the parameter server's embeddings and their gradients cross the wire in this "
        "dtype (RemoteModule's wire_dtype; int8: 8-bit codes with a scale per block) "
        "(default: as they are, float32)",
    )
    add(
        "--progress",
        action=argparse.BooleanOptionalAction,
        help="show one progress bar for all trainers (default: when stdout and stderr are "
        "terminals)",
    )
    return parser
