"""Process helpers shared by the demo, the benchmarks and the tests: free ports on 127.0.0.1,
workers that end with their parent, an exit that skips interpreter teardown, and ending
processes with a grace period, then ``SIGKILL``.

Example::

    port, store_port = free_ports(2)  # distinct: held open together while chosen
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.process import BaseProcess
from typing import Any, NoReturn

__all__ = ["end_processes", "exit_now", "exit_when_orphaned", "free_port", "free_ports"]

# After SIGKILL a process is gone at once; this only bounds waiting for its exit status.
REAP_TIMEOUT_S = 10.0


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports on 127.0.0.1 that were free a moment ago."""
    # Held open together, so the ports differ from each other.
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def free_port() -> int:
    """One port on 127.0.0.1 that was free a moment ago."""
    return free_ports(1)[0]


def exit_when_orphaned(code: int = 1) -> None:
    """In a worker: exit with ``code`` once the process that started it is gone (a crash, a
    kill), instead of waiting for its group forever."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        exit_now(code)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def exit_now(code: int) -> NoReturn:
    """Flush stdout and stderr, then end this process with ``code`` at once."""
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: RPC and gloo threads still parked in C++ can abort a normal
    # exit ("exception not rethrown") after all work is done.
    os._exit(code)


def end_processes(
    processes: Sequence[subprocess.Popen[Any] | BaseProcess],
    grace_s: float = 20.0,
    terminate: bool = False,
) -> None:
    """Give ``processes`` (``subprocess.Popen`` or ``multiprocessing`` ones) ``grace_s``
    seconds in all to exit, after ``SIGTERM`` when ``terminate``; then ``SIGKILL`` the rest
    by pid, and reap them all."""
    if terminate:
        for process in processes:
            if _running(process):
                _signal(process, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for process in processes:
        _wait(process, max(0.0, deadline - time.monotonic()))
    for process in processes:
        if _running(process):
            _signal(process, signal.SIGKILL)
            _wait(process, REAP_TIMEOUT_S)


def _running(process: subprocess.Popen[Any] | BaseProcess) -> bool:
    if isinstance(process, subprocess.Popen):
        return process.poll() is None
    return process.is_alive()


def _wait(process: subprocess.Popen[Any] | BaseProcess, timeout: float) -> None:
    if isinstance(process, subprocess.Popen):
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout)
    else:
        process.join(timeout=timeout)


def _signal(process: subprocess.Popen[Any] | BaseProcess, signum: int) -> None:
    if process.pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signum)
