"""A model folder's ``config.json`` naming a backbone (issue 51, item 1, found by the adversary's review).

transformers builds a DETR-like model's backbone with ``AutoBackbone.from_pretrained(config.backbone,
**config.backbone_kwargs)``: the config's own kwargs (``weights_only: false``), none of textkg's safe settings,
so a pickled ``pytorch_model.bin`` in the named folder (or in a subfolder of the model folder) ran. Both are
refused before any loader sees the folder."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from textkg.encoders.model_folder import check_model_folder
from textkg.errors import ConfigError


def _folder(root, config: dict):
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"model_type": "bert", **config}))
    save_file({"w": torch.zeros(1)}, str(root / "model.safetensors"))
    return root


@pytest.mark.parametrize(
    "config",
    [
        {"backbone": "/elsewhere/folder", "use_pretrained_backbone": True},
        {"backbone_kwargs": {"weights_only": False, "out_indices": [1]}},
        {"use_pretrained_backbone": True},
        {"use_timm_backbone": True},
        {"nested": {"weights_only": False}},
    ],
    ids=["backbone", "backbone-kwargs", "pretrained-backbone", "timm", "weights-only"],
)
def test_a_config_that_loads_a_backbone_is_refused(tmp_path, config):
    folder = _folder(tmp_path / "model", config)
    with pytest.raises(ConfigError, match="config.json"):
        check_model_folder(str(folder))


def test_a_subfolder_with_only_pickled_weights_is_refused(tmp_path):
    folder = _folder(tmp_path / "model", {})
    (folder / "bb").mkdir()
    (folder / "bb" / "pytorch_model.bin").write_bytes(b"\x80\x04N.")  # a pickle
    with pytest.raises(ConfigError, match="only pickled weights"):
        check_model_folder(str(folder))


def test_an_honest_config_with_the_keys_off_passes(tmp_path):
    folder = _folder(tmp_path / "model", {"backbone": None, "use_pretrained_backbone": False, "backbone_kwargs": {}})
    assert check_model_folder(str(folder)) == folder
