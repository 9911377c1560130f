"""Issue 36, item 1 (the writer's side): textkg's char LMs are tensors + JSON, never a pickle.

A flair run copies its char LMs into the run and names them relative to it, so that the run opens
(and predicts) after being moved, while an old ``.pt`` char LM is refused with how to retrain.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from security_helpers import TINY, write_pickle_bomb

from textkg.cli.main import main
from textkg.encoders.charlm import train_char_lm
from textkg.encoders.charlm_files import load_char_lm
from textkg.errors import ConfigError

TEXTS = ["Abnormal enlargement of the kidney.", "Recurrent seizures in infancy.", "Short stature."] * 4


@pytest.fixture(scope="module")
def lms(tmp_path_factory):
    root = tmp_path_factory.mktemp("lms")
    return tuple(
        train_char_lm(TEXTS, direction=d, out_dir=root / d, hidden_size=8, embedding_size=4, epochs=1, seed=0)
        for d in ("forward", "backward")
    )


def test_training_writes_no_pickle(lms):
    for path in lms:
        assert path.suffix == ".safetensors" and path.with_suffix(".json").is_file()
        assert not list(path.parent.glob("*.pt")), "flair's pickled best-lm.pt / epoch checkpoints were left"


def test_rebuilt_model_matches_the_stored_tensors(lms):
    from safetensors.torch import load_file

    model = load_char_lm(lms[0], has_decoder=True)
    stored = load_file(str(lms[0]))
    assert set(stored) == set(model.state_dict())
    for key, value in stored.items():
        assert torch.equal(model.state_dict()[key].cpu(), value)
    assert model.is_forward_lm and not load_char_lm(lms[1]).is_forward_lm


def test_an_old_pickled_char_lm_is_refused_unread(tmp_path):
    marker = tmp_path / "PWNED"
    bomb = write_pickle_bomb(tmp_path / "best-lm.pt", marker)
    with pytest.raises(ConfigError, match="textkg charlm train"):
        load_char_lm(bomb)
    assert not marker.exists()


@pytest.mark.parametrize(
    "edit, field",
    [({"hidden_size": 10**9}, "hidden_size"), ({"dictionary": []}, "dictionary"), ({"format": "x"}, "format")],
)
def test_a_crafted_config_is_refused_before_anything_is_built(lms, tmp_path, edit, field):
    for suffix in (".safetensors", ".json"):
        shutil.copy(lms[0].with_suffix(suffix), tmp_path / f"lm{suffix}")
    cfg = json.loads((tmp_path / "lm.json").read_text())
    (tmp_path / "lm.json").write_text(json.dumps({**cfg, **edit}))
    with pytest.raises(ConfigError, match=field):
        load_char_lm(tmp_path / "lm.safetensors")


def test_a_flair_run_carries_its_char_lms_and_opens_after_a_move(lms, tmp_path, capsys):
    given = tmp_path / "given"
    shutil.copytree(lms[0].parent.parent, given)  # the user's own char LMs, deleted after training
    fwd, bwd = (given / p.parent.name / p.name for p in lms)
    config = tmp_path / "flair.json"
    kwargs = {"forward_model": str(fwd), "backward_model": str(bwd), "word_embeddings": None}
    config.write_text(json.dumps({"model": {"encoder": "flair", "fusion": "text", "encoder_kwargs": kwargs}}))
    argv = ["train", "--dataset", str(TINY), "--split", "transductive", "--model", "transe", "--config", str(config)]
    out = tmp_path / "run"
    flags = ["--dim", "8", "--epochs", "1", "--batch-size", "32", "--no-progress", "--out", str(out)]
    assert main([*argv, *flags]) == 0
    stored = json.loads((out / "config.json").read_text())["model"]["encoder_kwargs"]
    assert stored["forward_model"] == "char_lms/forward_model.safetensors"
    moved = tmp_path / "elsewhere"
    shutil.move(out, moved)
    shutil.rmtree(given)  # the run needs nothing outside it
    capsys.readouterr()
    assert main(["predict", str(moved), "--description", "Abnormal enlargement of the kidney."]) == 0
    assert json.loads(capsys.readouterr().out)


def test_the_recorded_config_names_the_runs_own_copies():
    """What a run records (and what ``textkg sweep`` compares a finished point with)."""
    from textkg.pipeline.run_files import stored_config

    kwargs = {"forward_model": "/a/fwd.safetensors", "backward_model": "/b/bwd.safetensors", "cache_dir": "/c"}
    recorded, copies = stored_config({"model": {"encoder_kwargs": kwargs}}, autoencoder_file=None)
    assert recorded["model"]["encoder_kwargs"] == {
        "forward_model": "char_lms/forward_model.safetensors",
        "backward_model": "char_lms/backward_model.safetensors",
    }
    assert copies == [
        ("/a/fwd.safetensors", "char_lms/forward_model.safetensors"),
        ("/b/bwd.safetensors", "char_lms/backward_model.safetensors"),
    ]
