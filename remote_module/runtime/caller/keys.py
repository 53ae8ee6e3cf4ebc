"""A RemoteModule's key in its owner's table, on the caller (the owner's table is
``remote_module.runtime.owner.table``, which says why calls send a key, not the RRef).

An eager RemoteModule learns its key from its first call's reply (:func:`settle_first_call`);
a scripted one asks the owner to file its module (:func:`ask_owner_to_file`) beside its first
Python call and adopts the key at the next (:func:`adopt_key`). The three key fields of a
RemoteModule's record (``reference``, ``keeper``, ``filing``; see
``remote_module.runtime.caller.record``) change only here.
"""

from __future__ import annotations

import sys
from typing import Any

import torch.distributed.rpc as rpc
from torch.futures import Future

from remote_module import _shared
from remote_module.runtime import owner, registry
from remote_module.runtime.caller.record import Record
from remote_module.runtime.errors import creation_error

__all__ = ["adopt_key", "ask_owner_to_file", "forget", "keyed_twin", "settle_first_call"]


def settle_first_call(record: Record, module_rref: Any, reply: owner.FirstReply, on: str) -> Any:
    """Keep the key the owner filed the module under (or its RRef, where it has none) for the
    RemoteModule's later calls, and give back the call's result; where the module could not
    be created, raise that error once, named."""
    if not isinstance(reply, tuple):  # a CreationFailure
        raise creation_error(reply, record.creator, on)
    result, key = reply
    record.reference = module_rref if key is None else key
    return result


def ask_owner_to_file(record: Record, module_rref: Any) -> Future[Any]:
    """Ask the owner to file a scripted module for this RemoteModule's keyed calls (counted
    there with ``checkpoint_every``); the request's future. The reply carries the keeper
    RRef: sent without a deadline, so that a late reply is still unpickled and its keeper
    released (``runtime.replies``)."""
    generated = record.generated
    request = (
        module_rref,
        generated.__name__,
        getattr(generated, _shared.INTERFACE_CLASS),
        bool(getattr(generated, _shared.MOVES_TENSORS)),
        record.ticket,
    )
    record.filing = rpc.rpc_async(module_rref.owner(), owner.file_keyed, request, timeout=0)
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


def keyed_twin(remote_fn: Any) -> Any:
    """The keyed twin of a scriptable family's remote function (its generated module lists
    each twin at the index of the function it serves), or None."""
    module = sys.modules.get(getattr(remote_fn, "__module__", ""))
    plain = getattr(module, _shared.REMOTE_FUNCTIONS, ())
    if remote_fn not in plain:
        return None
    return getattr(module, _shared.KEYED_FUNCTIONS)[plain.index(remote_fn)]
