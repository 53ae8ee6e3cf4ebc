"""Laying out generated source as ``ruff format`` writes it: one call, ``def`` line, import or
comprehension at a time, on one line where it fits in :data:`LINE_LENGTH` characters, else
one item per line with a trailing comma. The views (``remote_module._generator.api``) give the
templates finished pieces laid out here, so the output is clean for a user's formatter as it
stands, without running one.

Example::

    >>> wrapped("return _rm.call", ["self", '"forward"', "_remote_forward"], indent=4)
    '    return _rm.call(self, "forward", _remote_forward)'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["LINE_LENGTH", "Expr", "ImportLine", "define", "wrapped", "wrapped_comprehension"]

# ruff format's default line length: the output is clean for a user's formatter as it stands.
LINE_LENGTH = 88


class ImportLine(NamedTuple):
    """``from module import names``; names sorted as linters sort them (classes, then the rest)."""

    module: str
    names: tuple[str, ...]

    @property
    def text(self) -> str:
        """The import, on one line where it fits, else one name per line."""
        line = f"from {self.module} import {', '.join(self.names)}"
        if len(line) <= LINE_LENGTH:
            return line
        return wrapped(f"from {self.module} import ", self.names)


class Expr(NamedTuple):
    """A call of ``callee`` with ``args`` (strings, or calls themselves), or (``callee``
    empty) the expression ``args[0]`` as it is: a value a walker leaves alone."""

    callee: str
    args: tuple[str | Expr, ...]

    def __str__(self) -> str:
        if not self.callee:
            return str(self.args[0])
        return f"{self.callee}({', '.join(map(str, self.args))})"

    def line(self, indent: int = 0, lead: str = "", tail: str = "") -> str:
        """The expression after ``lead`` (``"return "``, ``"x = "``), wrapped."""
        if not self.callee:
            return f"{' ' * indent}{lead}{self.args[0]}{tail}"
        return wrapped(self.callee, self.args, tail, indent, lead=lead)


def wrapped(
    head: str,
    items: Sequence[str | Expr],
    tail: str = "",
    indent: int = 0,
    *,
    lead: str = "",
    tuple_: bool = False,
    brackets: str = "()",
) -> str:
    """``head(items)tail`` at ``indent``, on one line where it fits in :data:`LINE_LENGTH`
    characters, else one item per line with a trailing comma, as ``ruff format`` writes it
    (an item that is a call, :class:`Expr`, wrapped the same way on its own lines where it
    does not fit on one). ``lead`` goes before ``head`` (``"return "``); ``tuple_``: the
    brackets make a tuple, so one item takes a trailing comma.

    Example::

        >>> wrapped("x = ", ["a"], tuple_=True)
        'x = (a,)'
    """
    pad = " " * indent
    head = f"{lead}{head}"
    opening, closing = brackets[0], brackets[1]
    joined = ", ".join(map(str, items)) + ("," if tuple_ and len(items) == 1 else "")
    line = f"{pad}{head}{opening}{joined}{closing}{tail}"
    if len(line) <= LINE_LENGTH or not items:
        return line
    inner = "".join(
        f"{item.line(indent + 4, tail=',')}\n" if isinstance(item, Expr) else f"{pad}    {item},\n"
        for item in items
    )
    return f"{pad}{head}{opening}\n{inner}{pad}{closing}{tail}"


def wrapped_comprehension(
    lead: str, brackets: str, element: str, clause: str, indent: int = 0
) -> str:
    """``lead[element clause]`` as ``ruff format`` lays out a comprehension: on one line where
    it fits, else its body on a line of its own inside the brackets, else the element and the
    ``for`` clause on a line each."""
    pad = " " * indent
    opening, closing = brackets[0], brackets[1]
    line = f"{pad}{lead}{opening}{element} {clause}{closing}"
    if len(line) <= LINE_LENGTH:
        return line
    body = f"{pad}    {element} {clause}"
    if len(body) <= LINE_LENGTH:
        return f"{pad}{lead}{opening}\n{body}\n{pad}{closing}"
    return f"{pad}{lead}{opening}\n{pad}    {element}\n{pad}    {clause}\n{pad}{closing}"


def define(name: str, params: Sequence[str], returns: str, indent: int = 0, body: str = "") -> str:
    """A ``def`` line (``body``: what follows the colon on the same line, e.g. `` ...``)."""
    return wrapped(f"def {name}", params, f" -> {returns}:{body}", indent)
