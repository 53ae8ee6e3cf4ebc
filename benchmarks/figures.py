"""The measurements, run on rank 0 (the caller) of a benchmark pair; rank 1 owns the modules.

Each ``measure_*`` function returns ``{row: {impl: [value per repeat]}}`` in the row's unit.
Implementations are interleaved A B A B within every repeat; each row's iteration count is
calibrated once against its reference so that a repeat takes at least ``Sizes.min_time_s``.
"""

from __future__ import annotations

import collections
import os
import signal
import statistics
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import nn
from torch.distributed.nn import RemoteModule as UpstreamRemoteModule
from torch.distributed.nn.api.remote_module import _RemoteModule as UpstreamInterfaceRemoteModule

import benchmarks.generated  # noqa: F401  (build-time stubs, imported as a user's program would)
import remote_module
from benchmarks import interfaces
from benchmarks.interfaces import TINY_FEATURES, TinyInterface, UngeneratedTinyInterface
from benchmarks.spec import (
    CHECKPOINT_EVERY,
    FLOOR,
    FLOOR_RREF,
    MANY_MODULES,
    OURS,
    TABLE_DIM,
    TABLE_ROWS,
    UPSTREAM,
    WIRE_IMPLS,
    WIRE_MIB,
    Figure,
    Sizes,
    rotated,
)
from remote_module import _shared
from remote_module.runtime.caller import pending
from remote_module.runtime.values import check_arguments

OWNER = "worker1"
REMOTE_DEVICE = f"{OWNER}/cpu"
STANDBY = "worker2"  # a trio figure's third process
ASYNC_IN_FLIGHT = 32

Results = dict[str, dict[str, list[float]]]
# A callable that runs ``n`` iterations of one implementation.
Loop = Callable[[int], None]


def build(
    impl: str,
    module_cls: type[nn.Module],
    args: tuple[Any, ...],
    scriptable: bool,
    interface: Any = TinyInterface,
) -> Any:
    """A RemoteModule of ``impl`` (ours or upstream) on the owner; ``interface`` when
    ``scriptable``."""
    if impl == OURS:
        if scriptable:
            return remote_module.RemoteModule(
                REMOTE_DEVICE, module_cls, args, module_interface_cls=interface
            )
        return remote_module.RemoteModule(REMOTE_DEVICE, module_cls, args)
    if scriptable:  # upstream's public class does not take an interface
        return UpstreamInterfaceRemoteModule(
            REMOTE_DEVICE, module_cls, args, _module_interface_cls=interface
        )
    return UpstreamRemoteModule(REMOTE_DEVICE, module_cls, args)


def floor_rref(
    module_cls: Callable[..., nn.Module], args: tuple[Any, ...], scriptable: bool
) -> Any:
    """The floor's RRef: a plain module (``rpc.remote``) or a scripted one typed by the
    interface (created, scripted and wrapped on the owner)."""
    if scriptable:
        return rpc.rpc_sync(OWNER, interfaces.create_scripted, (module_cls, args))
    rref = rpc.remote(OWNER, module_cls, args)
    rref._get_future().wait()
    return rref


# --- Timing -------------------------------------------------------------------------------


def _seconds(loop: Loop, n: int) -> float:
    start = time.perf_counter()
    loop(n)
    return time.perf_counter() - start


