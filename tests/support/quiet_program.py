"""Run as ``python -m tests.support.quiet_program OUT_DIR`` by ``tests/test_quiet_torchscript.py``:
a 3-worker program that uses only the README's API (an interface made with
``@remote_module.interface``, RemoteModules with and without it, calls, ``torch.jit.script``,
``remote_parameters`` with ``DistributedOptimizer`` under distributed autograd,
``init_from_module_rref``, state dicts), with every warning recorded in every process, each
with whether our code was on the stack when it was raised. Each process writes what it saw to
``OUT_DIR/<rank>.json``."""

import json
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp

PACKAGE = str(Path(__file__).resolve().parents[2] / "remote_module")


def _record(seen: list[dict[str, Any]]) -> None:
    def show(message: Any, category: Any, filename: str, lineno: int, *_: Any) -> None:
        stack = [frame.filename for frame in traceback.extract_stack()]
        seen.append(
            {
                "category": category.__name__,
                "message": str(message).splitlines()[0][:200],
                "where": f"{filename}:{lineno}",
                "ours": any(name.startswith(PACKAGE) for name in stack),
            }
        )

    warnings.showwarning = show
    warnings.simplefilter("always")


def run(rank: int, port: int, out_dir: str) -> None:
    seen: list[dict[str, Any]] = []
    _record(seen)
    import torch.distributed.autograd as dist_autograd
    import torch.distributed.rpc as rpc
    from torch import nn

    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}")
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3, rpc_backend_options=options)
    if rank == 0:
        from torch.distributed.optim import DistributedOptimizer

        from remote_module import RemoteModule
        from tests.support.decorated import SummerInterface
        from tests.support.decorated_module import Summer

        x = torch.ones(2, 4)
        plain = RemoteModule("worker1/cpu", nn.Linear, args=(4, 4), timeout=30.0)
        summer = RemoteModule("worker2/cpu", Summer, module_interface_cls=SummerInterface)
        plain(x)
        plain.forward_async(x).wait()
        summer(x)
        summer.features_async().wait()
        torch.jit.script(summer).forward(x)
        optimizer = DistributedOptimizer(torch.optim.SGD, plain.remote_parameters(), lr=0.1)
        with dist_autograd.context() as context:
            dist_autograd.backward(context, [plain(x).sum() + summer(x).total])
            optimizer.step(context)
        again = RemoteModule.init_from_module_rref("worker1/cpu", plain.get_module_rref())
        again(x)
        # One warning of ours on purpose, so the test sees that the recording catches them.
        RemoteModule.init_from_module_rref("worker2/cpu", plain.get_module_rref())
        plain.load_remote_state_dict(plain.remote_state_dict())
        plain.eval()
        repr(summer)
    rpc.shutdown()
    Path(out_dir, f"{rank}.json").write_text(json.dumps(seen))


if __name__ == "__main__":
    from remote_module._process import free_port

    mp.spawn(run, args=(free_port(), sys.argv[1]), nprocs=3)
