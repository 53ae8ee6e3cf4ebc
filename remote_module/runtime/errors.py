"""Naming failures: every error a RemoteModule raises for a failed remote operation says what
failed (the RemoteModule's method or step), on which owner, and why.

``failure`` names a failed RPC; a module that could not be created travels back as data
(:class:`CreationFailure`, made on the owner by :func:`creation_failure`) and is raised once,
as its own builtin type, by :func:`creation_error`.
"""

from __future__ import annotations

import ast
import builtins
import functools
import re

from remote_module import _compat

__all__ = [
    "CreationFailure",
    "OwnerFailover",
    "RemoteFailure",
    "UnknownWorkerError",
    "creation_error",
    "creation_failure",
    "failure",
    "owner_gone",
    "short",
    "worker_name",
]


# CreationFailure and RemoteFailure are plain classes with slots, not NamedTuples: every
# program imports this module, and a NamedTuple class cost ~0.1 ms of that import each.
class CreationFailure:
    """Why ``module_cls(*args, **kwargs)`` failed on the owner: the error's builtin type name
    and its own message, sent back as data so the caller raises it once, without RPC's
    remote-traceback wrapping."""

    __slots__ = ("error_type", "message")

    def __init__(self, error_type: str, message: str) -> None:
        self.error_type = error_type
        self.message = message

    def __repr__(self) -> str:
        return f"CreationFailure({self.error_type!r}, {self.message!r})"


def failure(error: Exception, what: str, owner: str | int) -> Exception:
    """The one exception a failed remote operation raises: its message names ``what`` (a
    RemoteModule method such as ``forward``, or a step such as ``torch.jit.script``), the
    worker ``owner`` and why, in one line of text where the owner raised: the remote
    exception's type and message, its traceback kept as ``remote_traceback`` (and the RPC's
    own error as ``__cause__``, where the caller raises it ``from`` that). The type is the
    remote exception's own where torch could rebuild it (as torch does), else RuntimeError.
    A dead owner reads as such."""
    head = _head(what, owner)
    if owner_gone(error):
        return RuntimeError(f"{head}worker {owner!r} is gone: its connection closed")
    remote = _remote_error(_text(error))
    text = f"{head}{error}" if remote is None else f"{head}{remote[0]}: {remote[1]}"
    raised: Exception
    try:
        raised = type(error)(text)
    except Exception:  # a type that takes other arguments: torch's own fallback type
        raised = RuntimeError(text)
    if remote is not None:
        raised.remote_traceback = remote[2]  # type: ignore[attr-defined]
    return raised


def owner_gone(error: BaseException) -> bool:
    """Whether ``error`` says the worker went away (its process is gone or its connection
    closed), not that the module raised or that a call timed out."""
    return isinstance(error, RuntimeError) and _gone().search(str(error)) is not None


# Compiled on first use (an error), not at import: every program imports this module.
@functools.cache
def _gone() -> re.Pattern[str]:
    """What TensorPipe says of a peer that went away, on each transport (shm, uv/TCP) and on
    the CMA channel that copies large tensors between processes (``process_vm_readv``)."""
    return re.compile(
        r"^eof \(this error originated at|connection reset by peer|connection closed by peer|"
        r"connection refused|broken pipe|pipe closed|ECONNRESET|ECONNREFUSED|EPIPE|"
        r"process_vm_(?:readv|writev): No such process",
        re.IGNORECASE,
    )


@functools.cache
def _remote_header() -> re.Pattern[str]:
    """torch's text of an exception raised on another worker (prefixed with its type's name
    where torch raised it again as that type): "On WorkerInfo(id=1, name=w1):", then
    repr(error), then the traceback."""
    return re.compile(r"(?:[\w.]+: )?On WorkerInfo\([^\n]*\):?")


class OwnerFailover(RuntimeError):
    """An operation of a RemoteModule with standbys met its owner gone, and a standby took the
    module over (see ``remote_module.runtime.caller.failover``): the operation itself was not
    retried. ``failed_owner`` and ``new_owner`` are worker names; ``checkpoint_version`` is
    the checkpoint the new owner loaded (None: none had reached it, the module is as built)."""

    def __init__(
        self,
        message: str,
        failed_owner: str = "",
        new_owner: str = "",
        checkpoint_version: int | None = None,
    ) -> None:
        super().__init__(message)
        self.failed_owner = failed_owner
        self.new_owner = new_owner
        self.checkpoint_version = checkpoint_version


class UnknownWorkerError(RuntimeError, ValueError):
    """A ``remote_device`` names a worker the RPC group does not have, by name or by rank.
    A ``RuntimeError`` (what torch raises for an unknown name) and a ``ValueError`` alike."""


