"""The re-ranker's context and late-interaction features (placement.context, placement.late): each against a
loop over its formula, a planted pair that only it finds, and the features end to end in ``evaluate_placement``.

The planted words: ``wIa`` is a parent's name word; ``sIaJ`` is a synonym of it (the fake word encoder
gives both nearly the same vector), so a child named with synonyms shares no spelled word with its parent.
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import pytest
import torch

from textkg.errors import ConfigError
from textkg.evaluation.placement.context import children_tfidf_scorer, name_containment_scorer
from textkg.evaluation.placement.late import THRESHOLD, TOP_WORDS, WordVectors, maxsim_scorer
from textkg.evaluation.placement.text import TfIdf, containment_scorer, tfidf_scorer, words

sys.path.insert(0, str(Path(__file__).parent))
from test_placement_rerank import IS_A, P, RandomModel, _features, _planted


def _meaning(word: str) -> str:
    """``sIaJ`` (a synonym) means ``wIa``; every other word means itself."""
    if word.startswith("s") and "a" in word:
        return "w" + word[1 : word.index("a") + 1]
    return word


def fake_word_encoder(ws: list[str]) -> torch.Tensor:
    """A word's vector: its meaning's seeded random vector, plus a little noise of its own (cosine ~0.99)."""
    rows = []
    for w in ws:
        base = torch.randn(32, generator=torch.Generator().manual_seed(zlib.crc32(_meaning(w).encode())))
        own = torch.randn(32, generator=torch.Generator().manual_seed(zlib.crc32(w.encode()) + 1))
        rows.append(base + 0.1 * own)
    return torch.stack(rows) if rows else torch.zeros(0, 32)


def brute_children_tfidf(texts, edges, fit_on, terms, candidates):
    x = TfIdf.fit([texts[i] for i in fit_on.tolist()]).transform(texts).to_dense()
    out = torch.zeros(len(terms), len(candidates))
    for i, t in enumerate(terms.tolist()):
        for j, c in enumerate(candidates.tolist()):
            kids = sorted({a for a, p in edges.tolist() if p == c and a not in terms.tolist()})
            if kids:
                out[i, j] = sum(float(x[t] @ x[k]) for k in kids) / len(kids)
    return out


def test_children_tfidf_equals_a_loop_and_leaves_out_scored_terms():
    g = torch.Generator().manual_seed(0)
    vocab = [f"v{i}" for i in range(12)]
    texts = [" ".join(vocab[int(j)] for j in torch.randint(0, 12, (4,), generator=g)) for _ in range(40)]
    edges = torch.tensor([[c, int(torch.randint(0, c, (1,), generator=g))] for c in range(1, 30)] + [[5, 0], [5, 0]])
    fit_on = torch.arange(30)
    score = children_tfidf_scorer(texts, edges, fit_on)
    candidates = torch.arange(0, 30)
    for terms in (torch.tensor([31, 35, 39]), torch.tensor([3, 5, 36])):  # new terms; then training terms too
        want = brute_children_tfidf(texts, edges, fit_on, terms, candidates)
        assert torch.allclose(score(terms, candidates), want, atol=1e-6)


def test_oracle_only_the_childrens_words_find_a_parent_named_unlike_its_children():
    """Parent ``pI`` shares no word with its children, who all share ``kI``: only the children's words find it."""
    names = ["root"] + [f"p{i}" for i in range(P)]
    edges = [[i + 1, 0] for i in range(P)]
    for i in range(P):
        for j in range(3):
            edges.append([len(names), i + 1])
            names.append(f"k{i} t{i}x{j}")
    new = len(names)
    names.append("k4 brand new")  # a new term: child of p4 (id 5)
    fit_on = torch.arange(new)
    edges_t = torch.tensor(edges)
    candidates = torch.arange(1, P + 1)
    terms = torch.tensor([new])
    sib = children_tfidf_scorer(names, edges_t, fit_on)(terms, candidates)
    assert int(sib.argmax()) == 4 and float(sib[0, 4]) > 0
    for other in (tfidf_scorer(names, fit_on), containment_scorer(names, names, fit_on)):
        assert float(other(terms, candidates).abs().max()) == 0  # the parent's own text shares nothing


def test_oracle_only_the_name_tells_a_parent_from_a_decoy_its_definition_mentions():
    names = ["root", "kidney cyst", "liver cyst", "kidney cyst bilateral"]
    texts = [*names[:3], "kidney cyst bilateral: unlike a liver cyst, found in both kidneys"]
    fit_on = torch.tensor([0, 1, 2])
    terms, candidates = torch.tensor([3]), torch.tensor([1, 2])
    whole = containment_scorer(texts, names, fit_on)(terms, candidates)
    assert torch.allclose(whole[0, 0], whole[0, 1])  # the whole text holds both names: a tie
    named = name_containment_scorer(names, fit_on)(terms, candidates)
    assert abs(float(named[0, 0]) - 1.0) < 1e-6 and float(named[0, 1]) < 0.9  # "liver" is not in the name


