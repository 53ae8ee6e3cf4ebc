"""What runs on the owner: creating the module, and the requests a RemoteModule sends besides
its generated methods (parameters, state dicts, training mode, its class name)."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed.rpc as rpc
from torch import nn
from torch.nn.parameter import Parameter

from remote_module.runtime import registry
from remote_module.runtime.torchscript import script

__all__ = [
    "create_interface_module",
    "create_module",
    "ensure_generated_module",
    "load_state_dict",
    "local_module",
    "parameter_rrefs",
    "state_dict",
    "train",
    "type_name",
]


def create_module(
    module_cls: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], device: str
) -> nn.Module:
    """``module_cls(*args, **kwargs)`` on ``device``; the value of the RemoteModule's RRef."""
    module = module_cls(*args, **kwargs)
    if not isinstance(module, nn.Module):
        raise ValueError(
            "Expect `module_cls(*args, **kwargs)` returns an instance of <class nn.Module>, "
            f"but it returns an instance of {type(module)}."
        )
    if device != "cpu" or not _plain_module_on_cpu(module):
        module = module.to(device)
    return module


def create_interface_module(
    module_cls: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    device: str,
    interface_cls: Any,
    move_tensors: bool,
    module_name: str,
) -> rpc.RRef:
    """Load the generated module and create the module; for a TorchScript interface, script
    it and return an interface-typed RRef to it, for a Protocol a plain RRef."""
    # Load the remote functions before the first call can reach this worker.
    registry.ensure_module(module_name, interface_cls, move_tensors)
    module = create_module(module_cls, args, kwargs, device)
    if not registry.is_script_interface(interface_cls):
        return rpc.RRef(module)
    if not isinstance(module, torch.jit.ScriptModule):
        module = script(module, f"scripting {type(module).__qualname__} on its owner")
    if not isinstance(module, torch.jit.ScriptModule):
        return rpc.RRef(module)  # TorchScript is disabled (PYTORCH_JIT=0): a plain module
    return rpc.RRef(module, interface_cls)


def ensure_generated_module(module_name: str, interface_cls: Any, move_tensors: bool) -> None:
    """Make sure the owner can run the remote functions of ``module_name``."""
    registry.ensure_module(module_name, interface_cls, move_tensors)


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


def _plain_module_on_cpu(module: nn.Module) -> bool:
    """Whether ``module.to("cpu")`` would change nothing: no ``to``/``_apply`` of its own and
    every parameter and buffer on the CPU. ``.to()`` walks every submodule and tensor even
    then, at a cost comparable to creating a small module; user methods such as
    ``parameters()`` are not called here."""
    pending = [module]
    while pending:
        current = pending.pop()
        cls = type(current)
        if cls.to is not nn.Module.to or cls._apply is not nn.Module._apply:
            return False
        for tensor in itertools.chain(current._parameters.values(), current._buffers.values()):
            if tensor is not None and tensor.device.type != "cpu":
                return False
        pending.extend(child for child in current._modules.values() if child is not None)
    return True
