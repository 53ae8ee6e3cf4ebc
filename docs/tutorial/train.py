"""ranker's training program (docs/get-started.md): three workers, started by

    torchrun --standalone --nproc-per-node 3 train.py

``worker0`` trains, ``worker1`` owns the ranker, ``worker2`` is its standby."""

import os

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import Tensor, nn
from torch.distributed.optim import DistributedOptimizer

from ranker.generated import RemoteRankerInterface
from ranker.model import Ranker


class Hybrid(nn.Module):
    """A local layer on this worker, the ranker on another."""

    def __init__(self, ranker: RemoteRankerInterface) -> None:
        super().__init__()
        self.local = nn.Linear(8, 8)
        self.ranker = ranker

    def forward(self, x: Tensor) -> Tensor:
        return self.ranker.forward(self.local(x).relu())


def calls(ranker: RemoteRankerInterface, x: Tensor) -> None:
    scores = ranker(x)  # runs on worker1; this worker waits for the result
    future = ranker.best_async(x, k=2)  # returns at once: a torch.futures.Future
    print("scores", tuple(scores.shape), "best", tuple(future.wait().shape))


def train(model: Hybrid, x: Tensor, target: Tensor, steps: int) -> list[float]:
    parameters = model.ranker.remote_parameters() + [rpc.RRef(p) for p in model.local.parameters()]
    optimizer = DistributedOptimizer(torch.optim.SGD, parameters, lr=0.05)
    losses = []
    for _ in range(steps):
        with dist_autograd.context() as context_id:
            loss = (model(x) - target).pow(2).mean()
            dist_autograd.backward(context_id, [loss])  # reaches worker1's parameters
            optimizer.step(context_id)
        losses.append(loss.item())
    return losses


def compile_and_script(model: Hybrid, x: Tensor) -> None:
    expected = model(x)
    compiled = torch.compile(model, fullgraph=True)  # the remote call: one op of the graph
    print("compiled", torch.allclose(compiled(x), expected, atol=1e-6))
    scripted = torch.jit.script(model)  # TorchScript: no Python between the calls
    print("scripted", torch.allclose(scripted(x), expected, atol=1e-6))


def checkpoints(ranker: RemoteRankerInterface, x: Tensor) -> None:
    before = ranker(x)
    version = ranker.checkpoint()  # worker1's state, now on worker2 too
    new_owner = ranker.fail_over()  # a planned move; worker1's death does the same by itself
    print("checkpoint", version, "now on", new_owner, torch.equal(ranker(x), before))


def main() -> None:
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size)
    if rank == 0:
        ranker = RemoteRankerInterface("worker1/cpu", Ranker, args=(8,), standby=["worker2/cpu"])
        torch.manual_seed(0)
        x, target = torch.randn(16, 8), torch.randn(16)
        calls(ranker, x)
        model = Hybrid(ranker)
        losses = train(model, x, target, steps=20)
        print("loss fell", losses[-1] < losses[0])
        compile_and_script(model, x)
        checkpoints(ranker, x)
    rpc.shutdown()  # waits for every worker


if __name__ == "__main__":
    main()
