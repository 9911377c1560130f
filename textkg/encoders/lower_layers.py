"""The lower layers of a BERT-family encoder: token states to fine-tune the top layers over.

Fine-tuning only the top ``k`` transformer layers over cached hidden states of the
lower ``L - k`` layers keeps most of end-to-end fine-tuning's gain at a fraction of
its cost: the lower layers are frozen, so their output per description is computed
once and cached on disk (``encoders.cache.cached_encode_tokens``, float16, keyed by
this encoder's identity, which names ``k``, ``max_tokens`` and the weights, and by the
text hash). ``textkg.models.TopLayers`` runs the trainable top layers over them.
BLP (Daza, Cochez & Groth 2021, arXiv:2010.03496) fine-tunes every layer; StATIK
(Markowitz et al. 2022, NAACL Findings) fine-tunes a small transformer as well.
"""

from __future__ import annotations

from typing import Any

import torch

from textkg.errors import ConfigError

from .bert import BertEncoder


class BertLowerLayers(BertEncoder):
    """A :class:`BertEncoder` cut after layer ``L - top_layers``; its tokens are that layer's output.

    Args:
        model_name_or_path, max_tokens, device: as for :class:`BertEncoder`.
        top_layers: ``k``, the number of top layers left out (trained elsewhere);
            ``1 <= k <= L``. ``k = L`` leaves the embedding layer only.

    ``encode_tokens`` returns ``(n, T, d)`` hidden states and the ``(n, T)`` attention mask;
    pooled ``encode`` is the mean of those states (for completeness, not used in training).

    Raises:
        ConfigError: ``top_layers`` not an integer in ``[1, L]`` (field ``top_layers``).
    """

    name = "bert-lower-layers"

    def __init__(
        self,
        model_name_or_path: str | None = None,
        *,
        top_layers: int = 1,
        max_tokens: int = 32,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(model_name_or_path, pooling="mean", max_tokens=max_tokens, device=device)
        total = int(self.module.config.num_hidden_layers)
        if isinstance(top_layers, bool) or not isinstance(top_layers, int) or not 1 <= top_layers <= total:
            raise ConfigError(f"must be an integer in [1, {total}], got {top_layers!r}", field="top_layers")
        self.top_layers = top_layers
        self.total_layers = total
        # a shallow copy of the layer list: the loaded model is ours alone, so cutting it mutates nothing shared
        self.module.encoder.layer = self.module.encoder.layer[: total - top_layers]

    @property
    def identity(self) -> str:
        return f"{super().identity[:-1]},lower_layers={self.total_layers - self.top_layers}/{self.total_layers})"

    @property
    def config(self) -> dict[str, Any]:
        cfg = super().config
        cfg.pop("pooling")
        cfg.pop("trainable")
        return {**cfg, "top_layers": self.top_layers}
