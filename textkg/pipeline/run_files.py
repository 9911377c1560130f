"""What a run's ``config.json`` may name: registered names, or files inside the run that textkg wrote.

A run folder may come from someone else (issue 36, item 1: a crafted ``config.json`` named a
pickled char LM and flair unpickled it). Its model section names files and folders in a few
places; each is checked here before any of it is read, and everything else exits 2:

====================================  ===============================================================
``encoder_kwargs`` key                 allowed in a run's config
====================================  ===============================================================
``forward_model``, ``backward_model``  a relative path inside the run to a ``.safetensors`` char LM
                                       (with its ``.json``) that ``textkg train`` copied there
``word_embeddings``                    ``glove-6B-50d`` (the packaged GloVe) or ``null``
``model_name_or_path``                 ``null``, the packaged MiniLM folder, ``encoder`` (``encoder-N``
                                       for a ``concat`` part) of a ``bert`` encoder: the run's own
                                       ontology-adapted MiniLM, a real folder in the run that ``textkg
                                       train`` copied there and
                                       :func:`~textkg.encoders.cross_encoder.check_encoder_folder`
                                       accepts (its :data:`ENCODER_FILES` and nothing else), a Hugging
                                       Face hub id already in the local cache (read
                                       from there, never fetched), a folder in the user's textkg cache
                                       (where ``textkg encoders adapt`` writes), or a folder under
                                       ``$TEXTKG_MODEL_DIRS`` (folders the user trusts,
                                       ``os.pathsep``-separated)
``cache_dir``                          ``null`` (a cache is this machine's; set ``$TEXTKG_CACHE_DIR``)
``device``                             absent, or a device this machine has (``cpu``, ``cuda:N``, ``mps``)
====================================  ===============================================================

``text_module_kwargs.path`` (an LSTM autoencoder) must be a relative ``.pt`` path inside the run
(``textkg train`` records the run's own ``lstm_ae.pt``; it is read with ``weights_only=True``).
The same rules apply to each part of a ``concat`` encoder. A relative path is refused when it is
absolute, contains ``..``, has another suffix, or resolves (through a symlink) outside the run.

:func:`store_run_files` is the writer's side: ``textkg train`` copies the char LMs it was given
into ``RUN/char_lms/``, and a ``bert`` encoder's adapted MiniLM (a folder ``textkg encoders adapt`` or
the run's own adaptation wrote in the textkg cache) into ``RUN/encoder/``, and records those relative
names, so that its runs satisfy these rules and open on another machine.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from textkg.encoders.cross_encoder import ENCODER_FILES  # an adapted MiniLM's files: all that is copied, or read
from textkg.errors import ConfigError

#: the packaged GloVe vectors (``textkg.encoders.glove``)
WORD_EMBEDDINGS = ("glove-6B-50d",)
#: folders a user trusts for ``model_name_or_path`` in a run they open
MODEL_DIRS_ENV = "TEXTKG_MODEL_DIRS"
#: where ``textkg train`` stores the char LMs a run uses
CHAR_LM_DIR = "char_lms"
CHAR_LM_KEYS = ("forward_model", "backward_model")
#: where ``textkg train`` stores a ``bert`` encoder's ontology-adapted MiniLM (``encoder-N`` for a concat part)
ENCODER_DIR = "encoder"
_ENCODER_NAME = re.compile(r"encoder(-[1-9][0-9]{0,2})?")
#: the encoders that read a run's adapted folder (``stored_config`` copies one only for these): another would read
#: what the checks do not (sentence-transformers' ``modules.json`` names classes to import)
ENCODER_READERS = ("bert",)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,95}$")


def encoder_kwargs(model: dict) -> Iterator[tuple[str, dict]]:
    """(field prefix, kwargs dict) of the encoder and of each part of a ``concat`` encoder."""
    kwargs = model.get("encoder_kwargs")
    if not isinstance(kwargs, dict):
        return
    yield "model.encoder_kwargs", kwargs
    parts = kwargs.get("parts")
    if isinstance(parts, list):
        for i, part in enumerate(parts):
            if isinstance(part, dict):
                yield f"model.encoder_kwargs.parts[{i}]", part


def _inside_run(value: Any, run: Path, *, suffix: str, cfg_file: Path | None, field: str) -> Path:
    """``run / value`` when ``value`` is a relative path to a regular file inside the run."""
    if not isinstance(value, str) or not value or "\x00" in value:
        raise ConfigError(f"expected a relative path inside the run, got {value!r}", file=cfg_file, field=field)
    rel = Path(value)
    if rel.is_absolute() or ".." in rel.parts:
        raise ConfigError(
            f"'{value}' is not a relative path inside the run: a run's config may name only files the run "
            "holds (no absolute paths, no '..')",
            file=cfg_file,
            field=field,
        )
    if rel.suffix != suffix:
        raise ConfigError(f"'{value}' must be a {suffix} file", file=cfg_file, field=field)
    full = run / rel
    root = os.path.realpath(run)
    if os.path.commonpath([os.path.realpath(full), root]) != root:
        raise ConfigError(f"'{value}' leaves the run through a symlink", file=cfg_file, field=field)
    if full.is_symlink() or not full.is_file():
        raise ConfigError(f"'{value}' is not a regular file in the run", file=cfg_file, field=field)
    return full


def run_encoder_name(value: Any) -> bool:
    """``value`` names a run's own adapted encoder folder (:data:`ENCODER_DIR`, or ``encoder-N``)."""
    return isinstance(value, str) and _ENCODER_NAME.fullmatch(value) is not None


