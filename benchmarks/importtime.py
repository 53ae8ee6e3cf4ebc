"""``python -m benchmarks.importtime IMPL``: in a new interpreter, import torch, then time
``from <module> import RemoteModule`` for one implementation (``ours``: ``remote_module``;
``upstream``: ``torch.distributed.nn.api.remote_module``) and print the milliseconds: the class
itself, as a user's program imports it (``import remote_module`` alone loads less). Nothing of
ours is imported before the measurement."""

import importlib
import sys
import time

import torch  # noqa: F401  (a user's program has torch imported already)

MODULES = {"ours": "remote_module", "upstream": "torch.distributed.nn.api.remote_module"}

if __name__ == "__main__":
    start = time.perf_counter()
    getattr(importlib.import_module(MODULES[sys.argv[1]]), "RemoteModule")  # noqa: B009
    print(f"{(time.perf_counter() - start) * 1e3:.4f}")
