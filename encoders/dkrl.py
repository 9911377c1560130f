"""DKRL's convolutional description encoder, as used by BLP.

Xie et al., "Representation Learning of Knowledge Graphs with Entity
Descriptions", AAAI 2016; the variant follows Daza et al., "Inductive Entity
Representations from Text via Link Prediction" (BLP), WWW 2021,
arXiv:2010.03496v3, ``blp/models.py::DKRL``:

    Conv1d(k=2) → max-pool(4) → tanh → Conv1d(k=2) → masked mean → tanh

Unlike the reference code, the sequence is zero-padded to a multiple of 4
(at least 4) and the pooled features at padding positions are zeroed, so the
output is exactly invariant to extra padding and defined for 1–3 tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

POOL = 4


class DKRLEncoder(nn.Module):
    """Trainable CNN over token embeddings.

    Args:
        token_dim: Size d of the input token vectors (e.g. 50 for GloVe).
        out_dim: Size of the description embedding.
        hidden_dim: Channels of the first convolution (default ``out_dim``).
    """

    def __init__(self, token_dim: int, out_dim: int, *, hidden_dim: int | None = None) -> None:
        super().__init__()
        hidden_dim = hidden_dim or out_dim
        self.token_dim, self.out_dim = token_dim, out_dim
        self.conv1 = nn.Conv1d(token_dim, hidden_dim, kernel_size=2)
        self.conv2 = nn.Conv1d(hidden_dim, out_dim, kernel_size=2)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Encode descriptions.

        Args:
            tokens: FloatTensor (n, L, token_dim).
            mask: BoolTensor (n, L), True at real tokens (a prefix of each row).

        Returns:
            FloatTensor (n, out_dim). Rows without tokens give ``tanh(0) = 0``.
        """
        n, length, _ = tokens.shape
        target = max(POOL, -(-length // POOL) * POOL)
        m = mask.to(tokens.dtype)
        x = (tokens * m.unsqueeze(-1)).transpose(1, 2)  # (n, d, L)
        x = F.pad(x, [0, target - length + 1])  # room for k=2 at the last position
        m = F.pad(m, [0, target - length]).unsqueeze(1)  # (n, 1, target)
        x = torch.tanh(F.max_pool1d(self.conv1(x), POOL))  # (n, h, target/4)
        m = F.max_pool1d(m, POOL)  # (n, 1, target/4)
        x = F.pad(x * m, [0, 1])
        x = self.conv2(x)  # (n, out, target/4)
        x = (x * m).sum(-1) / m.sum(-1).clamp(min=1.0)
        return torch.tanh(x)
