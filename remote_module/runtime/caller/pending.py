"""A RemoteModule that is not ready yet, and the wait its operations pass first.

Two requests may still be in flight when a constructor has returned: the record's ``creation``
and ``pending`` fields, set and cleared only here.

- ``creation``: with an interface, the constructor returns once ``owner.create_with_interface``
  is sent (construction never blocks on the owner: pytorch#58098). The reply carries the
  module's RRef. ``module_rref`` is not
  in the RemoteModule's ``__dict__`` until the reply is taken: reading it (``RemoteModule``'s
  ``__getattr__``) takes it, as every operation does first. The reply is judged by when it
  came, against the RemoteModule's timeout from the construction; a failed or late creation
  is raised by the operation that looks, and by every later one, named as the constructor
  would have named it (a late reply's RRef is still received and then released).
- ``pending``: the owner's load of the generated module (``owner.load_generated``), asked for
  beside the creation or by ``init_from_module_rref`` with an interface; calls,
  ``torch.jit.script`` and sending over RPC wait for it: they reach the owner's compiled
  remote functions.
"""

from __future__ import annotations

from typing import Any

import torch.distributed.rpc as rpc

from remote_module import _shared
from remote_module.runtime import owner
from remote_module.runtime.caller import failover, route
from remote_module.runtime.caller.record import Creation, Record
from remote_module.runtime.caller.replies import wait_returning_rrefs
from remote_module.runtime.errors import CreationFailure, creation_error, failure, owner_gone

__all__ = [
    "ask_owner_to_load",
    "created",
    "module_rref",
    "wait_for_owner",
]


def created(remote_module: Any) -> None:
    """Take a construction's reply if it is still in flight: give ``remote_module`` its
    ``module_rref`` (and ask the owner to load the generated module where it has not), or
    raise why the module does not exist."""
    creation: Creation | None = remote_module._rm_record.creation
    if creation is not None:
        _take(remote_module, creation)


def module_rref(remote_module: Any) -> Any:
    """``remote_module.module_rref``, once the construction's reply is taken."""
    created(remote_module)
    try:
        return remote_module.__dict__["module_rref"]
    except KeyError:
        raise AttributeError("RemoteModule has no attribute 'module_rref' yet") from None


def _take(remote_module: Any, creation: Creation) -> None:
    record: Record = remote_module._rm_record
    with creation.lock:
        if record.creation is not creation:
            return  # taken by another thread meanwhile
        if creation.error is None:
            creation.error = _settle(remote_module, record, creation)
        if creation.error is not None:
            raise creation.error.with_traceback(None)  # raised again: a fresh traceback


def _settle(remote_module: Any, record: Record, creation: Creation) -> BaseException | None:
    """The reply, taken: None once the module exists, else the error every later operation
    raises too."""
    future, creation.future = creation.future, None  # nothing keeps a late reply's RRef
    assert future is not None
    try:
        reply = wait_returning_rrefs(
            future, remote_module.timeout, creation.started, creation.arrivals
        )
    except RuntimeError as error:
        named = failure(error, f"RemoteModule: creating {creation.creator}", remote_module.on)
        named.__cause__ = error
        return named
    if isinstance(reply, CreationFailure):
        return creation_error(reply, creation.creator, remote_module.on)
    remote_module.__dict__["module_rref"] = reply
    route.choose(remote_module)  # its calls' route, now that the RRef is known
    record.creation = None
    return None


def ask_owner_to_load(remote_module: Any) -> None:
    """Ask the owner to load and compile the RemoteModule's generated module, without waiting;
    what needs it waits in :func:`wait_for_owner`."""
    record: Record = remote_module._rm_record
    generated = record.generated
    request = (
        generated.__name__,
        getattr(generated, _shared.INTERFACE_CLASS),
        bool(getattr(generated, _shared.MOVES_TENSORS)),
        remote_module.wire_dtype is not None,
    )
    record.pending = rpc.rpc_async(
        remote_module.module_rref.owner(),
        owner.load_generated,
        request,
        timeout=remote_module.timeout,
    )


def wait_for_owner(remote_module: Any, what: str) -> None:
    """Hold ``what`` (a call, scripting, sending over RPC) until the module exists and its
    owner has loaded and compiled the generated module; raise why it could not. The load is
    bounded by the RemoteModule's timeout (that request's own). After a failure the owner is
    asked again, so a load that only outlasted the timeout serves a later call."""
    created(remote_module)
    record: Record = remote_module._rm_record
    pending = record.pending
    if pending is None:
        return
    try:
        pending.wait()
    except Exception as error:  # the owner's own error type, or the RPC's RuntimeError
        if record.failover is not None and owner_gone(error):
            raise failover.failed(remote_module, error, what, record.seat()) from error
        loading = RuntimeError(
            f"loading the generated module {record.module_name} there failed: {error}"
        )
        failed = failure(loading, what, str(remote_module.module_rref.owner_name()))
        ask_owner_to_load(remote_module)
        raise failed from error
    record.pending = None
