"""Functions the typed-results tests run on other workers (importable everywhere)."""

from typing import Any

from torch import Tensor, nn

from remote_module import RemoteModule
from tests.scorer.model import Scored


def describe(remote_module: RemoteModule, x: Tensor) -> tuple[str, str, bool, Any]:
    """On a receiver: the class it got, the result's class, whether it kept its fields."""
    result = remote_module.forward(x)
    return type(remote_module).__name__, type(result).__name__, hasattr(result, "score"), result


class ForwardsScores(nn.Module):
    """A scripted model that returns a RemoteModule's NamedTuple result as it is."""

    def __init__(self, remote: nn.Module) -> None:
        super().__init__()
        self.remote = remote

    def forward(self, x: Tensor) -> Scored:
        return self.remote.forward(x, scale=2.0)


class AwaitsScores(nn.Module):
    """A scripted model that waits for the ``_async`` twin inside TorchScript."""

    def __init__(self, remote: nn.Module) -> None:
        super().__init__()
        self.remote = remote

    def forward(self, x: Tensor) -> list[Scored]:
        return self.remote.top_async(x, 1).wait()
