"""Flair character LMs on disk without pickle: ``<stem>.safetensors`` + ``<stem>.json``.

flair saves a ``LanguageModel`` with ``torch.save`` (a pickle) and reads it back with
``LanguageModel.load_language_model``, a full, unrestricted unpickle: a crafted file
runs its own code on load (issue 36, item 1). textkg therefore stores the character LMs it trains
as tensors only (safetensors) plus a JSON config (the character dictionary and the layer sizes),
and rebuilds the model by constructing flair's ``LanguageModel`` from that config and loading the
state dict. Every field of the config is checked (type, range, size) before anything is built.

A flair ``.pt`` file (an old textkg char LM, or one of flair's named models such as
``news-forward``) is refused, never unpickled: train one with ``textkg charlm train``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from textkg.errors import ConfigError

#: the tensor file of a stored char LM; its config is the same stem with ``.json``
SUFFIX = ".safetensors"
FORMAT = "textkg-char-lm"
VERSION = 1
#: bounds on what a config may ask textkg to build (a crafted config must not allocate gigabytes)
MAX_CONFIG_BYTES = 16 << 20
MAX_DICTIONARY = 1 << 20
MAX_WIDTH = 1 << 14
MAX_LAYERS = 8
_RECURRENT = ("lstm", "gru")
_INT_FIELDS = {"hidden_size": MAX_WIDTH, "nlayers": MAX_LAYERS, "embedding_size": MAX_WIDTH}


def config_path(path: str | os.PathLike[str]) -> Path:
    """The JSON config next to a char LM's ``.safetensors`` file."""
    return Path(path).with_suffix(".json")


def save_char_lm(model: Any, path: str | os.PathLike[str]) -> Path:
    """Write a flair ``LanguageModel`` as ``<stem>.safetensors`` + ``<stem>.json``.

    Args:
        model: A ``flair.models.LanguageModel``.
        path: Where to write; any suffix is replaced by ``.safetensors``.

    Returns:
        The ``.safetensors`` path (what ``FlairStackEncoder`` takes).
    """
    from safetensors.torch import save_file

    target = Path(path).with_suffix(SUFFIX)
    dictionary = model.dictionary
    config = {
        "format": FORMAT,
        "version": VERSION,
        "is_forward_lm": bool(model.is_forward_lm),
        "hidden_size": int(model.hidden_size),
        "nlayers": int(model.nlayers),
        "embedding_size": int(model.embedding_size),
        "nout": None if model.nout is None else int(model.nout),
        "document_delimiter": str(model.document_delimiter),
        "dropout": float(model.dropout),
        "recurrent_type": str(model.recurrent_type).lower(),
        "add_unk": bool(dictionary.add_unk),
        "dictionary": [item.decode("utf-8") for item in dictionary.idx2item],
    }
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    tmp = target.with_name(f".{target.name}.tmp")
    save_file(state, str(tmp))
    os.replace(tmp, target)
    tmp = target.with_name(f".{target.stem}.json.tmp")
    tmp.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, config_path(target))
    return target


def char_lm_identity(path: str | os.PathLike[str]) -> str:
    """sha256 of a stored char LM (its tensors and its config), for feature-cache keys."""
    h = hashlib.sha256()
    for part in (Path(path), config_path(path)):
        with part.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return "sha256:" + h.hexdigest()[:16]


def _fail(message: str, file: Path, field: str | None = None) -> ConfigError:
    return ConfigError(message, file=file, field=field)


def check_char_lm_path(path: str | os.PathLike[str], field: str) -> Path:
    """A char LM path that textkg may read: an existing ``.safetensors`` file with its ``.json``.

    Raises:
        ConfigError: a flair ``.pt`` pickle (refused, with how to retrain), another suffix, or a
            missing file.
    """
    p = Path(path)
    if p.suffix == ".pt":
        raise ConfigError(
            f"'{p}' is a flair .pt char LM, a pickle: loading it could run code, so textkg refuses it. "
            "Retrain it with `textkg charlm train` (it writes best-lm.safetensors + best-lm.json) "
            "and name the .safetensors file",
            field=field,
        )
    if p.suffix != SUFFIX:
        raise ConfigError(
            f"'{p}' is not a textkg char LM (expected a {SUFFIX} file written by `textkg charlm train`)", field=field
        )
    for part in (p, config_path(p)):
        if not part.is_file():
            raise ConfigError(f"char LM file '{part}' does not exist", field=field)
    return p


