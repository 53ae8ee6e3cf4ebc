"""Everything the runtime asks of TorchScript, in one place: scripting on purpose (quietly, with
one clear error where TorchScript is unavailable), cheap repeated ``torch.jit.script(rm)``, and
cheap repeated scripting of one module class on an owner.

torch deprecates TorchScript and warns on every ``torch.jit.script``/``torch.jit.interface``
(``DeprecationWarning`` on 2.13, ``FutureWarning`` on 2.14). The scriptable path of a
RemoteModule needs it by design, so :func:`on_purpose` silences exactly those two messages
around our own calls, and nothing else; a user's own ``torch.jit.script`` still warns.

Repeated ``torch.jit.script(rm)``: torch turns every method it compiles into a stub (the
method's parsed source and a name-resolution callback) on every call, even when the module's
type and its compiled methods are cached; reading and tokenizing the source of every method
again is most of what scripting a second RemoteModule costs (3.0 ms of torch's 3.2 ms before
this cache, 0.6 ms after). The stub of a generated method depends only on the function, so
it is made once and reused: just before scripting (``__prepare_scriptable__``) the
RemoteModule's exported methods are replaced by callable stubs, which torch takes as they are
and Python calls like the bound methods they replace. This leans on
``torch.jit._recursive.ScriptMethodStub`` and ``make_stub``; where a torch lacks them,
methods stay as they are and torch parses them as usual.

Repeated scripting of one class (an owner creating scripted modules): torch's
``torch.jit.script(module)`` caches the module's type and compiled methods, yet on every call
it reads and parses the source of the class's ``__init__`` to check its attribute annotations,
and walks every name of the module (~300 for an ``nn.Linear``) to find the methods to compile
and parses their source again: two thirds of scripting a second ``nn.Linear`` (1.5 of 2.3 ms).
:func:`script_module` runs torch's own pipeline (``torch.jit._recursive``) but does each of
those once per class: the check reads only class-level code, so its verdict cannot change;
the method search is reused only where torch would compile nothing (the module's concrete
type is compiled already), where torch uses the stubs only to name and wrap the compiled
methods, and only for instances that override nothing TorchScript looks at. Anything else,
and any torch without these helpers, goes through ``torch.jit.script`` as is.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch

from remote_module import _compat

__all__ = [
    "TorchScriptUnavailableError",
    "on_purpose",
    "parse_script_stubs",
    "script",
    "script_module",
    "use_script_stubs",
]

T = TypeVar("T")

# warnings.catch_warnings swaps a process-wide list: one of our sections at a time.
_quiet_lock = threading.RLock()


class TorchScriptUnavailableError(RuntimeError):
    """TorchScript cannot be used in this process, and something asked for it."""


@contextlib.contextmanager
def on_purpose() -> Iterator[None]:
    """Silence torch's TorchScript deprecation warnings (those two messages only) inside."""
    if not _NOTICES:  # this torch does not warn (2.6-2.9)
        yield
        return
    with _quiet_lock:
        dropped = _dropped_already()
    if dropped:
        # The process's own filters drop them already (Python's defaults do for torch 2.13's
        # DeprecationWarning): swapping the filters would cost more than the scripting around
        # it saves (catch_warnings, and every warning after it re-reading the filters).
        yield
        return
    with _quiet_lock, warnings.catch_warnings():
        for text, category in _NOTICES:
            warnings.filterwarnings("ignore", message=re.escape(text), category=category)
        yield


# Both notices as this torch words them, the module they are attributed to, and their
# category (none before torch 2.10).
_NOTICES = _compat.TORCHSCRIPT_NOTICES
_NOTICE_MODULE = "torch.jit._script"


def _dropped_already() -> bool:
    """Whether the warning filters in force drop both notices, as Python decides it: the first
    filter that matches wins, else the default action. A filter for one line number is taken
    as not dropping (which line torch warns from is not known here). Remembered for the
    filters it was worked out for (comparing them is one C-level tuple comparison)."""
    filters = (tuple(warnings.filters), warnings.defaultaction)  # type: ignore[attr-defined]
    if _last_decision[0] == filters:
        return _last_decision[1]
    dropped = all(_action(text, category) == "ignore" for text, category in _NOTICES)
    _last_decision[:] = [filters, dropped]
    return dropped


_last_decision: list[Any] = [None, False]  # [(filters, default action), dropped]


def _action(text: str, category: type[Warning]) -> str | None:
    for action, message, kind, module, lineno in warnings.filters:
        if (
            _matches(message, text)
            and issubclass(category, kind)
            and _matches(module, _NOTICE_MODULE)
        ):
            return action if not lineno else None
    return warnings.defaultaction  # type: ignore[attr-defined]


