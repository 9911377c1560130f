"""A local model folder's cache identity is its content, not its path (issue 54).

A run keeps a copy of its adapted MiniLM (``RUN/encoder``); before, the features cache was keyed by the
folder's path, so ``textkg place RUN`` right after training encoded every existing term's description again
(36,378 texts, minutes on 2 cores) although the training run had cached them under the adapted folder.
"""

import shutil
from pathlib import Path

import pytest
import torch

from textkg.encoders import cached_encode, get_encoder
from textkg.encoders.bert import ENCODING_FILES, default_minilm_path, folder_content_identity


def _copy(to):
    src = Path(default_minilm_path())
    to.mkdir()
    for name in (*ENCODING_FILES, "model.safetensors"):
        if (src / name).is_file():
            shutil.copyfile(src / name, to / name)
    return to


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("folders")
    return _copy(root / "adapted"), _copy(root / "run-encoder")


def test_two_copies_share_an_identity_and_the_cached_rows(folders, tmp_path, monkeypatch):
    a, b = (get_encoder("bert", model_name_or_path=str(f), pooling="mean") for f in folders)
    assert a.identity == b.identity and str(folders[0]) not in a.identity
    texts = ["Abnormal enlargement of the kidney.", "Seizures."]
    first = cached_encode(a, texts, cache_dir=tmp_path)

    def refuse(*args, **kwargs):
        raise AssertionError("encoded again")

    monkeypatch.setattr(b, "_encode_batch", refuse)
    torch.testing.assert_close(cached_encode(b, texts, cache_dir=tmp_path), first)
    assert len(list((tmp_path / "features").iterdir())) == 1


@pytest.mark.parametrize("name", ["vocab.txt", "tokenizer_config.json", "config.json"])
def test_another_tokenizer_or_setting_is_another_identity(folders, tmp_path, name):
    changed = _copy(tmp_path / "changed")
    with open(changed / name, "a", encoding="utf-8") as f:
        f.write("\n" if name.endswith(".json") else "zzzunusedword\n")
    assert folder_content_identity(str(changed)) != folder_content_identity(str(folders[0]))


def test_other_weights_are_another_identity(folders, tmp_path):
    changed = _copy(tmp_path / "changed")
    data = bytearray((changed / "model.safetensors").read_bytes())
    data[-1] ^= 1  # the last byte of a tensor
    (changed / "model.safetensors").write_bytes(bytes(data))
    a = get_encoder("bert", model_name_or_path=str(folders[0]), pooling="mean")
    b = get_encoder("bert", model_name_or_path=str(changed), pooling="mean")
    assert a.identity != b.identity
    assert folder_content_identity(str(changed)) != folder_content_identity(str(folders[0]))  # the content alone too


def test_files_the_encoder_does_not_read_leave_it_alone(folders, tmp_path):
    changed = _copy(tmp_path / "changed")
    (changed / "textkg_adapt.json").write_text("{}", encoding="utf-8")
    (changed / "README.md").write_text("notes", encoding="utf-8")
    assert folder_content_identity(str(changed)) == folder_content_identity(str(folders[0]))


def test_a_hub_name_or_a_folder_without_one_weights_file_keeps_its_name(tmp_path):
    assert folder_content_identity("sentence-transformers/all-MiniLM-L6-v2") is None
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    assert folder_content_identity(str(tmp_path)) is None
