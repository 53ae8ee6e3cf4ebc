"""Creating a RemoteModule's module on this process (its owner, or a standby taking over), and
reaching a module an RRef owns here.

An owner scripts modules on its RPC threads, beside the process's other threads, and
TorchScript's frontend reads source with ``ast.parse``. On CPython before 3.11.8 and 3.12.2
two parses at once can fail with ``SystemError: AST constructor recursion depth mismatch``
(python/cpython#106905; an owner's creation failed so in CI): there, importing this module
(``import remote_module`` does) makes ``ast.parse`` take one lock.
"""

from __future__ import annotations

import ast
import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed.rpc as rpc
from torch import nn

from remote_module import _compat, _torchscript
from remote_module.runtime.errors import CreationFailure, NotCreated, creation_failure

__all__ = [
    "FailedCreation",
    "create_module",
    "failure_of",
    "from_recipe",
    "local_module",
    "owned_rref",
    "owned_value",
]

if sys.version_info < (3, 11, 8) or (3, 12) <= sys.version_info < (3, 12, 2):
    _parse, _parse_lock = ast.parse, threading.RLock()  # a finalizer run mid-parse may parse

    @functools.wraps(_parse)
    def _locked_parse(*args: Any, **kwargs: Any) -> Any:  # the module's docstring says why
        with _parse_lock:
            return _parse(*args, **kwargs)

    ast.parse = _locked_parse


def create_module(
    module_cls: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], device: str
) -> nn.Module:
    """``module_cls(*args, **kwargs)`` on ``device``; the value of the RemoteModule's RRef.
    A device that cannot hold the module here raises one line (a ``RuntimeError``) that names
    the device and why, not torch's text of the operator that failed."""
    module = module_cls(*args, **kwargs)
    if not isinstance(module, nn.Module):
        raise ValueError(
            "Expect `module_cls(*args, **kwargs)` returns an instance of <class nn.Module>, "
            f"but it returns an instance of {type(module)}."
        )
    try:
        return module.to(device)
    except Exception as error:
        raise RuntimeError(
            f"device {device!r} cannot hold {type(module).__qualname__}: "
            f"{_first_sentence(str(error))}"
        ) from None


def _first_sentence(text: str) -> str:
    """What torch says first: the operator it could not run on that device, say, without the
    list of backends and build hints that follow."""
    line = text.strip().split("\n", 1)[0]
    end = line.find(". ")
    return line if end < 0 else line[:end]


def owned_rref(module: nn.Module, interface_cls: Any, scripted: bool, where: str) -> rpc.RRef[Any]:
    """An RRef to ``module`` for its RemoteModule: for a TorchScript interface the module
    scripted (``where`` says where, for errors) and the RRef typed as the interface, which
    TorchScript checks; else a plain RRef (a Protocol, or TorchScript disabled)."""
    if scripted and not isinstance(module, torch.jit.ScriptModule):
        module = _torchscript.script_module(
            module, f"scripting {type(module).__qualname__} {where}"
        )
    if scripted and isinstance(module, torch.jit.ScriptModule):
        return rpc.RRef(module, interface_cls)
    return rpc.RRef(module)


class FailedCreation:
    """The value of a RemoteModule's RRef (one without an interface) whose module could not be
    created: ``owner.create`` returns it instead of raising, which torch would print here.
    Whatever uses it raises :class:`NotCreated`, which reaches the caller as the creation's
    error."""

    __slots__ = ("failure",)

    def __init__(self, failure: CreationFailure) -> None:
        self.failure = failure

    def __getattr__(self, name: str) -> Any:
        raise NotCreated.of(self.failure)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotCreated.of(self.failure)

    def __reduce__(self) -> Any:
        raise NotCreated.of(self.failure)


def owned_value(module_rref: rpc.RRef[Any]) -> Any:
    """The value an RRef owns here; where its module was never created, :class:`NotCreated`
    says why (not torch's text of it)."""
    try:
        module = module_rref.local_value()
    except Exception as error:  # the RRef holds the creation's failure
        raise NotCreated.of(creation_failure(error)) from None
    if type(module) is FailedCreation:
        raise NotCreated.of(module.failure)
    return module


def local_module(module_rref: rpc.RRef[Any]) -> nn.Module:
    """The module an RRef owns here; an interface-typed RRef yields the bare C++ script module,
    which gets its Python wrapper back (``train``, ``state_dict``, ``parameters``). Where the
    module was never created, :class:`NotCreated` says why (not torch's text of it)."""
    module = owned_value(module_rref)
    if _compat.is_cpp_script_module(module):
        return _compat.wrap_cpp_module(module)
    return module


def from_recipe(
    recipe: bytes, tensors: list[torch.Tensor], device: str
) -> nn.Module | FailedCreation:
    """A RemoteModule without an interface: the value of its ``rpc.remote`` (``owner.create``,
    which a message names). ``module_cls`` and its arguments arrive pickled inside the message
    (``recipe`` and its ``tensors``, as torch's RPC pickler splits them) and are unpickled
    here: an import that fails on this owner (``module_cls``'s module, say) then fails the
    creation, which the module's RRef holds and the first call reports at once. Unpickled
    with the message, it would fail before torch made the RRef's owner side, and every call
    would wait out its timeout. A failure is the RRef's value (a :class:`FailedCreation`),
    not raised: torch would print it here."""
    try:
        unpickled = _compat.rpc_deserialize(recipe, tensors)
        if isinstance(unpickled, BaseException):  # torch's pickler returns a missing name's error
            raise unpickled
        module_cls, args, kwargs = unpickled
        return create_module(module_cls, args, kwargs, device)
    except Exception as error:  # the RRef's value says why; raised, torch would print it here
        return FailedCreation(creation_failure(error))


def failure_of(module_rref: rpc.RRef[Any]) -> CreationFailure | None:
    """Why the module of ``module_rref`` (a RemoteModule without an interface) could not be
    created, or None once it exists (a first call, and ``owner.check_created``: a RemoteModule
    sent over RPC before its first call asks)."""
    try:
        module = module_rref.local_value()
    except Exception as error:  # an RRef of init_from_module_rref may hold an error
        return creation_failure(error)
    return module.failure if type(module) is FailedCreation else None
