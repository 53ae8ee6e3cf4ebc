"""An RPC group across two hosts on one machine (``remote_module._hosts``): this process is
``worker0`` on this host; each other rank runs ``tests.support.rpc_worker`` on this host or in
the namespace, TensorPipe bound to that host's end of the veth pair."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence

import torch.distributed.rpc as rpc

from remote_module._hosts import TwoHosts
from remote_module._process import end_processes, free_port
from tests.support.rpc_group import ROOT

_BINDINGS = ("TP_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


@contextlib.contextmanager
def group_across(
    hosts: TwoHosts, across: Sequence[bool], rpc_timeout: float = 20
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Ranks 1.. (``across[rank - 1]``: in the namespace, else on this host) and this process
    as rank 0; yields their processes, which it ends (and the group, not gracefully)."""
    port = free_port()
    world_size = len(across) + 1
    workers = []
    for rank, inside in enumerate(across, start=1):
        interface = hosts.owner_if if inside else hosts.host_if
        env = dict(
            os.environ,
            PYTHONPATH=str(ROOT),
            **dict.fromkeys(_BINDINGS, interface),
            RM_TEST_INIT_ADDR=hosts.host_addr,
        )
        command = [sys.executable, "-m", "tests.support.rpc_worker", str(rank), str(world_size)]
        prefix = hosts.enter if inside else []
        workers.append(subprocess.Popen([*prefix, *command, str(port)], cwd=ROOT, env=env))
    # Both transports bind to the host's end of the veth pair while the group forms.
    saved = {name: os.environ.get(name) for name in _BINDINGS}
    os.environ.update(dict.fromkeys(_BINDINGS, hosts.host_if))
    try:
        options = rpc.TensorPipeRpcBackendOptions(
            init_method=f"tcp://{hosts.host_addr}:{port}",
            num_worker_threads=8,
            rpc_timeout=rpc_timeout,
        )
        rpc.init_rpc("worker0", rank=0, world_size=world_size, rpc_backend_options=options)
    except BaseException:
        end_processes(workers, grace_s=0)
        raise
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    try:
        yield workers
    finally:
        rpc.shutdown(graceful=False)
        end_processes(workers, grace_s=0)
