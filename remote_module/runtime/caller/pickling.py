"""What crosses the wire when a RemoteModule is sent over RPC, and what may not.

Exactly the six attributes of :data:`PICKLED_ATTRIBUTES` travel, in that order, then the
options the RemoteModule was built with, where set (``timeout``, ``wire_dtype``, ``standby``),
and with standbys its failover plan (``remote_module.runtime.caller.failover``); the generated
methods travel as the name of their generated module (plus the interface and the
device-movement flag), which the receiver loads and installs. A scripted RemoteModule may not
travel (upstream's rule and text); Python pickling of a RemoteModule is refused by the class.

A RemoteModule travels as ``owner.receive`` and then this module's :func:`_rebuild`: the
receiving process meets the owner side first, which loads the whole of remote_module before
anything else in the message is unpickled (see ``remote_module.runtime.owner``). A scripted
module travels as ``owner.load_script_module`` and its saved bytes.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.distributed.rpc as rpc

from remote_module import _compat, _shared
from remote_module.runtime import owner, registry
from remote_module.runtime.caller import pending
from remote_module.runtime.caller.construction import (
    OPTION_DEFAULTS,
    OPTIONS,
    PICKLED_ATTRIBUTES,
    Placement,
    received,
)
from remote_module.runtime.caller.failover import Plan
from remote_module.runtime.errors import creation_error, failure

__all__ = [
    "PICKLED_ATTRIBUTES",
    "describe",
    "load_described",
    "rebuild_described",
    "reduce_remote_module",
    "reduce_script_module",
    "register",
]

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


def reduce_remote_module(remote_module: Any) -> tuple[Any, tuple[Any, ...]]:
    """A RemoteModule (or subclass) as RPC sends it, as described above."""
    # The receiver calls the owner's remote functions at once: they must be there.
    pending.wait_for_owner(remote_module, "sending over RPC")
    record = remote_module._rm_record
    plain = getattr(record.generated, _shared.INTERFACE_CLASS, None) is None
    if plain and record.reference is None:  # no call has shown that its module exists
        _check_created(remote_module)
    cls, values, options, sent_plan = _state(remote_module)
    values["module_rref"] = _compat.serialize_rref(remote_module.module_rref)
    return owner.receive, (_rebuild, cls, *values.values(), options, sent_plan)


def _check_created(remote_module: Any) -> None:
    """Raise why the module of a RemoteModule without an interface could not be created, as
    its first call would (its construction did not wait for the owner)."""
    module_rref = remote_module.module_rref
    try:
        failed = rpc.rpc_sync(
            module_rref.owner(), owner.check_created, (module_rref,), timeout=remote_module.timeout
        )
    except RuntimeError as error:
        raise failure(error, "RemoteModule: sending over RPC", remote_module.on) from error
    if failed is not None:
        raise creation_error(failed, remote_module._rm_record.creator, remote_module.on)


def describe(remote_module: Any) -> tuple[Any, ...]:
    """What rebuilds ``remote_module`` in another process, given an RRef to its module
    (:func:`rebuild_described`): what RPC sends of it, less the RRef. Its owner keeps it for
    compiled graphs and exported programs that name the module (``owner.name_for_graphs``)."""
    pending.wait_for_owner(remote_module, "torch.compile")
    cls, values, options, sent_plan = _state(remote_module)
    del values["module_rref"]
    return (cls, tuple(values.values()), options, sent_plan)


def load_described(description: tuple[Any, ...]) -> Any:
    """The generated module of the RemoteModule :func:`describe` described, loaded here (its
    interface compiled: an RRef typed as it can then be received)."""
    _, values, options, _ = description
    module_name, interface_cls, move_tensors = values[PICKLED_ATTRIBUTES.index("generated_methods")]
    wired = "wire_dtype" in options
    return registry.ensure_module(module_name, interface_cls, move_tensors, wire=wired)


def rebuild_described(description: tuple[Any, ...], module_rref: Any) -> Any:
    """The RemoteModule :func:`describe` described, over ``module_rref``."""
    cls, values, options, sent_plan = description
    sent = (*values, module_rref)  # module_rref is the last of the six attributes
    return _rebuild(cls, *sent, options, sent_plan, rref_sent=False)


def _state(remote_module: Any) -> tuple[Any, dict[str, Any], dict[str, Any], Any]:
    """Its class's name, its six attributes, the options set and its sent failover plan."""
    generated = remote_module._rm_record.generated
    spec = _GeneratedMethods(
        generated.__name__,
        getattr(generated, _shared.INTERFACE_CLASS, None),
        bool(getattr(generated, _shared.MOVES_TENSORS, False)),
    )
    values = {name: getattr(remote_module, name) for name in PICKLED_ATTRIBUTES}
    values["generated_methods"] = spec
    options = options_set(remote_module)  # only where set
    plan = remote_module._rm_record.failover  # with standbys: who can take over, and how
    sent_plan = None if plan is None else plan.sent()
    # Its class by name: a typed class lives in a generated package, imported top-down.
    cls = (type(remote_module).__module__, type(remote_module).__qualname__)
    return cls, values, options, sent_plan


def options_set(remote_module: Any) -> dict[str, Any]:
    """The options ``remote_module`` was built with that are not their defaults (they
    travel with it)."""
    state = remote_module.__dict__
    return {
        name: state[name]
        for name in OPTIONS
        if name in state and state[name] != OPTION_DEFAULTS[name]
    }


def _rebuild(cls_name: tuple[str, str], *values: Any, rref_sent: bool = True) -> Any:
    """The RemoteModule a message carried, on its receiver (through ``owner.receive``)."""
    *sent, options, sent_plan = values
    cls = getattr(registry.import_generated(cls_name[0]), cls_name[1])
    attributes = dict(zip(PICKLED_ATTRIBUTES, sent, strict=True))
    spec = attributes.pop("generated_methods")
    module_rref = attributes.pop("module_rref")
    if rref_sent:
        module_rref = _compat.deserialize_rref(module_rref)
    # A wire dtype that travelled needs the wire twins here too (their schema to send calls).
    module_name, interface_cls, move_tensors = spec
    wired = "wire_dtype" in options
    generated = registry.ensure_module(module_name, interface_cls, move_tensors, wire=wired)
    plan = None if sent_plan is None else Plan.received(sent_plan)
    return received(cls, Placement(**attributes), generated, module_rref, options, plan)


def reduce_script_module(module: torch.jit.RecursiveScriptModule) -> tuple[Any, tuple[Any, ...]]:
    """A scripted module as RPC sends it (saved and loaded), unless it is a RemoteModule."""
    if hasattr(module._c, "module_rref"):
        raise RuntimeError(_SCRIPTED_OVER_RPC_ERROR)
    buffer = io.BytesIO()
    torch.jit.save(module, buffer)
    return owner.load_script_module, (buffer.getvalue(),)


_registering = threading.Lock()


def register(cls: type, reducer: Callable[[Any], tuple[Any, tuple[Any, ...]]]) -> None:
    """Have torch's RPC pickler send ``cls`` through ``reducer`` (RemoteModule, each subclass
    as it is defined, scripted modules). Copy on write: torch's pickler iterates this table
    on every message, and a typed class defined while another thread pickled (a generated
    module loading on an owner) raised "dictionary changed size during iteration" there."""
    with _registering:
        _compat.register_rpc_reducer(cls, reducer)
