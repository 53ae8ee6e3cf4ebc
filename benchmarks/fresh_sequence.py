"""The ``fresh_sequence`` figure, run on rank 0 of a new process pair per repeat, row and
implementation: a program's whole first sequence of RemoteModule work, timed as one.

Two constructions with two different TorchScript interfaces, ``torch.jit.script`` of each,
then a construction without interface and its first forward. Both ranks import this module
(and, through :func:`prepare`, what the row's program imports) and nothing of the suite's
others: ``benchmarks.figures`` loads the suite's build-time stubs and TorchScript functions,
which would compile before the sequence what it times compiling first.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn
from torch.distributed.nn import RemoteModule as UpstreamRemoteModule
from torch.distributed.nn.api.remote_module import _RemoteModule as UpstreamInterfaceRemoteModule

import remote_module
from benchmarks.fresh_interfaces import (
    PlainFirstInterface,
    PlainSecondInterface,
    StubbedFirstInterface,
    StubbedSecondInterface,
)
from benchmarks.spec import OURS, Figure, Sizes

OWNER = "worker1"
REMOTE_DEVICE = f"{OWNER}/cpu"
FEATURES = 16

# row -> its two interfaces, and whether ours' processes import their build-time stubs.
ROWS: dict[str, tuple[tuple[Any, Any], bool]] = {
    "stubs": ((StubbedFirstInterface, StubbedSecondInterface), True),
    "no_stubs": ((PlainFirstInterface, PlainSecondInterface), False),
}


def prepare(impl: str | None, row: str | None) -> None:
    """On both ranks, before RPC starts: what the sample's program imports besides this
    module. Ours with the ``stubs`` row imports the build-time stubs (they compile their
    remote functions as they load, as in a user's program); upstream has none to import."""
    if impl == OURS and row is not None and ROWS[row][1]:
        import benchmarks.fresh_generated  # noqa: F401


def build(impl: str, interface: Any) -> Any:
    """A RemoteModule of ``impl`` over ``nn.Linear`` on the owner, with ``interface`` (None:
    without); upstream's through the class that takes one (its public class does not)."""
    args = (FEATURES, FEATURES)
    if impl == OURS:
        if interface is None:
            return remote_module.RemoteModule(REMOTE_DEVICE, nn.Linear, args)
        return remote_module.RemoteModule(
            REMOTE_DEVICE, nn.Linear, args, module_interface_cls=interface
        )
    if interface is None:
        return UpstreamRemoteModule(REMOTE_DEVICE, nn.Linear, args)
    return UpstreamInterfaceRemoteModule(
        REMOTE_DEVICE, nn.Linear, args, _module_interface_cls=interface
    )


def measure(
    figure: Figure, sizes: Sizes, repeats: int, impl: str | None, row: str | None
) -> dict[str, float]:
    """One sample of ``row``: its sequence, the first RemoteModule work of this process pair.
    Everything made is kept until the clock stops (no deletion inside the timing)."""
    if impl is None or row is None:
        raise ValueError(f"{figure.name} needs an implementation and a row")
    interfaces, _ = ROWS[row]
    x = torch.randn(1, FEATURES)
    start = time.perf_counter()
    made = [build(impl, interface) for interface in interfaces]
    scripted = [torch.jit.script(module) for module in made]
    plain = build(impl, None)
    plain.forward(x)
    elapsed = time.perf_counter() - start
    del made, scripted, plain
    return {row: elapsed * 1e3}
