"""Across hosts, a failover: the owner on this host, its standby in a network namespace joined
by a veth pair. Checkpoints cross the link owner to standby; then the owner's host is lost (its
process killed with SIGKILL) and the module goes on across the link, from its checkpoint.

Needs root and iproute2 (``ip netns``); skips with the reason elsewhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
import torch
import torch.distributed.rpc as rpc

from remote_module import OwnerFailover, RemoteModule
from remote_module._hosts import TwoHosts, two_hosts, unavailable
from remote_module._process import end_processes, free_port
from tests.support import failover_helpers as helpers
from tests.support.rpc_group import ROOT

NAMESPACE = f"rmfo{os.getpid() % 100000}"
_REASON = unavailable(NAMESPACE)
pytestmark = [
    pytest.mark.skipif(_REASON is not None, reason=_REASON or ""),
    pytest.mark.own_process,  # it starts an RPC group of its own (see tests/conftest.py)
]
WORLD_SIZE = 3  # worker0: this process; worker1: the standby, across the link; worker2: owner


def _worker(rank: int, port: int, hosts: TwoHosts, across: bool) -> subprocess.Popen[bytes]:
    interface = hosts.owner_if if across else hosts.host_if
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        TP_SOCKET_IFNAME=interface,
        GLOO_SOCKET_IFNAME=interface,
        RM_TEST_INIT_ADDR=hosts.host_addr,
    )
    command = [sys.executable, "-m", "tests.support.rpc_worker", str(rank), str(WORLD_SIZE)]
    return subprocess.Popen(
        [*(hosts.enter if across else []), *command, str(port)], cwd=ROOT, env=env
    )


@pytest.fixture(scope="module")
def standby_across_veth() -> Iterator[tuple[TwoHosts, list[subprocess.Popen[bytes]]]]:
    port = free_port()
    with two_hosts(NAMESPACE) as hosts:
        workers = [_worker(1, port, hosts, across=True), _worker(2, port, hosts, across=False)]
        saved = {name: os.environ.get(name) for name in ("TP_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")}
        os.environ.update(TP_SOCKET_IFNAME=hosts.host_if, GLOO_SOCKET_IFNAME=hosts.host_if)
        try:
            options = rpc.TensorPipeRpcBackendOptions(
                init_method=f"tcp://{hosts.host_addr}:{port}",
                num_worker_threads=8,
                rpc_timeout=20,
            )
            rpc.init_rpc("worker0", rank=0, world_size=WORLD_SIZE, rpc_backend_options=options)
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
            yield hosts, workers
        finally:
            rpc.shutdown(graceful=False)
            end_processes(workers, grace_s=0)


def test_the_owners_host_lost_the_module_goes_on_across_the_link(
    standby_across_veth: tuple[TwoHosts, list[subprocess.Popen[bytes]]],
) -> None:
    _, workers = standby_across_veth
    owner = workers[1]
    rms = {
        family: RemoteModule(
            "worker2/cpu", helpers.Accumulator, standby=["worker1/cpu"], timeout=20, **options
        )
        for family, options in (
            ("no interface", {}),
            ("torch.jit.interface", {"module_interface_cls": helpers.AccumulatorInterface}),
        )
    }
    for rm in rms.values():
        rm(torch.full((2,), 3.0))
        assert rm.checkpoint() == 1  # owner (here) to standby (across the link)
        rm(torch.full((2,), 4.0))  # lost with the owner
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait(timeout=30)
    for rm in rms.values():
        with pytest.raises(OwnerFailover) as raised:
            rm(torch.zeros(2))
        assert (raised.value.new_owner, raised.value.checkpoint_version) == ("worker1", 1)
        assert torch.equal(rm(torch.ones(2)), torch.full((2,), 4.0))
        assert rm.on == "worker1"
    # The standby really is on the other side of the veth pair.
    assert workers[0].poll() is None
