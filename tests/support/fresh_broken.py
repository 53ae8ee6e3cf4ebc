"""A module that imports everywhere except in a process started with ``RM_FRESH_FAIL_IMPORT``
set (a fresh owner of ``tests/test_fresh_processes.py``): there its import raises.

The caller imports it and pickles :class:`Unimportable` by reference (module and name), as
pickle does every class; the owner then fails to import this module while it unpickles the
construction's arguments: "an import that fails there" (API.md, Runtime). torch and the
standard library only: never ``remote_module``.
"""

from __future__ import annotations

import os

from torch import Tensor, nn

FAIL_IMPORT_ENV = "RM_FRESH_FAIL_IMPORT"
IMPORT_ERROR = "fresh_broken cannot be imported in this process"

if os.environ.get(FAIL_IMPORT_ENV):
    raise ImportError(f"{IMPORT_ERROR} ({FAIL_IMPORT_ENV} is set)")


class Unimportable(nn.Module):
    """A plain module, but its class cannot be unpickled where ``RM_FRESH_FAIL_IMPORT`` is set."""

    def forward(self, x: Tensor) -> Tensor:
        return x
