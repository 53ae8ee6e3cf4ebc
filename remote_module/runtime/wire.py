"""What crosses the wire when a RemoteModule is sent over RPC, and what may not.

Exactly the six attributes of :data:`PICKLED_ATTRIBUTES` travel, in that order, then the
options the RemoteModule was built with, where set (``timeout``, ``wire_dtype``, ``standby``),
and with standbys its failover plan (``remote_module.runtime.failover``); the generated
methods travel as the name of their generated module (plus the interface and the
device-movement flag), which the receiver loads and installs. A scripted RemoteModule may not
travel (upstream's rule and text); Python pickling of a RemoteModule is refused by the class.

This module loads with the first RemoteModule (or scripted module) sent: the class registers
the reducers with torch's RPC pickler and imports this module from them (``runtime.module``).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
import torch.distributed.rpc as rpc

from remote_module import _contract
from remote_module.runtime import pending, registry
from remote_module.runtime.construction import (
    PICKLED_ATTRIBUTES,
    Placement,
    options_set,
    received,
)

if TYPE_CHECKING:
    from remote_module.runtime.module import RemoteModule

__all__ = ["PICKLED_ATTRIBUTES", "reduce_remote_module", "reduce_script_module"]

_SCRIPTED_OVER_RPC_ERROR = (
    "Passing a script RemoteModule over RPC is not supported. Please create a RemoteModule in "
    "the sender, send the `module_rref` to the receiver, and create a new instance on the "
    "receiver end by passing this `module_rref`."
)


class _GeneratedMethods(NamedTuple):
    """How ``generated_methods`` travels: the module to load, not pickled function objects."""

    module_name: str
    interface_cls: Any
    move_tensors: bool


def reduce_remote_module(remote_module: RemoteModule) -> tuple[Any, tuple[Any, ...]]:
    """A RemoteModule (or subclass) as RPC sends it, as described above."""
    # The receiver calls the owner's remote functions at once: they must be there.
    pending.wait_for_owner(remote_module, "sending over RPC")
    generated = remote_module._rm_record.generated
    spec = _GeneratedMethods(
        generated.__name__,
        getattr(generated, _contract.INTERFACE_CLASS, None),
        bool(getattr(generated, _contract.MOVES_TENSORS, False)),
    )
    values = {name: getattr(remote_module, name) for name in PICKLED_ATTRIBUTES}
    values["generated_methods"] = spec
    values["module_rref"] = remote_module.module_rref._serialize()
    options = options_set(remote_module)  # only where set
    plan = remote_module._rm_record.failover  # with standbys: who can take over, and how
    sent_plan = None if plan is None else plan.sent()
    return _receive_remote_module, (type(remote_module), *values.values(), options, sent_plan)


def _receive_remote_module(cls: type[RemoteModule], *values: Any) -> RemoteModule:
    *sent, options, sent_plan = values
    attributes = dict(zip(PICKLED_ATTRIBUTES, sent, strict=True))
    spec = attributes.pop("generated_methods")
    module_rref = rpc.PyRRef._deserialize(attributes.pop("module_rref"))
    # A wire dtype that travelled needs the wire twins here too (their schema to send calls).
    module_name, interface_cls, move_tensors = spec
    wired = "wire_dtype" in options
    generated = registry.ensure_module(module_name, interface_cls, move_tensors, wire=wired)
    plan = None
    if sent_plan is not None:
        from remote_module.runtime import failover  # (its import: 2 ms, on first need)

        plan = failover.Plan.received(sent_plan)
    return received(cls, Placement(**attributes), generated, module_rref, options, plan)


def reduce_script_module(module: torch.jit.RecursiveScriptModule) -> tuple[Any, tuple[Any, ...]]:
    """A scripted module as RPC sends it (saved and loaded), unless it is a RemoteModule."""
    if hasattr(module._c, "module_rref"):
        raise RuntimeError(_SCRIPTED_OVER_RPC_ERROR)
    buffer = io.BytesIO()
    torch.jit.save(module, buffer)
    return _load_script_module, (buffer.getvalue(),)


def _load_script_module(data: bytes) -> torch.jit.ScriptModule:
    return torch.jit.load(io.BytesIO(data))
