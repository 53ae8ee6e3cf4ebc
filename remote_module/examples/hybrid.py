"""The documentation's hybrid models (``docs/guides/compiling.md``): local layers around a
RemoteModule, compiled, exported and trained there."""

import torch
from torch import nn

from remote_module import RemoteModule


class Hybrid(nn.Module):
    """A local layer on this worker, then ``remote`` (a RemoteModule) on another."""

    def __init__(self, remote: RemoteModule) -> None:
        super().__init__()
        self.local = nn.Linear(4, 4)
        self.remote = remote

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.remote(self.local(x).relu()))


class AsyncHybrid(Hybrid):
    """The same model, its remote call made through a future."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.remote.forward_async(self.local(x).relu()).wait())
