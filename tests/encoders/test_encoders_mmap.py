"""Memory-mapped feature caches: the same features, read from disk, and clear errors for bad files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from textkg.encoders import cached_encode
from textkg.encoders import registry as encoder_registry
from textkg.encoders.base import TextEncoder
from textkg.errors import DataError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp_ind"


class HashEncoder(TextEncoder):
    """Cheap deterministic encoder that counts the texts it encodes."""

    name = "hash"

    def __init__(self, dim: int = 8) -> None:
        self._dim, self.seen, self.device = dim, [], torch.device("cpu")

    dim = property(lambda self: self._dim)
    identity = property(lambda self: f"hash(dim={self._dim})")
    config = property(lambda self: {"dim": self._dim})

    def _encode_batch(self, texts):
        self.seen.extend(texts)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8)[: self._dim] for t in texts]
        return torch.tensor(np.stack(rows), dtype=torch.float32)


def _mapped_files() -> set[str]:
    maps = Path("/proc/self/maps")
    if not maps.exists():
        pytest.skip("needs /proc/self/maps (Linux)")
    return {line.split(maxsplit=5)[5].strip() for line in maps.read_text().splitlines() if len(line.split()) >= 6}


def _folder(tmp_path: Path) -> Path:
    return next((tmp_path / "features").iterdir())


def test_a_fresh_cache_is_mapped_from_its_shard(tmp_path):
    enc = HashEncoder()
    texts = [f"description {i}" for i in range(300)]
    x = cached_encode(enc, texts, cache_dir=tmp_path, mmap=True)
    assert torch.equal(x, enc.encode(texts))
    shard = next(_folder(tmp_path).glob("*.vec.npy"))
    assert str(shard) in _mapped_files()  # the tensor reads the shard file itself
    assert not (_folder(tmp_path) / "views").exists()  # no second copy on disk


def test_an_existing_cache_reopens_mapped_with_identical_features(tmp_path):
    """A cache written without mmap (the format before this option) reads back the same, mapped."""
    enc = HashEncoder()
    texts = [f"t{i}" for i in range(50)]
    for i in range(0, 50, 10):  # five shards, then a request in another order with a duplicate
        cached_encode(enc, texts[i : i + 10], cache_dir=tmp_path)
    wanted = texts[::-1] + [texts[3]]
    held = cached_encode(enc, wanted, cache_dir=tmp_path)
    enc.seen.clear()
    mapped = cached_encode(enc, wanted, cache_dir=tmp_path, mmap=True)
    assert enc.seen == []
    assert torch.equal(mapped, held) and mapped.dtype == torch.float32 and mapped.shape == (51, 8)
    views = list((_folder(tmp_path) / "views").glob("*.npy"))
    assert len(views) == 1 and str(views[0]) in _mapped_files()
    again = cached_encode(enc, wanted, cache_dir=tmp_path, mmap=True)  # the view is reused
    assert torch.equal(again, held) and len(list((_folder(tmp_path) / "views").iterdir())) == 1
    assert not list(tmp_path.rglob("*.tmp"))


def test_writing_into_a_mapped_tensor_never_changes_the_file(tmp_path):
    enc = HashEncoder()
    texts = ["a", "b", "c"]
    x = cached_encode(enc, texts, cache_dir=tmp_path, mmap=True)
    x[0, 0] = 1234.0  # copy-on-write: this process's page only
    assert torch.equal(cached_encode(enc, texts, cache_dir=tmp_path, mmap=True), enc.encode(texts))
    assert torch.equal(cached_encode(enc, texts, cache_dir=tmp_path), enc.encode(texts))


def test_new_rows_join_a_mapped_request(tmp_path):
    enc = HashEncoder()
    cached_encode(enc, ["a", "b"], cache_dir=tmp_path)
    enc.seen.clear()
    x = cached_encode(enc, ["b", "new", "a"], cache_dir=tmp_path, mmap=True)
    assert enc.seen == ["new"] and torch.equal(x, enc.encode(["b", "new", "a"]))
    assert cached_encode(enc, [], cache_dir=tmp_path, mmap=True).shape == (0, 8)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-16])


@pytest.mark.parametrize("mmap", [False, True])
@pytest.mark.parametrize("damage", ["truncate-vectors", "garbage-keys", "wrong-rows"])
def test_a_damaged_shard_names_its_file(tmp_path, mmap, damage):
    enc = HashEncoder()
    cached_encode(enc, ["a", "b", "c"], cache_dir=tmp_path)
    folder = _folder(tmp_path)
    if damage == "truncate-vectors":
        bad = next(folder.glob("*.vec.npy"))
        _truncate(bad)
    elif damage == "garbage-keys":
        bad = next(folder.glob("*.keys.npy"))
        bad.write_bytes(b"not an array")
    else:
        bad = next(folder.glob("*.vec.npy"))
        np.save(bad, np.zeros((2, 8), np.float32))  # three keys, two rows
    with pytest.raises(DataError) as err:
        cached_encode(enc, ["a", "b"], cache_dir=tmp_path, mmap=mmap)
    assert err.value.file == str(bad) and "delete it" in str(err.value)
    assert enc.seen == ["a", "b", "c"]  # nothing was recomputed behind the user's back


@pytest.mark.parametrize("damage", ["truncate", "wrong-shape", "wrong-dtype"])
def test_a_damaged_view_names_its_file(tmp_path, damage):
    enc = HashEncoder()
    texts = ["a", "b", "a"]  # a duplicate: served from a view
    cached_encode(enc, texts, cache_dir=tmp_path, mmap=True)
    view = next((_folder(tmp_path) / "views").glob("*.npy"))
    if damage == "truncate":
        _truncate(view)
    elif damage == "wrong-shape":
        np.save(view, np.zeros((3, 5), np.float32))
    else:
        np.save(view, np.zeros((3, 8), np.float64))
    with pytest.raises(DataError) as err:
        cached_encode(enc, texts, cache_dir=tmp_path, mmap=True)
    assert err.value.file == str(view)


def _register_hash_encoder(monkeypatch):
    """Register HashEncoder as ``mmap-test-hash`` in a copy of the registry, for this test only."""
    monkeypatch.setattr(encoder_registry, "_FROZEN", encoder_registry._FROZEN.copy())
    encoder_registry.register_encoder("mmap-test-hash", f"{__name__}:HashEncoder")


def test_the_pipeline_keeps_mapped_features_mapped(tmp_path, monkeypatch):
    """With TEXTKG_MMAP_FEATURES=1 the model's feature buffer is the mapped tensor, not a copy."""
    from textkg.data import load_dataset, make_split
    from textkg.models import build_model
    from textkg.pipeline.memory import estimate_memory
    from textkg.training.features import MMAP_ENV, entity_texts, mmap_features, text_inputs

    _register_hash_encoder(monkeypatch)
    kg = load_dataset(FIXTURE)
    split = make_split(kg, "inductive")
    cfg = {"interaction": "transe", "dim": 8, "fusion": "text", "encoder": "mmap-test-hash"}

    class Model:
        encoder, encoder_kwargs, text_module = "mmap-test-hash", {}, None

    monkeypatch.setenv(MMAP_ENV, "1")
    assert mmap_features()
    features = text_inputs(Model, entity_texts(kg), cache_dir=tmp_path)
    common = dict(num_entities=kg.num_entities, num_relations=kg.num_relations, seen_entities=split.train_entities)
    shared = build_model(cfg, share_text_inputs=True, **common, **features)
    copied = build_model(cfg, **common, **features)
    x = features["text_features"]
    assert shared.text.text_text_features.data_ptr() == x.data_ptr()
    assert copied.text.text_text_features.data_ptr() != x.data_ptr()
    assert torch.equal(copied.text.text_text_features, x)

    class Cfg:
        class train:  # stands in for RunConfig.train
            batch_size, negatives, num_negatives, eval_batch_size, pool_size = 8, "sampled", 2, 8, 0

        model = None

    est = estimate_memory(shared, Cfg, num_entities=kg.num_entities, private=False, mapped_features=True)
    assert any(k.startswith("pooled text features, memory-mapped") for k in est.components)


