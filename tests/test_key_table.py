"""Eager calls without the per-call RRef: the owner's key table and its lifetime rules
(``remote_module.runtime.owner``), and the errors a caller sees: a module that failed to be
created, async failures with a timeout. Against a real three-worker RPC group.

This process is ``worker0``; modules live on ``worker1``, receivers on ``worker2``.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import Tensor, nn

from remote_module import RemoteModule, _compat
from remote_module import _non_scriptable as non_scriptable
from remote_module.runtime import contract, errors, owner
from remote_module.runtime.caller import route
from tests.scorer.model import Scorer, ScorerProtocol
from tests.support import key_table_helpers as helpers
from tests.support import runtime_helpers
from tests.support.interfaces import LinearInterface, ScaledLinear, local_scaled

FREED_WITHIN_S = 20.0


pytestmark = pytest.mark.rpc_group(3)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, tuple[Any, ...]]]:
    """What each eager call sends: its function and its arguments. (``contract`` is imported
    above: it binds torch's own rpc_async for TorchScript before the spy replaces it.)"""
    assert contract.rpc_async.__name__ == "rpc_async"
    seen: list[tuple[Any, tuple[Any, ...]]] = []
    rpc_async = route.rpc.rpc_async

    def spy(to: Any, func: Any, args: tuple[Any, ...], *rest: Any, **kwargs: Any) -> Any:
        seen.append((func, args))
        return rpc_async(to, func, args, *rest, **kwargs)

    monkeypatch.setattr(route.rpc, "rpc_async", spy)
    return seen


def _filed(key: int) -> bool:
    return bool(rpc.rpc_sync("worker1", helpers.filed, (key,), timeout=30))


def _wait_until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + FREED_WITHIN_S
    while not condition():
        gc.collect()
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _wait_until_freed(key: int) -> None:
    _wait_until(lambda: not _filed(key), f"module {key} still filed on its owner")


def _key(rm: RemoteModule, x: Tensor) -> int:
    rm(x)
    key = rm._rm_record.reference
    assert type(key) is int
    return key


# --- Calls send a key, not the RRef ----------------------------------------------------------


@pytest.mark.parametrize(
    ("module_cls", "args", "interface"),
    [(nn.Linear, (4, 2), None), (Scorer, (4,), ScorerProtocol)],
    ids=["no_interface", "protocol"],
)
def test_only_the_first_call_sends_the_rref(
    module_cls: Any,
    args: tuple[int, ...],
    interface: Any,
    x: Tensor,
    sent: list[tuple[Any, tuple[Any, ...]]],
) -> None:
    rm = RemoteModule("worker1/cpu", module_cls, args=args, module_interface_cls=interface)
    assert rm.module_rref is not None  # the construction's reply taken (and any owner load)
    sent.clear()  # the construction's own requests
    first = rm(x)
    second = rm(x)
    third = rm.forward_async(x).wait()
    assert len(sent) == 3
    (first_fn, (first_call, *_)), *later = sent
    # owner.run with one named message: the first names the module by its RRef, and asks the
    # owner to file it under a key
    assert first_fn is owner.run and type(first_call) is owner.Call
    assert first_call.first and isinstance(first_call.reference, rpc.PyRRef)
    key = rm._rm_record.reference
    for fn, (call, *args) in later:
        # the generated function by its module's and its own names, the module by its key
        assert fn is owner.run and call.function == first_call.function
        assert call.reference == key and type(key) is int and not call.first
        assert not any(isinstance(arg, rpc.PyRRef) for arg in args)
    if interface is None:
        torch.testing.assert_close(first, second)
        torch.testing.assert_close(second, third)


def test_keys_are_never_reused(x: Tensor) -> None:
    first = [_key(RemoteModule("worker1/cpu", nn.Linear, args=(4, 2)), x) for _ in range(4)]
    gc.collect()
    for key in first:
        _wait_until_freed(key)
    later = [_key(RemoteModule("worker1/cpu", nn.Linear, args=(4, 2)), x) for _ in range(4)]
    assert len(set(first + later)) == 8
    assert min(later) > max(first)


# --- The table holds a module exactly as long as an RRef to it lives -------------------------


def test_the_owner_frees_the_module_after_the_last_holder_goes(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, 2))
    key = _key(rm, x)
    assert _filed(key)
    del rm
    _wait_until_freed(key)


