"""``textkg train --placement-cross-encoder`` end to end, and a crafted run's ``cross_encoder/`` (issue 54).

The toy ontology of ``test_place.py`` is trained once with a two-step cross-encoder: the run folder keeps the model
(``cross_encoder/``, safetensors only) and ``metrics.json`` the weight validation chose. ``textkg place`` loads it
when that weight is positive; the rest of this file plays someone who hands over a run folder: every crafted
``cross_encoder/`` or ``cross_encoder`` block makes ``place`` exit 2 with a message naming the file or field, no
traceback, no output file, and no pickle run (docs/security.md, "A run's placement cross-encoder").
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest
from run_copies import copy_run, edit_json, rewrite
from test_place import CATEGORIES, _place, _toy_ontology

from textkg.cli.main import main
from textkg.encoders import cross_encoder
from textkg.evaluation.placement.shortlist import TOP_K, WEIGHTS

CROSS = "test.placement_selection.combined.cross_encoder"
TERMS = {  # new terms whose descriptions name their category: the planted parent
    "NEW:1": ("dachshund", "dog"),
    "NEW:2": ("goldfish", "fish"),
    "NEW:3": ("sunflower", "flower"),
    "NEW:4": ("macaw", "bird"),
}


@pytest.fixture(scope="module")
def cross_run(tmp_path_factory) -> Path:
    """The toy run with a two-step cross-encoder (the tests' conftest points TEXTKG_CACHE_DIR at a temporary
    folder, so the fine-tuned model is cached there, not in the user's cache)."""
    tmp = tmp_path_factory.mktemp("place-cross")
    data = _toy_ontology(tmp / "toy")
    out = tmp / "run"
    argv = ["train", "--dataset", str(data), "--split", "inductive", "--model", "fused-transe"]
    argv += ["--encoder", "glove-bow", "--dim", "16", "--epochs", "2", "--batch-size", "8", "--seed", "0"]
    assert main([*argv, "--placement-cross-encoder", "2", "--no-progress", "--out", str(out)]) == 0
    return out


def _force(run: Path, **cross) -> None:
    """``metrics.json`` as if validation chose the combination with the cross-encoder (``cross`` overrides)."""

    def edit(metrics):
        selection = metrics["test"]["placement_selection"]
        selection["chosen"] = "combined"
        selection["combined"]["cross_encoder"].update({"weight": 1.0, **cross})

    edit_json(run / "metrics.json", edit)


def _terms(tmp_path: Path) -> Path:
    path = tmp_path / "new.tsv"
    path.write_text(
        "".join(f"{i}\t{name}\t{CATEGORIES[cat][0]}\n" for i, (name, cat) in TERMS.items()), encoding="utf-8"
    )
    return path


def _refused(run: Path, tmp_path: Path, capsys, *names: str) -> str:
    """``place`` exits 2 naming each of ``names``, prints no traceback and writes no output."""
    out = tmp_path / "placed.tsv"
    capsys.readouterr()
    code = main(["place", str(run), "--terms", str(_terms(tmp_path)), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and all(name in err for name in names), err
    assert not out.exists() and not list(tmp_path.glob(".placed.tsv*"))
    return err


# --- 1. what the run folder keeps


def test_the_run_keeps_the_cross_encoder_and_reports_its_choice(cross_run):
    folder = cross_run / "cross_encoder"
    assert (folder / "model.safetensors").is_file() and (folder / "config.json").is_file()
    assert not [p.name for p in folder.rglob("*") if p.suffix in (".bin", ".pt", ".pth", ".pkl")]
    test = json.loads((cross_run / "metrics.json").read_text())["test"]
    cost = test["placement_cross_encoder"]
    assert cost["steps"] == 2 and cost["folder"] == "cross_encoder"
    assert cost["weights_sha256"] == cross_encoder.load_cross_encoder(folder).digest
    for block in (test, test["placement_names_only"]):
        cross = block["placement_selection"]["combined"]["cross_encoder"]
        assert cross["top_k"] == TOP_K and cross["weight"] in WEIGHTS
        assert set(cross["tried_valid_mrr"]) == {f"w={w:g}" for w in WEIGHTS}
        assert cross["pairs_scored"] > 0 and cross["seconds"] >= 0
    assert test["placement_combined_without_cross_encoder"]["num_queries"] == test["placement"]["num_queries"]


# --- 2. place with validation's choice forced to the cross-encoder


def test_place_ranks_with_the_cross_encoder_as_a_direct_computation(cross_run, tmp_path, capsys):
    """With the combination and a cross-encoder weight of 1, ``place`` exits 0, puts each planted parent first,
    and its parents are those of the first stage re-ranked by hand (:func:`shortlist_scorer` over the loaded
    folder); with the weight at 0 the scores differ (the cross-encoder is read only when weighed)."""
    import torch

    from textkg.evaluation.placement.shortlist import PairScores, Shortlist, shortlist_scorer
    from textkg.place import NewTerm, Placer

    run = copy_run(cross_run, tmp_path)
    _force(run, top_k=5)
    code, rows = _place(run, tmp_path, "--terms", str(_terms(tmp_path)), "--top-k", "3")
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["method"] == "combined" and summary["terms_placed"] == len(TERMS)
    firsts = {r["term"]: r["parent"] for r in rows if r["rank"] == "1"}
    assert firsts == {i: cat for i, (_, cat) in TERMS.items()}
    placed = {i: [r["parent"] for r in rows if r["term"] == i] for i in TERMS}

    terms = [NewTerm(i, name, CATEGORIES[cat][0]) for i, (name, cat) in TERMS.items()]
    first = Placer(run)
    first.selection["combined"]["cross_encoder"]["weight"] = 0.0  # the first stage alone
    texts = [t.definition for t in terms]
    stage = first.term_scorer(texts, [t.name for t in terms], [False] * len(terms)).score
    kg = first.predictor.kg
    pairs = PairScores(cross_encoder.load_cross_encoder(run / "cross_encoder"), list(kg.entity_descriptions) + texts)
    direct = shortlist_scorer(stage, Shortlist(pairs, top_k=5), 1.0)
    ids = torch.arange(kg.num_entities, kg.num_entities + len(terms))
    scores = direct(ids, first.candidates)
    top = first.candidates[scores.topk(3, dim=1).indices]
    assert {t.id: [kg.entities[e] for e in row] for t, row in zip(terms, top.tolist(), strict=True)} == placed
    without = [r["score"] for r in first.place(terms, top_k=3)]
    assert max(abs(a - float(r["score"])) for a, r in zip(without, rows, strict=True)) > 1e-3


# --- 3. crafted run folders


def _pickle_only(run: Path, marker: Path) -> None:
    folder = run / "cross_encoder"
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Marker(marker)))


class _Marker:
    """Unpickling this creates ``path``: proof that a loader ran the folder's code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def _config(**changes):
    return lambda run: edit_json(run / "cross_encoder" / "config.json", lambda c: c.update(changes))


def _tokenizer(edit):
    return lambda run: edit_json(run / "cross_encoder" / "tokenizer.json", edit)


def _weights(make):
    def tamper(run: Path) -> None:
        path = run / "cross_encoder" / "model.safetensors"
        data = make(path.read_bytes())
        rewrite(path, data)

    return tamper


def _nan_weights(run: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    path = run / "cross_encoder" / "model.safetensors"
    state = load_file(str(path))
    path.unlink()
    state["classifier.weight"] = torch.full_like(state["classifier.weight"], float("nan"))
    save_file(state, str(path))


def _some_weights(run: Path) -> None:
    from safetensors.torch import load_file, save_file

    path = run / "cross_encoder" / "model.safetensors"
    state = load_file(str(path))
    path.unlink()
    save_file({k: v for k, v in state.items() if not k.startswith("classifier.")}, str(path))  # a random head


def _one_tensor() -> bytes:
    import torch
    from safetensors.torch import save

    return save({"classifier.bias": torch.zeros(1)})


def _symlinked_folder(run: Path) -> None:
    outside = run.parent / "elsewhere"
    shutil.move(run / "cross_encoder", outside)
    (run / "cross_encoder").symlink_to(outside, target_is_directory=True)


def _symlinked_tokenizer(run: Path) -> None:
    outside = run.parent / "outside.json"
    shutil.copy(run / "cross_encoder" / "tokenizer.json", outside)
    (run / "cross_encoder" / "tokenizer.json").unlink()
    (run / "cross_encoder" / "tokenizer.json").symlink_to(outside)


_REGEX = {"type": "Split", "pattern": {"Regex": "(.*a){25}"}, "behavior": "Isolated", "invert": False}

CRAFTED = {
    # the folder
    "missing": (lambda run: shutil.rmtree(run / "cross_encoder"), (CROSS, "cross_encoder/")),
    "symlink-out-of-run": (_symlinked_folder, (CROSS,)),
    "auto-map": (_config(auto_map={"AutoModelForSequenceClassification": "evil.Model"}), ("config.json", "auto_map")),
    "trust-remote-code": (_config(trust_remote_code=True), ("config.json", "trust_remote_code")),
    "two-labels": (_config(id2label={"0": "no", "1": "yes"}, num_labels=2), ("config.json", "num_labels")),
    "other-architecture": (_config(model_type="gpt2"), ("config.json", "model_type")),
    # the weights
    "truncated-weights": (_weights(lambda b: b[: len(b) // 3]), ("model.safetensors",)),
    "garbage-weights": (_weights(lambda b: os.urandom(4096)), ("model.safetensors",)),
    "empty-weights": (_weights(lambda b: b""), ("model.safetensors",)),
    "head-left-random": (_some_weights, ("model.safetensors", "not in the file")),
    "weights-of-another-model": (
        lambda run: rewrite(run / "cross_encoder" / "model.safetensors", _one_tensor()),
        ("model.safetensors",),
    ),
    "nan-weights": (_nan_weights, ("model.safetensors", "classifier.weight")),
    # the tokenizer
    "tokenizer-not-json": (
        lambda run: rewrite(run / "cross_encoder" / "tokenizer.json", "{oops"),
        ("tokenizer.json",),
    ),
    "tokenizer-wrong-shape": (
        lambda run: rewrite(run / "cross_encoder" / "tokenizer.json", json.dumps({"model": 7})),
        ("tokenizer",),
    ),
    "tokenizer-symlink": (_symlinked_tokenizer, ("tokenizer.json", "symlink")),
    "tokenizer-class-gpt2": (
        lambda run: edit_json(
            run / "cross_encoder" / "tokenizer_config.json", lambda c: c.update(tokenizer_class="GPT2TokenizerFast")
        ),
        ("tokenizer_config.json", "tokenizer_class"),
    ),
    "config-tokenizer-class": (_config(tokenizer_class="TransfoXLTokenizer"), ("config.json", "tokenizer_class")),
    "tokenizer-auto-map": (
        lambda run: edit_json(
            run / "cross_encoder" / "tokenizer_config.json",
            lambda c: c.update(auto_map={"AutoTokenizer": ["evil.Tok", None]}),
        ),
        ("tokenizer_config.json", "auto_map"),
    ),
    "token-id-outside-embeddings": (
        _tokenizer(lambda t: t["model"]["vocab"].update({"dog": 10**6})),
        ("tokenizer.json", "vocab"),
    ),
    "regex-pre-tokenizer": (_tokenizer(lambda t: t.update(pre_tokenizer=_REGEX)), ("tokenizer.json", "Regex")),
}


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_cross_encoder_folder_exits_2(cross_run, tmp_path, capsys, case):
    tamper, names = CRAFTED[case]
    run = copy_run(cross_run, tmp_path)
    _force(run)
    tamper(run)
    _refused(run, tmp_path, capsys, *names)


def test_pickled_weights_never_run_even_when_the_folder_asks(cross_run, tmp_path, capsys, monkeypatch):
    """A ``pytorch_model.bin`` in place of the safetensors, and a ``TransfoXLTokenizer`` (it unpickles its
    vocabulary when ``TRUST_REMOTE_CODE`` is set, as it is here) beside real weights: refused, nothing unpickled."""
    marker = tmp_path / "pickle-ran"
    monkeypatch.setenv("TRUST_REMOTE_CODE", "True")
    run = copy_run(cross_run, tmp_path)
    _force(run)
    _pickle_only(run, marker)
    _refused(run, tmp_path, capsys, "pytorch_model.bin")
    shutil.rmtree(run)
    run = copy_run(cross_run, tmp_path)
    _force(run)
    folder = run / "cross_encoder"
    (folder / "vocab.pkl").write_bytes(pickle.dumps(_Marker(marker)))
    edit_json(
        folder / "tokenizer_config.json",
        lambda c: c.update(tokenizer_class="TransfoXLTokenizer", pretrained_vocab_file="vocab.pkl"),
    )
    (folder / "tokenizer.json").unlink()
    _refused(run, tmp_path, capsys, "tokenizer_config.json", "tokenizer_class")
    assert not marker.exists()


def test_oversized_files_are_refused_before_they_are_read(cross_run, tmp_path, capsys, monkeypatch):
    run = copy_run(cross_run, tmp_path)
    _force(run)
    with monkeypatch.context() as patch:
        patch.setattr(cross_encoder, "MAX_WEIGHTS_BYTES", 1024)
        _refused(run, tmp_path, capsys, "model.safetensors", "MiB")
    size = (run / "cross_encoder" / "tokenizer.json").stat().st_size
    monkeypatch.setattr(cross_encoder, "MAX_TOKENIZER_BYTES", size - 1)
    _refused(run, tmp_path, capsys, "tokenizer.json", "MiB")


@pytest.mark.parametrize(
    "cross, field",
    [
        ({"weight": "NaN"}, "weight"),
        ({"weight": -1.0}, "weight"),
        ({"weight": 1e300}, "weight"),
        ({"weight": True}, "weight"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": 1}, "top_k"),
        ({"top_k": 10**9}, "top_k"),
        ({"top_k": "20"}, "top_k"),
        ({"top_k": 20.5}, "top_k"),
        ({"weight": 1.0, "exec": "rm -rf /"}, "exec"),
    ],
)
def test_a_crafted_cross_encoder_block_exits_2(cross_run, tmp_path, capsys, cross, field):
    run = copy_run(cross_run, tmp_path)
    _force(run, **cross)
    _refused(run, tmp_path, capsys, "metrics.json", f"{CROSS}.{field}")


def test_a_crafted_names_only_block_exits_2(cross_run, tmp_path, capsys):
    run = copy_run(cross_run, tmp_path)

    def edit(metrics):
        metrics["test"]["placement_names_only"]["placement_selection"]["combined"]["cross_encoder"]["top_k"] = -3

    edit_json(run / "metrics.json", edit)
    _refused(run, tmp_path, capsys, "metrics.json", "placement_names_only.placement_selection.combined.cross_encoder")


def test_a_weight_of_zero_never_reads_the_folder(cross_run, tmp_path, capsys):
    """Validation's 0 (the first stage alone): ``place`` works without ``cross_encoder/`` at all."""
    run = copy_run(cross_run, tmp_path)
    _force(run, weight=0.0)
    shutil.rmtree(run / "cross_encoder")
    code, rows = _place(run, tmp_path, "--terms", str(_terms(tmp_path)), "--top-k", "1")
    assert code == 0 and {r["term"]: r["parent"] for r in rows} == {i: c for i, (_, c) in TERMS.items()}


# --- 4. train's flag


def test_train_refuses_the_flag_under_privacy_and_out_of_range(tmp_path, capsys):
    data = _toy_ontology(tmp_path / "toy")
    out = tmp_path / "run"
    argv = ["train", "--dataset", str(data), "--split", "inductive", "--model", "fused-transe"]
    argv += ["--encoder", "glove-bow", "--dim", "16", "--epochs", "1", "--seed", "0", "--no-progress"]
    for extra in (
        ["--placement-cross-encoder", "3", "--privacy", "confidential", "--noise-multiplier", "1"]
        + ["--confidential-fraction", "0.5"],
        ["--placement-cross-encoder", "-1"],
        ["--placement-cross-encoder", "abc"],
        ["--placement-cross-encoder", "1e9"],
        ["--placement-cross-encoder", "2.5"],
    ):
        try:
            code = main([*argv, *extra, "--out", str(out)])
        except SystemExit as exc:  # a flag out of its range stops argparse itself, with status 2
            code = exc.code
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err and "placement" in err, (extra, err)
        assert not out.exists() or not list(out.iterdir()), extra
