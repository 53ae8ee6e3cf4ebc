"""Models for ``tests/test_compile.py`` and ``tests/test_export.py``: local layers around a
RemoteModule, as a hybrid model holds one, and modules whose calls carry nested values
(importable on every worker)."""

import typing
from typing import NamedTuple, Protocol

import torch
from torch import Tensor, nn

import remote_module


class Affine(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(x)


class AffineProtocol(Protocol):
    def forward(self, x: Tensor) -> Tensor: ...


class Hybrid(nn.Module):
    """``local`` on this worker, ``remote`` on another; ``calls`` remote calls per forward."""

    def __init__(self, remote: nn.Module, calls: int = 1) -> None:
        super().__init__()
        self.local = nn.Linear(4, 4)
        self.remote = remote
        self.calls = calls

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.local(x).relu()
        out = self.remote(hidden)
        if self.calls == 2:
            out = out + self.remote(hidden * 2)
        return out.tanh()


class Parts(NamedTuple):
    total: Tensor
    pieces: typing.List[Tensor]  # (the typing spellings: TorchScript reads these fields)
    named: typing.Dict[str, Tensor]


@remote_module.interface  # torch.jit.interface where TorchScript is (test_without_torchscript)
class NestedInterface:
    def forward(
        self,
        x: Tensor,
        pair: tuple[Tensor, Tensor],
        table: dict[str, Tensor],
        scale: float = 1.0,
        tag: str = "a",
        flip: bool = False,
        maybe: Tensor | None = None,
    ) -> Parts:
        pass

    def project(self, x: Tensor) -> tuple[Tensor, Tensor]:
        pass

    def norm(self) -> Tensor:
        pass


class NestedProtocol(Protocol):
    def forward(
        self,
        x: Tensor,
        pair: tuple[Tensor, Tensor],
        table: dict[str, Tensor],
        scale: float = 1.0,
        tag: str = "a",
        flip: bool = False,
        maybe: Tensor | None = None,
    ) -> Parts: ...

    def project(self, x: Tensor) -> tuple[Tensor, Tensor]: ...

    def norm(self) -> Tensor: ...


class Nested(nn.Module):
    """A module whose methods take and return nested values of every kind."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(
        self,
        x: Tensor,
        pair: tuple[Tensor, Tensor],
        table: dict[str, Tensor],
        scale: float = 1.0,
        tag: str = "a",
        flip: bool = False,
        maybe: Tensor | None = None,
    ) -> Parts:
        y = self.linear(x) * scale
        if flip:
            y = -y
        if maybe is not None:
            y = y + maybe
        pieces = [y + pair[0], y * pair[1]]
        named = {tag: y.sum(dim=1)}
        for key, value in table.items():
            named[key] = value * 2.0
        return Parts(y.sum(), pieces, named)

    @torch.jit.export
    def project(self, x: Tensor) -> tuple[Tensor, Tensor]:
        y = self.linear(x)
        return y[:, :2], y[:, 2:]

    @torch.jit.export
    def norm(self) -> Tensor:
        return self.linear.weight.norm()


class MetaShy(nn.Module):
    """A module that cannot be built on the meta device (it reads its weight's values): its
    result's shapes come from the owner."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 5)
        self.scale = float(self.linear.weight.abs().sum().item()) + 1.0

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(x) / self.scale


class Labelled(nn.Module):
    """Its result holds a Python int that depends on the values: no twin or fake run can say it
    (the label), so tracing needs fake=."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x: Tensor) -> tuple[Tensor, int]:
        scores = self.linear(x)
        return scores, int(scores.sum(dim=0).argmax())


def labelled_fake(method: str, x: Tensor) -> tuple[Tensor, int]:
    """``fake=`` for :class:`Labelled`: its result for fake arguments."""
    return x.new_empty((x.shape[0], 3)), 0


def run_saved_program(path: str, x: Tensor) -> Tensor:
    """On another worker of the group: load a saved exported program and run it there."""
    import remote_module  # noqa: F401  (registers the op the program names)

    program = torch.export.load(path)
    return typing.cast(Tensor, program.module()(x))


def graph_filed(key: int) -> bool:
    """On an owner: whether a module is still filed for graphs under ``key``."""
    from remote_module.runtime.owner.state import STATE

    return key in STATE.graphs
