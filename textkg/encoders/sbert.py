"""Sentence-Transformers encoder (mean-pooled MiniLM by default, packaged offline)."""

from __future__ import annotations

from typing import Any

import torch

from .base import TextEncoder
from .bert import default_minilm_path, load_pretrained, weights_identity


class _STLoader:
    """Adapter so :func:`textkg.encoders.bert.load_pretrained` can wrap SentenceTransformer."""

    def __init__(self, device: str) -> None:
        self.device = device

    def from_pretrained(
        self, name: str, *, trust_remote_code: bool, local_files_only: bool, **model_kwargs: Any
    ) -> Any:
        """``model_kwargs`` (``use_safetensors``, ``weights_only``) go to ``AutoModel.from_pretrained``.

        sentence-transformers gives the caller's ``model_kwargs`` precedence over the folder's own
        ``model_args`` (``Transformer._load_init_kwargs``), so a folder cannot turn them off.
        """
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(
            name,
            device=self.device,
            trust_remote_code=trust_remote_code,
            local_files_only=local_files_only,
            model_kwargs=model_kwargs,
            backend="torch",
        )


def load_sentence_transformer(name: str, device: str = "cpu") -> Any:
    """A ``SentenceTransformer`` from a checked folder with safe loader arguments (no pickle, no code).

    Raises:
        ConfigError: The folder is refused (:func:`textkg.encoders.model_folder.check_model_folder`)
            or the model cannot be loaded.
    """
    return load_pretrained(_STLoader(device), name, "sentence-transformers model")


class SentenceTransformerEncoder(TextEncoder):
    """``sentence_transformers.SentenceTransformer`` behind the TextEncoder contract.

    Args:
        model_name_or_path: Local folder or hub name; default: the packaged
            all-MiniLM-L6-v2 folder (384-d).
        normalize: L2-normalise the embeddings (default True, as the model card advises).
        max_tokens: Truncation length; ``None`` keeps the model's own (256 for MiniLM).
        device: Torch device.

    Raises:
        ConfigError: The model cannot be loaded (e.g. a hub name not cached offline).
    """

    name = "sentence-transformers"

    def __init__(
        self,
        model_name_or_path: str | None = None,
        *,
        normalize: bool = True,
        max_tokens: int | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        self._explicit_path = model_name_or_path
        self._name_or_path = str(model_name_or_path) if model_name_or_path else default_minilm_path()
        self.normalize = normalize
        self.device = torch.device(device)
        self.model = load_sentence_transformer(self._name_or_path, str(self.device))
        if max_tokens is not None:
            self.model.max_seq_length = int(max_tokens)
        self.max_tokens = max_tokens
        self.model.eval()
        self.model.requires_grad_(False)
        self._weights = weights_identity(self._name_or_path, None)

    @property
    def dim(self) -> int:
        get = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(get())

    @property
    def identity(self) -> str:
        model = "minilm-l6-v2(packaged)" if self._explicit_path is None else self._name_or_path
        return (
            f"sentence-transformers(model={model},weights={self._weights},"
            f"normalize={self.normalize},max_tokens={self.model.max_seq_length})"
        )

    @property
    def config(self) -> dict[str, Any]:
        return {
            "model_name_or_path": self._explicit_path,
            "normalize": self.normalize,
            "max_tokens": self.max_tokens,
            "device": str(self.device),
        }

    def _modules(self) -> list[torch.nn.Module]:
        return [self.model]

    def _encode_batch(self, texts: list[str]) -> torch.Tensor:
        return self.model.encode(
            texts,
            batch_size=len(texts),
            convert_to_tensor=True,
            normalize_embeddings=self.normalize,
            show_progress_bar=False,
        )
