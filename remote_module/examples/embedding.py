"""The demo's remote module: a large ``nn.EmbeddingBag`` behind a TorchScript interface.

Its remote methods are generated at build time::

    remote-module-codegen remote_module.examples.embedding:EmbeddingBagInterface \\
        --output-dir remote_module/examples/generated
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

import remote_module


@remote_module.interface  # torch.jit.interface, quietly
class EmbeddingBagInterface:
    def forward(self, indices: Tensor, offsets: Tensor) -> Tensor:
        pass

    def weight_norm(self) -> float:
        pass


class RemoteEmbeddingBag(nn.Module):
    """``nn.EmbeddingBag`` (mean pooling) with the interface's methods. With ``sparse``, the
    weight's gradient is sparse: a step costs the rows a batch touched, not the whole table."""

    def __init__(
        self, num_embeddings: int, embedding_dim: int, seed: int = 0, sparse: bool = False
    ) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.bag = nn.EmbeddingBag(num_embeddings, embedding_dim, mode="mean", sparse=sparse)
        with torch.no_grad():
            self.bag.weight.copy_(
                torch.randn(num_embeddings, embedding_dim, generator=generator) * 0.1
            )

    def forward(self, indices: Tensor, offsets: Tensor) -> Tensor:
        return self.bag(indices, offsets)

    @torch.jit.export
    def weight_norm(self) -> float:
        return float(self.bag.weight.norm().item())
