"""remote_module: TorchScript-first remote ``nn.Module``s on ``torch.distributed.rpc``.

Example::

    >>> from remote_module import RemoteModule
    >>> rm = RemoteModule("worker1/cpu", torch.nn.Linear, args=(16, 4))

The public names load the runtime on first access (PEP 562), so ``remote-module-codegen``
and ``remote_module.codegen`` never load the RPC runtime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from remote_module._version import __version__

if TYPE_CHECKING:
    from remote_module._interface import interface
    from remote_module.runtime.device import RemoteDevice, parse_remote_device
    from remote_module.runtime.module import RemoteModule
    from remote_module.runtime.values import set_type_checking, type_checking

__all__ = [
    "RemoteDevice",
    "RemoteModule",
    "__version__",
    "interface",
    "parse_remote_device",
    "set_type_checking",
    "type_checking",
]

# Public name -> the module that defines it.
_RUNTIME = {
    "RemoteDevice": "remote_module.runtime.device",
    "RemoteModule": "remote_module.runtime.module",
    "interface": "remote_module._interface",
    "parse_remote_device": "remote_module.runtime.device",
    "set_type_checking": "remote_module.runtime.values",
    "type_checking": "remote_module.runtime.values",
}


def __getattr__(name: str) -> Any:
    module = _RUNTIME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    if name == "RemoteModule":
        # The generated module of RemoteModules without an interface, loaded with the class
        # (about 0.3 ms): a first construction, or a first call reaching an owner, imports
        # nothing.
        from remote_module._generated import non_scriptable  # noqa: F401
    globals()[name] = value  # later accesses are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
