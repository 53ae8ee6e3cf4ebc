"""Starting the demo's workers: spawned here on 127.0.0.1, or joined under ``torchrun``;
supervised until the master is done, and stopped on success, error and Ctrl-C."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc

from remote_module import _compat
from remote_module._process import end_processes, exit_now, exit_when_orphaned
from remote_module.demo import quiet, roles
from remote_module.demo.config import FIRST_TRAINER, MASTER, PS, DemoConfig


def run(config: DemoConfig) -> int:
    """Run the demo: join as one rank when ``RANK`` and ``WORLD_SIZE`` are set (``torchrun``
    sets them), otherwise spawn every worker here on 127.0.0.1. Returns the exit status."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return _join_from_env(config)
    return _spawn_all(config)


def _join_from_env(config: DemoConfig) -> int:
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if config.kill_owner_at is not None:
        # torchrun ends the whole group when one of its workers dies.
        print(
            "remote-module demo: error: --kill-owner-at runs only with the workers this command "
            "spawns (not under torchrun)",
            file=sys.stderr,
        )
        return 2
    if world_size != FIRST_TRAINER + config.trainers:
        print(
            f"remote-module demo: error: WORLD_SIZE={world_size} but --trainers "
            f"{config.trainers} needs {FIRST_TRAINER + config.trainers} processes "
            "(master, ps, trainers)",
            file=sys.stderr,
        )
        return 2
    exit_now(_run_worker(rank, world_size, config))


def _spawn_all(config: DemoConfig) -> int:
    """Start every worker on 127.0.0.1, wait, and clean up on success, error and Ctrl-C."""
    world_size = config.world_size
    # The store every worker meets at, hosted here as torchrun's agent hosts its own: on a port
    # the kernel picks as it binds, so no other process can take it before the workers come.
    store = dist.TCPStore(
        "127.0.0.1",
        0,
        is_master=True,
        wait_for_workers=False,
        timeout=timedelta(seconds=config.timeout),
    )
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(
            target=_spawned_worker,
            args=(rank, world_size, config, store.port),
            name=config.name(rank),
            daemon=False,
        )
        for rank in range(world_size)
    ]
    for process in processes:
        process.start()
    try:
        return _supervise(processes, config)
    except KeyboardInterrupt:
        print("\nremote-module demo: interrupted; stopping workers", file=sys.stderr)
        return 130
    finally:
        end_processes(processes, grace_s=5.0, terminate=True)


def _supervise(processes: list[Any], config: DemoConfig) -> int:
    master = processes[MASTER]
    deadline = time.monotonic() + config.timeout + 60 + config.steps * 2.0
    # With --kill-owner-at the parameter server dies by SIGKILL on purpose.
    killed = {processes[PS].name} if config.kill_owner_at is not None else set()

    def ended_well(process: Any) -> bool:
        return process.exitcode == 0 or (
            process.name in killed and process.exitcode == -signal.SIGKILL
        )

    while True:
        failed = [p for p in processes if p.exitcode is not None and not ended_well(p)]
        if failed:
            names = ", ".join(f"{p.name} (exit {p.exitcode})" for p in failed)
            print(f"remote-module demo: failed: {names}", file=sys.stderr)
            return 1
        if master.exitcode == 0:
            for process in processes:
                process.join(timeout=30)
            return 0 if all(ended_well(p) for p in processes) else 1
        if time.monotonic() > deadline:
            print("remote-module demo: timed out waiting for the workers", file=sys.stderr)
            return 1
        master.join(timeout=0.2)


def _spawned_worker(rank: int, world_size: int, config: DemoConfig, store_port: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor handles Ctrl-C
    exit_when_orphaned()  # and if the supervisor is killed, nobody waits for the group
    # What torchrun tells its workers: where the launcher's store is, and that it hosts it.
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(store_port),
        TORCHELASTIC_USE_AGENT_STORE="True",
    )
    exit_now(_run_worker(rank, world_size, config))


