"""Modules, interfaces and functions the runtime tests send to workers (importable, no side
effects on import)."""

import time
from typing import Any, NamedTuple, Optional

import torch
from torch import Tensor, nn

from remote_module.runtime.owner.creation import local_module
from tests.support.interfaces import Pair


@torch.jit.interface
class SleepyInterface:
    def forward(self, x: Tensor) -> Tensor:
        pass

    def nap(self, seconds: float) -> float:
        pass


@torch.jit.ignore
def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


class Sleepy(nn.Module):
    """``forward`` sleeps ``delay`` seconds, then returns ``x + 1``."""

    def __init__(self, delay: float = 3.0) -> None:
        super().__init__()
        self.delay = delay

    def forward(self, x: Tensor) -> Tensor:
        _sleep(self.delay)
        return x + 1

    @torch.jit.export
    def nap(self, seconds: float) -> float:
        return _sleep(seconds)


@torch.jit.interface
class DeviceReportInterface:
    def forward(self, x: Tensor, many: list[Tensor], named: dict[str, Tensor]) -> list[str]:
        pass


class DeviceReport(nn.Module):
    """Returns the device type of every tensor it receives (no tensor comes back)."""

    def forward(self, x: Tensor, many: list[Tensor], named: dict[str, Tensor]) -> list[str]:
        types = [x.device.type]
        for item in many:
            types.append(item.device.type)
        for key in sorted(named.keys()):
            types.append(named[key].device.type)
        return types


class AnyDeviceReport(nn.Module):
    """Non-scriptable: the device types of every tensor in an arbitrarily nested value."""

    def forward(self, *args: Any, **kwargs: Any) -> list[str]:
        found: list[str] = []
        _collect_devices((args, kwargs), found)
        return found


