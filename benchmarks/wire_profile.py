"""Where the time of one ``wire_dtype`` round trip goes: ``python -m benchmarks.wire_profile
[--calls N] [--wire-dtype int8] [--json PATH]``.

The ``wire_shaped`` figure's set-up (the owner in its own network namespace behind a veth
pair shaped with ``tc`` to 1 Gbit/s each way; needs root and iproute2), a RemoteModule of
``nn.Identity`` with the wire dtype and one without, called in turn with 16 MiB of float32.
Both processes time the runtime's four casts (``values.cast_to_wire`` and
``restore_from_wire``, which both ``owner.call_wired`` and the caller's calls use) on one
clock, so each call splits into: the caller's encode, the send until the owner holds the
arguments, the owner's decode, the call, the owner's encode, the reply until the caller
holds it, the caller's decode. Prints the median and min-max of each part over ``--calls``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from remote_module import _hosts
from remote_module._process import end_processes, exit_now, exit_when_orphaned, free_port

MIB = 16
TIMEOUT_S = 600.0
RATE = "1gbit"
# (side, cast) -> the part of a call it ends; between two of them lies the part named here.
PARTS = (
    ("caller: encode", ("caller", "cast_to_wire")),
    ("send, until the owner holds it", None),
    ("owner: decode", ("owner", "restore_from_wire")),
    ("owner: the call", None),
    ("owner: encode", ("owner", "cast_to_wire")),
    ("reply, until the caller holds it", None),
    ("caller: decode", ("caller", "restore_from_wire")),
)
_log: list[tuple[str, str, float, float]] = []


def _timed(side: str) -> None:
    """Time every cast of this process into ``_log`` as (side, cast, start, end)."""
    from remote_module.runtime import values

    for name in ("cast_to_wire", "restore_from_wire"):
        inner = getattr(values, name)

        def timed(*args: Any, _inner: Callable[..., Any] = inner, _name: str = name) -> Any:
            start = time.monotonic()
            try:
                return _inner(*args)
            finally:
                _log.append((side, _name, start, time.monotonic()))

        setattr(values, name, timed)


def owner_log() -> list[tuple[str, str, float, float]]:
    return _log


def _worker(rank: int, port: int, address: str, calls: int, wire: str, out: str) -> None:
    import torch
    import torch.distributed.rpc as rpc
    from torch import nn

    import remote_module

    _timed("caller" if rank == 0 else "owner")
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=f"tcp://{address}:{port}",
        rpc_timeout=120.0,
        _transports=["uv"],  # over the link: no same-machine shortcut
        _channels=["basic"],
    )
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    if rank == 0:
        x = torch.randn(MIB * 2**20 // 4)
        modules = {
            impl: remote_module.RemoteModule(
                "worker1/cpu",
                nn.Identity,
                wire_dtype=None if impl == "none" else getattr(torch, impl),
            )
            for impl in ("none", wire)
        }
        times: dict[str, list[float]] = {impl: [] for impl in modules}
        spans = []
        for index in range(calls + 2):  # two to warm up
            for impl, rm in modules.items():
                _log.clear()
                start = time.monotonic()
                rm(x)
                end = time.monotonic()
                if index >= 2:
                    times[impl].append(end - start)
                    if impl == wire:
                        spans.append((start, end, list(_log)))
        owner = rpc.rpc_sync("worker1", owner_log)
        with open(out, "w") as file:
            json.dump({"times": times, "spans": spans, "owner": owner}, file)
    try:
        rpc.shutdown()
    except RuntimeError:  # the store rank 0 hosts can close under rank 1's last barrier
        pass  # (benchmarks.worker says the same); the figures are written by then


def breakdown(result: dict[str, Any]) -> dict[str, list[float]]:
    """Each part of each wired call, in ms."""
    parts: dict[str, list[float]] = {name: [] for name, _ in PARTS}
    parts["total"] = []
    for start, end, caller in result["spans"]:
        owner = [entry for entry in result["owner"] if start <= entry[2] <= end]
        # Casts recurse into containers through the timed names: the outermost ends last.
        casts = {(side, name): (begin, stop) for side, name, begin, stop in caller + owner}
        marks = [start]
        for _, cast in PARTS:
            if cast is not None:
                marks += casts[cast]
        marks.append(end)
        # marks: start, then each cast's begin and end, then end: parts lie between them.
        edges = list(itertools.pairwise(marks))[1:-1]
        for (name, _), (begin, stop) in zip(PARTS, edges, strict=True):
            parts[name].append((stop - begin) * 1e3)
        parts["total"].append((end - start) * 1e3)
    return parts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.wire_profile", description=__doc__)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--wire-dtype", default="int8", choices=("int8", "bfloat16", "float16"))
    parser.add_argument("--json", default=None)
    parser.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--address", default="", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank is not None:
        exit_when_orphaned(code=3)
        _worker(args.rank, args.port, args.address, args.calls, args.wire_dtype, args.out)
        return 0
    name = f"rmprof{os.getpid() % 100000}"
    reason = _hosts.unavailable(name)
    if reason is not None:
        print(f"wire_profile: cannot run here: {reason}", file=sys.stderr)
        return 2
    out = f"/tmp/{name}.json"
    with _hosts.two_hosts(name, rate=RATE) as hosts:
        port = free_port()
        common = [sys.executable, "-m", "benchmarks.wire_profile", "--calls", str(args.calls)]
        common += ["--wire-dtype", args.wire_dtype, "--port", str(port), "--out", out]
        common += ["--address", hosts.host_addr]
        processes = []
        for rank, interface, prefix in ((1, hosts.owner_if, hosts.enter), (0, hosts.host_if, [])):
            env = dict(os.environ, TP_SOCKET_IFNAME=interface, GLOO_SOCKET_IFNAME=interface)
            command = [*prefix, *common, "--rank", str(rank)]
            processes.append(subprocess.Popen(command, env=env))
        try:
            codes = [process.wait(TIMEOUT_S) for process in reversed(processes)]
        finally:
            end_processes(processes)
    if any(codes):
        print(f"wire_profile: a worker failed (exit codes {codes})", file=sys.stderr)
        return 1
    with open(out) as file:
        result = json.load(file)
    os.unlink(out)
    times = {impl: [t * 1e3 for t in values] for impl, values in result["times"].items()}
    ratios = [a / b for a, b in zip(times["none"], times[args.wire_dtype], strict=True)]
    lines = [f"16 MiB round trips over {RATE}, {args.calls} calls each, in turn:"]
    for label, values in (*times.items(), ("none / " + args.wire_dtype, ratios)):
        unit = "x" if label.startswith("none /") else " ms"
        spread = f"{min(values):.2f}-{max(values):.2f}"
        lines.append(f"  {label:34s} {statistics.median(values):8.2f}{unit} [{spread}]")
    lines.append(f"{args.wire_dtype} call, part by part (ms, median [min-max]):")
    for part, values in breakdown(result).items():
        spread = f"{min(values):.2f}-{max(values):.2f}"
        lines.append(f"  {part:34s} {statistics.median(values):8.2f} [{spread}]")
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"times_ms": times, "parts_ms": breakdown(result)}, file)
    return 0


if __name__ == "__main__":
    exit_now(main())
