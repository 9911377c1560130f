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


def _under_functorch() -> bool:
    """True inside a torch.func transform (vmap, grad), where shapes may not depend on data."""
    return torch._C._functorch.maybe_current_level() is not None


def _keep(lengths: torch.Tensor) -> int:
    """Columns to keep: the longest real length (at least 1); padding beyond it is masked anyway."""
    return max(int(lengths.max()) if lengths.numel() else 0, 1)


class DKRLEncoder(nn.Module):
    """Trainable CNN over token embeddings.

    Args:
        token_dim: Size d of the input token vectors (e.g. 50 for GloVe).
        out_dim: Size of the description embedding.
        hidden_dim: Channels of the first convolution (default ``out_dim``).
        bucket_size: Rows per length bucket. Inputs with more rows are sorted by
            length and encoded in buckets, each cut to its own longest row: the
            output is the same (it is invariant to padding), but a long tail
            (FB15k-237 with Flair tokens: mean 27, max 218) no longer makes every row cost
            the longest one.
    """

    def __init__(self, token_dim: int, out_dim: int, *, hidden_dim: int | None = None, bucket_size: int = 1024) -> None:
        super().__init__()
        hidden_dim = hidden_dim or out_dim
        self.token_dim, self.out_dim, self.bucket_size = token_dim, out_dim, bucket_size
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
        return self.encode_rows(tokens, mask)

    def encode_rows(self, tokens: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`forward` on ``tokens[rows], mask[rows]`` without copying their padding.

        Gathering ``k`` rows of a table padded to its longest description copies
        ``k × L_max × d`` floats (FB15k-237 with Flair features: 3.6 GB for the
        1-vs-all pool, most of a training step); here each length bucket
        gathers only its own real columns.

        Args:
            tokens: FloatTensor (n, L, token_dim), e.g. every entity's tokens.
            mask: BoolTensor (n, L).
            rows: LongTensor (k,) of rows to encode (default: all ``n``).

        Returns:
            FloatTensor (k, out_dim), the same as ``forward(tokens[rows], mask[rows])``.
        """
        if _under_functorch():  # vmap (per-example DP gradients): no data-dependent shapes
            return self._encode(tokens, mask) if rows is None else self._encode(tokens[rows], mask[rows])
        if rows is None:
            rows = torch.arange(tokens.shape[0], device=tokens.device)
        lengths = mask[rows].sum(1)
        if rows.numel() <= self.bucket_size:
            keep = _keep(lengths)
            return self._encode(tokens[:, :keep][rows], mask[:, :keep][rows])
        order = torch.argsort(lengths)
        parts = []
        for idx in order.split(self.bucket_size):
            keep = _keep(lengths[idx])  # cut before gathering: copy only the bucket's real columns
            parts.append(self._encode(tokens[:, :keep][rows[idx]], mask[:, :keep][rows[idx]]))
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel(), device=order.device)
        return torch.cat(parts)[inverse]

    def _encode(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
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
