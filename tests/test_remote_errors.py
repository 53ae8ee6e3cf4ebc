"""One error per fault, the same from every route (API.md, Runtime: "A failed remote operation
raises one exception ..."; issue 46, item 2 of "What to build").

The user's module raises ``ValueError``, ``TypeError``, ``KeyError``, ``NotImplementedError``,
its own subclass of ``ValueError`` and a message of two lines, in Python and in TorchScript (a
module scripted on its owner). Every route raises the type torch's RPC gives that exception
and the same message, ``RemoteModule.<method> on worker 'worker1' failed: <type>: <message>``,
with the remote traceback as ``remote_traceback`` and not in the message; and the owner prints
nothing of it. A real three-worker RPC group whose workers' stderr is kept: this process is
``worker0``, modules live on ``worker1`` (``worker2``: a standby).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed.rpc as rpc

from remote_module import RemoteModule
from remote_module.runtime import script_errors
from tests.scorer.generated.scorer_interface import RemoteScorerInterface
from tests.scorer.generated.scorer_protocol import RemoteScorerProtocol
from tests.support.remote_errors_helpers import (
    Calls,
    Faulty,
    FaultyInterface,
    FaultyProtocol,
    FaultyScorer,
    Refusal,
    RefusedAtBirth,
    hold,
    shapes,
)
from tests.support.rpc_group import rpc_group

pytestmark = pytest.mark.own_process  # its own group: see owners_stderr

X = torch.linspace(-1, 1, 8).reshape(2, 4)
HEAD = "on worker 'worker1' failed: "
# fault (remote_errors_helpers.FAULTS) -> the type raised here, and the message after HEAD
EXPECTED: dict[str, tuple[int, type[Exception], str]] = {
    "ValueError": (0, ValueError, "ValueError: the value is refused"),
    "TypeError": (1, TypeError, "TypeError: the type is refused"),
    "KeyError": (2, RuntimeError, "KeyError: no such key"),
    "NotImplementedError": (3, RuntimeError, "NotImplementedError: not implemented here"),
    "own subclass": (4, ValueError, "Refusal: refused by its own type"),
    "two lines": (5, ValueError, "ValueError: first line\nsecond line"),
}
# What torch's RPC prints on the owner for an exception it sends back (and TensorPipe's log
# of a failed request), and each fault's message.
PRINTED = ("Traceback", "On WorkerInfo", "Received error", "refused", "no such key", "first line")


@pytest.fixture(scope="module", autouse=True)
def owners_stderr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The group, each worker's stderr in a file of this folder."""
    where = tmp_path_factory.mktemp("stderr")
    with rpc_group(3, stderr_dir=where):
        yield where


@pytest.fixture(autouse=True)
def owners_print_nothing(owners_stderr: Path) -> Iterator[None]:
    """What the workers wrote to stderr during the test holds nothing of a remote exception."""
    files = sorted(owners_stderr.glob("*.stderr"))
    before = {path: path.stat().st_size for path in files}
    yield
    for path in files:
        with open(path, "rb") as written:
            written.seek(before[path])
            printed = written.read().decode(errors="replace")
        assert not [said for said in PRINTED if said in printed], f"{path.name}:\n{printed}"


def built(family: str, fault: int, **options: Any) -> RemoteModule:
    interface = {"plain": None, "Protocol": FaultyProtocol, "scripted": FaultyInterface}[family]
    return RemoteModule("worker1/cpu", Faulty, (fault,), module_interface_cls=interface, **options)


# Each call raises from forward. "scripted, by message": a wire dtype, so that owner.run runs
# the TorchScript function from Python; "typed": the suite's generated typed classes.
CALL_ROUTES = [
    "plain",
    "Protocol",
    "scripted",
    "scripted, by message",
    "typed",
    "typed Protocol",
    "plain _async",
    "scripted _async",
    "plain compiled",
    "Protocol compiled",
    "scripted compiled",
]


