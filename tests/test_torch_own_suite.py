"""torch's own RemoteModule tests, run against ours the way a user porting theirs would.

torch ships them in ``torch/testing/_internal/distributed/nn/api/remote_module_test.py``
(``RemoteModuleTest``, ``ThreeWorkersRemoteModuleTest``, ``CudaRemoteModuleTest``) and runs them
from ``test/distributed/rpc/test_tensorpipe_agent.py`` (the CUDA class from
``rpc/cuda/test_tensorpipe_agent.py``) through ``rpc_utils.generate_tests`` with the TensorPipe
fixture. This module does the same, with torch's classes, fixture and ``generate_tests``
unchanged; the one change is the import: the names torch's test module took from
``torch.distributed.nn`` are rebound to ours when this module is imported, before any test runs.

Each test spawns ``world_size`` fresh worker processes (``MultiProcessTestCase`` with the
``spawn`` start method); a worker unpickles its test class by this module's name, so it imports
this module, and makes the same swap, before it runs the test. ``SwapInWorkersTest`` checks
that in the workers. CUDA tests are skipped by torch's own ``skip_if_lt_x_gpu`` where there is
no GPU. No RPC runs in the pytest process, and none of ``tests/conftest.py``'s group fixtures.

torch's test harness imports ``expecttest`` (one of torch's own test requirements).
"""

from __future__ import annotations

import importlib.util
import types
from typing import Any

if importlib.util.find_spec("expecttest") is None:
    raise ImportError(
        "torch's test harness (torch.testing._internal.common_utils) imports expecttest: "
        "pip install expecttest"
    )

import torch.distributed.nn.api.remote_module as upstream
import torch.testing._internal.distributed.nn.api.remote_module_test as torch_suite
from torch.testing._internal.distributed import rpc_utils
from torch.testing._internal.distributed.rpc.tensorpipe_rpc_agent_test_fixture import (
    TensorPipeRpcAgentTestFixture,
)

from remote_module import RemoteModule
from remote_module.runtime.caller.construction import PICKLED_ATTRIBUTES

# torch's test module imports these from torch.distributed.nn; ours stand in for each.
# ``_RemoteModule`` is upstream's base class, which takes ``_module_interface_cls``: ours is
# one class that takes it too.
SWAP: dict[str, Any] = {
    "RemoteModule": RemoteModule,
    "_RemoteModule": RemoteModule,
    "_REMOTE_MODULE_PICKLED_ATTRIBUTES": PICKLED_ATTRIBUTES,
}
_UPSTREAM = "torch.distributed.nn"


def _swap() -> None:
    for name, ours in SWAP.items():
        if not hasattr(torch_suite, name):
            raise AssertionError(f"torch's {torch_suite.__name__} no longer has {name!r}")
        setattr(torch_suite, name, ours)
    # A name torch's tests take from upstream and we did not swap would test upstream quietly.
    left = _upstream_names(torch_suite)
    if left:
        raise AssertionError(f"torch's {torch_suite.__name__} still uses upstream's {left}")


def _upstream_names(module: types.ModuleType) -> list[str]:
    """The names in ``module`` bound to upstream RemoteModule's own objects: its classes and
    functions, and its constants (``_REMOTE_MODULE_PICKLED_ATTRIBUTES``), not what it imports."""

    def upstream_own(value: Any) -> bool:
        if isinstance(value, (types.ModuleType, bool, int, float, str, type(None))):
            return False
        return str(getattr(value, "__module__", upstream.__name__)).startswith(_UPSTREAM)

    own = {id(value) for value in vars(upstream).values() if upstream_own(value)}
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("__")
        and (id(value) in own or str(getattr(value, "__module__", "")).startswith(_UPSTREAM))
    ]


_swap()

# Exactly what torch's test_tensorpipe_agent.py files do: TensorPipe<Suite> classes, each
# (Suite, TensorPipeRpcAgentTestFixture, rpc_utils.SpawnHelper), whose setUp spawns the workers.
SUITES: list[Any] = [  # Any: mypy rejects abstract classes as type[RpcAgentTestFixture]
    torch_suite.RemoteModuleTest,
    torch_suite.ThreeWorkersRemoteModuleTest,
    torch_suite.CudaRemoteModuleTest,
]
globals().update(
    rpc_utils.generate_tests("TensorPipe", TensorPipeRpcAgentTestFixture, SUITES, __name__)
)


class SwapInWorkersTest(rpc_utils.SpawnHelper):
    """The spawned workers run torch's tests against ours, not upstream's: without this, a swap
    that did not reach them would pass every test against upstream."""

    @property
    def world_size(self) -> int:
        return 2

    def test_workers_see_ours(self) -> None:
        # Runs in each worker (the pytest process only joins them).
        if self.rank < 0:
            raise AssertionError("the body ran in the pytest process, not in a worker")
        for name, ours in SWAP.items():
            self.assertIs(getattr(torch_suite, name), ours, name)
