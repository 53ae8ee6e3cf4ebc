"""remote_module: TorchScript-first remote ``nn.Module``s on ``torch.distributed.rpc``.

Example::

    >>> from remote_module import RemoteModule
    >>> rm = RemoteModule("worker1/cpu", torch.nn.Linear, args=(16, 4))
"""

# The generated module of RemoteModules without an interface, loaded with the package (about
# 0.3 ms): a first construction, or a first call reaching an owner, imports nothing.
from remote_module._generated import non_scriptable as _non_scriptable  # noqa: F401
from remote_module._version import __version__
from remote_module.runtime import (
    RemoteDevice,
    RemoteModule,
    parse_remote_device,
    set_type_checking,
    type_checking,
)

__all__ = [
    "RemoteDevice",
    "RemoteModule",
    "__version__",
    "parse_remote_device",
    "set_type_checking",
    "type_checking",
]
