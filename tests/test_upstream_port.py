"""Upstream ``torch.distributed.nn.RemoteModule`` tests, ported to ``remote_module``.

Source: ``torch/testing/_internal/distributed/nn/api/remote_module_test.py``. Upstream runs
every test on every rank and returns early on rank != 0; here this process is ``worker0`` of
one 3-worker group for the whole file and drives every test, sending work to ``worker1`` and
``worker2`` through the module-level RPC handlers below (workers import this module by name).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.distributed.rpc as rpc
from torch import Tensor, nn
from torch._jit_internal import Future

from remote_module import RemoteModule
from tests.support.expected import PICKLED_ATTRIBUTES

pytestmark = [pytest.mark.timeout(90), pytest.mark.rpc_group(3)]  # see tests/conftest.py

# Bounds every RPC the tests send themselves; RemoteModule calls use the group's default.
TIMEOUT_S = 30.0
WORKER1 = "worker1"
WORKER2 = "worker2"

_PARAM_VAL = torch.nn.Parameter(torch.ones(1))


# --- RPC handlers, run on the destination worker --------------------------------------------


def remote_device(module_rref: rpc.RRef) -> torch.device | None:
    """The device of the remote module's parameters."""
    for param in module_rref.local_value().parameters():
        return param.device
    return None


def remote_module_attributes(remote_module: RemoteModule) -> dict[str, Any]:
    """``__dict__`` of a RemoteModule as the receiving worker sees it."""
    return remote_module.__dict__


def remote_forward(remote_module: RemoteModule, args: tuple[Any, ...]) -> Any:
    return remote_module.forward(*args)


def remote_forward_async(remote_module: RemoteModule, args: tuple[Any, ...]) -> Any:
    # A future cannot be pickled and sent over RPC: wait here, like ``forward``.
    return remote_module.forward_async(*args).wait()


def get_remote_training_arg(module_rref: rpc.RRef) -> bool:
    return module_rref.local_value().training


# --- Modules and interfaces -----------------------------------------------------------------


class ModuleCreationMode(enum.Enum):
    MODULE_CTOR_WITH_INTERFACE = "module_ctor_with_interface"
    MODULE_CTOR = "module_ctor"


@torch.jit.interface
class MyModuleInterface:
    def forward(
        self, tensor: Tensor, number: int, word: str = "default"
    ) -> tuple[str, int, Tensor]:
        pass


@torch.jit.interface
class RemoteMyModuleInterface:
    def forward(
        self, tensor: Tensor, number: int, word: str = "default"
    ) -> tuple[str, int, Tensor]:
        pass

    def forward_async(
        self, tensor: Tensor, number: int, word: str = "default"
    ) -> Future[tuple[str, int, Tensor]]:
        pass


class MyModule(nn.Module):
    def __init__(self, first_arg: Any, first_kwarg: Any = -1) -> None:
        super().__init__()
        self.param1 = _PARAM_VAL

    def forward(
        self, tensor: Tensor, number: int, word: str = "default"
    ) -> tuple[str, int, Tensor]:
        return word, number, tensor


class BadModule:
    def __init__(self, first_arg: Any, first_kwarg: Any = -1) -> None:
        pass


def create_scripted_module(first_arg: Any, first_kwarg: Any = -1) -> torch.jit.ScriptModule:
    module = MyModule(first_arg, first_kwarg=first_kwarg)
    return torch.jit.script(module)


def create_remote_module_iter(
    remote_device: str, modes: list[ModuleCreationMode] | None = None
) -> Iterator[Any]:
    if modes is None:
        modes = list(ModuleCreationMode.__members__.values())

    args = (1,)
    kwargs = dict(first_kwarg=2)

    if ModuleCreationMode.MODULE_CTOR in modes:
        yield RemoteModule(remote_device, MyModule, args, kwargs)

    if ModuleCreationMode.MODULE_CTOR_WITH_INTERFACE in modes:
        remote_module = RemoteModule(
            remote_device,
            create_scripted_module,
            args,
            kwargs,
            _module_interface_cls=MyModuleInterface,
        )
        yield torch.jit.script(remote_module)


