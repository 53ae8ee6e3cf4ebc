"""What generated code, the generator and the runtime share: the terms they agree on.

A leaf: it imports torch and nothing of ours, so the generator (``remote_module.codegen``)
and the runtime (``remote_module.runtime``) both import it. It holds

- the version: the package's, which a generated module records and the runtime checks;
- the call prefix: the RemoteModule attributes every remote function receives before the
  interface's own arguments, and their TorchScript types;
- the names of a generated module's globals that the runtime reads, and of its functions;
- the names a generated method may not take (:data:`RESERVED_NAMES`);
- the tensor leaf helpers generated walkers call (one tensor moved, cast to the wire dtype,
  cast back), compiled by TorchScript where the generated code is.

Generated code reaches all of it through ``remote_module.runtime.contract``, the one module it
imports.
"""

from typing import Any

import torch
import torch.distributed.autograd
from torch import Tensor

from remote_module import _compat

__all__ = [
    "CALL_PREFIX",
    "COUNTING",
    "FINGERPRINT",
    "GENERATED_METHODS",
    "GENERATOR_VERSION",
    "INT8_BLOCK",
    "INT8_MIN_VALUES",
    "INT8_PIECE",
    "INTERFACE",
    "INTERFACE_CLASS",
    "INTERNAL_PREFIX",
    "KEYED_FUNCTIONS",
    "KEYED_SUFFIX",
    "MODULE_GLOBALS",
    "MOVES_TENSORS",
    "NON_SCRIPTABLE_MODULE",
    "PREFIX_SCRIPT_TYPES",
    "REMOTE_FUNCTIONS",
    "REMOTE_PREFIX",
    "RESERVED_NAMES",
    "WIRE_DTYPES",
    "WIRE_FUNCTIONS",
    "WIRE_SUFFIX",
    "StaleGeneratedModuleWarning",
    "__version__",
    "cast_tensor",
    "is_script_interface",
    "move_tensor",
    "restore_tensor",
]

# The package's version (``remote_module.__version__``): a generated module records the version
# that rendered it, and the runtime uses the module only while the two match. Here, not in a
# file of its own: each module loaded with ``import remote_module`` costs ~57 us.
__version__ = "0.3.0"
# remote_module's own generated module for RemoteModules without an interface (build time).
NON_SCRIPTABLE_MODULE = "remote_module._non_scriptable"

# --- The call prefix -------------------------------------------------------------------------

# The RemoteModule attributes every remote function receives first, in this order. An eager
# call sends the module's key in the owner's table in place of its RRef (see runtime.keys).
CALL_PREFIX = ("module_rref", "device", "is_device_map_set")
# Their TorchScript types in the scriptable family's remote functions ("{interface}": the
# interface class); the eager family takes them untyped.
PREFIX_SCRIPT_TYPES = {
    "module_rref": "RRef[{interface}]",
    "device": "str",
    "is_device_map_set": "bool",
}

# --- Names in a generated module --------------------------------------------------------------

# The prefix of every name generated code uses for its own parameters, locals and helpers.
INTERNAL_PREFIX = "_rm_"
# The remote function of a method ``m`` is ``_remote_m``; its twins add a suffix: the one for
# RemoteModules with a wire dtype, and the scriptable family's twin that finds the module by
# its key in the owner's table.
REMOTE_PREFIX = "_remote_"
WIRE_SUFFIX = "_wire"
KEYED_SUFFIX = "_keyed"
# The attribute a scripted RemoteModule reads to count its calls for ``checkpoint_every`` (its
# identity, or None: set when it is scripted).
COUNTING = "_rm_counting"

