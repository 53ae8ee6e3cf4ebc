"""A first construction with an interface replies as soon as the module exists; the owner
loads and compiles the generated module after that, and whatever needs it waits for it: a
call (sync or async), ``torch.jit.script`` (of the RemoteModule or of a model that holds it),
sending the RemoteModule over RPC. A load that fails is named at the first call.

The owner's loads are slowed (or made to fail) on purpose, so a call that did not wait would
reach an owner without the remote function. This process is ``worker0``; modules live on
``worker1``, a receiver is ``worker2``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import torch
import torch.distributed.rpc as rpc
from torch import Tensor

from remote_module import RemoteModule
from remote_module.runtime import registry
from tests.support import deferred_helpers as helpers
from tests.support.deferred_helpers import (
    DeferredCallInterface,
    DeferredFailInterface,
    DeferredHeldInterface,
    DeferredParentInterface,
    DeferredRrefInterface,
    DeferredScriptInterface,
    DeferredSendInterface,
    DeferredSlowInterface,
    DeferredWireInterface,
    Parent,
    Scale,
)

pytestmark = pytest.mark.rpc_group(3)

OWNER = "worker1"
# Long against the few milliseconds between a construction and what follows it.
LOAD_DELAY_S = 2.0
# Longer than the RemoteModule timeout of the test that uses it.
SLOW_LOAD_S = 3.0


@pytest.fixture(scope="module", autouse=True)
def slow_owner() -> Iterator[None]:
    delays = {
        interface.__name__: LOAD_DELAY_S
        for interface in (
            DeferredCallInterface,
            DeferredScriptInterface,
            DeferredParentInterface,
            DeferredSendInterface,
            DeferredWireInterface,
            DeferredRrefInterface,
        )
    }
    delays[DeferredSlowInterface.__name__] = SLOW_LOAD_S
    failures = {DeferredFailInterface.__name__: "this owner cannot load it"}
    rpc.rpc_sync(OWNER, helpers.slow_loads, (delays, failures), timeout=30)
    yield
    rpc.rpc_sync(OWNER, helpers.normal_loads, (), timeout=30)


def _module_name(rm: RemoteModule) -> str:
    return str(rm._rm_record.generated.__dict__["__name__"])


def _owner_ready(rm: RemoteModule, wire: bool = False) -> bool:
    return bool(rpc.rpc_sync(OWNER, helpers.is_ready, (_module_name(rm), wire), timeout=30))


def _requests() -> list[tuple[str, bool]]:
    return [tuple(request) for request in rpc.rpc_sync(OWNER, helpers.load_requests, timeout=30)]


def test_calls_wait_for_the_owner_to_load(x: Tensor) -> None:
    rm = RemoteModule(f"{OWNER}/cpu", Scale, module_interface_cls=DeferredCallInterface)
    # The construction returned before the owner's reply, with the owner's load asked beside
    # the creation (not once the reply says the owner lacks it); once the reply is taken, the
    # owner is still loading.
    assert rm._rm_record.creation is not None
    assert rm._rm_record.pending is not None
    assert rm.module_rref is not None
    assert rm._rm_record.creation is None and rm._rm_record.pending is not None
    assert not _owner_ready(rm)
    futures = [rm.forward_async(x, scale=float(i)) for i in range(8)]
    assert torch.equal(rm(x), x * 2.0)
    for i, future in enumerate(futures):
        assert torch.equal(future.wait(), x * float(i))
    assert rm._rm_record.pending is None
    assert _owner_ready(rm)
    assert _requests().count((DeferredCallInterface.__name__, False)) == 1


def test_later_constructions_find_the_owner_ready(x: Tensor) -> None:
    first = RemoteModule(f"{OWNER}/cpu", Scale, module_interface_cls=DeferredCallInterface)
    first(x)
    before = _requests()
    later = RemoteModule(f"{OWNER}/cpu", Scale, module_interface_cls=DeferredCallInterface)
    assert torch.equal(later(x, 4.0), x * 4.0)
    assert later._rm_record.pending is None
    # one load request beside each construction, which finds the module loaded already
    assert _requests() == [*before, (DeferredCallInterface.__name__, False)]


def test_scripting_waits_for_the_owner(x: Tensor) -> None:
    rm = RemoteModule(f"{OWNER}/cpu", Scale, module_interface_cls=DeferredScriptInterface)
    assert not _owner_ready(rm)
    scripted = torch.jit.script(rm)  # its calls go straight to the owner's compiled function
    assert _owner_ready(rm)
    assert torch.equal(scripted.forward(x, 3.0), x * 3.0)
    assert torch.equal(rm(x), x * 2.0)


def test_scripting_a_model_that_holds_it_waits_for_the_owner(x: Tensor) -> None:
    rm = RemoteModule(f"{OWNER}/cpu", Scale, module_interface_cls=DeferredParentInterface)
    assert not _owner_ready(rm)
    parent = torch.jit.script(Parent(rm))
    assert torch.equal(parent(x), x * 3.0 + 1.0)


def test_sending_it_over_rpc_waits_for_the_owner(x: Tensor) -> None:
    rm = RemoteModule(f"{OWNER}/cpu", Scale, module_interface_cls=DeferredSendInterface)
    assert not _owner_ready(rm)
    result = rpc.rpc_sync("worker2", helpers.call_received, (rm, x), timeout=30)
    assert torch.equal(result, x * 5.0)
    assert rm._rm_record.pending is None


def test_wire_twins_load_when_a_wire_dtype_first_needs_them(x: Tensor) -> None:
    plain = RemoteModule(f"{OWNER}/cpu", Scale, module_interface_cls=DeferredWireInterface)
    plain(x)
    assert _owner_ready(plain) and not _owner_ready(plain, wire=True)
    wired = RemoteModule(
        f"{OWNER}/cpu",
        Scale,
        module_interface_cls=DeferredWireInterface,
        wire_dtype=torch.bfloat16,
    )
    assert wired.module_rref is not None  # the construction's reply, taken
    assert wired._rm_record.pending is not None
    result = wired(x)
    assert result.dtype == torch.float32
    assert torch.equal(result, (x.to(torch.bfloat16) * 2.0).to(torch.float32))
    assert _owner_ready(plain, wire=True)


def test_init_from_module_rref_returns_while_the_owner_loads(x: Tensor) -> None:
    first = RemoteModule(f"{OWNER}/cpu", Scale, module_interface_cls=DeferredRrefInterface)
    rref = first.get_module_rref()  # the creation's reply taken: the owner starts loading
    again = RemoteModule.init_from_module_rref(f"{OWNER}/cpu", rref, DeferredRrefInterface)
    # It returned without waiting for the owner's load (LOAD_DELAY_S): its calls wait.
    assert again._rm_record.pending is not None
    assert not _owner_ready(again)
    assert torch.equal(again(x, 3.0), x * 3.0)
    assert again._rm_record.pending is None and _owner_ready(again)
    assert torch.equal(first(x), x * 2.0)


def test_a_failed_load_is_named_at_every_call(x: Tensor) -> None:
    # The construction itself succeeds: the module exists.
    rm = RemoteModule(f"{OWNER}/cpu", Scale, module_interface_cls=DeferredFailInterface)
    name = _module_name(rm)
    for attempt in (lambda: rm(x), lambda: rm.forward_async(x)):
        with pytest.raises(RuntimeError) as raised:
            attempt()
        message = str(raised.value)
        assert message.startswith("RemoteModule.forward on worker 'worker1' failed:"), message
        assert f"loading the generated module {name} there failed" in message
        assert "this owner cannot load it" in message
    with pytest.raises(RuntimeError, match=r"^torch\.jit\.script on worker 'worker1' failed"):
        torch.jit.script(rm)
    with pytest.raises(RuntimeError, match="sending over RPC on worker 'worker1' failed"):
        rpc.rpc_sync("worker2", helpers.call_received, (rm, x), timeout=30)
    # What does not need the generated module still works.
    assert set(rm.remote_state_dict()) == set()


def test_a_load_that_outlasts_the_timeout_serves_a_later_call(x: Tensor) -> None:
    rm = RemoteModule(
        f"{OWNER}/cpu", Scale, module_interface_cls=DeferredSlowInterface, timeout=1.0
    )
    with pytest.raises(RuntimeError, match=r"loading the generated module \S+ there failed"):
        rm(x)
    # The owner was asked again; once its first load is done, calls work.
    deadline = time.monotonic() + 30.0
    while True:
        try:
            result = rm(x)
            break
        except RuntimeError:
            assert time.monotonic() < deadline, "the owner never finished loading"
            time.sleep(0.5)
    assert torch.equal(result, x * 2.0)
    assert rm._rm_record.pending is None


def _hold_the_gil(seconds: float) -> float:
    """Hold this process's GIL for at least ``seconds`` in one C call (as a TorchScript
    compile does): no other thread runs Python meanwhile. How long it held."""
    # Calibrated at the fastest of five samples, with 2x slack: a loaded machine whose load
    # drops between calibration and hold (one sample ran 2.5x slow) still holds long enough.
    n = 1_000_000
    per_item = float("inf")
    for _ in range(5):
        start = time.monotonic()
        sum(range(n))
        per_item = min(per_item, (time.monotonic() - start) / n)
    start = time.monotonic()
    sum(range(int(seconds / per_item * 2.0)))
    return time.monotonic() - start


def test_this_sides_own_load_does_not_count_against_the_timeout(
    x: Tensor, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A construction's own load and compile of the generated module can take seconds on a
    # loaded machine, holding the GIL: the reply's arrival is noted late, not the reply late.
    timeout = 2.0  # the owner's own load of the generated module must fit in it too
    original = registry.ensure_module
    held: list[float] = []

    def slow_ensure(*args: object, **kwargs: object) -> object:
        held.append(_hold_the_gil(timeout * 1.5))
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(registry, "ensure_module", slow_ensure)
    rm = RemoteModule(
        f"{OWNER}/cpu", Scale, module_interface_cls=DeferredHeldInterface, timeout=timeout
    )
    monkeypatch.undo()
    assert held and held[0] > timeout, held
    assert torch.equal(rm(x), x * 2.0)
