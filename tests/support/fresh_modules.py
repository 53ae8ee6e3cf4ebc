"""Modules, interfaces and RPC functions for the fresh-process tests
(``tests/test_fresh_processes.py``): torch and the standard library only.

This module never imports ``remote_module`` (nor any ``tests.support`` module that does): a
fresh worker (``tests.support.fresh_worker``) meets ``remote_module`` only through the messages
it unpickles, and what it unpickles from here must not import it first.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Protocol

import torch
import torch.distributed.rpc as rpc
from torch import Tensor, nn
from torch.futures import Future

WIDTH = 4


class Affine(nn.Module):
    """``x @ weight.T + bias`` with weights fixed by ``seed`` (no random numbers): the caller
    builds the same module locally and compares every result."""

    def __init__(self, seed: int = 0, width: int = WIDTH) -> None:
        super().__init__()
        values = torch.arange(width * width, dtype=torch.float32).reshape(width, width)
        self.weight = nn.Parameter((values - seed) / (width * width))
        self.bias = nn.Parameter(torch.full((width,), float(seed)))

    def forward(self, x: Tensor) -> Tensor:
        return x @ self.weight.t() + self.bias


@torch.jit.interface
class AffineInterface:
    def forward(self, x: Tensor) -> Tensor:
        pass


class AffineProtocol(Protocol):
    def forward(self, x: Tensor) -> Tensor: ...


class RaisingInit(nn.Module):
    """A module whose constructor raises ``ValueError`` (on the owner, where it is built)."""

    def __init__(self, tag: str = "") -> None:
        super().__init__()
        raise ValueError(f"RaisingInit refuses to be built ({tag})")

    def forward(self, x: Tensor) -> Tensor:
        return x


def busy(seconds: float) -> int:
    """Keep one RPC thread of this process busy for ``seconds`` (sleeping: the GIL stays free
    for the threads that unpickle the messages queued behind it); returns the pid."""
    time.sleep(seconds)
    return os.getpid()


def call_received(rm: Any, x: Tensor) -> Tensor:
    """On a receiver: ``rm(x)`` through a RemoteModule that arrived in this call's arguments (an
    RPC thread of the receiver waits for the reply: torch completes it on another one, so a
    test keeps fewer such calls in flight than the receiver has threads)."""
    return rm(x)


@rpc.functions.async_execution
def call_received_async(rm: Any, x: Tensor) -> Future[Tensor]:
    """On a receiver: ``rm.forward_async(x)`` through a RemoteModule that arrived in this call's
    arguments, its future the reply (no RPC thread of the receiver waits for it)."""
    return rm.forward_async(x)


def remote_module_loaded() -> list[str]:
    """The ``remote_module`` modules this process has loaded (none, in a fresh one)."""
    return sorted(name for name in sys.modules if name.split(".")[0] == "remote_module")
