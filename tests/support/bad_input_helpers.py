"""Modules whose every operation raises one exception type, for ``tests/test_bad_input.py``:
a remote exception must reach the caller as the same type from every route."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor, nn


class Refusal(ValueError):
    """A user's own exception type, a subclass of one torch's RPC rebuilds."""


class RaisesEverywhere(nn.Module):
    """Raises ``error_type(message)`` from ``forward``, ``state_dict``, ``load_state_dict``,
    ``parameters`` and ``train``; with ``in_init``, from its constructor already."""

    def __init__(self, error_type: type[Exception], in_init: bool = False) -> None:
        if in_init:
            raise error_type(f"{error_type.__name__} from __init__")
        super().__init__()
        self.error_type = error_type
        self.weight = nn.Parameter(torch.ones(2))

    def _fail(self, where: str) -> Any:
        raise self.error_type(f"{self.error_type.__name__} from {where}")

    def forward(self, x: Tensor) -> Tensor:
        return self._fail("forward")

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._fail("state_dict")

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._fail("load_state_dict")

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]:
        return self._fail("parameters")

    def train(self, mode: bool = True) -> Any:
        if not hasattr(self, "error_type"):  # nn.Module's own calls during construction
            return super().train(mode)
        return self._fail("train")