class RemoteFailure:
    """An exception raised by an owner-side request of the runtime, sent back as data: torch
    would print its traceback on the owner and put it in the caller's exception text."""

    __slots__ = ("error_type", "message", "remote_traceback")

    def __init__(self, error_type: str, message: str, remote_traceback: str) -> None:
        self.error_type = error_type
        self.message = message
        self.remote_traceback = remote_traceback

    def __repr__(self) -> str:
        return f"RemoteFailure({self.error_type!r}, {self.message!r}, ...)"

    def error(self, what: str, owner: str | int) -> Exception:
        """The exception to raise on the caller, named as :func:`failure` names one."""
        kind = _builtin_kind(self.error_type)
        raised = kind(f"{_head(what, owner)}{self.error_type}: {self.message}")
        raised.remote_traceback = self.remote_traceback  # type: ignore[attr-defined]
        return raised


def short(error: BaseException) -> str:
    """One line of why ``error`` happened, for a message listing several."""
    if owner_gone(error):
        return "gone: its connection closed"
    return str(error).split("\n", 1)[0][:200]


def _head(what: str, owner: str | int) -> str:
    """``RemoteModule.<method>`` (or the step, as given) ``on worker '<owner>' failed: ``."""
    qualified = f"RemoteModule.{what}" if what.isidentifier() else what
    return f"{qualified} on worker {owner!r} failed: "


def _builtin_kind(name: str) -> type[Exception]:
    """The builtin exception type called ``name``; RuntimeError for any other."""
    kind = getattr(builtins, name, None)
    return kind if isinstance(kind, type) and issubclass(kind, Exception) else RuntimeError


def _remote_error(text: str) -> tuple[str, str, str] | None:
    """The type name, message and traceback of a remote exception in torch's text of it
    (``On WorkerInfo(...):``, ``repr(error)``, the traceback), or None. ``repr(error)`` runs
    to the traceback's first line: a message of several lines (torch 2.6 words an argument
    error of ``torch.empty`` on five) spans as many."""
    header = _remote_header().match(text)
    if header is None:
        return None
    body = text[header.end() :].removeprefix("\n")
    end = body.find("\nTraceback (most recent call last):")
    if end < 0:  # no traceback: the repr is its first line
        represented, _, rest = body.partition("\n")
    else:
        represented, rest = body[:end], body[end + 1 :]
    represented = represented.strip()
    if not represented:
        return None
    try:
        call = ast.parse(represented, mode="eval").body
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
            return None
        parts = [ast.literal_eval(argument) for argument in call.args]
    except (SyntaxError, ValueError):
        # torch unescapes the repr on the caller: a message with both quotes, or with line
        # breaks, is no literal any more, but one quoted argument still reads as Type('...').
        single = re.fullmatch(r"""(\w+)\((['"])(.*)\2\)""", represented, re.DOTALL)
        return None if single is None else (single[1], single[3].rstrip("\n"), rest)
    return call.func.id, ", ".join(map(str, parts)), rest


def creation_error(failed: CreationFailure, creator: str | None, owner: str | int) -> Exception:
    """The error ``module_cls`` raised on the owner, as its own builtin type (RuntimeError for
    any other), named once: the module's creator and the owner (a worker name, or a rank)."""
    kind = _builtin_kind(failed.error_type)
    where = worker_name(owner) if isinstance(owner, int) else owner
    return kind(
        f"RemoteModule: creating {creator or 'the module'} on worker '{where}' failed: "
        f"{failed.error_type}: {failed.message}"
    )


def creation_failure(error: BaseException) -> CreationFailure:
    """The failed creation's own error type and message, on the owner. torch keeps it as the
    text of a remote error, ``On WorkerInfo(...):`` then ``repr(error)`` then the traceback;
    where that text is not in this form, the whole of it."""
    remote = _remote_error(_text(error))
    if remote is not None:
        return CreationFailure(remote[0], remote[1])
    return CreationFailure(type(error).__name__, _text(error))


def _text(error: BaseException) -> str:
    """``error``'s message. A KeyError's ``str()`` is the repr of its argument (torch's whole
    remote text, quoted and escaped), and torch's future reports one as ``KeyError: '...'``:
    the argument, unquoted."""
    if isinstance(error, KeyError) and len(error.args) == 1 and isinstance(error.args[0], str):
        return error.args[0]
    text = str(error)
    quoted = re.match(r"""KeyError: ('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""", text)
    if quoted is None:
        return text
    try:
        return str(ast.literal_eval(quoted[1]))
    except (SyntaxError, ValueError):
        return text


def worker_name(rank: int) -> str:
    """The name of the worker of ``rank`` in the current RPC group."""
    agent = _compat.rpc_agent()
    return next(str(info.name) for info in agent.get_worker_infos() if info.id == rank)
