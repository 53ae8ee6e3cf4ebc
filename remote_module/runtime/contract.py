"""The runtime as generated code sees it: the only module of ours that generated code imports.

A generated module (``remote-module-codegen`` output, or the templates rendered in memory)
imports this module as ``_rm`` and uses exactly what ``__all__`` lists:

- :func:`check_fresh` at the top (a stale module says why) and :func:`register` at the end
  (see ``remote_module.runtime.registry``);
- :func:`call` / :func:`call_async` in the caller-side methods outside TorchScript (argument
  checks, sending, the casts of a ``wire_dtype``, naming failures), and :func:`move_to_device`
  where no types are known (a union, in Python); :class:`AwaitableFuture`, what
  ``call_async`` returns, in the typed classes' ``m_async`` (a ``torch.futures.Future`` that
  asyncio can await);
- :func:`owner_module` in eager remote functions: the module a call names (its key in the
  owner's table, or its RRef; see ``remote_module.runtime.caller.keys``); :func:`keyed_module` in
  the TorchScript family's keyed remote functions, through a lookup marked :func:`ignore`
  (TorchScript calls it in Python): the module filed under a key;
- :func:`count_call` in the TorchScript branch of a RemoteModule with ``checkpoint_every``
  (in Python: its calls counted, every N-th told to the owner);
- :func:`is_scripting`, and :func:`rpc_async` and :func:`fork` in their TorchScript branch:
  torch's own functions (TorchScript knows them by identity), with the types and explicit
  exports torch does not declare;
- :class:`RemoteModule`, whose methods' ``self`` is, and :class:`TypedRemoteModule`, the base
  of the typed classes: ``RemoteModule`` itself at run time; for type checkers its
  constructor without ``module_interface_cls`` and no attribute but those a typed class
  declares;
- :func:`move_tensor`, :func:`cast_tensor`, :func:`restore_tensor`: the tensor leaf helpers
  from ``remote_module._shared``, which the generated walkers and functions call for each
  tensor (a tensor alone gets no walker of its own);
- :data:`CALL_PREFIX`: the values every remote function receives before the interface's own
  arguments, in order, as attributes of the RemoteModule that sends them (eager calls send
  the module's key in place of its RRef).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.distributed.rpc as rpc
from torch.futures import Future

from remote_module._shared import (
    CALL_PREFIX,
    cast_tensor,
    move_tensor,
    restore_tensor,
)
from remote_module.runtime.batching import Batching
from remote_module.runtime.caller import failover
from remote_module.runtime.caller.awaitable import AwaitableFuture
from remote_module.runtime.caller.calls import call, call_async
from remote_module.runtime.caller.module import RemoteModule
from remote_module.runtime.owner import keyed_module
from remote_module.runtime.owner.table import module_for as owner_module
from remote_module.runtime.registry import check_fresh, register
from remote_module.runtime.values import move_to_device

__all__ = [
    "CALL_PREFIX",
    "AwaitableFuture",
    "RemoteModule",
    "TypedRemoteModule",
    "call",
    "call_async",
    "cast_tensor",
    "check_fresh",
    "count_call",
    "fork",
    "ignore",
    "is_scripting",
    "keyed_module",
    "move_tensor",
    "move_to_device",
    "owner_module",
    "register",
    "restore_tensor",
    "rpc_async",
]

if TYPE_CHECKING:
    R = TypeVar("R")
    F = TypeVar("F", bound=Callable[..., Any])

    def rpc_async(
        to: Any,
        func: Callable[..., R],
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
        timeout: float = -1.0,
    ) -> Future[R]:
        """``torch.distributed.rpc.rpc_async``."""

    def fork(func: Callable[..., R], *args: Any) -> Future[R]:
        """``torch.jit.fork``."""

    def is_scripting() -> bool:
        """``torch.jit.is_scripting``."""

    def ignore(fn: F) -> F:
        """``torch.jit.ignore``."""

    class TypedRemoteModule(RemoteModule):
        """A RemoteModule bound to one interface (see the typed classes)."""

        # No attribute beyond those a typed class declares: a misspelt method is an error.
        __getattr__: None  # type: ignore[assignment, misc]

        def __init__(
            self,
            remote_device: str,
            module_cls: Callable[..., torch.nn.Module],
            args: tuple[Any, ...] | None = None,
            kwargs: dict[str, Any] | None = None,
            *,
            timeout: float | None = None,
            wire_dtype: torch.dtype | None = None,
            standby: list[str] | None = None,
            checkpoint_every: int | None = None,
            fake: Callable[..., Any] | None = None,
            batching: Batching | None = None,
        ) -> None: ...

else:
    rpc_async = rpc.rpc_async
    fork = torch.jit.fork
    is_scripting = torch.jit.is_scripting
    ignore = torch.jit.ignore
    TypedRemoteModule = RemoteModule


@torch.jit.ignore
def count_call(identity: str) -> None:
    """A call that a scripted RemoteModule with ``checkpoint_every`` sends from TorchScript,
    counted in Python on this side (the owner is told every N-th: ``failover.scripted_call``)."""
    failover.scripted_call(identity)


# Real types, not the strings of this module's postponed annotations: TorchScript reads them.
count_call.__annotations__ = {"identity": str, "return": None}