def test_a_second_holder_keeps_the_module(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, 2))
    key = _key(rm, x)
    other = RemoteModule.init_from_module_rref("worker1/cpu", rm.get_module_rref())
    expected = rm(x)
    del rm
    gc.collect()
    time.sleep(0.5)
    assert _filed(key)
    torch.testing.assert_close(other(x), expected)
    other_key = other._rm_record.reference
    del other
    _wait_until_freed(key)
    _wait_until_freed(other_key)


def test_a_call_after_the_module_is_freed_fails_clearly(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, 2))
    key = _key(rm, x)
    del rm
    _wait_until_freed(key)
    RemoteModule("worker1/cpu", nn.Linear, args=(4, 2))(x)  # another module, another key
    with pytest.raises(RuntimeError, match=rf"key {key} on this owner is gone"):
        rpc.rpc_sync("worker1", non_scriptable._remote_forward, (key, "cpu", False, x))


# --- What keeps working ----------------------------------------------------------------------


def test_a_received_remote_module_files_its_own_key(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, 2))
    expected = rm(x)
    got = rpc.rpc_sync("worker2", runtime_helpers.call_remote_module, (rm, x), timeout=60)
    torch.testing.assert_close(got, expected)


def test_an_interface_typed_rref_keeps_sending_the_rref(x: Tensor) -> None:
    scripted = rpc.remote("worker1", helpers.make_scripted_linear)
    rm = RemoteModule.init_from_module_rref("worker1/cpu", scripted)
    first, second = rm(x), rm(x)
    torch.testing.assert_close(first, second)
    assert isinstance(rm._rm_record.reference, (int, rpc.PyRRef))


def test_distributed_autograd_through_keyed_calls(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, 2))
    rm(x)  # the key is filed: the calls below send it
    with dist_autograd.context() as context_id:
        loss = rm(x).sum() + rm.forward_async(x).wait().sum()
        dist_autograd.backward(context_id, [loss])
        grads = rpc.rpc_sync("worker1", helpers.owner_grads, (rm.get_module_rref(), context_id))
    torch.testing.assert_close(grads["weight"], 2 * x.sum(0).expand(2, 4))


def test_keyed_calls_work_under_the_profiler(
    x: Tensor, sent: list[tuple[Any, tuple[Any, ...]]]
) -> None:
    """Eager calls always take rpc.rpc_async, the path torch's profiler records."""
    rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, 2))
    expected = rm(x)
    sent.clear()
    with torch.autograd.profiler.profile():
        torch.testing.assert_close(rm(x), expected)
    ((fn, (call, *_)),) = sent
    assert fn is owner.run
    assert call.function == (non_scriptable.__name__, "_remote_forward")
    assert call.reference == rm._rm_record.reference


# --- Scripted modules: Python calls go keyed, TorchScript keeps the RRef ----------------------