def test_a_damaged_cache_stops_the_cli_with_exit_2(tmp_path, monkeypatch, capsys):
    """The project rule: bad input → one line naming the file, exit 2, no traceback."""
    from textkg.cli.main import main

    _register_hash_encoder(monkeypatch)
    monkeypatch.setenv("TEXTKG_CACHE_DIR", str(tmp_path / "cache"))
    from textkg.data import load_dataset

    texts = list(load_dataset(FIXTURE).entity_descriptions)
    cached_encode(HashEncoder(), texts, cache_dir=tmp_path / "cache")
    shard = next(_folder(tmp_path / "cache").glob("*.vec.npy"))
    _truncate(shard)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        f"data:\n  dataset: {FIXTURE}\n  split: inductive\nmodel_name: transe\n"
        "model:\n  interaction: transe\n  dim: 8\n  fusion: text\n  encoder: mmap-test-hash\n"
        "train:\n  epochs: 1\n"
    )
    for mmap in ("0", "1"):
        monkeypatch.setenv("TEXTKG_MMAP_FEATURES", mmap)
        out = tmp_path / f"run{mmap}"
        assert main(["train", "--config", str(cfg), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert str(shard) in err and "unreadable" in err and "Traceback" not in err
        assert not out.exists()


def test_a_run_on_mapped_features_equals_a_run_on_held_ones(tmp_path, monkeypatch):
    from textkg.cli.main import main

    _register_hash_encoder(monkeypatch)
    monkeypatch.setenv("TEXTKG_CACHE_DIR", str(tmp_path / "cache"))
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        f"data:\n  dataset: {FIXTURE}\n  split: inductive\nmodel_name: transe\n"
        "model:\n  interaction: transe\n  dim: 8\n  fusion: text\n  encoder: mmap-test-hash\n"
        "train:\n  epochs: 2\n  batch_size: 16\n"
    )
    metrics = {}
    for mmap in ("0", "1", "1"):  # the second mapped run opens the cache written by the first
        monkeypatch.setenv("TEXTKG_MMAP_FEATURES", mmap)
        out = tmp_path / f"run{len(metrics)}"
        assert main(["train", "--config", str(cfg), "--out", str(out)]) == 0
        metrics[out.name] = _without_timings(json.loads((out / "metrics.json").read_text())["test"])
    assert metrics["run0"] == metrics["run1"] == metrics["run2"]


def _without_timings(block):
    """The metrics less the CPU seconds a block records (``test.link_rerank.cpu_seconds``): those vary run to run."""
    if isinstance(block, dict):
        return {k: _without_timings(v) for k, v in block.items() if k != "cpu_seconds"}
    return block
