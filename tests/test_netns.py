"""Across hosts: the owner in its own network namespace, joined by a veth pair; then the
link is cut and calls must fail within the timeout instead of hanging.

Needs root and iproute2 (``ip netns``); skips with the reason elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import pytest
import torch

from remote_module import RemoteModule
from remote_module._hosts import TwoHosts, set_link, two_hosts, unavailable
from tests.support.interfaces import LinearInterface, ScaledLinear
from tests.support.netns_group import group_across

NAMESPACE = f"rmtest{os.getpid() % 100000}"
_REASON = unavailable(NAMESPACE)
pytestmark = [
    pytest.mark.skipif(_REASON is not None, reason=_REASON or ""),
    pytest.mark.own_process,  # it starts an RPC group of its own (see tests/conftest.py)
]


@pytest.fixture(scope="module")
def owner_across_veth() -> Iterator[tuple[TwoHosts, subprocess.Popen[bytes]]]:
    with two_hosts(NAMESPACE) as hosts, group_across(hosts, [True]) as (owner,):
        yield hosts, owner


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
