"""The key table: how calls name a module on its owner without sending its RRef.

Eager calls (RemoteModules without a TorchScript interface) do not send the module's RRef:
pickling an RRef costs a fork, acknowledged by another protocol message, on every call. A
RemoteModule's first call sends the RRef once; the owner files the module under a new key
(:func:`file`) and says which; later calls send the key (an int), which :func:`module_for`
looks up. The rules:

- the table holds each module weakly: an entry lives exactly as long as the RRef's value, so
  the module is freed when its last RRef goes, as without the table;
- keys come from one counter per owner process and are never reused, so a stale key can
  never reach another module; a call whose module was freed fails with a RuntimeError that
  says so;
- a module the owner cannot hold with the RRef's lifetime (the C++ module behind an
  interface-typed RRef, which gets a new Python wrapper on every access) gets no key there,
  and its RemoteModule keeps sending the RRef.

Scripted modules (a TorchScript interface) are filed the other way, by :func:`file_keyed`:
Python has no weak reference to the C++ module, so the table holds it strongly, for exactly
as long as the filing's :class:`Keeper` lives: an RRef to it is sent to the RemoteModule that
asked and held there beside its module RRef. Python calls of a scripted module then run the
keyed TorchScript remote functions, which find it with :func:`keyed_module` (through
``remote_module.runtime.owner.keyed_module``, which counts them). The table's
entries are fields of ``remote_module.runtime.owner.state.STATE``.
"""

from __future__ import annotations

from typing import Any

import torch.distributed.rpc as rpc

from remote_module import _compat
from remote_module.runtime.owner import creation
from remote_module.runtime.owner.state import STATE, Owned

__all__ = ["Keeper", "file", "file_keyed", "keyed_module", "module_for"]


def file(module: Any) -> int | None:
    """File an eager module under a new key, held weakly; None where it cannot be."""
    if _compat.is_cpp_script_module(module):
        return None  # a new wrapper on every access: nothing here lives as long as the RRef
    key = next(STATE.keys)
    try:
        STATE.modules[key] = module
    except TypeError:  # not weakly referenceable
        return None
    return key


def module_for(reference: Any) -> Any:
    """The module an eager call names: a key in the table, or (where there is no key) its RRef."""
    if type(reference) is int:
        module = STATE.modules.get(reference)
        if module is None:
            raise RuntimeError(
                f"RemoteModule: the module filed under key {reference} on this owner is gone: "
                "its last RRef was deleted before this call arrived"
            )
        return module
    return creation.owned_value(reference)


class Keeper:
    """The value of a filing's keeper RRef: the key it holds in the table, dropped with it."""

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        self.key = key

    def __del__(self) -> None:
        STATE.held.pop(self.key, None)
        STATE.counted_keys.pop(self.key, None)


def file_keyed(module: Any, counted: Owned | None = None) -> tuple[int, rpc.RRef[Keeper]]:
    """File a scripted module strongly under a new key (its keyed calls counted for
    ``counted``'s checkpoints, where given): the key, and the keeper that holds it there."""
    key = next(STATE.keys)
    STATE.held[key] = module
    if counted is not None:
        STATE.counted_keys[key] = counted
    return key, rpc.RRef(Keeper(key))


def keyed_module(key: int) -> tuple[Any, Owned | None]:
    """The module filed under ``key`` by :func:`file_keyed`, and whose checkpoints its calls
    count for (None for most)."""
    module = STATE.held.get(key)
    if module is None:
        raise RuntimeError(
            f"RemoteModule: the module filed under key {key} on this owner is gone: the "
            "RemoteModule that filed it was deleted before this call arrived"
        )
    return module, STATE.counted_keys.get(key) if STATE.counted_keys else None
