"""Rendering: the model in, Python source out, from the Jinja files in ``templates/``.

One Jinja environment with every setting explicit. Templates are package data, so the CLI at
build time and the runtime on any worker render the same bytes.
"""

from __future__ import annotations

import functools

import jinja2

from remote_module._version import __version__
from remote_module.codegen.model import Interface, parse_interface

__all__ = [
    "NON_SCRIPTABLE_TEMPLATE",
    "SCRIPTABLE_TEMPLATE",
    "render_non_scriptable",
    "render_scriptable",
]

SCRIPTABLE_TEMPLATE = "scriptable.py.j2"
NON_SCRIPTABLE_TEMPLATE = "non_scriptable.py.j2"


def render_scriptable(
    module_interface_cls: object, enable_moving_cpu_tensors_to_cuda: bool = True
) -> str:
    """Render the scriptable remote methods of a ``@torch.jit.interface`` class.

    ``enable_moving_cpu_tensors_to_cuda`` (any non-CPU device, despite the upstream name)
    adds code, generated from the argument and result types, that moves CPU tensors to the
    module's device and results back to the CPU when no device map is set.

    Example::

        >>> src = render_scriptable(MyModuleInterface)
        >>> "def forward_async(" in src
        True
    """
    return render_interface(
        parse_interface(module_interface_cls), enable_moving_cpu_tensors_to_cuda
    )


def render_interface(interface: Interface, move_tensors: bool) -> str:
    """Render an already parsed :class:`Interface`."""
    template = _environment().get_template(SCRIPTABLE_TEMPLATE)
    return template.render(interface=interface, move=bool(move_tensors), version=__version__)


def render_non_scriptable() -> str:
    """Render ``forward``/``forward_async`` over ``*args, **kwargs`` (no interface)."""
    return _environment().get_template(NON_SCRIPTABLE_TEMPLATE).render(version=__version__)


@functools.cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        # Jinja's own cache of compiled templates (a private directory under the system's
        # temporary one, entries checked against the template source): a process after the
        # first renders without compiling the templates again.
        bytecode_cache=_bytecode_cache(),
        loader=jinja2.PackageLoader("remote_module", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        auto_reload=False,
    )
    environment.filters["pyrepr"] = repr
    return environment


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    try:
        return jinja2.FileSystemBytecodeCache()
    except (OSError, RuntimeError):  # no usable private directory: compile every time
        return None
