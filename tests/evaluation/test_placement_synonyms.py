"""The re-ranker's ``synonym_containment`` feature (issue 54): ``containment`` read on a candidate's name and each of
its synonyms, the best of them. An oracle (a plain loop over every string), its reduction to ``containment`` when no
term has synonyms, and the synonyms carried from an OBO file through the graph and its cache."""

from __future__ import annotations

import math
from collections import Counter

import torch

from textkg.data import cache
from textkg.data.ontology import build_graph, read_obo
from textkg.evaluation.placement.rerank import OPTIONAL_FEATURES, TEXT_FEATURES, text_feature_scorers
from textkg.evaluation.placement.text import containment_scorer, synonym_containment_scorer, words

TEXTS = [
    "Red-green color blindness: an inability to tell red from green",  # 0: a new term's text
    "Dyschromatopsia",  # 1: candidate, synonym "color blindness"
    "Abnormality of vision",  # 2: candidate, no synonym
    "Blindness",  # 3: candidate, synonyms "loss of sight", "blind"
    "Green stool",  # 4
]
NAMES = ["Red-green color blindness", "Dyschromatopsia", "Abnormality of vision", "Blindness", "Green stool"]
SYNONYMS = [(), ("Color blindness", "Colour vision defect"), (), ("Loss of sight", "Blind"), ()]


def _oracle(texts, names, synonyms, fit_on, terms, cands):
    """The feature by hand: IDF on every name and synonym of ``fit_on``, each string's words weighted idf^2 / sum."""
    docs = [s for i in fit_on for s in (names[i], *synonyms[i])]
    df = Counter(w for d in docs for w in set(words(d)))
    idf = {w: math.log((1 + len(docs)) / (1 + c)) + 1 for w, c in df.items()}
    out = torch.zeros(len(terms), len(cands), dtype=torch.float64)
    for a, t in enumerate(terms):
        present = set(words(texts[t]))
        for b, c in enumerate(cands):
            best = 0.0
            for s in (names[c], *(synonyms[c] if c < len(synonyms) else ())):
                ws = {w for w in words(s) if w in idf}
                total = sum(idf[w] ** 2 for w in ws)
                if total:
                    best = max(best, sum(idf[w] ** 2 for w in ws if w in present) / total)
            out[a, b] = best
    return out


def test_synonym_containment_equals_a_loop_over_every_name_and_synonym():
    fit_on = torch.tensor([1, 2, 3, 4])
    score = synonym_containment_scorer(TEXTS, NAMES, SYNONYMS, fit_on)
    terms, cands = torch.tensor([0, 4, 1]), torch.tensor([3, 1, 2, 4])
    got = score(terms, cands)
    want = _oracle(TEXTS, NAMES, SYNONYMS, fit_on.tolist(), terms.tolist(), cands.tolist())
    assert got.shape == (3, 4)
    torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)
    # the new term finds Dyschromatopsia through its synonym "color blindness" (its name shares no word)
    assert got[0, 1] == 1.0 and containment_scorer(TEXTS, NAMES, fit_on)(terms, cands)[0, 1] == 0.0


def test_without_synonyms_it_is_containment():
    fit_on = torch.tensor([1, 2, 3, 4])
    terms, cands = torch.tensor([0, 1, 2, 3, 4]), torch.tensor([4, 3, 2, 1])
    none = synonym_containment_scorer(TEXTS, NAMES, [()] * len(NAMES), fit_on)(terms, cands)
    torch.testing.assert_close(none, containment_scorer(TEXTS, NAMES, fit_on)(terms, cands))
    # a new term past the synonyms' end (textkg place: existing + new ids) is read on its name
    last = torch.tensor([4])
    short = synonym_containment_scorer(TEXTS, NAMES, SYNONYMS[:4], fit_on)(terms, last)
    torch.testing.assert_close(short, synonym_containment_scorer(TEXTS, NAMES, SYNONYMS, fit_on)(terms, last))


