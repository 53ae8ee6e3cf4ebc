"""What the deferred-load tests (``tests/test_deferred_load.py``) run on the owner and the
receiver, and their interfaces: one per test, since each needs an owner that has never
loaded the interface's generated module. Importable on every worker.

No ``from __future__ import annotations``: TorchScript reads these annotations.
"""

import sys
import time
from typing import Any

import torch
from torch import Tensor, nn

from remote_module.runtime import owner, registry


@torch.jit.interface
class DeferredCallInterface:
    def forward(self, x: Tensor, scale: float = 2.0) -> Tensor:
        pass


@torch.jit.interface
class DeferredScriptInterface:
    def forward(self, x: Tensor, scale: float = 2.0) -> Tensor:
        pass


@torch.jit.interface
class DeferredParentInterface:
    def forward(self, x: Tensor, scale: float = 2.0) -> Tensor:
        pass


@torch.jit.interface
class DeferredSendInterface:
    def forward(self, x: Tensor, scale: float = 2.0) -> Tensor:
        pass


@torch.jit.interface
class DeferredFailInterface:
    def forward(self, x: Tensor, scale: float = 2.0) -> Tensor:
        pass


@torch.jit.interface
class DeferredWireInterface:
    def forward(self, x: Tensor, scale: float = 2.0) -> Tensor:
        pass


@torch.jit.interface
class DeferredSlowInterface:
    def forward(self, x: Tensor, scale: float = 2.0) -> Tensor:
        pass


@torch.jit.interface
class DeferredRrefInterface:
    def forward(self, x: Tensor, scale: float = 2.0) -> Tensor:
        pass


@torch.jit.interface
class DeferredHeldInterface:
    def forward(self, x: Tensor, scale: float = 2.0) -> Tensor:
        pass


class Scale(nn.Module):
    """Matches every interface above."""

    def forward(self, x: Tensor, scale: float = 2.0) -> Tensor:
        return x * scale


class Parent(nn.Module):
    """A scriptable model that holds a RemoteModule and calls it."""

    def __init__(self, remote: nn.Module) -> None:
        super().__init__()
        self.remote = remote

    def forward(self, x: Tensor) -> Tensor:
        return self.remote.forward(x, 3.0) + 1.0


# --- On the owner: a slow or failing load of generated modules ------------------------------

_original_ensure = owner.load_generated
_delays: dict[str, float] = {}  # interface class name -> seconds
_failures: dict[str, str] = {}  # interface class name -> message
_requests: list[tuple[str, bool]] = []  # (interface class name, wire) per load request


def _ensure(module_name: str, interface_cls: Any, move_tensors: bool, wire: bool = False) -> None:
    name = interface_cls.__name__
    _requests.append((name, wire))
    if name in _failures:
        raise ValueError(_failures[name])
    # A slow load, as a real one is slow: under the registry's load lock, so that another
    # request waits for it. Each (interface, wire) is slow once.
    delay = _delays.get(name, 0.0) if _requests.count((name, wire)) == 1 else 0.0
    with registry._load_lock:
        time.sleep(delay)
        _original_ensure(module_name, interface_cls, move_tensors, wire)


def slow_loads(delays: dict[str, float], failures: dict[str, str]) -> None:
    """From now on, loading the generated module of these interfaces waits, or fails."""
    _delays.update(delays)
    _failures.update(failures)
    owner.load_generated = _ensure  # type: ignore[assignment]


def normal_loads() -> None:
    owner.load_generated = _original_ensure
    _delays.clear()
    _failures.clear()


def load_requests() -> list[tuple[str, bool]]:
    """Every request to load a generated module this owner received, in order."""
    return list(_requests)


def is_ready(module_name: str, wire: bool = False) -> bool:
    """Whether this process has ``module_name`` loaded and its remote functions compiled."""
    module = sys.modules.get(module_name)
    wanted = {"_remote_functions", *(("_wire_functions",) if wire else ())}
    return module is not None and registry._compiled.get(module, frozenset()) >= wanted


# --- On the receiver --------------------------------------------------------------------------


def call_received(remote: Any, x: Tensor) -> Tensor:
    """Call a RemoteModule that just arrived over RPC."""
    return remote(x, scale=5.0)
