"""The compiled route: a call of a generated method, while torch compiles or exports, as one
op of the graph (``torch.ops.remote_module.call``; ``remote_module.runtime.caller.ops``).

What torch traces here (Dynamo symbolically, ``torch.export``'s non-strict mode for real with
fake tensors) is :func:`call`: it names the RemoteModule by its key (:func:`key_of`, resolved
once, outside the graph), flattens the arguments to what an op's schema carries (the tensors,
and a *layout*: the rest, as one string), calls the op, and rebuilds the result from the op's
tensors and the result's layout that the op's fake kernel found. Both layouts are worked out
by functions torch runs once per trace and keeps as constants
(``torch.compiler.assume_constant_result``'s mark): the graph holds the op and nothing of ours.

Layouts are ``remote_module.runtime.layouts``'. A result's non-tensor leaves are
constants of the graph: what a method returns besides tensors must not depend on the values
of its arguments (the same rule as a traced graph's control flow).

An ``_async`` method under torch.compile is a graph break (a Future is no tensor): torch runs
the call eagerly (:func:`call_async`).
"""

from __future__ import annotations

from typing import Any

import torch

from remote_module import _compat
from remote_module.runtime import layouts
from remote_module.runtime.caller import ops

__all__ = ["call", "call_async", "key_of"]

# The op's anchor (ops), shared by every call: its gradient is zeros, so its .grad (outside
# distributed autograd) stays zeros.
_ANCHOR = torch.zeros((), requires_grad=True)


def call(remote_module: Any, method: str, args: tuple[Any, ...], kwargs: Any) -> Any:
    """``remote_module.<method>(*args, **kwargs)`` as one op of the graph being traced."""
    key = key_of(remote_module._rm_record.local_id)
    tensors: list[torch.Tensor] = []
    ints: list[Any] = []
    floats: list[Any] = []
    layout = _encoded(layouts.skeleton((args, dict(kwargs or {})), tensors, (ints, floats)))
    grad = torch.is_grad_enabled()
    wants = [grad and tensor.requires_grad for tensor in tensors]
    # A remote first layer: no argument wants a gradient, the owner's parameters may (ops).
    # Not in an exported program (torch.export refuses a global tensor): it does not train.
    anchor = _ANCHOR if grad and not any(wants) and not _compat.exporting() else None
    flat = torch.ops.remote_module.call(key, method, layout, tensors, ints, floats, wants, anchor)
    return layouts.rebuild(_result_layout(key, method, layout), flat)


def call_async(remote_module: Any, eager: Any, *args: Any) -> Any:
    """An ``_async`` call under torch.compile: a graph break, the call made eagerly."""
    return torch.compiler.disable(eager)(remote_module, *args)


@_compat.constant_result
def key_of(local_id: str) -> str:
    """The key a graph names the RemoteModule of this process by (``ops.key_of``)."""
    return ops.key_of(local_id)


@_compat.constant_result
def _encoded(skeleton: Any) -> str:
    return layouts.encode(skeleton)


@_compat.constant_result
def _result_layout(key: str, method: str, layout: str) -> Any:
    """The result's layout, as the op's fake kernel (or its first real run) found it."""
    return ops.result_layout(key, method, layout)
