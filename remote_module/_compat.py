"""Every difference between the torch versions we support (2.6 to 2.15), and every private
torch name the project reaches for, in one place.

A leaf: it imports torch and the standard library, nothing of ours. Each entry says which
torch feature it is for and why it exists, in a line; each reaches a private name, or probes
for a feature, so that no other module does. A probe (``hasattr``, one import in a try) is
preferred to a version number; :data:`TORCH_VERSION` is read here only, for messages and for
the few behaviours no probe can see. Each private name is marked with the torch versions it
was checked on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc

__all__ = [
    "JIT_EXPORT_TYPED",
    "JIT_PIPELINE",
    "MODULE_INIT_TYPED",
    "TORCHSCRIPT_NOTICES",
    "TORCH_VERSION",
    "constant_result",
    "context_alive",
    "current_context_id",
    "deserialize_rref",
    "exporting",
    "fake_mode",
    "invoke_rpc_torchscript",
    "is_cpp_script_module",
    "jit_enabled",
    "outside_fake_mode",
    "profiler_enabled",
    "qualified_name",
    "register_rpc_reducer",
    "rpc_deserialize",
    "rpc_serialize",
    "rpc_started",
    "rref_counts",
    "script_class_of",
    "script_interface_named",
    "serialize_rref",
    "wrap_cpp_module",
]

R = TypeVar("R")

# (major, minor) of the running torch, for messages ("needs torch 2.8") and the notices below.
TORCH_VERSION: tuple[int, int] = tuple(  # type: ignore[assignment]
    int(part) for part in torch.__version__.split("+")[0].split(".")[:2]
)


# --- TorchScript's deprecation notices ------------------------------------------------------


# TorchScript's entry points warn since torch 2.10 (DeprecationWarning through 2.13,
# FutureWarning from 2.14; before 2.10 nothing): (whole text, category) of each notice this
# torch gives for the two entry points we use on purpose, read from the code that warns.
def _torchscript_notices() -> tuple[tuple[str, type[Warning]], ...]:
    notices = (
        (torch.jit._script.script, "`torch.jit.script` is deprecated"),  # 2.10-2.15
        (torch.jit._script.interface, "`torch.jit.interface` is deprecated"),
    )
    found: list[tuple[str, type[Warning]]] = []
    for function, text in notices:
        code = function.__code__
        said = [c for c in code.co_consts if isinstance(c, str) and c.startswith(text)]
        if not said:
            continue  # this torch does not warn for it (2.6-2.9)
        kinds = (DeprecationWarning, FutureWarning)
        found.extend((said[0], kind) for kind in kinds if kind.__name__ in code.co_names)
    return tuple(found)


TORCHSCRIPT_NOTICES = _torchscript_notices()


# Whether type checkers see torch.jit.export as typed (torch annotates it from 2.7; on 2.6 a
# method it decorates is untyped to mypy --strict and pyright in a user's own module).
JIT_EXPORT_TYPED = "return" in getattr(torch.jit.export, "__annotations__", {})

# Whether pyright sees nn.Module.__init__ as typed (annotated by 2.10; on 2.6 and 2.8 a user's
# own super().__init__() is "partially unknown" to pyright --strict).
MODULE_INIT_TYPED = "args" in getattr(torch.nn.Module.__init__, "__annotations__", {})


# --- TorchScript internals ------------------------------------------------------------------


# TorchScript's own compile pipeline, which remote_module._torchscript runs with the work that
# cannot change done once per class: private, checked on 2.6-2.15; a name a torch lacks is
# None, and scripting then goes through torch.jit.script as it is.
JIT_PIPELINE: dict[str, Any] = {
    name: getattr(source, name, None)
    for source, names in (
        (torch.jit._recursive, ("ScriptMethodStub", "make_stub", "check_module_initialized")),
        (torch.jit._recursive, ("get_module_concrete_type", "create_script_module_impl")),
        (torch.jit._recursive, ("infer_methods_to_compile", "concrete_type_store")),
        (torch.jit._script, ("call_prepare_scriptable_func", "RecursiveScriptModule")),
        (torch.jit._check, ("AttributeTypeIsSupportedChecker",)),
        (torch._jit_internal, ("get_torchscript_modifier", "FunctionModifiers")),
    )
    for name in names
}


def jit_enabled() -> bool:
    """Whether TorchScript compiles at all (``PYTORCH_JIT=0`` turns it off): private
    ``torch.jit._state._enabled``, checked on 2.6-2.15."""
    return bool(torch.jit._state._enabled.enabled)


def qualified_name(function: Callable[..., Any]) -> str:
    """The name TorchScript compiles ``function`` under: private
    ``torch._jit_internal._qualified_name``, checked on 2.6-2.15."""
    return str(torch._jit_internal._qualified_name(function))


def script_class_of(cls: type) -> Any:
    """The compiled TorchScript class of ``cls``, or None: private
    ``torch.jit._state._get_script_class``, checked on 2.6-2.15."""
    return torch.jit._state._get_script_class(cls)


def script_interface_named(name: str) -> Any:
    """The compiled TorchScript interface called ``name``: private
    ``torch.jit._state._python_cu.get_interface``, checked on 2.6-2.15."""
    return torch.jit._state._python_cu.get_interface(name)


def is_cpp_script_module(module: object) -> bool:
    """Whether ``module`` is a scripted module as C++ hands it over (an RRef's local value),
    not yet wrapped for Python: ``torch._C.ScriptModule``, checked on 2.6-2.15."""
    return isinstance(module, torch._C.ScriptModule)


def wrap_cpp_module(module: Any) -> Any:
    """A C++ scripted module wrapped as Python's ``RecursiveScriptModule``: private
    ``torch.jit._recursive.wrap_cpp_module``, checked on 2.6-2.15."""
    return torch.jit._recursive.wrap_cpp_module(module)


# --- RPC and distributed autograd internals -------------------------------------------------

# Sends a compiled TorchScript function by its qualified name, as rpc.rpc_async does for one
# (without re-reading the function each call): private, checked on 2.6-2.15.
from torch._C._distributed_rpc import _invoke_rpc_torchscript as _invoke  # noqa: E402


def invoke_rpc_torchscript(
    to: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float
) -> Any:
    """``rpc.rpc_async(to, script_fn, args, kwargs, timeout)`` for the TorchScript function
    compiled under ``name``: its future."""
    return _invoke(to, name, args, kwargs, timeout, False)


def rpc_serialize(value: Any) -> tuple[bytes, list[torch.Tensor]]:
    """``value`` pickled as torch's RPC pickles a message (its tensors apart): private
    ``rpc.internal._internal_rpc_pickler``, checked on 2.6-2.15."""
    return _rpc_pickler().serialize(value)


def rpc_deserialize(data: bytes, tensors: list[torch.Tensor]) -> Any:
    """The inverse of :func:`rpc_serialize` (torch returns a name it cannot find as its
    error, not raised)."""
    return _rpc_pickler().deserialize(data, tensors)


def register_rpc_reducer(cls: type, reducer: Callable[[Any], Any]) -> None:
    """Have torch's RPC pickler send ``cls`` through ``reducer``. Copy on write: torch's
    pickler iterates this table on every message (private ``_class_reducer_dict``, checked
    on 2.6-2.15). The caller holds a lock."""
    pickler = _rpc_pickler()
    table = pickler._class_reducer_dict
    if cls not in table:
        pickler._class_reducer_dict = {**table, cls: reducer}


def serialize_rref(rref: Any) -> Any:
    """An RRef as upstream's RemoteModule sends it inside its own state: private
    ``RRef._serialize``, checked on 2.6-2.15."""
    return rref._serialize()


def deserialize_rref(data: Any) -> Any:
    """The inverse of :func:`serialize_rref`: private ``PyRRef._deserialize``."""
    return rpc.PyRRef._deserialize(data)


def _rpc_pickler() -> Any:
    from torch.distributed.rpc.internal import _internal_rpc_pickler

    return _internal_rpc_pickler


def profiler_enabled() -> bool:
    """Whether the autograd profiler records (``rpc.rpc_async`` then records RPCs itself):
    private ``torch.autograd._profiler_enabled``, checked on 2.6-2.15."""
    return bool(torch.autograd._profiler_enabled())


def current_context_id() -> int | None:
    """The id of this thread's distributed autograd context, or None outside one: private
    ``torch.distributed.autograd._current_context``, checked on 2.6-2.15 (no public way to
    ask whether a context is current)."""
    try:
        return int(dist_autograd._current_context()._context_id())
    except RuntimeError:
        return None


def context_alive(context_id: int) -> bool:
    """Whether the distributed autograd context ``context_id`` still exists here: private
    ``torch.distributed.autograd._retrieve_context``, checked on 2.6-2.15."""
    try:
        dist_autograd._retrieve_context(context_id)
    except RuntimeError:
        return False
    return True


def fake_mode() -> Any:
    """A fake tensor mode in which a real module runs on fake arguments (its own tensors made
    fake as they are met): private ``torch._subclasses.fake_tensor.FakeTensorMode``, checked
    on 2.6-2.15."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)


def constant_result(fn: Callable[..., R]) -> Callable[..., R]:
    """``torch.compiler.assume_constant_result(fn)`` without importing ``torch._dynamo`` (1.7 s
    at every import of ours): the mark Dynamo reads, checked on 2.6-2.15. Dynamo calls ``fn``
    once per trace and keeps its result as a constant."""
    fn._dynamo_marked_constant = True  # type: ignore[attr-defined]
    return fn


@constant_result
def exporting() -> bool:
    """Whether ``torch.export`` traces the caller: read for real once per trace (Dynamo keeps
    the answer), from export's public flag (``torch.compiler.is_exporting``, torch 2.7+: it is
    set while non-strict export traces), or else from the private ``InstructionTranslator``
    of the frame Dynamo traces, in export mode in strict export (checked on 2.6.0, 2.8.0,
    2.13.0 and 2.15.0). Not ``is_exporting`` inside Dynamo's trace: 2.8 and 2.10 answer True
    there under ``torch.compile`` too."""
    is_exporting = getattr(torch.compiler, "is_exporting", None)
    if is_exporting is not None and is_exporting():
        return True
    from torch._dynamo.symbolic_convert import InstructionTranslator

    try:
        translator = InstructionTranslator.current_tx()
    except AttributeError:  # no Dynamo trace on this thread
        return False
    return bool(getattr(translator, "export", False))


def outside_fake_mode() -> Any:
    """A context in which the fake tensor mode of a trace is off (a module built for real in
    the middle of a fake kernel): private ``torch._subclasses.fake_tensor``'s
    ``unset_fake_temporarily``, checked on 2.6-2.15."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    return unset_fake_temporarily()


def rpc_started() -> bool:
    """Whether this process has an RPC agent (``init_rpc`` ran, no ``shutdown`` yet): private
    ``rpc._is_current_rpc_agent_set``, checked on 2.6-2.15."""
    return bool(rpc._is_current_rpc_agent_set())


def rref_counts() -> dict[str, int]:
    """This process's RRef bookkeeping: ``num_owner_rrefs``, ``num_forks`` (RRefs it owns that
    other holders still hold), ``num_pending_users`` and ``num_pending_futures`` (its RRef
    messages in flight, deletions included): private ``rpc._rref_context_get_debug_info``,
    checked on 2.6, 2.8, 2.13 and 2.15."""
    return {key: int(value) for key, value in rpc._rref_context_get_debug_info().items()}


def rpc_agent() -> Any:
    """This process's RPC agent: private ``rpc._get_current_rpc_agent``, checked on 2.6-2.15."""
    return rpc._get_current_rpc_agent()
