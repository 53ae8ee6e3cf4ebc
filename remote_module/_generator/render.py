"""Rendering: the model in, Python source out, from the Jinja files in ``templates/``.

One Jinja environment with every setting explicit, one filter and the layout helpers of
``remote_module._generator.api``; templates get the model and its view
(``views.InterfaceView``), whose finished pieces they put in place. Templates are package
data, so the CLI at build time and the runtime on any worker render the same bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import jinja2

from remote_module._generator import api, views
from remote_module._generator.model import Interface, InterfaceKind, string_literal
from remote_module._generator.parse import parse_interface
from remote_module._shared import __version__

__all__ = [
    "GeneratedModule",
    "render_interface",
    "render_non_scriptable",
    "render_package_init",
    "render_scriptable",
    "template_name",
]

NON_SCRIPTABLE_TEMPLATE = "non_scriptable.py.j2"
PACKAGE_INIT_TEMPLATE = "package_init.py.j2"
_TEMPLATES = {InterfaceKind.SCRIPT: "scriptable.py.j2", InterfaceKind.PROTOCOL: "eager.py.j2"}


@dataclass(frozen=True)
class GeneratedModule:
    """A module of a generated package, as its ``__init__.py`` imports it."""

    name: str
    typed_class: str | None = None


def render_scriptable(
    module_interface_cls: object, enable_moving_cpu_tensors_to_cuda: bool = True
) -> str:
    """Render the remote methods of an interface class (``@torch.jit.interface`` or
    ``typing.Protocol``), and its typed RemoteModule class.

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
    """Render an already parsed :class:`Interface` with its family's template."""
    name = template_name(interface)
    return (
        _environment()
        .get_template(name)
        .render(
            interface=interface,
            view=views.InterfaceView(interface, move_tensors),
            template=name,
            version=__version__,
        )
    )


def template_name(interface: Interface) -> str:
    """The template of ``interface``'s family."""
    return _TEMPLATES[interface.kind]


def render_non_scriptable() -> str:
    """Render ``forward``/``forward_async`` over ``*args, **kwargs`` (no interface)."""
    return _environment().get_template(NON_SCRIPTABLE_TEMPLATE).render(version=__version__)


def render_package_init(modules: Sequence[GeneratedModule]) -> str:
    """Render the ``__init__.py`` of a generated package holding ``modules``."""
    ordered = sorted(modules, key=lambda module: module.name)
    exports = sorted(
        [module.name for module in ordered]
        + [module.typed_class for module in ordered if module.typed_class]
    )
    imported = api.ImportLine(".", tuple(module.name for module in ordered))
    listed = api.wrapped("__all__ = ", [string_literal(name) for name in exports], brackets="[]")
    if not exports:
        listed = "__all__: list[str] = []"
    template = _environment().get_template(PACKAGE_INIT_TEMPLATE)
    return template.render(modules=ordered, imported=imported, exports=listed)


@functools.cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        # Jinja's own cache of compiled templates (a private directory under the system's
        # temporary one, entries checked against the template source): a process after the
        # first renders without compiling the templates again (about 20 ms saved).
        bytecode_cache=_bytecode_cache(),
        loader=jinja2.PackageLoader("remote_module", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        auto_reload=False,
    )
    environment.filters["pystr"] = string_literal
    environment.globals.update(
        define=api.define,
        wrapped=api.wrapped,
        wrapped_comprehension=api.wrapped_comprehension,
    )
    return environment


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    try:
        return jinja2.FileSystemBytecodeCache()
    except (OSError, RuntimeError):  # no usable private directory: compile every time
        return None