def call_by(route: str, fault: int) -> Callable[[], Any]:
    """A call that raises ``fault`` by ``route``, its RemoteModule built here."""
    if route.endswith(" compiled"):
        torch._dynamo.reset()
        remote = built(route.removesuffix(" compiled"), fault, fake=shapes)
        model = torch.compile(Calls(remote), fullgraph=True)
        return lambda: model(X)
    rm: Any
    if route == "typed":
        rm = RemoteScorerInterface("worker1/cpu", FaultyScorer, (fault,))
    elif route == "typed Protocol":
        rm = RemoteScorerProtocol("worker1/cpu", FaultyScorer, (fault,))
    elif route == "scripted, by message":
        rm = built("scripted", fault, wire_dtype=torch.float16)
    else:
        rm = built(route.removesuffix(" _async"), fault)
    if route.endswith(" _async"):
        return lambda: rm.forward_async(X).wait()
    return lambda: rm(X)


STATE = {"weight": torch.zeros(4, 4), "bias": torch.zeros(4)}
# The module's state_dict and load_state_dict raise (Python: TorchScript compiles neither).
STATE_OPERATIONS: dict[str, tuple[str, Callable[[RemoteModule], Any]]] = {
    "remote_state_dict": ("remote_state_dict", lambda rm: rm.remote_state_dict()),
    "load_remote_state_dict": (
        "load_remote_state_dict",
        lambda rm: rm.load_remote_state_dict(STATE),
    ),
    "checkpoint": ("checkpoint", lambda rm: rm.checkpoint()),
}


def raised_by(operation: Callable[[], Any], fault: str, method: str) -> BaseException:
    """What ``operation()`` raises, checked against ``fault``'s type and message."""
    _, raised_type, said = EXPECTED[fault]
    with pytest.raises(Exception) as raised:
        operation()
    assert type(raised.value) is raised_type, (type(raised.value), str(raised.value))
    assert str(raised.value) == f"RemoteModule.{method} {HEAD}{said}"
    remote_traceback = raised.value.remote_traceback  # type: ignore[attr-defined]
    assert "remote_errors_helpers.py" in remote_traceback, remote_traceback  # where it raised
    return raised.value


@pytest.mark.parametrize("fault", list(EXPECTED))
@pytest.mark.parametrize("route", CALL_ROUTES)
def test_a_remote_exception_is_one_error_from_every_call_route(route: str, fault: str) -> None:
    operation = call_by(route, EXPECTED[fault][0])
    for _ in range(2):  # a first call (the module's RRef sent), then a keyed one
        raised = raised_by(operation, fault, "forward")
    assert raised.__cause__ is None


@pytest.mark.parametrize("fault", list(EXPECTED))
@pytest.mark.parametrize("family", ["plain", "Protocol"])
@pytest.mark.parametrize("operation", list(STATE_OPERATIONS))
def test_a_remote_exception_is_one_error_from_the_state_operations(
    operation: str, family: str, fault: str
) -> None:
    method, run = STATE_OPERATIONS[operation]
    interface = {"Protocol": FaultyProtocol}.get(family)
    rm = RemoteModule(
        "worker1/cpu",
        Faulty,
        (EXPECTED[fault][0], True),
        module_interface_cls=interface,
        standby=["worker2/cpu"],
    )
    raised_by(lambda: run(rm), fault, method)


# A failed creation, raised by the operation that first needs the module (construction does
# not wait for the owner); each of the module's later operations raises it again.
CREATION_OPERATIONS: dict[str, Callable[[RemoteModule], Any]] = {
    "a call": lambda rm: rm(X),
    "sending over RPC": lambda rm: rpc.rpc_sync("worker2", hold, (rm,)),
    "remote_parameters": lambda rm: rm.remote_parameters(),
    "remote_state_dict": lambda rm: rm.remote_state_dict(),
    "train": lambda rm: rm.train(),
}