def _run_worker(rank: int, world_size: int, config: DemoConfig) -> int:
    _prepare_worker_process()
    options = rpc.TensorPipeRpcBackendOptions(
        init_method="env://",  # the store on MASTER_ADDR:MASTER_PORT
        rpc_timeout=config.timeout,
        num_worker_threads=16,
    )
    try:
        # The trainers' gloo group meets at the same store, and forms before RPC does, so no
        # trainer is asked to train before DDP can start. The launcher hosts the store
        # (TORCHELASTIC_USE_AGENT_STORE, torchrun's own flag); where it does not, rank 0 does,
        # and init_rpc's env:// store, multi-tenant too, shares that server in the same process.
        shared = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        store = dist.TCPStore(
            os.environ.get("MASTER_ADDR", "127.0.0.1"),
            int(os.environ.get("MASTER_PORT", "29500")),
            is_master=not shared and rank == MASTER,
            wait_for_workers=False,
            timeout=timedelta(seconds=config.timeout),
            multi_tenant=True,
        )
        with quiet.without_gloos_connection_lines():
            if FIRST_TRAINER <= rank < FIRST_TRAINER + config.trainers:
                dist.init_process_group(
                    "gloo",
                    store=dist.PrefixStore("trainers", store),
                    rank=rank - FIRST_TRAINER,
                    world_size=config.trainers,
                )
            rpc.init_rpc(
                config.name(rank), rank=rank, world_size=world_size, rpc_backend_options=options
            )
        if rank == MASTER:
            roles.master(config)
        if config.kill_owner_at is not None:
            _leave_without_the_dead(store, rank, config)
    except Exception as error:  # one clear line, then the supervisor stops everyone
        print(f"remote-module demo: {config.name(rank)}: {_one_line(error)}", file=sys.stderr)
        if os.environ.get("REMOTE_MODULE_DEMO_DEBUG"):
            traceback.print_exc()
        return 1
    rpc.shutdown(graceful=config.kill_owner_at is None)
    if dist.is_initialized():
        dist.destroy_process_group()
    if not shared and config.kill_owner_at is None:
        _store_host_leaves_last(store, rank, world_size, config)
    return 0


def _store_host_leaves_last(store: Any, rank: int, world_size: int, config: DemoConfig) -> None:
    """Where rank 0 hosts the store, a graceful ``rpc.shutdown`` still uses it in its last
    step (TensorPipe's join counts calls there): a host that left first reset the others'
    connections (``recvVector failed``, 1 of 2 loaded runs). Each rank says it is through;
    the host waits for all of them, bounded by the RPC timeout."""
    if rank != MASTER:
        try:
            store.add("shut", 1)
        except dist.DistError:  # the host is gone already: nothing is left to tell
            pass
        return
    _wait_for_count(store, "shut", world_size - 1, config.timeout)


def _leave_without_the_dead(store: Any, rank: int, config: DemoConfig) -> None:
    """A graceful ``rpc.shutdown`` waits for every worker, the killed parameter server too, and
    releases every RRef first. After a failover the master says instead when the run is over
    (a key in the store); every live worker then releases what it holds of the others and
    waits, bounded by the RPC timeout, until nothing it owns is held elsewhere (torch reports
    each RRef still held at a shutdown, "Detected RRef Leaks during shutdown"); the live
    workers leave together. RRefs to the dead parameter server stay held: releasing one has
    torch retry, and log, a delete message to it."""
    deadline = timedelta(seconds=config.timeout + 60 + config.steps * 2.0)
    if rank == MASTER:
        store.set("done", "1")
    else:
        store.wait(["done"], deadline)
    live = config.world_size - 1  # all but the parameter server
    gc.collect()  # the run's RemoteModules and optimizers (a failover's traceback holds some)
    _wait_until(lambda: _compat.rref_counts()["num_pending_futures"] == 0, config.timeout)
    store.add("released", 1)
    _wait_for_count(store, "released", live, config.timeout)
    _wait_until(lambda: _compat.rref_counts()["num_forks"] == 0, config.timeout)
    store.add("left", 1)
    _wait_for_count(store, "left", live, config.timeout)


def _wait_until(done: Callable[[], bool], within_s: float) -> None:
    """Poll ``done()`` until it is true, for at most ``within_s``."""
    give_up = time.monotonic() + within_s
    while not done() and time.monotonic() < give_up:
        time.sleep(0.05)


def _wait_for_count(store: Any, key: str, count: int, within_s: float) -> None:
    """Poll the store's counter ``key`` until it reaches ``count``, for at most ``within_s``."""
    _wait_until(lambda: store.add(key, 0) >= count, within_s)


def _prepare_worker_process() -> None:
    quiet.hide_torchs_notices()
    # The sparse embedding gradients come from torch's own backward; torch warns when the
    # choice not to check them is left implicit.
    torch.sparse.check_sparse_tensor_invariants.disable()


def _one_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):  # the root cause of an RPC error is its innermost message
        if "Error" in line and "On WorkerInfo" not in line and not line.startswith("File"):
            return line[:300]
    return lines[0][:300] if lines else type(error).__name__
