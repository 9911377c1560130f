"""Sequence-to-sequence LSTM autoencoder over token embeddings.

The seed paper's "Torchcoder-AEC": an encoder LSTM reads the token vectors;
its last hidden state is the description code ``(n, code_dim)``; a decoder
LSTM fed the code at every step reconstructs the token sequence through a
linear layer. Pre-trained on masked mean-squared reconstruction error
(:func:`pretrain_autoencoder`); the codes then serve as entity text features.

Masking: sequences are packed by length, so padding never changes a code.
Each row must have at least one real token, and real tokens form a prefix.

CLI wiring (for the lead): ``textkg encoders pretrain-aec`` =
``tokens, mask = get_encoder("glove-bow").encode_tokens(texts)`` →
``pretrain_autoencoder(tokens, mask, code_dim=..., epochs=..., lr=..., seed=...)``
→ ``module.save(path)``.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from textkg.errors import ConfigError, DataError

#: the widest token or code vector a saved autoencoder may declare (bounded before building it)
MAX_WIDTH = 1 << 16


def _lengths(mask: torch.Tensor) -> torch.Tensor:
    lengths = mask.sum(1)
    if bool((lengths == 0).any()):
        bad = (lengths == 0).nonzero().flatten()[:10].tolist()
        raise DataError(f"rows {bad} have no tokens (mask all False)", field="mask")
    return lengths


class LSTMAutoencoder(nn.Module):
    """LSTM encoder → code → LSTM decoder → token reconstruction.

    Args:
        token_dim: Size d of the token vectors.
        code_dim: Size of the code (the encoder's hidden size).
        num_layers: Layers in encoder and decoder LSTMs.
    """

    def __init__(self, token_dim: int, code_dim: int, *, num_layers: int = 1) -> None:
        super().__init__()
        self.token_dim, self.code_dim, self.num_layers = token_dim, code_dim, num_layers
        self.encoder = nn.LSTM(token_dim, code_dim, num_layers=num_layers, batch_first=True)
        self.decoder = nn.LSTM(code_dim, code_dim, num_layers=num_layers, batch_first=True)
        self.output = nn.Linear(code_dim, token_dim)

    @property
    def out_dim(self) -> int:
        return self.code_dim

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Codes: tokens (n, L, d) + mask (n, L) → FloatTensor (n, code_dim)."""
        packed = pack_padded_sequence(tokens, _lengths(mask).cpu(), batch_first=True, enforce_sorted=False)
        _, (h, _) = self.encoder(packed)
        return h[-1]

    def decode(self, code: torch.Tensor, length: int) -> torch.Tensor:
        """Reconstruct (n, length, d) token vectors from codes (n, code_dim)."""
        out, _ = self.decoder(code.unsqueeze(1).expand(-1, length, -1))
        return self.output(out)

    def reconstruction_loss(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Masked mean-squared error over real tokens (scalar)."""
        recon = self.decode(self(tokens, mask), tokens.shape[1])
        m = mask.to(tokens.dtype).unsqueeze(-1)
        return ((recon - tokens) ** 2 * m).sum() / (m.sum() * tokens.shape[-1])

    @torch.no_grad()
    def encode(self, tokens: torch.Tensor, mask: torch.Tensor, *, batch_size: int = 256) -> torch.Tensor:
        """Codes in eval mode without gradients (training mode restored)."""
        mode = self.training
        self.eval()
        try:
            parts = [
                self(tokens[i : i + batch_size], mask[i : i + batch_size])
                for i in range(0, tokens.shape[0], batch_size)
            ]
        finally:
            self.train(mode)
        return torch.cat(parts) if parts else torch.zeros(0, self.code_dim)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write config + state_dict to ``path`` (atomically)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        torch.save(
            {
                "config": {"token_dim": self.token_dim, "code_dim": self.code_dim, "num_layers": self.num_layers},
                "state_dict": self.state_dict(),
            },
            tmp,
        )
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, map_location: str = "cpu") -> LSTMAutoencoder:
        """Rebuild a module written by :meth:`save`."""
        blob = torch.load(path, map_location=map_location, weights_only=True)
        config = blob["config"]
        # a shared run's file: bound the sizes before anything is allocated (issue 36)
        if set(config) != {"token_dim", "code_dim", "num_layers"} or not all(
            type(config[k]) is int and 1 <= config[k] <= (8 if k == "num_layers" else MAX_WIDTH) for k in config
        ):
            raise ValueError(f"config out of bounds: {config!r}")
        module = cls(**config)
        module.load_state_dict(blob["state_dict"])
        return module


def pretrain_autoencoder(
    tokens: torch.Tensor,
    mask: torch.Tensor,
    *,
    code_dim: int = 128,
    epochs: int = 10,
    lr: float = 1e-3,
    seed: int = 0,
    batch_size: int = 64,
    num_layers: int = 1,
) -> tuple[LSTMAutoencoder, list[float]]:
    """Pre-train an LSTM autoencoder on masked MSE reconstruction (Adam).

    Args:
        tokens: FloatTensor (n, L, d), e.g. ``glove-bow`` ``encode_tokens``.
        mask: BoolTensor (n, L), real tokens as a prefix of each row.
        code_dim: Code size.
        epochs: Passes over the data.
        lr: Adam learning rate.
        seed: Seeds initialisation and shuffling (local generator; global RNG untouched
            except through ``torch.manual_seed`` during construction).
        batch_size: Rows per step.
        num_layers: LSTM layers.

    Returns:
        ``(module, history)``: the trained module in eval mode and the mean
        training loss per epoch.
    """
    if tokens.ndim != 3 or mask.shape != tokens.shape[:2]:
        raise ConfigError(
            f"expected tokens (n, L, d) and mask (n, L), got {tuple(tokens.shape)} and {tuple(mask.shape)}",
            field="tokens",
        )
    _lengths(mask)
    # bounded: a crafted run's config pre-trains here when it is opened (10**12 epochs ran until killed)
    limits = {"code_dim": 65_536, "epochs": 10_000, "batch_size": 10**6, "num_layers": 16}
    given = {"code_dim": code_dim, "epochs": epochs, "batch_size": batch_size, "num_layers": num_layers}
    for field, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limits[field]:
            raise ConfigError(
                f"{field} must be an integer in [1, {limits[field]:,}], got {value!r}",
                field=f"model.text_module_kwargs.{field}",
            )
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr <= 10:
        raise ConfigError(f"lr must be a number in (0, 10], got {lr!r}", field="model.text_module_kwargs.lr")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        module = LSTMAutoencoder(tokens.shape[-1], code_dim, num_layers=num_layers)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(module.parameters(), lr=lr)
    history: list[float] = []
    module.train()
    for _ in range(epochs):
        order = torch.randperm(tokens.shape[0], generator=gen)
        total, count = 0.0, 0
        for i in range(0, len(order), batch_size):
            idx = order[i : i + batch_size]
            length = int(mask[idx].sum(1).max())
            loss = module.reconstruction_loss(tokens[idx, :length], mask[idx, :length])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), 5.0)
            opt.step()
            total += loss.item() * len(idx)
            count += len(idx)
        history.append(total / count)
    module.eval()
    return module, history


def load_autoencoder(path: str | os.PathLike[str]) -> LSTMAutoencoder:
    """:meth:`LSTMAutoencoder.load`, with one :class:`ConfigError` naming the file on any failure."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("no such autoencoder file", file=path, field="model.text_module_kwargs.path")
    try:
        return LSTMAutoencoder.load(path)
    except Exception as exc:
        raise ConfigError(
            f"not an LSTM autoencoder written by textkg ({type(exc).__name__}: {exc})",
            file=path,
            field="model.text_module_kwargs.path",
        ) from None
