"""Bad input and remote faults as a user meets them (issue 46, items 3 and 4 of "What was seen"):
each is one exception of the type API.md gives, whose one line names the thing and what is
wrong, the same from every route. A real two-worker RPC group: this process is ``worker0``,
modules live on ``worker1``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from remote_module import RemoteModule
from tests.support.bad_input_helpers import RaisesEverywhere
from tests.support.expected import bad_remote_device_error
from tests.support.failover_helpers import AccumulatorInterface, AccumulatorProtocol

pytestmark = pytest.mark.rpc_group(2)  # see tests/conftest.py

FAMILIES: dict[str, dict[str, Any]] = {
    "no interface": {},
    "torch.jit.interface": {"module_interface_cls": AccumulatorInterface},
    "typing.Protocol": {"module_interface_cls": AccumulatorProtocol},
}


def one_line(error: BaseException) -> str:
    message = str(error)
    assert "\n" not in message, message
    assert "On WorkerInfo" not in message and "Traceback" not in message, message
    return message


# --- remote_device --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("remote_device", "what"),
    [
        (
            "worker1/cpu:abc",
            "'abc' is not a device index (a number from 0, as in 'cuda:0') "
            "(Invalid device string: 'cpu:abc')",
        ),
        ("worker1/gpu", "'gpu' is not a device type torch knows (Expected one of cpu, "),
        ("rank:1/cuda:", "the device index after ':' is missing (Invalid device string: 'cuda:')"),
    ],
)
def test_a_device_torch_cannot_parse_raises_one_line_quoting_the_remote_device(
    remote_device: str, what: str
) -> None:
    # Before: torch's own RuntimeError, which names neither the remote_device nor the worker.
    with pytest.raises(RuntimeError) as raised:
        RemoteModule(remote_device, nn.Linear, args=(2, 2))
    message = one_line(raised.value)
    assert message.startswith(f"Invalid device in remote_device {remote_device!r}: {what}")


@pytest.mark.parametrize("remote_device", ["worker1/", "/cpu", "worker1/cpu/0", "cpu"])
def test_a_remote_device_that_does_not_parse_keeps_upstreams_value_error(
    remote_device: str,
) -> None:
    with pytest.raises(ValueError) as raised:
        RemoteModule(remote_device, nn.Linear, args=(2, 2))
    assert str(raised.value) == bad_remote_device_error(remote_device)


# --- A device that cannot hold the module ---------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_a_device_that_cannot_hold_the_module_fails_each_operation_in_one_line(
    family: str,
) -> None:
    # Before: torch's text of the operator it could not run, with "On WorkerInfo(id=1, ...)"
    # and the list of backends, as a NotImplementedError.
    rm = RemoteModule("worker1/lazy", nn.Linear, args=(2, 2), **FAMILIES[family])
    operations = (lambda: rm(torch.ones(2, 2)), rm.remote_parameters, rm.remote_state_dict)
    for operation in operations:
        with pytest.raises(RuntimeError) as raised:
            operation()
        assert type(raised.value) is RuntimeError
        assert one_line(raised.value) == (
            "RemoteModule: creating Linear on worker 'worker1' failed: RuntimeError: device "
            "'lazy' cannot hold Linear: Could not run 'aten::empty.memory_format' with arguments "
            "from the 'Lazy' backend"
        )


# --- One fault, one type, from every route --------------------------------------------------

ROUTES: dict[str, tuple[str, str, Callable[[RemoteModule], Any]]] = {
    # route: (the RemoteModule method named, where the module raised, the operation)
    "forward": ("forward", "forward", lambda rm: rm(torch.ones(2))),
    "forward_async": ("forward", "forward", lambda rm: rm.forward_async(torch.ones(2)).wait()),
    "remote_state_dict": ("remote_state_dict", "state_dict", lambda rm: rm.remote_state_dict()),
    "load_remote_state_dict": (
        "load_remote_state_dict",
        "load_state_dict",
        lambda rm: rm.load_remote_state_dict({}),
    ),
    "remote_parameters": ("remote_parameters", "parameters", lambda rm: rm.remote_parameters()),
    "train": ("train", "train", lambda rm: rm.train()),
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    ("remote_type", "raised_type"),
    [(NotImplementedError, RuntimeError), (KeyError, RuntimeError), (ValueError, ValueError)],
)
def test_a_remote_exception_has_the_type_torchs_rpc_gives_it_from_every_route(
    route: str, remote_type: type[Exception], raised_type: type[Exception]
) -> None:
    # torch's RPC rebuilds ValueError and TypeError; every other type arrives as RuntimeError.
    # Before: NotImplementedError from the state-dict routes, RuntimeError from forward.
    method, where, operation = ROUTES[route]
    rm = RemoteModule("worker1/cpu", RaisesEverywhere, args=(remote_type,))
    with pytest.raises(Exception) as raised:
        operation(rm)
    assert type(raised.value) is raised_type
    message = one_line(raised.value)
    assert message.startswith(
        f"RemoteModule.{method} on worker 'worker1' failed: {remote_type.__name__}: "
    )
    assert f"{remote_type.__name__} from {where}" in message


@pytest.mark.parametrize(
    ("remote_type", "raised_type"),
    [
        (NotImplementedError, RuntimeError),
        (KeyError, RuntimeError),
        (ValueError, ValueError),
        (TypeError, TypeError),
    ],
)
@pytest.mark.parametrize("family", ["no interface", "typing.Protocol"])
def test_a_failed_construction_has_the_type_torchs_rpc_gives_it(
    family: str, remote_type: type[Exception], raised_type: type[Exception]
) -> None:
    # Before: a builtin type kept as itself (NotImplementedError, KeyError).
    interface = {"typing.Protocol": {"module_interface_cls": AccumulatorProtocol}}.get(family, {})
    rm = RemoteModule("worker1/cpu", RaisesEverywhere, args=(remote_type, True), **interface)
    for operation in (lambda: rm(torch.ones(2)), rm.remote_state_dict):
        with pytest.raises(Exception) as raised:
            operation()
        assert type(raised.value) is raised_type
        assert one_line(raised.value) == (
            "RemoteModule: creating RaisesEverywhere on worker 'worker1' failed: "
            f"{remote_type.__name__}: {remote_type.__name__} from __init__"
        )
