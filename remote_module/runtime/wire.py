"""What crosses the wire when a RemoteModule is sent over RPC, and what may not.

Exactly the six attributes of :data:`PICKLED_ATTRIBUTES` travel, in that order; the generated
methods travel as the name of their generated module (plus the interface and the
device-movement flag), which the receiver loads and installs. A scripted RemoteModule may not
travel (upstream's rule and text); Python pickling of a RemoteModule is refused by the class.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
import torch.distributed.rpc as rpc
from torch import nn
from torch.distributed.rpc.internal import _internal_rpc_pickler

from remote_module.runtime import calls, registry

if TYPE_CHECKING:
    from remote_module.runtime.module import RemoteModule

__all__ = ["LOCAL_ATTRIBUTES", "PICKLED_ATTRIBUTES", "check_attributes", "register_reducer"]

# What crosses the wire when a RemoteModule is sent over RPC, in this order.
PICKLED_ATTRIBUTES = (
    "on",
    "device",
    "is_device_map_set",
    "is_scriptable",
    "generated_methods",
    "module_rref",
)
# Local state that stays behind: nn.Module's own bookkeeping, the call timeout and wire dtype
# (a receiver has neither), the remote class's name (cached for repr), the creator's name (for
# errors), the module's key in the owner's table (a receiver gets a key of its own on its
# first call) with a scripted module's keeper and pending filing (see runtime.owner), and the
# owner's pending load of the generated module (waited for before sending).
MODULE_BOOKKEEPING = frozenset(nn.Module().__dict__) - {"training"}
LOCAL_ATTRIBUTES = MODULE_BOOKKEEPING | {
    "training",
    "timeout",
    "wire_dtype",
    "_remote_type_name",
    "_rm_creator",
    "_rm_reference",
    "_rm_keeper",
    "_rm_filing",
    "_rm_pending",
}

_SCRIPTED_OVER_RPC_ERROR = (
    "Passing a script RemoteModule over RPC is not supported. Please create a RemoteModule in "
    "the sender, send the `module_rref` to the receiver, and create a new instance on the "
    "receiver end by passing this `module_rref`."
)


def register_reducer(cls: type[RemoteModule]) -> None:
    """Send instances of ``cls`` (RemoteModule or a subclass) over RPC as described above."""
    _internal_rpc_pickler._register_reducer(cls, _reduce_remote_module)


def check_attributes(remote_module: RemoteModule) -> None:
    """Every attribute either crosses the wire or is known to stay local."""
    methods = {method.__name__ for method in remote_module.generated_methods}
    for name in remote_module.__dict__:
        if name not in PICKLED_ATTRIBUTES and name not in LOCAL_ATTRIBUTES and name not in methods:
            raise AttributeError(
                f"RemoteModule attribute {name!r} is neither sent over RPC nor known to be local"
            )


class _GeneratedMethods(NamedTuple):
    """How ``generated_methods`` travels: the module to load, not pickled function objects."""

    module_name: str
    interface_cls: Any
    move_tensors: bool


def _reduce_remote_module(remote_module: RemoteModule) -> tuple[Any, tuple[Any, ...]]:
    # The receiver calls the owner's remote functions at once: they must be there.
    calls.wait_for_owner(remote_module, "sending over RPC")
    generated = remote_module.generated_methods[0].__globals__
    spec = _GeneratedMethods(
        generated["__name__"],
        generated.get("_rm_module_interface_cls"),
        bool(generated.get("MOVES_CPU_TENSORS_TO_DEVICE", False)),
    )
    values = {name: getattr(remote_module, name) for name in PICKLED_ATTRIBUTES}
    values["generated_methods"] = spec
    values["module_rref"] = remote_module.module_rref._serialize()
    return _receive_remote_module, (type(remote_module), *values.values())


def _receive_remote_module(cls: type[RemoteModule], *values: Any) -> RemoteModule:
    attributes = dict(zip(PICKLED_ATTRIBUTES, values, strict=True))
    spec = attributes["generated_methods"]  # replaced by the loaded methods, in its place
    attributes["module_rref"] = rpc.PyRRef._deserialize(attributes["module_rref"])
    remote_module = cls.__new__(cls)
    # The six first in __dict__, in their order (upstream's test compares the keys), then
    # nn.Module's bookkeeping and the local attributes.
    remote_module.__dict__.update(attributes)
    nn.Module.__init__(remote_module)
    remote_module.__dict__["timeout"] = float(rpc.constants.UNSET_RPC_TIMEOUT)
    remote_module.__dict__["wire_dtype"] = None
    remote_module._install(registry.ensure_module(*spec))
    return remote_module


def _reduce_script_module(module: torch.jit.RecursiveScriptModule) -> tuple[Any, tuple[Any, ...]]:
    if hasattr(module._c, "module_rref"):
        raise RuntimeError(_SCRIPTED_OVER_RPC_ERROR)
    buffer = io.BytesIO()
    torch.jit.save(module, buffer)
    return _load_script_module, (buffer.getvalue(),)


def _load_script_module(data: bytes) -> torch.jit.ScriptModule:
    return torch.jit.load(io.BytesIO(data))


_internal_rpc_pickler._register_reducer(torch.jit.RecursiveScriptModule, _reduce_script_module)
