"""Naming failures: every error a RemoteModule raises for a failed remote operation says what
failed (the RemoteModule's method or step), on which owner, and why.

``failure`` names a failed RPC; a module that could not be created travels back as data
(:class:`CreationFailure`, made on the owner by :func:`creation_failure`) and is raised once
by :func:`creation_error`; so does a failed request of the runtime or a failed call
(:class:`RemoteFailure`, made by :func:`remote_failure`). An exception raised in TorchScript
reaches the caller as the interpreter's text of it (a call sent by name, which runs no Python
on the owner), and is read back into the same type name, message and traceback
(:func:`script_failure`). Whatever the route, the type raised is the one torch's RPC gives a
remote exception of that type (:func:`rpc_type`), and a scripted ``raise X(...)`` counts as
``X``.
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
import traceback

from remote_module import _compat
from remote_module.runtime import script_errors

__all__ = [
    "CreationFailure",
    "NotCreated",
    "OwnerFailover",
    "RemoteFailure",
    "UnknownWorkerError",
    "creation_error",
    "creation_failure",
    "failure",
    "owner_gone",
    "remote_failure",
    "rpc_type",
    "script_failure",
    "short",
    "worker_name",
]


# CreationFailure and RemoteFailure are plain classes with slots, not NamedTuples: every
# program imports this module, and a NamedTuple class cost ~0.1 ms of that import each.
class CreationFailure:
    """Why ``module_cls(*args, **kwargs)`` failed on the owner: the error's type name and its
    own message, sent back as data so the caller raises it once, without RPC's
    remote-traceback wrapping. ``raised_as``: the name of the type the caller raises
    (:func:`rpc_type`), where the owner knew the error's type; else found from the name."""

    __slots__ = ("error_type", "message", "raised_as")

    def __init__(self, error_type: str, message: str, raised_as: str | None = None) -> None:
        self.error_type = error_type
        self.message = message
        self.raised_as = raised_as

    def __repr__(self) -> str:
        return f"CreationFailure({self.error_type!r}, {self.message!r})"


