"""``textkg encoders adapt``: ontology self-alignment pairs from training terms only."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser, main
from textkg.data import load_dataset, make_split
from textkg.errors import ConfigError
from textkg.training.adapt_encoder import (
    adapt_encoder,
    batches,
    first_stage_negatives,
    is_a_edges,
    training_examples,
    training_pairs,
)


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


# --- is_a pairs (issue 54): child text -> parent text, training terms and statements only ---------------


def _is_a_texts(kg, which):
    """``{(child text, parent text)}`` of the split's ``which`` is_a statements, every anchor form."""
    rel = kg.relations.index("is_a")
    out = set()
    for h, _, t in which[which[:, 1] == rel].tolist():
        for anchor in (kg.entity_descriptions[h].strip(), kg.entity_names[h].strip()):
            out.add((anchor, kg.entity_descriptions[t].strip()))
    return out


def test_is_a_pairs_read_training_statements_between_training_terms_only(hpo_small):
    kg, split = hpo_small
    edges = is_a_edges(kg, split)
    train = set(split.train_entities.tolist())
    rel = kg.relations.index("is_a")
    statements = {(h, t) for h, r, t in split.train.tolist() if r == rel}
    assert len(edges) > 500 and all(c in train and p in train and (c, p) in statements for c, p in edges)
    pairs = training_pairs(kg, split, sources=("is_a",))
    assert len(pairs) > 1000 and set(pairs) <= _is_a_texts(kg, split.train)
    # no held-out term's text, and no held-out statement (a new term under its parent, or a child under it)
    used = {t for pair in pairs for t in pair}
    assert not (used & _held_out_texts(kg, split))
    held_out_edges = _is_a_texts(kg, torch.cat([split.valid, split.test])) - _is_a_texts(kg, split.train)
    assert len(held_out_edges) > 100 and not (set(pairs) & held_out_edges)
    both = training_pairs(kg, split, sources=("names", "is_a"))
    assert set(both) == set(training_pairs(kg, split)) | set(pairs)


def test_hard_negatives_are_the_most_similar_training_non_parent(hpo_small, monkeypatch):
    kg, split = hpo_small
    gen = torch.Generator().manual_seed(0)
    table: dict[str, torch.Tensor] = {}

    def fake_encode(encoder, texts, **kwargs):  # a fixed random vector per text: the oracle below recomputes it
        return torch.stack([table.setdefault(t, torch.randn(8, generator=gen)) for t in texts])

    import textkg.encoders

    monkeypatch.setattr(textkg.encoders, "cached_encode", fake_encode)
    negatives = first_stage_negatives(kg, split)
    edges = is_a_edges(kg, split)
    parents: dict[int, set[int]] = {}
    for c, p in edges:
        parents.setdefault(c, set()).add(p)
    terms = sorted({e for edge in edges for e in edge})
    assert set(negatives) == set(parents)
    train = set(split.train_entities.tolist())

    def vec(e):
        return torch.nn.functional.normalize(table[kg.entity_descriptions[e].strip()], dim=0)

    for child in list(parents)[:50]:
        neg = negatives[child]
        assert neg in train and neg != child and neg not in parents[child]
        allowed = [t for t in terms if t != child and t not in parents[child]]
        best = max(allowed, key=lambda t: float(vec(child) @ vec(t)))
        assert float(vec(child) @ vec(neg)) == pytest.approx(float(vec(child) @ vec(best)), abs=1e-5)
    examples = training_examples(kg, split, sources=("is_a",), negatives=negatives)["is_a"]
    assert examples and all(len(e) == 3 for e in examples)
    held = _held_out_texts(kg, split)
    assert not ({t for e in examples for t in e} & held)


def test_batches_never_repeat_a_text_within_a_batch():
    examples = [("a", "p"), ("b", "p"), ("c", "p"), ("d", "q"), ("p", "r"), ("e", "s", "q"), ("f", "t")]
    made, left_out = batches(examples, 3)
    assert all(len({t for e in batch for t in e}) == sum(map(len, batch)) for batch in made)
    used = [e for batch in made for e in batch]
    assert len(used) == len(set(used)) and left_out == len(examples) - len(used)
    assert all(len(batch) >= 2 for batch in made)
    assert left_out == 2 and {e for e in examples if e not in used} == {("c", "p"), ("p", "r")}  # they share p


