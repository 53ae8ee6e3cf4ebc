"""Functions the key-table tests run on the owner (importable on every worker)."""

from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
from torch import Tensor, nn

from remote_module.runtime import owner


def filed(key: int) -> bool:
    """Whether the owner's table still holds a module under ``key``."""
    return owner._modules.get(key) is not None


def filed_keys() -> list[int]:
    return sorted(owner._modules.keys())


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