def brute_maxsim(texts, names, fit_on, vectors, terms, candidates):
    """The module docstring's formula, word by word."""
    model = TfIdf.fit([names[i] for i in fit_on.tolist()])
    v = model.vocabulary
    y = vectors.vectors
    out = torch.zeros(len(terms), len(candidates))
    for i, t in enumerate(terms.tolist()):
        text_words = set(words(texts[t]))
        for j, c in enumerate(candidates.tolist()):
            name_words = sorted({w for w in words(names[c]) if w in v})
            if not name_words:
                continue
            a = torch.tensor([float(model.idf[v[w]]) ** 2 for w in name_words])
            a = a / a.sum()
            total = 0.0
            for weight, nw in zip(a.tolist(), name_words, strict=True):
                best = 0.0
                for w in text_words:
                    if w == nw:
                        best = 1.0
                    elif w in vectors.vocabulary and nw in vectors.vocabulary:
                        sims = y[vectors.vocabulary[w]] @ y[[vectors.vocabulary[u] for u in v]].T  # to every name word
                        s = float(y[vectors.vocabulary[w]] @ y[vectors.vocabulary[nw]])
                        rank = int((sims > s).sum())
                        if rank < TOP_WORDS and s >= THRESHOLD:
                            best = max(best, min(s, 1.0))
                total += weight * best
            out[i, j] = total
    return out


@pytest.mark.parametrize("texts_at_once", [4096, 2])  # one piece; pieces of two texts
def test_maxsim_equals_its_formula_and_generalises_containment(texts_at_once, monkeypatch):
    import textkg.evaluation.placement.late as late

    monkeypatch.setattr(late, "_TEXTS", texts_at_once)
    names = ["root", "w1a w1b", "w2a w2b", "w3a", "s1a7 zzz", "w2b s3a1 s1a2", "qq"]
    texts = [*names[:4], "s1a7 zzz: w2a", names[5], "nothing known"]
    fit_on = torch.tensor([0, 1, 2, 3])
    vectors = WordVectors.encode([*texts, *names], fake_word_encoder)
    terms, candidates = torch.tensor([4, 5, 6]), torch.tensor([0, 1, 2, 3])
    got = maxsim_scorer(texts, names, fit_on, vectors)(terms, candidates)
    assert torch.allclose(got, brute_maxsim(texts, names, fit_on, vectors, terms, candidates), atol=1e-5)
    assert float(got[0, 1]) > 0.4 and float(got[2].abs().max()) == 0  # a synonym found; nothing in common: 0
    exact = containment_scorer(texts, names, fit_on)(terms, candidates)
    assert bool((got >= exact - 1e-6).all())  # a spelled match scores 1, as in containment


def _synonym_planted():
    """The re-ranker test's ontology, each child ``cJ`` described with its own synonym of its parent's first word."""
    kg, split = _planted()
    names, texts = list(kg.entity_names), list(kg.entity_descriptions)
    for child, _, parent in torch.cat([split.train, split.valid, split.test]).tolist():
        if parent != 0:
            i = int(names[parent].split()[0][1:-1])
            names[child] = f"c{child}"
            texts[child] = f"c{child}: s{i}a{child}"
    from dataclasses import replace

    return replace(kg, entity_names=tuple(names), entity_descriptions=tuple(texts)), split


def test_oracle_only_late_interaction_finds_children_named_with_synonyms():
    """No spelled word is shared with the parent or a sibling: words, TF-IDF, siblings and pooled vectors
    fail, and the re-ranker with ``maxsim`` (validation gives it weight) finds the parents."""
    from textkg.evaluation.placement.evaluate import evaluate_placement
    from textkg.evaluation.placement.rerank import RerankConfig

    kg, split = _synonym_planted()
    n = kg.num_entities
    texts = list(kg.entity_descriptions)
    common = dict(text_features=_features(n), texts=texts, word_encoder=fake_word_encoder)
    without = evaluate_placement(RandomModel(n), kg, split, rerank=RerankConfig(extra=("sibling_mean",)), **common)
    assert without["placement_combined"]["mrr"] < 0.6
    out = evaluate_placement(
        RandomModel(n), kg, split, rerank=RerankConfig(extra=("sibling_mean", "sibling_tfidf", "maxsim")), **common
    )
    assert out["placement_selection"]["combined"]["weights"]["rerank"] > 0
    assert out["placement_rerank"]["weights"]["maxsim"] > 0
    assert out["placement_combined"]["mrr"] > 0.9
    assert out["placement_combined_without_rerank"]["mrr"] < 0.6


