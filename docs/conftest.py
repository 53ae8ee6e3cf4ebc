"""Every example on the site runs (``tests/test_docs.py`` runs ``pytest docs``): Python blocks
and doctests (``>>>``, their output checked) in one namespace per page, against a real RPC
group on 127.0.0.1 that this process joins as ``worker0`` (``worker1`` and ``worker2`` are
subprocesses); ``console`` blocks run each ``$ command`` from the repository root (after
``$ cd DIR``, the block's later ones from ``DIR``) and check the output shown under it: its
stdout, or with ``[exit N]`` shown last (its exit status) its stderr."""

from __future__ import annotations

import doctest
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sybil import Example, Sybil
from sybil.parsers.myst import CodeBlockParser, PythonCodeBlockParser

from tests.support import torchs_own
from tests.support.rpc_group import checkout_env, rpc_group

ROOT = Path(__file__).resolve().parent.parent
COMMAND_TIMEOUT_S = 300


@pytest.fixture(scope="session")
def workers() -> Iterator[None]:
    """One RPC group for every page: worker0 (here), worker1 and worker2."""
    with rpc_group(3):
        yield


def _run_console(example: Example) -> None:
    """Each ``$ command`` of the block, its output against the lines shown under it."""
    commands: list[tuple[str, list[str]]] = []
    for line in example.parsed.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line.rstrip())
    env = checkout_env(PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    cwd = ROOT
    for command, shown in commands:
        if command.startswith("cd "):  # as a shell would: the block's next commands run there
            cwd = cwd / command[len("cd ") :].strip()
            assert cwd.is_dir() and not shown, f"$ {command}: no such directory, or output shown"
            continue
        status = 0
        if shown and shown[-1].startswith("[exit "):
            status = int(shown.pop()[len("[exit ") : -1])
        done = subprocess.run(
            shlex.split(command),
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        # What a page shows: stdout (without what torch 2.8 prints there on its own); a failing
        # command's stderr (torch's own warnings go there)
        output = done.stderr if status else torchs_own.stdout_without_torchs(done.stdout)
        printed = [line.rstrip() for line in output.splitlines()]
        assert done.returncode == status, (
            f"$ {command}: exit {done.returncode}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
        if shown:
            assert printed == [line for line in shown if line or printed], (
                f"$ {command} printed:\n" + "\n".join(printed)
            )


pytest_collect_file = Sybil(
    parsers=[
        PythonCodeBlockParser(doctest_optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE),
        CodeBlockParser(language="console", evaluator=_run_console),
    ],
    patterns=["*.md", "guides/*.md"],
    fixtures=["workers"],
).pytest()