def _run_encoder(value: str, run: Path, *, encoder: Any, cfg_file: Path | None, field: str) -> str:
    """``run / value``, the run's own adapted encoder folder, checked (module docstring); ``encoder``: the name of
    the encoder that would read it."""
    if encoder not in ENCODER_READERS:
        raise ConfigError(
            f"'{value}' is the run's adapted MiniLM, which only a {' or '.join(ENCODER_READERS)} encoder reads; "
            f"this one is {encoder!r}",
            file=cfg_file,
            field=field,
        )
    full = run / value
    root = os.path.realpath(run)
    if full.is_symlink() or os.path.commonpath([os.path.realpath(full), root]) != root or not full.is_dir():
        raise ConfigError(
            f"'{value}' is not a folder in the run (a symlink is refused: nothing is read beyond the run)",
            file=cfg_file,
            field=field,
        )
    from textkg.encoders.cross_encoder import check_encoder_folder

    return str(check_encoder_folder(full))


def adapted_folder(value: Any) -> bool:
    """``value`` is a folder an adaptation wrote in the user's textkg cache (``adapted/``, with its summary)."""
    if not isinstance(value, str) or not os.path.isabs(value):
        return False
    from textkg.training.adapt_encoder import SUMMARY_FILE
    from textkg.training.features import default_cache_dir

    real, cache = os.path.realpath(value), os.path.realpath(Path(default_cache_dir()) / "adapted")
    return os.path.commonpath([real, cache]) == cache and os.path.isfile(os.path.join(real, SUMMARY_FILE))


def _trusted_model_dirs() -> list[str]:
    """``$TEXTKG_MODEL_DIRS`` and the user's textkg cache (``textkg encoders adapt`` output), resolved."""
    from textkg.training.features import default_cache_dir

    given = [os.path.expanduser(d) for d in os.environ.get(MODEL_DIRS_ENV, "").split(os.pathsep) if d.strip()]
    relative = [d for d in given if not os.path.isabs(d)]
    if relative:  # it would trust a folder of whatever working folder a run is opened from
        import warnings

        warnings.warn(f"${MODEL_DIRS_ENV}: relative entries ignored: {relative}", UserWarning, stacklevel=2)
    return [os.path.realpath(d) for d in [*given, str(default_cache_dir())] if os.path.isabs(d)]


def _packaged_minilm() -> str | None:
    try:
        from textkg.encoders.bert import default_minilm_path

        return os.path.realpath(default_minilm_path())
    except ConfigError:  # pragma: no cover - a dependency of textkg
        return None


