"""``textkg encoders adapt``: ontology self-alignment pairs from training terms only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser, main
from textkg.data import load_dataset, make_split
from textkg.errors import ConfigError
from textkg.training.adapt_encoder import adapt_encoder, training_pairs


@pytest.fixture(scope="module")
def hpo_small():
    kg = load_dataset("hpo-small")
    return kg, make_split(kg, "inductive")


def _held_out_texts(kg, split) -> set[str]:
    train = set(split.train_entities.tolist())
    held = [e for e in range(kg.num_entities) if e not in train]
    assert held
    from textkg.data.hpo import parse_obo, source_paths

    terms = parse_obo(source_paths()["hp.obo"])
    texts = set()
    for e in held:
        texts |= {kg.entity_names[e], kg.entity_descriptions[e]}
        term = terms.get(kg.entities[e])
        if term is not None:
            texts |= {term.definition, *term.synonyms} - {""}
    train_texts = {kg.entity_names[e] for e in train} | {kg.entity_descriptions[e] for e in train}
    for e in train:  # a text a training term shares (e.g. a common synonym) is not held out
        term = terms.get(kg.entities[e])
        if term is not None:
            train_texts |= {term.definition, *term.synonyms}
    return texts - train_texts


def test_no_held_out_term_text_is_used(hpo_small):
    kg, split = hpo_small
    pairs = training_pairs(kg, split)
    assert len(pairs) > 1000
    used = {t for pair in pairs for t in pair}
    held = _held_out_texts(kg, split)
    assert len(held) > 50 and not (used & held)
    # names of training terms, paired with their definitions and synonyms
    names = {kg.entity_names[e] for e in split.train_entities.tolist()}
    assert all(a in names for a, _ in pairs)


def test_adapt_trains_caches_and_feeds_train(hpo_small, tmp_path, monkeypatch):
    kg, split = hpo_small
    monkeypatch.setenv("TEXTKG_CACHE_DIR", str(tmp_path / "cache"))
    out = adapt_encoder(kg, split, cache_dir=tmp_path / "cache", split_name="inductive", max_pairs=64, batch_size=16)
    assert out["steps"] == out["planned_steps"] == 4 and not out["cached"]
    folder = Path(out["out"])
    assert (folder / "model.safetensors").is_file() and (folder / "modules.json").is_file()
    again = adapt_encoder(kg, split, cache_dir=tmp_path / "cache", split_name="inductive", max_pairs=64, batch_size=16)
    assert again["cached"] and again["out"] == out["out"]
    # --encoder-model puts it into the preset's transformer encoder (and every transformer part of concat)
    args = ["train", "--dataset", "hpo-small", "--model", "fused-transe", "--encoder-model", str(folder)]
    cfg = build_run_config(build_parser().parse_args(args))
    assert cfg.model.encoder_kwargs["model_name_or_path"] == str(folder)
    assert cfg.model.encoder_kwargs["pooling"] == "mean"  # the preset's other settings stay
    args[args.index("fused-transe")] = "cpu-best"
    cfg = build_run_config(build_parser().parse_args(args))
    parts = cfg.model.encoder_kwargs["parts"]
    assert [p.get("model_name_or_path") for p in parts] == [str(folder), str(folder), None]
    from textkg.encoders import get_encoder

    enc = get_encoder("bert", model_name_or_path=str(folder), pooling="mean")
    assert enc.encode(["Renal cyst"]).shape == (1, 384)


def test_encoder_model_errors(tmp_path, capsys):
    args = ["train", "--dataset", "hpo-small", "--model", "transe", "--encoder-model", str(tmp_path)]
    with pytest.raises(ConfigError, match="needs a bert or sentence-transformers encoder"):
        build_run_config(build_parser().parse_args(args))
    assert main([*args[:-1], str(tmp_path / "missing"), "--out", str(tmp_path / "r")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_cli_prints_json_only(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("TEXTKG_CACHE_DIR", str(tmp_path / "cache"))
    argv = ["encoders", "adapt", "--dataset", "hpo-small", "--max-pairs", "32", "--batch-size", "16"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)  # the trainer's chatter goes to stderr
    assert summary["pairs"] == 32 and summary["steps"] == 2 and Path(summary["out"]).is_dir()
