"""One benchmark process: ``python -m benchmarks.worker FIGURE RANK PORT SIZE REPEATS OUT
[IMPL [ROW]]``. Rank 0 (``worker0``) measures and writes JSON to OUT; rank 1 (``worker1``) owns
the modules; in a ``trio`` figure rank 2 (``worker2``) is the owner's standby. A ``single``
figure runs rank 0 alone, without RPC. Both ranks import the figure's module (``Figure.module``)
and run its ``prepare(IMPL, ROW)``, where it has one, before RPC starts."""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import time
import traceback
import warnings

from remote_module._process import exit_now, exit_when_orphaned

RPC_TIMEOUT_S = 120.0
SHUTDOWN_TIMEOUT_S = 900.0


def main(argv: list[str]) -> int:
    exit_when_orphaned(code=3)  # the runner is gone (killed, not just done)
    # TorchScript is deprecated in this torch; the benchmarks use it on purpose.
    warnings.filterwarnings("ignore", message="`torch.jit.", category=DeprecationWarning)
    name, rank_text, port_text, size, repeats_text, out = argv[:6]
    impl = argv[6] if len(argv) > 6 else None
    row = argv[7] if len(argv) > 7 else None
    rank, port, repeats = int(rank_text), int(port_text), int(repeats_text)

    import torch.distributed.rpc as rpc

    from benchmarks.spec import SIZES, figure

    spec = figure(name)
    measuring = importlib.import_module(spec.module)
    prepare = getattr(measuring, "prepare", None)
    if prepare is not None:  # what the sample's program imports besides the figure's module
        prepare(impl, row)
    # Collect once, then keep the import-time heap out of later collections: otherwise a full
    # collection (tens of ms with torch loaded) lands inside whichever measurement comes first.
    gc.collect()
    gc.freeze()
    if spec.launch == "single":
        result = measuring.measure(spec, SIZES[size], repeats, impl, row)
        _write(out, result)
        return 0
    address = os.environ.get("RM_BENCH_ADDR", "127.0.0.1")  # the shaped link's, or loopback
    # Across the shaped link everything goes over TCP: TensorPipe's same-machine shortcuts
    # (shared memory, cross-memory attach) would bypass the link.
    over_tcp = {"_transports": ["uv"], "_channels": ["basic"]} if address != "127.0.0.1" else {}
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=f"tcp://{address}:{port}",
        num_worker_threads=spec.rpc_threads,
        rpc_timeout=RPC_TIMEOUT_S,
        **over_tcp,  # type: ignore[arg-type]
    )
    world_size = 3 if spec.launch == "trio" else 2
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, rpc_backend_options=options)
    if rank == 0:
        try:
            result = measuring.measure(spec, SIZES[size], repeats, impl, row)
        except BaseException:
            rpc.shutdown(graceful=False)
            raise
        _write(out, result)
    if spec.kills_owner:
        # A graceful shutdown would wait for the killed owner: the others serve until rank 0
        # has written its figures, then everyone leaves at once.
        deadline = time.monotonic() + SHUTDOWN_TIMEOUT_S
        while rank != 0 and not os.path.exists(out) and time.monotonic() < deadline:
            time.sleep(0.05)
        rpc.shutdown(graceful=False)
        return 0
    try:
        rpc.shutdown(graceful=True, timeout=SHUTDOWN_TIMEOUT_S)
    except RuntimeError as error:
        # The measurements are already written; the store that rank 0 hosts can close under
        # rank 1's last shutdown barrier ("Connection reset by peer"), which changes nothing.
        print(f"benchmark worker{rank}: shutdown: {str(error).splitlines()[0]}", file=sys.stderr)
    return 0


def _write(path: str, result: object) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as file:
        json.dump(result, file)
    os.replace(tmp, path)


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except BaseException:
        traceback.print_exc()
        code = 1
    exit_now(code)
