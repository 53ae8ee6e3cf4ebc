"""Modules, interfaces and RPC functions the reliability tests send to workers (importable on
every worker, no side effects on import).

Blocking: each process has a gate. :func:`hold` waits on it (at most a bounded time), so a
module whose methods call :func:`hold` blocks its owner's handler until the test calls
:func:`open_gate` on the owner. The gate starts closed.
"""

import gc
import os
import threading
import time
from typing import Any, Protocol

import torch
import torch.distributed.rpc as rpc
from torch import Tensor, nn

HOLD_LIMIT_S = 20.0

_gate = threading.Event()


@torch.jit.ignore
def hold(limit: float = HOLD_LIMIT_S) -> float:
    """Block until this process's gate opens (at most ``limit`` seconds); returns the wait."""
    start = time.monotonic()
    _gate.wait(limit)
    return time.monotonic() - start


def close_gate() -> None:
    _gate.clear()


def open_gate() -> None:
    _gate.set()


# --- Modules ------------------------------------------------------------------------------


@torch.jit.interface
class HoldInterface:
    def forward(self, x: Tensor) -> Tensor:
        pass

    def nap(self) -> float:
        pass


class HoldProtocol(Protocol):
    """``HoldInterface`` as a ``typing.Protocol``: the eager family."""

    def forward(self, x: Tensor) -> Tensor: ...

    def nap(self) -> float: ...


class Blocking(nn.Module):
    """Non-scriptable: every method the runtime reaches on the owner blocks on the gate
    (construction too, when ``block_init``)."""

    def __init__(self, block_init: bool = False) -> None:
        if block_init:
            hold()
        super().__init__()
        self.linear = nn.Linear(2, 2)

    def forward(self, x: Tensor) -> Tensor:
        hold()
        return x + 1

    def parameters(self, recurse: bool = True) -> Any:
        hold()
        return super().parameters(recurse)

    def train(self, mode: bool = True) -> nn.Module:
        hold()
        return super().train(mode)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        hold()
        return super().state_dict(*args, **kwargs)

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        hold()
        return super().load_state_dict(*args, **kwargs)


class BlockingScripted(nn.Module):
    """Matches ``HoldInterface``: ``forward`` and ``nap`` block on the gate."""

    def __init__(self, block_init: bool = False) -> None:
        if block_init:
            hold()
        super().__init__()

    def forward(self, x: Tensor) -> Tensor:
        hold(20.0)
        return x + 1

    @torch.jit.export
    def nap(self) -> float:
        return hold(20.0)


@torch.jit.interface
class AddInterface:
    def forward(self, x: Tensor) -> Tensor:
        pass

    def constant(self) -> float:
        pass


class AddConstant(nn.Module):
    """``forward(x) = x + constant``; the constant is a buffer, so it lives in the state."""

    def __init__(self, constant: float = 0.0) -> None:
        super().__init__()
        self.register_buffer("offset", torch.tensor(float(constant)))

    def forward(self, x: Tensor) -> Tensor:
        return x + self.offset

    @torch.jit.export
    def constant(self) -> float:
        return float(self.offset.item())


# --- RPC functions ------------------------------------------------------------------------


# The owner's RRef counters, which return to their baseline once every RemoteModule (and every
# future of its calls) is gone.
OWNER_KEYS = ("num_owner_rrefs", "num_forks", "num_pending_users", "num_pending_futures")


def forward_there(rm: Any, x: Tensor) -> Tensor:
    """``rm.forward(x)`` on the worker ``rm`` was sent to."""
    return rm.forward(x)


def debug_counts() -> dict[str, int]:
    """This worker's RRef-context and agent counters, after a ``gc.collect()``."""
    gc.collect()
    info = rpc._get_debug_info()
    return {key: int(value) for key, value in info.items() if str(value).lstrip("-").isdigit()}


def rss_kib(pid: int | None = None) -> int:
    """VmRSS of ``pid`` (this process when ``None``), in KiB."""
    path = f"/proc/{pid if pid is not None else os.getpid()}/status"
    with open(path) as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS in {path}")


# What this worker's fault-injecting agent was started with (set by tests.support.faulty_worker).
FAULTS: dict[str, Any] = {}


def agent_description() -> dict[str, Any]:
    """Which RPC agent this worker runs, and the faults it was started with."""
    return {"agent": type(rpc.api._get_current_rpc_agent()).__name__, "faults": dict(FAULTS)}


