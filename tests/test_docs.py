"""The site's examples run (``docs/conftest.py``): every Python block, doctest and console
command on every page, in a pytest of their own (one RPC group for all pages)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.own_process  # the pages' RPC group is the child's (tests/conftest.py)


@pytest.mark.timeout(900)
def test_every_example_on_the_site_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "docs"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
