"""Sphinx configuration of the remote_module site: ``python -m sphinx -W -n --keep-going -b
html docs docs/_build/html`` (strict: a warning, a broken reference or a public name without a
docstring fails the build)."""

from __future__ import annotations

import os
import sys
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

sys.path.insert(0, os.path.abspath(".."))
from remote_module import __version__

project = "remote_module"
author = "remote_module developers"
copyright = "2026, remote_module developers"
version = release = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinxarg.ext",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "conftest.py"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Options such as --check stay two hyphens.
smartquotes = False

html_theme = "furo"
html_title = f"remote_module {__version__}"

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Strict about our own names; torch, the standard library and typing are documented elsewhere
# (the build has no network for intersphinx).
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(torch|typing|collections|types|builtins|numbers)(\..*)?"),
    (r"py:.*", r"(Tensor|Module|Future|RRef|Any|Callable|Sequence|Mapping|Iterator)"),
    (r"py:.*", r"(NoneType|None|ellipsis|object|type|int|float|str|bool|tuple|list|dict)"),
    (r"py:.*", r"(nn\.Module|T|_T|Self|ModuleType|argparse\..*|enum\..*|optional)"),
    (r"py:.*", r"remote_module\..*\.T"),  # the type variable of methods that return self
]
# sphinx-argparse's domain cannot resolve MyST's "any" links; a broken link still warns itself.
suppress_warnings = ["myst.domains"]

_logger = logging.getLogger(__name__)


def _require_docstrings(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """A public name on a page without a docstring is a warning (an error under ``-W``)."""
    if not any(line.strip() for line in lines) and not name.rsplit(".", 1)[-1].startswith("_"):
        _logger.warning("public %s %s has no docstring", what, name, type="remote_module")


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("autodoc-process-docstring", _require_docstrings)
    return {"parallel_read_safe": True}
