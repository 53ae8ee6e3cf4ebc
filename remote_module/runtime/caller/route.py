"""A RemoteModule's route: how its calls reach the owner now, as one value in its record.

A route is chosen (:func:`choose`) at the three moments it can change: when the construction's
reply is taken (the module's RRef is known), when a key is adopted (the owner filed the module
and said under which key), and when the owner moves (a failover). Between them every call
runs :meth:`Route.send` and :meth:`Route.settle`, with no branch on the RemoteModule's
options: what they decide is in the route.

Two kinds:

- :class:`MessageRoute`: a Python message to the owner, ``owner.run(Call(...), *args)``. The
  :class:`~remote_module.runtime.owner.Call` is made once per method and says everything the
  owner does around the generated function: which module (its key, or its RRef on a first call,
  which files it and replies with its key), the wire dtype the arguments were cast to, the
  ticket that counts calls for ``checkpoint_every``. Every RemoteModule without a TorchScript
  interface takes it, and a scripted one with a ``wire_dtype``, or with ``checkpoint_every``
  before its key, or where TorchScript is off. What the module raises is the reply, as data
  (a ``RemoteFailure``: torch would print it on the owner), which the call raises, named.
- :class:`ScriptRoute`: a scripted module's compiled remote function sent by its qualified
  name, as ``rpc.rpc_async`` sends a TorchScript function (the owner runs it without Python):
  with the RRef until the owner has filed the module for keyed calls (asked beside the first
  call: ``remote_module.runtime.caller.keys``), then its keyed twin with the key. What the
  module raises arrives as the TorchScript interpreter's text of it, which the call reads
  into the same exception (``remote_module.runtime.errors.script_failure``).

The compiled route (``remote_module.runtime.caller.compiled``) and every later option plug in
here: a field of the :class:`Call`, or a route of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed.rpc as rpc
from torch.futures import Future

from remote_module import _compat
from remote_module._shared import REMOTE_PREFIX
from remote_module.runtime import owner, values
from remote_module.runtime.batching import Batching
from remote_module.runtime.caller import keys
from remote_module.runtime.caller.record import Record

__all__ = ["MessageRoute", "Route", "ScriptRoute", "Sent", "choose"]


class Sent:
    """A call on its way: the route that sent it, its future, and the owner's filing request
    sent beside it (a scripted module's first Python call), if any."""

    __slots__ = ("filing", "future", "route")

    def __init__(self, route: Route, future: Future[Any]) -> None:
        self.route = route
        self.future = future
        self.filing: Future[Any] | None = None


class Route:
    """How calls reach the owner: its worker (``to``), the seat of the failover plan it is
    (0 without one: a failure is judged against the owner it was sent to), the RemoteModule's
    timeout, and the prefix every remote function takes first (the module's key or RRef, its
    device, whether a device map is set)."""

    __slots__ = ("files", "owner_name", "prefix", "seat", "timeout", "to")

    def __init__(
        self, to: Any, seat: int, timeout: float, prefix: tuple[Any, str, bool], files: bool
    ) -> None:
        self.to = to
        self.owner_name = str(to if isinstance(to, str) else to.name)
        self.seat = seat
        self.timeout = timeout
        self.prefix = prefix
        # A scripted module that has no key yet: its first call asks the owner to file it (the
        # reply is waited for with that call's), and a call after the reply adopts the key.
        self.files = files

    def send(
        self, remote_module: Any, remote_fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Any
    ) -> Sent:
        """Send one call (what the owner runs, how: the route's kind)."""
        filing = None
        if self.files:
            record: Record = remote_module._rm_record
            if record.filing is None:
                filing = keys.ask_owner_to_file(record, self.prefix[0])
            elif record.filing.done():  # its key (or, failed, the RRef for good): a new route
                keys.adopt_key(record, self.prefix[0])
                return choose(remote_module).send(remote_module, remote_fn, args, kwargs)
        sent = self._send(remote_fn, args, kwargs)
        sent.filing = filing
        return sent

    def _send(self, remote_fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Any) -> Sent:
        raise NotImplementedError

    def settle(self, remote_module: Any, reply: Any) -> Any:
        """A call's reply as its caller gets it."""
        return reply


class MessageRoute(Route):
    """``owner.run(Call(...), *args, **kwargs)``: see the module docstring."""

    __slots__ = ("batching", "calls", "first", "ticket", "wire_dtype")

    def __init__(
        self,
        to: Any,
        seat: int,
        timeout: float,
        prefix: tuple[Any, str, bool],
        files: bool = False,
        first: bool = False,
        wire_dtype: Any = None,
        ticket: tuple[Any, ...] | None = None,
        batching: Batching | None = None,
    ) -> None:
        super().__init__(to, seat, timeout, prefix, files)
        self.first = first
        self.wire_dtype = wire_dtype
        self.ticket = ticket
        self.batching = batching
        self.calls: dict[Callable[..., Any], owner.Call] = {}

    def _send(self, remote_fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Any) -> Sent:
        call = self.calls.get(remote_fn)
        if call is None:
            call = self.calls[remote_fn] = self._call(remote_fn)
        wire_dtype = self.wire_dtype
        if wire_dtype is not None:
            carried, args, kwargs = values.to_wire(wire_dtype, args, kwargs)
            message: tuple[Any, ...] = (call, carried, *args)
        else:
            message = (call, *args)
        return Sent(self, rpc.rpc_async(self.to, owner.run, message, kwargs, self.timeout))

    def _call(self, remote_fn: Callable[..., Any]) -> owner.Call:
        reference, device, is_device_map_set = self.prefix
        function = (remote_fn.__module__, remote_fn.__name__)  # found by name on the owner
        batching = self.batching
        if batching is not None and remote_fn.__name__.removeprefix(REMOTE_PREFIX) not in (
            batching.methods
        ):
            batching = None
        return owner.Call(
            function,
            reference,
            device,
            is_device_map_set,
            self.first,
            self.wire_dtype,
            self.ticket,
            batching,
        )

    def settle(self, remote_module: Any, reply: Any) -> Any:
        if self.first:  # the owner's key for later calls (a new route), or why it failed
            record = remote_module._rm_record
            reply = keys.settle_first_call(record, self.prefix[0], reply, self.owner_name)
            choose(remote_module)
        return values.from_wire(reply) if self.wire_dtype is not None else reply


class ScriptRoute(Route):
    """A compiled remote function by its qualified name (with the key: its keyed twin): see
    the module docstring."""

    __slots__ = ("keyed",)

    def __init__(
        self,
        to: Any,
        seat: int,
        timeout: float,
        prefix: tuple[Any, str, bool],
        keyed: bool,
        files: bool = False,
    ) -> None:
        super().__init__(to, seat, timeout, prefix, files)
        self.keyed = keyed

    def _send(self, remote_fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Any) -> Sent:
        if self.keyed:
            remote_fn = keys.keyed_twin(remote_fn)
        return Sent(self, _send_by_name(self, remote_fn, (*self.prefix, *args), kwargs))


def choose(remote_module: Any) -> Route:
    """The route of ``remote_module``'s calls now (its module's RRef known), kept in its
    record: see the module docstring."""
    record: Record = remote_module._rm_record
    module_rref = remote_module.module_rref
    to = module_rref.owner()
    seat = record.seat()
    timeout = remote_module.timeout
    where = (remote_module.device, remote_module.is_device_map_set)
    wire_dtype = remote_module.wire_dtype
    key = record.reference
    batching = remote_module.batching
    route: Route
    if remote_module.is_scriptable:
        # Batched calls are merged by Python on the owner: they go by message.
        by_name = wire_dtype is None and batching is None and _compat.jit_enabled()
        # No key yet: asked for (a filing that failed left the RRef there: never again).
        files = by_name and key is None
        if by_name and type(key) is int:
            route = ScriptRoute(to, seat, timeout, (key, *where), keyed=True)
        elif by_name and record.ticket is None:
            route = ScriptRoute(to, seat, timeout, (module_rref, *where), False, files)
        else:  # counted for checkpoint_every by message until keyed; a wire dtype: always
            route = MessageRoute(
                to,
                seat,
                timeout,
                (module_rref, *where),
                files,
                False,
                wire_dtype,
                record.ticket,
                batching,
            )
    else:
        first = key is None  # the owner files the module and replies with its key
        reference = module_rref if first else key
        route = MessageRoute(
            to,
            seat,
            timeout,
            (reference, *where),
            False,
            first,
            wire_dtype,
            record.ticket,
            batching,
        )
    record.route = route
    return route


def _send_by_name(
    route: Route, remote_fn: Any, rpc_args: tuple[Any, ...], kwargs: Mapping[str, Any] | None
) -> Future[Any]:
    """A compiled remote function, sent as ``rpc.rpc_async`` sends a TorchScript function:
    by its qualified name (the owner compiled it under the same one). While the autograd
    profiler runs, through ``rpc.rpc_async`` itself, which records it."""
    if _compat.profiler_enabled():
        script_fn = torch.jit.script(remote_fn)  # compiled already: torch's cached function
        return rpc.rpc_async(route.to, script_fn, rpc_args, kwargs, route.timeout)
    name = _compat.qualified_name(remote_fn)
    return _compat.invoke_rpc_torchscript(
        route.owner_name, name, rpc_args, dict(kwargs or {}), route.timeout
    )
