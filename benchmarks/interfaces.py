"""What both ranks of a benchmark pair import: the interfaces, the floor functions and the
module factories. Everything sent over RPC lives here, at module level, so the owner unpickles
it by name (never from a ``__main__``).

No ``from __future__ import annotations``: TorchScript reads these annotations.
"""

import torch
import torch.distributed.rpc as rpc
from torch import Tensor, nn
from torch.distributed.rpc import RRef

TINY_FEATURES = 16


@torch.jit.interface
class TinyInterface:
    """The remote module's interface: ``nn.Linear`` and ``nn.Identity`` both match it."""

    def forward(self, input: Tensor) -> Tensor:
        pass


@torch.jit.interface
class UngeneratedTinyInterface:
    """:class:`TinyInterface` again, with no stubs generated at build time: rendered in
    memory on first use, for the construction figure's no-codegen row."""

    def forward(self, input: Tensor) -> Tensor:
        pass


@torch.jit.interface
class RemoteTinyInterface:
    """How a script function sees a scripted RemoteModule built with :class:`TinyInterface`."""

    def forward(self, input: Tensor) -> Tensor:
        pass


def tiny_linear() -> nn.Module:
    """The tiny call's module, built on the owner."""
    return nn.Linear(TINY_FEATURES, TINY_FEATURES)


def run_python(rref: RRef, x: Tensor) -> Tensor:
    """The Python floor with the RRef in the arguments: run the module behind ``rref``."""
    return rref.local_value()(x)


# The no-RRef floor's table on the owner: key -> module (held for the benchmark's lifetime).
_TABLE: dict[int, nn.Module] = {}


def file_module(rref: RRef) -> int:
    """On the owner: file the module behind ``rref`` in the table; its key."""
    key = len(_TABLE) + 1
    _TABLE[key] = rref.local_value()
    return key


def run_keyed(key: int, x: Tensor) -> Tensor:
    """The engine's floor: a plain function that finds the module on its owner by a key, with
    no RRef in the arguments."""
    return _TABLE[key](x)


@torch.jit.script
def run_script(rref: RRef[TinyInterface], x: Tensor) -> Tensor:
    """The TorchScript floor: the same, compiled, through an interface-typed RRef."""
    return rref.local_value().forward(x)


def create_scripted(module_cls: type[nn.Module], args: tuple[int, ...]) -> RRef:
    """The construction floor, run on the owner: create, script, wrap in an interface RRef."""
    return rpc.RRef(torch.jit.script(module_cls(*args)), TinyInterface)


@torch.jit.script
def remote_loop(module: RemoteTinyInterface, x: Tensor, n: int) -> Tensor:
    """``n`` calls of a scripted RemoteModule's ``forward`` from TorchScript."""
    y = x
    for _ in range(n):
        y = module.forward(x)
    return y


@torch.jit.script
def floor_loop(owner: str, rref: RRef[TinyInterface], x: Tensor, n: int) -> Tensor:
    """The TorchScript floor of :func:`remote_loop`: ``n`` RPCs of :func:`run_script`."""
    y = x
    for _ in range(n):
        y = rpc.rpc_async(owner, run_script, (rref, x)).wait()
    return y


def built_table_seconds(rows: int, dim: int) -> float:
    """On the standby: how long building the demo's table takes there (create, script, load a
    state of its size), as a promotion builds it."""
    import time

    from remote_module.examples.embedding import RemoteEmbeddingBag

    start = time.perf_counter()
    module = torch.jit.script(RemoteEmbeddingBag(rows, dim, 0, sparse=True))
    module.load_state_dict({k: v.clone() for k, v in module.state_dict().items()})
    return time.perf_counter() - start


def pid() -> int:
    import os

    return os.getpid()
