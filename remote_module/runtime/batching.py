"""``remote_module.Batching``: concurrent calls of a RemoteModule's methods merged on its owner
(API.md, "Many callers: batching"), and how calls are merged and their results split.

The owner side is ``remote_module.runtime.owner.batches``; a RemoteModule built with
``batching=`` sends its batched methods' calls there (its route:
``remote_module.runtime.caller.route``). This module holds what both sides agree on: the
option itself, which calls may share a batch (:func:`signature`), and the merge and split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from remote_module.runtime import layouts

__all__ = ["Batching", "merge", "rows_of", "signature", "split"]


@dataclass(frozen=True)
class Batching:
    """Merge concurrent calls of ``methods`` on the owner: every tensor argument concatenated
    along dimension 0, the method run once, each call given back its own rows of every tensor
    of the result. A call that finds the module idle runs at once; calls that arrive while it
    runs form the next batch, of up to ``max_batch_size`` rows in all, which waits up to
    ``max_wait_ms`` after its first call for more.

    Example::

        >>> rm = RemoteModule("worker1/cpu", Scorer, args=(1024,),
        ...                   batching=Batching(max_batch_size=64, max_wait_ms=2.0))
    """

    max_batch_size: int
    max_wait_ms: float = 0.0
    methods: tuple[str, ...] = ("forward",)

    def __post_init__(self) -> None:
        size = self.max_batch_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"Batching max_batch_size must be an int >= 1 (rows), got {size!r}")
        wait = self.max_wait_ms
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
            raise ValueError(f"Batching max_wait_ms must be a number >= 0, got {wait!r}")
        methods = self.methods
        if isinstance(methods, str) or not all(isinstance(name, str) for name in methods):
            raise ValueError(f"Batching methods must be a tuple of method names, got {methods!r}")
        object.__setattr__(self, "methods", tuple(methods))


def signature(layout: Any, tensors: Sequence[torch.Tensor]) -> Any | None:
    """What a call must share with the others of its batch: its arguments' layout (their
    non-tensor values and structure) and each tensor's dtype, device, trailing shape and
    whether it wants a gradient; None where the call cannot be merged (a tensor without a
    dimension 0, or tensors whose first dimensions differ)."""
    if not tensors or any(tensor.dim() == 0 for tensor in tensors):
        return None
    if len({tensor.shape[0] for tensor in tensors}) != 1:
        return None
    metas = tuple(
        (tensor.dtype, tensor.device, tuple(tensor.shape[1:]), tensor.requires_grad)
        for tensor in tensors
    )
    return (layouts.encode(layout), metas)


def rows_of(tensors: Sequence[torch.Tensor]) -> int:
    """A mergeable call's rows (its tensors' common first dimension)."""
    return int(tensors[0].shape[0])


def merge(calls: Sequence[Sequence[torch.Tensor]]) -> list[torch.Tensor]:
    """The calls' tensors, each position concatenated along dimension 0 in call order."""
    return [torch.cat(column) for column in zip(*calls, strict=True)]


def split(method: str, result: Any, rows: Sequence[int]) -> list[Any]:
    """One result per call: each tensor of ``result`` split along dimension 0 by ``rows``
    (each call's rows copied out: a view would send the whole batch's storage over RPC), every
    other part given to each; a ``ValueError`` naming the method and the shape of a tensor
    whose dimension 0 is not the batch's."""
    total = sum(rows)
    _check(method, result, total)
    bounds, start = [], 0
    for count in rows:
        bounds.append((start, start + count))
        start += count
    return [_rows(result, first, last) for first, last in bounds]


def _check(method: str, value: Any, total: int) -> None:
    if isinstance(value, torch.Tensor):
        if value.dim() == 0 or value.shape[0] != total:
            raise ValueError(
                f"batching {method}: its result holds a tensor of shape {tuple(value.shape)}, "
                f"whose dimension 0 is not the batch's {total} rows; batching needs results "
                f"whose rows are the calls' rows (leave {method} out of Batching(methods=...))"
            )
    elif isinstance(value, (tuple, list)):
        for item in value:
            _check(method, item, total)
    elif isinstance(value, dict):
        for item in value.values():
            _check(method, item, total)


def _rows(value: Any, first: int, last: int) -> Any:
    if isinstance(value, torch.Tensor):
        return value[first:last].clone()
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_rows(item, first, last) for item in value))
    if isinstance(value, tuple):
        return tuple(_rows(item, first, last) for item in value)
    if isinstance(value, list):
        return [_rows(item, first, last) for item in value]
    if isinstance(value, dict):
        return {key: _rows(item, first, last) for key, item in value.items()}
    return value
