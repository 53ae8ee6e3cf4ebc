"""Interfaces and modules shared by the tests (importable on every worker)."""

from typing import Any, NamedTuple

import torch
from torch import Tensor, nn


class Pair(NamedTuple):
    first: Tensor
    second: int


@torch.jit.interface
class LinearInterface:
    def forward(self, x: Tensor, scale: float = 1.0) -> Tensor:
        pass

    def weight_sum(self) -> float:
        pass

    def describe(self, prefix: str = "w", times: int = 2) -> str:
        pass


@torch.jit.interface
class CacheProbeInterface:
    """An interface no build-time stubs exist for: always rendered in memory (or loaded from
    the render cache)."""

    def forward(self, x: Tensor) -> Tensor:
        pass


@torch.jit.interface
class ShapesInterface:
    def forward(
        self,
        x: Tensor,
        maybe: Tensor | None = None,
        many: list[Tensor] = (),
        named: dict[str, Tensor] = (),
    ) -> tuple[Tensor, list[Tensor], dict[str, Tensor]]:
        pass

    def pair(self, x: Tensor) -> Pair:
        pass


class ScaledLinear(nn.Module):
    def __init__(self, in_features: int = 4, out_features: int = 4) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: Tensor, scale: float = 1.0) -> Tensor:
        return self.linear(x) * scale

    @torch.jit.export
    def weight_sum(self) -> float:
        return float(self.linear.weight.sum().item())

    @torch.jit.export
    def describe(self, prefix: str = "w", times: int = 2) -> str:
        return prefix + str(times)


def local_scaled(remote: Any) -> ScaledLinear:
    """A local ScaledLinear with the weights of ``remote`` (a RemoteModule of one), to compute
    the values its calls must return."""
    local = ScaledLinear()
    local.load_state_dict(remote.remote_state_dict())
    return local
