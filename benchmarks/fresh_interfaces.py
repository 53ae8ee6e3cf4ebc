"""The ``fresh_sequence`` figure's interfaces, in a module of their own: importing it compiles
them and nothing else. (``benchmarks.interfaces`` compiles the suite's TorchScript functions as
it loads, which would do a process's first TorchScript compilation before the figure times it.)

Two pairs of two different interfaces, one pair with build-time stubs
(``benchmarks/fresh_generated/``, checked by ``scripts/regen-examples --check``), one pair
without (a user's plain interfaces: rendered in memory, the render cache warm). Every one has
a name of its own: upstream instantiates its template once per interface's qualified name.

No ``from __future__ import annotations``: TorchScript reads these annotations.
"""

import torch
from torch import Tensor


@torch.jit.interface
class StubbedFirstInterface:
    """The first interface of the ``stubs`` row (``nn.Linear`` matches it)."""

    def forward(self, input: Tensor) -> Tensor:
        pass


@torch.jit.interface
class StubbedSecondInterface:
    """The second interface of the ``stubs`` row."""

    def forward(self, input: Tensor) -> Tensor:
        pass


@torch.jit.interface
class PlainFirstInterface:
    """The first interface of the ``no_stubs`` row: no build-time stubs."""

    def forward(self, input: Tensor) -> Tensor:
        pass


@torch.jit.interface
class PlainSecondInterface:
    """The second interface of the ``no_stubs`` row: no build-time stubs."""

    def forward(self, input: Tensor) -> Tensor:
        pass
