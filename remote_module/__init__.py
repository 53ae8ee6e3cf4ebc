"""remote_module: TorchScript-first remote ``nn.Module``s on ``torch.distributed.rpc``.

Example::

    >>> from remote_module import RemoteModule
    >>> rm = RemoteModule("worker1/cpu", torch.nn.Linear, args=(16, 4))
"""

from typing import TYPE_CHECKING, Any

# What a first construction and call without an interface need loads with the package (about
# 2.4 ms, the rest on first use): an owner that imported remote_module imports nothing at a
# first call (the first-construction-and-call figure: 1.39x its floor while the runtime was
# lazy, 0.98x eager; with only this generated module lazy, 1.54x, for an import 0.4 ms less).
from remote_module import _non_scriptable  # noqa: F401
from remote_module._contract import __version__
from remote_module.runtime.module import RemoteModule

if TYPE_CHECKING:
    from remote_module._interface import interface
    from remote_module.runtime.errors import OwnerFailover
    from remote_module.runtime.remote_device import RemoteDevice, parse_remote_device
    from remote_module.runtime.values import set_type_checking, type_checking

__all__ = [
    "OwnerFailover",
    "RemoteDevice",
    "RemoteModule",
    "__version__",
    "interface",
    "parse_remote_device",
    "set_type_checking",
    "type_checking",
]


def __getattr__(name: str) -> Any:
    # Each loads with its first use, not with the package: the decorator where a program
    # declares an interface (0.2 ms of the import), the parser where one parses a remote
    # device itself (its NamedTuple class, 0.1 ms), the type checks' switch with the walkers
    # and checks it switches (0.1 ms), OwnerFailover with the errors, which load with a first
    # failure or owner-side operation (0.2 ms).
    if name == "OwnerFailover":
        from remote_module.runtime.errors import OwnerFailover

        return OwnerFailover
    if name == "interface":
        from remote_module._interface import interface

        return interface
    if name in ("RemoteDevice", "parse_remote_device"):
        from remote_module.runtime import remote_device

        return getattr(remote_device, name)
    if name in ("set_type_checking", "type_checking"):
        from remote_module.runtime import values

        return getattr(values, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
