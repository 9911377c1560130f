"""A local model folder's cache identity is what it loads, not its path (issue 54).

A run keeps a copy of its adapted MiniLM (``RUN/encoder``); before, the features cache was keyed by the
folder's path, so ``textkg place RUN`` right after training encoded every existing term's description again
(36,378 texts, minutes on 2 cores) although the training run had cached them under the adapted folder. The
identity is now computed from the loaded model and tokenizer (:func:`textkg.encoders.bert.loaded_content_identity`).
"""

import json
import shutil
from pathlib import Path

import pytest
import torch

from textkg.encoders import cached_encode, get_encoder
from textkg.encoders.bert import default_minilm_path

FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
FILES += ("vocab.txt",)
TEXTS = ["Abnormal enlargement of the kidney.", "Seizures."]


def _copy(to: Path) -> Path:
    src = Path(default_minilm_path())
    to.mkdir()
    for name in FILES:
        shutil.copyfile(src / name, to / name)
    return to


def _identity(folder: Path) -> str:
    return get_encoder("bert", model_name_or_path=str(folder), pooling="mean").identity


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("folders")
    return _copy(root / "adapted"), _copy(root / "run-encoder")


def test_two_copies_share_an_identity_and_the_cached_rows(folders, tmp_path, monkeypatch):
    a, b = (get_encoder("bert", model_name_or_path=str(f), pooling="mean") for f in folders)
    assert a.identity == b.identity and str(folders[0]) not in a.identity and "content:" in a.identity
    first = cached_encode(a, TEXTS, cache_dir=tmp_path)

    def refuse(*args, **kwargs):
        raise AssertionError("encoded again")

    monkeypatch.setattr(b, "_encode_batch", refuse)
    torch.testing.assert_close(cached_encode(b, TEXTS, cache_dir=tmp_path), first)
    assert len(list((tmp_path / "features").iterdir())) == 1


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def _swap_two_words(data: dict) -> None:
    vocab = data["model"]["vocab"]
    vocab["kidney"], vocab["liver"] = vocab["liver"], vocab["kidney"]


EDITS = {
    "tokenizer.json": _swap_two_words,
    "tokenizer_config.json": lambda data: data.update(do_lower_case=False),
    "config.json": lambda data: data.update(layer_norm_eps=1e-3),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_another_tokenizer_or_setting_is_another_identity_and_other_features(folders, tmp_path, name):
    changed = _copy(tmp_path / "changed")
    _edit_json(changed / name, EDITS[name])
    a = get_encoder("bert", model_name_or_path=str(folders[0]), pooling="mean")
    b = get_encoder("bert", model_name_or_path=str(changed), pooling="mean")
    assert a.identity != b.identity
    assert not torch.allclose(a.encode(TEXTS), b.encode(TEXTS))  # the identity separates what differs


def test_other_weights_are_another_identity(folders, tmp_path):
    from safetensors.torch import load_file, save_file

    changed = _copy(tmp_path / "changed")
    weights = load_file(changed / "model.safetensors")
    weights["embeddings.word_embeddings.weight"][2000, 0] += 1e-3
    save_file(weights, changed / "model.safetensors", metadata={"format": "pt"})
    assert _identity(changed) != _identity(folders[0])


def test_sharded_weights_are_read_for_the_identity(folders, tmp_path):
    """A folder with its weights in shards (``model.safetensors.index.json``) and a ``pytorch_model.bin`` beside
    them, as a full hub snapshot holds it: the shards it loads count (an adversary review found that 23e5cde's file
    hash read the ``.bin``, which transformers never opens under ``use_safetensors``, and not the shards)."""
    from transformers import AutoModel

    def sharded(to: Path, scale: float) -> Path:
        model = AutoModel.from_pretrained(str(folders[0]))
        with torch.no_grad():
            model.embeddings.word_embeddings.weight.mul_(scale)
        model.save_pretrained(str(to), max_shard_size="40MB", safe_serialization=True)
        for name in FILES[2:]:
            shutil.copyfile(folders[0] / name, to / name)
        assert (to / "model.safetensors.index.json").is_file() and not (to / "model.safetensors").exists()
        (to / "pytorch_model.bin").write_bytes(b"the same bytes in both folders, never loaded")  # a full snapshot's
        return to

    legit, crafted = sharded(tmp_path / "legit", 1.0), sharded(tmp_path / "crafted", -3.0)
    assert _identity(legit) != _identity(crafted)


def test_files_the_encoder_does_not_read_leave_it_alone(folders, tmp_path):
    """The adaptation's summary, notes, or a tokenizer file of another family (never opened by a BERT tokenizer,
    even a link to a file that cannot be read to its end): the same identity, no error, nothing read."""
    changed = _copy(tmp_path / "changed")
    (changed / "textkg_adapt.json").write_text("{}", encoding="utf-8")
    (changed / "README.md").write_text("notes", encoding="utf-8")
    (changed / "merges.txt").symlink_to("/proc/self/mem")
    assert _identity(changed) == _identity(folders[0])


def test_weights_written_after_the_load_change_neither_the_model_nor_its_identity(tmp_path):
    """The parameters are the encoder's own memory, not a map of the weights file: rewriting the file in place
    after the load (same size) changes nothing the encoder computes or is named by."""
    from safetensors.torch import load_file, save_file

    folder = _copy(tmp_path / "model")
    encoder = get_encoder("bert", model_name_or_path=str(folder), pooling="mean")
    before, identity = encoder.encode(TEXTS), encoder.identity
    weights = load_file(folder / "model.safetensors")
    weights["embeddings.word_embeddings.weight"] *= -3
    save_file(weights, tmp_path / "scaled.safetensors", metadata={"format": "pt"})
    data = (tmp_path / "scaled.safetensors").read_bytes()
    assert len(data) == (folder / "model.safetensors").stat().st_size
    with open(folder / "model.safetensors", "r+b") as f:  # in place: the same inode
        f.write(data)
    torch.testing.assert_close(encoder.encode(TEXTS), before)
    assert encoder.identity == identity


def test_the_packaged_model_keeps_its_name():
    assert get_encoder("bert", pooling="mean").identity.startswith("bert(model=minilm-l6-v2(packaged),weights=sha256:")
