"""Where generated modules live at run time: registered pre-generated ones, or in memory.

A module written by ``remote-module-codegen`` registers itself when imported. The runtime asks
:func:`scriptable_module` for an interface's module: a registered, fresh module wins; otherwise
the templates are rendered in memory under a name derived from everything that changes the
output (interface fingerprint, generator version, the device-movement flag), so the caller and
the owner compile the same TorchScript functions under the same qualified names.

Rendering goes through ``remote_module.runtime.generator``, the runtime's one door to the
generator, which loads it (and Jinja) only when a module is rendered; ``cache`` keeps rendered
modules on disk between processes.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import linecache
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from remote_module import _shared, _torchscript
from remote_module._shared import (
    NON_SCRIPTABLE_MODULE,
    StaleGeneratedModuleWarning,
    __version__,
)
from remote_module.runtime import cache, generator

if TYPE_CHECKING:
    from remote_module.runtime.generator import Interface

__all__ = [
    "IN_MEMORY_PACKAGE",
    "NON_SCRIPTABLE_MODULE",
    "StaleGeneratedModuleWarning",
    "check_fresh",
    "compile_remote_functions",
    "ensure_module",
    "import_generated",
    "in_script_family",
    "interface_model",
    "non_scriptable_module",
    "register",
    "remote_function",
    "scriptable_module",
    "scriptable_module_name",
]

# The prefix of modules rendered in memory: a name only, no package on disk (a generated
# module, once in sys.modules, is found by its full name; its parent is never imported).
IN_MEMORY_PACKAGE = "remote_module._generated"
_RENDERED_PREFIX = "<remote_module generated "


# Guards the tables below; held only while reading or writing them, never while a generated
# module runs (its import calls check_fresh and register, which take it).
_lock = threading.Lock()
# Held while TorchScript compiles remote functions (compiling one function twice at once fails).
_compile_lock = threading.Lock()
# Held while a module is imported or rendered: one load at a time (loads are rare); nothing a
# generated module calls takes it.
_load_lock = threading.RLock()
# (interface qualified name, moves tensors) -> a fresh module that registered itself.
_registered: dict[tuple[str, bool], types.ModuleType] = {}
# The same key -> why an imported module was found stale, repeated when it would have been used.
_stale: dict[tuple[str, bool], str] = {}
_registered_non_scriptable: list[types.ModuleType] = []
# generated module -> which of its lists of remote functions are compiled in this process
_compiled: weakref.WeakKeyDictionary[types.ModuleType, frozenset[str]] = weakref.WeakKeyDictionary()


def check_fresh(module_name: str, version: str, fingerprint: str, interface_cls: type) -> None:
    """Called at the top of a generated module: a stale one (another generator version, a
    changed interface) warns why, and :func:`register` then leaves it unused."""
    reason = _why_stale(version, fingerprint, interface_cls)
    if reason is None:
        return
    key = (_qualified_name(interface_cls), sys.modules[module_name].MOVES_CPU_TENSORS_TO_DEVICE)
    message = f"{module_name} is stale ({reason})"
    with _lock:
        _stale[key] = message
    _warn_stale(message)


def compile_remote_functions(
    module: types.ModuleType, wire: bool = False, keyed: bool = False
) -> None:
    """Compile the TorchScript remote functions of a generated module, once per process
    (``wire``: also those that cast to a wire dtype, which only RemoteModules with a
    ``wire_dtype`` call; ``keyed``: also those that find the module by its key, which only
    Python calls of a filed module use). The owner runs them; a Python caller reads their
    schema to send a call by name."""
    lists = _function_lists(wire, keyed)
    if _compiled.get(module, frozenset()) >= set(lists):
        return  # every construction asks; once compiled, without taking the lock
    with _compile_lock:
        for name in lists:
            for function in getattr(module, name, ()):
                _torchscript.script(
                    function, f"the remote function {function.__name__} of {module.__name__}"
                )
        _compiled[module] = frozenset(lists) | _compiled.get(module, frozenset())


def register(module_name: str) -> None:
    """Called at the end of every generated module: make it the one the runtime uses."""
    if module_name.startswith(IN_MEMORY_PACKAGE + "."):
        return  # found by its name, which already encodes everything that shaped it
    module = sys.modules[module_name]
    if not hasattr(module, "INTERFACE"):
        if module.GENERATOR_VERSION != __version__:
            _warn_stale(
                f"{module_name} is stale (generated by remote_module "
                f"{module.GENERATOR_VERSION}, this is {__version__})"
            )
        elif module_name != NON_SCRIPTABLE_MODULE:
            with _lock:
                _registered_non_scriptable[:] = [module]
        return
    interface_cls = module._rm_module_interface_cls
    if _why_stale(module.GENERATOR_VERSION, module.INTERFACE_FINGERPRINT, interface_cls):
        return
    with _lock:
        key = (_qualified_name(interface_cls), module.MOVES_CPU_TENSORS_TO_DEVICE)
        _registered[key] = module
        _stale.pop(key, None)
    # Build-time stubs compile as they are imported, before any RemoteModule needs them.
    compile_remote_functions(module)


def scriptable_module(interface_cls: type, move_tensors: bool) -> types.ModuleType:
    """The generated module for ``interface_cls``: a registered one, or rendered in memory."""
    name = scriptable_module_name(interface_cls, move_tensors)
    return ensure_module(name, interface_cls, bool(move_tensors))


def scriptable_module_name(interface_cls: type, move_tensors: bool) -> str:
    """The name of the module :func:`scriptable_module` returns, without loading it."""
    interface = interface_model(interface_cls)
    key = (interface.qualified_name, bool(move_tensors))
    # A module that moves tensors checks the device at run time, so it serves CPU modules too.
    keys = [key] if move_tensors else [key, (interface.qualified_name, True)]
    with _lock:
        stale = None
        for candidate in keys:
            module = _registered.get(candidate)
            if module is not None and module._rm_module_interface_cls is interface_cls:
                name = module.__name__
                break
        else:
            name = in_memory_name(interface, bool(move_tensors))
            stale = _stale.get(key)
    if stale is not None:  # said every time it would have been used
        _warn_stale(stale)
    return name


def non_scriptable_module() -> types.ModuleType:
    """The generated module for RemoteModules built without an interface: a registered one
    (a user's build-time output), else the one remote_module ships, generated at build time
    like any other (no rendering on the first construction's critical path)."""
    with _lock:
        if _registered_non_scriptable:
            return _registered_non_scriptable[0]
    return import_generated(NON_SCRIPTABLE_MODULE)


def ensure_module(
    module_name: str,
    interface_cls: type | None,
    move_tensors: bool,
    wire: bool = False,
    keyed: bool = False,
) -> types.ModuleType:
    """The module called ``module_name``, ready to call through: imported when it is
    importable and fresh, otherwise rendered in memory under that same name, so TorchScript's
    qualified names match on the caller and the owner; its TorchScript remote functions
    compiled (both sides need them: the owner runs them, a caller reads their schema), their
    wire twins too with ``wire``, their keyed twins with ``keyed``."""
    in_memory = module_name.startswith(IN_MEMORY_PACKAGE + ".")
    with _load_lock:
        module = sys.modules.get(module_name)
        if module is None and not in_memory:
            try:
                module = import_generated(module_name)
            except ImportError:
                module = None
        if module is not None and interface_cls is not None and _stale_here(module_name, module):
            # A build-time module that is stale here (its import warned why), while the
            # caller that named it has a fresh one: not used, nor compiled.
            module = None
        if module is None:
            if interface_cls is None:
                return non_scriptable_module()
            # An in-memory name is parsed only on a cache miss (an owner with the cache warm
            # skips it). A build-time module's name says nothing of the interface it was made
            # from, so its cache entry is keyed by the in-memory name too, which does.
            render = functools.partial(generator.render, interface_cls, move_tensors)
            key = module_name
            if not in_memory:
                model = interface_model(interface_cls)
                key = f"{module_name}|{in_memory_name(model, move_tensors)}"
            module = _load_in_memory(module_name, render, key, replace=not in_memory)
    compile_remote_functions(module, wire, keyed)
    return module


def import_generated(module_name: str) -> types.ModuleType:
    """Import a build-time generated module top-down: each package above it first, then the
    module. Python locks the module before its parent, so two threads that import two modules
    of one package bottom-up, while the package's ``__init__`` imports both, would each hold
    what the other waits for (Python then hands one a half-initialised module); top-down, the
    second waits for the package as a whole."""
    parts = module_name.split(".")
    for end in range(1, len(parts)):
        importlib.import_module(".".join(parts[:end]))
    return importlib.import_module(module_name)


def _function_lists(wire: bool, keyed: bool = False) -> tuple[str, ...]:
    return (
        "_remote_functions",
        *(("_wire_functions",) if wire else ()),
        *(("_keyed_functions",) if keyed else ()),
    )


def in_memory_name(interface: Interface, move_tensors: bool) -> str:
    """A module name that changes with every input that changes the rendered source."""
    digest = hashlib.sha256(
        f"{interface.fingerprint}|{__version__}|{move_tensors}".encode()
    ).hexdigest()[:12]
    safe = interface.qualified_name.replace(".", "_")
    return f"{IN_MEMORY_PACKAGE}.{safe}_{digest}"


def _load_in_memory(
    name: str, render: Callable[[], str], cache_key: str | None = None, replace: bool = False
) -> types.ModuleType:
    """The module ``name`` rendered in memory (or loaded from the render cache under
    ``cache_key``, the name by default); ``replace``: in place of a module of that name that
    was imported from a file."""
    existing = sys.modules.get(name)
    if existing is not None and (not replace or _is_rendered(existing)):
        return existing
    filename = f"{_RENDERED_PREFIX}{name}>"
    key = name if cache_key is None else cache_key
    cached = cache.load(key)
    if cached is not None:
        source, code = cached
    else:
        source = render()
        # dont_inherit: this file's __future__ flags must not leak into generated code.
        code = compile(source, filename, "exec", dont_inherit=True)
        cache.store(key, source, code)
    # TorchScript reads function source through inspect/linecache; an entry with no mtime
    # is never evicted by linecache.checkcache().
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        if existing is None:
            del sys.modules[name]
        else:
            sys.modules[name] = existing
        raise
    return module


def _stale_here(module_name: str, module: types.ModuleType) -> bool:
    """Whether ``module``, imported as the build-time module ``module_name``, did not register
    (it is stale in this process) and has not been rendered in memory in its place."""
    return (
        not module_name.startswith(IN_MEMORY_PACKAGE + ".")
        and not _is_registered(module)
        and not _is_rendered(module)
    )


def _is_rendered(module: types.ModuleType) -> bool:
    """Whether ``module`` was rendered in memory here (not imported from a file)."""
    return str(getattr(module, "__file__", "")).startswith(_RENDERED_PREFIX)


def _is_registered(module: types.ModuleType) -> bool:
    with _lock:
        return any(found is module for found in _registered.values())


def interface_model(interface_cls: type) -> Interface:
    """The parsed model of ``interface_cls`` (the generator loads with the first interface)."""
    return generator.interface_model(interface_cls)


def _why_stale(version: str, fingerprint: str, interface_cls: type) -> str | None:
    if version != __version__:
        return f"generated by remote_module {version}, this is {__version__}"
    current = interface_model(interface_cls).fingerprint
    if fingerprint != current:
        return (
            f"interface {_qualified_name(interface_cls)} changed: fingerprint {fingerprint} "
            f"in the module, {current} now"
        )
    return None


def _warn_stale(message: str) -> None:
    warnings.warn(
        f"{message}; not using it, rendering the templates in memory instead "
        "(run remote-module-codegen again)",
        StaleGeneratedModuleWarning,
        stacklevel=3,
    )


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def remote_function(function: tuple[str, str] | Callable[..., Any]) -> Callable[..., Any]:
    """The remote function a message names by its generated module's and its own names
    (that module imported, top-down, if this process has not yet), or the function itself."""
    if type(function) is not tuple:
        return function  # type: ignore[return-value]
    module_name, name = function
    module = sys.modules.get(module_name)
    if module is None or getattr(module.__spec__, "_initializing", False):
        module = import_generated(module_name)
    return getattr(module, name)


def in_script_family(remote_fn: Callable[..., Any]) -> bool:
    """Whether ``remote_fn`` comes from a generated module of a TorchScript interface."""
    module = sys.modules.get(getattr(remote_fn, "__module__", ""))
    interface_cls = getattr(module, _shared.INTERFACE_CLASS, None)
    return interface_cls is not None and _shared.is_script_interface(interface_cls)
