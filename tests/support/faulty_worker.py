"""A worker of a test RPC group on torch's fault-injecting agent (``FAULTY_TENSORPIPE``): it
fails chosen outgoing messages a few times and delays others, then serves calls and leaves
when the group shuts down.

Run as ``python -m tests.support.faulty_worker RANK WORLD_SIZE PORT FAULTS_JSON``, where FAULTS_JSON
holds the keyword arguments of :func:`faulty_options` other than ``port``.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch.distributed.rpc as rpc

from remote_module._process import exit_when_orphaned
from tests.support import reliability_helpers
from tests.support.rpc_group import RPC_TIMEOUT_S

# Retried by the RRef protocol, so failing them must not change any result.
RREF_MESSAGES = ("RREF_FORK_REQUEST", "RREF_CHILD_ACCEPT", "RREF_USER_DELETE")


def backend() -> Any:
    import torch.distributed.rpc._testing  # noqa: F401  (registers FAULTY_TENSORPIPE)

    return rpc.backend_registry.BackendType.FAULTY_TENSORPIPE


def faulty_options(
    port: int,
    messages_to_fail: Sequence[str] = (),
    messages_to_delay: Mapping[str, float] | None = None,
    num_fail_sends: int = 0,
    timeout: float = RPC_TIMEOUT_S,
) -> Any:
    """Options for the faulty agent: each message of a type in ``messages_to_fail`` fails
    its first ``num_fail_sends`` sends; each of a type in ``messages_to_delay`` is held that
    many seconds before it is sent (by the sending thread)."""
    from torch.distributed.rpc._testing import FaultyTensorPipeRpcBackendOptions

    return FaultyTensorPipeRpcBackendOptions(
        num_worker_threads=8,
        rpc_timeout=timeout,
        init_method=f"tcp://127.0.0.1:{port}",
        messages_to_fail=list(messages_to_fail),
        messages_to_delay=dict(messages_to_delay or {}),
        num_fail_sends=num_fail_sends,
    )


if __name__ == "__main__":
    exit_when_orphaned()
    warnings.filterwarnings("ignore", message="`torch.jit.", category=DeprecationWarning)
    rank, world_size, port = (int(value) for value in sys.argv[1:4])
    faults = json.loads(sys.argv[4])
    reliability_helpers.FAULTS.update(faults)
    rpc.init_rpc(
        f"worker{rank}",
        rank=rank,
        world_size=world_size,
        backend=backend(),
        rpc_backend_options=faulty_options(port, **faults),
    )
    rpc.shutdown(graceful=True)