@pytest.fixture
def sent_by_name(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """What each Python call of a scripted module sends: the remote function's qualified name
    and its arguments."""
    seen: list[tuple[str, tuple[Any, ...]]] = []
    invoke = _compat.invoke_rpc_torchscript

    def spy(to: str, name: str, args: tuple[Any, ...], *rest: Any) -> Any:
        seen.append((name, args))
        return invoke(to, name, args, *rest)

    monkeypatch.setattr(_compat, "invoke_rpc_torchscript", spy)
    return seen


def _scripted() -> RemoteModule:
    return RemoteModule("worker1/cpu", ScaledLinear, (4, 4), module_interface_cls=LinearInterface)


def _keyed(rm: RemoteModule, x: Tensor) -> int:
    """Call ``rm`` until the owner's filing is in and its calls go keyed; its key."""
    helpers.call_until_keyed(rm, x)
    key = rm._rm_record.reference
    assert type(key) is int
    return key


def _held(key: int) -> bool:
    return bool(rpc.rpc_sync("worker1", helpers.held, (key,), timeout=30))


def test_python_calls_of_a_scripted_module_send_its_key_once_filed(
    x: Tensor, sent_by_name: list[tuple[str, tuple[Any, ...]]]
) -> None:
    rm = _scripted()
    expected = local_scaled(rm)(x, 2.0)
    torch.testing.assert_close(rm(x, 2.0), expected)  # the first call: the RRef, and filing
    (first_name, first_args), *_ = sent_by_name
    assert first_name.endswith("._remote_forward")
    assert isinstance(first_args[0], rpc.PyRRef)
    key = _keyed(rm, x)
    sent_by_name.clear()
    torch.testing.assert_close(rm(x, 2.0), expected)
    torch.testing.assert_close(rm.forward_async(x, scale=2.0).wait(), expected)
    assert rm.describe("v", 3) == "v3"
    names = [name.rsplit(".", 1)[1] for name, _ in sent_by_name]
    assert names == ["_remote_forward_keyed", "_remote_forward_keyed", "_remote_describe_keyed"]
    for _, args in sent_by_name:
        assert args[0] == key and type(args[0]) is int
        assert not any(isinstance(arg, rpc.PyRRef) for arg in args)
    assert _held(key)


@pytest.fixture
def slow_filings() -> Iterator[float]:
    """The owner's filings take this many seconds longer than a call."""
    delay_s = 1.0
    rpc.rpc_sync("worker1", helpers.slow_filings, (delay_s,), timeout=30)
    yield delay_s
    rpc.rpc_sync("worker1", helpers.slow_filings, (0.0,), timeout=30)


@pytest.mark.parametrize("call", ["sync", "async"])
def test_the_call_that_asks_for_a_filing_waits_for_its_reply(
    x: Tensor, slow_filings: float, call: str
) -> None:
    """The filing's reply carries the keeper RRef; one still in flight when the program goes
    on to ``rpc.shutdown()`` would reach a shut RRef context and leave the owner waiting 100 s
    for the keeper at its own shutdown. So the call that asked returns once it is in."""
    rm = _scripted()
    started = time.monotonic()
    if call == "sync":
        torch.testing.assert_close(rm(x, 2.0), local_scaled(rm)(x, 2.0))
    else:
        future = rm.forward_async(x, scale=2.0)
        torch.testing.assert_close(future.wait(), local_scaled(rm)(x, 2.0))
    assert time.monotonic() - started >= slow_filings
    filing = rm._rm_record.filing
    assert filing is None or filing.done()
    rm(x, 2.0)  # adopts the key: nothing is in flight, and calls go keyed
    assert rm._rm_record.filing is None and type(rm._rm_record.reference) is int


def test_scripted_calls_keep_sending_the_rref(x: Tensor) -> None:
    rm = _scripted()
    _keyed(rm, x)
    scripted = torch.jit.script(rm)
    graph = str(scripted.forward.inlined_graph)
    assert "prim::rpc_async" in graph
    assert "_remote_forward_keyed" not in graph and "_remote_forward" in graph
    torch.testing.assert_close(scripted.forward(x, 2.0), rm(x, 2.0))


def test_the_owner_frees_a_scripted_module_after_the_last_holder_goes(x: Tensor) -> None:
    rm = _scripted()
    key = _keyed(rm, x)
    rpc.rpc_sync("worker1", helpers.watch_held, (key,), timeout=30)
    del rm
    _wait_until(lambda: not _held(key), f"key {key} still held on the owner")
    _wait_until(
        lambda: rpc.rpc_sync("worker1", helpers.freed, (key,), timeout=30),
        f"the module filed under {key} is still alive on the owner",
    )


def test_a_scripted_module_outlives_its_entry_while_an_rref_to_it_lives(x: Tensor) -> None:
    rm = _scripted()
    key = _keyed(rm, x)
    rpc.rpc_sync("worker1", helpers.watch_held, (key,), timeout=30)
    other = RemoteModule.init_from_module_rref(
        "worker1/cpu", rm.get_module_rref(), module_interface_cls=LinearInterface
    )
    expected = rm(x)
    del rm
    _wait_until(lambda: not _held(key), f"key {key} still held on the owner")
    assert not rpc.rpc_sync("worker1", helpers.freed, (key,), timeout=30)
    results = helpers.call_until_keyed(other, x)  # files a key of its own
    for result in results:
        torch.testing.assert_close(result, expected)
    other_key = other._rm_record.reference
    assert other_key > key
    del other
    _wait_until(lambda: not _held(other_key), f"key {other_key} still held on the owner")
    _wait_until(
        lambda: rpc.rpc_sync("worker1", helpers.freed, (key,), timeout=30),
        "the module is still alive on the owner after its last RRef went",
    )


def test_a_keyed_call_after_the_filing_is_gone_fails_clearly(x: Tensor) -> None:
    rm = _scripted()
    key = _keyed(rm, x)
    keyed = rm._rm_record.generated.__dict__["_remote_forward_keyed"]
    torch.testing.assert_close(rpc.rpc_sync("worker1", keyed, (key, "cpu", False, x, 1.0)), rm(x))
    del rm
    _wait_until(lambda: not _held(key), f"key {key} still held on the owner")
    with pytest.raises(RuntimeError, match=rf"key {key} on this owner is gone"):
        rpc.rpc_sync("worker1", keyed, (key, "cpu", False, x, 1.0))


def test_calls_racing_the_deletion_of_a_keyed_scripted_module(x: Tensor) -> None:
    """An async call in flight when its RemoteModule goes completes, or fails naming the
    missing module; it never reaches another module."""
    outcomes = {"completed": 0, "failed": 0}
    for _ in range(10):
        rm = _scripted()
        expected = local_scaled(rm)(x)
        _keyed(rm, x)
        futures = [rm.forward_async(x) for _ in range(4)]
        del rm
        for future in futures:
            try:
                torch.testing.assert_close(future.wait(), expected)
                outcomes["completed"] += 1
            except RuntimeError as error:
                assert "on this owner is gone" in str(error), error
                outcomes["failed"] += 1
    assert sum(outcomes.values()) == 40


def test_a_received_scripted_remote_module_files_its_own_key(x: Tensor) -> None:
    rm = _scripted()
    key = _keyed(rm, x)
    expected = rm(x)
    results = rpc.rpc_sync("worker2", helpers.call_until_keyed, (rm, x), timeout=60)
    assert len(results) >= 3
    for result in results:
        torch.testing.assert_close(result, expected)
    assert _held(key)


def test_distributed_autograd_through_keyed_scripted_calls(x: Tensor) -> None:
    rm = _scripted()
    _keyed(rm, x)
    with dist_autograd.context() as context_id:
        loss = rm(x, 1.0).sum() + rm.forward_async(x, 1.0).wait().sum()
        dist_autograd.backward(context_id, [loss])
        grads = rpc.rpc_sync(
            "worker1", helpers.owner_script_grads, (rm.get_module_rref(), context_id)
        )
    torch.testing.assert_close(grads["linear.weight"], 2 * x.sum(0).expand(4, 4))


def test_keyed_scripted_calls_work_under_the_profiler(
    x: Tensor, sent: list[tuple[Any, tuple[Any, ...]]]
) -> None:
    rm = _scripted()
    key = _keyed(rm, x)
    expected = rm(x)
    sent.clear()
    with torch.autograd.profiler.profile():
        torch.testing.assert_close(rm(x), expected)
    ((fn, args),) = sent  # rpc.rpc_async: the path torch's profiler records
    assert isinstance(fn, torch.jit.ScriptFunction) and fn.name == "_remote_forward_keyed"
    assert args[0] == key


# --- Errors a caller sees --------------------------------------------------------------------


def _assert_clean(message: str) -> None:
    assert "On WorkerInfo" not in message
    assert "Traceback" not in message
    assert "Got the following error" not in message


def test_a_failed_creation_is_named_once_without_interface(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, "two"))
    for attempt in (lambda: rm(x), lambda: rm.forward_async(x).wait()):
        with pytest.raises(TypeError) as raised:
            attempt()
        message = str(raised.value)
        assert message.startswith("RemoteModule: creating Linear on worker 'worker1' failed: ")
        assert message.count("TypeError") == 1, message
        _assert_clean(message)


