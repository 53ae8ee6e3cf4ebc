"""A module, its two interfaces and an owner-side helper for the ``wire_dtype`` tests
(importable on every worker)."""

from typing import Any, Protocol

import torch
import torch.distributed.autograd as dist_autograd
from torch import Tensor, nn


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
    module = module_rref.local_value()
    scale = module.scale if not isinstance(module, torch._C.ScriptModule) else None
    if scale is None:
        scale = torch.jit._recursive.wrap_cpp_module(module).scale
    return dist_autograd.get_gradients(context_id)[scale]
