"""The key table: how calls name a module on its owner without sending its RRef, both halves
in one file (the owner's table, and the caller's side of filing and adopting a key).

Eager calls (RemoteModules without a TorchScript interface) do not send the
module's RRef: pickling an RRef costs a fork, acknowledged by another protocol message, on
every call. A RemoteModule's first call sends the RRef once (:func:`first_call`); the owner
files the module under a new key and says which; later calls send the key (an int), which
:func:`module_for` looks up. The rules:

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
as long as the filing's *keeper* lives: an RRef to a small object of this module's, sent to
the RemoteModule that asked and held there beside its module RRef. When that RemoteModule
goes, so does its keeper, and the entry with it; the module itself lives on exactly as long
as its own RRef. Python calls of a scripted module then run the keyed TorchScript remote
functions, which find it with :func:`keyed_module`; TorchScript callers keep sending the RRef.
Keys come from the same counter as above.

On the caller, the three key fields of a RemoteModule's record (``reference``, ``keeper``,
``filing``; see ``remote_module.runtime.record``) change only here.
"""

from __future__ import annotations

import itertools
import sys
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import torch
import torch.distributed.rpc as rpc
from torch import nn
from torch.futures import Future

from remote_module import _contract
from remote_module.runtime.record import Record

if TYPE_CHECKING:
    from remote_module.runtime.errors import CreationFailure

__all__ = [
    "FirstReply",
    "Keeper",
    "adopt_key",
    "ask_owner_to_file",
    "file_keyed",
    "first_call",
    "forget",
    "keyed_module",
    "keyed_twin",
    "module_for",
    "settle_first_call",
    "tick_on_call",
]

# The reply to a RemoteModule's first eager call: the method's result and the module's key in
# the table (None when it has none), or why the module could not be created. A plain tuple:
# a NamedTuple's class travels by name and costs tens of microseconds more to pickle cold.
FirstReply: TypeAlias = "tuple[Any, int | None] | CreationFailure"

# --- The owner's table ---------------------------------------------------------------------

# key -> module, held weakly (see the module docstring); keys never repeat.
_modules: weakref.WeakValueDictionary[int, nn.Module] = weakref.WeakValueDictionary()
_keys = itertools.count(1)
# key -> scripted module, held strongly while the filing's keeper lives (see the docstring).
_held: dict[int, Any] = {}
# key -> what a keyed call of it runs first (the failover's call count), for the few filed so.
_ticks: dict[int, Callable[[Any], None]] = {}


def first_call(
    remote_fn: Callable[..., Any], module_rref: rpc.RRef[Any], *rest: Any, **kwargs: Any
) -> FirstReply:
    """Run a RemoteModule's first eager call: file the module under a new key, then call
    ``remote_fn`` as later calls will, with that key (``rest``: the call prefix after the
    RRef, then the call's own arguments)."""
    try:
        module = module_rref.local_value()
    except Exception as error:  # the creation failed; the RRef holds its remote error
        from remote_module.runtime.errors import creation_failure

        return creation_failure(error)
    key = _register(module)
    reference: Any = module_rref if key is None else key
    return remote_fn(reference, *rest, **kwargs), key


def module_for(reference: Any) -> Any:
    """The module an eager call names: a key in the table, or (where there is no key) its RRef."""
    if type(reference) is int:
        module = _modules.get(reference)
        if module is None:
            raise RuntimeError(
                f"RemoteModule: the module filed under key {reference} on this owner is gone: "
                "its last RRef was deleted before this call arrived"
            )
        return module
    return reference.local_value()


class Keeper:
    """The value of a filing's keeper RRef: the key it holds in the table, dropped with it."""

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        self.key = key

    def __del__(self) -> None:
        _held.pop(self.key, None)
        _ticks.pop(self.key, None)


def file_keyed(
    module_rref: rpc.RRef[Any], module_name: str, interface_cls: Any, move_tensors: bool
) -> tuple[int, rpc.RRef[Keeper]]:
    """File the module behind ``module_rref`` for the keyed remote functions of
    ``module_name`` (compiled here first): its key, and the keeper that holds it there."""
    from remote_module.runtime import registry  # with the first interface, not the package

    registry.ensure_module(module_name, interface_cls, move_tensors, keyed=True)
    module = module_rref.local_value()
    key = next(_keys)
    _held[key] = module
    return key, rpc.RRef(Keeper(key))


