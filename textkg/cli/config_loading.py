"""Fill the frozen config dataclasses from defaults, a preset, a config file and flags.

Precedence (later wins): dataclass defaults < model preset < ``--config`` file < CLI flags.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from textkg.cli.flags import TRAIN_FLAGS
from textkg.errors import ConfigError
from textkg.pipeline.job import MIN_STEPS
from textkg.training.config import DataConfig, PrivacyConfig, RunConfig, TrainConfig

#: ``textkg train``'s ``train.min_steps`` when nothing gives ``epochs`` (issue 37: a small ontology got 35 steps);
#: the same floor under which a finished run is warned of too few steps.
DEFAULT_MIN_STEPS = MIN_STEPS

SECTIONS = {"data": DataConfig, "train": TrainConfig, "privacy": PrivacyConfig}
#: CLI flag (argparse dest) → (section, field), read from each flag's one declaration (:data:`TRAIN_FLAGS`)
FLAG_FIELDS = {f.dest: f.section_field for f in TRAIN_FLAGS if f.section_field[0] in SECTIONS}
#: CLI flag → ModelConfig field (override the preset)
MODEL_FLAGS = {f.dest: f.section_field[1] for f in TRAIN_FLAGS if f.section_field[0] == "model"}


def default_model_name() -> str:
    """The preset a run gets when neither ``--model`` nor the config file names one (:class:`RunConfig`'s)."""
    return next(f.default for f in dataclasses.fields(RunConfig) if f.name == "model_name")  # type: ignore[return-value]


def read_config_file(path: str) -> dict:
    """Parse a YAML or JSON config; errors name the file and line."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError("config file not found", file=path)
    text = p.read_text(encoding="utf-8")
    try:
        if p.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(exc.msg, file=path, line=exc.lineno) from None
    except Exception as exc:  # yaml.YAMLError
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            str(getattr(exc, "problem", exc)), file=path, line=None if mark is None else mark.line + 1
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("top level must be a mapping", file=path, line=1)
    allowed = set(SECTIONS) | {"model", "model_name", "textkg_version"}
    for key in data:
        if key not in allowed:
            raise ConfigError(
                f"unknown section; expected one of {', '.join(sorted(allowed))}", file=path, field=str(key)
            )
    for section, cls in SECTIONS.items():
        names = {f.name for f in dataclasses.fields(cls)}
        for key in data.get(section) or {}:
            if key not in names:
                raise ConfigError(
                    f"unknown key; {section} takes {', '.join(sorted(names))}", file=path, field=f"{section}.{key}"
                )
    return data


#: encoders whose weights ``--encoder-model`` replaces
_TRANSFORMER_ENCODERS = ("bert", "sentence-transformers")


def _with_encoder_model(encoder: str | None, kwargs: dict, path: str) -> dict:
    """``kwargs`` with ``model_name_or_path=path`` for a transformer encoder, or for every transformer
    part of a ``concat`` encoder."""
    if not Path(path).is_dir():
        raise ConfigError("not a folder (give the one textkg encoders adapt printed)", file=path, field="encoder_model")
    if encoder in _TRANSFORMER_ENCODERS:
        return {**kwargs, "model_name_or_path": str(path)}
    if encoder == "concat":
        parts = [
            {**part, "model_name_or_path": str(path)} if part.get("name") in _TRANSFORMER_ENCODERS else part
            for part in kwargs.get("parts", [])
        ]
        if parts != kwargs.get("parts", []):
            return {**kwargs, "parts": parts}
    raise ConfigError(
        f"--encoder-model needs a bert or sentence-transformers encoder; the model's encoder is {encoder!r}",
        field="encoder_model",
    )


def build_run_config(args) -> RunConfig:
    """Combine defaults, preset, ``--config`` and flags into one :class:`RunConfig`.

    Precedence, lowest first: the dataclass defaults, the preset's training
    settings (:data:`textkg.models.presets.PRESET_TRAIN_DEFAULTS`), the config
    file, the flags.
    """
    from textkg.models.config import ModelConfig
    from textkg.models.presets import get_preset, preset_train_defaults

    file_data = read_config_file(args.config) if getattr(args, "config", None) else {}
    sections = {name: dict(file_data.get(name) or {}) for name in SECTIONS}
    for dest, (section, fld) in FLAG_FIELDS.items():
        value = getattr(args, dest, None)
        if value is not None:
            sections[section][fld] = value
    for listed in ("confidential_relations", "unit_targets"):  # comma-separated names on the command line
        conf = sections["privacy"].get(listed)
        if isinstance(conf, str):
            sections["privacy"][listed] = tuple(r for r in conf.split(",") if r)
        elif isinstance(conf, list) or (conf is not None and listed == "confidential_relations"):
            sections["privacy"][listed] = tuple(conf)
    model_name = getattr(args, "model", None) or file_data.get("model_name") or default_model_name()
    model_cfg = get_preset(model_name)
    private = sections["privacy"].get("mode", "none") in ("full", "confidential")
    for key, value in preset_train_defaults(model_name, private=private).items():
        sections["train"].setdefault(key, value)
    if getattr(args, "command", None) == "train":  # no epochs asked for: scale them to the graph's size
        sections["train"].setdefault("min_steps", 0 if "epochs" in sections["train"] else DEFAULT_MIN_STEPS)
    overrides = dict(file_data.get("model") or {})
    for dest, fld in MODEL_FLAGS.items():
        value = getattr(args, dest, None)
        if value is not None:
            overrides[fld] = value
    if getattr(args, "autoencoder", None) is not None:  # textkg encoders pretrain-aec output
        overrides["text_module_kwargs"] = {"path": args.autoencoder}
    if overrides.get("encoder") not in (None, model_cfg.encoder) and "encoder_kwargs" not in overrides:
        overrides["encoder_kwargs"] = {}  # the preset's kwargs belong to the encoder it named
    if getattr(args, "encoder_model", None) is not None:
        overrides["encoder_kwargs"] = _with_encoder_model(
            overrides.get("encoder", model_cfg.encoder),
            dict(overrides.get("encoder_kwargs", model_cfg.encoder_kwargs)),
            args.encoder_model,
        )
    if overrides:
        merged = {**model_cfg.to_dict(), **overrides}
        model_cfg = ModelConfig.from_dict(merged)
    if getattr(args, "autoencoder", None) is not None and model_cfg.text_module != "lstm-ae":
        raise ConfigError(
            f"--autoencoder is for LSTM-autoencoder models (torchcoder-aec); model "
            f"{model_name!r} has text module {model_cfg.text_module!r}",
            field="autoencoder",
        )
    try:
        return RunConfig(
            data=DataConfig(**sections["data"]),
            model=model_cfg,
            train=TrainConfig(**sections["train"]),
            privacy=PrivacyConfig(**sections["privacy"]),
            model_name=model_name,
        )
    except TypeError as exc:
        raise ConfigError(str(exc), file=getattr(args, "config", None)) from None
    except ConfigError as exc:
        source = getattr(args, "config", None)
        if source is None or exc.file is not None:
            raise
        raise ConfigError(exc.message, file=source, field=exc.field) from None
