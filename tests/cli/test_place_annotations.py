"""``textkg place --annotations``: a new term with the diseases annotated to it is placed under the
parent of the training terms that share them, even when its text says nothing (the links' vote,
weighted as the run chose on its validation terms, whose descriptions say nothing either)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from textkg.cli.main import main
from textkg.errors import DataError

CATEGORIES = {
    "dog": "a domestic dog breed that barks",
    "cat": "a domestic cat breed that purrs",
    "bird": "a bird with feathers that flies",
    "fish": "a fish with fins that swims",
}
NEUTRAL = "an unusual organism described by nobody"


def _toy(root: Path) -> Path:
    root.mkdir()
    texts = {"organism": "organism: a living thing"}
    ind: dict[str, list[tuple[str, str, str]]] = {"train": [], "dev": [], "test": []}
    for cat, desc in CATEGORIES.items():
        texts[cat] = f"{cat}: {desc}"
        texts[f"D:{cat}"] = f"a disease of {cat}s"
        ind["train"].append((cat, "is_a", "organism"))
        for i in range(6):
            member = f"{cat}{i}"
            side = "train" if i < 4 else "dev" if i == 4 else "test"
            texts[member] = f"{member}: {desc if side == 'train' else NEUTRAL}"
            ind[side] += [(member, "is_a", cat), (f"D:{cat}", "has_phenotype", member)]
    (root / "entity2text.txt").write_text("".join(f"{e}\t{t}\n" for e, t in texts.items()), encoding="utf-8")
    for name, rows in ind.items():
        body = "".join("\t".join(r) + "\n" for r in rows)
        (root / f"{name}.tsv").write_text(body, encoding="utf-8")
        (root / f"ind-{name}.tsv").write_text(body, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("place_ann")
    out = tmp / "run"
    argv = ["train", "--dataset", str(_toy(tmp / "toy")), "--split", "inductive", "--model", "fused-transe"]
    argv += ["--encoder", "glove-bow", "--dim", "8", "--epochs", "1", "--batch-size", "8", "--seed", "0"]
    assert main([*argv, "--no-progress", "--out", str(out)]) == 0
    return out


HPOA = (
    "#description: toy\n"
    "database_id\tdisease_name\tqualifier\thpo_id\treference\tevidence\taspect\n"
    "D:fish\tfish disease\t\tNEW:1\tPMID:1\tPCS\tP\n"
    "D:cat\tcat disease\tNOT\tNEW:1\tPMID:1\tPCS\tP\n"
    "OMIM:999\tunknown\t\tNEW:1\tPMID:1\tPCS\tP\n"
)


def test_run_chooses_the_vote_on_validation(toy_run):
    block = json.loads((toy_run / "metrics.json").read_text())["test"]["placement_known_links"]
    assert block["weight"] > 0 and block["with_links"]["mrr"] > block["without_links"]["mrr"]
    assert block["num_queries_with_links"] == block["num_queries"] == 4


def test_annotations_place_a_term_whose_text_says_nothing(toy_run, tmp_path, capsys):
    terms = tmp_path / "new.tsv"
    terms.write_text(f"NEW:1\tnovel thing\t{NEUTRAL}\n", encoding="utf-8")
    hpoa = tmp_path / "new.hpoa"
    hpoa.write_text(HPOA, encoding="utf-8")
    out = tmp_path / "placed.tsv"
    argv = ["place", str(toy_run), "--terms", str(terms), "--out", str(out), "--device", "cpu"]
    assert main([*argv, "--annotations", str(hpoa)]) == 0
    summary = json.loads(capsys.readouterr().out)["annotations"]
    assert summary["terms_with_annotations"] == 1 and summary["annotations_used"] == 1  # NOT row skipped
    assert summary["rows_naming_an_entity_outside_the_graph"] == 1
    first = out.read_text(encoding="utf-8").splitlines()[1].split("\t")
    assert first[3] == "fish"


@pytest.mark.parametrize(
    "content, line, field",
    [
        ("database_id\tqualifier\n", 1, "hpo_id"),
        ("#c\ndatabase_id\tqualifier\thpo_id\nD:fish\t\n", 3, None),
        ("database_id\tqualifier\thpo_id\nD:fish\t\t\n", 2, "hpo_id"),
    ],
)
def test_bad_annotations_name_file_line_field(tmp_path, content, line, field):
    from textkg.data.known_links import read_annotations

    path = tmp_path / "bad.hpoa"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_annotations(path, entities=["D:fish"])
    assert err.value.line == line and err.value.field == field and err.value.file == str(path)
