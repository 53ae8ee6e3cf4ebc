"""The demo's synthetic task."""

from __future__ import annotations

from typing import Any

import torch

from remote_module.demo.config import DemoConfig

NUM_CLASSES = 4
BAG_SIZE = 8


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
