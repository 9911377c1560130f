"""Issue 36, item 3: a given inductive split under ``--privacy`` takes its entity partition from public files.

Played as the adversary of docs/privacy.md: D and D plus one private ``ind-train.tsv`` statement are
both trained as a user would (``textkg train`` on a BLP folder with ``--inductive-dir``, ``--privacy
full --private-size``). Without ``*-ents.txt`` the entity partition was read off the private
``ind-train.tsv`` (issue 36 measured 28 against 29 ``train_entities`` and another table shape). Both
must now be refused with exit 2, naming the files, before a statement is read (on 7add106 both trained,
or the neighbour alone was refused by a check that reads the private statements). With the lists, the
two releases must match in everything but noised values.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from neighbours import neighbour_copy, shape_tree

from textkg.cli.main import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
ENTITY_LISTS = ("train-ents.txt", "dev-ents.txt", "test-ents.txt")
#: one private training statement between two training entities (in no split file of the fixture)
EXTRA_TRAIN = "/e/38\t/geo/near_by\t/e/37\n"
#: one private training statement that names a test entity (/e/04 is in test-ents.txt)
EXTRA_TEST_ENTITY = "/e/00\t/r/knows\t/e/04\n"


def _dataset(tmp_path: Path, name: str, *, extra: str | None, lists: bool) -> Path:
    removed = () if lists else tuple(f"ind_split/{f}" for f in ENTITY_LISTS)
    line = None if extra is None else ("ind_split/ind-train.tsv", extra)
    return neighbour_copy(FIXTURE, tmp_path / name, append=line, remove=removed)


def _train(dataset: Path, out: Path) -> int:
    return main(
        ["train", "--dataset", str(dataset), "--inductive-dir", "ind_split", "--split", "inductive"]
        + ["--description", "short", "--model", "transe", "--dim", "8", "--epochs", "1", "--batch-size", "16"]
        + ["--seed", "0", "--privacy", "full", "--noise-multiplier", "1.0", "--max-grad-norm", "1.0"]
        + ["--private-size", "128", "--out", str(out)]
    )


@pytest.mark.parametrize("extra", [EXTRA_TRAIN, EXTRA_TEST_ENTITY])
def test_without_entity_lists_both_neighbours_are_refused(tmp_path, capsys, extra):
    for name, line in (("d", None), ("d_plus", extra)):
        data = _dataset(tmp_path, name, extra=line, lists=False)
        out = tmp_path / f"run_{name}"
        assert _train(data, out) == 2, name
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert all(f in err for f in ENTITY_LISTS), err
        assert "ind-train.tsv" in err and "private" in err
        assert str(data / "ind_split") in err and "field 'inductive_dir'" in err
        assert not out.exists(), "nothing may be written before the refusal"


def test_a_public_run_without_entity_lists_still_trains(tmp_path):
    data = _dataset(tmp_path, "d", extra=None, lists=False)
    code = main(
        ["train", "--dataset", str(data), "--inductive-dir", "ind_split", "--split", "inductive", "--model", "transe"]
        + ["--dim", "8", "--epochs", "1", "--batch-size", "64", "--out", str(tmp_path / "run")]
    )
    assert code == 0


def test_with_entity_lists_neighbours_give_the_same_release(tmp_path):
    runs = []
    for name, line in (("d", None), ("d_plus", EXTRA_TRAIN)):
        data = _dataset(tmp_path, name, extra=line, lists=True)
        out = tmp_path / f"run_{name}"
        assert _train(data, out) == 0
        runs.append(out)
    a, b = runs
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    wa, wb = (torch.load(d / "best_model.pt", weights_only=True) for d in runs)
    assert {k: tuple(v.shape) for k, v in wa.items()} == {k: tuple(v.shape) for k, v in wb.items()}
    ga, gb = (json.loads((d / "graph.json").read_text()) for d in runs)
    ga.pop("name"), gb.pop("name")  # the dataset's path
    assert ga == gb
    ca, cb = (json.loads((d / "config.json").read_text()) for d in runs)
    ca["data"].pop("dataset"), cb["data"].pop("dataset")
    assert ca == cb
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in runs)
    for m in (ma, mb):
        m["train"].pop("history"), m["train"].pop("seconds")
    assert shape_tree(ma) == shape_tree(mb)
    assert ma["privacy"] == mb["privacy"] and ma["privacy"]["guarantee"] == "dp"
    for split in ("valid", "test"):  # public statements: the same queries, counted the same
        assert ma[split]["num_triples"] == mb[split]["num_triples"]


def test_a_transductive_private_run_beside_an_inductive_split_without_lists_still_trains(tmp_path):
    """The refusal is about the inductive split's partition: a transductive run on the same folder reads
    train/dev/test.tsv only, and trains."""
    data = _dataset(tmp_path, "d", extra=None, lists=False)
    code = main(
        ["train", "--dataset", str(data), "--inductive-dir", "ind_split", "--split", "transductive"]
        + ["--description", "short", "--model", "transe", "--dim", "8", "--epochs", "1", "--batch-size", "16"]
        + ["--privacy", "full", "--noise-multiplier", "1.0", "--private-size", "256", "--out", str(tmp_path / "run")]
    )
    assert code == 0