def _matches(pattern: Any, text: str) -> bool:
    """A filter's message or module: None (any), a compiled pattern, or (Python's own default
    filters) a plain string compared as a whole."""
    if pattern is None:
        return True
    if isinstance(pattern, str):
        return pattern == text
    return pattern.match(text) is not None


def script(obj: T, what: str) -> T:
    """``torch.jit.script(obj)`` without torch's deprecation warning; where TorchScript is
    unavailable, one :class:`TorchScriptUnavailableError` that says ``what`` needed it."""
    with on_purpose():
        try:
            return torch.jit.script(obj)  # type: ignore[return-value]
        except Exception as error:
            if available():
                raise
            raise unavailable(what, error) from error


def unavailable(what: str, error: BaseException | None = None) -> TorchScriptUnavailableError:
    """The error for ``what`` needing TorchScript where it is unavailable."""
    cause = f" ({type(error).__name__}: {error})" if error is not None else ""
    return TorchScriptUnavailableError(
        f"TorchScript is unavailable in this process{cause}: {what} needs it. Use a "
        "typing.Protocol interface (or none) to run RemoteModules without TorchScript."
    )


@functools.cache
def available() -> bool:
    """Whether ``torch.jit.script`` can compile a function here (checked once, on demand)."""

    def probe(x: int) -> int:
        return x + 1

    try:
        with on_purpose():
            torch.jit.script(probe)
    except Exception:
        return False
    return True


# --- Cheap repeated torch.jit.script(rm) ---------------------------------------------------

_PIPELINE = _compat.JIT_PIPELINE
_ScriptMethodStub: Any = _PIPELINE["ScriptMethodStub"]
_make_stub: Any = _PIPELINE["make_stub"]
_EXPORT = getattr(_PIPELINE["FunctionModifiers"], "EXPORT", None)
_STUBS_SUPPORTED = _ScriptMethodStub is not None and _make_stub is not None and _EXPORT is not None

_parsed_lock = threading.Lock()
# function -> (resolution callback, parsed def): what torch would compute on every script.
_parsed: weakref.WeakKeyDictionary[Callable[..., Any], tuple[Any, Any]] = (
    weakref.WeakKeyDictionary()
)

if _STUBS_SUPPORTED:

    class _BoundStub(_ScriptMethodStub):
        """A method's compile stub that is also the method bound to its module."""

        _torchscript_modifier = _EXPORT  # an exported method, for torch's method search

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return self.original_method(self._rm_self, *args, **kwargs)


def parse_script_stubs(functions: list[Callable[..., Any]]) -> None:
    """Parse the stubs :func:`use_script_stubs` will install, once per process (ahead of a
    wait, so that the parse overlaps it)."""
    if _STUBS_SUPPORTED:
        for function in functions:
            _parse(function)


def use_script_stubs(module: torch.nn.Module, functions: list[Callable[..., Any]]) -> None:
    """Replace ``module``'s methods named like ``functions`` (plain functions taking ``self``,
    exported for TorchScript) with cached stubs bound to ``module``."""
    if not _STUBS_SUPPORTED:
        return
    for function in functions:
        stub = _BoundStub(*_parse(function), function)
        stub._rm_self = module
        module.__dict__[function.__name__] = stub


def _parse(function: Callable[..., Any]) -> tuple[Any, Any]:
    with _parsed_lock:
        parsed = _parsed.get(function)
    if parsed is None:
        stub = _make_stub(function, function.__name__)
        parsed = (stub.resolution_callback, stub.def_)
        with _parsed_lock:
            _parsed[function] = parsed
    return parsed


# --- Cheap repeated scripting of one module class ---------------------------------------------

_PIPELINE_SUPPORTED = _STUBS_SUPPORTED and all(value is not None for value in _PIPELINE.values())
_DEFAULT_MODIFIER = getattr(_PIPELINE["FunctionModifiers"], "DEFAULT", None)
# Instance attributes that change what torch compiles or how it checks the class.
_INSTANCE_OVERRIDES = frozenset(
    ("forward", "__overloads__", "__jit_ignored_attributes__", "__annotations__")
)

_classes_lock = threading.Lock()
_compile_lock = threading.RLock()  # one class's first compilation at a time
# class -> the __init__ torch's attribute check accepted for it.
_checked: weakref.WeakKeyDictionary[type, Any] = weakref.WeakKeyDictionary()
# class -> (its attribute counts along the MRO, (method name, resolution callback, parsed
# def) for each method torch compiles for it).
_plans: weakref.WeakKeyDictionary[type, tuple[tuple[int, ...], tuple[Any, ...]]] = (
    weakref.WeakKeyDictionary()
)


def script_module(module: torch.nn.Module, what: str) -> Any:
    """``torch.jit.script(module)`` for a module that is not scripted yet, quiet as
    :func:`script` and, when a module of its class was scripted before, at a third of the cost
    (see the module docstring)."""
    if not _PIPELINE_SUPPORTED or not _compat.jit_enabled():
        with _compile_lock:  # (see _script_module)
            return script(module, what)
    try:
        # torch's pipeline compiles each free function the module calls with torch.jit.script
        # itself (try_compile_fn), which gives the notice too.
        with on_purpose():
            return _script_module(module)
    except Exception as error:
        if available():
            raise
        raise unavailable(what, error) from error


