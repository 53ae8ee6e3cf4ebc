"""The flags of ``remote-module demo`` and its entry point."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from remote_module.demo import launch
from remote_module.demo.config import DemoConfig
from remote_module.demo.data import NUM_CLASSES

DESCRIPTION = "The DDP + RPC hybrid pattern, trained for real on local workers."


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``remote-module demo``: parse the flags, then run (or join) the demo."""
    return launch.run(_parse(argv))


def _parse(argv: Sequence[str] | None) -> DemoConfig:
    parser = argparse.ArgumentParser(prog="remote-module demo", description=DESCRIPTION)
    defaults = DemoConfig()
    parser.add_argument("--trainers", type=int, default=defaults.trainers)
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--embedding-dim", type=int, default=defaults.embedding_dim)
    parser.add_argument("--num-embeddings", type=int, default=defaults.num_embeddings)
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--eval-every",
        type=int,
        default=defaults.eval_every,
        metavar="N",
        help="score the held-out split every N steps, besides before the first and after "
        "the last; 0: only those two",
    )
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
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        help="one progress bar for all trainers (default: when stdout and stderr are terminals)",
    )
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
    )
