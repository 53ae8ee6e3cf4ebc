"""``RemoteModule``'s constructor arguments, fuzzed (issue 5, part 5), against a real RPC
group: ``remote_device`` strings, ``args``, ``kwargs`` and ``timeout``. Each one works or is
refused with a ``ValueError``/``TypeError``/``RuntimeError`` that names it, and nothing hangs.

The module shares one two-worker group (this process is ``worker0``).
"""

import math
import time
from typing import Any

import pytest
import torch
from hypothesis import event, example, given
from hypothesis import strategies as st
from torch import nn

from remote_module import RemoteModule, parse_remote_device
from tests.support import runtime_helpers as helpers
from tests.support.fuzzing import DEVICE_PARTS, STRUCTURED_DEVICES, check_parse, fuzz

# Calls here time out on purpose while the owner still runs them; a graceful shutdown then
# waits on their RRef bookkeeping (on torch 2.14 it once hung past the test's timeout), so the
# group ends without it, its workers by pid (see tests/conftest.py).
pytestmark = pytest.mark.rpc_group(2, graceful=False)

WORKERS = {"worker0": 0, "worker1": 1}
FAIL_FAST_S = 10.0  # a bad owner must be refused well within this


def _known_owner(on: str | int) -> bool:
    return on in WORKERS if isinstance(on, str) else on in WORKERS.values()


KNOWN_OWNERS = st.sampled_from(["worker0", "worker1", "rank:0", "rank:1"])
RPC_REMOTE_DEVICES = st.one_of(
    st.builds(lambda worker, device: f"{worker}/{device}", KNOWN_OWNERS, DEVICE_PARTS),
    KNOWN_OWNERS,
    STRUCTURED_DEVICES,
)


@fuzz(30)
@given(text=RPC_REMOTE_DEVICES)
@example("nosuch/cpu")
@example("rank:5/cpu")
@example("rank:\u00b2/cpu")
@example("worker1/bogus")
@example("worker1 /cpu")
@example("w\ud800/cpu")
@example("worker1/meta")
@example("worker1/cuda:0")
@example("rank:0/cpu:0")
@example("rank:1")
def test_constructor_with_fuzzed_remote_device(text: str) -> None:
    try:
        parse_remote_device(text)
        parse_error: Exception | None = None
    except (ValueError, RuntimeError) as error:
        parse_error = error
    start = time.monotonic()
    try:
        rm = RemoteModule(text, nn.Identity, timeout=FAIL_FAST_S)
    except (ValueError, RuntimeError) as error:
        elapsed = time.monotonic() - start
        assert elapsed < FAIL_FAST_S, f"{text!r}: refused only after {elapsed:.1f} s"
        if parse_error is not None:
            assert type(error) is type(parse_error) and str(error) == str(parse_error)
            event("refused: does not parse")
            return
        on = check_parse(text)
        assert on is not None
        assert not _known_owner(on.on), f"{text!r} names a worker of the group: {error}"
        assert str(on.on) in str(error) or repr(on.on) in str(error), f"{text!r}: {error}"
        event("refused: unknown owner")
        return
    elapsed = time.monotonic() - start
    assert elapsed < FAIL_FAST_S
    assert parse_error is None, f"{text!r} was accepted although parsing it fails"
    parsed = check_parse(text)
    assert parsed is not None and _known_owner(parsed.on)
    assert (rm.on, rm.device) == (parsed.on, str(parsed.device))
    event(f"constructed on {parsed.device.type}")
    # The first call either works (a CPU or meta module) or fails with a RuntimeError that
    # names the method and the owner (a device this machine does not have); it never hangs.
    start = time.monotonic()
    try:
        out = rm(torch.ones(2))
    except RuntimeError as error:
        # e.g. a CUDA device this machine lacks, or a meta result that cannot come back
        assert "forward" in str(error)
        assert parsed.device.type != "cpu", str(error)
    else:
        assert out.shape == (2,)
    assert time.monotonic() - start < FAIL_FAST_S


class _Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


