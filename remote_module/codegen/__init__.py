"""The generator: a ``@torch.jit.interface`` class in, remote-module source out.

Example::

    >>> from remote_module import codegen
    >>> src = codegen.render_scriptable(MyModuleInterface, enable_moving_cpu_tensors_to_cuda=True)
    >>> mod = codegen.instantiate_scriptable_remote_module_template(MyModuleInterface)
    >>> mod._generated_methods  # forward_async, forward, then every other method and its twin
"""

from __future__ import annotations

import types

from remote_module.codegen.model import Argument, Interface, Method, TypeRef, parse_interface
from remote_module.codegen.registry import (
    StaleGeneratedModuleWarning,
    non_scriptable_module,
    scriptable_module,
)
from remote_module.codegen.render import render_interface, render_non_scriptable, render_scriptable

__all__ = [
    "Argument",
    "Interface",
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
    return scriptable_module(module_interface_cls, enable_moving_cpu_tensors_to_cuda)


def instantiate_non_scriptable_remote_module_template() -> types.ModuleType:
    """The loaded generated module for RemoteModules built without an interface."""
    return non_scriptable_module()
