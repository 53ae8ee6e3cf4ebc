"""RemoteModule subclasses (the typed classes of generated modules) register with torch's RPC
pickler as they are defined, which an owner does while its other RPC threads pickle replies:
the registration must not change the table under a thread that iterates it."""

from __future__ import annotations

import sys
import threading
import time

import torch
from torch.distributed.rpc.internal import _internal_rpc_pickler

from remote_module import RemoteModule

ROUNDS = 2000


def test_subclasses_defined_while_another_thread_pickles() -> None:
    errors: list[BaseException] = []
    done = threading.Event()

    def pickle_until_done() -> None:
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            try:
                _internal_rpc_pickler.serialize((torch.ones(1), "x"))
            except BaseException as error:  # the race: "dictionary changed size ..."
                errors.append(error)
                return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns often: the race shows within the rounds
    thread = threading.Thread(target=pickle_until_done)
    thread.start()
    try:
        defined = [type(f"Typed{n}", (RemoteModule,), {}) for n in range(ROUNDS)]
    finally:
        done.set()
        thread.join(timeout=60)
        sys.setswitchinterval(interval)
    assert not thread.is_alive()
    assert not errors, errors
    table = _internal_rpc_pickler._class_reducer_dict
    assert all(cls in table for cls in defined)
