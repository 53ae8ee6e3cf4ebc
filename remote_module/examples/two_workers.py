"""Two workers on this machine: ``worker1`` owns an ``nn.Linear``, ``worker0`` calls it.

Run it with ``python -m remote_module.examples.two_workers`` (it starts both workers), or as
``torchrun --standalone --nproc-per-node 2 -m remote_module.examples.two_workers`` (torchrun
starts them and sets ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``)."""

import os
import socket

import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
from torch import nn

from remote_module import RemoteModule


def run(rank: int, world_size: int) -> None:
    # The group meets at MASTER_ADDR:MASTER_PORT (torch's default, init_method="env://").
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size)
    if rank == 0:
        rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, 2))
        y = rm(torch.ones(2, 4))
        print(f"worker0 got {y.shape} from {rm.on}")
    rpc.shutdown()  # waits for every worker


def free_port() -> int:
    """A port no process listens on now: the one the kernel gives a socket bound to port 0."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


if __name__ == "__main__":
    if "RANK" in os.environ:  # started by torchrun
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    else:  # start both workers here; they inherit this environment
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        mp.spawn(run, args=(2,), nprocs=2)
