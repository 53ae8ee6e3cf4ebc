"""Reading the TorchScript interpreter's text of an exception: the type name and message of
what a scripted module raised, where no Python ran to catch it (a call sent by name runs a
compiled function on the owner, and TorchScript has no ``try``). ``errors.script_failure``
turns it into what the owner sends for a Python exception.

The text, as torch 2.6 to 2.15 write it: ``The following operation failed in the TorchScript
interpreter.``, a traceback whose every frame is a ``File`` line and the source around the
failing expression (underlined, the last line marked ``<--- HERE``, then up to two lines of
the same function: indented, or empty), then ``<type>: <message>`` to the end. The type is the
raised class's qualified name (``builtins.ValueError``, ``mypackage.MyError``), or
``RuntimeError`` where an operator, an ``assert`` or a Python function that TorchScript called
failed; then the message starts with the Python type's name where there is one
(``RuntimeError: AssertionError: ...``), and a Python function's frames follow it (``At:``).
A message of several lines spans them. A nested text (a scripted call that failed on another
worker, inside TorchScript here) is read at its innermost failure.
"""

from __future__ import annotations

import builtins
import functools
import re
import sys

__all__ = ["read"]

HEAD = "The following operation failed in the TorchScript interpreter."


def read(text: str) -> tuple[str, str, type[BaseException] | None] | None:
    """The exception in ``text``: its type's name, its message and its class where this
    process has it; None where ``text`` is no TorchScript interpreter's text of one."""
    if not text.startswith(HEAD):
        return None
    here = text.rfind("<--- HERE\n")
    if here < 0:
        return None
    lines = text[here:].split("\n")[1:]
    start = 0
    while start < len(lines) and (not lines[start] or lines[start][0].isspace()):
        start += 1  # the failing function's source after the mark
    # (A nested text ends in a line break of its own per level.)
    raised = _python_frames().sub("", "\n".join(lines[start:]).rstrip("\n"))
    named = re.match(r"([A-Za-z_][\w.]*): ?", raised)
    if named is None:
        return None
    qualified, message = named[1], raised[named.end() :]
    python = re.match(r"([A-Za-z_]\w*): ?", message)
    if qualified == "RuntimeError" and python is not None and _builtin(python[1]) is not None:
        qualified, message = python[1], message[python.end() :]
    return qualified.rpartition(".")[2], message, _class(qualified)


# Compiled on first use (an error), not at import: every program imports this module.
@functools.cache
def _python_frames() -> re.Pattern[str]:
    """The frames of a Python function that TorchScript called, after its error's message."""
    return re.compile(r"\n+At:\n(?:  [^\n]*(?:\n|$))*$")


def _class(qualified: str) -> type[BaseException] | None:
    """The exception class a TorchScript ``raise`` named, where this process has it: a builtin,
    or a class of a module already imported here (nothing is imported for it)."""
    module, _, name = qualified.rpartition(".")
    if module in ("", "builtins"):
        return _builtin(name)
    parts = qualified.split(".")
    for cut in range(len(parts) - 1, 0, -1):  # a class nested in another: the longest module
        found: object = sys.modules.get(".".join(parts[:cut]))
        if found is not None:
            for part in parts[cut:]:
                found = getattr(found, part, None)
            return _exception(found)
    return None


def _builtin(name: str) -> type[BaseException] | None:
    return _exception(getattr(builtins, name, None))


def _exception(kind: object) -> type[BaseException] | None:
    return kind if isinstance(kind, type) and issubclass(kind, BaseException) else None
