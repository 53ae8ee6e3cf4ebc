"""Each test module that starts an RPC group runs in a pytest process of its own.

``torch.distributed.rpc`` keeps process-wide state that outlives ``rpc.shutdown()``: the
RRef context is a singleton bound to the first RPC agent of the process, and the barriers of a
graceful shutdown are numbered by a C++ static. A second group in one process therefore hangs
or cannot fork RRefs. When a session selects more than one such module, each one runs in a
child ``pytest`` before the main loop, and its reports are replayed here, item by item.

A module is isolated when it imports ``tests.support.rpc_group.rpc_group`` or is marked
``pytestmark = pytest.mark.own_process``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

_CHILD_REPORTS = "RM_TEST_CHILD_REPORTS"  # set in a child: where it writes its reports
_CHILD_TIMEOUT_S = 900
_replayed: dict[str, list[dict[str, Any]]] = {}  # nodeid -> serialized reports
_child_failures: dict[str, str] = {}  # module path -> why its child gave no reports
_config: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    _config[:] = [config]
    config.addinivalue_line(
        "markers", "own_process: run this module in a pytest process of its own"
    )


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
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _needs_own_process(item: pytest.Item) -> bool:
    if item.get_closest_marker("own_process") is not None:
        return True
    module = getattr(item, "module", None)
    group = getattr(module, "rpc_group", None)
    return getattr(group, "__module__", None) == "tests.support.rpc_group"


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
            output = done.stdout[-4000:] + done.stderr[-4000:]
        except subprocess.TimeoutExpired as error:
            output = f"timed out after {error.timeout} s"
        for line in reports.read_text(encoding="utf-8").splitlines():
            data = json.loads(line)
            _replayed.setdefault(data["nodeid"], []).append(data)
    if any(item.nodeid not in _replayed for item in items):
        _child_failures[path] = output
