"""The generator: an interface class in, remote-module source out.

- ``model``: the frozen, typed model of an interface;
- ``parse``: reading an interface class into it, every check included (``parse_interface``);
- ``api``: views of the model for generated code (names, declarations, imports);
- ``render``: the Jinja environment and the templates in ``remote_module/templates``;
- ``cli``: ``remote-module-codegen``.

Importing this package loads none of them (Jinja neither); each loads on first use. The
generator imports nothing of the runtime, only the contract both share
(``remote_module._shared``); the two ``instantiate_*`` functions, which load a generated
module into the runtime as upstream's instantiator does, are the runtime's, reached from here.

Example::

    >>> from remote_module import codegen
    >>> src = codegen.render_scriptable(MyModuleInterface, enable_moving_cpu_tensors_to_cuda=True)
    >>> mod = codegen.instantiate_scriptable_remote_module_template(MyModuleInterface)
    >>> mod._generated_methods  # forward_async, forward, then every other method and its twin
"""

from __future__ import annotations

import importlib
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from remote_module._shared import StaleGeneratedModuleWarning
    from remote_module.codegen.model import (
        Argument,
        Interface,
        InterfaceKind,
        Kind,
        Method,
        TypeRef,
    )
    from remote_module.codegen.parse import parse_interface
    from remote_module.codegen.render import (
        render_interface,
        render_non_scriptable,
        render_scriptable,
    )

__all__ = [
    "Argument",
    "Interface",
    "InterfaceKind",
    "Kind",
    "Method",
    "StaleGeneratedModuleWarning",
    "TypeRef",
    "instantiate_non_scriptable_remote_module_template",
    "instantiate_scriptable_remote_module_template",
    "parse_interface",
    "render_interface",
    "render_non_scriptable",
    "render_scriptable",
]

# Public name -> the module that defines it, imported on first access.
_LAZY = {
    "Argument": "remote_module.codegen.model",
    "Interface": "remote_module.codegen.model",
    "InterfaceKind": "remote_module.codegen.model",
    "Kind": "remote_module.codegen.model",
    "Method": "remote_module.codegen.model",
    "TypeRef": "remote_module.codegen.model",
    "parse_interface": "remote_module.codegen.parse",
    "render_interface": "remote_module.codegen.render",
    "render_non_scriptable": "remote_module.codegen.render",
    "render_scriptable": "remote_module.codegen.render",
    "StaleGeneratedModuleWarning": "remote_module._shared",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def instantiate_scriptable_remote_module_template(
    module_interface_cls: type, enable_moving_cpu_tensors_to_cuda: bool = True
) -> types.ModuleType:
    """The loaded generated module for an interface: a registered pre-generated one when it is
    fresh, else the templates rendered in memory (cached per interface and flag)."""
    from remote_module.runtime import registry

    return registry.scriptable_module(module_interface_cls, enable_moving_cpu_tensors_to_cuda)


def instantiate_non_scriptable_remote_module_template() -> types.ModuleType:
    """The loaded generated module for RemoteModules built without an interface."""
    from remote_module.runtime import registry

    return registry.non_scriptable_module()