# Globals every interface module defines, which the runtime reads.
GENERATOR_VERSION = "GENERATOR_VERSION"
INTERFACE = "INTERFACE"  # the interface's qualified name
FINGERPRINT = "INTERFACE_FINGERPRINT"
MOVES_TENSORS = "MOVES_CPU_TENSORS_TO_DEVICE"
INTERFACE_CLASS = "_rm_module_interface_cls"
GENERATED_METHODS = "_generated_methods"  # the caller-side methods a RemoteModule installs
# The scriptable family's TorchScript remote functions, in method order; the wire and keyed
# twins at the same index as the function they serve.
REMOTE_FUNCTIONS = "_remote_functions"
WIRE_FUNCTIONS = "_wire_functions"
KEYED_FUNCTIONS = "_keyed_functions"
MODULE_GLOBALS = frozenset(
    {
        GENERATOR_VERSION,
        INTERFACE,
        FINGERPRINT,
        MOVES_TENSORS,
        INTERFACE_CLASS,
        GENERATED_METHODS,
        REMOTE_FUNCTIONS,
        WIRE_FUNCTIONS,
        KEYED_FUNCTIONS,
    }
)

# Names a generated method (``m`` or ``m_async``) may not take, because a RemoteModule already
# has them: every public attribute of its class (nn.Module's included) and of its instances,
# but ``forward``. tests/test_layers.py holds this against the class on every torch we test.
RESERVED_NAMES = frozenset(
    {
        "T_destination",
        "add_module",
        "apply",
        "batching",
        "bfloat16",
        "buffers",
        "call_super_init",
        "checkpoint",
        "children",
        "compile",
        "cpu",
        "cuda",
        "device",
        "double",
        "dump_patches",
        "eval",
        "extra_repr",
        "fail_over",
        "float",
        "generated_methods",
        "get_buffer",
        "get_extra_state",
        "get_module_rref",
        "get_parameter",
        "get_submodule",
        "half",
        "init_from_module_rref",
        "ipu",
        "is_device_map_set",
        "is_scriptable",
        "load_remote_state_dict",
        "load_state_dict",
        "module_rref",
        "modules",
        "mtia",
        "named_buffers",
        "named_children",
        "named_modules",
        "named_parameters",
        "on",
        "parameters",
        "register_backward_hook",
        "register_buffer",
        "register_forward_hook",
        "register_forward_pre_hook",
        "register_full_backward_hook",
        "register_full_backward_pre_hook",
        "register_load_state_dict_post_hook",
        "register_load_state_dict_pre_hook",
        "register_module",
        "register_parameter",
        "register_state_dict_post_hook",
        "register_state_dict_pre_hook",
        "remote_parameters",
        "remote_state_dict",
        "requires_grad_",
        "set_extra_state",
        "set_submodule",
        "share_memory",
        "standby",
        "state_dict",
        "timeout",
        "to",
        "to_empty",
        "train",
        "training",
        "type",
        "wire_dtype",
        "xpu",
        "zero_grad",
    }
)


class StaleGeneratedModuleWarning(UserWarning):
    """A pre-generated module does not match this generator or its interface any more: the
    runtime does not use it and renders the templates in memory instead."""


def is_script_interface(interface_cls: type) -> bool:
    """Whether ``interface_cls`` is a ``@torch.jit.interface`` (else a ``typing.Protocol``)."""
    return bool(getattr(interface_cls, "__torch_script_interface__", False))


# --- Tensor leaf helpers (TorchScript and Python alike) ---------------------------------------


def move_tensor(value: Tensor, device: torch.device) -> Tensor:
    """``value`` on ``device``."""
    return value.to(device)


# --- The 8-bit wire (``wire_dtype=torch.int8``) ------------------------------------------------

# The wire dtypes a RemoteModule accepts, in the order its error names them.
WIRE_DTYPES = (torch.bfloat16, torch.float16, torch.int8)
# Values per block of one float32 scale: codes cost 1 byte a value, scales 4 bytes a block.
INT8_BLOCK = 1024
# A floating tensor of fewer values crosses as bf16: its scale and the codes' own framing
# (another tensor in the message) would outweigh the byte a value saved.
INT8_MIN_VALUES = 512
# Values coded or decoded at a time (2 MiB of float32): a piece's work stays in the caches,
# through one work buffer per thread (``remote_module._int8``). Timed on 16 MiB, one thread:
# pieces of 128 Ki-2 Mi values cost 4.8, 3.8, 3.1, 3.3 and 4.0 ms of CPU an encode (medians).
INT8_PIECE = 512 * INT8_BLOCK