def calibrate(loop: Loop, sizes: Sizes, min_iters: int | None = None, step: int = 1) -> int:
    """Iterations (a multiple of ``step``) for one repeat to last ``sizes.min_time_s``."""
    n = max(step, (min_iters or sizes.min_iters) // step * step)
    while True:
        elapsed = _seconds(loop, n)
        if elapsed >= sizes.min_time_s or n >= sizes.max_iters:
            return n
        grow = 1.25 * sizes.min_time_s / max(elapsed, 1e-6)
        n = min(sizes.max_iters, max(2 * n, int(n * grow)))
        n = max(step, n // step * step)


def interleave(
    rows: dict[str, dict[str, Loop]],
    iters: dict[str, int],
    repeats: int,
    convert: Mapping[str, Callable[[float, int], float]],
    blocks: int = 1,
    steps: dict[str, int] | None = None,
) -> Results:
    """Run every implementation of every row once per repeat, in order (A B A B).

    With ``blocks > 1`` a repeat's iterations are split into that many chunks, themselves
    interleaved A B A B, so slow drift of the machine hits every implementation alike.
    """
    results: Results = {row: {impl: [] for impl in loops} for row, loops in rows.items()}
    chunks: dict[str, tuple[int, int]] = {}
    for row, n in iters.items():
        step = (steps or {}).get(row, 1)
        count = max(1, min(blocks, n // step))
        chunks[row] = (max(step, n // count // step * step), count)
    for row, loops in rows.items():  # warm every implementation once
        for loop in loops.values():
            loop(max(1, iters[row] // 8))
    for _ in range(repeats):
        for row, loops in rows.items():
            chunk, count = chunks[row]
            elapsed = dict.fromkeys(loops, 0.0)
            for block in range(count):
                for impl in rotated(list(loops), block):
                    elapsed[impl] += _seconds(loops[impl], chunk)
            for impl in loops:
                results[row][impl].append(convert[row](elapsed[impl], chunk * count))
    return results


def per_call_us(elapsed: float, n: int) -> float:
    return elapsed / n * 1e6


def gbps(nbytes: int) -> Callable[[float, int], float]:
    return lambda elapsed, n: nbytes * n / elapsed / 1e9


# --- Loops ----------------------------------------------------------------------------------


def sync_loop(call: Callable[[torch.Tensor], Any], x: torch.Tensor) -> Loop:
    def loop(n: int) -> None:
        for _ in range(n):
            call(x)

    return loop


def async_loop(call: Callable[[torch.Tensor], torch.futures.Future[Any]], x: torch.Tensor) -> Loop:
    """``n`` calls kept ``ASYNC_IN_FLIGHT`` in flight throughout: the oldest call's future is
    waited (``.wait()``: its value taken, as a caller takes it; after every callback a future
    of ours runs), then the next call is sent, so the window refills as calls finish instead of
    draining every ``ASYNC_IN_FLIGHT`` calls; the last ones are waited before the time ends."""

    def loop(n: int) -> None:
        window = collections.deque(call(x) for _ in range(min(n, ASYNC_IN_FLIGHT)))
        for _ in range(n - len(window)):
            window.popleft().wait()
            window.append(call(x))
        while window:
            window.popleft().wait()

    return loop


def floor_sync(fn: Any, reference: Any) -> Callable[[torch.Tensor], Any]:
    """``rpc_sync`` of a floor function taking the module's RRef (or key) and ``x``."""
    return lambda x: rpc.rpc_sync(OWNER, fn, (reference, x))


def floor_async(fn: Any, reference: Any) -> Callable[[torch.Tensor], torch.futures.Future[Any]]:
    return lambda x: rpc.rpc_async(OWNER, fn, (reference, x))


# --- Figures --------------------------------------------------------------------------------


def measure_tiny_call(sizes: Sizes, repeats: int) -> Results:
    x = torch.randn(1, TINY_FEATURES)
    args = (TINY_FEATURES, TINY_FEATURES)
    rows: dict[str, dict[str, Loop]] = {}
    for scriptable, suffix in ((False, "nonscriptable"), (True, "scriptable")):
        ours = build(OURS, nn.Linear, args, scriptable)
        upstream = build(UPSTREAM, nn.Linear, args, scriptable)
        rref = floor_rref(nn.Linear, args, scriptable)
        rows[f"sync_{suffix}"] = {
            OURS: sync_loop(ours.forward, x),
            UPSTREAM: sync_loop(upstream.forward, x),
        }
        rows[f"async{ASYNC_IN_FLIGHT}_{suffix}"] = {
            OURS: async_loop(ours.forward_async, x),
            UPSTREAM: async_loop(upstream.forward_async, x),
        }
        floors: dict[str, tuple[Any, Any]]
        if scriptable:  # TorchScript can only send the RRef
            floors = {FLOOR: (interfaces.run_script, rref)}
        else:  # the engine's floor finds the module by a key; the RRef's own cost beside it
            key = rpc.rpc_sync(OWNER, interfaces.file_module, (rref,))
            floors = {
                FLOOR: (interfaces.run_keyed, key),
                FLOOR_RREF: (interfaces.run_python, rref),
            }
        for name, (fn, reference) in floors.items():
            rows[f"sync_{suffix}"][name] = sync_loop(floor_sync(fn, reference), x)
            rows[f"async{ASYNC_IN_FLIGHT}_{suffix}"][name] = async_loop(
                floor_async(fn, reference), x
            )
    steps = {row: ASYNC_IN_FLIGHT if "async" in row else 1 for row in rows}
    iters = {row: calibrate(loops[FLOOR], sizes, step=steps[row]) for row, loops in rows.items()}
    convert = dict.fromkeys(rows, per_call_us)
    return interleave(rows, iters, repeats, convert, sizes.blocks, steps)


def measure_large_tensors(sizes: Sizes, repeats: int) -> Results:
    rows: dict[str, dict[str, Loop]] = {}
    convert: dict[str, Callable[[float, int], float]] = {}
    ours = build(OURS, nn.Identity, (), False)
    upstream = build(UPSTREAM, nn.Identity, (), False)
    rref = floor_rref(nn.Identity, (), False)
    for mib in (4, 64):
        x = torch.randn(mib * 2**20 // 4)
        rows[f"{mib}MiB"] = {
            OURS: sync_loop(ours.forward, x),
            UPSTREAM: sync_loop(upstream.forward, x),
            FLOOR: sync_loop(floor_sync(interfaces.run_python, rref), x),
        }
        convert[f"{mib}MiB"] = gbps(2 * x.numel() * x.element_size())  # there and back
    iters = {row: calibrate(loops[FLOOR], sizes, min_iters=2) for row, loops in rows.items()}
    return interleave(rows, iters, repeats, convert, sizes.blocks)


def measure_wire(sizes: Sizes, repeats: int) -> Results:
    """Round trips of float32 tensors through nn.Identity on one machine: ours with each
    wire dtype (float32: none), in ms per MiB of float32 data moved there and back."""
    row, x = f"{WIRE_MIB}MiB_loopback", _wire_input()
    loops = {impl: sync_loop(rm.forward, x) for impl, rm in _wire_modules().items()}
    iters = {row: calibrate(loops["float32"], sizes, min_iters=2)}
    mib = 2 * x.numel() * x.element_size() / 2**20
    convert = {row: lambda elapsed, n: elapsed / n * 1e3 / mib}
    return interleave({row: loops}, iters, repeats, convert, min(sizes.blocks, 2))


def measure_wire_shaped(sizes: Sizes, repeats: int) -> Results:
    """The same across the shaped link (GB/s of float32 data), then the bytes that crossed
    the link per round trip, and per forward and backward under distributed autograd."""
    x, modules = _wire_input(), _wire_modules()
    loops = {impl: sync_loop(rm.forward, x) for impl, rm in modules.items()}
    codes, scales = _shared._quantize(x)
    loops["int8_bytes_only"] = sync_loop(lambda _: rpc.rpc_sync(OWNER, _echo, (codes, scales)), x)
    speed = f"{WIRE_MIB}MiB_1gbit"
    iters = {speed: calibrate(loops["float32"], sizes, min_iters=2)}
    convert = {speed: gbps(2 * x.numel() * x.element_size())}
    results = interleave({speed: loops}, iters, repeats, convert, min(sizes.blocks, 2))
    leaf, weights = x.clone().requires_grad_(), torch.randn_like(x)

    def step(rm: Any) -> None:  # dense gradients (a sum's would be one value, broadcast)
        with dist_autograd.context() as context_id:
            dist_autograd.backward(context_id, [(rm(leaf) * weights).sum()])

    for row, run in (
        (f"{WIRE_MIB}MiB_bytes", lambda rm: rm(x)),
        (f"{WIRE_MIB}MiB_autograd_bytes", step),
    ):
        results[row] = {impl: [] for impl in modules}
        for repeat in range(repeats):
            for impl in rotated(list(modules), repeat):
                before = _link_bytes()
                for _ in range(2):
                    run(modules[impl])
                results[row][impl].append((_link_bytes() - before) / 2 / 2**20)
    return results


def _echo(*args: Any) -> tuple[Any, ...]:
    return args


def _wire_modules() -> dict[str, Any]:
    """A RemoteModule of nn.Identity per wire dtype (float32: none)."""
    return {
        impl: remote_module.RemoteModule(
            REMOTE_DEVICE,
            nn.Identity,
            wire_dtype=None if impl == "float32" else getattr(torch, impl),
        )
        for impl in WIRE_IMPLS
    }


def _wire_input() -> torch.Tensor:
    """The wire figures' float32 tensor: WIRE_MIB MiB."""
    return torch.randn(WIRE_MIB * 2**20 // 4)


def _link_bytes() -> int:
    """Bytes this host's end of the shaped link has received and sent so far."""
    folder = f"/sys/class/net/{os.environ['RM_BENCH_LINK']}/statistics"
    total = 0
    for direction in ("rx", "tx"):
        with open(f"{folder}/{direction}_bytes") as counter:
            total += int(counter.read())
    return total


def measure_jit_loop(sizes: Sizes, repeats: int) -> Results:
    x = torch.randn(1, TINY_FEATURES)
    args = (TINY_FEATURES, TINY_FEATURES)
    scripted = {
        impl: torch.jit.script(build(impl, nn.Linear, args, True)) for impl in (OURS, UPSTREAM)
    }
    rref = floor_rref(nn.Linear, args, True)
    n = sizes.loop_n

    def remote(module: Any) -> Loop:
        def loop(count: int) -> None:
            for _ in range(count):
                interfaces.remote_loop(module, x, n)

        return loop

    def floor(count: int) -> None:
        for _ in range(count):
            interfaces.floor_loop(OWNER, rref, x, n)

    rows = {
        "loop": {OURS: remote(scripted[OURS]), UPSTREAM: remote(scripted[UPSTREAM]), FLOOR: floor}
    }
    iters = {"loop": calibrate(floor, sizes, min_iters=1)}
    convert = {"loop": lambda elapsed, count: elapsed / (count * n) * 1e6}
    return interleave(rows, iters, repeats, convert, sizes.blocks)


def measure_type_check(sizes: Sizes, repeats: int) -> Results:
    x = torch.randn(1, TINY_FEATURES)
    rm = build(OURS, nn.Linear, (TINY_FEATURES, TINY_FEATURES), True)

    def checked(enabled: bool) -> Loop:
        def loop(n: int) -> None:
            remote_module.set_type_checking(enabled)
            try:
                for _ in range(n):
                    rm.forward(x)
            finally:
                remote_module.set_type_checking(True)

        return loop

    hints = rm._rm_record.generated.__dict__["_rm_forward_hints"]

    def checks(n: int) -> None:
        for _ in range(n):
            check_arguments("forward", (x,), hints)

    rows: dict[str, dict[str, Loop]] = {
        "sync_scriptable": {"on": checked(True), "off": checked(False)},
        "checks_alone": {"checks": checks},
    }
    iters = {
        "sync_scriptable": calibrate(rows["sync_scriptable"]["off"], sizes),
        "checks_alone": calibrate(checks, sizes, min_iters=1000),
    }
    # The checks cost far less than the call's noise: many short alternating blocks; and
    # timed alone, which the noise of the calls cannot hide.
    convert = dict.fromkeys(rows, per_call_us)
    return interleave(rows, iters, repeats, convert, sizes.blocks * 8)


def _scriptable(impl: str, interface: Any = TinyInterface) -> Any:
    """A scriptable module on the owner: a RemoteModule built with ``interface``, or the
    floor's create + script + interface-typed RRef."""
    args = (TINY_FEATURES, TINY_FEATURES)
    if impl == FLOOR:
        return rpc.rpc_sync(OWNER, interfaces.create_scripted, (nn.Linear, args))
    return build(impl, nn.Linear, args, True, interface)


def _to_script(impl: str, made: Any) -> nn.Module:
    """What the scripting rows script: the RemoteModule, or for the floor a plain nn.Linear
    (the cost of torch.jit.script for any module at all)."""
    return nn.Linear(TINY_FEATURES, TINY_FEATURES) if impl == FLOOR else made


def _script_built(built: dict[str, list[Any]], impl: str, index: int) -> Callable[[], Any]:
    """Scripting what ``built`` holds for ``impl`` at ``index``, ready to time."""
    return partial(torch.jit.script, _to_script(impl, built[impl][index]))


def _nonscriptable(impl: str) -> Any:
    """A module made by a RemoteModule without interface (or ``rpc.remote``), once the owner
    confirms it exists."""
    args = (TINY_FEATURES, TINY_FEATURES)
    if impl == FLOOR:
        rref = rpc.remote(OWNER, nn.Linear, args)
    else:
        rref = build(impl, nn.Linear, args, False).module_rref
    rref._get_future().wait()
    return rref


def measure_construction(sizes: Sizes, impl: str) -> dict[str, float]:
    """One repeat of one implementation, in fresh processes: its first construction comes
    first of all, then the first of an interface without build-time stubs (and that
    RemoteModule's first forward), then the first torch.jit.script."""
    values: dict[str, float] = {}
    start = time.perf_counter()
    first = _scriptable(impl)
    values["scriptable_first"] = (time.perf_counter() - start) * 1e3
    if impl == OURS:  # untimed: the owner creates it, and loads its generated module, after
        # our constructor returned; that work is the first construction's, not the next row's
        first.get_module_rref()
        pending.wait_for_owner(first, "the benchmark")
    if impl != FLOOR:
        x = torch.randn(1, TINY_FEATURES)
        start = time.perf_counter()
        made = _scriptable(impl, UngeneratedTinyInterface)  # rendered in memory
        built = time.perf_counter()
        made.forward(x)  # ours: waits for the owner's load of the generated module
        values["scriptable_first_no_codegen"] = (built - start) * 1e3
        values["scriptable_first_no_codegen_call"] = (time.perf_counter() - start) * 1e3
    module = _to_script(impl, first)
    start = time.perf_counter()
    torch.jit.script(module)
    values["script_first"] = (time.perf_counter() - start) * 1e3
    return values


def measure_first_call(sizes: Sizes, impl: str) -> dict[str, float]:
    """One repeat of one implementation, in fresh processes: the first construction without
    interface and its first forward (the floor: rpc.remote and a first rpc_sync)."""
    x = torch.randn(1, TINY_FEATURES)
    args = (TINY_FEATURES, TINY_FEATURES)
    start = time.perf_counter()
    if impl == FLOOR:
        rref = rpc.remote(OWNER, nn.Linear, args)
        rpc.rpc_sync(OWNER, interfaces.run_python, (rref, x))
    else:
        build(impl, nn.Linear, args, False).forward(x)
    return {"nonscriptable": (time.perf_counter() - start) * 1e3}


def measure_construction_warm(sizes: Sizes, repeats: int) -> Results:
    """Constructions and scripting once every implementation is warm, in one pair, one at a
    time in rotating order (A B C, B C A, ...); per repeat the median of
    ``sizes.warm_constructions`` of each."""
    impls = [OURS, UPSTREAM, FLOOR]
    keep: list[Any] = []  # nothing is freed while measuring: no deletions in flight
    for impl in impls:  # first constructions and the first scripting are not measured here
        first = _scriptable(impl)
        torch.jit.script(_to_script(impl, first))
        keep += [first, _nonscriptable(impl)]
    rows = ("scriptable_warm", "script_again", "nonscriptable")
    results: Results = {row: {impl: [] for impl in impls} for row in rows}
    count = sizes.warm_constructions
    for _ in range(repeats):
        samples: Results = {row: {impl: [] for impl in impls} for row in rows}
        built = _timed_pass(
            impls, count, samples["scriptable_warm"], lambda impl, _: partial(_scriptable, impl)
        )
        # Scripting in a pass of its own: not in the wake of a construction's last messages.
        _timed_pass(
            impls,
            count,
            samples["script_again"],
            partial(_script_built, built),
        )
        rrefs = _timed_pass(
            impls, count, samples["nonscriptable"], lambda impl, _: partial(_nonscriptable, impl)
        )
        keep += [value for made in (built, rrefs) for values in made.values() for value in values]
        for row in rows:
            for impl in impls:
                results[row][impl].append(statistics.median(samples[row][impl]) * 1e3)
    return results


def _build_on(impl: str, owner: str) -> Any:
    """A tiny scriptable module on ``owner`` built by ``impl`` (the floor: ``create_scripted``
    there, awaited)."""
    args = (TINY_FEATURES, TINY_FEATURES)
    if impl == FLOOR:
        return rpc.rpc_sync(owner, interfaces.create_scripted, (nn.Linear, args))
    if impl == OURS:
        return remote_module.RemoteModule(
            f"{owner}/cpu", nn.Linear, args, module_interface_cls=TinyInterface
        )
    return UpstreamInterfaceRemoteModule(
        f"{owner}/cpu", nn.Linear, args, _module_interface_cls=TinyInterface
    )


def _call_built(impl: str, owner: str, made: Any, x: torch.Tensor) -> Any:
    if impl == FLOOR:
        return rpc.rpc_sync(owner, interfaces.run_script, (made, x))
    return made.forward(x)


def measure_construction_many(sizes: Sizes, repeats: int) -> Results:
    """``MANY_MODULES`` constructions with an interface spread over the trio's two owners,
    then one call on each, per implementation in rotating order (all warm first); per repeat
    the median of ``sizes.blocks`` such batches of each."""
    impls = [OURS, UPSTREAM, FLOOR]
    owners = [OWNER, STANDBY]
    x = torch.randn(1, TINY_FEATURES)
    keep: list[Any] = []  # nothing is freed while measuring: no deletions in flight

    def batch(impl: str) -> float:
        start = time.perf_counter()
        placed = [owners[index % 2] for index in range(MANY_MODULES)]
        made = [_build_on(impl, owner) for owner in placed]
        for owner, module in zip(placed, made, strict=True):
            _call_built(impl, owner, module, x)
        elapsed = time.perf_counter() - start
        keep.extend(made)
        return elapsed * 1e3

    for impl in impls:  # first constructions (and their owners' compilation) not measured
        batch(impl)
    results: Results = {"sixteen_then_call": {impl: [] for impl in impls}}
    for _ in range(repeats):
        samples: dict[str, list[float]] = {impl: [] for impl in impls}
        for block in range(sizes.blocks):
            for impl in rotated(impls, block):
                samples[impl].append(batch(impl))
        for impl in impls:
            results["sixteen_then_call"][impl].append(statistics.median(samples[impl]))
    return results


def _timed_pass(
    impls: list[str],
    count: int,
    seconds: dict[str, list[float]],
    prepare: Callable[[str, int], Callable[[], Any]],
) -> dict[str, list[Any]]:
    """For each of ``count`` indices and every implementation in rotating order, time the
    call ``prepare(impl, index)`` returns (its set-up stays outside the timing) into
    ``seconds[impl]``; returns what the calls returned."""
    made: dict[str, list[Any]] = {impl: [] for impl in impls}
    for index in range(count):
        for impl in rotated(impls, index):
            call = prepare(impl, index)
            start = time.perf_counter()
            made[impl].append(call())
            seconds[impl].append(time.perf_counter() - start)
    return made


def measure_memcpy(sizes: Sizes, repeats: int) -> Results:
    src = torch.randn(64 * 2**20 // 4)
    dst = torch.empty_like(src)
    nbytes = src.numel() * src.element_size()

    def loop(n: int) -> None:
        for _ in range(n):
            dst.copy_(src)

    rows: dict[str, dict[str, Loop]] = {"64MiB": {"copy_": loop}}
    iters = {"64MiB": calibrate(loop, sizes, min_iters=2)}
    return interleave(rows, iters, repeats, {"64MiB": gbps(nbytes)})


def _table(**options: Any) -> Any:
    """The demo's embedding table as a RemoteModule on the owner, built as the demo builds it."""
    import remote_module.examples.generated  # (its build-time stubs register on import)
    from remote_module.examples.embedding import EmbeddingBagInterface, RemoteEmbeddingBag

    return remote_module.RemoteModule(
        REMOTE_DEVICE,
        RemoteEmbeddingBag,
        args=(TABLE_ROWS, TABLE_DIM, 0),
        kwargs={"sparse": True},
        module_interface_cls=EmbeddingBagInterface,
        timeout=60.0,
        **options,
    )


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of the demo's size: 64 bags of 8 ids."""
    generator = torch.Generator().manual_seed(0)
    indices = torch.randint(0, TABLE_ROWS, (64 * 8,), generator=generator)
    return indices, torch.arange(0, 64 * 8, 8)


def measure_failover(sizes: Sizes, repeats: int) -> Results:
    """One owner death per trio: the SIGKILL to the first forward that succeeds on the
    standby; then the standby's own time to build the table (warm by then)."""
    table = _table(standby=[f"{STANDBY}/cpu"])
    indices, offsets = _batch()
    table(indices, offsets)
    table.checkpoint()
    owner_pid = rpc.rpc_sync(OWNER, interfaces.pid)
    os.kill(owner_pid, signal.SIGKILL)
    killed = time.perf_counter()
    try:
        table(indices, offsets)
    except remote_module.OwnerFailover:
        pass
    table(indices, offsets)
    death_ms = (time.perf_counter() - killed) * 1e3
    build_s = rpc.rpc_sync(STANDBY, interfaces.built_table_seconds, (TABLE_ROWS, TABLE_DIM))
    return {"death_to_first_call": {OURS: [death_ms], "standby_build": [build_s * 1e3]}}


def measure_checkpoint(sizes: Sizes, repeats: int) -> Results:
    """Training steps of the demo's table without a standby and with checkpoint_every, A B A
    B in whole intervals; then explicit checkpoints of it, per MiB."""
    import torch.distributed.autograd as dist_autograd
    from torch.distributed.optim import DistributedOptimizer

    every = f"every_{CHECKPOINT_EVERY}"
    tables = {
        "none": _table(),
        every: _table(standby=[f"{STANDBY}/cpu"], checkpoint_every=CHECKPOINT_EVERY),
    }
    indices, offsets = _batch()

    def steps(table: Any) -> Loop:
        optimizer = DistributedOptimizer(torch.optim.Adagrad, table.remote_parameters(), lr=0.1)

        def loop(n: int) -> None:
            for _ in range(n):
                with dist_autograd.context() as context_id:
                    loss = table(indices, offsets).sum()
                    dist_autograd.backward(context_id, [loss])
                    optimizer.step(context_id)

        return loop

    loops = {impl: steps(table) for impl, table in tables.items()}
    checkpointed = tables[every]
    state_mib = TABLE_ROWS * TABLE_DIM * 4 / 2**20

    def checkpoints(n: int) -> None:
        for _ in range(n):
            checkpointed.checkpoint()

    rows: dict[str, dict[str, Loop]] = {
        "train_step": loops,
        "checkpoint_per_mib": {"checkpoint": checkpoints},
    }
    iters = {
        "train_step": calibrate(
            loops["none"], sizes, min_iters=CHECKPOINT_EVERY, step=CHECKPOINT_EVERY
        ),
        "checkpoint_per_mib": calibrate(checkpoints, sizes, min_iters=4),
    }
    convert = {
        "train_step": lambda elapsed, n: elapsed / n * 1e3,
        "checkpoint_per_mib": lambda elapsed, n: elapsed / n * 1e3 / state_mib,
    }
    return interleave(
        rows, iters, repeats, convert, sizes.blocks, steps={"train_step": CHECKPOINT_EVERY}
    )


PAIR_FIGURES: dict[str, Callable[[Sizes, int], Results]] = {
    "tiny_call": measure_tiny_call,
    "large_tensors": measure_large_tensors,
    "wire": measure_wire,
    "wire_shaped": measure_wire_shaped,
    "construction_warm": measure_construction_warm,
    "construction_many": measure_construction_many,
    "jit_loop": measure_jit_loop,
    "type_check": measure_type_check,
    "memcpy": measure_memcpy,
    "failover": measure_failover,
    "checkpoint": measure_checkpoint,
}


FRESH_FIGURES: dict[str, Callable[[Sizes, str], dict[str, float]]] = {
    "construction": measure_construction,
    "first_call": measure_first_call,
}


def measure(
    figure: Figure, sizes: Sizes, repeats: int, impl: str | None, row: str | None = None
) -> Any:
    """A figure's samples (``row`` is for ``pair_per_row`` figures, none of which is here)."""
    if figure.launch == "fresh":
        if impl is None:
            raise ValueError(f"{figure.name} needs --impl")
        return FRESH_FIGURES[figure.name](sizes, impl)
    return PAIR_FIGURES[figure.name](sizes, repeats)