def _cached_hub_folder(repo_id: str) -> str | None:
    """The local snapshot folder of a hub id in the Hugging Face cache, or None (nothing is fetched)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except ValueError:  # HFValidationError: an id the hub would refuse ("a/b--c", "a/b.git") is in no cache
        return None
    return str(Path(found).parent) if isinstance(found, str) else None


def _model_folder(value: Any, *, cfg_file: Path | None, field: str, opening: bool = True) -> Any:
    """A ``model_name_or_path`` a run may name, as the value to build the encoder from.

    ``opening``: a run being opened (a hub id must be in the local cache and is replaced by its
    cached folder); ``False`` at training, where the user's own config may download it.
    """
    if value is None:
        return None
    if isinstance(value, str) and "\x00" not in value:
        real = os.path.realpath(value)
        trusted = os.path.isabs(value) and any(os.path.commonpath([real, d]) == d for d in _trusted_model_dirs())
        if trusted or real == _packaged_minilm():
            return value
        if not os.path.isabs(value) and _HUB_ID.match(value) and not Path(value).exists():
            folder = _cached_hub_folder(value) if opening else value
            if folder is not None:
                return folder
            raise ConfigError(
                f"hub model '{value}' is not in the local Hugging Face cache; opening a run never downloads "
                "what it names: download it yourself first if you trust it",
                file=cfg_file,
                field=field,
            )
    raise ConfigError(
        f"the run names the model folder {value!r}: a run's config may name only the packaged MiniLM, a hub "
        f"id in the local cache, a folder in your textkg cache, or one under ${MODEL_DIRS_ENV} (folders you "
        "trust; add its parent there if you trust this one)",
        file=cfg_file,
        field=field,
    )


def _check_device(kwargs: dict, *, cfg_file: Path | None, where: str) -> None:
    """A run's encoder ``device``, when it names one, is a device this machine has (else it fails mid-run)."""
    if "device" not in kwargs:
        return
    import torch

    value = kwargs["device"]
    try:
        device = torch.device(value)
    except (RuntimeError, TypeError, ValueError):
        device = None
    counts = {"cpu": 1, "cuda": torch.cuda.device_count(), "mps": int(torch.backends.mps.is_available())}
    if device is None or (device.index or 0) >= counts.get(device.type, 0):
        raise ConfigError(
            f"the run asks for device {value!r}, which this machine does not have (remove it to use the default)",
            file=cfg_file,
            field=f"{where}.device",
        )


def _check_common(kwargs: dict, *, cfg_file: Path | None, where: str) -> None:
    words = kwargs.get("word_embeddings", WORD_EMBEDDINGS[0])
    if words is not None and words not in WORD_EMBEDDINGS:
        raise ConfigError(
            f"word_embeddings must be {' or '.join(WORD_EMBEDDINGS)} or null in a run (a gensim file is a "
            f"pickle), got {words!r}",
            file=cfg_file,
            field=f"{where}.word_embeddings",
        )


def resolve_run_files(stored: dict, run: Path, cfg_file: Path) -> dict:
    """A copy of a run's stored config whose file names are checked and made absolute.

    Raises:
        ConfigError: a name the run may not use (see the module docstring), naming ``cfg_file``
            and the field.
    """
    out = copy.deepcopy(stored)
    model = out.get("model")
    if not isinstance(model, dict):
        return out
    for where, kwargs in encoder_kwargs(model):
        _check_common(kwargs, cfg_file=cfg_file, where=where)
        _check_device(kwargs, cfg_file=cfg_file, where=where)
        if kwargs.get("cache_dir") is not None:
            raise ConfigError(
                "a run's config may not name a cache folder (a crafted one could hold files that unpickle); "
                "set $TEXTKG_CACHE_DIR instead",
                file=cfg_file,
                field=f"{where}.cache_dir",
            )
        for key in CHAR_LM_KEYS:
            if key in kwargs:
                field = f"{where}.{key}"
                path = _inside_run(kwargs[key], run, suffix=".safetensors", cfg_file=cfg_file, field=field)
                _inside_run(
                    str(Path(kwargs[key]).with_suffix(".json")), run, suffix=".json", cfg_file=cfg_file, field=field
                )
                kwargs[key] = str(path)
        if "model_name_or_path" in kwargs:
            field = f"{where}.model_name_or_path"
            value = kwargs["model_name_or_path"]
            if run_encoder_name(value):
                encoder = model.get("encoder") if where == "model.encoder_kwargs" else kwargs.get("name")
                kwargs["model_name_or_path"] = _run_encoder(value, run, encoder=encoder, cfg_file=cfg_file, field=field)
            else:
                kwargs["model_name_or_path"] = _model_folder(value, cfg_file=cfg_file, field=field)
    module_kwargs = model.get("text_module_kwargs")
    if isinstance(module_kwargs, dict) and "path" in module_kwargs:
        field = "model.text_module_kwargs.path"
        module_kwargs["path"] = str(
            _inside_run(module_kwargs["path"], run, suffix=".pt", cfg_file=cfg_file, field=field)
        )
    return out


