"""The ``compiled`` figure (issue 45): the compile route against eager, TorchScript and the floor.

- ``train_step``: one training step of a hybrid (a local ``Linear``, a RemoteModule over an
  ``nn.Linear`` built with a ``@torch.jit.interface``, a local ``Linear``) under
  ``dist_autograd.context()``: forward, ``dist_autograd.backward``, ``DistributedOptimizer``'s
  step over the remote and the local parameters. ``eager``: the hybrid itself; ``compiled``:
  ``torch.compile(hybrid, fullgraph=True)`` (inductor); ``scripted``: ``torch.jit.script``
  of it. Each implementation has its own hybrid, RemoteModule and optimizer.
- ``steady_call``: one call of a RemoteModule without interface (the tiny call's
  ``nn.Linear(16, 16)``, a 1 x 16 input) compiled, ``torch.compile(lambda x: rm(x),
  fullgraph=True)``, against the same call eager and the engine's floor (``rpc_sync`` of a
  plain function that finds the module in a table on the owner, as ``tiny_call``'s).

Compilation happens before anything is timed (the first call of each compiled function).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import Tensor, nn
from torch.distributed.optim import DistributedOptimizer

from benchmarks import figures, interfaces
from benchmarks.figures import OWNER, Loop, build, calibrate, interleave, per_call_us, sync_loop
from benchmarks.interfaces import TINY_FEATURES
from benchmarks.spec import FLOOR, OURS, Figure, Sizes

ROWS_PER_STEP = 8


class Hybrid(nn.Module):
    """A local layer, the remote one, a local layer."""

    def __init__(self, remote: nn.Module) -> None:
        super().__init__()
        self.first = nn.Linear(TINY_FEATURES, TINY_FEATURES)
        self.remote = remote
        self.last = nn.Linear(TINY_FEATURES, TINY_FEATURES)

    def forward(self, x: Tensor) -> Tensor:
        return self.last(self.remote(self.first(x).relu()).relu())


def _stepper(hybrid: Hybrid, remote: Any, run: Any, x: Tensor) -> Loop:
    """``n`` training steps of ``run`` (``hybrid`` eager, compiled or scripted; ``remote`` its
    RemoteModule)."""
    local = [rpc.RRef(param) for param in (*hybrid.first.parameters(), *hybrid.last.parameters())]
    optimizer = DistributedOptimizer(
        torch.optim.SGD, [*remote.remote_parameters(), *local], lr=1e-3
    )

    def loop(n: int) -> None:
        for _ in range(n):
            with dist_autograd.context() as context_id:
                loss = run(x).pow(2).sum()
                dist_autograd.backward(context_id, [loss])
                optimizer.step(context_id)

    return loop


def _train_steps(x: Tensor) -> dict[str, Loop]:
    loops: dict[str, Loop] = {}
    for impl in ("eager", "compiled", "scripted"):
        remote = build(OURS, nn.Linear, (TINY_FEATURES, TINY_FEATURES), True)
        hybrid = Hybrid(remote)
        run: Any = hybrid
        if impl == "compiled":
            run = torch.compile(hybrid, fullgraph=True)
        elif impl == "scripted":
            run = torch.jit.script(hybrid)
        loops[impl] = _stepper(hybrid, remote, run, x)
        loops[impl](1)  # compiled (forward and backward), scripted, the optimizer built
    return loops


def _steady_calls(x: Tensor) -> dict[str, Loop]:
    rm = build(OURS, nn.Linear, (TINY_FEATURES, TINY_FEATURES), False)
    compiled = torch.compile(lambda value: rm(value), fullgraph=True)
    compiled(x)  # compiled
    rref = figures.floor_rref(nn.Linear, (TINY_FEATURES, TINY_FEATURES), False)
    key = rpc.rpc_sync(OWNER, interfaces.file_module, (rref,))
    return {
        "compiled": sync_loop(compiled, x),
        "eager": sync_loop(rm.forward, x),
        FLOOR: sync_loop(figures.floor_sync(interfaces.run_keyed, key), x),
    }


def measure(figure: Figure, sizes: Sizes, repeats: int, impl: str | None, row: str | None) -> Any:
    rows = {
        "train_step": _train_steps(torch.randn(ROWS_PER_STEP, TINY_FEATURES)),
        "steady_call": _steady_calls(torch.randn(1, TINY_FEATURES)),
    }
    iters = {
        "train_step": calibrate(rows["train_step"]["eager"], sizes, min_iters=4),
        "steady_call": calibrate(rows["steady_call"][FLOOR], sizes),
    }
    convert = {
        "train_step": lambda elapsed, n: elapsed / n * 1e3,
        "steady_call": per_call_us,
    }
    return interleave(rows, iters, repeats, convert, sizes.blocks)
