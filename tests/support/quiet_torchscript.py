"""Run as ``python -W default -m tests.support.quiet_torchscript`` by
``tests/test_quiet_torchscript.py``: a one-worker RPC group whose worker owns its own
RemoteModules, so every step of the caller and the owner runs in this process and any warning
shows on its stderr. The user's own ``@torch.jit.interface`` is imported under the user's own
filter; everything else is ours."""

import os
import warnings

import torch
import torch.distributed.rpc as rpc

from remote_module import RemoteModule
from remote_module._process import free_port
from tests.scorer.model import Scorer, ScorerProtocol

with warnings.catch_warnings():  # the user's own TorchScript, silenced by the user
    warnings.simplefilter("ignore")
    from tests.scorer.interfaces import ScorerInterface


def main() -> None:
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{free_port()}")
    rpc.init_rpc("worker0", rank=0, world_size=1, rpc_backend_options=options)
    x = torch.ones(3, 4)
    for interface in (ScorerInterface, ScorerProtocol, None):
        rm = RemoteModule("worker0/cpu", Scorer, module_interface_cls=interface)
        rm.forward(x)
        rm.forward_async(x).wait()
    print("done", os.getpid())
    rpc.shutdown()


if __name__ == "__main__":
    main()