def stored_config(config: dict, *, autoencoder_file: str | None) -> tuple[dict, list[tuple[str, str]]]:
    """The config a run records, and the ``(source, name in the run)`` char LMs and adapted encoder folders
    (:func:`adapted_folder`, of a ``bert`` encoder; named :data:`ENCODER_DIR`) to copy for it.

    Nothing is written. ``autoencoder_file``: the run's saved LSTM autoencoder,
    recorded in place of ``text_module_kwargs.path``. ``cache_dir`` is dropped (this machine's).
    """
    out = copy.deepcopy(config)
    copies: list[tuple[str, str]] = []
    model = out.get("model")
    if not isinstance(model, dict):
        return out, copies
    for n, (where, kwargs) in enumerate(encoder_kwargs(model)):
        kwargs.pop("cache_dir", None)
        encoder = model.get("encoder") if where == "model.encoder_kwargs" else kwargs.get("name")
        if encoder in ENCODER_READERS and adapted_folder(kwargs.get("model_name_or_path")):
            name = ENCODER_DIR + (f"-{n}" if n else "")
            copies.append((str(kwargs["model_name_or_path"]), name))
            kwargs["model_name_or_path"] = name
        for key in CHAR_LM_KEYS:
            if kwargs.get(key) is not None:
                name = f"{CHAR_LM_DIR}/{key}" + (f"-{n}" if n else "") + ".safetensors"
                copies.append((str(kwargs[key]), name))
                kwargs[key] = name
    module_kwargs = model.get("text_module_kwargs")
    if isinstance(module_kwargs, dict) and "path" in module_kwargs and autoencoder_file is not None:
        module_kwargs["path"] = autoencoder_file
    return out, copies


def store_run_files(config: dict, run: Path, *, autoencoder_file: str | None) -> dict:
    """The config to write as ``run/config.json`` (:func:`stored_config`), copying its char LMs into the run.

    Call :func:`check_storable` first (before anything is written).
    """
    from textkg.encoders.charlm_files import config_path

    out, copies = stored_config(config, autoencoder_file=autoencoder_file)
    for source, name in copies:
        if run_encoder_name(name):  # an adapted MiniLM: the files the bert encoder reads, nothing else
            (run / name).mkdir(parents=True, exist_ok=True)
            for file in ENCODER_FILES:
                if (Path(source) / file).is_file():
                    shutil.copyfile(Path(source) / file, run / name / file)
            continue
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, run / name)
        shutil.copyfile(config_path(source), config_path(run / name))
    return out


def check_storable(config: dict) -> None:
    """Refuse (before training) a config whose run could not be opened again (module docstring).

    Raises:
        ConfigError: a char LM that is not a stored textkg char LM, custom word embeddings, or a
            model folder that a run may not name.
    """
    model = config.get("model")
    if not isinstance(model, dict):
        return
    from textkg.encoders.charlm_files import check_char_lm_path

    for where, kwargs in encoder_kwargs(model):
        _check_common(kwargs, cfg_file=None, where=where)
        for key in CHAR_LM_KEYS:
            if kwargs.get(key) is not None:
                check_char_lm_path(kwargs[key], f"{where}.{key}")
        if kwargs.get("model_name_or_path") is not None:
            field = f"{where}.model_name_or_path"
            _model_folder(kwargs["model_name_or_path"], cfg_file=None, field=field, opening=False)
