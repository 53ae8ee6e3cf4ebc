"""Put on PYTHONPATH by ``tests/test_without_torchscript.py``: every Python process started with
it sees a torch whose ``torch.jit.script`` and ``torch.jit.interface`` raise, as torch plans
once TorchScript is removed, before anything else is imported."""

import torch


def _removed(*args: object, **kwargs: object) -> object:
    raise RuntimeError("TorchScript is not available in this build of torch")


_removed._rm_removed = True  # type: ignore[attr-defined]
torch.jit.script = _removed
torch.jit.interface = _removed