def assert_equal(actual: Any, expected: Any) -> None:
    """``TestCase.assertEqual`` for the values these tests compare: tensors by value (any
    device), sequences element by element, everything else with ``==``."""
    if isinstance(expected, Tensor):
        assert isinstance(actual, Tensor), f"{actual!r} is not a tensor"
        assert actual.dtype == expected.dtype
        assert torch.equal(actual.cpu(), expected.cpu()), f"{actual} != {expected}"
    elif isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), f"{actual!r} is not a sequence"
        assert len(actual) == len(expected), f"{actual!r} != {expected!r}"
        for actual_item, expected_item in zip(actual, expected, strict=True):
            assert_equal(actual_item, expected_item)
    else:
        assert actual == expected


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


# --- RemoteModuleTest -----------------------------------------------------------------------


def test_bad_module() -> None:
    remote_device = f"{WORKER1}/cpu"
    args = (1,)
    kwargs = dict(first_kwarg=2)

    with pytest.raises(
        ValueError,
        match=r"Expect `module_cls\(\*args, \*\*kwargs\)` returns an instance of "
        r"<class nn.Module>,",
    ):
        RemoteModule(remote_device, BadModule, args, kwargs).forward()

    with pytest.raises(
        ValueError,
        match=r"Expect `module_cls\(\*args, \*\*kwargs\)` returns an instance of "
        r"<class nn.Module>,",
    ):
        RemoteModule(remote_device, BadModule, args, kwargs).forward()


def test_forward_async() -> None:
    args = (torch.ones(1), 2, "3")
    for remote_module in create_remote_module_iter(WORKER1):
        ret_fut = remote_module.forward_async(*args)
        ret = ret_fut.wait()
        assert_equal(ret, tuple(reversed(args)))


def test_forward_async_script() -> None:
    scripted_remote_module = next(
        create_remote_module_iter(WORKER1, modes=[ModuleCreationMode.MODULE_CTOR_WITH_INTERFACE])
    )

    @torch.jit.script
    def run_forward_async(scripted_remote_module: RemoteMyModuleInterface):
        ret_fut = scripted_remote_module.forward_async(torch.ones(1), 2, "3")
        ret = ret_fut.wait()
        return ret

    ret = run_forward_async(scripted_remote_module)

    assert_equal(ret, ("3", 2, torch.ones(1)))


def test_forward_sync() -> None:
    args = (torch.ones(1), 2, "3")
    for remote_module in create_remote_module_iter(WORKER1):
        ret = remote_module.forward(*args)
        assert_equal(ret, tuple(reversed(args)))


def test_forward_sync_script() -> None:
    scripted_remote_module = next(
        create_remote_module_iter(WORKER1, modes=[ModuleCreationMode.MODULE_CTOR_WITH_INTERFACE])
    )

    @torch.jit.script
    def run_forward(scripted_remote_module: MyModuleInterface):
        ret = scripted_remote_module.forward(torch.ones(1), 2, "3")
        return ret

    ret = run_forward(scripted_remote_module)

    assert_equal(ret, ("3", 2, torch.ones(1)))


def test_forward_with_kwargs() -> None:
    args = (torch.ones(1), 2)
    kwargs = dict(word="3")
    # Only test Python nn.Module, because script module methods don't support taking kwargs.
    for remote_module in create_remote_module_iter(WORKER1, modes=[ModuleCreationMode.MODULE_CTOR]):
        ret_fut = remote_module.forward_async(*args, **kwargs)
        ret = ret_fut.wait()
        assert_equal(ret, tuple(reversed((*args, "3"))))

        ret = remote_module.forward(*args, **kwargs)
        assert_equal(ret, tuple(reversed((*args, "3"))))


def test_remote_parameters() -> None:
    # Only test Python nn.Module, because script module methods don't support
    # ``remote_parameters``.
    for remote_module in create_remote_module_iter(WORKER1, modes=[ModuleCreationMode.MODULE_CTOR]):
        param_rrefs = remote_module.remote_parameters()
        assert len(param_rrefs) == 1
        assert torch.equal(param_rrefs[0].to_here(timeout=TIMEOUT_S), _PARAM_VAL)


