"""A worker of a test RPC group: joins, serves calls, leaves when the group shuts down."""

from __future__ import annotations

import os
import sys
import threading
import time
import warnings

import torch.distributed.rpc as rpc

from tests.rpc_group import backend_options


def _exit_when_orphaned(parent: int) -> None:
    """A worker whose test process died (a crash, a kill) would wait for it forever."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


if __name__ == "__main__":
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    warnings.filterwarnings("ignore", message="`torch.jit.", category=DeprecationWarning)
    rank, world_size, port = (int(value) for value in sys.argv[1:4])
    rpc.init_rpc(
        f"worker{rank}", rank=rank, world_size=world_size, rpc_backend_options=backend_options(port)
    )
    rpc.shutdown(graceful=True)