def test_adapt_on_is_a_with_hard_negatives_is_bounded_and_keyed_by_content(hpo_small, tmp_path, monkeypatch):
    kg, split = hpo_small
    monkeypatch.setattr(
        "textkg.training.adapt_encoder.first_stage_negatives",
        lambda kg, split, **kw: {c: p for c, p in is_a_edges(kg, split)[::-1]},  # any training term will do here
    )
    kwargs = dict(cache_dir=tmp_path / "cache", split_name="inductive", max_pairs=24, batch_size=8, max_steps=2)
    out = adapt_encoder(kg, split, sources=("is_a",), hard_negatives=True, **kwargs)
    assert out["steps"] == out["planned_steps"] == 2 and out["pairs_by_source"] == {"is_a": 24}
    assert out["hard_negatives"] and out["hard_negative_children"] > 0 and not out["cached"]
    assert (Path(out["out"]) / "model.safetensors").is_file()
    assert adapt_encoder(kg, split, sources=("is_a",), hard_negatives=True, **kwargs)["cached"]
    # another ontology text: another folder (the key holds the training texts' digest)
    used = training_examples(kg, split, sources=("is_a",), max_pairs=24)["is_a"][0][1]  # a parent's text
    term = kg.entity_descriptions.index(used)
    texts = list(kg.entity_descriptions)
    texts[term] = "Renal cyst of an edited kind"
    edited = dataclasses.replace(kg, entity_descriptions=tuple(texts))
    other = adapt_encoder(edited, split, sources=("is_a",), hard_negatives=False, **kwargs)
    same_texts = adapt_encoder(kg, split, sources=("is_a",), hard_negatives=False, **kwargs)
    assert other["texts_sha256"] != same_texts["texts_sha256"] and other["out"] != same_texts["out"]
    with pytest.raises(ConfigError, match="add is_a"):
        adapt_encoder(kg, split, sources=("names",), hard_negatives=True, **kwargs)
    with pytest.raises(ConfigError, match="choose from names, is_a"):
        adapt_encoder(kg, split, sources=("parents",), **kwargs)


def test_frozen_layers_stay_as_packaged_and_key_their_own_folder(hpo_small, tmp_path):
    from safetensors.torch import load_file

    from textkg.encoders.bert import default_minilm_path

    kg, split = hpo_small
    kwargs = dict(cache_dir=tmp_path / "cache", split_name="inductive", max_pairs=16, batch_size=8, max_steps=2)
    frozen = adapt_encoder(kg, split, sources=("is_a",), lr=1e-3, frozen_layers=2, **kwargs)
    trained = adapt_encoder(kg, split, sources=("is_a",), lr=1e-3, **kwargs)
    assert frozen["frozen_layers"] == 2 and "frozen_layers" not in trained
    assert frozen["out"] != trained["out"]  # the setting is part of the cache key
    packaged = load_file(str(Path(default_minilm_path()) / "model.safetensors"))
    after = {
        name: load_file(str(Path(out["out"]) / "model.safetensors")) for name, out in (("f", frozen), ("t", trained))
    }

    def moved(name: str, part: str) -> bool:
        keys = [k for k in packaged if part in k and k.endswith("weight")]
        assert keys
        found = {k.split(part, 1)[1]: v for k, v in after[name].items() if part in k}
        return any(not torch.equal(found[k.split(part, 1)[1]], packaged[k]) for k in keys)

    for part in ("embeddings.", "layer.0.", "layer.1."):  # frozen: as packaged; trained: moved
        assert not moved("f", part) and moved("t", part)
    for part in ("layer.2.", "layer.5."):  # above the frozen ones, both train
        assert moved("f", part) and moved("t", part)
    for bad in (-1, 6):
        with pytest.raises(ConfigError, match="0 to 5"):
            adapt_encoder(kg, split, sources=("is_a",), frozen_layers=bad, **kwargs)


def test_cli_pairs_flag(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("TEXTKG_CACHE_DIR", str(tmp_path / "cache"))
    argv = ["encoders", "adapt", "--dataset", "hpo-small", "--max-pairs", "16", "--batch-size", "8", "--max-steps", "1"]
    assert main([*argv, "--pairs", "is_a,names", "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["sources"] == ["is_a", "names"] and summary["steps"] == 1 and summary["planned_steps"] == 1
    assert main([*argv, "--pairs", "is_a", "--frozen-layers", "3", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["frozen_layers"] == 3
    for bad, said in (
        (["--pairs", "parents"], "unknown pair source 'parents'"),
        (["--hard-negatives"], "add is_a"),
        (["--frozen-layers", "6"], "--frozen-layers"),
    ):
        assert main([*argv, *bad]) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err
