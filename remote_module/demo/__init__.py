"""``remote-module demo``: the DDP + RPC hybrid pattern, trained for real on local workers.

Roles (ranks): 0 ``master`` drives training and checkpoints, 1 ``ps`` owns a large
``nn.EmbeddingBag`` as a scriptable ``RemoteModule`` (its stubs generated at build time into
``remote_module/examples/generated``), 2.. ``trainer<i>`` each hold a local ``nn.Linear``
head under ``DistributedDataParallel`` (gloo). Trainers run a ``torch.jit.script``-compiled
feature extractor that calls the remote embedding, then train with distributed autograd and
``DistributedOptimizer`` over ``remote_parameters()`` plus the local head, and score a
held-out split through the same remote embedding.

By default every worker is spawned here on 127.0.0.1. With ``RANK``/``WORLD_SIZE``/
``MASTER_ADDR``/``MASTER_PORT`` set (``torchrun`` sets them) this process joins as that rank.

Modules: :mod:`.cli` (flags), :mod:`.launch` (spawning, joining, supervision, shutdown),
:mod:`.roles` (master, parameter server, trainers), :mod:`.data` (the synthetic task and its
held-out split), :mod:`.report` (progress bar, table, JSON, plot), :mod:`.config` (settings
and the ranks' names), :mod:`.quiet` (what torch prints for the demo's own calls, kept off its
output).
"""

from remote_module.demo.cli import main
from remote_module.demo.config import DemoConfig

__all__ = ["DemoConfig", "main"]