class _StraightThrough(torch.autograd.Function):
    """The gradient path of an 8-bit tensor: a bf16 zero of the tensor's shape, one value
    broadcast (2 bytes on the wire), whose gradient the tensor takes as its own (the derivative
    of the rounding taken as 1). The receiver adds it to the decoded values, so the gradient
    crosses back in bf16."""

    @staticmethod
    def forward(ctx: Any, value: Tensor) -> Tensor:
        ctx.dtype = value.dtype
        return value.new_zeros((), dtype=torch.bfloat16).expand(value.shape)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        return grad.to(ctx.dtype)


@torch.jit.ignore
def _gradient_path(value: Tensor) -> Tensor | None:
    """The straight-through carrier of ``value`` under distributed autograd, else None (the
    gradient could not cross anyway). TorchScript calls it back into Python."""
    if _compat.current_context_id() is None:
        return None
    return _StraightThrough.apply(value)


@torch.jit.ignore
def _quantize(value: Tensor) -> tuple[Tensor, Tensor]:
    """Int8 codes of ``value`` (its shape) and one float32 scale per block of ``INT8_BLOCK``
    values in contiguous order (the block's largest magnitude / 127; the last block may be
    short): each code is its value / scale rounded, so it is off by at most half a step; a
    block with a NaN or an infinity decodes to NaNs. Coded on one thread, ``INT8_PIECE``
    values at a time (``remote_module._int8``, loaded here on first use); TorchScript calls it
    back into Python (which takes no defaults)."""
    from remote_module import _int8

    return _int8.quantize(value, INT8_BLOCK, INT8_PIECE)


@torch.jit.ignore
def _dequantize(codes: Tensor, scales: Tensor, like: Tensor) -> Tensor:
    """The values of ``codes`` in ``like``'s dtype (the inverse of :func:`_quantize`)."""
    from remote_module import _int8

    return _int8.dequantize(codes, scales, like, INT8_BLOCK, INT8_PIECE)


def cast_tensor(
    value: Tensor, dtype: torch.dtype, sent: list[Tensor], smallest: int = INT8_MIN_VALUES
) -> Tensor:
    """``value`` as it crosses the wire with ``dtype``; what the receiver needs to restore it
    is appended to ``sent`` (tensors: TorchScript and Python both carry a list of them):

    - a floating tensor: an empty tensor of its own dtype, then the tensor cast to ``dtype``;
      with ``torch.int8`` and at least ``INT8_MIN_VALUES`` values, its codes instead, their
      scales appended after the empty tensor, and under distributed autograd its gradient
      path after them (fewer values than ``smallest``: cast to bf16);
    - an int8 tensor (ambiguous with codes): an empty int8 tensor, the tensor as it is;
    - any other tensor: nothing, as it is."""
    if value.is_floating_point():
        sent.append(torch.empty(0, dtype=value.dtype))
        if dtype != torch.int8:
            return value.to(dtype)
        if value.numel() < smallest:
            return value.to(torch.bfloat16)
        codes, scales = _quantize(value)
        sent.append(scales)
        if value.requires_grad:
            path = _gradient_path(value)
            if path is not None:
                sent.append(path)
        return codes
    if value.dtype == torch.int8:
        sent.append(torch.empty(0, dtype=torch.int8))
    return value


def restore_tensor(value: Tensor, sent: list[Tensor]) -> Tensor:
    """The inverse of :func:`cast_tensor`, taking what it appended from the front of
    ``sent``: a floating tensor or codes back in their own dtype (codes also with their
    gradient path, when it came), any other tensor as it is."""
    if value.is_floating_point():
        return value.to(sent.pop(0).dtype)
    if value.dtype != torch.int8:
        return value
    own = sent.pop(0)
    if own.dtype == torch.int8:
        return value
    restored = _dequantize(value, sent.pop(0), own)  # a new tensor: added to in place
    if len(sent) > 0 and sent[0].shape == value.shape:  # a token or scales are never its shape
        restored.add_(sent.pop(0))
    return restored