def test_get_module_rref() -> None:
    # Only test Python nn.Module, because script module methods don't support
    # ``get_module_rref``.
    for remote_module in create_remote_module_iter(WORKER1, modes=[ModuleCreationMode.MODULE_CTOR]):
        rref = remote_module.get_module_rref()
        assert rref == remote_module.module_rref
        for param in rref.to_here(timeout=TIMEOUT_S).parameters():
            assert torch.equal(param, _PARAM_VAL)


def test_train_eval() -> None:
    for remote_module in create_remote_module_iter(WORKER1, modes=[ModuleCreationMode.MODULE_CTOR]):
        # Ours (README, "How it differs from upstream"): train() and eval() return self, not a
        # copy of the remote module.
        assert remote_module.train() is remote_module
        ret1 = rpc.rpc_sync(
            WORKER1,
            get_remote_training_arg,
            args=(remote_module.get_module_rref(),),
            timeout=TIMEOUT_S,
        )
        assert ret1 is True

        assert remote_module.eval() is remote_module
        ret2 = rpc.rpc_sync(
            WORKER1,
            get_remote_training_arg,
            args=(remote_module.get_module_rref(),),
            timeout=TIMEOUT_S,
        )
        assert ret2 is False


def test_unsupported_methods() -> None:
    for remote_module in create_remote_module_iter(WORKER1, modes=[ModuleCreationMode.MODULE_CTOR]):
        with pytest.raises(
            ValueError, match=r"Method ``register_buffer`` not supported for RemoteModule"
        ):
            remote_module.register_buffer("buffer", torch.ones(5))
        with pytest.raises(
            ValueError, match=r"Method ``register_parameter`` not supported for RemoteModule"
        ):
            remote_module.register_parameter("param", torch.nn.Parameter(torch.ones(1)))
        with pytest.raises(
            ValueError, match=r"Method ``add_module`` not supported for RemoteModule"
        ):
            remote_module.add_module("empty", None)

        with pytest.raises(ValueError, match=r"Method ``apply`` not supported for RemoteModule"):
            fn = torch.rand((3, 3), requires_grad=False)
            remote_module.apply(fn)

        with pytest.raises(ValueError, match=r"Method ``cuda`` not supported for RemoteModule"):
            remote_module.cuda()
        with pytest.raises(ValueError, match=r"Method ``cpu`` not supported for RemoteModule"):
            remote_module.cpu()
        with pytest.raises(ValueError, match=r"Method ``type`` not supported for RemoteModule"):
            remote_module.type(torch.FloatTensor)
        with pytest.raises(ValueError, match=r"Method ``float`` not supported for RemoteModule"):
            remote_module.float()
        with pytest.raises(ValueError, match=r"Method ``double`` not supported for RemoteModule"):
            remote_module.double()
        with pytest.raises(ValueError, match=r"Method ``bfloat16`` not supported for RemoteModule"):
            remote_module.bfloat16()
        with pytest.raises(ValueError, match=r"Method ``to`` not supported for RemoteModule"):
            remote_module.to("cpu", dtype=torch.int32)

        def hook(module: Any, grad_input: Any, grad_output: Any) -> None:
            pass

        with pytest.raises(
            ValueError, match=r"Method ``register_backward_hook`` not supported for RemoteModule"
        ):
            remote_module.register_backward_hook(hook)
        with pytest.raises(
            ValueError, match=r"Method ``register_forward_pre_hook`` not supported for RemoteModule"
        ):
            remote_module.register_forward_pre_hook(hook)
        with pytest.raises(
            ValueError, match=r"Method ``register_forward_hook`` not supported for RemoteModule"
        ):
            remote_module.register_forward_hook(hook)

        with pytest.raises(
            ValueError, match=r"Method ``state_dict`` not supported for RemoteModule"
        ):
            remote_module.state_dict()
        with pytest.raises(
            ValueError, match=r"Method ``load_state_dict`` not supported for RemoteModule"
        ):
            remote_module.load_state_dict({})

        with pytest.raises(
            ValueError,
            match=r"Method ``parameters`` not supported for RemoteModule. "
            r"Please use ``remote_parameters`` instead.",
        ):
            remote_module.parameters()
        with pytest.raises(
            ValueError, match=r"Method ``named_parameters`` not supported for RemoteModule"
        ):
            remote_module.named_parameters()
        with pytest.raises(ValueError, match=r"Method ``buffers`` not supported for RemoteModule"):
            remote_module.buffers()
        with pytest.raises(
            ValueError, match=r"Method ``named_buffers`` not supported for RemoteModule"
        ):
            remote_module.named_buffers()
        with pytest.raises(ValueError, match=r"Method ``children`` not supported for RemoteModule"):
            remote_module.children()
        with pytest.raises(
            ValueError, match=r"Method ``named_children`` not supported for RemoteModule"
        ):
            remote_module.named_children()
        with pytest.raises(ValueError, match=r"Method ``modules`` not supported for RemoteModule"):
            remote_module.modules()
        with pytest.raises(
            ValueError, match=r"Method ``named_modules`` not supported for RemoteModule"
        ):
            remote_module.named_modules()

        with pytest.raises(
            ValueError, match=r"Method ``requires_grad_`` not supported for RemoteModule"
        ):
            remote_module.requires_grad_()
        with pytest.raises(
            ValueError, match=r"Method ``zero_grad`` not supported for RemoteModule"
        ):
            remote_module.zero_grad()
        with pytest.raises(
            ValueError, match=r"Method ``share_memory`` not supported for RemoteModule"
        ):
            remote_module.share_memory()
        with pytest.raises(
            ValueError, match=r"Method ``extra_repr`` not supported for RemoteModule"
        ):
            remote_module.extra_repr()


