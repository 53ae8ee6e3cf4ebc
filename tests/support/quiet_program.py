"""Run as ``python -m tests.support.quiet_program OUT_DIR`` by ``tests/test_quiet_torchscript.py``:
a user's own program as the docs show it, with public names only. Three workers: ``worker0``
trains a hybrid of a local layer and a RemoteModule with an interface (``worker1``) beside a
plain RemoteModule (``worker2``) for a few steps, with distributed autograd and
``DistributedOptimizer``, scripts the hybrid and calls it, and uses the rest of the README's
API (``_async`` calls, another ``@remote_module.interface`` module, ``init_from_module_rref``,
state dicts); every worker shuts RPC down. ``worker0`` prints one line to stdout: ``trained``
and the losses.

Every warning in every process is recorded, each with whether our code was on the stack when
it was raised, into ``OUT_DIR/<rank>.json``; those that were not ours go on to stderr as
Python shows them (every time: ``simplefilter("always")``), beside torch's own C++ lines."""

import json
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp

PACKAGE = str(Path(__file__).resolve().parents[2] / "remote_module")
STEPS = 4


def _record(seen: list[dict[str, Any]]) -> None:
    show = warnings.showwarning

    def record(message: Any, category: Any, filename: str, lineno: int, *rest: Any) -> None:
        stack = [frame.filename for frame in traceback.extract_stack()]
        ours = any(name.startswith(PACKAGE) for name in stack)
        seen.append(
            {
                "category": category.__name__,
                "message": str(message).splitlines()[0][:200],
                "where": f"{filename}:{lineno}",
                "ours": ours,
            }
        )
        if not ours:
            show(message, category, filename, lineno, *rest)

    warnings.showwarning = record
    warnings.simplefilter("always")


def train() -> None:
    """The docs' path: an interface, a hybrid model, training, scripting."""
    import torch.distributed.autograd as dist_autograd
    import torch.distributed.rpc as rpc
    from torch import nn
    from torch.distributed.optim import DistributedOptimizer

    from remote_module import RemoteModule
    from remote_module.examples.scorer import Scorer, ScorerInterface

    class Hybrid(nn.Module):
        def __init__(self, remote: RemoteModule) -> None:
            super().__init__()
            self.local = nn.Linear(4, 4)
            self.remote = remote

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.remote.forward(self.local(x), 1.0).score

    scorer = RemoteModule("worker1/cpu", Scorer, args=(4,), module_interface_cls=ScorerInterface)
    plain = RemoteModule("worker2/cpu", nn.Linear, args=(4, 1), timeout=30.0)
    hybrid = Hybrid(scorer)
    parameters = scorer.remote_parameters() + plain.remote_parameters()
    parameters += [rpc.RRef(p) for p in hybrid.local.parameters()]
    optimizer = DistributedOptimizer(torch.optim.SGD, parameters, lr=0.05)
    torch.manual_seed(0)
    x, target = torch.randn(8, 4), torch.randn(8)
    losses = []
    for _ in range(STEPS):
        with dist_autograd.context() as context_id:
            loss = ((hybrid(x) + plain(x).squeeze(1) - target) ** 2).mean()
            dist_autograd.backward(context_id, [loss])
            optimizer.step(context_id)
        losses.append(round(loss.item(), 4))
    scripted = torch.jit.script(hybrid)
    assert scripted(x).shape == (8,)
    assert plain.forward_async(x).wait().shape == (8, 1)
    print("trained", losses, flush=True)


def the_rest() -> None:
    """The rest of the README's API, on one more interface (its own module)."""
    from remote_module import RemoteModule
    from tests.support.decorated import SummerInterface
    from tests.support.decorated_module import Summer

    x = torch.ones(2, 4)
    summer = RemoteModule("worker2/cpu", Summer, module_interface_cls=SummerInterface)
    summer(x)
    summer.features_async().wait()
    torch.jit.script(summer).forward(x)
    plain = RemoteModule("worker1/cpu", torch.nn.Linear, args=(4, 4))
    again = RemoteModule.init_from_module_rref("worker1/cpu", plain.get_module_rref())
    again(x)
    # One warning of ours on purpose, so the test sees that the recording catches them.
    RemoteModule.init_from_module_rref("worker2/cpu", plain.get_module_rref())
    plain.load_remote_state_dict(plain.remote_state_dict())
    plain.eval()
    repr(summer)


def run(rank: int, port: int, out_dir: str) -> None:
    seen: list[dict[str, Any]] = []
    _record(seen)
    import torch.distributed.rpc as rpc

    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}")
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3, rpc_backend_options=options)
    if rank == 0:
        train()
        the_rest()
    rpc.shutdown()
    Path(out_dir, f"{rank}.json").write_text(json.dumps(seen))


if __name__ == "__main__":
    from remote_module._process import free_port

    mp.spawn(run, args=(free_port(), sys.argv[1]), nprocs=3)
