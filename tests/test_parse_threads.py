"""Source parsed on several threads at once, as an owner's RPC threads script modules beside
the process's other threads (``remote_module.runtime.owner.creation`` makes that safe where
CPython's ``ast.parse`` is not)."""

import ast
import inspect
import sys
import threading

import torch

import remote_module  # noqa: F401  (what a process using RemoteModule has imported)


class _Cycle:
    """Garbage in a reference cycle whose finalizer runs Python code: freed by the collector in
    the middle of a parse, it lets another thread run there (as on a busy owner)."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        sum(range(50))


def test_threads_parse_source_at_once() -> None:
    """TorchScript's frontend parses with ``ast.parse``, and an owner scripts on several RPC
    threads. On CPython before 3.11.8 two parses at once failed with ``SystemError: AST
    constructor recursion depth mismatch`` (cpython#106905; within a few parses here)."""
    source = inspect.getsource(torch.nn.functional)
    errors: list[BaseException] = []

    def parse_beside_garbage() -> None:
        for _ in range(30):
            cycles = [_Cycle() for _ in range(200)]
            del cycles
            try:
                ast.parse(source)
            except BaseException as error:
                errors.append(error)
                return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads as often as Python allows
    try:
        threads = [threading.Thread(target=parse_beside_garbage) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        sys.setswitchinterval(interval)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
