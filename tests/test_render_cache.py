"""The private cache of modules rendered in memory (``remote_module.runtime.cache``): a later
process loads what an earlier one rendered without importing Jinja or the renderer; the
directory is the user's own, mode 0700, and a shared or unusable one caches nothing; a damaged
entry is rendered again."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from remote_module.runtime import cache

ROOT = Path(__file__).resolve().parent.parent
_PROBE = "remote_module._generated.cache_probe"  # an entry's name, as the registry names one

# One process renders (or loads) the in-memory module of an interface that has no build-time
# stubs, and says whether the renderer was imported and what its remote function computes.
_RENDER = textwrap.dedent(
    """
    import sys
    import torch
    from remote_module.runtime import registry
    from tests.support.interfaces import CacheProbeInterface

    module = registry.scriptable_module(CacheProbeInterface, False)
    assert module.__name__.startswith("remote_module._generated."), module.__name__
    print("rendered" if "remote_module._generator.render" in sys.modules else "loaded")
    print("jinja2" if "jinja2" in sys.modules else "no jinja2")
    print(sorted(fn.__name__ for fn in module._generated_methods))
    """
)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache directory for this process and the processes a test starts."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("REMOTE_MODULE_CACHE_DIR", str(directory))
    cache._directory.cache_clear()
    yield directory
    cache._directory.cache_clear()
    cache._templates_digest.cache_clear()  # where a test pointed it at other templates


def _run(env_dir: Path) -> list[str]:
    completed = subprocess.run(
        [sys.executable, "-c", _RENDER],
        cwd=ROOT,
        env=dict(os.environ, REMOTE_MODULE_CACHE_DIR=str(env_dir)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout.splitlines()


def test_a_later_process_loads_the_rendered_module_without_jinja(cache_dir: Path) -> None:
    first = _run(cache_dir)
    assert first[:2] == ["rendered", "jinja2"]
    assert len(list(cache_dir.glob("*.py"))) == 1
    assert len(list(cache_dir.glob("*.code"))) == 1
    second = _run(cache_dir)
    assert second[:2] == ["loaded", "no jinja2"]
    assert second[2] == first[2] == "['forward', 'forward_async']"


def test_the_directory_is_created_private(cache_dir: Path) -> None:
    cache.store(_PROBE, "x = 1\n", compile("x = 1", "p", "exec"))
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    loaded = cache.load(_PROBE)
    assert loaded is not None
    source, code = loaded
    assert source == "x = 1\n"
    namespace: dict[str, object] = {}
    exec(code, namespace)
    assert namespace["x"] == 1
    assert cache.load(_PROBE + "_other") is None


def test_a_directory_others_may_write_caches_nothing(cache_dir: Path) -> None:
    cache_dir.mkdir(mode=0o700)
    cache_dir.chmod(0o777)
    cache.store(_PROBE, "x = 1\n", compile("x = 1", "p", "exec"))
    assert list(cache_dir.iterdir()) == []
    assert cache.load(_PROBE) is None
    # A process that cannot cache still renders and runs.
    assert _run(cache_dir)[0] == "rendered"
    assert list(cache_dir.iterdir()) == []


def test_an_unusable_directory_caches_nothing(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("REMOTE_MODULE_CACHE_DIR", str(blocker / "cache"))
    cache._directory.cache_clear()
    assert cache.load(_PROBE) is None
    cache.store(_PROBE, "x = 1\n", compile("x = 1", "p", "exec"))
    assert blocker.read_text() == "not a directory"


def test_a_damaged_entry_is_rendered_again(cache_dir: Path) -> None:
    _run(cache_dir)
    (entry,) = cache_dir.glob("*.code")
    entry.write_bytes(b"not marshal data")
    assert _run(cache_dir)[0] == "rendered"
    assert _run(cache_dir)[0] == "loaded"  # and stored whole again


def test_a_build_time_name_rendered_here_is_cached_with_its_interface(cache_dir: Path) -> None:
    # An owner without the caller's build-time package renders it in memory under its name.
    # That name says nothing of the interface, so the entry is keyed by the in-memory name
    # too (fingerprint, version, flag): a changed interface never loads an older rendering.
    from remote_module.runtime import registry
    from tests.support.interfaces import CacheProbeInterface

    name = f"rm_absent_{uuid.uuid4().hex}.generated"
    try:
        module = registry.ensure_module(name, CacheProbeInterface, False)
        assert module.__name__ == name
        in_memory = registry.in_memory_name(registry.interface_model(CacheProbeInterface), False)
        assert cache.load(name) is None
        assert cache.load(f"{name}|{in_memory}") is not None
    finally:
        sys.modules.pop(name, None)


def test_a_changed_template_is_another_entry(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The key holds the templates' bytes: an edited template never loads an older rendering.
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "layout.j2").write_text("{{ one }}\n")
    monkeypatch.setattr(cache, "_TEMPLATES", templates)
    cache._templates_digest.cache_clear()
    cache.store(_PROBE, "x = 1\n", compile("x = 1", "p", "exec"))
    assert cache.load(_PROBE) is not None
    (templates / "layout.j2").write_text("{{ two }}\n")
    cache._templates_digest.cache_clear()
    assert cache.load(_PROBE) is None


def test_templates_that_are_not_files_cache_nothing(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As in a zipped install: the templates cannot be read as files, so nothing is keyed.
    monkeypatch.setattr(cache, "_TEMPLATES", tmp_path / "missing")
    cache._templates_digest.cache_clear()
    cache.store(_PROBE, "x = 1\n", compile("x = 1", "p", "exec"))
    assert cache.load(_PROBE) is None
    assert not cache_dir.exists() or list(cache_dir.iterdir()) == []
