"""``textkg encoders cross-encoder``: a cross-encoder fine-tuned on training ``is_a`` groups only (issue 54)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
import random
import shutil
from pathlib import Path

import pytest
import torch

from textkg.cli.main import main
from textkg.data import load_dataset, make_split
from textkg.encoders import cross_encoder
from textkg.encoders.cross_encoder import CrossScorer, initial_cross_model, load_cross_encoder
from textkg.errors import ConfigError
from textkg.training.adapt_cross import adapt_cross_encoder, cross_training_groups, group_loss
from textkg.training.adapt_encoder import budget_train, is_a_edges

PLANTED = "zqxwvplanted"


@pytest.fixture(scope="module")
def hpo_small():
    kg = load_dataset("hpo-small")
    return kg, make_split(kg, "inductive")


def _vector(text: str) -> torch.Tensor:
    """A fixed random vector per text, the same in every call and process."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return torch.randn(8, generator=torch.Generator().manual_seed(seed))


def _fake_encode(encoder, texts, **kwargs):
    return torch.stack([_vector(t) for t in texts])


@pytest.fixture(autouse=True)
def fake_features(monkeypatch):
    """:func:`_vector` per text for the nearest-term pool (the packaged MiniLM is slow here); with ``__first__`` set,
    a text holding the planted word gets that vector, so it would rank first if it were a candidate."""
    table: dict[str, torch.Tensor] = {}

    def fake_encode(encoder, texts, **kwargs):
        first = table.get("__first__")
        return torch.stack([first if first is not None and PLANTED in t else table.get(t, _vector(t)) for t in texts])

    import textkg.encoders

    monkeypatch.setattr(textkg.encoders, "cached_encode", fake_encode)
    return table


def _planted(kg, split):
    """The graph with the planted word in every held-out term's name and description."""
    train = set(split.train_entities.tolist())
    names, descs = list(kg.entity_names), list(kg.entity_descriptions)
    for e in range(kg.num_entities):
        if e not in train:
            names[e] = f"{names[e]} {PLANTED}"
            descs[e] = f"{descs[e]} {PLANTED}"
    return dataclasses.replace(kg, entity_names=tuple(names), entity_descriptions=tuple(descs))


def test_groups_never_hold_a_held_out_term(hpo_small, fake_features):
    kg, split = hpo_small
    planted = _planted(kg, split)
    child = is_a_edges(kg, split)[0][0]
    fake_features["__first__"] = torch.randn(8, generator=torch.Generator().manual_seed(1))
    fake_features[planted.entity_descriptions[child].strip()] = fake_features["__first__"]
    groups = cross_training_groups(planted, split, negatives_per_group=7)
    assert len(groups) > 1000
    assert not [t for anchor, texts in groups for t in (anchor, *texts) if PLANTED in t]
    # and the held-out terms are really in the graph: their statements touch training terms
    held = {e for e in range(kg.num_entities) if e not in set(split.train_entities.tolist())}
    rel = kg.relations.index("is_a")
    statements = torch.cat([split.train, split.valid, split.test])
    assert any(h in held or t in held for h, r, t in statements.tolist() if r == rel)


def test_groups_put_the_parent_first_and_no_parent_or_far_ancestor_among_the_negatives(hpo_small):
    kg, split = hpo_small
    edges = is_a_edges(kg, split)
    parents: dict[int, set[int]] = {}
    for c, p in edges:
        parents.setdefault(c, set()).add(p)

    def ancestors(c, depth):  # terms exactly `depth` levels up, and all above
        level = {c}
        for _ in range(depth):
            level = set().union(*(parents.get(t, set()) for t in level))
        return level

    desc = {e: kg.entity_descriptions[e].strip() for edge in edges for e in edge}
    by_anchor: dict[str, set[int]] = {}
    for c in parents:
        for text in (desc[c], kg.entity_names[c].strip()):
            by_anchor.setdefault(text, set()).add(c)
    groups = cross_training_groups(kg, split, negatives_per_group=7, seed=3)
    assert groups == cross_training_groups(kg, split, negatives_per_group=7, seed=3)  # deterministic
    assert groups != cross_training_groups(kg, split, negatives_per_group=7, seed=4)
    names = sum(1 for anchor, _ in groups if all(kg.entity_names[c].strip() == anchor for c in by_anchor[anchor]))
    assert 0.15 < names / len(groups) < 0.35  # about a third of the edges also give a name-anchored group
    for anchor, (positive, *negatives) in groups:
        assert 1 <= len(negatives) <= 7 and len(set(negatives)) == len(negatives)
        children = [c for c in by_anchor[anchor] if any(desc[p] == positive for p in parents[c])]
        assert children  # the positive is a parent of the anchor's term
        for c in children:
            forbidden = {desc[c], kg.entity_names[c].strip(), *(desc[p] for p in parents[c])}
            far = set().union(*(ancestors(c, d) for d in range(3, 30))) - ancestors(c, 2) - ancestors(c, 1)
            forbidden |= {desc[a] for a in far if a in desc}
            assert not forbidden & set(negatives)


@pytest.fixture(scope="module")
def trained(hpo_small, tmp_path_factory):
    kg, split = hpo_small
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("textkg.encoders.cached_encode", _fake_encode)
        kwargs = dict(cache_dir=cache, split_name="inductive", negatives_per_group=3, groups_per_step=2, max_steps=2)
        return adapt_cross_encoder(kg, split, **kwargs), kwargs