def _read_config(path: Path) -> dict[str, Any]:
    cfg_file = config_path(path)
    if cfg_file.stat().st_size > MAX_CONFIG_BYTES:
        raise _fail(f"char LM config is larger than {MAX_CONFIG_BYTES} bytes", cfg_file)
    try:
        cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _fail(f"not a valid JSON char LM config ({exc})", cfg_file) from None
    if not isinstance(cfg, dict) or cfg.get("format") != FORMAT or cfg.get("version") != VERSION:
        raise _fail(f"not a {FORMAT} version {VERSION} config", cfg_file, "format")
    for name, bound in _INT_FIELDS.items():
        value = cfg.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= bound:
            raise _fail(f"{name} must be an integer in [1, {bound}], got {value!r}", cfg_file, name)
    nout = cfg.get("nout")
    if nout is not None and (isinstance(nout, bool) or not isinstance(nout, int) or not 1 <= nout <= MAX_WIDTH):
        raise _fail(f"nout must be null or an integer in [1, {MAX_WIDTH}], got {nout!r}", cfg_file, "nout")
    if cfg.get("recurrent_type") not in _RECURRENT:
        raise _fail(f"recurrent_type must be one of {', '.join(_RECURRENT)}", cfg_file, "recurrent_type")
    for name in ("is_forward_lm", "add_unk"):
        if not isinstance(cfg.get(name), bool):
            raise _fail(f"{name} must be true or false", cfg_file, name)
    dropout = cfg.get("dropout")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise _fail("dropout must be a number in [0, 1)", cfg_file, "dropout")
    if not isinstance(cfg.get("document_delimiter"), str):
        raise _fail("document_delimiter must be a string", cfg_file, "document_delimiter")
    items = cfg.get("dictionary")
    if (
        not isinstance(items, list)
        or not 1 <= len(items) <= MAX_DICTIONARY
        or not all(isinstance(i, str) for i in items)
        or len(set(items)) != len(items)
    ):
        raise _fail(f"dictionary must be a list of 1 to {MAX_DICTIONARY} distinct strings", cfg_file, "dictionary")
    return cfg


def load_char_lm(path: str | os.PathLike[str], *, has_decoder: bool = False, field: str = "model") -> Any:
    """Rebuild a flair ``LanguageModel`` from ``<stem>.safetensors`` + ``<stem>.json`` (no pickle).

    Args:
        path: The ``.safetensors`` file.
        has_decoder: Keep the next-character decoder (perplexity; embeddings do not need it).
        field: The option that named ``path``, for error messages.

    Returns:
        A ``flair.models.LanguageModel`` in eval mode, on ``flair.device``.

    Raises:
        ConfigError: a refused or missing file, a config out of bounds, or tensors that do not
            match the config (each naming the file).
    """
    import flair
    from flair.data import Dictionary
    from flair.models import LanguageModel
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    p = check_char_lm_path(path, field)
    cfg = _read_config(p)
    dictionary = Dictionary(add_unk=False)
    for item in cfg["dictionary"]:
        dictionary.add_item(item)
    dictionary.add_unk = cfg["add_unk"]
    try:
        state = load_file(str(p), device="cpu")
    except (SafetensorError, OSError, ValueError) as exc:
        raise _fail(f"not a readable safetensors file ({exc})", p) from None
    if not has_decoder:
        state = {k: v for k, v in state.items() if not k.startswith("decoder.")}
    model = LanguageModel(
        dictionary,
        cfg["is_forward_lm"],
        hidden_size=cfg["hidden_size"],
        nlayers=cfg["nlayers"],
        embedding_size=cfg["embedding_size"],
        nout=cfg["nout"],
        document_delimiter=cfg["document_delimiter"],
        dropout=float(cfg["dropout"]),
        recurrent_type=cfg["recurrent_type"],
        has_decoder=has_decoder,
    )
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise _fail(f"tensors do not match the config ({str(exc).splitlines()[0]})", p) from None
    model.eval()
    model.to(flair.device)  # flair's LanguageModel._apply returns None, so no chaining
    return model
