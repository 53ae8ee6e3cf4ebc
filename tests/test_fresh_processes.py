"""A process that first meets ``remote_module`` through messages (API.md, Runtime): an owner
started with plain ``init_rpc`` that never imported it, or a process that first receives a
RemoteModule in RPC arguments. Its first messages work whatever their order and concurrency,
with every RPC thread of that process busy when they arrive; a failure on the owner reaches the
caller as that failure, promptly, never as an RPC timeout.

Each round is a new RPC group of new processes: a caller (``tests.support.fresh_caller``, which
is ``worker0`` and checks every outcome itself) and fresh workers (``tests.support.fresh_worker``:
torch and the standard library only, ``remote_module`` never imported before its messages
arrive). torch RPC cannot join a second group in one process, so this process only starts
each round's caller, waits for it (bounded) and asserts on its exit status and report; it never
joins a group itself (hence no ``rpc_group`` or ``own_process`` mark).

In each round the fresh workers' RPC threads are all busy (a sleep each) when the burst of first
messages arrives, and the order of those messages is set (see the caller's docstring), so that
the threads freed together unpickle names in different submodules of ``remote_module`` at
once, as in the bug report: "ImportError: cannot import name 'keyed_module' from partially
initialized module 'remote_module.runtime.keys'" on the owner, then a caller waiting out its
whole timeout.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.support import fresh_caller
from tests.support.rpc_group import ROOT, checkout_env

# The caller's own watchdog ends a round at ROUND_LIMIT_S; this bounds the wait for it.
ROUND_TIMEOUT_S = fresh_caller.ROUND_LIMIT_S + 30.0


def run_rounds(scenario: str, rounds: int) -> list[str]:
    """Run ``rounds`` rounds of ``scenario``, each in new processes; the report of each round
    that failed (its exit status, time and the caller's failure lines)."""
    failed = []
    for number in range(1, rounds + 1):
        started = time.monotonic()
        command = [sys.executable, "-m", "tests.support.fresh_caller", scenario]
        try:
            done = subprocess.run(
                command,
                cwd=ROOT,
                env=checkout_env(),
                capture_output=True,
                text=True,
                timeout=ROUND_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as error:  # the caller was killed; its workers follow
            failed.append(f"round {number}: no result after {error.timeout} s")
            continue
        elapsed = time.monotonic() - started
        if done.returncode != 0:
            report = done.stdout.strip() or done.stderr[-3000:]
            failed.append(f"round {number} (exit {done.returncode}, {elapsed:.0f} s):\n{report}")
    return failed


def assert_rounds(scenario: str, rounds: int) -> None:
    failed = run_rounds(scenario, rounds)
    assert not failed, f"{len(failed)} of {rounds} rounds failed\n\n" + "\n\n".join(failed)


@pytest.mark.timeout(3 * ROUND_TIMEOUT_S + 30)
def test_a_fresh_owner_serves_every_kind_of_first_message_at_once() -> None:
    """A fresh owner whose RPC threads are all busy gets, at once from many threads of one
    caller: constructions without an interface, with a TorchScript interface and with a
    Protocol interface, each called first (sync and ``_async``); first calls through
    ``init_from_module_rref`` (with and without a Protocol interface); ``remote_state_dict``,
    ``load_remote_state_dict``, ``remote_parameters`` and ``train`` as a RemoteModule's first
    operation; ``checkpoint()`` to a fresh standby; RemoteModules received in arguments. Every
    result equals the same module's computed here, each within three quarters of the
    RemoteModule timeout of the start; three rounds, each of new processes."""
    assert_rounds("owner", rounds=3)


@pytest.mark.timeout(3 * ROUND_TIMEOUT_S + 30)
def test_fresh_receivers_call_the_remote_modules_they_receive_at_once() -> None:
    """Fresh receivers whose RPC threads are all busy get RemoteModules of the three families
    in RPC arguments, several at once, and call them there (sync and ``_async``): modules of
    the caller, beside first calls of modules the receiver owns itself, and new modules on a
    fresh owner that so gets its first calls from the receivers. Every result is the
    module's; three rounds, each of new processes."""
    assert_rounds("receiver", rounds=3)


@pytest.mark.timeout(ROUND_TIMEOUT_S + 30)
def test_owner_failures_reach_the_caller_promptly_named_as_themselves() -> None:
    """On a fresh owner whose RPC threads are all busy: a module whose constructor raises,
    and a module whose import fails there (``tests.support.fresh_broken``), in each family.
    Their first call, sync and ``_async``, raises within three quarters of the RemoteModule
    timeout (short of it, and of the RPC timeout) an error that names the owner and the
    owner's exception type and message; good constructions beside them work."""
    assert_rounds("failures", rounds=1)
