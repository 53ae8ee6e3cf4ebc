"""The test suite's user package, its TorchScript interface: the methods of
``tests.scorer.model.ScorerProtocol`` as a ``@remote_module.interface`` (a TorchScript
interface, written as a ``typing.Protocol`` with ``...`` bodies, as the README shows it), whose
results are NamedTuples alone and nested."""

from typing import Protocol

from torch import Tensor

import remote_module
from tests.scorer.model import Scored


@remote_module.interface
class ScorerInterface(Protocol):
    def forward(self, x: Tensor, scale: float = 1.0) -> Scored: ...

    def stats(self) -> dict[str, float]: ...

    def top(self, x: Tensor, k: int = 2) -> list[Scored]: ...

    def best(self, x: Tensor, threshold: float | None = None) -> Scored | None: ...

    def table(self, x: Tensor) -> dict[str, Scored]: ...

    def pair(self, x: Tensor) -> tuple[Scored, Tensor]: ...
