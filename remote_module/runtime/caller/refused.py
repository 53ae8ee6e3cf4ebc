"""What ``nn.Module`` offers that a RemoteModule refuses: the methods that would need the
module's local state raise ``ValueError("Method ``<name>`` not supported for RemoteModule")``
(upstream's text) and are left out of ``dir()`` (:class:`RemoteModuleType`, its metaclass,
lists what a RemoteModule has); a parent module's traversal (``named_modules``,
``state_dict`` into a destination) sees a leaf with no local state, and so do torch's own
walks while it compiles or exports a model (:func:`walked_by_torch`: Dynamo wraps every
module with ``parameters()`` and ``buffers()`` before torch 2.8; ``torch.export`` calls
``named_children()`` on every child)."""

from __future__ import annotations

import sys
import types
import weakref
from collections.abc import Iterator
from typing import Any, NoReturn

from torch import nn

__all__ = [
    "UNSUPPORTED_METHODS",
    "Refused",
    "RemoteModuleType",
    "install",
    "leaf",
    "raise_not_supported",
]

_NOT_SUPPORTED = "Method ``{}`` not supported for RemoteModule"

# nn.Module methods that would need the module's local state.
UNSUPPORTED_METHODS = tuple(
    (
        "register_buffer register_parameter add_module register_module get_submodule "
        "set_submodule get_parameter get_buffer apply cuda ipu xpu mtia cpu type float double "
        "half bfloat16 to to_empty register_backward_hook register_full_backward_hook "
        "register_full_backward_pre_hook register_forward_pre_hook register_forward_hook "
        "load_state_dict named_parameters buffers named_buffers children named_children "
        "modules requires_grad_ zero_grad share_memory extra_repr"
    ).split()
)


class RemoteModuleType(type):
    """The metaclass of ``RemoteModule``: ``dir()`` of a RemoteModule class, and of an
    instance through ``RemoteModule.__dir__``, lists what a RemoteModule has: what its classes
    define (subclasses and mixins included, RemoteModule's private helpers not) and
    ``__call__``; not nn.Module's methods, which raise on a RemoteModule or need local state.
    ``torch.jit.script`` walks this list several times on every call: with nn.Module's ~200
    names, scripting a RemoteModule again cost about 0.3 ms more."""

    def __dir__(cls) -> list[str]:
        classes = [klass for klass in cls.__mro__ if klass not in (nn.Module, object)]
        # Cached per class, recomputed when a class in between gains or loses an attribute.
        version = tuple(len(vars(klass)) for klass in classes)
        cached = _class_dirs.get(cls)
        if cached is None or cached[0] != version:
            names = {"__call__"}
            for klass in classes:
                names.update(
                    name
                    for name, value in vars(klass).items()
                    if not (nn.Module in klass.__bases__ and _hidden(name))
                    and not isinstance(value, Refused)
                    and not getattr(value, "_rm_unsupported", False)
                )
            cached = _class_dirs[cls] = (version, sorted(names))
        return list(cached[1])


def _hidden(name: str) -> bool:
    """RemoteModule's private helpers, and the property torch reads (listed, torch would try
    to compile it)."""
    return name == "__jit_ignored_attributes__" or (
        name.startswith("_") and not name.startswith("__")
    )


_class_dirs: weakref.WeakKeyDictionary[type, tuple[tuple[int, ...], list[str]]] = (
    weakref.WeakKeyDictionary()
)


# One slotted object per refused name: a function per name, with its closure and the attribute
# that kept it out of dir(), was 150 objects of the import, crossing a garbage collection there.
class Refused:
    """Not supported for RemoteModule: raises ``ValueError``."""

    __slots__ = ("__name__",)

    def __init__(self, name: str) -> None:
        self.__name__ = name

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        # Bound on an instance, as a function is: torch (Dynamo) reads ``__func__``.
        return self if instance is None else types.MethodType(self, instance)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaf_walk = _LEAF_WALKS.get(self.__name__)
        if leaf_walk is not None and walked_by_torch(sys._getframe(1)):
            return leaf_walk(args[0])
        raise_not_supported(self.__name__)

    def __repr__(self) -> str:
        return f"<refused method {self.__name__} of RemoteModule>"


def install(cls: type[nn.Module]) -> None:
    """Give ``cls`` (RemoteModule) a :class:`Refused` for each of :data:`UNSUPPORTED_METHODS`;
    its own ``parameters`` (which names ``remote_parameters``) is left out of ``dir()`` too."""
    for name in UNSUPPORTED_METHODS:
        setattr(cls, name, Refused(name))
    cls.parameters._rm_unsupported = True  # type: ignore[attr-defined]


# What a leaf with no local state answers torch's walks with (``modules``: itself alone).
_LEAF_WALKS: dict[str, Any] = {
    "named_parameters": lambda module: iter(()),
    "buffers": lambda module: iter(()),
    "named_buffers": lambda module: iter(()),
    "children": lambda module: iter(()),
    "named_children": lambda module: iter(()),
    "modules": lambda module: iter((module,)),
}
# The parts of torch that trace or export a model, whose walks over it see a leaf.
_TRACERS = (
    "torch._dynamo.",
    "torch._export.",
    "torch.export.",
    "torch.fx.",
    "torch._functorch.",
    "torch._inductor.",
    "torch._subclasses.",
    "torch._higher_order_ops.",
)


def walked_by_torch(frame: types.FrameType | None) -> bool:
    """Whether the code in ``frame`` (a refused method's caller) is torch's own, tracing or
    exporting a model; a user's direct call still raises."""
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return isinstance(name, str) and name.startswith(_TRACERS)


def raise_not_supported(name: str, hint: str = "") -> NoReturn:
    raise ValueError(_NOT_SUPPORTED.format(name) + hint)


def leaf(
    module: nn.Module, memo: set[nn.Module], prefix: str, remove_duplicate: bool
) -> Iterator[tuple[str, nn.Module]]:
    """``named_modules`` of a module with no submodules, as a parent's traversal asks it."""
    if module not in memo:
        if remove_duplicate:
            memo.add(module)
        yield prefix, module