def _script_module(module: torch.nn.Module) -> Any:
    """What ``torch.jit.script`` does for an ``nn.Module`` (``_script_impl`` and
    ``create_script_module``), with the class-level work done once per class."""
    module = _PIPELINE["call_prepare_scriptable_func"](module)
    if isinstance(module, _PIPELINE["RecursiveScriptModule"]):
        raise AssertionError("Cannot script a RecursiveScriptModule (already compiled)")
    _PIPELINE["check_module_initialized"](module)
    concrete_type = _PIPELINE["get_module_concrete_type"](module, True)
    cls = type(module)
    init = cls.__init__
    with _classes_lock:
        checked = _checked.get(cls) is init and "__annotations__" not in vars(module)
    if not checked and _check_attributes(module):
        with _classes_lock:
            _checked[cls] = init
    # Where torch compiles nothing, it reads the stubs only for the names of the methods to
    # wrap; every submodule's type is compiled with its parent's (torch compiles them first).
    store = _PIPELINE["concrete_type_store"]
    # torch compiles a class's methods once: a second compilation of them at the same time
    # (constructions of one class reach an owner at once) raises "Can't redefine method".
    # Only a first compilation takes the lock (asked again under it).
    first = concrete_type not in store.methods_compiled
    with _compile_lock if first else contextlib.nullcontext():
        compiled = concrete_type in store.methods_compiled
        stubs = functools.partial(_method_stubs, compiled)
        return _PIPELINE["create_script_module_impl"](module, concrete_type, stubs)


def _check_attributes(module: torch.nn.Module) -> bool:
    """torch's check of the annotations in ``__init__`` (it warns of those TorchScript cannot
    initialise, or raises); whether it passed without a word, so need not run again."""
    said: list[warnings.WarningMessage] = []
    try:
        with _quiet_lock, warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            _PIPELINE["AttributeTypeIsSupportedChecker"]().check(module)
    finally:
        for warning in said:  # said again, outside the recording, as torch would have
            warnings.warn_explicit(
                warning.message,
                warning.category,
                warning.filename,
                warning.lineno,
                registry=_check_warnings_registry,  # "default" says each once, as for torch's
                source=warning.source,
            )
    return not said


_check_warnings_registry: dict[Any, Any] = {}


def _method_stubs(compiled: bool, module: torch.nn.Module) -> list[Any]:
    """``infer_methods_to_compile(module)``: torch's answer, or where torch compiles nothing
    and ``module`` overrides nothing, the one it gave for the class, bound to ``module``."""
    cls = type(module)
    plain = _overrides_nothing(module)
    version = tuple(len(vars(klass)) for klass in cls.__mro__)
    with _classes_lock:
        plan = _plans.get(cls)
    if compiled and plain and plan is not None and plan[0] == version:
        _PIPELINE["check_module_initialized"](module)
        vars(module)["__overloads__"] = {}  # as torch leaves a module without overloads
        return [
            _ScriptMethodStub(callback, parsed, getattr(module, name))
            for name, callback, parsed in plan[1]
        ]
    stubs = _PIPELINE["infer_methods_to_compile"](module)
    # Recorded from a module that overrides nothing, has no overloads, and whose every stub
    # is a method of its own (a stub found as a class attribute is not).
    if (
        plain
        and not module.__overloads__
        and all(getattr(stub.original_method, "__self__", None) is module for stub in stubs)
    ):
        methods = tuple(
            (stub.def_.name().name, stub.resolution_callback, stub.def_) for stub in stubs
        )
        with _classes_lock:
            _plans[cls] = (version, methods)
    return stubs


def _overrides_nothing(module: torch.nn.Module) -> bool:
    """Whether torch's method search can find in ``module`` nothing but what its class has:
    attribute lookup as nn.Module does it (what is neither the class's nor the instance's is
    a parameter, buffer or submodule), and no instance attribute that is a TorchScript-marked
    function or one torch reads (``forward``, ``__overloads__``, ...)."""
    cls = type(module)
    if cls.__getattr__ is not _module_getattr or cls.__getattribute__ is not _getattribute:
        return False
    state = vars(module)
    if not _INSTANCE_OVERRIDES.isdisjoint(state):
        return False
    modifier = _PIPELINE["get_torchscript_modifier"]
    return all(modifier(value) is _DEFAULT_MODIFIER for value in state.values() if callable(value))


_module_getattr = torch.nn.Module.__getattr__
_getattribute = torch.nn.Module.__getattribute__


# --- The first run on an owner ---------------------------------------------------------------
