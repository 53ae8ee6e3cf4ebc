"""What the test suite's user package is made of without TorchScript: a NamedTuple result, the
interface as a ``typing.Protocol``, and a module that implements it (and the TorchScript
interface of ``tests.scorer.interfaces``). Importable where TorchScript is unavailable."""

from typing import NamedTuple, Protocol

import torch
from torch import Tensor, nn


class Scored(NamedTuple):
    score: Tensor
    label: int


class ScorerProtocol(Protocol):
    def forward(self, x: Tensor, scale: float = 1.0) -> Scored: ...

    def stats(self) -> dict[str, float]: ...

    def top(self, x: Tensor, k: int = 2) -> list[Scored]: ...

    def best(self, x: Tensor, threshold: float | None = None) -> Scored | None: ...

    def table(self, x: Tensor) -> dict[str, Scored]: ...

    def pair(self, x: Tensor) -> tuple[Scored, Tensor]: ...


class Scorer(nn.Module):
    """Scores rows of ``x`` with a linear layer; the label is the index of the best row."""

    def __init__(self, features: int = 4) -> None:
        super().__init__()
        self.linear = nn.Linear(features, 1)

    def forward(self, x: Tensor, scale: float = 1.0) -> Scored:
        scores = self.linear(x).squeeze(1) * scale
        return Scored(scores, int(scores.argmax()))

    @torch.jit.export
    def stats(self) -> dict[str, float]:
        return {"weight_sum": float(self.linear.weight.sum()), "bias": float(self.linear.bias)}

    @torch.jit.export
    def top(self, x: Tensor, k: int = 2) -> list[Scored]:
        scores = self.linear(x).squeeze(1)
        order: list[int] = scores.argsort(descending=True)[:k].tolist()
        return [Scored(scores[i : i + 1], i) for i in order]

    @torch.jit.export
    def best(self, x: Tensor, threshold: float | None = None) -> Scored | None:
        scores = self.linear(x).squeeze(1)
        if threshold is not None and float(scores.max()) < threshold:
            return None
        return Scored(scores.max().reshape(1), int(scores.argmax()))

    @torch.jit.export
    def table(self, x: Tensor) -> dict[str, Scored]:
        scores = self.linear(x).squeeze(1)
        return {"max": Scored(scores.max().reshape(1), int(scores.argmax()))}

    @torch.jit.export
    def pair(self, x: Tensor) -> tuple[Scored, Tensor]:
        scores = self.linear(x).squeeze(1)
        return Scored(scores, int(scores.argmax())), scores * 2
