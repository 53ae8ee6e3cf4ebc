"""What a worker that owns a ranker offers: every worker imports this module by name."""

from typing import Protocol

import remote_module
from torch import Tensor


@remote_module.interface
class RankerInterface(Protocol):
    def forward(self, x: Tensor) -> Tensor: ...
    def best(self, x: Tensor, k: int = 1) -> Tensor: ...
