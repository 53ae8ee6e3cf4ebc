"""Two workers on this machine: ``worker1`` owns an ``nn.Linear``, ``worker0`` calls it.
Run it with ``python -m remote_module.examples.two_workers``."""

import os

import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
from torch import nn

from remote_module import RemoteModule


def run(rank: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2)
    if rank == 0:
        rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, 2))
        y = rm(torch.ones(2, 4))
        print(f"worker0 got {y.shape} from {rm.on}")
    rpc.shutdown()  # waits for every worker


if __name__ == "__main__":
    from remote_module._process import free_port

    mp.spawn(run, args=(free_port(),), nprocs=2)
