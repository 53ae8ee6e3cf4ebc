"""Modules and owner-side helpers for the failover tests (``tests/test_failover.py``)."""

from __future__ import annotations

import os
import threading
from typing import Any, Protocol

import torch
from torch import Tensor, nn

import remote_module
from remote_module.runtime.owner import checkpoints


class Accumulator(nn.Module):
    """Adds each input to a running total (its state) and returns the total."""

    def __init__(self, width: int = 2, start: float = 0.0) -> None:
        super().__init__()
        self.register_buffer("total", torch.full((width,), float(start)))
        self.scale = nn.Parameter(torch.ones(width))

    def forward(self, x: Tensor) -> Tensor:
        with torch.no_grad():
            self.total.add_(x)
        return self.total.clone()


@torch.jit.interface
class AccumulatorInterface:
    def forward(self, x: Tensor) -> Tensor:
        pass


class AccumulatorProtocol(Protocol):
    def forward(self, x: Tensor) -> Tensor: ...


class Raising(nn.Module):
    """Raises ``ValueError`` on every call: a module's own error."""

    def forward(self, x: Tensor) -> Tensor:
        raise ValueError("Raising refuses every input")


class Sleeping(nn.Module):
    """Sleeps ``x[0]`` seconds, then returns ``x``: a call that outlasts a timeout."""

    def forward(self, x: Tensor) -> Tensor:
        import time

        time.sleep(float(x[0]))
        return x


_stall = threading.Event()  # set: the next state_dict() blocks for good
_stalled = threading.Event()  # set: a state_dict() is blocked now


class Stalling(Accumulator):
    """An accumulator whose ``state_dict()`` blocks for good once an input of -1 arms it: its
    owner is then killed in the middle of a checkpoint."""

    def forward(self, x: Tensor) -> Tensor:
        if float(x[0]) == -1.0:
            _stall.set()
            return self.total.clone()
        return super().forward(x)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        if _stall.is_set():
            _stalled.set()
            threading.Event().wait()  # until this process is killed
        return super().state_dict(*args, **kwargs)


def stalled(timeout_s: float) -> bool:
    """On the owner: whether a ``state_dict()`` blocks (waits up to ``timeout_s``)."""
    return _stalled.wait(timeout_s)


def held(identity: str) -> tuple[int, int] | None:
    """On a standby: the ``(seat, version)`` of the checkpoint it holds for ``identity``."""
    return checkpoints.held(identity)


def cut(identity: str) -> int | None:
    """On an owner: the version of the newest checkpoint it cut of ``identity`` (None: it
    never owned it)."""
    owned = checkpoints.STATE.owned.get(identity)
    return None if owned is None else owned.version


def pid() -> int:
    return os.getpid()


def forward_through(rm: remote_module.RemoteModule, x: Tensor) -> Tensor:
    """On another worker: a call through a copy of ``rm`` sent there."""
    return rm(x)


def call_copy(rm: remote_module.RemoteModule, x: Tensor) -> tuple[str, Any]:
    """On another worker: a call through a copy of ``rm``; what it returned or raised (the
    exception's type name, its attributes where it is an OwnerFailover), and the copy's owner
    afterwards."""
    try:
        value: Any = rm(x)
        outcome: Any = ("ok", value)
    except remote_module.OwnerFailover as error:
        outcome = (
            "failover",
            (error.failed_owner, error.new_owner, error.checkpoint_version),
        )
    except Exception as error:
        outcome = (type(error).__name__, str(error))
    return outcome[0], (outcome[1], rm.on)


_kept: dict[str, remote_module.RemoteModule] = {}


def keep(name: str, rm: remote_module.RemoteModule) -> str:
    """On another worker: hold a copy of ``rm`` (sent over RPC now) under ``name``."""
    _kept[name] = rm
    return str(rm.on)


def call_kept(name: str, x: Tensor) -> tuple[str, Any]:
    """On another worker: :func:`call_copy` through the copy kept under ``name``."""
    return call_copy(_kept[name], x)


def drop_kept() -> None:
    _kept.clear()
