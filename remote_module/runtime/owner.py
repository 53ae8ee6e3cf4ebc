"""What runs on the owner: creating the module, finding it for a call, and the requests a
RemoteModule sends besides its generated methods (parameters, state dicts, training mode, its
class name).

The key table. Eager calls (RemoteModules without a TorchScript interface) do not send the
module's RRef: pickling an RRef costs a fork, acknowledged by another protocol message, on
every call. A RemoteModule's first call sends the RRef once (:func:`first_call`); the owner
files the module under a new key and says which; later calls send the key (an int), which
:func:`module_for` looks up. The rules:

- the table holds each module weakly: an entry lives exactly as long as the RRef's value, so
  the module is freed when its last RRef goes, as without the table;
- keys come from one counter per owner process and are never reused, so a stale key can
  never reach another module; a call whose module was freed fails with a RuntimeError that
  says so;
- a module the owner cannot hold with the RRef's lifetime (the C++ module behind an
  interface-typed RRef, which gets a new Python wrapper on every access) gets no key there,
  and its RemoteModule keeps sending the RRef.

Scripted modules (a TorchScript interface) are filed the other way, by :func:`file_keyed`:
Python has no weak reference to the C++ module, so the table holds it strongly, for exactly
as long as the filing's *keeper* lives: an RRef to a small object of this module's, sent to
the RemoteModule that asked and held there beside its module RRef. When that RemoteModule
goes, so does its keeper, and the entry with it; the module itself lives on exactly as long
as its own RRef. Python calls of a scripted module then run the keyed TorchScript remote
functions, which find it with :func:`keyed_module`; TorchScript callers keep sending the RRef.
Keys come from the same counter as above.
"""

from __future__ import annotations

import ast
import collections
import itertools
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.distributed.rpc as rpc
from torch import nn
from torch.nn.parameter import Parameter

from remote_module._torchscript import script_module
from remote_module.runtime import registry

__all__ = [
    "Created",
    "CreationFailure",
    "FirstReply",
    "create_interface_module",
    "create_module",
    "ensure_generated_module",
    "file_keyed",
    "first_call",
    "keyed_module",
    "load_state_dict",
    "local_module",
    "module_for",
    "parameter_rrefs",
    "state_dict",
    "train",
    "type_name",
]


class CreationFailure(NamedTuple):
    """Why ``module_cls(*args, **kwargs)`` failed on the owner: the error's builtin type name
    and its own message, sent back as data so the caller raises it once, without RPC's
    remote-traceback wrapping."""

    error_type: str
    message: str


# The reply to a RemoteModule's first eager call: the method's result and the module's key in
# the table (None when it has none), or why the module could not be created. A plain tuple:
# a NamedTuple's class travels by name and costs tens of microseconds more to pickle cold.
FirstReply = tuple[Any, int | None] | CreationFailure


# key -> module, held weakly (see the module docstring); keys never repeat.
_modules: weakref.WeakValueDictionary[int, nn.Module] = weakref.WeakValueDictionary()
_keys = itertools.count(1)


def first_call(
    remote_fn: Callable[..., Any], module_rref: rpc.RRef[Any], *rest: Any, **kwargs: Any
) -> FirstReply:
    """Run a RemoteModule's first eager call: file the module under a new key, then call
    ``remote_fn`` as later calls will, with that key (``rest``: the call prefix after the
    RRef, then the call's own arguments)."""
    try:
        module = module_rref.local_value()
    except Exception as error:  # the creation failed; the RRef holds its remote error
        return _creation_failure(error)
    key = _register(module)
    reference: Any = module_rref if key is None else key
    return remote_fn(reference, *rest, **kwargs), key


def module_for(reference: Any) -> Any:
    """The module an eager call names: a key in the table, or (where there is no key) its RRef."""
    if type(reference) is int:
        module = _modules.get(reference)
        if module is None:
            raise RuntimeError(
                f"RemoteModule: the module filed under key {reference} on this owner is gone: "
                "its last RRef was deleted before this call arrived"
            )
        return module
    return reference.local_value()


# key -> scripted module, held strongly while the filing's keeper lives (see the docstring).
_held: dict[int, Any] = {}


class Keeper:
    """The value of a filing's keeper RRef: the key it holds in the table, dropped with it."""

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        self.key = key

    def __del__(self) -> None:
        _held.pop(self.key, None)


def file_keyed(
    module_rref: rpc.RRef[Any], module_name: str, interface_cls: Any, move_tensors: bool
) -> tuple[int, rpc.RRef[Keeper]]:
    """File the module behind ``module_rref`` for the keyed remote functions of
    ``module_name`` (compiled here first): its key, and the keeper that holds it there."""
    registry.ensure_module(module_name, interface_cls, move_tensors, keyed=True)
    module = module_rref.local_value()
    key = next(_keys)
    _held[key] = module
    return key, rpc.RRef(Keeper(key))


def keyed_module(key: int) -> Any:
    """The module filed under ``key`` by :func:`file_keyed`."""
    module = _held.get(key)
    if module is None:
        raise RuntimeError(
            f"RemoteModule: the module filed under key {key} on this owner is gone: the "
            "RemoteModule that filed it was deleted before this call arrived"
        )
    return module


