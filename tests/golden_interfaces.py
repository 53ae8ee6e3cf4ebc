"""Interfaces rendered into ``tests/golden/`` by ``scripts/regen-golden``.

One per shape of generated code: a minimal forward-only interface, several methods with
defaults and a zero-argument method, and containers with Optional, a NamedTuple and a
``@torch.jit.script`` class (written in PEP 585/604 spelling, so the golden files also show
the canonical TorchScript spelling the generator writes).

No ``from __future__ import annotations``: TorchScript cannot resolve a NamedTuple's string
annotations (pytorch#95858).
"""

from typing import NamedTuple

import torch
from torch import Tensor


class Stats(NamedTuple):
    total: Tensor
    count: int


@torch.jit.script
class Box:
    def __init__(self, value: int) -> None:
        self.value = value


@torch.jit.interface
class MinimalInterface:
    def forward(self, x: Tensor) -> Tensor:
        pass


@torch.jit.interface
class MultiMethodInterface:
    def forward(self, x: Tensor, scale: float = 1.0, label: str = "w") -> Tensor:
        pass

    def step_count(self) -> int:
        pass

    def describe(
        self, prefix: str = 'say "hi"\n', times: int = -2, flags: tuple[bool, int] = (True, 0)
    ) -> str:
        pass


@torch.jit.interface
class ContainersInterface:
    def forward(
        self,
        x: Tensor,
        many: list[Tensor],
        table: dict[str, Tensor],
        pair: tuple[Tensor, int],
        maybe: Tensor | None = None,
        count: int | None = None,
    ) -> Stats:
        pass

    def boxed(self, box: Box, tag: str = "b") -> Box:
        pass

    def nested(
        self, batches: list[dict[str, Tensor]], keys: list[str]
    ) -> tuple[list[Tensor], Stats]:
        pass
