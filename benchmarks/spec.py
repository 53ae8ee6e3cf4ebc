"""What the suite measures: figures, their rows and implementations, and the two sizes.

Plain data (no torch import), shared by the runner (``benchmarks.run``) and the workers
(``benchmarks.figures``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

OURS = "ours"
UPSTREAM = "upstream"
FLOOR = "floor"
FLOOR_RREF = "floor_rref"  # the floor with the RRef in the arguments, for reference

# A figure runs in one pair of processes (``pair``), a new pair per repeat and implementation
# (``fresh``), one process without RPC (``single``), a new bare interpreter per repeat and
# implementation (``interpreter``), or a pair across two network namespaces whose veth link is
# shaped (``shaped``: needs root, iproute2 and tc; skipped with the reason elsewhere), or a
# caller, an owner and the owner's standby (``trio``: ranks 0, 1, 2), or ``remote-module demo``
# itself (``demo``: one run per repeat and implementation).
Launch = Literal["pair", "fresh", "single", "interpreter", "shaped", "trio", "demo"]
Size = Literal["smoke", "full"]


@dataclass(frozen=True)
class Row:
    """One measured quantity of a figure, for every implementation in ``impls``."""

    name: str
    unit: str
    impls: tuple[str, ...]
    reference: str | None  # the implementation ratios are taken against
    higher_is_better: bool = False
    description: str = ""


@dataclass(frozen=True)
class Figure:
    """A figure runs in its own worker processes (see :data:`Launch`)."""

    name: str
    launch: Launch
    rows: tuple[Row, ...]
    description: str = ""
    # A ``pair`` figure whose every repeat gets a process pair of its own: where what one pair
    # happens to be (its threads' cores, its heap) moves a ratio more than the repeats do.
    pair_per_repeat: bool = False
    # The figure SIGKILLs its owner (rank 1) on purpose: its exit is not a failure.
    kills_owner: bool = False
    # A ``fresh`` figure whose every row gets process pairs of its own: each row times what
    # its processes do first (the worker is told the row).
    pair_per_row: bool = False
    # The module whose ``measure`` runs the figure; both ranks import it before RPC starts.
    module: str = "benchmarks.figures"
    # Every rank's RPC agent threads (``num_worker_threads``; TensorPipe's default is 16).
    rpc_threads: int = 8


@dataclass(frozen=True)
class Sizes:
    """Iteration counts: a repeat of a row runs until ``min_time_s`` (calibrated against the
    reference), within ``[min_iters, max_iters]`` calls."""

    min_time_s: float
    min_iters: int
    max_iters: int
    warm_constructions: int
    loop_n: int
    blocks: int  # chunks a repeat is split into, interleaved A B A B


SIZES: dict[str, Sizes] = {
    "smoke": Sizes(
        min_time_s=0.0, min_iters=8, max_iters=32, warm_constructions=1, loop_n=8, blocks=1
    ),
    "full": Sizes(
        min_time_s=0.2, min_iters=16, max_iters=200_000, warm_constructions=48, loop_n=64, blocks=8
    ),
}
DEFAULT_REPEATS = {"smoke": 2, "full": 7}

_CALLS = (OURS, UPSTREAM, FLOOR)
_KEYED = (OURS, UPSTREAM, FLOOR, FLOOR_RREF)
_US = "us/call"
WIRE_MIB = 16
SHAPED_RATE = "1gbit"
# The wire figures' implementations: float32 is wire_dtype None.
WIRE_IMPLS = ("float32", "bfloat16", "int8")
WIRE_IMPLS_DEMO = ("float32", "bfloat16", "float16", "int8")
# The demo's embedding table (remote_module.examples.embedding), and its checkpoint interval.
TABLE_ROWS, TABLE_DIM, CHECKPOINT_EVERY = 100_000, 16, 50
MANY_MODULES = 16  # construction_many
# The batching figure: concurrent callers (threads over ranks 0 and 2), and the agents'
# threads: each call queued on the owner holds one of its threads until its batch has run.
BATCHING_CALLERS = (1, 4, 16)
BATCHING_RPC_THREADS = 32


def _batching_rows() -> tuple[Row, ...]:
    rows: list[Row] = []
    for callers in BATCHING_CALLERS:
        spread = "rank 0" if callers == 1 else f"{callers // 2} on each of ranks 0 and 2"
        rows += [
            Row(
                f"callers{callers}_calls_per_s",
                "calls/s",
                ("off", "on"),
                "off",
                higher_is_better=True,
                description=f"{callers} concurrent callers ({spread}), one-row forward calls in "
                "a closed loop: calls completed per second (each process's over its window, "
                "summed); off: batching=None, on: Batching(max_batch_size=64)",
            ),
            Row(f"callers{callers}_p50", "ms", ("off", "on"), "off", description="median latency"),
            Row(f"callers{callers}_p95", "ms", ("off", "on"), "off", description="p95 latency"),
        ]
    most = max(BATCHING_CALLERS)
    rows.append(
        Row(
            f"callers{most}_rows_per_run",
            "rows/run",
            ("off", "on"),
            "off",
            higher_is_better=True,
            description=f"at {most} callers, rows the module ran per run (the owner's batches)",
        )
    )
    return tuple(rows)


FIGURES: tuple[Figure, ...] = (
    Figure(
        "tiny_call",
        "pair",
        (
            Row(
                "sync_nonscriptable",
                _US,
                _KEYED,
                FLOOR,
                description="rm.forward(x) vs rpc_sync(run_keyed): no RRef in the arguments "
                "(floor_rref: rpc_sync(run_python), the RRef in them)",
            ),
            Row(
                "async32_nonscriptable",
                _US,
                _KEYED,
                FLOOR,
                description="forward_async with 32 in flight throughout (the oldest waited, "
                "then the next sent) vs rpc_async(run_keyed) the same way",
            ),
            Row(
                "sync_scriptable",
                _US,
                _CALLS,
                FLOOR,
                description="rm.forward(x), interface, vs rpc_sync(run_script)",
            ),
            Row(
                "async32_scriptable",
                _US,
                _CALLS,
                FLOOR,
                description="forward_async with 32 in flight throughout, interface, vs "
                "rpc_async(run_script) the same way",
            ),
        ),
        "1x16 float32 through nn.Linear(16, 16) on the owner",
    ),
    Figure(
        "large_tensors",
        "pair",
        (
            Row(
                "4MiB",
                "GB/s",
                _CALLS,
                FLOOR,
                higher_is_better=True,
                description="round-trip bytes / time",
            ),
            Row(
                "64MiB",
                "GB/s",
                _CALLS,
                FLOOR,
                higher_is_better=True,
                description="round-trip bytes / time",
            ),
        ),
        "float32 through nn.Identity (non-scriptable) vs rpc_sync(run_python)",
    ),
    Figure(
        "construction",
        "fresh",
        (
            Row(
                "scriptable_first",
                "ms",
                _CALLS,
                FLOOR,
                description="first construction in fresh processes (ours: stubs generated at "
                "build time); floor: rpc_sync(create + script + RRef)",
            ),
            Row(
                "scriptable_first_no_codegen",
                "ms",
                (OURS, UPSTREAM),
                UPSTREAM,
                description="then the first of an interface with no build-time stubs "
                "(rendered in memory)",
            ),
            Row(
                "scriptable_first_no_codegen_call",
                "ms",
                (OURS, UPSTREAM),
                UPSTREAM,
                description="that construction and its first forward, timed together (ours: "
                "the owner loads the generated module after replying; the call waits for it)",
            ),
            Row(
                "script_first",
                "ms",
                _CALLS,
                UPSTREAM,
                description="torch.jit.script(rm), first in the process; "
                "floor: torch.jit.script(nn.Linear)",
            ),
        ),
        "constructor time on the caller; a new process pair per repeat and implementation",
    ),
    Figure(
        "first_call",
        "fresh",
        (
            Row(
                "nonscriptable",
                "ms",
                _CALLS,
                FLOOR,
                description="first construction without interface + first forward, in fresh "
                "processes; floor: rpc.remote(nn.Linear) + rpc_sync(run_python)",
            ),
        ),
        "a new process pair per repeat and implementation",
    ),
    Figure(
        "fresh_sequence",
        "fresh",
        (
            Row(
                "stubs",
                "ms",
                (OURS, UPSTREAM),
                UPSTREAM,
                description="two constructions with two interfaces (build-time stubs, "
                "imported by ours' processes at start), torch.jit.script of each, then a "
                "construction without interface and its first forward, timed as one",
            ),
            Row(
                "no_stubs",
                "ms",
                (OURS, UPSTREAM),
                UPSTREAM,
                description="the same with two interfaces without build-time stubs (a user's "
                "plain interfaces: rendered in memory, the render cache warm)",
            ),
        ),
        "a whole first sequence in new processes: a new process pair per repeat, row and "
        "implementation, which import only the figure's own interfaces (nothing compiled "
        "before the sequence but them)",
        pair_per_row=True,
        module="benchmarks.fresh_sequence",
    ),
    Figure(
        "import",
        "interpreter",
        (
            Row(
                "implementation",
                "ms",
                (OURS, UPSTREAM),
                UPSTREAM,
                description="from remote_module import RemoteModule vs from torch.distributed"
                ".nn.api.remote_module import RemoteModule, torch already imported, byte code "
                "compiled",
            ),
        ),
        "a new interpreter per repeat and implementation",
    ),
    Figure(
        "wire",
        "pair",
        (
            Row(
                f"{WIRE_MIB}MiB_loopback",
                "ms/MiB",
                WIRE_IMPLS,
                "float32",
                description="float32 round trips through nn.Identity, time per MiB of float32 "
                "data there and back: wire_dtype None (float32) vs torch.bfloat16 vs torch.int8 "
                "(ours); the difference to float32 is what the casts or codes cost per MiB",
            ),
        ),
        "the same processes on one machine (loopback: the casts and codes cost, nothing saved)",
    ),
    Figure(
        "wire_shaped",
        "shaped",
        (
            Row(
                f"{WIRE_MIB}MiB_1gbit",
                "GB/s",
                (*WIRE_IMPLS, "int8_bytes_only"),
                "float32",
                higher_is_better=True,
                description=f"the same across a veth pair shaped to {SHAPED_RATE} each way "
                "(float32 bytes there and back / time); int8_bytes_only: the int8 call's codes "
                "and scales, made once, echoed by a plain function (the link's limit for them)",
            ),
            Row(
                f"{WIRE_MIB}MiB_bytes",
                "MiB/call",
                WIRE_IMPLS,
                "float32",
                description="bytes that crossed the link per round trip (both directions, "
                "TCP/IP framing included; the veth's counters)",
            ),
            Row(
                f"{WIRE_MIB}MiB_autograd_bytes",
                "MiB/step",
                WIRE_IMPLS,
                "float32",
                description="the same for a forward and backward under distributed autograd "
                "(the argument requires grad): gradients cross at most as bf16",
            ),
        ),
        "the owner in its own network namespace; TensorPipe over TCP on the shaped link",
    ),
    Figure(
        "demo_wire",
        "demo",
        (
            Row(
                "held_out_accuracy",
                "%",
                WIRE_IMPLS_DEMO,
                "float32",
                higher_is_better=True,
                description="remote-module demo (seed 0) with --wire-dtype, against none",
            ),
            Row(
                "wall",
                "s",
                WIRE_IMPLS_DEMO,
                "float32",
                description="the demo's wall time, set-up included, on one machine",
            ),
        ),
        "one demo run per repeat and wire dtype, on loopback",
    ),
    Figure(
        "construction_warm",
        "pair",
        (
            Row(
                "scriptable_warm",
                "ms",
                _CALLS,
                FLOOR,
                description="later constructions in the same processes, the constructor's "
                "own time (ours returns once its request is sent: construction_many times "
                "constructions with the first use that waits for them)",
            ),
            Row(
                "script_again",
                "ms",
                _CALLS,
                UPSTREAM,
                description="torch.jit.script of another rm, same interface; "
                "floor: of another nn.Linear",
            ),
            Row(
                "nonscriptable",
                "ms",
                _CALLS,
                FLOOR,
                description="constructor + owner confirms creation; floor: rpc.remote(nn.Linear)",
            ),
        ),
        "constructor and torch.jit.script time on the caller once warm; implementations "
        "one at a time in rotating order; a process pair per repeat",
        pair_per_repeat=True,
    ),
    Figure(
        "construction_many",
        "trio",
        (
            Row(
                "sixteen_then_call",
                "ms",
                _CALLS,
                UPSTREAM,
                description=f"{MANY_MODULES} RemoteModules with an interface built on 2 owners "
                "(alternately), then one forward on each; floor: "
                f"{MANY_MODULES} sequential rpc_sync(create_scripted), then one "
                "rpc_sync(run_script) on each",
            ),
        ),
        "construction that never blocks on the owner (pytorch#58098): a caller and two owners, "
        "warm; implementations one at a time in rotating order",
    ),
    Figure(
        "jit_loop",
        "pair",
        (
            Row(
                "loop",
                _US,
                _CALLS,
                FLOOR,
                description="@torch.jit.script loop of the scripted forward; "
                "floor: the same loop of rpc_async(run_script)",
            ),
        ),
        "TorchScript calling the scripted RemoteModule",
    ),
    Figure(
        "type_check",
        "pair",
        (
            Row(
                "sync_scriptable",
                _US,
                ("on", "off"),
                "off",
                description="set_type_checking(on/off), ours only",
            ),
            Row(
                "checks_alone",
                _US,
                ("checks",),
                None,
                description="the caller-side checks of one call, timed alone (their share of "
                "the call is this over the call with checks off)",
            ),
        ),
        "caller-side argument checks on the tiny scriptable sync call",
    ),
    Figure(
        "failover",
        "trio",
        (
            Row(
                "death_to_first_call",
                "ms",
                (OURS, "standby_build"),
                "standby_build",
                description="from the owner's SIGKILL to the first successful forward on its "
                "standby (the call that meets the death raises OwnerFailover; the next one "
                "succeeds), the demo's embedding table with a checkpoint; standby_build: "
                "creating, scripting and loading that table on the standby, timed there "
                "(afterwards, warm: what the failover adds beyond it is at most the difference)",
            ),
        ),
        "a caller, an owner and its standby; a new trio per repeat (each repeat kills one)",
        pair_per_repeat=True,
        kills_owner=True,
    ),
    Figure(
        "checkpoint",
        "trio",
        (
            Row(
                "train_step",
                "ms",
                ("none", f"every_{CHECKPOINT_EVERY}"),
                "none",
                description=f"one training step of the demo's table ({TABLE_ROWS:,} x "
                f"{TABLE_DIM} EmbeddingBag, sparse gradients): forward, dist_autograd backward, "
                "DistributedOptimizer(Adagrad) step; no standby vs standby with "
                f"checkpoint_every={CHECKPOINT_EVERY} (the owner snapshots the table and "
                "sends it to the standby in the background)",
            ),
            Row(
                "checkpoint_per_mib",
                "ms/MiB",
                ("checkpoint",),
                None,
                description="rm.checkpoint() of that table, owner to standby, per MiB of state",
            ),
        ),
        "a caller, an owner and its standby",
    ),
    Figure(
        "batching",
        "trio",
        _batching_rows(),
        "many callers of one compute-bound module (two Linear(2048, 2048), 32 MiB of weights) "
        "on rank 1 (one intra-op thread), from threads of ranks 0 and 2, batching off against "
        f"on (max_wait_ms=0); every rank's agent with {BATCHING_RPC_THREADS} RPC threads",
        module="benchmarks.batching",
        rpc_threads=BATCHING_RPC_THREADS,
    ),
    Figure(
        "compiled",
        "pair",
        (
            Row(
                "train_step",
                "ms",
                ("eager", "compiled", "scripted"),
                "eager",
                description="a hybrid (local Linear, RemoteModule with an interface, local "
                "Linear) trained one step under dist_autograd: forward, backward, "
                "DistributedOptimizer(SGD).step; compiled: torch.compile(fullgraph=True), "
                "scripted: torch.jit.script",
            ),
            Row(
                "steady_call",
                _US,
                ("compiled", "eager", FLOOR),
                FLOOR,
                description="rm(x) without interface compiled (torch.compile(lambda x: rm(x), "
                "fullgraph=True)) and eager vs rpc_sync(run_keyed)",
            ),
        ),
        "the compile route (torch.ops.remote_module.call) against eager, TorchScript and the "
        "floor; compilation before any timing",
        module="benchmarks.compiled",
    ),
    Figure(
        "memcpy",
        "single",
        (
            Row(
                "64MiB",
                "GB/s",
                ("copy_",),
                None,
                higher_is_better=True,
                description="bytes copied / time",
            ),
        ),
        "single-process torch copy_ of 64 MiB float32, for reference",
    ),
)


def figure(name: str) -> Figure:
    for candidate in FIGURES:
        if candidate.name == name:
            return candidate
    raise KeyError(name)


def rotated(impls: list[str], shift: int) -> list[str]:
    """``impls`` starting at ``shift`` (A B C, B C A, C A B, ...): no implementation always
    runs first or last in a block."""
    shift %= len(impls)
    return impls[shift:] + impls[:shift]
