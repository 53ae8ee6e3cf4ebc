"""The runtime's one door to the generator (``remote_module.codegen``), opened lazily.

The runtime needs the generator only where no build-time module serves an interface: to parse
the interface (its fingerprint and in-memory module name) and to render its module in memory.
Both load the generator here, on first use: ``import remote_module`` loads neither it nor Jinja.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from remote_module._generator.model import Interface

__all__ = ["interface_model", "render"]

_models: weakref.WeakKeyDictionary[type, Interface] = weakref.WeakKeyDictionary()


def interface_model(interface_cls: type) -> Interface:
    """The parsed (and cached) model of ``interface_cls``, checked as the CLI checks it."""
    model = _models.get(interface_cls)
    if model is None:
        from remote_module._generator.parse import parse_interface

        model = _models[interface_cls] = parse_interface(interface_cls)
    return model


def render(interface_cls: type, move_tensors: bool) -> str:
    """The source of ``interface_cls``'s generated module, rendered from the templates."""
    from remote_module._generator.render import render_interface  # Jinja, only to render

    return render_interface(interface_model(interface_cls), move_tensors)
