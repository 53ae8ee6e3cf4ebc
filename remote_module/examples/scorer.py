"""The documentation's example: an interface in an importable module and a module that
matches it (every process of an RPC group can import it by name).

Its typed class is generated at build time into ``remote_module/examples/generated``::

    remote-module-codegen remote_module.examples.embedding:EmbeddingBagInterface \\
        remote_module.examples.scorer:ScorerInterface --output-dir remote_module/examples/generated
"""

from typing import NamedTuple, Protocol

import torch
from torch import Tensor, nn

import remote_module


class Scored(NamedTuple):
    """A batch's scores and the index of the best one."""

    score: Tensor
    label: int


@remote_module.interface  # torch.jit.interface, quietly; a Protocol where TorchScript is gone
class ScorerInterface(Protocol):
    def forward(self, x: Tensor, scale: float = 1.0) -> Scored: ...
    def stats(self) -> dict[str, float]: ...


class ScorerProtocol(Protocol):
    """The same methods as a plain ``typing.Protocol``: eager on the owner, no TorchScript."""

    def forward(self, x: Tensor, scale: float = 1.0) -> Scored: ...
    def stats(self) -> dict[str, float]: ...


class Scorer(nn.Module):
    """A seeded linear scorer over ``features`` inputs."""

    def __init__(self, features: int = 4) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(features, 1)

    def forward(self, x: Tensor, scale: float = 1.0) -> Scored:
        scores = self.linear(x).squeeze(1) * scale
        return Scored(scores, int(scores.argmax()))

    @torch.jit.export
    def stats(self) -> dict[str, float]:
        return {"weight_sum": float(self.linear.weight.sum())}
