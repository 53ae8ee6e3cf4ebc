"""Models for ``tests/test_compile.py``: a local layer, then a RemoteModule, as a hybrid model
holds one (importable on every worker)."""

from typing import Protocol

from torch import Tensor, nn


class Affine(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(x)


class AffineProtocol(Protocol):
    def forward(self, x: Tensor) -> Tensor: ...


class Hybrid(nn.Module):
    """``local`` on this worker, ``remote`` on another; ``calls`` remote calls per forward."""

    def __init__(self, remote: nn.Module, calls: int = 1) -> None:
        super().__init__()
        self.local = nn.Linear(4, 4)
        self.remote = remote
        self.calls = calls

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.local(x).relu()
        out = self.remote(hidden)
        if self.calls == 2:  # no loop: torch.compile gives up on a frame that breaks in one
            out = out + self.remote(hidden * 2)
        return out.tanh()