def test_it_is_an_optional_text_feature_read_from_the_synonyms_given():
    assert "synonym_containment" in OPTIONAL_FEATURES and "synonym_containment" in TEXT_FEATURES
    built = text_feature_scorers(
        ("synonym_containment",),
        texts=TEXTS,
        names=NAMES,
        parent_edges=torch.zeros(0, 2, dtype=torch.long),
        fit_on=torch.tensor([1, 2, 3, 4]),
        word_encoder=None,
        synonyms=SYNONYMS,
    )
    assert list(built) == ["synonym_containment"]
    assert built["synonym_containment"](torch.tensor([0]), torch.tensor([1]))[0, 0] == 1.0


OBO = """format-version: 1.2

[Term]
id: X:1
name: vision abnormality

[Term]
id: X:2
name: dyschromatopsia
synonym: "color blindness" EXACT []
synonym: "color blindness" RELATED []
synonym: "dyschromatopsia" EXACT []
synonym: "colour vision defect" RELATED []
is_a: X:1

[Term]
id: X:3
name: night blindness
is_a: X:1
"""


def test_an_obo_files_synonyms_reach_the_graph_and_survive_its_cache(tmp_path):
    path = tmp_path / "t.obo"
    path.write_text(OBO)
    kg = build_graph(read_obo(path))
    syn = dict(zip(kg.entities, kg.entity_synonyms or (), strict=True))
    assert syn == {"X:1": (), "X:2": ("color blindness", "colour vision defect"), "X:3": ()}  # distinct, name left out
    cache.save_graph(kg, tmp_path / "g.pt")
    again = cache.load_graph(tmp_path / "g.pt")
    assert again is not None and again.entity_synonyms == kg.entity_synonyms


def test_candidates_scored_in_blocks_give_the_same_scores(monkeypatch):
    """A file with many synonyms does not set the memory: candidates are compared in blocks of at most
    ``SYNONYM_BLOCK`` strings (a candidate with more is a block of its own), and the scores are the same."""
    import textkg.evaluation.placement.text as text

    fit_on = torch.tensor([1, 2, 3, 4])
    terms, cands = torch.tensor([0, 4, 1]), torch.tensor([3, 1, 2, 4, 1])
    whole = synonym_containment_scorer(TEXTS, NAMES, SYNONYMS, fit_on)(terms, cands)
    for block in (1, 2, 3):
        monkeypatch.setattr(text, "SYNONYM_BLOCK", block)
        torch.testing.assert_close(synonym_containment_scorer(TEXTS, NAMES, SYNONYMS, fit_on)(terms, cands), whole)


def test_one_candidates_many_synonyms_are_split_too(monkeypatch):
    """A block holds at most ``SYNONYM_BLOCK`` strings even when one candidate has more (a crafted file's term with
    a million synonyms): its best string is found across blocks."""
    import textkg.evaluation.placement.text as text

    synonyms = [(), tuple(f"x{i} y{i}" for i in range(9)) + ("color blindness",), (), (), ()]
    fit_on = torch.tensor([1, 2, 3, 4])
    whole = synonym_containment_scorer(TEXTS, NAMES, synonyms, fit_on)(torch.tensor([0]), torch.tensor([1, 2]))
    sizes = []
    real = text.SparseRows.sparse

    def spy(self, ids):
        sizes.append(len(ids))
        return real(self, ids)

    monkeypatch.setattr(text, "SYNONYM_BLOCK", 3)
    monkeypatch.setattr(text.SparseRows, "sparse", spy)
    got = synonym_containment_scorer(TEXTS, NAMES, synonyms, fit_on)(torch.tensor([0]), torch.tensor([1, 2]))
    torch.testing.assert_close(got, whole)
    assert got[0, 0] == 1.0 and max(sizes) <= 3 and sum(sizes) == 12  # 11 strings of candidate 1, 1 of candidate 2


def test_a_cached_graph_with_misfit_synonyms_is_built_again(tmp_path):
    path = tmp_path / "t.obo"
    path.write_text(OBO)
    kg = build_graph(read_obo(path))
    for bad in ([["x"]] * 5, ["abc", "d", "e"], [[1], [], []], "abc"):
        cache.save_graph(kg, tmp_path / "g.pt")
        state = torch.load(tmp_path / "g.pt", weights_only=True)
        state["entity_synonyms"] = bad
        torch.save(state, tmp_path / "g.pt")
        assert cache.load_graph(tmp_path / "g.pt") is None, bad
