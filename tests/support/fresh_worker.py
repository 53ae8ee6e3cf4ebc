"""A fresh worker: joins an RPC group with plain ``rpc.init_rpc`` and never imports
``remote_module`` itself; it meets it only through the messages it unpickles.

Run as ``python -m tests.support.fresh_worker RANK WORLD_SIZE PORT THREADS RPC_TIMEOUT_S``
(by ``tests.support.fresh_caller``). torch and the standard library only: not
``remote_module._process`` (its package would load with it), not ``tests.support.rpc_group``.

It prints two lines to stdout, each ``FRESH_WORKER <json>``: before ``init_rpc``, whether
``remote_module`` was already loaded (it must not be); at its end, where ``remote_module`` was
loaded from once messages loaded it (or ``None``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, NoReturn

import torch.distributed.rpc as rpc

MARK = "FRESH_WORKER"


def report(**fields: Any) -> None:
    print(MARK, json.dumps(fields), flush=True)


def exit_now(code: int) -> NoReturn:
    """End at once, skipping interpreter teardown (RPC threads parked in C++ can abort it)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def exit_when_orphaned(code: int = 1) -> None:
    """Exit with ``code`` once the process that started this one is gone (a stdlib copy of
    ``remote_module._process.exit_when_orphaned``, which this process must not import)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        exit_now(code)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str]) -> NoReturn:
    exit_when_orphaned()
    rank, world_size, port, threads = (int(value) for value in argv[:4])
    rpc_timeout = float(argv[4])
    loaded = sorted(name for name in sys.modules if name.split(".")[0] == "remote_module")
    report(rank=rank, phase="before init_rpc", remote_module_loaded=loaded, pid=os.getpid())
    rpc.init_rpc(
        f"worker{rank}",
        rank=rank,
        world_size=world_size,
        rpc_backend_options=rpc.TensorPipeRpcBackendOptions(
            init_method=f"tcp://127.0.0.1:{port}",
            num_worker_threads=threads,
            rpc_timeout=rpc_timeout,
        ),
    )
    rpc.shutdown(graceful=True)
    package = sys.modules.get("remote_module")
    report(rank=rank, phase="end", remote_module_file=getattr(package, "__file__", None))
    exit_now(0)


if __name__ == "__main__":
    main(sys.argv[1:])
