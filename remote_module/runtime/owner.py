"""What runs on the owner to create a RemoteModule's module: without an interface, and with
one (scripted for a TorchScript interface), and the owner's load of its generated module.

The key table by which calls find a module here is ``remote_module.runtime.keys``; the requests
a RemoteModule sends besides its generated methods run ``remote_module.runtime.requests``, and
its calls with a ``wire_dtype`` ``values.call_wired``: each loads with its first use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed.rpc as rpc
from torch import nn

from remote_module import _contract

if TYPE_CHECKING:
    from remote_module.runtime.errors import CreationFailure

__all__ = ["Created", "create_interface_module", "create_module", "ensure_generated_module"]


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


# The reply to a construction with an interface: the module's RRef, and whether this owner
# already has the generated module loaded and compiled (else the caller asks for it with
# :func:`ensure_generated_module` before its first call). A plain tuple, as FirstReply.
Created = tuple[rpc.RRef[Any], bool]


def create_interface_module(
    module_cls: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    device: str,
    interface_cls: Any,
    module_name: str,
    wire: bool = False,
) -> Created | CreationFailure:
    """Create the module; for a TorchScript interface, script it and reply with an
    interface-typed RRef to it, for a Protocol a plain RRef. When ``module_cls`` fails, why
    (as data).

    The generated module is not loaded here: its load and compile would delay the reply by
    as long again as creating a small module. The reply says whether it is ready; where it is
    not, the caller has it loaded by a second request while it goes on, and holds its first
    call until that is done (``pending.wait_for_owner``)."""
    from remote_module.runtime import registry  # with the first interface, not the package

    scripted = _contract.is_script_interface(interface_cls)
    if scripted:  # the first scripting loads it
        from remote_module import _torchscript

        _torchscript.warm_executor()  # its calls will run TorchScript here: begin its set-up
    try:
        module = create_module(module_cls, args, kwargs, device)
        if scripted and not isinstance(module, torch.jit.ScriptModule):
            what = f"scripting {type(module).__qualname__} on its owner"
            module = _torchscript.script_module(module, what)
        module_rref: rpc.RRef[Any]
        if scripted and isinstance(module, torch.jit.ScriptModule):
            # Typed as the interface: TorchScript checks the module matches it here.
            module_rref = rpc.RRef(module, interface_cls)
        else:  # a Protocol interface, or TorchScript disabled (PYTORCH_JIT=0): a plain module
            module_rref = rpc.RRef(module)
    except Exception as error:
        from remote_module.runtime.errors import CreationFailure  # once something failed

        return CreationFailure(type(error).__name__, str(error))
    return module_rref, registry.is_ready(module_name, wire)


def ensure_generated_module(
    module_name: str, interface_cls: Any, move_tensors: bool, wire: bool = False
) -> None:
    """Make sure the owner can run the remote functions of ``module_name``."""
    from remote_module.runtime import registry

    registry.ensure_module(module_name, interface_cls, move_tensors, wire)


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
        for tensors in (current._parameters, current._buffers):
            for tensor in tensors.values():
                if tensor is not None and not tensor.is_cpu:
                    return False
        pending.extend(child for child in current._modules.values() if child is not None)
    return True
