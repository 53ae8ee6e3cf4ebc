"""What torch prints in the demo's workers for the demo's own use of it, and nothing else,
kept off the demo's output (``docs/troubleshooting.md`` lists each message, for a user's own
programs, which see them).

- :func:`hide_torchs_notices`: two warnings torch raises in its own code that the demo calls
  on purpose, matched by exact message and by the torch package on the stack when it warns
  (:data:`TORCHS_NOTICES`). Every other warning still shows, the same texts from anywhere
  else included.
- :func:`without_gloos_connection_lines`: torch 2.8 has Gloo print one line to stdout per
  process group it connects (``[Gloo] Rank 0 is connected to 3 peer ranks. ...``); around the
  demo's group set-up, exactly those lines are dropped from stdout, which carries the demo's
  report.

The demo's own TorchScript goes through ``remote_module._torchscript.on_purpose``, as the
runtime's does.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from typing import TextIO

import torch

__all__ = [
    "GLOO_CONNECTED",
    "TORCHS_NOTICES",
    "hide_torchs_notices",
    "without_gloos_connection_lines",
]

_TORCH = os.path.dirname(torch.__file__)  # as the code objects of torch name their files

# (message, the torch package whose code warns, why the demo meets it). Categories: the first
# is a UserWarning, the second a DeprecationWarning (2.10-2.15; 2.10-2.13 also script at
# import and on each owner, with TorchScript's own notices) or FutureWarning.
TORCHS_NOTICES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(
            r"You are using a Backend <class 'torch\.distributed\.distributed_c10d\."
            r"ProcessGroupGloo'> as a ProcessGroup\."
        ),
        os.path.join(_TORCH, "distributed", "rpc", ""),
        "rpc.init_rpc exchanges device maps over a raw Gloo backend (every static group)",
    ),
    (
        re.compile(
            r"`TorchScript` support for functional optimizers is deprecated"
            r"|`torch\.jit\.script` is deprecated|`torch\.jit\.interface` is deprecated"
        ),
        os.path.join(_TORCH, "distributed", "optim", ""),
        "DistributedOptimizer builds a functional optimizer on each owner, and scripts it",
    ),
)

# torch 2.8's Gloo, on stdout, for every process group it connects.
GLOO_CONNECTED = re.compile(
    rb"\[Gloo\] Rank \d+ is connected to \d+ peer ranks\. "
    rb"Expected number of connected peer ranks is : \d+"
)


def hide_torchs_notices() -> None:
    """In a worker process, which exists to run the demo: hide :data:`TORCHS_NOTICES`.

    Torch raises them on RPC threads too (each owner builds its optimizer there), and
    ``DistributedOptimizer``'s notice past every filter (``simplefilter("always")``), so
    this sits where warnings are shown."""
    show = warnings.showwarning

    def show_unless_torchs(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if not _torchs_notice(str(message)):
            show(message, category, filename, lineno, file, line)

    warnings.showwarning = show_unless_torchs


def _torchs_notice(message: str) -> bool:
    """Whether ``message`` is one of :data:`TORCHS_NOTICES`, raised while that package's code
    is on this thread's stack."""
    packages = [package for pattern, package, _ in TORCHS_NOTICES if pattern.match(message)]
    if not packages:
        return False
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code.co_filename.startswith(tuple(packages)):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def without_gloos_connection_lines() -> Iterator[None]:
    """Inside, this process's stdout (the file descriptor, where Gloo's C++ writes) goes to a
    file; after, everything in it but :data:`GLOO_CONNECTED` lines goes on to stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            captured.seek(0)
            kept = [
                line
                for line in captured.read().splitlines(keepends=True)
                if not GLOO_CONNECTED.fullmatch(line.rstrip(b"\r\n"))
            ]
            if kept:
                os.write(1, b"".join(kept))