def test_a_failed_creation_is_named_once_with_interface() -> None:
    for interface in (runtime_helpers.SleepyInterface, ScorerProtocol):
        # The constructor returns at once; the first operation raises the failed creation.
        rm = RemoteModule("worker1/cpu", Scorer, args=("four",), module_interface_cls=interface)
        with pytest.raises(TypeError) as raised:
            rm.remote_parameters()
        message = str(raised.value)
        assert message.startswith("RemoteModule: creating Scorer on worker 'worker1' failed: ")
        _assert_clean(message)


def test_a_message_with_both_kinds_of_quote_is_named_once_too(x: Tensor) -> None:
    # torch unescapes the remote repr (TypeError('... \'size\' ... "..."')), which then is
    # no Python literal: the message is still read, not the whole remote text kept.
    rm = RemoteModule("worker1/cpu", runtime_helpers.QuotesBoth)
    with pytest.raises(TypeError) as raised:
        rm(x)
    message = str(raised.value)
    assert message == (
        "RemoteModule: creating QuotesBoth on worker 'worker1' failed: TypeError: argument "
        "'size' failed with error \"type must be tuple of ints\""
    )


def test_a_message_of_several_lines_is_read_whole(x: Tensor) -> None:
    # repr(error) runs to the traceback's first line, however many lines its message has.
    rm = RemoteModule("worker1/cpu", runtime_helpers.SeveralLines)
    with pytest.raises(TypeError) as raised:
        rm(x)
    assert str(raised.value) == (
        "RemoteModule: creating SeveralLines on worker 'worker1' failed: TypeError: first "
        "line, but expected one of:\n * (int size)\n * (tuple size)"
    )
    rm = RemoteModule("worker1/cpu", runtime_helpers.SeveralLinesForward)
    with pytest.raises(ValueError) as raised:
        rm(x)
    assert str(raised.value) == (
        "RemoteModule.forward on worker 'worker1' failed: ValueError: bad input:\n"
        "  x is 'wrong'\n  and \"very\" wrong"
    )
    assert "Traceback" in raised.value.remote_traceback  # type: ignore[attr-defined]