@pytest.mark.parametrize("fault", ["ValueError", "KeyError"])
@pytest.mark.parametrize("family", ["plain", "Protocol", "scripted"])
@pytest.mark.parametrize("operation", list(CREATION_OPERATIONS))
def test_a_failed_creation_is_one_error_from_every_operation(
    operation: str, family: str, fault: str
) -> None:
    index, raised_type, said = EXPECTED[fault]
    interface = {"plain": None, "Protocol": FaultyProtocol, "scripted": FaultyInterface}[family]
    rm = RemoteModule("worker1/cpu", RefusedAtBirth, (index,), module_interface_cls=interface)
    expected = f"RemoteModule: creating RefusedAtBirth {HEAD}{said}"
    for run in (CREATION_OPERATIONS[operation], CREATION_OPERATIONS["a call"]):
        with pytest.raises(Exception) as raised:
            run(rm)
        assert type(raised.value) is raised_type, (type(raised.value), str(raised.value))
        assert str(raised.value) == expected


# --- The reader of TorchScript's text, on texts torch writes --------------------------------


def _scripted_text(raised: str, after: str = "        return x") -> str:
    """TorchScript's text of an error raised in ``forward`` (``after``: the source after it)."""
    return (
        "The following operation failed in the TorchScript interpreter.\n"
        "Traceback of TorchScript (most recent call last):\n"
        '  File "<generated>", line 9, in _remote_forward\n'
        ") -> Tensor:\n"
        "    return _rm_module.forward(x)\n"
        "           ~~~~~~~~~~~~~~~~~~ <--- HERE\n"
        '  File "model.py", line 3, in forward\n'
        "    def forward(self, x: Tensor) -> Tensor:\n"
        '        raise ValueError("...")\n'
        "        ~~~~~~~~~~~~~~~~~~~~~~~ <--- HERE\n"
        f"{after}\n{raised}\n"
    )


@pytest.mark.parametrize(
    ("raised", "read"),
    [
        ("builtins.ValueError: bad", ("ValueError", "bad", ValueError)),
        ("builtins.ValueError: ", ("ValueError", "", ValueError)),
        ("builtins.KeyError: a: b", ("KeyError", "a: b", KeyError)),
        ("builtins.ValueError: one\ntwo: three\n", ("ValueError", "one\ntwo: three", ValueError)),
        ("nowhere.Mine: gone", ("Mine", "gone", None)),
        ("RuntimeError: AssertionError: x < 0", ("AssertionError", "x < 0", AssertionError)),
        (
            "RuntimeError: mm: self must be a matrix",
            ("RuntimeError", "mm: self must be a matrix", RuntimeError),
        ),
        (
            "RuntimeError: ValueError: in Python\n\nAt:\n  model.py(9): helper\n",
            ("ValueError", "in Python", ValueError),
        ),
    ],
)
def test_the_reader_of_torchscripts_text(raised: str, read: tuple[str, str, Any]) -> None:
    assert script_errors.read(_scripted_text(raised)) == read
    assert script_errors.read(_scripted_text(raised, after="")) == read  # an empty line after


def test_the_reader_finds_the_users_own_type_where_its_module_is_imported() -> None:
    failed = script_errors.read(_scripted_text("tests.support.remote_errors_helpers.Refusal: no"))
    assert failed == ("Refusal", "no", Refusal)


def test_the_reader_reads_a_nested_text_at_its_innermost_failure() -> None:
    inner = _scripted_text("builtins.TypeError: inner")
    assert script_errors.read(_scripted_text(f"RuntimeError: {inner}")) == (
        "TypeError",
        "inner",
        TypeError,
    )


@pytest.mark.parametrize("text", ["", "RuntimeError: plain", "The following operation failed"])
def test_the_reader_leaves_other_text(text: str) -> None:
    assert script_errors.read(text) is None
