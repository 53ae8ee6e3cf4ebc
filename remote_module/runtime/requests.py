"""The requests a RemoteModule sends its owner besides its generated methods: its
parameters' RRefs (``remote_parameters``), its state dict both ways, its training mode and
its class name (for ``repr``), each run on the owner (``RemoteModule._on_owner``). This module
loads with the first such request on either side, not with the package."""

from __future__ import annotations

import collections
from typing import Any

import torch
import torch.distributed.rpc as rpc
from torch import nn
from torch.nn.parameter import Parameter

__all__ = [
    "load_state_dict",
    "local_module",
    "parameter_rrefs",
    "state_dict",
    "train",
    "type_name",
]


def local_module(module_rref: rpc.RRef) -> nn.Module:
    """The module an RRef owns here; an interface-typed RRef yields the bare C++ script module,
    which gets its Python wrapper back (``train``, ``state_dict``, ``parameters``)."""
    module = module_rref.local_value()
    if isinstance(module, torch._C.ScriptModule):
        return torch.jit._recursive.wrap_cpp_module(module)
    return module


def parameter_rrefs(module_rref: rpc.RRef, recurse: bool) -> list[rpc.RRef[Parameter]]:
    return [rpc.RRef(param) for param in local_module(module_rref).parameters(recurse)]


def state_dict(module_rref: rpc.RRef) -> dict[str, torch.Tensor]:
    state = local_module(module_rref).state_dict()
    return collections.OrderedDict((key, value.detach().cpu()) for key, value in state.items())


def load_state_dict(module_rref: rpc.RRef, state: dict[str, Any], strict: bool) -> Any:
    result = local_module(module_rref).load_state_dict(state, strict=strict)
    return (list(result.missing_keys), list(result.unexpected_keys))


def train(module_rref: rpc.RRef, mode: bool) -> None:
    local_module(module_rref).train(mode)


def type_name(module_rref: rpc.RRef) -> str:
    module = local_module(module_rref)
    return getattr(module, "original_name", None) or type(module).__qualname__
