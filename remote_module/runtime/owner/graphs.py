"""What an owner does for the compiled route (``remote_module.runtime.caller.ops``): files a
module under the key graphs name it by, with what rebuilds a RemoteModule over it in another
process of the group (an exported program loaded there), and runs a method on fake arguments
where a caller's trace cannot find the result's shapes itself. The functions messages name are
``owner.name_for_graphs``, ``owner.describe_for_graphs`` and ``owner.fake_run``."""

from __future__ import annotations

import weakref
from typing import Any

import torch
import torch.distributed.rpc as rpc
from torch import nn

from remote_module import _compat
from remote_module.runtime import layouts
from remote_module.runtime.errors import RemoteFailure
from remote_module.runtime.owner import table
from remote_module.runtime.owner.creation import owned_rref, owned_value
from remote_module.runtime.owner.state import STATE

__all__ = ["describe", "fake_run", "name", "reference"]


def name(
    module_rref: rpc.RRef[Any], description: Any, interface_cls: Any, scripted: bool
) -> tuple[int, rpc.RRef[table.Keeper] | None]:
    """File the module under a key (``"<this worker>/<key>"`` in a graph), with
    ``description``: an eager module weakly (the entry lives as long as the module), a
    scripted one while the keeper this returns lives (None: no keeper)."""
    module = owned_value(module_rref)
    key = None if _compat.is_cpp_script_module(module) else table.file(module)
    keeper = None
    if key is None:
        key, keeper = table.file_keyed(module)
    else:
        weakref.finalize(module, STATE.graphs.pop, key, None)
    STATE.graphs[key] = (description, interface_cls, scripted)
    return key, keeper


def describe(key: int) -> Any:
    """The description of the module filed under ``key`` by :func:`name`; a
    :class:`RemoteFailure` once it is gone."""
    found = _filed(key)
    return found if isinstance(found, RemoteFailure) else found[1][0]


def reference(key: int) -> rpc.RRef[Any] | RemoteFailure:
    """An RRef to the module filed under ``key`` (typed as its interface where it is
    scripted: the asker compiled the interface first, from the description)."""
    found = _filed(key)
    if isinstance(found, RemoteFailure):
        return found
    module, (_, interface_cls, scripted) = found
    if _compat.is_cpp_script_module(module):
        module = _compat.wrap_cpp_module(module)
    return owned_rref(module, interface_cls, scripted, "for a graph")


def _filed(key: int) -> tuple[Any, tuple[Any, Any, bool]] | RemoteFailure:
    entry = STATE.graphs.get(key)
    module = STATE.modules.get(key) if entry is not None else None
    if entry is not None and module is None:
        module = STATE.held.get(key)
    if entry is None or module is None:
        return RemoteFailure(
            "RuntimeError",
            f"no RemoteModule has id {key} on this worker any more (its module was freed)",
            "",
        )
    return module, entry


def fake_run(
    module: nn.Module,
    method: str,
    layout: str,
    metas: tuple[Any, ...],
    numbers: tuple[Any, Any] = ((), ()),
) -> tuple[str, list[tuple[tuple[int, ...], str]]]:
    """``method`` of ``module`` run on fake arguments of these shapes and dtypes (``layout``
    and ``metas``, as ``remote_module.runtime.layouts`` writes them): the result's layout and
    the shapes and dtypes of its tensors."""
    with _compat.fake_mode():
        tensors = [
            torch.empty(shape, dtype=getattr(torch, dtype.removeprefix("torch.")))
            for shape, dtype in metas
        ]
        args, kwargs = layouts.arguments(layout, tensors, numbers)
        result = getattr(module, method)(*args, **kwargs)
        found: list[torch.Tensor] = []
        tree = layouts.encode(layouts.result_skeleton(result, found))
    return tree, [(tuple(int(size) for size in t.shape), str(t.dtype)) for t in found]