def keyed_module(key: int) -> Any:
    """The module filed under ``key`` by :func:`file_keyed` (every keyed call of a scripted
    module looks it up here, in Python: a module filed with a tick is counted here too)."""
    module = _held.get(key)
    if module is None:
        raise RuntimeError(
            f"RemoteModule: the module filed under key {key} on this owner is gone: the "
            "RemoteModule that filed it was deleted before this call arrived"
        )
    if _ticks:
        tick = _ticks.get(key)
        if tick is not None:
            tick(module)
    return module


def tick_on_call(key: int, tick: Callable[[Any], None]) -> None:
    """Run ``tick(module)`` at every keyed call of the module filed under ``key``, for as long
    as it stays filed (``remote_module.runtime.failover`` counts calls so)."""
    _ticks[key] = tick


def _register(module: Any) -> int | None:
    if isinstance(module, torch._C.ScriptModule):
        return None  # a new wrapper on every access: nothing here lives as long as the RRef
    key = next(_keys)
    try:
        _modules[key] = module
    except TypeError:  # not weakly referenceable
        return None
    return key


# --- The caller's side -----------------------------------------------------------------------


def settle_first_call(record: Record, module_rref: Any, reply: FirstReply, owner: str) -> Any:
    """Keep the key the owner filed the module under (or its RRef, where it has none) for the
    RemoteModule's later calls, and give back the call's result; where the module could not
    be created, raise that error once, named."""
    if not isinstance(reply, tuple):  # a CreationFailure
        from remote_module.runtime.errors import creation_error

        raise creation_error(reply, record.creator, owner)
    result, key = reply
    record.reference = module_rref if key is None else key
    return result


def ask_owner_to_file(
    record: Record, module_rref: Any, filer: Callable[..., Any] = file_keyed, *extra: Any
) -> Future[Any]:
    """Ask the owner to file a scripted module for this RemoteModule's keyed calls (through
    ``filer``, which takes :func:`file_keyed`'s arguments, then ``extra``); the request's
    future. The reply carries the keeper RRef: sent without a deadline, so that a late reply
    is still unpickled and its keeper released (``runtime.replies``)."""
    generated = record.generated
    request = (
        module_rref,
        generated.__name__,
        getattr(generated, _contract.INTERFACE_CLASS),
        bool(getattr(generated, _contract.MOVES_TENSORS)),
        *extra,
    )
    record.filing = rpc.rpc_async(module_rref.owner(), filer, request, timeout=0)
    return record.filing


def adopt_key(record: Record, module_rref: Any) -> int | None:
    """The module's key once the owner's reply to :func:`ask_owner_to_file` is in (the keyed
    twins compiled here, to send calls by name), else None. Where the filing failed, the
    RemoteModule keeps sending the RRef."""
    filing = record.filing
    if filing is None or not filing.done():
        return None  # not asked yet, or no reply yet
    # Threads adopting the same reply at once set the same values; the request is forgotten
    # last, so that none of them asks again meanwhile.
    from remote_module.runtime import registry

    try:
        key, keeper = filing.wait()
        registry.compile_remote_functions(record.generated, keyed=True)
    except Exception:  # the module's creation failed, the owner went away: as before
        record.reference = module_rref
        record.filing = None
        return None
    record.keeper = keeper
    record.reference = key
    record.filing = None
    return int(key)


def forget(record: Record) -> None:
    """The RemoteModule moved to another owner (a failover): no key there yet."""
    record.reference = None
    record.keeper = None
    record.filing = None


# remote function -> its keyed twin, or None where it has none (wire functions; eager families)
_keyed_twins: dict[Any, Any] = {}


def keyed_twin(remote_fn: Any) -> Any:
    """The keyed twin of a scriptable family's remote function: its generated module lists
    each twin at the index of the function it serves."""
    twin = _keyed_twins.get(remote_fn, _keyed_twins)
    if twin is _keyed_twins:
        module = sys.modules.get(getattr(remote_fn, "__module__", ""))
        plain = getattr(module, _contract.REMOTE_FUNCTIONS, ())
        twin = None
        if remote_fn in plain:
            twin = getattr(module, _contract.KEYED_FUNCTIONS)[plain.index(remote_fn)]
        twin = _keyed_twins.setdefault(remote_fn, twin)
    return twin
