"""What runs on the owner: creating the module, finding it for a call, the Python calls of a
RemoteModule with a ``wire_dtype`` (:func:`call_wired`), and the requests a RemoteModule sends
besides its generated methods (parameters, state dicts, training mode, its class name).

The key table by which calls find a module here is ``remote_module.runtime.keys``.
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed.rpc as rpc
from torch import nn
from torch.nn.parameter import Parameter

from remote_module import _contract

if TYPE_CHECKING:
    from remote_module.runtime.errors import CreationFailure

__all__ = [
    "Created",
    "call_wired",
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

    scripted = registry.is_script_interface(interface_cls)
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


def call_wired(
    reference: Any,
    device: str,
    is_device_map_set: bool,
    remote_fn: Callable[..., Any],
    wire_dtype: torch.dtype,
    carried: list[torch.Tensor],
    *args: Any,
    **kwargs: Any,
) -> tuple[Any, list[torch.Tensor]]:
    """A Python call of a RemoteModule with a ``wire_dtype``, sent (``calls``) in place of its
    remote function and with the same call prefix: the arguments' floating tensors back to
    the dtypes in ``carried``, ``remote_fn`` run as any call runs it, the result's floating
    tensors cast to ``wire_dtype`` for the way back; the reply is the result and the dtypes
    it carries. ``remote_fn`` arrives by name (a generated module's Python function; a
    scriptable family's runs its compiled module from Python). A scripted module returns
    NamedTuples in TorchScript's rendering, which cannot be pickled: they go back as plain
    tuples, which the generated method decodes as it does a TorchScript reply."""
    from remote_module.runtime import values  # with the first wire_dtype, not every program

    args = values.restore_from_wire(args, carried)
    if kwargs:
        kwargs = values.restore_from_wire(kwargs, carried)
    result = remote_fn(reference, device, is_device_map_set, *args, **kwargs)
    back: list[torch.Tensor] = []
    named = _keeps_named_tuples.get(remote_fn)
    if named is None:
        named = _keeps_named_tuples.setdefault(remote_fn, not _is_script_family(remote_fn))
    return values.cast_to_wire(result, wire_dtype, back, named), back


# remote function -> whether its results' NamedTuples can cross the wire as they are
_keeps_named_tuples: dict[Callable[..., Any], bool] = {}


def _is_script_family(remote_fn: Callable[..., Any]) -> bool:
    from remote_module.runtime import registry

    module = sys.modules.get(getattr(remote_fn, "__module__", ""))
    interface_cls = getattr(module, _contract.INTERFACE_CLASS, None)
    return interface_cls is not None and registry.is_script_interface(interface_cls)


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
        for tensors in (current._parameters, current._buffers):
            for tensor in tensors.values():
                if tensor is not None and not tensor.is_cpu:
                    return False
        pending.extend(child for child in current._modules.values() if child is not None)
    return True
