"""Across hosts: the owner in its own network namespace, joined by a veth pair; then the
link is cut and calls must fail within the timeout instead of hanging.

Needs root and iproute2 (``ip netns``); skips with the reason elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import torch
import torch.distributed.rpc as rpc

from remote_module import RemoteModule
from remote_module._hosts import TwoHosts, set_link, two_hosts, unavailable
from remote_module._process import end_processes, free_port
from tests.support.interfaces import LinearInterface, ScaledLinear
from tests.support.rpc_group import ROOT

NAMESPACE = f"rmtest{os.getpid() % 100000}"
_REASON = unavailable(NAMESPACE)
pytestmark = [
    pytest.mark.skipif(_REASON is not None, reason=_REASON or ""),
    pytest.mark.own_process,  # it starts an RPC group of its own (see tests/conftest.py)
]


@pytest.fixture(scope="module")
def owner_across_veth() -> Iterator[tuple[TwoHosts, subprocess.Popen[bytes]]]:
    port = free_port()
    with two_hosts(NAMESPACE) as hosts:
        env = dict(
            os.environ,
            PYTHONPATH=str(ROOT),
            TP_SOCKET_IFNAME=hosts.owner_if,
            GLOO_SOCKET_IFNAME=hosts.owner_if,
            RM_TEST_INIT_ADDR=hosts.host_addr,
        )
        owner = subprocess.Popen(
            [
                *hosts.enter,
                sys.executable,
                "-m",
                "tests.support.rpc_worker",
                "1",
                "2",
                str(port),
            ],
            cwd=ROOT,
            env=env,
        )
        # Both transports bind to the host's end of the veth pair while the group forms.
        saved = {name: os.environ.get(name) for name in ("TP_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")}
        os.environ.update(TP_SOCKET_IFNAME=hosts.host_if, GLOO_SOCKET_IFNAME=hosts.host_if)
        try:
            options = rpc.TensorPipeRpcBackendOptions(
                init_method=f"tcp://{hosts.host_addr}:{port}",
                num_worker_threads=8,
                rpc_timeout=20,
            )
            rpc.init_rpc("worker0", rank=0, world_size=2, rpc_backend_options=options)
        except BaseException:
            end_processes([owner], grace_s=0)
            raise
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        try:
            yield hosts, owner
        finally:
            rpc.shutdown(graceful=False)
            end_processes([owner], grace_s=0)


def test_calls_cross_the_veth_pair_then_fail_fast_when_the_link_is_cut(
    owner_across_veth: tuple[TwoHosts, subprocess.Popen[bytes]],
) -> None:
    hosts, owner = owner_across_veth
    # Built with a generous timeout: the owner's first creation, scripting and compiling on a
    # loaded machine are not what this test times; the calls below use the short one.
    built = RemoteModule("worker1/cpu", torch.nn.Linear, args=(4, 2), timeout=60)
    built_scripted = RemoteModule(
        "worker1/cpu", ScaledLinear, module_interface_cls=LinearInterface, timeout=60
    )
    x = torch.ones(1, 4)
    assert built(x).shape == (1, 2)
    assert built_scripted.forward(x, scale=2.0).shape == (1, 4)
    plain = RemoteModule.init_from_module_rref("worker1/cpu", built.module_rref, timeout=3)
    scripted = RemoteModule.init_from_module_rref(
        "worker1/cpu", built_scripted.module_rref, LinearInterface, timeout=3
    )
    assert plain(x).shape == (1, 2)
    expected = scripted.forward(x)
    assert torch.equal(torch.jit.script(scripted).forward(x), expected)
    # The owner really is on the other side of the veth pair.
    assert owner.poll() is None

    set_link(hosts, up=False)
    for call in (lambda: plain(x), lambda: scripted.forward(x), lambda: scripted.weight_sum()):
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="worker1"):
            call()
        assert time.monotonic() - started < 3 + 5, "a call across a cut link outlived its timeout"
