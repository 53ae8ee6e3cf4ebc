"""What every test module shares: the RPC group fixtures, and a pytest process of its own for
each module that starts an RPC group.

A module marked ``pytestmark = pytest.mark.rpc_group(world_size, graceful=True)`` runs its tests
inside one RPC group of ``world_size`` processes (this process is ``worker0``), started by the
module-scoped ``group`` fixture before its first test and shut down after its last. ``scaled_rm``,
``linear_rm`` and ``x`` are the remote modules and input the runtime tests share.

``torch.distributed.rpc`` keeps process-wide state that outlives ``rpc.shutdown()``: the
RRef context is a singleton bound to the first RPC agent of the process, and the barriers of a
graceful shutdown are numbered by a C++ static. A second group in one process therefore hangs
or cannot fork RRefs. When a session selects more than one such module, each one runs in a
child ``pytest`` before the main loop, and its reports are replayed here, item by item.

A module is isolated when it is marked ``rpc_group(...)`` or ``own_process`` (a module that
starts a group of its own), or imports ``tests.support.rpc_group.rpc_group``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from remote_module import RemoteModule
from tests.support.interfaces import LinearInterface, ScaledLinear
from tests.support.rpc_group import rpc_group

_CHILD_REPORTS = "RM_TEST_CHILD_REPORTS"  # set in a child: where it writes its reports
_CHILD_TIMEOUT_S = 900
_replayed: dict[str, list[dict[str, Any]]] = {}  # nodeid -> serialized reports
_child_failures: dict[str, str] = {}  # module path -> why its child gave no reports
_config: list[pytest.Config] = []
_own_cache_dir: list[str] = []  # the render cache this session made, removed at its end


def pytest_configure(config: pytest.Config) -> None:
    _config[:] = [config]
    if "REMOTE_MODULE_CACHE_DIR" not in os.environ:
        # The suite's render cache: its own, not the user's (child processes inherit it).
        _own_cache_dir[:] = [tempfile.mkdtemp(prefix="remote-module-test-cache-")]
        os.environ["REMOTE_MODULE_CACHE_DIR"] = os.path.join(_own_cache_dir[0], "cache")
    config.addinivalue_line(
        "markers", "own_process: run this module in a pytest process of its own"
    )
    config.addinivalue_line(
        "markers",
        "rpc_group(world_size, graceful=True): run this module's tests in one RPC group of "
        "world_size processes, in a pytest process of its own",
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    if _own_cache_dir:
        shutil.rmtree(_own_cache_dir.pop(), ignore_errors=True)
        del os.environ["REMOTE_MODULE_CACHE_DIR"]


# --- Fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def group(request: pytest.FixtureRequest) -> Iterator[list[subprocess.Popen[bytes]] | None]:
    """The module's RPC group, when it is marked ``rpc_group``: its worker processes (ranks
    1..); ``None`` in a module without the mark."""
    marker = request.node.get_closest_marker("rpc_group")
    if marker is None:
        yield None
        return
    with rpc_group(*marker.args, **marker.kwargs) as workers:
        yield workers


@pytest.fixture(scope="module")
def linear_rm(group: list[subprocess.Popen[bytes]] | None) -> RemoteModule:
    """A non-scriptable RemoteModule; tests that change its state build their own."""
    return RemoteModule("worker1/cpu", nn.Linear, args=(4, 3))


@pytest.fixture(scope="module")
def scaled_rm(group: list[subprocess.Popen[bytes]] | None) -> RemoteModule:
    """A RemoteModule built with ``LinearInterface``; read-only for the tests that share it."""
    return RemoteModule("worker1/cpu", ScaledLinear, module_interface_cls=LinearInterface)


@pytest.fixture
def x() -> torch.Tensor:
    """The input the runtime tests send: ``(2, 4)``, the values 0..7."""
    return torch.arange(8, dtype=torch.float32).reshape(2, 4)


# --- Own processes --------------------------------------------------------------------------


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get(_CHILD_REPORTS)
    if path:
        config = _config[0]
        data = config.hook.pytest_report_to_serializable(config=config, report=report)
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(data) + "\n")


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    if os.environ.get(_CHILD_REPORTS) or session.config.option.collectonly:
        return
    modules: dict[str, list[pytest.Item]] = {}
    for item in session.items:
        if _needs_own_process(item):
            modules.setdefault(str(item.path), []).append(item)
    if len(modules) < 2:
        return  # one RPC group in this process is fine
    for path, items in modules.items():
        _run_child(session.config, path, items)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    path = str(item.path)
    if item.nodeid not in _replayed and path not in _child_failures:
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = _replayed.get(item.nodeid)
    if reports is None:
        report = pytest.TestReport(
            item.nodeid,
            item.location,
            {},
            "failed",
            f"no report from the child pytest for {path}:\n{_child_failures.get(path, '')}",
            "call",
        )
        item.ihook.pytest_runtest_logreport(report=report)
    for data in reports or ():
        report = item.config.hook.pytest_report_from_serializable(config=item.config, data=data)
        if isinstance(report.longrepr, list):  # a skip's (path, line, reason), as JSON gave it
            report.longrepr = tuple(report.longrepr)
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _needs_own_process(item: pytest.Item) -> bool:
    if any(item.get_closest_marker(name) is not None for name in ("own_process", "rpc_group")):
        return True
    module = getattr(item, "module", None)
    group = getattr(module, "rpc_group", None)
    return getattr(group, "__module__", None) == "tests.support.rpc_group"


def _child_output(stdout: str, stderr: str) -> str:
    """What a child's output says about why it gave no reports: the tails of both streams,
    and where the interpreter died, the fatal error with the frames it dumped first (the
    most recent), which a tail alone cuts off."""
    fatal = stderr.find("Fatal Python error")
    # What a dying C++ thread printed (``terminate called after ...``) comes just before.
    head = stderr[max(0, fatal - 2000) : fatal + 3000] + "\n...\n" if fatal >= 0 else ""
    return head + stdout[-3000:] + stderr[-3000:]


def _run_child(config: pytest.Config, path: str, items: list[pytest.Item]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        reports = Path(folder) / "reports.jsonl"
        reports.touch()
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        if config.inipath is not None:
            command += ["-c", str(config.inipath), "--rootdir", str(config.rootpath)]
        command += [item.nodeid for item in items]
        try:
            done = subprocess.run(
                command,
                cwd=config.rootpath,
                env=dict(os.environ, **{_CHILD_REPORTS: str(reports)}),
                capture_output=True,
                text=True,
                timeout=_CHILD_TIMEOUT_S,
            )
            output = _child_output(done.stdout, done.stderr)
        except subprocess.TimeoutExpired as error:
            output = f"timed out after {error.timeout} s"
        for line in reports.read_text(encoding="utf-8").splitlines():
            data = json.loads(line)
            _replayed.setdefault(data["nodeid"], []).append(data)
    if any(item.nodeid not in _replayed for item in items):
        _child_failures[path] = output