def _collect_devices(value: Any, found: list[str]) -> None:
    if isinstance(value, Tensor):
        found.append(value.device.type)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect_devices(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _collect_devices(item, found)


class ShapesModule(nn.Module):
    def forward(
        self,
        x: Tensor,
        maybe: Tensor | None = None,
        many: list[Tensor] = (),
        named: dict[str, Tensor] = (),
    ) -> tuple[Tensor, list[Tensor], dict[str, Tensor]]:
        extra = x if maybe is None else maybe
        return x + extra, [item * 2 for item in many], {k: v + 1 for k, v in named.items()}

    @torch.jit.export
    def pair(self, x: Tensor) -> Pair:
        return Pair(x * 3, 7)


class Nested(nn.Module):
    """Non-scriptable: returns a tensor, a tuple, a list and a dict built from ``x``."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, x: Tensor) -> Any:
        y = x * self.scale
        return {"tensor": y, "tuple": (y, y + 1), "list": [y, [y * 2]], "dict": {"a": y}}


class Point(NamedTuple):
    x: Tensor
    label: str


def not_a_module(value: int = 3) -> int:
    """A ``module_cls`` that returns an int."""
    return value


def training_flag(module_rref: Any) -> bool:
    """On the owner: the module's ``training`` flag."""
    module = local_module(module_rref)
    return bool(module.training)


def call_remote_module(remote_module: Any, x: Tensor) -> Tensor:
    """On a receiver: ``remote_module(x)``."""
    return remote_module(x)


def describe_received(remote_module: Any) -> dict[str, Any]:
    """On a receiver: what arrived, as plain values."""
    return {
        "type": type(remote_module).__name__,
        "attributes": sorted(vars(remote_module)),
        "keys": list(vars(remote_module)),
        "timeout": remote_module.timeout,
        "wire_dtype": str(remote_module.wire_dtype),
        "on": remote_module.on,
        "device": remote_module.device,
        "is_device_map_set": remote_module.is_device_map_set,
        "is_scriptable": remote_module.is_scriptable,
        "methods": [method.__name__ for method in remote_module.generated_methods],
        "bound": sorted(
            method.__name__
            for method in remote_module.generated_methods
            if callable(vars(remote_module).get(method.__name__))
        ),
        "owner": remote_module.get_module_rref().owner_name(),
        "repr": repr(remote_module),
    }


def rebuild_and_call(
    remote_device: str, module_rref: Any, interface_cls: Any, x: Tensor
) -> tuple[Tensor, str]:
    """On a receiver: ``init_from_module_rref`` then call it."""
    from remote_module import RemoteModule

    remote_module = RemoteModule.init_from_module_rref(
        remote_device, module_rref, module_interface_cls=interface_cls
    )
    return remote_module(x), repr(remote_module)


def identity(value: Any) -> Any:
    return value


class Scored(NamedTuple):
    value: Tensor
    score: float


@torch.jit.interface
class ScoredInterface:
    def forward(self, x: Tensor) -> Scored:
        pass

    def total(self, x: Tensor, extra: Optional[Tensor] = None, bonus: float = 0.5) -> float:
        pass


class ScoredModule(nn.Module):
    def forward(self, x: Tensor) -> Scored:
        return Scored(x * 2, 1.5)

    @torch.jit.export
    def total(self, x: Tensor, extra: Optional[Tensor] = None, bonus: float = 0.5) -> float:
        result = float(x.sum().item()) + bonus
        if extra is not None:
            result += float(extra.sum().item())
        return result


def make_linear(in_features: int, out_features: int) -> nn.Linear:
    """A ``module_cls`` that is a function, not a class."""
    return nn.Linear(in_features, out_features)


def owner_state_dict(module_rref: Any) -> dict[str, Tensor]:
    """On the owner: the module's own state dict (cloned)."""
    module = local_module(module_rref)
    return {key: value.detach().clone() for key, value in module.state_dict().items()}


def owner_state_devices(module_rref: Any) -> dict[str, str]:
    """On the owner: the device type of each state-dict entry (strings: no CUDA tensor has to
    travel back, which TensorPipe refuses without a device map)."""
    module = local_module(module_rref)
    return {key: value.device.type for key, value in module.state_dict().items()}


@torch.jit.script
class Box:
    """A TorchScript class an interface names."""

    def __init__(self, value: Tensor, label: str) -> None:
        self.value = value
        self.label = label


@torch.jit.interface
class BoxInterface:
    def forward(self, x: Tensor) -> Tensor:
        pass

    def boxed(self, x: Tensor, label: str = "box") -> Box:
        pass

    def unbox(self, box: Box) -> Tensor:
        pass


class BoxModule(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x + 1

    @torch.jit.export
    def boxed(self, x: Tensor, label: str = "box") -> Box:
        return Box(x * 2, label)

    @torch.jit.export
    def unbox(self, box: Box) -> Tensor:
        return box.value + 1


class AppliedFlag(nn.Module):
    """Records on the owner whether its ``_apply`` (what ``.to()`` runs) was called."""

    def __init__(self) -> None:
        super().__init__()
        self.applied = False

    def _apply(self, fn: Any, recurse: bool = True) -> "AppliedFlag":
        self.applied = True
        return super()._apply(fn, recurse)

    def forward(self, x: Tensor) -> Tensor:
        return torch.full_like(x, float(self.applied))


def imported(module_name: str) -> bool:
    """On a worker: whether ``module_name`` has been imported there."""
    import sys

    return module_name in sys.modules


class Refuses(nn.Module):
    """``forward`` raises a ValueError on the owner (a module's own error, not an RPC's)."""

    def forward(self, x: Tensor) -> Tensor:
        raise ValueError(f"refused a tensor of shape {tuple(x.shape)}")


class QuotesBoth(nn.Module):
    """Its constructor raises a message holding both kinds of quote, as torch's own argument
    errors do (``argument 'size' ... with error "type must be ..."``)."""

    def __init__(self) -> None:
        super().__init__()
        raise TypeError("""argument 'size' failed with error "type must be tuple of ints\"""")


class SeveralLines(nn.Module):
    """Its constructor raises a message of several lines, as torch 2.6's ``torch.empty`` words
    an argument error, and ``forward`` raises one too."""

    def __init__(self) -> None:
        super().__init__()
        raise TypeError("first line, but expected one of:\n * (int size)\n * (tuple size)")


class SeveralLinesForward(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        raise ValueError("bad input:\n  x is 'wrong'\n  and \"very\" wrong")


class MissingKey(nn.Module):
    """``forward`` raises a KeyError on the owner (whose ``str()`` quotes its argument)."""

    def forward(self, x: Tensor) -> Tensor:
        raise KeyError("no entry for this batch")
