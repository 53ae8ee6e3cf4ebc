"""The demo's synthetic task: bags of ids, labelled by topic.

Every id belongs to one of ``NUM_CLASSES`` hidden topics. A bag of class ``c`` holds
``BAG_SIZE`` ids: ``TOPIC_IDS`` from topic ``c``, the rest from random topics, every draw
skewed like real id traffic (a few hot ids, a long tail). The label shows only through the
ids, so the model learns it by learning each id's embedding; a held-out split of fresh bags
(their own seed) shows that it generalises to new combinations of the ids it has seen.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
from torch import Tensor

NUM_CLASSES = 4
BAG_SIZE = 8
# Ids of a bag from its own topic: a majority, so every bag's label is certain.
TOPIC_IDS = 5
# An id's popularity rank within its topic is n * u**SKEW for uniform u: higher is more skewed.
SKEW = 5.0
HELD_OUT_BAGS = 1024


@dataclass(frozen=True)
class Bags:
    """Bags in ``nn.EmbeddingBag``'s layout: flat ``indices``, each bag's start in
    ``offsets``, and one label per bag."""

    indices: Tensor
    offsets: Tensor
    labels: Tensor

    def share(self, part: int, parts: int) -> Bags:
        """Bags of the ``part``-th of ``parts`` near-equal, contiguous shares."""
        labels = self.labels.tensor_split(parts)[part]
        indices = self.indices.view(-1, BAG_SIZE).tensor_split(parts)[part].reshape(-1)
        return Bags(indices, _offsets(len(labels)), labels)


class SyntheticBags:
    """The task for ``num_embeddings`` ids: the same hidden topics for one ``seed`` on every
    worker, training batches per trainer and step, and one held-out split.

    Example::

        data = SyntheticBags(num_embeddings=100_000, seed=0)
        batch = data.training_batch(step=0, trainer=1, size=64)
        held_out = data.held_out().share(1, 2)  # trainer1's half of the held-out split
    """

    def __init__(self, num_embeddings: int, seed: int) -> None:
        if num_embeddings < NUM_CLASSES:
            raise ValueError(f"need at least {NUM_CLASSES} ids, got {num_embeddings}")
        generator = torch.Generator().manual_seed(_seed("topics", seed))
        per_topic = num_embeddings // NUM_CLASSES
        shuffled = torch.randperm(num_embeddings, generator=generator)
        # Row c: topic c's ids, most popular first.
        self.topics = shuffled[: per_topic * NUM_CLASSES].view(per_topic, NUM_CLASSES).T
        self.seed = seed

    def training_batch(self, step: int, trainer: int, size: int) -> Bags:
        """Batch ``step`` of ``trainer``: ``size`` bags no other trainer or step draws."""
        return self._draw(size, _seed("train", self.seed, trainer, step))

    def held_out(self) -> Bags:
        """``HELD_OUT_BAGS`` bags from a seed no training batch uses."""
        return self._draw(HELD_OUT_BAGS, _seed("held-out", self.seed))

    def _draw(self, size: int, seed: int) -> Bags:
        generator = torch.Generator().manual_seed(seed)
        labels = torch.randint(NUM_CLASSES, (size,), generator=generator)
        topics = labels[:, None].repeat(1, BAG_SIZE)
        topics[:, TOPIC_IDS:] = torch.randint(
            NUM_CLASSES, (size, BAG_SIZE - TOPIC_IDS), generator=generator
        )
        per_topic = self.topics.shape[1]
        ranks = (torch.rand(size, BAG_SIZE, generator=generator).pow(SKEW) * per_topic).long()
        return Bags(self.topics[topics, ranks].reshape(-1), _offsets(size), labels)


def _offsets(bags: int) -> Tensor:
    return torch.arange(0, bags * BAG_SIZE, BAG_SIZE)


def _seed(*parts: object) -> int:
    # Independent streams per purpose, trainer and step, stable across processes and runs.
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1