def test_send_remote_module_with_a_new_attribute_not_pickled_over_the_wire() -> None:
    # A new attribute added to a RemoteModule after its initialization is not pickled when it
    # is sent over RPC: only the attributes in PICKLED_ATTRIBUTES cross the wire.
    for remote_module in create_remote_module_iter(WORKER1, modes=[ModuleCreationMode.MODULE_CTOR]):
        new_attr_name = "new_attr"
        setattr(remote_module, new_attr_name, 1)

        attrs = rpc.rpc_sync(WORKER1, remote_module_attributes, (remote_module,), timeout=TIMEOUT_S)
        assert new_attr_name not in attrs


def test_remote_module_py_pickle_not_supported(tmp_path: Any) -> None:
    for remote_module in create_remote_module_iter(WORKER1, modes=[ModuleCreationMode.MODULE_CTOR]):
        with pytest.raises(
            RuntimeError,
            match=r"Cannot pickle RemoteModule in python pickler. RemoteModule can only be pickled "
            r"when using RPC",
        ):
            torch.save(remote_module, tmp_path / "remote_module.pt")


def test_remote_module_py_pickle_not_supported_script(tmp_path: Any) -> None:
    for remote_module in create_remote_module_iter(
        WORKER1, modes=[ModuleCreationMode.MODULE_CTOR_WITH_INTERFACE]
    ):
        with pytest.raises(torch.jit.Error, match="can only be pickled when using RPC"):
            torch.save(remote_module, tmp_path / "remote_module.pt")


# --- ThreeWorkersRemoteModuleTest -----------------------------------------------------------


