"""A module that matches ``tests.support.decorated.SummerInterface``."""

import torch
from torch import Tensor, nn

import remote_module
from tests.support.decorated import Summed


@remote_module.interface
class PlainSummerInterface:
    """What @torch.jit.interface takes, under the new decorator: no Protocol, pass bodies."""

    def forward(self, x: Tensor, scale: float = 1.0) -> Summed:
        pass

    def features(self) -> int:
        pass


class Summer(nn.Module):
    def __init__(self, features: int = 3) -> None:
        super().__init__()
        self.width = features

    def forward(self, x: Tensor, scale: float = 1.0) -> Summed:
        return Summed(x.sum() * scale, x.numel())

    @torch.jit.export
    def features(self) -> int:
        return self.width
