"""The runtime, split by role:

- ``module``: the :class:`RemoteModule` class (what a caller holds);
- ``owner``: what runs on the owner (creating the module, parameters, state, training mode);
- ``wire``: what crosses the wire when a RemoteModule is sent over RPC;
- ``device``: parsing ``remote_device``;
- ``calls``: sending a generated method's call, checking its arguments, naming failures;
- ``registry``: the generated modules loaded in this process (pre-generated or in memory);
- ``torchscript``: the TorchScript the runtime uses on purpose;
- ``contract``: the one module generated code imports.
"""

from remote_module.runtime.calls import set_type_checking, type_checking
from remote_module.runtime.device import RemoteDevice, parse_remote_device
from remote_module.runtime.module import RemoteModule

__all__ = [
    "RemoteDevice",
    "RemoteModule",
    "parse_remote_device",
    "set_type_checking",
    "type_checking",
]
