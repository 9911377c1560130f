"""A transformer model folder is data, never code (STYLE.md 13 and 14; docs/security.md).

A folder may come from someone else: named by a shared run (a hub id in the local cache, a folder
under ``$TEXTKG_MODEL_DIRS``), or downloaded for training. transformers and sentence-transformers read
settings from its JSON files and forward some of them to ``from_pretrained``: on 1a0007a a
``sentence_bert_config.json`` holding ``{"model_args": {"weights_only": false}}`` beside a pickled
``pytorch_model.bin`` made ``textkg predict`` run the pickle. So, before any loader sees a folder,
:func:`check_model_folder` reads every settings file at its top and in each module's folder and refuses:

* a file that names code: ``auto_map`` or ``trust_remote_code`` anywhere; in ``config.json`` also
  ``quantization_config``, ``custom_pipelines`` and an attention implementation other than
  ``eager``/``sdpa`` (a hub kernel); ``adapter_config.json`` (PEFT: loads a base model named elsewhere);
* a ``modules.json`` entry outside :data:`MODULE_TYPES`, with a key outside :data:`_MODULE_ENTRY_KEYS`,
  or whose ``path`` leaves the folder;
* a key outside the allow-lists: :data:`SENTENCE_CONFIG` (``sentence_bert_config.json`` and its legacy
  names), :data:`FORWARDED` (``model_args``/``model_kwargs``, ``tokenizer_args``/``processor_kwargs``,
  ``config_args``/``config_kwargs``: what sentence-transformers hands to ``from_pretrained``),
  :data:`ST_CONFIG` (``config_sentence_transformers.json``) and :data:`MODULE_CONFIG` (a ``Pooling``,
  ``Dense`` or ``Normalize`` module's ``config.json``; a ``Dense`` activation in :data:`ACTIVATIONS`);
* weights that are only a pickle: a ``Transformer`` or ``Dense`` module (or a plain transformers
  folder) without ``model.safetensors``, and any folder holding a ``pytorch_model.bin``, ``.pt``,
  ``.pth``, ``.ckpt`` or ``.pkl`` file but no safetensors.

Each loader is then called with :data:`SAFE_WEIGHTS_KWARGS` (``use_safetensors=True``,
``weights_only=True``, ``trust_remote_code=False``, ``local_files_only=True``), which take precedence
over anything a folder's files say: a key not thought of here still cannot turn pickle loading on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from textkg.errors import ConfigError

#: what every loader call carries; sentence-transformers lets these (given by the caller) override the
#: folder's own ``model_args`` etc. (``Transformer._load_init_kwargs``: caller > hub > config file)
SAFE_KWARGS: dict[str, Any] = {"trust_remote_code": False, "local_files_only": True}
#: ... and a call that reads weights: safetensors only (a ``.bin`` is never opened by a library)
SAFE_WEIGHTS_KWARGS: dict[str, Any] = {**SAFE_KWARGS, "use_safetensors": True, "weights_only": True}
#: keyword arguments textkg's own callers add to ``from_pretrained`` (never read from a folder; ``num_labels``:
#: the cross-encoder's one-logit head, :mod:`textkg.encoders.cross_encoder`)
CALLER_KWARGS = ("attn_implementation", "hidden_dropout_prob", "attention_probs_dropout_prob", "num_labels")

#: module types a ``modules.json`` may name: its loader imports each named class and calls its ``load``
#: (``gensim.models.KeyedVectors`` would unpickle; a ``Router`` loads code from the folder)
MODULE_TYPES: dict[str, str] = {
    **{f"sentence_transformers.models.{m}": m for m in ("Transformer", "Pooling", "Normalize", "Dense")},
    # the same classes as sentence-transformers 5 saves them
    "sentence_transformers.base.modules.transformer.Transformer": "Transformer",
    "sentence_transformers.base.modules.dense.Dense": "Dense",
    "sentence_transformers.sentence_transformer.modules.pooling.Pooling": "Pooling",
    "sentence_transformers.sentence_transformer.modules.normalize.Normalize": "Normalize",
}
_MODULE_ENTRY_KEYS = ("idx", "name", "path", "type", "kwargs")
#: a ``Dense`` module's ``activation_function`` is imported by name and called: these only
ACTIVATIONS = ("torch.nn.modules.activation.Tanh", "torch.nn.modules.linear.Identity")

Check = Callable[[Any], bool]


def _one_of(*values: Any) -> Check:
    return lambda v: any(v == x and type(v) is type(x) for x in values)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 1 << 20


def _optional(check: Check) -> Check:
    return lambda v: v is None or check(v)


def _is_str(v: Any) -> bool:
    return isinstance(v, str) and len(v) <= 1024


_SIDE = _one_of("left", "right")
#: keys sentence-transformers forwards to ``AutoModel``/``AutoProcessor``/``AutoConfig.from_pretrained``
FORWARDED: dict[str, dict[str, Check]] = {
    "model": dict.fromkeys(("torch_dtype", "dtype"), _one_of("float32", "float16", "bfloat16", "auto")),
    "processor": {
        "model_max_length": _is_count,
        "do_lower_case": _is_bool,
        "padding_side": _SIDE,
        "truncation_side": _SIDE,
        "add_prefix_space": _is_bool,
    },
    "config": {},
}
_FORWARDED_NAMES = {
    **dict.fromkeys(("model_args", "model_kwargs"), "model"),
    **dict.fromkeys(("tokenizer_args", "processor_kwargs"), "processor"),
    **dict.fromkeys(("config_args", "config_kwargs"), "config"),
}
_TEXT_MODALITY = {"text": {"method": "forward", "method_output_name": "last_hidden_state"}}
#: a ``Transformer`` module's own settings file (sentence-transformers tries each name in turn)
SENTENCE_CONFIG_FILES = tuple(
    f"sentence_{m}_config.json"
    for m in ("bert", "roberta", "distilbert", "camembert", "albert", "xlm-roberta", "xlnet")
)
SENTENCE_CONFIG: dict[str, Check] = {
    "max_seq_length": _optional(_is_count),
    "do_lower_case": _is_bool,
    "transformer_task": _one_of("feature-extraction"),
    "modality_config": lambda v: v == _TEXT_MODALITY,
    "module_output_name": _one_of("token_embeddings"),
    "unpad_inputs": _optional(_is_bool),
    "processing_kwargs": lambda v: v is None or v == {},
}
#: ``config_sentence_transformers.json`` (another ``model_type`` would switch to a converting loader)
ST_CONFIG: dict[str, Check] = {
    "__version__": lambda v: isinstance(v, dict) and all(_is_str(x) for x in v.values()),
    "prompts": lambda v: isinstance(v, dict) and all(_is_str(x) for x in v.values()),
    "default_prompt_name": _optional(_is_str),
    "model_type": _one_of("SentenceTransformer"),
    "similarity_fn_name": _optional(_one_of("cosine", "dot", "dot_product", "euclidean", "manhattan")),
    "truncate_dim": _optional(_is_count),
}
_POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
#: a plain module's ``config.json`` (its keys become the module's constructor arguments)
MODULE_CONFIG: dict[str, dict[str, Check]] = {
    "Pooling": {
        "embedding_dimension": _is_count,
        "word_embedding_dimension": _is_count,
        "pooling_mode": lambda v: (
            _one_of(*_POOLING_MODES)(v) or (isinstance(v, list) and all(_one_of(*_POOLING_MODES)(x) for x in v))
        ),
        "include_prompt": _is_bool,
        **dict.fromkeys(
            (
                "pooling_mode_cls_token",
                "pooling_mode_mean_tokens",
                "pooling_mode_max_tokens",
                "pooling_mode_mean_sqrt_len_tokens",
                "pooling_mode_weightedmean_tokens",
                "pooling_mode_lasttoken",
            ),
            _is_bool,
        ),
    },
    "Dense": {
        "in_features": _is_count,
        "out_features": _is_count,
        "bias": _is_bool,
        "activation_function": _one_of(*ACTIVATIONS),
        "module_input_name": _one_of("sentence_embedding", "token_embeddings"),
        "module_output_name": _one_of("sentence_embedding", "token_embeddings"),
    },
    "Normalize": {},
}
#: keys of a transformers ``config.json`` (a model description, at any depth) that steer loading
_CONFIG_JSON_REFUSED = ("quantization_config", "custom_pipelines")
#: keys of a ``config.json`` (at any depth) refused unless empty or false: a backbone is loaded by transformers
#: with the config's own ``backbone_kwargs`` (``weights_only: false`` unpickles), not textkg's safe settings
_CONFIG_JSON_FALSY = ("backbone", "backbone_kwargs", "use_pretrained_backbone", "use_timm_backbone")
_ATTENTION_KEYS = ("attn_implementation", "_attn_implementation")
_ATTENTIONS = (None, "eager", "sdpa")
#: files that name code or another model: refused wherever they are
_REFUSED_FILES = ("adapter_config.json",)
#: settings files screened for ``auto_map``/``trust_remote_code`` at the top and in every module folder
_CONFIG_FILES = (
    "config.json",
    "modules.json",
    "config_sentence_transformers.json",
    "tokenizer_config.json",
    "processor_config.json",
    "preprocessor_config.json",
    *SENTENCE_CONFIG_FILES,
)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib")
_SAFETENSORS = ("model.safetensors", "model.safetensors.index.json")
_MAX_CONFIG_BYTES = 1 << 20
_MAX_MODULES = 64


def _keys(data: Any) -> Iterator[tuple[str, Any]]:
    """Every ``(key, value)`` of a JSON document, at any depth (iterative: no recursion limit)."""
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                yield str(k), v
                stack.append(v)
        elif isinstance(node, list):
            stack.extend(node)


def _read(path: Path) -> Any:
    """A settings file's JSON, screened for code at any depth; ``None`` when absent."""
    if not path.is_file():
        return None
    if path.stat().st_size > _MAX_CONFIG_BYTES:
        raise ConfigError("a model configuration file over 1 MiB is refused", file=path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError(f"not valid JSON: {type(exc).__name__}", file=path) from exc
    for key, value in _keys(data):
        if key == "auto_map":
            raise ConfigError("a model folder that names its own code (auto_map) is refused", file=path, field=key)
        if key == "trust_remote_code":
            raise ConfigError("a model folder that sets trust_remote_code is refused", file=path, field=key)
        if key == "activation_function" and value not in ACTIVATIONS:
            raise ConfigError(f"a Dense activation outside {list(ACTIVATIONS)} is refused: {value!r}", file=path)
    return data


def _allowed(data: Any, allowed: dict[str, Check], path: Path, prefix: str = "") -> None:
    """Refuse a key outside ``allowed`` or a value its check rejects, naming the file and field."""
    if not isinstance(data, dict):
        raise ConfigError(f"expected a JSON object, got {type(data).__name__}", file=path, field=prefix or None)
    for key, value in data.items():
        field = f"{prefix}{key}"
        if key not in allowed:
            names = ", ".join(allowed) or "none"
            raise ConfigError(
                f"a model folder may set only these keys here ({names}); '{key}' is refused (its settings are an "
                "allow-list: some are forwarded to from_pretrained, where one could ask for weights_only=false)",
                file=path,
                field=field,
            )
        if not allowed[key](value):
            raise ConfigError(f"value {value!r} is not allowed", file=path, field=field)


def _check_sentence_config(path: Path) -> None:
    data = _read(path)
    if data is None:
        return
    if not isinstance(data, dict):
        raise ConfigError("expected a JSON object", file=path)
    plain = {k: v for k, v in data.items() if k not in _FORWARDED_NAMES}
    _allowed(plain, SENTENCE_CONFIG, path)
    for key, value in data.items():
        if key in _FORWARDED_NAMES:
            _allowed(value, FORWARDED[_FORWARDED_NAMES[key]], path, prefix=f"{key}.")


def _check_transformers_config(path: Path) -> None:
    data = _read(path)
    for key, value in _keys(data):
        if key in _CONFIG_JSON_REFUSED:
            raise ConfigError(f"a model config that sets '{key}' is refused (it steers loading)", file=path, field=key)
        if (key in _CONFIG_JSON_FALSY and value not in (None, False, {}, [], "")) or (
            key == "weights_only" and value is not True
        ):
            raise ConfigError(
                f"a model config that sets '{key}' is refused (it loads another model, or a pickle, with settings "
                "textkg does not choose)",
                file=path,
                field=key,
            )
        if (key in _ATTENTION_KEYS or str(key).startswith("_attn_implementation")) and value not in _ATTENTIONS:
            raise ConfigError(f"attention implementation {value!r} is refused (eager or sdpa)", file=path, field=key)


def _check_weights(where: Path, *, required: bool) -> None:
    """Refuse a folder whose weights are only a pickle (or, if ``required``, that has no safetensors)."""
    files = [p for p in where.iterdir() if p.is_file()] if where.is_dir() else []
    if any(p.suffix == ".safetensors" or p.name in _SAFETENSORS for p in files) and (
        not required or any((where / n).is_file() for n in _SAFETENSORS)
    ):
        return
    pickled = sorted(p.name for p in files if p.suffix.lower() in PICKLE_SUFFIXES)
    if pickled:
        raise ConfigError(
            f"this model folder holds only pickled weights ({', '.join(pickled[:3])}): loading a pickle can run "
            "code, so textkg reads only model.safetensors (convert the weights, e.g. save_pretrained("
            "safe_serialization=True), in a session you trust)",
            file=where,
        )
    if required:
        raise ConfigError(
            "this model folder has no model.safetensors (textkg reads weights only from safetensors)", file=where
        )


def _module_folder(folder: Path, entry: Any, path: Path) -> tuple[str, Path]:
    """(kind, folder) of one ``modules.json`` entry, checked."""
    if not isinstance(entry, dict):
        raise ConfigError(f"a modules.json entry must be an object, got {entry!r}", file=path)
    extra = sorted(set(entry) - set(_MODULE_ENTRY_KEYS))
    if extra:
        raise ConfigError(
            f"modules.json entries may hold only {', '.join(_MODULE_ENTRY_KEYS)}", file=path, field=extra[0]
        )
    kind = MODULE_TYPES.get(entry["type"]) if isinstance(entry.get("type"), str) else None
    if kind is None:
        names = ", ".join(sorted(set(MODULE_TYPES.values())))
        raise ConfigError(
            f"module types outside sentence_transformers' {names} are refused: {entry.get('type')!r}", file=path
        )
    kwargs = entry.get("kwargs", [])
    if not (isinstance(kwargs, list) and all(_is_str(k) for k in kwargs)):
        raise ConfigError("a module's kwargs must be a list of names", file=path, field="kwargs")
    rel = entry.get("path", "")
    if not isinstance(rel, str) or Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise ConfigError(
            f"a module path must be a subfolder of the model folder, got {rel!r}", file=path, field="path"
        )
    sub = folder / rel
    root = os.path.realpath(folder)
    if os.path.commonpath([os.path.realpath(sub), root]) != root:
        raise ConfigError(f"module path {rel!r} leaves the model folder through a symlink", file=path, field="path")
    return kind, sub


def _check_files(where: Path) -> None:
    """Screen a folder's settings files for code (:func:`_read`); refuse a PEFT adapter."""
    for name in _CONFIG_FILES:
        _read(where / name)
    for name in _REFUSED_FILES:
        if (where / name).exists():
            raise ConfigError(
                "a PEFT adapter folder (it loads a base model named elsewhere) is refused", file=where / name
            )


def _check_module(kind: str, where: Path) -> None:
    _check_files(where)
    if kind == "Transformer":
        for name in SENTENCE_CONFIG_FILES:
            _check_sentence_config(where / name)
        _check_transformers_config(where / "config.json")
        _check_weights(where, required=True)
    else:
        config = _read(where / "config.json")
        if config is not None:
            _allowed(config, MODULE_CONFIG[kind], where / "config.json")
        _check_weights(where, required=kind == "Dense")


def cached_snapshot(name: str) -> Path | None:
    """The local folder of a hub id already in the Hugging Face cache (never fetched), else ``None``."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # not a hub id, or not cached: the loader reports it
        return None


def local_model_folder(name: str) -> Path | None:
    """``name`` as a local folder: itself, or a hub id's snapshot in the local cache; else ``None``."""
    folder = Path(name)
    if folder.is_dir():
        return folder
    snapshot = cached_snapshot(name)
    return snapshot if snapshot is not None and snapshot.is_dir() else None


def check_model_folder(name: str) -> Path | None:
    """Refuse a model folder that could run code or unpickle when loaded (module docstring).

    Args:
        name: A local folder, or a hub id (checked in its snapshot in the local cache).

    Returns:
        The checked local folder, or ``None`` when ``name`` is neither a folder nor cached.

    Raises:
        ConfigError: naming the file and field that is refused.
    """
    folder = local_model_folder(name)
    if folder is None:
        return None
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())[:_MAX_MODULES]:
        _check_files(sub)  # every subfolder, named by modules.json or not: no code
        _check_weights(sub, required=False)  # nor pickled-only weights (a backbone a config might name)
        _check_transformers_config(sub / "config.json")
    st_config = _read(folder / "config_sentence_transformers.json")
    if st_config is not None:
        _allowed(st_config, ST_CONFIG, folder / "config_sentence_transformers.json")
    modules_path = folder / "modules.json"
    modules = _read(modules_path)
    if modules is None:  # a plain transformers folder: sentence-transformers adds mean pooling
        _check_module("Transformer", folder)
        return folder
    if not isinstance(modules, list) or len(modules) > _MAX_MODULES:
        raise ConfigError(f"modules.json must be a list of at most {_MAX_MODULES} modules", file=modules_path)
    # the top's own files (transformers' AutoModel reads its config.json): screened, no pickled-only weights
    _check_files(folder)
    _check_transformers_config(folder / "config.json")
    for entry in modules:
        _check_module(*_module_folder(folder, entry, modules_path))
    _check_weights(folder, required=False)
    return folder