def test_a_remote_key_error_is_named_once_too(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", runtime_helpers.MissingKey)
    with pytest.raises(RuntimeError) as raised:  # torch's future reports it as a RuntimeError
        rm(x)
    message = str(raised.value)
    assert message == (
        "RemoteModule.forward on worker 'worker1' failed: KeyError: no entry for this batch"
    )


@pytest.mark.parametrize("as_torch_future_reports_it", [False, True])
def test_a_failed_import_read_as_a_key_error_names_the_module(
    as_torch_future_reports_it: bool,
) -> None:
    # CPython 3.11 can hand a thread that waited on a failing import a KeyError naming the
    # module; torch sends its remote text, which a KeyError's str() quotes and escapes.
    text = (
        "On WorkerInfo(id=1, name=worker1):\nKeyError('tests.support.fresh_broken')\n"
        'Traceback (most recent call last):\n  File "x.py", line 1, in f\n'
    )
    error: Exception = KeyError(text)
    if as_torch_future_reports_it:
        error = RuntimeError(f"KeyError: {text!r}\n\nAt:\n  internal.py(236): _handle_exception")
    failed = errors.creation_failure(error)
    assert (failed.error_type, failed.message) == ("KeyError", "tests.support.fresh_broken")


def test_a_module_that_does_not_match_its_interface_is_named_once() -> None:
    # nn.Linear's forward takes `input`; the interface's `x`: TorchScript refuses the module
    # as the interface's type on the owner, reported like any other failed creation.
    rm = RemoteModule("worker1/cpu", nn.Linear, args=(4, 4), module_interface_cls=LinearInterface)
    with pytest.raises(RuntimeError) as raised:
        rm.remote_parameters()
    message = str(raised.value)
    assert message.startswith("RemoteModule: creating Linear on worker 'worker1' failed: ")
    assert "LinearInterface" in message
    _assert_clean(message)


def test_async_failures_are_as_clean_as_sync_ones(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", runtime_helpers.Sleepy, args=(2.0,), timeout=0.5)
    for attempt in (lambda: rm(x), lambda: rm.forward_async(x).wait()):
        with pytest.raises(RuntimeError) as raised:
            attempt()
        assert str(raised.value).startswith("RemoteModule.forward on worker 'worker1' failed: ")
        _assert_clean(str(raised.value))