def _register(module: Any) -> int | None:
    if isinstance(module, torch._C.ScriptModule):
        return None  # a new wrapper on every access: nothing here lives as long as the RRef
    key = next(_keys)
    try:
        _modules[key] = module
    except TypeError:  # not weakly referenceable
        return None
    return key


def _creation_failure(error: BaseException) -> CreationFailure:
    """The failed creation's own error type and message. torch keeps it as the text of a
    remote error, ``On WorkerInfo(...):`` then ``repr(error)`` then the traceback; where that
    text is not in this form, the whole of it."""
    lines = str(error).split("\n", 2)
    if len(lines) >= 2 and lines[0].startswith("On WorkerInfo"):
        try:
            call = ast.parse(lines[1].strip(), mode="eval").body
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                parts = [ast.literal_eval(argument) for argument in call.args]
                return CreationFailure(call.func.id, ", ".join(map(str, parts)))
        except (SyntaxError, ValueError):
            pass
    return CreationFailure(type(error).__name__, str(error))


def create_module(
    module_cls: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], device: str
) -> nn.Module:
    """``module_cls(*args, **kwargs)`` on ``device``; the value of the RemoteModule's RRef."""
    module = module_cls(*args, **kwargs)
    if not isinstance(module, nn.Module):
        raise ValueError(
            "Expect `module_cls(*args, **kwargs)` returns an instance of <class nn.Module>, "
            f"but it returns an instance of {type(module)}."
        )
    if device != "cpu" or not _plain_module_on_cpu(module):
        module = module.to(device)
    return module


# The reply to a construction with an interface: the module's RRef, and whether this owner
# already has the generated module loaded and compiled (else the caller asks for it with
# :func:`ensure_generated_module` before its first call). A plain tuple, as FirstReply.
Created = tuple[rpc.RRef[Any], bool]


def create_interface_module(
    module_cls: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    device: str,
    interface_cls: Any,
    module_name: str,
    wire: bool = False,
) -> Created | CreationFailure:
    """Create the module; for a TorchScript interface, script it and reply with an
    interface-typed RRef to it, for a Protocol a plain RRef. When ``module_cls`` fails, why
    (as data).

    The generated module is not loaded here: its load and compile would delay the reply by
    as long again as creating a small module. The reply says whether it is ready; where it is
    not, the caller has it loaded by a second request while it goes on, and holds its first
    call until that is done (``calls.wait_for_owner``)."""
    scripted = registry.is_script_interface(interface_cls)
    try:
        module = create_module(module_cls, args, kwargs, device)
        if scripted and not isinstance(module, torch.jit.ScriptModule):
            module = script_module(module, f"scripting {type(module).__qualname__} on its owner")
    except Exception as error:
        return CreationFailure(type(error).__name__, str(error))
    ready = registry.is_ready(module_name, wire)
    if scripted and isinstance(module, torch.jit.ScriptModule):
        return rpc.RRef(module, interface_cls), ready
    # A Protocol interface, or TorchScript disabled (PYTORCH_JIT=0): a plain module.
    return rpc.RRef(module), ready


def ensure_generated_module(
    module_name: str, interface_cls: Any, move_tensors: bool, wire: bool = False
) -> None:
    """Make sure the owner can run the remote functions of ``module_name``."""
    registry.ensure_module(module_name, interface_cls, move_tensors, wire)


def local_module(module_rref: rpc.RRef) -> nn.Module:
    """The module an RRef owns here; an interface-typed RRef yields the bare C++ script module,
    which gets its Python wrapper back (``train``, ``state_dict``, ``parameters``)."""
    module = module_rref.local_value()
    if isinstance(module, torch._C.ScriptModule):
        return torch.jit._recursive.wrap_cpp_module(module)
    return module


def parameter_rrefs(module_rref: rpc.RRef, recurse: bool) -> list[rpc.RRef[Parameter]]:
    return [rpc.RRef(param) for param in local_module(module_rref).parameters(recurse)]


def state_dict(module_rref: rpc.RRef) -> dict[str, torch.Tensor]:
    state = local_module(module_rref).state_dict()
    return collections.OrderedDict((key, value.detach().cpu()) for key, value in state.items())


def load_state_dict(module_rref: rpc.RRef, state: dict[str, Any], strict: bool) -> Any:
    result = local_module(module_rref).load_state_dict(state, strict=strict)
    return (list(result.missing_keys), list(result.unexpected_keys))


def train(module_rref: rpc.RRef, mode: bool) -> None:
    local_module(module_rref).train(mode)


def type_name(module_rref: rpc.RRef) -> str:
    module = local_module(module_rref)
    return getattr(module, "original_name", None) or type(module).__qualname__


def _plain_module_on_cpu(module: nn.Module) -> bool:
    """Whether ``module.to("cpu")`` would change nothing: no ``to``/``_apply`` of its own and
    every parameter and buffer on the CPU. ``.to()`` walks every submodule and tensor even
    then, at a cost comparable to creating a small module; user methods such as
    ``parameters()`` are not called here."""
    pending = [module]
    while pending:
        current = pending.pop()
        cls = type(current)
        if cls.to is not nn.Module.to or cls._apply is not nn.Module._apply:
            return False
        for tensors in (current._parameters, current._buffers):
            for tensor in tensors.values():
                if tensor is not None and not tensor.is_cpu:
                    return False
        pending.extend(child for child in current._modules.values() if child is not None)
    return True
