"""remote_module: TorchScript-first remote ``nn.Module``s on ``torch.distributed.rpc``.

Importing the package loads the whole runtime, the caller's side and the owner's: a process
that first meets remote_module through a message (see ``remote_module.runtime.owner``) loads
it in one piece before that message's own code runs. Only what renders or checks loads later:
the generator (``remote_module.codegen``), Jinja and typeguard.

Example::

    >>> from remote_module import RemoteModule
    >>> rm = RemoteModule("worker1/cpu", torch.nn.Linear, args=(16, 4))
"""

from remote_module import _non_scriptable  # noqa: F401  (generated methods without an interface)
from remote_module._interface import interface
from remote_module._shared import __version__
from remote_module.runtime import contract  # noqa: F401  (what generated modules import)
from remote_module.runtime.batching import Batching
from remote_module.runtime.caller.module import RemoteModule
from remote_module.runtime.errors import OwnerFailover
from remote_module.runtime.remote_device import RemoteDevice, parse_remote_device
from remote_module.runtime.values import set_type_checking, type_checking

__all__ = [
    "Batching",
    "OwnerFailover",
    "RemoteDevice",
    "RemoteModule",
    "__version__",
    "interface",
    "parse_remote_device",
    "set_type_checking",
    "type_checking",
]