BAD_ARGS = st.one_of(
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.text(min_size=1, max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), min_size=1, max_size=2),
    st.frozensets(st.integers(), min_size=1, max_size=2),
    st.builds(_Opaque),
)
BAD_KWARGS = st.one_of(
    st.integers(),
    st.booleans(),
    st.text(min_size=1, max_size=4),
    st.lists(st.integers(), min_size=1, max_size=2),
    st.lists(st.tuples(st.just("in_features"), st.integers(1, 3)), min_size=1, max_size=1),
    st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2),
    st.builds(_Opaque),
)


@fuzz(20)
@given(args=BAD_ARGS)
@example(5)
@example("ab")
@example({"in_features": 2})
def test_constructor_refuses_non_tuple_args(args: Any) -> None:
    with pytest.raises((ValueError, TypeError)) as error:
        RemoteModule("worker1/cpu", nn.Linear, args=args)
    assert "args" in str(error.value), str(error.value)


@fuzz(20)
@given(kwargs=BAD_KWARGS)
@example(5)
@example([("in_features", 2), ("out_features", 2)])
@example({1: 2})
def test_constructor_refuses_non_dict_kwargs(kwargs: Any) -> None:
    with pytest.raises((ValueError, TypeError)) as error:
        RemoteModule("worker1/cpu", nn.Identity, kwargs=kwargs)
    assert "kwargs" in str(error.value), str(error.value)


@pytest.mark.parametrize("args", [(2, 3), [2, 3], None])
def test_constructor_accepts_tuple_or_list_args(args: Any) -> None:
    kwargs = {"in_features": 2, "out_features": 3} if args is None else None
    rm = RemoteModule("worker1/cpu", nn.Linear, args=args, kwargs=kwargs)
    assert rm(torch.ones(1, 2)).shape == (1, 3)


SLEEP_S = 0.4  # how long the module's forward sleeps in the timeout tests
SHORT_TIMEOUTS = [1e-9, 1e-4, 5e-4, 0.01, 0.05]  # all well under SLEEP_S
LONG_TIMEOUTS = [5.0, 60, 3600.0, 1e7, 1e10, 1e300, math.inf]  # all well over SLEEP_S
BAD_TIMEOUTS = st.one_of(
    st.sampled_from([0, 0.0, -0.0, -1, math.nan, -math.inf, "1", b"1", True, False, 1j, [1]]),
    st.floats(max_value=0.0),
    st.integers(max_value=0),
)


@fuzz(20)
@given(timeout=BAD_TIMEOUTS)
def test_constructor_refuses_bad_timeouts(timeout: Any) -> None:
    with pytest.raises((ValueError, TypeError)) as error:
        RemoteModule("worker1/cpu", nn.Identity, timeout=timeout)
    assert "timeout" in str(error.value)
    assert repr(timeout) in str(error.value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("timeout", SHORT_TIMEOUTS + LONG_TIMEOUTS)
def test_constructor_timeouts_are_honoured(timeout: float) -> None:
    """A positive timeout is either refused up front (``ValueError`` naming it) or honoured:
    a call that outlasts it fails soon after it, one that does not succeeds. Sub-millisecond
    and very large values are where RPC's integer milliseconds go wrong."""
    x = torch.zeros(1)
    try:
        rm = RemoteModule("worker1/cpu", helpers.Sleepy, kwargs={"delay": SLEEP_S}, timeout=timeout)
    except ValueError as error:
        assert "timeout" in str(error) and repr(timeout) in str(error), str(error)
        return
    start = time.monotonic()
    try:
        out = rm(x)
    except RuntimeError as error:
        elapsed = time.monotonic() - start
        assert timeout < SLEEP_S, f"timeout={timeout!r}: a {SLEEP_S} s call failed: {error}"
        assert elapsed < SLEEP_S, f"timeout={timeout!r} fired only after {elapsed:.2f} s"
        return
    elapsed = time.monotonic() - start
    assert timeout > SLEEP_S, (
        f"timeout={timeout!r} s was not honoured: the call ran {elapsed:.2f} s and succeeded"
    )
    assert torch.equal(out, x + 1)
