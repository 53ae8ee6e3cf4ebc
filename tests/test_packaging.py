"""The wheel carries what the runtime needs on every worker: templates, py.typed, scripts."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_ships_templates_marker_and_console_scripts(tmp_path: Path) -> None:
    source = tmp_path / "src"
    # Not the dot folders: .git, the caches, and .ci's virtual environments (7 GB here).
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(".*", "*.egg-info", "build", "dist", "__pycache__"),
    )
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", str(tmp_path / "dist")],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("remote_module-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        scripts = archive.read(entry_points).decode()
    assert {
        "remote_module/templates/scriptable.py.j2",
        "remote_module/templates/non_scriptable.py.j2",
        "remote_module/py.typed",
        "remote_module/examples/generated/embedding_bag_interface.py",
    } <= names
    assert not any(name.startswith(("tests/", "benchmarks/")) for name in names)
    assert "remote-module-codegen = remote_module._generator.cli:entry_point" in scripts
    assert "remote-module = remote_module.__main__:main" in scripts