def test_maxsim_without_a_word_encoder_is_refused_and_a_saved_one_reads_back():
    """The fit's own entry refuses ``maxsim`` without word vectors (``evaluate_placement`` and ``place`` pass
    MiniLM's); a re-ranker saved with ``maxsim`` scores again from its saved weights."""
    from textkg.evaluation.placement.evaluate import evaluate_placement, saved_reranker
    from textkg.evaluation.placement.rerank import RerankConfig

    kg, split = _synonym_planted()
    n = kg.num_entities
    texts = list(kg.entity_descriptions)
    from textkg.evaluation.placement.rerank import text_feature_scorers

    edges = split.train[split.train[:, 1] == IS_A][:, [0, 2]]
    place = dict(texts=texts, names=kg.entity_names, parent_edges=edges, fit_on=split.train_entities)
    with pytest.raises(ConfigError, match="word encoder"):
        text_feature_scorers(("maxsim",), word_encoder=None, **place)
    assert text_feature_scorers(("sibling_tfidf",), word_encoder=None, **place).keys() == {"sibling_tfidf"}
    out = evaluate_placement(
        RandomModel(n),
        kg,
        split,
        text_features=_features(n),
        texts=texts,
        rerank=RerankConfig(extra=("maxsim", "name_containment")),
        word_encoder=fake_word_encoder,
    )
    saved = out["placement_rerank"]
    common = dict(features=_features(n), parent_edges=edges, texts=texts, names=kg.entity_names)
    scorer = saved_reranker(saved, fit_on=split.train_entities, word_encoder=fake_word_encoder, **common)
    terms = split.test[:, 0]
    assert scorer(terms, split.train_entities).shape == (len(terms), len(split.train_entities))


def test_the_word_vote_is_the_neighbour_vote_over_tfidf_vectors():
    from textkg.evaluation.placement.combination import VoteConfig, neighbour_vote_scorer
    from textkg.evaluation.placement.context import word_vote_scorer

    g = torch.Generator().manual_seed(2)
    vocab = [f"v{i}" for i in range(30)]
    texts = [" ".join(vocab[int(j)] for j in torch.randint(0, 30, (5,), generator=g)) for _ in range(50)]
    edges = torch.tensor([[c, int(torch.randint(0, c, (1,), generator=g))] for c in range(1, 40)])
    fit_on = torch.arange(40)
    dense = TfIdf.fit([texts[i] for i in range(40)]).transform(texts).to_dense()
    want = neighbour_vote_scorer(dense, edges, vote=VoteConfig(k=5, temperature=0.1))
    got = word_vote_scorer(texts, edges, fit_on, k=5, temperature=0.1)
    terms, candidates = torch.arange(40, 50), torch.arange(40)
    assert torch.allclose(got(terms, candidates).double(), want(terms, candidates), atol=1e-5)


def test_oracle_only_the_word_vote_finds_the_parent_when_pooled_vectors_are_noise():
    """The children of ``pI`` share ``kI``; the pooled vector misleads: its vote misses, the word vote finds."""
    from textkg.evaluation.placement.combination import VoteConfig, neighbour_vote_scorer
    from textkg.evaluation.placement.context import word_vote_scorer

    names = ["root"] + [f"p{i}" for i in range(P)]
    edges = [[i + 1, 0] for i in range(P)]
    for i in range(P):
        for j in range(3):
            edges.append([len(names), i + 1])
            names.append(f"k{i} t{i}x{j}")
    new = len(names)
    names.append("k7 brand new")  # a child of p7 (id 8)
    edges_t, fit_on = torch.tensor(edges), torch.arange(new)
    terms, candidates = torch.tensor([new]), torch.arange(new)
    words_vote = word_vote_scorer(names, edges_t, fit_on, k=3)(terms, candidates)
    assert int(words_vote.argmax()) == 8
    features = _features(new + 1)
    features[new] = features[names.index("k2 t2x0")]  # the pooled vector reads like a child of p2 (id 3)
    pooled = neighbour_vote_scorer(features, edges_t, vote=VoteConfig(k=3, temperature=0.1))
    assert int(pooled(terms, candidates).argmax()) == 3


def test_the_tfidf_scores_shared_with_the_word_vote_are_computed_once_per_batch():
    from textkg.evaluation.placement.text import last_call_memo

    calls = []

    def scorer(terms, candidates):
        calls.append(1)
        return terms[:, None].float() + candidates[None, :].float()

    memo = last_call_memo(scorer)
    terms, candidates = torch.tensor([1, 2]), torch.arange(4)
    first = memo(terms, candidates)
    assert memo(terms.clone(), candidates) is first and len(calls) == 1  # the same batch: read again
    assert torch.equal(memo(torch.tensor([3, 2]), candidates), scorer(torch.tensor([3, 2]), candidates))
    assert len(calls) == 3
