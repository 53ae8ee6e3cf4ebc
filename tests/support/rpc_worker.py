"""A worker of a test RPC group: joins, serves calls, leaves when the group shuts down."""

from __future__ import annotations

import sys
import warnings

import torch.distributed.rpc as rpc

from remote_module._process import exit_when_orphaned
from tests.support.rpc_group import backend_options

if __name__ == "__main__":
    exit_when_orphaned()
    warnings.filterwarnings("ignore", message="`torch.jit.", category=DeprecationWarning)
    rank, world_size, port = (int(value) for value in sys.argv[1:4])
    rpc.init_rpc(
        f"worker{rank}", rank=rank, world_size=world_size, rpc_backend_options=backend_options(port)
    )
    rpc.shutdown(graceful=True)
