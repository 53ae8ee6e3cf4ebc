"""The documentation's example of an exported program run in another process of the RPC group
(``docs/guides/compiling.md``): any worker can run this function by name."""

from typing import Any

import torch


def run_saved(path: str, *args: Any) -> Any:
    """Load the program ``torch.export.save`` wrote to ``path`` and run it here on ``args``."""
    import remote_module  # noqa: F401  (registers torch.ops.remote_module.call, which it names)

    return torch.export.load(path).module()(*args)
