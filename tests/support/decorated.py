"""An interface written with ``@remote_module.interface`` as the README shows it: a
``typing.Protocol`` with ``...`` bodies. Type checkers read this file as a user's own
(``tests/test_interface_decorator.py`` runs mypy --strict and basedpyright over it); the module
that implements it is ``tests.support.decorated_module``."""

from typing import NamedTuple, Protocol

from torch import Tensor

import remote_module


class Summed(NamedTuple):
    total: Tensor
    items: int


@remote_module.interface
class SummerInterface(Protocol):
    """Sums its input."""

    def forward(self, x: Tensor, scale: float = 1.0) -> Summed: ...

    def features(self) -> int:
        """How many features it expects."""
        ...


def summed_twice(summer: SummerInterface, x: Tensor) -> Tensor:
    """Type-checked as an interface's user would write it."""
    return summer.forward(x, 2.0).total + summer.forward(x).total
