"""``replies.wait_returning_rrefs`` judges a reply by when it came, not by when the caller looked:
a reply that came within the timeout is taken even if the caller, busy meanwhile, looks late;
one that came after it raises, even though it is there by now. In-process: torch futures, no
RPC (the timeouts are the RemoteModule's own, kept on the caller)."""

from __future__ import annotations

import threading
import time

import pytest
from torch.futures import Future

from remote_module.runtime.caller import replies

TIMEOUT = 0.2


def test_a_reply_in_time_is_taken_however_late_the_caller_looks() -> None:
    future: Future[str] = Future()
    started = time.monotonic()
    arrivals = replies.watch(future)
    future.set_result("reply")
    while time.monotonic() < started + TIMEOUT * 2:  # the caller busy past the timeout
        pass
    assert replies.wait_returning_rrefs(future, TIMEOUT, started, arrivals) == "reply"


def test_a_reply_after_the_timeout_raises_though_it_is_there() -> None:
    future: Future[str] = Future()
    started = time.monotonic()
    while time.monotonic() < started + TIMEOUT * 2:  # the request took past the timeout to go
        pass
    arrivals = replies.watch(future)
    future.set_result("reply")
    with pytest.raises(RuntimeError, match=r"more than the RemoteModule timeout \(0.2 s\)"):
        replies.wait_returning_rrefs(future, TIMEOUT, started, arrivals)


def test_no_reply_raises_at_the_timeout_and_a_later_one_is_still_received() -> None:
    future: Future[str] = Future()
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="more than the RemoteModule timeout"):
        replies.wait_returning_rrefs(future, TIMEOUT, started)
    waited = time.monotonic() - started
    assert TIMEOUT <= waited < TIMEOUT + 5.0, waited  # 5 s: slack for a loaded machine
    late = threading.Timer(0.01, future.set_result, ("late",))
    late.start()
    late.join(timeout=5.0)
    assert future.wait() == "late"
