"""Modules that raise, for ``tests/test_remote_errors.py``: the same faults raised in Python
and in TorchScript (a module scripted on its owner), from a method, ``state_dict`` or
``load_state_dict`` (importable on every worker)."""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import Tensor, nn

from tests.scorer.model import Scored, Scorer


class Refusal(ValueError):
    """A user's own exception type, a subclass of one that torch's RPC rebuilds."""


# fault -> (what the module raises, in Python and in TorchScript alike)
FAULTS = {
    0: "ValueError('the value is refused')",
    1: "TypeError('the type is refused')",
    2: "KeyError('no such key')",
    3: "NotImplementedError('not implemented here')",
    4: "Refusal('refused by its own type')",
    5: "ValueError('first line\\nsecond line')",
}


def raise_fault(fault: int) -> None:
    """Raise fault ``fault`` (see :data:`FAULTS`); scriptable: a scripted module raises it in
    TorchScript."""
    if fault == 0:
        raise ValueError("the value is refused")
    if fault == 1:
        raise TypeError("the type is refused")
    if fault == 2:
        raise KeyError("no such key")
    if fault == 3:
        raise NotImplementedError("not implemented here")
    if fault == 4:
        raise Refusal("refused by its own type")
    if fault == 5:
        raise ValueError("first line\nsecond line")


@torch.jit.interface
class FaultyInterface:
    def forward(self, x: Tensor) -> Tensor:
        pass


class FaultyProtocol(Protocol):
    def forward(self, x: Tensor) -> Tensor: ...


class Faulty(nn.Module):
    """``forward`` raises fault ``fault``; with ``in_state``, so do ``state_dict`` and
    ``load_state_dict`` (in Python: TorchScript compiles neither)."""

    def __init__(self, fault: int, in_state: bool = False) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.fault = fault
        self.in_state = in_state

    def forward(self, x: Tensor) -> Tensor:
        raise_fault(self.fault)
        return self.linear(x)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        if self.in_state:
            raise_fault(self.fault)
        return super().state_dict(*args, **kwargs)

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        if self.in_state:
            raise_fault(self.fault)
        return super().load_state_dict(*args, **kwargs)


class FaultyScorer(Scorer):
    """A module of the test suite's user package (``tests.scorer``) whose ``forward`` raises
    fault ``fault``: for its generated typed classes."""

    def __init__(self, fault: int) -> None:
        super().__init__()
        self.fault = fault

    def forward(self, x: Tensor, scale: float = 1.0) -> Scored:
        raise_fault(self.fault)
        scores = self.linear(x).squeeze(1) * scale
        return Scored(scores, int(scores.argmax()))


class Calls(nn.Module):
    """A model that calls a RemoteModule between local layers, to compile whole."""

    def __init__(self, remote: nn.Module) -> None:
        super().__init__()
        self.local = nn.Linear(4, 4)
        self.remote = remote

    def forward(self, x: Tensor) -> Tensor:
        return self.remote(self.local(x).relu()).tanh()


def shapes(method: str, x: Tensor) -> Tensor:
    """``fake=`` for :class:`Faulty`: its result for fake arguments (no twin can run it)."""
    return x.new_empty(x.shape)


class RefusedAtBirth(Faulty):
    """Its constructor raises fault ``fault``: the module is never created."""

    def __init__(self, fault: int) -> None:
        super().__init__(fault)
        raise_fault(fault)


def hold(remote: Any) -> str:
    """On another worker: a RemoteModule received (sending one waits for its module)."""
    return type(remote).__name__
