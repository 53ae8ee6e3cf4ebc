"""Functions the key-table tests run on the owner (importable on every worker)."""

import time
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
from torch import Tensor, nn

from remote_module.runtime import owner
from remote_module.runtime.owner.creation import local_module
from remote_module.runtime.owner.state import STATE


def filed(key: int) -> bool:
    """Whether the owner's table still holds a module under ``key``."""
    return STATE.modules.get(key) is not None


def filed_keys() -> list[int]:
    return sorted(STATE.modules.keys())


class Failing(nn.Module):
    """``forward`` raises a ValueError, for error-text tests."""

    def forward(self, x: Tensor) -> Tensor:
        raise ValueError("forward refuses")


def make_scripted_linear() -> Any:
    return torch.jit.script(nn.Linear(4, 2))


def owner_grads(module_rref: Any, context_id: int) -> dict[str, Tensor]:
    """The gradients distributed autograd gave the module's parameters in ``context_id``."""
    gradients = dist_autograd.get_gradients(context_id)
    module = module_rref.local_value()
    return {name: gradients[param] for name, param in module.named_parameters()}


# key -> a weak reference to a parameter of the scripted module filed under it (the C++
# module has no weak reference of its own; its parameters die with it)
_watched: dict[int, Any] = {}


def held(key: int) -> bool:
    """Whether the owner's table of scripted modules still holds ``key``."""
    return key in STATE.held


def watch_held(key: int) -> None:
    """Watch the scripted module filed under ``key``, to tell later whether it was freed."""
    module = torch.jit._recursive.wrap_cpp_module(STATE.held[key])
    _watched[key] = torch._C._WeakTensorRef(next(module.parameters()))


def freed(key: int) -> bool:
    """Whether the scripted module watched under ``key`` is gone from this process."""
    return bool(_watched[key].expired())


def owner_script_grads(module_rref: Any, context_id: int) -> dict[str, Tensor]:
    """:func:`owner_grads` for a scripted module (an interface-typed RRef)."""
    gradients = dist_autograd.get_gradients(context_id)
    module = local_module(module_rref)
    return {name: gradients[param] for name, param in module.named_parameters()}


def call_until_keyed(remote_module: Any, x: Tensor, within_s: float = 20.0) -> list[Tensor]:
    """On a receiver: call ``remote_module`` until its calls go keyed; every result."""
    results = [remote_module(x)]
    deadline = time.monotonic() + within_s
    while type(remote_module._rm_record.reference) is not int:
        assert time.monotonic() < deadline, "the owner never filed the module"
        time.sleep(0.01)
        results.append(remote_module(x))
    results.append(remote_module(x))
    return results


_file_keyed = owner.file_keyed


def slow_filings(delay_s: float) -> None:
    """Make the owner's ``file_keyed`` take ``delay_s`` longer (0: as it is)."""

    def slow(*args: Any) -> Any:
        time.sleep(delay_s)
        return _file_keyed(*args)

    owner.file_keyed = slow if delay_s else _file_keyed  # type: ignore[assignment]
