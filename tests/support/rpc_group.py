"""A real RPC group on 127.0.0.1 for tests: this process is ``worker0``, the others are
subprocesses started here and ended by pid."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch.distributed.rpc as rpc

from remote_module._process import end_processes, free_port

ROOT = Path(__file__).resolve().parents[2]
RPC_TIMEOUT_S = 60.0


def backend_options(port: int, timeout: float = RPC_TIMEOUT_S) -> rpc.TensorPipeRpcBackendOptions:
    return rpc.TensorPipeRpcBackendOptions(
        init_method=f"tcp://{os.environ.get('RM_TEST_INIT_ADDR', '127.0.0.1')}:{port}",
        num_worker_threads=8,
        rpc_timeout=timeout,
    )


def checkout_env(**overrides: str) -> dict[str, str]:
    """This process's environment with this checkout first on ``PYTHONPATH`` (so a child
    imports ``tests`` and ``remote_module`` from here, not from an installed copy)."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, PYTHONPATH=path, **overrides)


def start_workers(
    world_size: int,
    port: int,
    worker: str = "tests.support.rpc_worker",
    extra_args: Callable[[int], Sequence[str]] = lambda rank: (),
    stderr_dir: Path | None = None,
) -> list[subprocess.Popen[bytes]]:
    """Ranks 1.. as ``python -m WORKER RANK WORLD_SIZE PORT *extra_args(RANK)``; with
    ``stderr_dir``, each one's stderr written to ``stderr_dir / worker<RANK>.stderr``."""
    workers = []
    for rank in range(1, world_size):
        command = [sys.executable, "-m", worker, str(rank), str(world_size), str(port)]
        stderr = None if stderr_dir is None else open(stderr_dir / f"worker{rank}.stderr", "wb")
        try:  # the child keeps its own copy of the file
            workers.append(
                subprocess.Popen(
                    [*command, *extra_args(rank)], cwd=ROOT, env=checkout_env(), stderr=stderr
                )
            )
        finally:
            if stderr is not None:
                stderr.close()
    return workers


@contextlib.contextmanager
def rpc_group(
    world_size: int, graceful: bool = True, stderr_dir: Path | None = None
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """This process joins as ``worker0``; ranks 1.. run ``tests.support.rpc_worker`` (their
    stderr in ``stderr_dir``, where given: see :func:`start_workers`)."""
    port = free_port()
    workers = start_workers(world_size, port, stderr_dir=stderr_dir)
    try:
        rpc.init_rpc(
            "worker0", rank=0, world_size=world_size, rpc_backend_options=backend_options(port)
        )
    except BaseException:
        end_processes(workers, grace_s=0)
        raise
    try:
        yield workers
    finally:
        try:
            rpc.shutdown(graceful=graceful, timeout=30)
        finally:
            end_processes(workers, grace_s=20.0 if graceful else 2.0)
