"""Across hosts, a failover: the owner on this host, its standby in a network namespace joined
by a veth pair. Checkpoints cross the link owner to standby; then the owner's host is lost (its
process killed with SIGKILL) and the module goes on across the link, from its checkpoint.

Needs root and iproute2 (``ip netns``); skips with the reason elsewhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator

import pytest
import torch

from remote_module import OwnerFailover, RemoteModule
from remote_module._hosts import TwoHosts, two_hosts, unavailable
from tests.support import failover_helpers as helpers
from tests.support.netns_group import group_across

NAMESPACE = f"rmfo{os.getpid() % 100000}"
_REASON = unavailable(NAMESPACE)
pytestmark = [
    pytest.mark.skipif(_REASON is not None, reason=_REASON or ""),
    pytest.mark.own_process,  # it starts an RPC group of its own (see tests/conftest.py)
]


@pytest.fixture(scope="module")
def standby_across_veth() -> Iterator[tuple[TwoHosts, list[subprocess.Popen[bytes]]]]:
    # worker1: the standby, across the link; worker2: the owner, on this host.
    with two_hosts(NAMESPACE) as hosts, group_across(hosts, [True, False]) as workers:
        yield hosts, workers


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