def wait_bounded(future: Any, limit_s: float) -> Any:
    """``future.wait()``, but a future still pending after ``limit_s`` seconds raises
    ``TimeoutError`` (not a ``RuntimeError``: a hang is never mistaken for an RPC error)."""
    deadline = time.monotonic() + limit_s
    while not future.done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"a future was still pending after {limit_s} s")
        time.sleep(0.002)
    return future.wait()


def attempt(
    remote_device: str,
    module_cls: Any,
    args: tuple[Any, ...],
    interface_cls: Any,
    timeout: float,
    xs: list[Tensor],
    method: str = "forward",
    settle_s: float = 0.0,
) -> dict[str, Any]:
    """On a worker: build a RemoteModule (``settle_s`` seconds before its first call), then
    call ``method`` (``forward`` on each of ``xs``, or ``remote_state_dict``). What happened,
    as plain values: the results, or the error's type and text, and the time each step took."""
    from remote_module import RemoteModule

    outcome: dict[str, Any] = {"step": "construct"}
    start = time.monotonic()
    try:
        rm = RemoteModule(
            remote_device,
            module_cls,
            args=args,
            module_interface_cls=interface_cls,
            timeout=timeout,
        )
        outcome["construct_s"] = time.monotonic() - start
        time.sleep(settle_s)
        outcome["step"] = method
        start = time.monotonic()
        if method == "forward":
            outcome["results"] = [rm.forward(x) for x in xs]
        else:
            outcome["results"] = [getattr(rm, method)()]
        outcome["call_s"] = time.monotonic() - start
    except Exception as error:  # reported to the test, which asserts on it
        outcome["error_type"] = type(error).__name__
        outcome["error"] = str(error)
        outcome["elapsed_s"] = time.monotonic() - start
    return outcome


def attempt_from_rref(
    remote_device: str, module_rref: Any, interface_cls: Any, timeout: float, x: Tensor
) -> dict[str, Any]:
    """On a worker: ``init_from_module_rref(..., timeout=timeout)`` then ``forward(x)``."""
    from remote_module import RemoteModule

    outcome: dict[str, Any] = {"step": "init_from_module_rref"}
    start = time.monotonic()
    try:
        rm = RemoteModule.init_from_module_rref(
            remote_device, module_rref, module_interface_cls=interface_cls, timeout=timeout
        )
        outcome["step"] = "forward"
        outcome["results"] = [rm.forward(x)]
    except Exception as error:
        outcome["error_type"] = type(error).__name__
        outcome["error"] = str(error)
    outcome["elapsed_s"] = time.monotonic() - start
    return outcome


def load_inputs(count: int, base: int = 0) -> list[Tensor]:
    """Distinct inputs: ``torch.full((1, 4), base + i)``."""
    return [torch.full((1, 4), float(base + i)) for i in range(count)]


def hammer(caller: int, owners: list[str], count: int, timeout: float) -> dict[str, Any]:
    """One load caller: builds its own RemoteModules (one per owner, each with its own
    constant), keeps ``count`` ``forward_async`` calls in flight across them, and checks every
    result against its own input. Returns what it saw, as plain values."""
    from remote_module import RemoteModule

    modules = [
        (
            RemoteModule(
                f"{owner}/cpu", AddConstant, args=(_constant(caller, index),), timeout=timeout
            ),
            _constant(caller, index),
        )
        for index, owner in enumerate(owners)
    ]
    inputs = load_inputs(count)
    start = time.monotonic()
    futures = [modules[i % len(modules)][0].forward_async(x) for i, x in enumerate(inputs)]
    sent_s = time.monotonic() - start
    wrong: list[int] = []
    errors: list[str] = []
    for i, (future, x) in enumerate(zip(futures, inputs, strict=True)):
        try:
            result = wait_bounded(future, timeout + 30.0)
        except RuntimeError as error:
            errors.append(f"{i}: {error}")
            continue
        if not torch.equal(result, x + modules[i % len(modules)][1]):
            wrong.append(i)
    elapsed_s = time.monotonic() - start
    del futures, modules
    gc.collect()
    return {
        "caller": caller,
        "checked": count - len(errors),
        "wrong": wrong[:20],
        "num_wrong": len(wrong),
        "errors": errors[:5],
        "num_errors": len(errors),
        "sent_s": sent_s,
        "elapsed_s": elapsed_s,
    }


def _constant(caller: int, owner_index: int) -> float:
    """Distinct per (caller, owner), exact in float32 for inputs below 100,000."""
    return float(1_000_000 * (caller + 1) + 100_000 * (owner_index + 1))