def test_a_two_step_run_writes_a_loadable_cached_folder(hpo_small, trained):
    kg, split = hpo_small
    out, kwargs = trained
    assert out["steps"] == out["planned_steps"] == 2 and not out["cached"] and out["stopped"] is None
    folder = Path(out["out"])
    assert (folder / "model.safetensors").is_file() and not list(folder.glob("*.bin"))
    assert json.loads((folder / "textkg_cross.json").read_text())["digest"] == out["digest"]
    scorer = load_cross_encoder(folder)
    assert scorer.digest == out["digest"]
    pairs = [("Renal cyst", "Abnormal renal morphology"), ("Seizure", "Abnormality of the nervous system")] * 3
    pairs += [("x " * 300, "Long text"), ("é—漢字 🧬", "")]
    scores = scorer(pairs)
    assert scores.dtype == torch.float32 and scores.shape == (len(pairs),) and torch.isfinite(scores).all()
    # input order, whatever the batching (length-sorted inside the call)
    reordered = scorer(pairs[::-1], batch_size=3).flip(0)
    assert torch.allclose(scores, reordered, atol=1e-4)
    assert scorer([]).shape == (0,)
    assert adapt_cross_encoder(kg, split, **kwargs)["cached"]


def _copy(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "model"
    shutil.copytree(folder, target)
    return target


def _edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


class _Marker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def test_load_refuses_pickles_code_other_heads_and_huge_weights(trained, tmp_path, monkeypatch):
    out, _ = trained
    folder = _copy(Path(out["out"]), tmp_path)
    marker = tmp_path / "pickle-ran"
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Marker(marker)))
    with pytest.raises(ConfigError, match="pickled weights"):
        load_cross_encoder(folder)
    assert not marker.exists()
    cases = [
        ({"id2label": {"0": "no", "1": "yes"}, "num_labels": 2}, "num_labels"),
        ({"auto_map": {"AutoModelForSequenceClassification": "modeling.Evil"}}, "auto_map"),
        ({"model_type": "gpt2"}, "model_type"),
        ({"architectures": ["BertForMaskedLM"]}, "architectures"),
    ]
    for changes, field in cases:
        shutil.rmtree(folder)
        folder = _copy(Path(out["out"]), tmp_path)
        _edit_config(folder, **changes)
        with pytest.raises(ConfigError) as err:
            load_cross_encoder(folder)
        assert err.value.field == field and err.value.file.endswith("config.json")
    shutil.rmtree(folder)
    folder = _copy(Path(out["out"]), tmp_path)
    monkeypatch.setattr(cross_encoder, "MAX_WEIGHTS_BYTES", 1024)
    with pytest.raises(ConfigError, match="over"):
        load_cross_encoder(folder)
    with pytest.raises(ConfigError, match="not a folder"):
        load_cross_encoder(tmp_path / "missing")


def test_the_group_loss_falls_on_a_tiny_overfit_case():
    groups = [
        ("Renal cyst", ["Abnormal renal morphology", "Abnormal heart morphology", "Seizure", "Short stature"]),
        ("Atrial septal defect", ["Abnormal cardiac septum morphology", "Abnormal renal morphology", "Seizure"]),
        ("Focal seizure", ["Seizure", "Abnormal heart morphology", "Short stature", "Hearing impairment"]),
        ("Conductive hearing impairment", ["Hearing impairment", "Seizure", "Abnormal renal morphology"]),
    ]
    tokenizer, model = initial_cross_model(0)
    model.train()
    scorer = CrossScorer(tokenizer, model, digest="test")
    params = [p for p in model.parameters() if p.requires_grad]

    def loss(batch):
        return group_loss(scorer, batch)[0]

    steps, losses, _ = budget_train(
        params, [groups], loss, random.Random(0), planned=30, lr=1e-4, budget_s=120, progress=False
    )
    assert steps == 30
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5
    model.eval()
    scores = scorer([(a, t) for a, texts in groups for t in texts])
    at = 0
    for _, texts in groups:  # the positive scores highest in each group
        assert int(scores[at : at + len(texts)].argmax()) == 0
        at += len(texts)


def test_bad_settings_are_refused_before_any_work(hpo_small, tmp_path):
    kg, split = hpo_small
    base = dict(cache_dir=tmp_path, split_name="inductive")
    for field, value in (("negatives_per_group", 0), ("groups_per_step", 0), ("lr", float("nan")), ("max_steps", 0)):
        with pytest.raises(ConfigError) as err:
            adapt_cross_encoder(kg, split, **base, **{field: value})
        assert err.value.field == field
    assert not list(tmp_path.iterdir())


def test_cli_prints_the_summary_json_and_exits_2_on_bad_flags(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("TEXTKG_CACHE_DIR", str(tmp_path / "cache"))
    argv = ["encoders", "cross-encoder", "--dataset", "hpo-small", "--max-steps", "1", "--groups-per-step", "2"]
    assert main([*argv, "--negatives", "2", "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["steps"] == 1 and summary["negatives_per_group"] == 2 and Path(summary["out"]).is_dir()
    for bad in (["--negatives", "0"], ["--lr", "nan"], ["--max-minutes", "0"]):
        try:
            code = main([*argv, *bad])
        except SystemExit as exc:  # a flag out of its range stops argparse itself, with status 2
            code = exc.code
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err
