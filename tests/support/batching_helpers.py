"""Modules and owner-side probes for ``tests/test_batching.py`` (importable on every worker).

:class:`Rows` records the rows of every run on its owner, so a test can see which calls were
merged; a row whose first value is :data:`HOLD` makes its run wait for :func:`open_gate`, so
that the calls sent meanwhile queue up behind it (a test polls :func:`queued` until they have,
then opens the gate); a row whose first value is :data:`BAD` makes the run raise."""

import threading
from typing import Protocol

import torch
from torch import Tensor, nn

HOLD = 99.0  # a run that holds this row waits for the gate
BAD = -99.0  # a run that holds this row raises
WAIT_S = 60.0  # the longest a held run waits (a test opens the gate long before)

_gate = threading.Event()
_gate.set()
# tag -> the row counts of every run of the module built with it, in order (a scripted
# module's own Python attributes would not outlive a call).
_runs: dict[str, list[int]] = {}


@torch.jit.interface
class RowsInterface:
    def forward(self, x: Tensor, scale: float = 1.0) -> Tensor:
        pass

    def split(self, x: Tensor) -> tuple[Tensor, Tensor]:
        pass


class RowsProtocol(Protocol):
    def forward(self, x: Tensor, scale: float = 1.0) -> Tensor: ...

    def split(self, x: Tensor) -> tuple[Tensor, Tensor]: ...


class Rows(nn.Module):
    """A linear layer whose runs are recorded under ``tag`` (their row counts, in order)."""

    def __init__(self, tag: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 3)
        self.tag = tag

    def forward(self, x: Tensor, scale: float = 1.0) -> Tensor:
        _record(self.tag, x)
        return self.linear(x) * scale

    @torch.jit.export
    def split(self, x: Tensor) -> tuple[Tensor, Tensor]:
        y = self.linear(x)
        return y[:, :1], y[:, 1:]


@torch.jit.ignore
def _record(tag: str, x: Tensor) -> None:
    _runs.setdefault(tag, []).append(int(x.shape[0]))
    first = x[:, 0]
    if bool((first == HOLD).any()):
        _gate.wait(WAIT_S)
    if bool((first == BAD).any()):
        raise ValueError(f"a bad row among {x.shape[0]}")


class Unsplittable(nn.Module):
    """Its result's dimension 0 is not the calls' rows: it cannot be split by them."""

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag

    def forward(self, x: Tensor) -> Tensor:
        _record(self.tag, x)
        return x.sum(dim=1).unsqueeze(0)


def close_gate() -> None:
    _gate.clear()


def open_gate() -> None:
    _gate.set()


def queued() -> int:
    """On the owner: the batched calls waiting in its queues now."""
    from remote_module.runtime.owner import batches

    with batches._lock:
        return sum(len(queue.calls) for queue in batches._queues.values())


def runs(tag: str) -> list[int]:
    """On the owner: the row counts of every run of the module built with ``tag`` so far."""
    return list(_runs.get(tag, []))


def held(rows: int = 1) -> Tensor:
    """Rows whose run waits for the gate."""
    x = torch.ones(rows, 4)
    x[0, 0] = HOLD
    return x


def bad(rows: int = 1) -> Tensor:
    """Rows whose run raises."""
    x = torch.ones(rows, 4)
    x[0, 0] = BAD
    return x


def rows_fake(method: str, x: Tensor, scale: float = 1.0) -> Tensor:
    """``fake=`` for :class:`Rows`'s forward."""
    return x.new_empty((x.shape[0], 3))
