"""The owner side of ``tests/test_awaitable.py``: a module whose calls wait at a gate that the
test opens, and the RPCs that close it, open it and count the calls waiting there."""

from __future__ import annotations

import threading

from torch import Tensor, nn

GATE_TIMEOUT_S = 30.0  # a call never waits longer: a test that never opens the gate fails

_gate = threading.Event()
_lock = threading.Lock()
_waiting = [0]


class Gated(nn.Module):
    """``forward(x)`` is ``x + 1``, once the gate is open (``TimeoutError`` after
    :data:`GATE_TIMEOUT_S`)."""

    def forward(self, x: Tensor) -> Tensor:
        with _lock:
            _waiting[0] += 1
        try:
            if not _gate.wait(GATE_TIMEOUT_S):
                raise TimeoutError("the gate was never opened")
        finally:
            with _lock:
                _waiting[0] -= 1
        return x + 1


def close_gate() -> None:
    _gate.clear()


def open_gate() -> None:
    _gate.set()


def waiting() -> int:
    """How many calls wait at the gate now."""
    with _lock:
        return _waiting[0]
