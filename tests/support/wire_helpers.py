"""A module, its two interfaces and an owner-side helper for the ``wire_dtype`` tests
(importable on every worker)."""

from typing import Any, Protocol

import torch
import torch.distributed.autograd as dist_autograd
from torch import Tensor, nn

from remote_module.runtime.owner.creation import local_module


@torch.jit.interface
class PrecisionInterface:
    def forward(
        self, x: Tensor, ids: Tensor, extra: list[Tensor]
    ) -> tuple[Tensor, Tensor, list[Tensor], list[int]]:
        pass


class PrecisionProtocol(Protocol):
    def forward(
        self, x: Tensor, ids: Tensor, extra: list[Tensor]
    ) -> tuple[Tensor, Tensor, list[Tensor], list[int]]: ...


class Precision(nn.Module):
    """Scales ``x`` (a parameter, for gradients), increments ``ids``, returns ``extra`` as
    float64, and reports the element size of every tensor the module itself received (bytes:
    a float32 arriving as bfloat16 would report 2, not 4)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.5))

    def forward(
        self, x: Tensor, ids: Tensor, extra: list[Tensor]
    ) -> tuple[Tensor, Tensor, list[Tensor], list[int]]:
        seen = [x.element_size(), ids.element_size()]
        for item in extra:
            seen.append(item.element_size())
        return x * self.scale, ids + 1, [item.double() for item in extra], seen


class PrecisionAnything(nn.Module):
    """The same without an interface, over ``*args``."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.5))

    def forward(self, x: Tensor, ids: Tensor, extra: Any = None) -> Any:
        items = extra or []
        seen = [x.element_size(), ids.element_size()] + [item.element_size() for item in items]
        doubled = [item.double() for item in items]
        return {"x": x * self.scale, "ids": ids + 1, "extra": doubled}, seen


def scale_grad(module_rref: Any, context_id: int) -> Tensor:
    return dist_autograd.get_gradients(context_id)[local_module(module_rref).scale]


# --- For the int8 wire (tests/test_wire_int8.py) ---------------------------------------------


@torch.jit.interface
class TensorInterface:
    """One tensor in, one out: :class:`Keeper` and :class:`Affine` both match it."""

    def forward(self, x: Tensor) -> Tensor:
        pass


class TensorProtocol(Protocol):
    def forward(self, x: Tensor) -> Tensor: ...


class Keeper(nn.Module):
    """Keeps the tensor it received as it arrived (see :func:`kept`) and returns it."""

    def __init__(self) -> None:
        super().__init__()
        self.kept = torch.empty(0)

    def forward(self, x: Tensor) -> Tensor:
        self.kept = x.detach().clone()
        return x


class KeeperAnything(nn.Module):
    """Returns whatever it received (nested values included), and keeps nothing."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return args, kwargs


def kept(module_rref: Any) -> Tensor:
    """What a :class:`Keeper` (scripted or not) received last, exactly (fetched without a
    wire dtype)."""
    return local_module(module_rref).kept


class Affine(nn.Module):
    """A seeded ``nn.Linear(32, 48)`` with a tanh, for gradients against local ones."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(7)
        self.linear = nn.Linear(32, 48)

    def forward(self, x: Tensor) -> Tensor:
        return torch.tanh(self.linear(x))


def weight_grad(module_rref: Any, context_id: int) -> Tensor:
    """The gradient of an :class:`Affine`'s weight in the distributed autograd context."""
    return dist_autograd.get_gradients(context_id)[local_module(module_rref).linear.weight]


def spy_on_sends(monkeypatch: Any) -> list[tuple[Any, ...]]:
    """The argument tuples every call sends from now on, by either send path (a test's
    ``monkeypatch`` undoes the spies). ``contract`` binds torch's own rpc_async for
    TorchScript before the spy replaces the Python one."""
    from remote_module import _compat
    from remote_module.runtime import contract
    from remote_module.runtime.caller import calls

    assert contract.rpc_async.__name__ == "rpc_async"
    seen: list[tuple[Any, ...]] = []
    rpc_async, invoke = calls.rpc.rpc_async, _compat.invoke_rpc_torchscript

    def spy_python(to: Any, func: Any, args: tuple[Any, ...], *rest: Any, **kwargs: Any) -> Any:
        seen.append(args)
        return rpc_async(to, func, args, *rest, **kwargs)

    def spy_script(to: Any, name: str, args: tuple[Any, ...], *rest: Any) -> Any:
        seen.append(args)
        return invoke(to, name, args, *rest)

    monkeypatch.setattr(calls.rpc, "rpc_async", spy_python)
    monkeypatch.setattr(_compat, "invoke_rpc_torchscript", spy_script)
    return seen


def tensors_in(value: Any) -> list[Tensor]:
    """Every tensor inside ``value`` (lists, tuples, NamedTuples, dicts), in order."""
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_in(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensors_in(item)]
    return []
