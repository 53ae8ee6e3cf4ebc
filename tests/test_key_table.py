"""Eager calls without the per-call RRef: the owner's key table and its lifetime rules
(``remote_module.runtime.owner``), and the errors a caller sees: a module that failed to be
created, async failures with a timeout. Against a real three-worker RPC group.

This process is ``worker0``; modules live on ``worker1``, receivers on ``worker2``.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest
import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import Tensor, nn

from remote_module import RemoteModule
from remote_module._generated import non_scriptable
from remote_module.runtime import calls, contract
from tests.scorer.model import Scorer, ScorerProtocol
from tests.support import key_table_helpers as helpers
from tests.support import runtime_helpers

FREED_WITHIN_S = 20.0


pytestmark = pytest.mark.rpc_group(3)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, tuple[Any, ...]]]:
    """What each eager call sends: its function and its arguments. (``contract`` is imported
    above: it binds torch's own rpc_async for TorchScript before the spy replaces it.)"""
    assert contract.rpc_async.__name__ == "rpc_async"
    seen: list[tuple[Any, tuple[Any, ...]]] = []
    rpc_async = calls.rpc.rpc_async

    def spy(to: Any, func: Any, args: tuple[Any, ...], *rest: Any, **kwargs: Any) -> Any:
        seen.append((func, args))
        return rpc_async(to, func, args, *rest, **kwargs)

    monkeypatch.setattr(calls.rpc, "rpc_async", spy)
    return seen


def _filed(key: int) -> bool:
    return bool(rpc.rpc_sync("worker1", helpers.filed, (key,), timeout=30))


def _wait_until_freed(key: int) -> None:
    deadline = time.monotonic() + FREED_WITHIN_S
    while _filed(key):
        gc.collect()
        assert time.monotonic() < deadline, f"module {key} still filed on its owner"
        time.sleep(0.05)


def _key(rm: RemoteModule, x: Tensor) -> int:
    rm(x)
    key = rm.__dict__["_rm_reference"]
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
    sent.clear()  # the construction's own request
    first = rm(x)
    second = rm(x)
    third = rm.forward_async(x).wait()
    assert len(sent) == 3
    (first_fn, first_args), *later = sent
    assert first_fn.__name__ == "first_call"
    assert isinstance(first_args[1], rpc.PyRRef)
    key = rm.__dict__["_rm_reference"]
    for _fn, args in later:
        assert args[0] == key and type(args[0]) is int
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
    other_key = other.__dict__["_rm_reference"]
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
    assert isinstance(rm.__dict__["_rm_reference"], (int, rpc.PyRRef))


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
    ((fn, args),) = sent
    assert fn is non_scriptable._remote_forward
    assert args[0] == rm.__dict__["_rm_reference"]


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
        with pytest.raises(TypeError) as raised:
            RemoteModule("worker1/cpu", Scorer, args=("four",), module_interface_cls=interface)
        message = str(raised.value)
        assert message.startswith("RemoteModule: creating Scorer on worker 'worker1' failed: ")
        _assert_clean(message)


def test_async_failures_are_as_clean_as_sync_ones(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", runtime_helpers.Sleepy, args=(2.0,), timeout=0.5)
    for attempt in (lambda: rm(x), lambda: rm.forward_async(x).wait()):
        with pytest.raises(RuntimeError) as raised:
            attempt()
        assert str(raised.value).startswith("RemoteModule.forward on worker 'worker1' failed: ")
        _assert_clean(str(raised.value))
