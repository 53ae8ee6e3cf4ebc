"""The generator's public face: parse an interface, render its remote-module source, and
load a generated module as upstream's instantiator does.

The generator itself is ``remote_module._generator`` (its model, parser, views, renderer and
CLI); the two ``instantiate_*`` functions hand an interface to the runtime's registry of
generated modules (``remote_module.runtime.registry``), which imports the generator only
through ``remote_module.runtime.generator``. ``remote-module-codegen`` and
``python -m remote_module.codegen`` run the CLI.

Example::

    >>> from remote_module import codegen
    >>> src = codegen.render_scriptable(MyModuleInterface, enable_moving_cpu_tensors_to_cuda=True)
    >>> mod = codegen.instantiate_scriptable_remote_module_template(MyModuleInterface)
    >>> mod._generated_methods  # forward_async, forward, then every other method and its twin
"""

from __future__ import annotations

import types

from remote_module._generator.model import (
    Argument,
    Interface,
    InterfaceKind,
    Kind,
    Method,
    TypeRef,
)
from remote_module._generator.parse import parse_interface
from remote_module._generator.render import (
    render_interface,
    render_non_scriptable,
    render_scriptable,
)
from remote_module._shared import StaleGeneratedModuleWarning
from remote_module.runtime import registry

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


def instantiate_scriptable_remote_module_template(
    module_interface_cls: type, enable_moving_cpu_tensors_to_cuda: bool = True
) -> types.ModuleType:
    """The loaded generated module for an interface: a registered pre-generated one when it is
    fresh, else the templates rendered in memory (cached per interface and flag)."""
    return registry.scriptable_module(module_interface_cls, enable_moving_cpu_tensors_to_cuda)


def instantiate_non_scriptable_remote_module_template() -> types.ModuleType:
    """The loaded generated module for RemoteModules built without an interface."""
    return registry.non_scriptable_module()