def test_send_remote_module_over_the_wire() -> None:
    # Unpickled attributes include both the inherent attributes of RemoteModule (not
    # inherited from the superclass) and two installed methods.
    expected_unpickled_attrs = [*PICKLED_ATTRIBUTES, "forward_async", "forward"]
    # Ours: a received RemoteModule is callable as rm(x) (README, "How it differs from
    # upstream"), so it also holds nn.Module's own bookkeeping and its local settings (call
    # timeout, wire dtype); none of them crosses the wire.
    local_attrs = {*nn.Module().__dict__, "timeout", "wire_dtype"}

    # Create a remote module on worker1 and then pass it to worker2 over the RPC layer.
    for remote_module in create_remote_module_iter(WORKER1, modes=[ModuleCreationMode.MODULE_CTOR]):
        # Test querying some simple attributes from worker2.
        attrs = rpc.rpc_sync(WORKER2, remote_module_attributes, (remote_module,), timeout=TIMEOUT_S)
        assert [name for name in attrs if name not in local_attrs] == expected_unpickled_attrs
        # Ours: the six come first, in their order, as upstream's own dict has them.
        assert list(attrs)[: len(PICKLED_ATTRIBUTES)] == list(PICKLED_ATTRIBUTES)
        assert attrs["on"] == "worker1"
        assert attrs["device"] == "cpu"
        assert not attrs["is_device_map_set"]
        assert not attrs["is_scriptable"]

        # Test the installed methods on worker1's can be initiated by worker2 over RPC layer.
        # NOTE: In practice a remote module should be directly stored on the worker that runs
        # ``forward`` or ``forward_async``, not have another worker to initiate forward over
        # the RPC layer.
        args = (torch.ones(1), 2, "3")
        ret1 = rpc.rpc_sync(WORKER2, remote_forward, (remote_module, args), timeout=TIMEOUT_S)
        assert_equal(ret1, tuple(reversed(args)))
        ret2 = rpc.rpc_sync(WORKER2, remote_forward_async, (remote_module, args), timeout=TIMEOUT_S)
        assert_equal(ret2, tuple(reversed(args)))


def test_send_remote_module_over_the_wire_script_not_supported() -> None:
    with pytest.raises(
        RuntimeError, match=r"Passing a script RemoteModule over RPC is not supported."
    ):
        # Create a remote module on worker1 and then pass it to worker2 over the RPC layer.
        for remote_module in create_remote_module_iter(
            WORKER1, modes=[ModuleCreationMode.MODULE_CTOR_WITH_INTERFACE]
        ):
            # Test querying some simple attributes from worker2.
            rpc.rpc_sync(WORKER2, remote_module_attributes, (remote_module,), timeout=TIMEOUT_S)


def test_create_remote_module_from_module_rref() -> None:
    # Create a remote module on worker1 and then pass its `module_rref` to worker2 over the
    # RPC layer.
    for remote_module in create_remote_module_iter(WORKER1, modes=[ModuleCreationMode.MODULE_CTOR]):
        remote_module2 = rpc.rpc_sync(
            WORKER2,
            RemoteModule.init_from_module_rref,
            (WORKER2, remote_module.get_module_rref()),
            timeout=TIMEOUT_S,
        )

        args = (torch.ones(1), 2, "3")
        ret1 = rpc.rpc_sync(WORKER1, remote_forward, (remote_module, args), timeout=TIMEOUT_S)
        ret2 = rpc.rpc_sync(WORKER2, remote_forward, (remote_module2, args), timeout=TIMEOUT_S)
        assert_equal(ret1, ret2)
        # Ours (README, "How it differs from upstream"): a RemoteModule made by
        # init_from_module_rref is callable as rm(x).
        assert_equal(remote_module2(*args), ret1)


# --- CudaRemoteModuleTest -------------------------------------------------------------------


@needs_cuda
def test_valid_device() -> None:
    dst_rank = 1
    dst_worker_name = WORKER1

    for remote_module in create_remote_module_iter(
        f"{dst_worker_name}/cuda:0", modes=[ModuleCreationMode.MODULE_CTOR]
    ):
        device = rpc.rpc_sync(
            dst_worker_name, remote_device, (remote_module.module_rref,), timeout=TIMEOUT_S
        )
        assert device.type == "cuda"
        assert device.index == 0

    # Test rank works as well.
    for remote_module in create_remote_module_iter(
        f"rank:{dst_rank}/cuda:0", modes=[ModuleCreationMode.MODULE_CTOR]
    ):
        device = rpc.rpc_sync(
            dst_worker_name, remote_device, (remote_module.module_rref,), timeout=TIMEOUT_S
        )
        assert device.type == "cuda"
        assert device.index == 0


def _forward_all(remote_device: str) -> list[Any]:
    return [
        m.forward()
        for m in create_remote_module_iter(remote_device, modes=[ModuleCreationMode.MODULE_CTOR])
    ]