def failure(error: Exception, what: str, owner: str | int, creator: str | None = None) -> Exception:
    """The one exception a failed remote operation raises: its message names ``what`` (a
    RemoteModule method such as ``forward``, or a step such as ``torch.jit.script``), the
    worker ``owner`` and why, in one line of text where the owner raised: the remote
    exception's type and message, its traceback kept as ``remote_traceback`` (and the RPC's
    own error as ``__cause__``, where the caller raises it ``from`` that). The type is the
    remote exception's own where torch could rebuild it (as torch does), else RuntimeError.
    A dead owner reads as such; a module never created, as :func:`creation_error` names it
    (``creator``: the module's)."""
    head = _head(what, owner)
    if owner_gone(error):
        return RuntimeError(f"{head}worker {owner!r} is gone: its connection closed")
    remote = _remote_error(_text(error))
    if remote is not None and remote[0] == NotCreated.__name__:
        error_type, _, message = remote[1].partition(": ")
        return creation_error(CreationFailure(error_type, message), creator, owner)
    if remote is None:
        scripted = script_failure(str(error))
        if scripted is not None:  # raised in TorchScript: read as the owner would have sent it
            return scripted.error(what, owner, creator)
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
    would print its traceback on the owner and put it in the caller's exception text.
    ``raised_as`` as for :class:`CreationFailure` (:func:`remote_failure` sets it)."""

    __slots__ = ("error_type", "message", "raised_as", "remote_traceback")

    def __init__(
        self,
        error_type: str,
        message: str,
        remote_traceback: str,
        raised_as: str | None = None,
    ) -> None:
        self.error_type = error_type
        self.message = message
        self.remote_traceback = remote_traceback
        self.raised_as = raised_as

    def __repr__(self) -> str:
        return f"RemoteFailure({self.error_type!r}, {self.message!r}, ...)"

    def error(self, what: str, owner: str | int, creator: str | None = None) -> Exception:
        """The exception to raise on the caller, named as :func:`failure` names one, of the
        type torch's RPC would have raised for it; where the module was never created, the
        creation's failure, as :func:`creation_error` names it (``creator``: the module's)."""
        if self.error_type == NotCreated.__name__:
            error_type, _, message = self.message.partition(": ")
            return creation_error(
                CreationFailure(error_type, message, self.raised_as), creator, owner
            )
        kind = _raised_as(self.error_type, self.raised_as)
        message = _unquoted(self.error_type, self.message)
        raised = kind(f"{_head(what, owner)}{self.error_type}: {message}")
        raised.remote_traceback = self.remote_traceback  # type: ignore[attr-defined]
        return raised


class NotCreated(RuntimeError):
    """On the owner: an operation reached a module whose creation failed (its RRef holds why).
    Its message is the creation's failure, ``<type>: <message>``; back on the caller (as a
    :class:`RemoteFailure` or torch's text of it), it is raised as :func:`creation_error`
    names the failure."""

    def __init__(self, message: str, raised_as: str | None = None) -> None:
        super().__init__(message)
        self.raised_as = raised_as

    @classmethod
    def of(cls, failed: CreationFailure) -> NotCreated:
        return cls(f"{failed.error_type}: {failed.message}", failed.raised_as)


def remote_failure(error: BaseException) -> RemoteFailure:
    """``error`` as data for the caller (on the owner): its type name, message, traceback and
    the type the caller raises for it; for an error TorchScript raised, the type and message
    its text names (:func:`script_failure`)."""
    text = "".join(traceback.format_exception(error))
    scripted = script_failure(str(error))
    if scripted is not None:
        scripted.remote_traceback = text
        return scripted
    kind = error.raised_as if isinstance(error, NotCreated) else rpc_type(type(error)).__name__
    return RemoteFailure(type(error).__name__, _text(error), text, kind)


def script_failure(text: str) -> RemoteFailure | None:
    """The exception in the TorchScript interpreter's text of one (None for other text), as
    :func:`remote_failure` sends a Python one: its type name, message, the text as its
    traceback, and the type to raise (``runtime.script_errors`` reads the text)."""
    read = script_errors.read(text)
    if read is None:
        return None
    name, message, kind = read
    return RemoteFailure(name, message, text, None if kind is None else rpc_type(kind).__name__)


def rpc_type(kind: type[BaseException]) -> type[Exception]:
    """The type torch's RPC raises on the caller for a remote exception of type ``kind``:
    ``ValueError`` or ``TypeError`` for those two and their subclasses, ``RuntimeError`` for
    every other type and for one that cannot be built from its message alone (torch builds it
    so; ``UnicodeDecodeError`` cannot be). Checked for every builtin exception type and for
    subclasses, with ``rpc_sync`` and ``rpc_async().wait()``, on torch 2.6.0 and 2.13.0."""
    for rebuilt in (ValueError, TypeError):
        if issubclass(kind, rebuilt):
            try:
                kind("")
            except Exception:
                return RuntimeError
            return rebuilt
    return RuntimeError


def short(error: BaseException) -> str:
    """One line of why ``error`` happened, for a message listing several."""
    if owner_gone(error):
        return "gone: its connection closed"
    return str(error).split("\n", 1)[0][:200]


def _head(what: str, owner: str | int) -> str:
    """``RemoteModule.<method>`` (or the step, as given) ``on worker '<owner>' failed: ``."""
    qualified = f"RemoteModule.{what}" if what.isidentifier() else what
    return f"{qualified} on worker {owner!r} failed: "


def _unquoted(error_type: str, message: str) -> str:
    """A KeyError's ``str()`` quotes its argument; torch's text of a remote one, as every other
    route reads it, does not."""
    if error_type != "KeyError":
        return message
    try:
        value = ast.literal_eval(message)
    except (SyntaxError, ValueError):
        return message
    return value if isinstance(value, str) else message


def _raised_as(name: str, raised_as: str | None) -> type[Exception]:
    """The type to raise for a remote exception of type ``name``: ``raised_as`` where the
    owner said it, else :func:`rpc_type` of the builtin type of that name (RuntimeError for a
    name that is no builtin)."""
    kind = getattr(builtins, raised_as or name, None)
    if not (isinstance(kind, type) and issubclass(kind, BaseException)):
        return RuntimeError
    return rpc_type(kind)  # for raised_as, the type itself


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
    """The error ``module_cls`` raised on the owner, of the type torch's RPC gives it
    (:func:`rpc_type`), named once: the module's creator and the owner (a worker name, or a
    rank)."""
    kind = _raised_as(failed.error_type, failed.raised_as)
    where = worker_name(owner) if isinstance(owner, int) else owner
    return kind(
        f"RemoteModule: creating {creator or 'the module'} on worker '{where}' failed: "
        f"{failed.error_type}: {_unquoted(failed.error_type, failed.message)}"
    )


def creation_failure(error: BaseException) -> CreationFailure:
    """The failed creation's own error type and message, on the owner. torch keeps it as the
    text of a remote error, ``On WorkerInfo(...):`` then ``repr(error)`` then the traceback;
    where that text is not in this form, the whole of it."""
    remote = _remote_error(_text(error))
    if remote is not None:
        # The remote type is known here by name only (torch raises the error again as that
        # type on this worker; but as a RuntimeError where it could not).
        known = type(error).__name__ == remote[0]
        return CreationFailure(
            remote[0], remote[1], rpc_type(type(error)).__name__ if known else None
        )
    return CreationFailure(type(error).__name__, _text(error), rpc_type(type(error)).__name__)


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
