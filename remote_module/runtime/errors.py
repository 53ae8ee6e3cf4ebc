"""Naming failures: every error a RemoteModule raises for a failed remote operation says what
failed (the RemoteModule's method or step), on which owner, and why.

``failure`` names a failed RPC; a module that could not be created travels back as data
(:class:`CreationFailure`, made on the owner by :func:`creation_failure`) and is raised once,
as its own builtin type, by :func:`creation_error`.
"""

from __future__ import annotations

import ast
import builtins
from typing import NamedTuple

import torch.distributed.rpc as rpc

__all__ = ["CreationFailure", "creation_error", "creation_failure", "failure", "worker_name"]


class CreationFailure(NamedTuple):
    """Why ``module_cls(*args, **kwargs)`` failed on the owner: the error's builtin type name
    and its own message, sent back as data so the caller raises it once, without RPC's
    remote-traceback wrapping."""

    error_type: str
    message: str


def failure(error: BaseException, what: str, owner: str | int) -> RuntimeError:
    """A ``RuntimeError`` saying that ``what`` (``forward``, ``remote_parameters``, or a step
    such as ``torch.jit.script``) failed on the worker ``owner``, and why."""
    qualified = f"RemoteModule.{what}" if what.isidentifier() else what
    return RuntimeError(f"{qualified} on worker {owner!r} failed: {error}")


def creation_error(failed: CreationFailure, creator: str | None, owner: str | int) -> Exception:
    """The error ``module_cls`` raised on the owner, as its own builtin type (RuntimeError for
    any other), named once: the module's creator and the owner (a worker name, or a rank)."""
    kind = getattr(builtins, failed.error_type, None)
    if not (isinstance(kind, type) and issubclass(kind, Exception)):
        kind = RuntimeError
    where = worker_name(owner) if isinstance(owner, int) else owner
    return kind(
        f"RemoteModule: creating {creator or 'the module'} on worker '{where}' failed: "
        f"{failed.error_type}: {failed.message}"
    )


def creation_failure(error: BaseException) -> CreationFailure:
    """The failed creation's own error type and message, on the owner. torch keeps it as the
    text of a remote error, ``On WorkerInfo(...):`` then ``repr(error)`` then the traceback;
    where that text is not in this form, the whole of it."""
    lines = str(error).split("\n", 2)
    if len(lines) >= 2 and lines[0].startswith("On WorkerInfo"):
        try:
            call = ast.parse(lines[1].strip(), mode="eval").body
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                parts = [ast.literal_eval(argument) for argument in call.args]
                return CreationFailure(call.func.id, ", ".join(map(str, parts)))
        except (SyntaxError, ValueError):
            pass
    return CreationFailure(type(error).__name__, str(error))


def worker_name(rank: int) -> str:
    """The name of the worker of ``rank`` in the current RPC group."""
    agent = rpc._get_current_rpc_agent()
    return next(str(info.name) for info in agent.get_worker_infos() if info.id == rank)
