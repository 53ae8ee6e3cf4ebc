"""Two hosts on one machine, for the tests and the benchmarks: this one, and a network
namespace joined to it by a veth pair (optionally shaped with ``tc``), each with a
link-local address of its own. Needs root and iproute2.

Example::

    with two_hosts("rmbench", rate="1gbit") as hosts:
        ...  # start a worker under ``hosts.enter``, bind TensorPipe to ``hosts.owner_if``
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["TwoHosts", "set_link", "two_hosts", "unavailable"]

# Link-local addresses of the two hosts; nothing else is ever addressed.
HOST_ADDR, OWNER_ADDR = "169.254.213.1", "169.254.213.2"


@dataclass(frozen=True)
class TwoHosts:
    namespace: str
    host_if: str  # this host's end of the veth pair
    owner_if: str  # the namespace's end
    host_addr: str = HOST_ADDR
    owner_addr: str = OWNER_ADDR

    @property
    def enter(self) -> list[str]:
        """The command prefix that runs a command inside the namespace."""
        return ["ip", "netns", "exec", self.namespace]


def unavailable(name: str) -> str | None:
    """Why :func:`two_hosts` cannot run here (no root, no iproute2, namespaces refused), or
    None when it can."""
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = subprocess.run(
        ["ip", "netns", "add", f"{name}p"], capture_output=True, text=True, timeout=10
    )
    if probe.returncode != 0:
        return f"ip netns add failed: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", f"{name}p"], capture_output=True, timeout=10)
    return None


@contextlib.contextmanager
def two_hosts(name: str, rate: str | None = None) -> Iterator[TwoHosts]:
    """A namespace called ``name`` joined to this one by a veth pair; with ``rate`` (``tc``
    syntax, such as ``"1gbit"``) each direction is shaped to it by a token bucket. Everything
    is removed on exit."""
    hosts = TwoHosts(name, f"{name[:10]}h", f"{name[:10]}o")
    _ip("netns", "add", name)
    try:
        _ip("link", "add", hosts.host_if, "type", "veth", "peer", "name", hosts.owner_if)
        _ip("link", "set", hosts.owner_if, "netns", name)
        _ip("addr", "add", f"{HOST_ADDR}/30", "dev", hosts.host_if)
        _ip("link", "set", hosts.host_if, "up")
        _ip("-n", name, "addr", "add", f"{OWNER_ADDR}/30", "dev", hosts.owner_if)
        _ip("-n", name, "link", "set", hosts.owner_if, "up")
        _ip("-n", name, "link", "set", "lo", "up")
        if rate is not None:
            # Bursts of a whole GSO segment (64 KiB) pass; a 100 ms queue absorbs the rest.
            shape = ["root", "tbf", "rate", rate, "burst", "256kb", "latency", "100ms"]
            _tc("qdisc", "add", "dev", hosts.host_if, *shape)
            _tc("-n", name, "qdisc", "add", "dev", hosts.owner_if, *shape)
        yield hosts
    finally:
        subprocess.run(["ip", "link", "del", hosts.host_if], capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)


def set_link(hosts: TwoHosts, up: bool) -> None:
    """Plug this host's end of the link in or out."""
    _ip("link", "set", hosts.host_if, "up" if up else "down")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def _tc(*args: str) -> None:
    subprocess.run(["tc", *args], check=True, capture_output=True, timeout=10)
