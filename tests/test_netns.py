"""Across hosts: the owner in its own network namespace, joined by a veth pair; then the
link is cut and calls must fail within the timeout instead of hanging.

Needs root and iproute2 (``ip netns``); skips with the reason elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import torch
import torch.distributed.rpc as rpc

from remote_module import RemoteModule
from remote_module._process import end_processes, free_port
from tests.support.interfaces import LinearInterface, ScaledLinear
from tests.support.rpc_group import ROOT

SUFFIX = f"{os.getpid() % 100000}"
NAMESPACE = f"rmtest{SUFFIX}"
HOST_IF, OWNER_IF = f"rmh{SUFFIX}", f"rmo{SUFFIX}"
# Link-local addresses of this test's own two hosts; nothing else is ever addressed.
HOST_ADDR, OWNER_ADDR = "169.254.213.1", "169.254.213.2"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def _netns_unavailable() -> str | None:
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = subprocess.run(
        ["ip", "netns", "add", f"{NAMESPACE}p"], capture_output=True, text=True, timeout=10
    )
    if probe.returncode != 0:
        return f"ip netns add failed: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", f"{NAMESPACE}p"], capture_output=True, timeout=10)
    return None


_REASON = _netns_unavailable()
pytestmark = [
    pytest.mark.skipif(_REASON is not None, reason=_REASON or ""),
    pytest.mark.own_process,  # it starts an RPC group of its own (see tests/conftest.py)
]


@contextlib.contextmanager
def _two_hosts() -> Iterator[None]:
    _ip("netns", "add", NAMESPACE)
    try:
        _ip("link", "add", HOST_IF, "type", "veth", "peer", "name", OWNER_IF)
        _ip("link", "set", OWNER_IF, "netns", NAMESPACE)
        _ip("addr", "add", f"{HOST_ADDR}/30", "dev", HOST_IF)
        _ip("link", "set", HOST_IF, "up")
        _ip("-n", NAMESPACE, "addr", "add", f"{OWNER_ADDR}/30", "dev", OWNER_IF)
        _ip("-n", NAMESPACE, "link", "set", OWNER_IF, "up")
        _ip("-n", NAMESPACE, "link", "set", "lo", "up")
        yield
    finally:
        subprocess.run(["ip", "link", "del", HOST_IF], capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", NAMESPACE], capture_output=True, timeout=10)


@pytest.fixture(scope="module")
def owner_across_veth() -> Iterator[subprocess.Popen[bytes]]:
    port = free_port()
    with _two_hosts():
        env = dict(
            os.environ,
            PYTHONPATH=str(ROOT),
            TP_SOCKET_IFNAME=OWNER_IF,
            GLOO_SOCKET_IFNAME=OWNER_IF,
            RM_TEST_INIT_ADDR=HOST_ADDR,
        )
        owner = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                NAMESPACE,
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
        os.environ.update(TP_SOCKET_IFNAME=HOST_IF, GLOO_SOCKET_IFNAME=HOST_IF)
        try:
            options = rpc.TensorPipeRpcBackendOptions(
                init_method=f"tcp://{HOST_ADDR}:{port}", num_worker_threads=8, rpc_timeout=20
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
            yield owner
        finally:
            rpc.shutdown(graceful=False)
            end_processes([owner], grace_s=0)


def test_calls_cross_the_veth_pair_then_fail_fast_when_the_link_is_cut(
    owner_across_veth: subprocess.Popen[bytes],
) -> None:
    plain = RemoteModule("worker1/cpu", torch.nn.Linear, args=(4, 2), timeout=3)
    scripted = RemoteModule(
        "worker1/cpu", ScaledLinear, module_interface_cls=LinearInterface, timeout=3
    )
    x = torch.ones(1, 4)
    assert plain(x).shape == (1, 2)
    assert scripted.forward(x, scale=2.0).shape == (1, 4)
    expected = scripted.forward(x)
    assert torch.equal(torch.jit.script(scripted).forward(x), expected)
    # The owner really is on the other side of the veth pair.
    assert owner_across_veth.poll() is None

    _ip("link", "set", HOST_IF, "down")
    for call in (lambda: plain(x), lambda: scripted.forward(x), lambda: scripted.weight_sum()):
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="worker1"):
            call()
        assert time.monotonic() - started < 3 + 5, "a call across a cut link outlived its timeout"
