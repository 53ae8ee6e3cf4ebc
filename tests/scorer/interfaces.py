# TorchScript reads only the signatures of an interface's methods, whose bodies are `pass`:
# mypy: disable-error-code="empty-body"
# pyright: reportReturnType=false
"""The test suite's user package, its TorchScript interface: the methods of
``tests.scorer.model.ScorerProtocol`` as a ``@torch.jit.interface``, whose results are
NamedTuples alone and nested."""

import torch
from torch import Tensor

from tests.scorer.model import Scored


@torch.jit.interface
class ScorerInterface:
    def forward(self, x: Tensor, scale: float = 1.0) -> Scored:
        pass

    def stats(self) -> dict[str, float]:
        pass

    def top(self, x: Tensor, k: int = 2) -> list[Scored]:
        pass

    def best(self, x: Tensor, threshold: float | None = None) -> Scored | None:
        pass

    def table(self, x: Tensor) -> dict[str, Scored]:
        pass

    def pair(self, x: Tensor) -> tuple[Scored, Tensor]:
        pass