def _check_invalid_devices_without_cuda() -> None:
    # Upstream matches torch's wording of these ("Expected one of ... device type at start of
    # device string", "Invalid device string: 'cpu2'"); here: one line that quotes the whole
    # remote_device and ends with torch.device's own error, as this torch words it.
    for device in ("foo", "cpu2"):
        with pytest.raises(RuntimeError) as torchs_own:
            torch.device(device)
        with pytest.raises(RuntimeError) as raised:
            _forward_all(f"{WORKER1}/{device}")
        message = str(raised.value)
        assert message.startswith(f"Invalid device in remote_device '{WORKER1}/{device}': ")
        assert message.endswith(f"({torchs_own.value})") and "\n" not in message

    # Ours: an empty device is a malformed remote_device, refused like every other one (upstream
    # lets torch.device("") raise "Device string must not be empty", naming nothing).
    with pytest.raises(
        ValueError,
        match=r"Could not parse remote_device: worker1/. "
        r"The valid format is '<workername>/<device>'",
    ):
        _forward_all(f"{WORKER1}/")

    with pytest.raises(
        ValueError,
        match=r"Could not parse remote_device: worker1/cuda:0/cuda:1. "
        r"The valid format is '<workername>/<device>'",
    ):
        _forward_all(f"{WORKER1}/cuda:0/cuda:1")

    with pytest.raises(
        ValueError,
        match=r"Could not parse remote_device: /. The valid format is '<workername>/<device>'",
    ):
        _forward_all("/")

    with pytest.raises(
        ValueError,
        match=r"Could not parse remote_device: /cuda:0. "
        r"The valid format is '<workername>/<device>'",
    ):
        _forward_all("/cuda:0")


@needs_cuda
def test_invalid_devices() -> None:
    if torch.version.hip:
        error_string = (
            r"HIP error: invalid device ordinal\n"
            r"HIP kernel errors might be asynchronously reported at some other API call, "
            r"so the stacktrace below might be incorrect.\n"
            r"For debugging consider passing AMD_SERIALIZE_KERNEL=3"
        )
    else:
        error_string = r"CUDA error: invalid device ordinal"
    with pytest.raises(RuntimeError, match=error_string):
        _forward_all(f"{WORKER1}/cuda:100")

    _check_invalid_devices_without_cuda()


def test_invalid_devices_without_cuda() -> None:
    # Not upstream: the CUDA-free assertions of test_invalid_devices, so they also run on CPU.
    _check_invalid_devices_without_cuda()


@needs_cuda
def test_input_moved_to_cuda_device() -> None:
    # These two CPU tensors (in args and kwargs) should be implicitly moved to an appropriate
    # cuda device.
    t1 = torch.ones(1)
    args = (t1, 2)
    t2 = t1 * 2
    kwargs = dict(word=t2)

    # Only test Python nn.Module, because script module methods don't support taking kwargs.
    for remote_module in create_remote_module_iter(
        f"{WORKER1}/cuda:0", modes=[ModuleCreationMode.MODULE_CTOR]
    ):
        ret_fut = remote_module.forward_async(*args, **kwargs)
        ret = ret_fut.wait()
        assert_equal(ret, tuple(reversed((*args, t2))))
        # TODO (upstream): once the RPC backend can send GPU tensors directly, "cuda:0".
        assert ret[0].device.type == "cpu"
        assert ret[2].device.type == "cpu"

        ret = remote_module.forward(*args, **kwargs)
        assert_equal(ret, tuple(reversed((*args, t2))))
        # TODO (upstream): once the RPC backend can send GPU tensors directly, "cuda:0".
        assert ret[0].device.type == "cpu"
        assert ret[2].device.type == "cpu"


@needs_cuda
def test_input_moved_to_cuda_device_script() -> None:
    scripted_remote_module = next(
        create_remote_module_iter(
            f"{WORKER1}/cuda:0", modes=[ModuleCreationMode.MODULE_CTOR_WITH_INTERFACE]
        )
    )

    @torch.jit.script
    def run_forward(scripted_remote_module: MyModuleInterface):
        ret = scripted_remote_module.forward(torch.ones(1), 2, "3")
        return ret

    ret = run_forward(scripted_remote_module)

    assert_equal(ret, ("3", 2, torch.ones(1)))
    # TODO (upstream): once the RPC backend can send GPU tensors directly, "cuda:0".
    assert ret[2].device.type == "cpu"
