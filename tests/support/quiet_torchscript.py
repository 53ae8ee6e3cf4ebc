"""Run as ``python -W default -m tests.support.quiet_torchscript`` by
``tests/test_quiet_torchscript.py``: a one-worker RPC group whose worker owns its own
RemoteModules, so every step of the caller and the owner runs in this process and any warning
shows on its stderr. The user's own ``@torch.jit.interface`` is imported under the user's own
filter; everything else is ours, the scripting of a module that calls a function of its own
module on the owner included."""

import os
import warnings

import torch
import torch.distributed.rpc as rpc
from torch import Tensor

from remote_module import RemoteModule
from remote_module._process import free_port
from tests.scorer.model import Scored, Scorer, ScorerProtocol

with warnings.catch_warnings():  # the user's own TorchScript, silenced by the user
    warnings.simplefilter("ignore")
    from tests.scorer.interfaces import ScorerInterface


def scaled(scores: Tensor, scale: float) -> Tensor:
    return scores * scale


class HelpedScorer(Scorer):
    """Calls a function of its own module: torch scripts it on the owner by itself."""

    def forward(self, x: Tensor, scale: float = 1.0) -> Scored:
        scores = scaled(self.linear(x).squeeze(1), scale)
        return Scored(scores, int(scores.argmax()))


def main() -> None:
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{free_port()}")
    rpc.init_rpc("worker0", rank=0, world_size=1, rpc_backend_options=options)
    x = torch.ones(3, 4)
    for module_cls in (Scorer, HelpedScorer):
        for interface in (ScorerInterface, ScorerProtocol, None):
            rm = RemoteModule("worker0/cpu", module_cls, module_interface_cls=interface)
            rm.forward(x)
            rm.forward_async(x).wait()
    print("done", os.getpid())
    rpc.shutdown()


if __name__ == "__main__":
    main()
