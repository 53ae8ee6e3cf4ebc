"""A remote call's result as fake tensors, for tracing: its shapes and dtypes, without running
the module for real (what ``remote_module::call``'s fake kernel returns).

In order:

1. ``RemoteModule(..., fake=fn)``: ``fn(method, *args, **kwargs)``, given fake tensors;
2. a twin of the module on the meta device, built here from ``module_cls`` and its arguments
   where this process constructed the RemoteModule, run with the trace's own fake tensors in
   place of its parameters and buffers (symbolic shapes stay symbolic);
3. the owner's answer for arguments of the same shapes and dtypes (its module run on fake
   tensors there), asked once for each and cached: concrete shapes, so a symbolic size is
   made concrete (torch then guards on it).

When none of them can say, tracing raises a ``RuntimeError`` naming the method and ``fake=``.
"""

from __future__ import annotations

import threading
from typing import Any

import torch
import torch.distributed.rpc as rpc
from torch import nn

from remote_module import _compat
from remote_module.runtime import layouts, owner
from remote_module.runtime.errors import RemoteFailure

__all__ = ["fake_result"]

_lock = threading.Lock()


def fake_result(remote_module: Any, method: str, args: tuple[Any, ...], kwargs: Any) -> Any:
    """``method``'s result for fake ``args`` and ``kwargs``, in fake tensors."""
    record = remote_module._rm_record
    if record.fake is not None:
        return record.fake(method, *args, **kwargs)
    reasons: list[str] = []
    twin = _twin(remote_module, reasons)
    if twin is not None:
        try:
            return _run_twin(twin, method, args, kwargs)
        except Exception as error:  # a module whose code needs real values, say
            reasons.append(f"its meta twin failed: {type(error).__name__}: {error}")
    try:
        return _asked(remote_module, method, args, kwargs)
    except Exception as error:
        reasons.append(f"its owner could not say: {type(error).__name__}: {error}")
    raise RuntimeError(
        f"RemoteModule.{method}: tracing needs the shapes and dtypes of its result, and they "
        f"could not be found ({'; '.join(reasons)}). Give them with RemoteModule(..., "
        "fake=fn), where fn(method_name, *args, **kwargs) returns the result for fake "
        "arguments, as a torch.library.register_fake function does"
    )


class _Method(nn.Module):
    """A module whose ``forward`` is ``method`` of the twin (``functional_call`` calls
    ``forward``)."""

    def __init__(self, twin: nn.Module, method: str) -> None:
        super().__init__()
        self.twin = twin
        self.method = method

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.twin, self.method)(*args, **kwargs)


def _twin(remote_module: Any, reasons: list[str]) -> nn.Module | None:
    """The module on the meta device, built once from the recipe this process has."""
    record = remote_module._rm_record
    with _lock:
        if record.twin is not None or record.twin_recipe is None:
            return record.twin
        module_cls, args, kwargs = record.twin_recipe
        try:
            with _compat.outside_fake_mode(), torch.device("meta"):
                twin = module_cls(*args, **kwargs)
            if not isinstance(twin, nn.Module):
                raise TypeError(f"module_cls returned {type(twin).__name__}")
        except Exception as error:
            reasons.append(f"it could not be built on the meta device: {error}")
            record.twin_recipe = None  # not again
            return None
        record.twin = twin
        return twin


def _run_twin(twin: nn.Module, method: str, args: tuple[Any, ...], kwargs: Any) -> Any:
    """``method`` of the twin with the trace's fake tensors as its state."""
    state = {
        f"twin.{name}": torch.empty(value.shape, dtype=value.dtype)
        for name, value in (*twin.named_parameters(), *twin.named_buffers())
    }
    with _lock:  # functional_call swaps the twin's state for the call
        return torch.func.functional_call(_Method(twin, method), state, args, kwargs)


def _asked(remote_module: Any, method: str, args: tuple[Any, ...], kwargs: Any) -> Any:
    """The owner's answer for arguments of these shapes and dtypes (cached)."""
    record = remote_module._rm_record
    tensors: list[torch.Tensor] = []
    ints: list[Any] = []
    floats: list[Any] = []
    layout = layouts.encode(layouts.skeleton((args, dict(kwargs or {})), tensors, (ints, floats)))
    # Concrete sizes and numbers (a symbolic one made concrete: torch then guards on it).
    metas = tuple((tuple(int(size) for size in t.shape), str(t.dtype)) for t in tensors)
    numbers = (tuple(int(n) for n in ints), tuple(float(n) for n in floats))
    asked = (method, layout, metas, numbers)
    with _lock:
        answer = record.fake_answers.get(asked)
    if answer is None:
        module_rref = remote_module.module_rref
        answer = rpc.rpc_sync(
            module_rref.owner(),
            owner.fake_run,
            (module_rref, method, layout, metas, numbers),
            timeout=remote_module.timeout,
        )
        if isinstance(answer, RemoteFailure):
            raise answer.error(method, module_rref.owner_name())
        with _lock:
            record.fake_answers[asked] = answer
    tree, result_metas = answer
    results = [
        torch.empty(shape, dtype=getattr(torch, dtype.removeprefix("torch.")))
        for shape, dtype in result_metas
    ]
    return layouts.fake_rebuild(layouts.decode(tree), results)
