"""What torch prints on its own for plain RPC use, in one place: the only lines the tests let a
run of ours or a user's program print besides its own output. Each was seen from a program that
does not import ``remote_module`` (torch 2.6, 2.8, 2.13 and 2.15), and
``docs/troubleshooting.md`` ("Messages from torch itself") tells users what each means.

- :func:`not_torchs` gives the lines of a run's stderr that are none of these;
- :func:`stdout_without_torchs` gives a run's stdout without the one line torch 2.8 prints
  there (tests that compare stdout use it, and only it).
"""

from __future__ import annotations

import re

__all__ = [
    "GLOO_CONNECTED",
    "LINES",
    "WARNINGS",
    "after_a_death",
    "not_torchs",
    "stdout_without_torchs",
]

# torch 2.8's Gloo prints this to stdout for every process group it connects, init_rpc's own
# included (2.6 and 2.13 on do not).
_GLOO_HEAD = r"\[Gloo\] Rank "
GLOO_CONNECTED = re.compile(
    _GLOO_HEAD + r"\d+ is connected to \d+ peer ranks\. "
    r"Expected number of connected peer ranks is : \d+"
)

_FILE = r"\S*/torch/"
# Python's warnings, by their first line (``FILE:LINE: CATEGORY: MESSAGE``); the line after,
# indented, is the source line Python shows.
WARNINGS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            _FILE + r"distributed/distributed_c10d\.py:\d+: UserWarning: You are using a Backend "
            r"<class 'torch\.distributed\.distributed_c10d\.ProcessGroupGloo'> as a ProcessGroup\."
        ),
        "rpc.init_rpc exchanges device maps over a raw Gloo backend: once per worker, at start",
    ),
    (
        re.compile(
            _FILE + r"distributed/optim/optimizer\.py:\d+: DeprecationWarning: `TorchScript` "
            r"support for functional optimizers is deprecated"
        ),
        "DistributedOptimizer builds a functional optimizer on every owner of parameters "
        "(torch warns past every filter)",
    ),
    (
        re.compile(
            _FILE + r"jit/_script\.py:\d+: (DeprecationWarning|FutureWarning): "
            r"`torch\.jit\.(script|interface)` is deprecated"
        ),
        "the user's own torch.jit.script and torch.jit.interface, and torch.distributed.optim's "
        "own scripting (2.10-2.13, with -W default); tests/test_quiet_torchscript.py holds that "
        "none is raised with our code on the stack",
    ),
    (
        re.compile(
            r"\S*/tempfile\.py:\d+: ResourceWarning: Implicitly cleaning up "
            r"<TemporaryDirectory '[^']*'>"
        ),
        "torch 2.6's torch.distributed.optim import makes a TemporaryDirectory "
        "(torch.distributed.nn.jit.instantiator) that only the exit cleans up (-W default)",
    ),
)

_TENSORPIPE = (
    r"(\[rank\d+\]:)?\[W\d{4} [\d:.]+ tensorpipe_agent\.cpp:\d+\] RPC agent for [\w-]+ "
    r"encountered error when "
)
_ORIGIN = r" \(this error originated at tensorpipe/[\w/.]+:\d+\)"


# TensorPipe's lines (whole) for any run.
LINES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"(\[rank\d+\]:)?\[W\d{4} [\d:.]+ tensorpipe_agent\.cpp:\d+\] RPC agent for ([\w-]+) "
            r"encountered error when sending response to request #\d+ to \2: pipe closed" + _ORIGIN
        ),
        "a graceful rpc.shutdown: a worker's last reply to itself can meet its own closing "
        "connection (a one-worker group of plain torch: 10 runs of 20 on 2.13)",
    ),
)


def after_a_death(dead: str) -> tuple[tuple[re.Pattern[str], str], ...]:
    """TensorPipe's lines (whole) after worker ``dead`` died, and at a shutdown without grace."""
    dead = re.escape(dead)
    return tuple(
        (re.compile(_TENSORPIPE + text + _ORIGIN), why)
        for text, why in (
            (
                rf"reading incoming (request|response) from {dead}: eof",
                "every worker connected to the dead one: its connection closed (and a reply it "
                "waited for from it)",
            ),
            (
                rf"sending outgoing request #\d+ to {dead}: eof",
                "every message sent to the dead worker: the operations that meet the death, and "
                "torch's retries of releasing a distributed autograd context that had reached it",
            ),
            (
                r"reading incoming request from [\w-]+: (pipe closed|eof)",
                "rpc.shutdown(graceful=False) (a graceful one waits for the dead worker): each "
                "worker's connections close, and torch logs each",
            ),
        )
    )


def not_torchs(stderr: str, dead: str | None = None) -> list[str]:
    """The lines of ``stderr`` that are not torch's own for plain RPC use (with ``dead``, for a
    run in which that worker died and the others left without grace)."""
    lines = LINES + (after_a_death(dead) if dead is not None else ())
    others: list[str] = []
    after_a_warning = False
    for line in stderr.splitlines():
        if after_a_warning and line.startswith("  "):  # the warning's source line
            after_a_warning = False
            continue
        after_a_warning = any(pattern.match(line) for pattern, _ in WARNINGS)
        if not after_a_warning and not any(pattern.fullmatch(line) for pattern, _ in lines):
            others.append(line)
    return others


def stdout_without_torchs(stdout: str) -> str:
    """``stdout`` without torch 2.8's Gloo connection lines (:data:`GLOO_CONNECTED`). Processes
    that start together print theirs at once, in pieces that interleave (``[Gloo] Rank [Gloo]
    Rank 0 is connected ... : 2`` then ``1 is connected ... : 2``): the piece ``[Gloo] Rank ``
    goes wherever it is, then each line that is the rest of one."""
    rest = re.compile(GLOO_CONNECTED.pattern.removeprefix(_GLOO_HEAD))
    return "".join(
        line
        for line in stdout.replace("[Gloo] Rank ", "").splitlines(keepends=True)
        if not rest.fullmatch(line.rstrip("\r\n"))
    )
