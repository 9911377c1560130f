"""The placement re-ranker and the word-level scorers: an oracle only words can solve, its weight
chosen on validation, determinism under a seed, and the names-only view's pieces.

The planted ontology: a root with ``P`` parents; parent ``i`` is named ``"wIa wIb"`` and each of its
children (training, validation or test) ``"wIa wIb cIxJ"``: a child's name contains its parent's name
word for word. Description features are random, so the pooled-vector methods (the model here too)
cannot find the parent; the word-level comparison can.
"""

from __future__ import annotations

import torch

from textkg.data.graph import KnowledgeGraph, Split
from textkg.evaluation.placement.evaluate import evaluate_placement
from textkg.evaluation.placement.methods import NewRowsModel, placement_queries, rank_placement
from textkg.evaluation.placement.rerank import (
    PairFeatures,
    RerankConfig,
    fit_reranker,
    hierarchy_priors,
    reranker_scorer,
)
from textkg.evaluation.placement.text import TfIdf, containment_scorer, tfidf_scorer, words

IS_A = 0
P = 12  # parents under the root
TRAIN_CHILDREN, VALID_CHILDREN, TEST_CHILDREN = 3, 1, 1


def _planted():
    names, train, valid, test = ["root"], [], [], []
    train_ids, valid_ids, test_ids = [0], [], []
    for i in range(P):
        parent = len(names)
        names.append(f"w{i}a w{i}b")
        train.append((parent, IS_A, 0))
        train_ids.append(parent)
        for j in range(TRAIN_CHILDREN + VALID_CHILDREN + TEST_CHILDREN):
            child = len(names)
            names.append(f"w{i}a w{i}b c{i}x{j}")
            if j < TRAIN_CHILDREN:
                train.append((child, IS_A, parent))
                train_ids.append(child)
            elif j < TRAIN_CHILDREN + VALID_CHILDREN:
                valid.append((child, IS_A, parent))
                valid_ids.append(child)
            else:
                test.append((child, IS_A, parent))
                test_ids.append(child)
    tr, va, te = (torch.tensor(x) for x in (train, valid, test))
    n = len(names)
    kg = KnowledgeGraph(
        name="planted",
        entities=tuple(f"e{i}" for i in range(n)),
        relations=("is_a",),
        entity_names=tuple(names),
        entity_descriptions=tuple(names),
        relation_texts=("is_a",),
        triples={"all": torch.cat([tr, va, te])},
        entity_types=None,
    )
    split = Split(
        kind="inductive",
        train=tr,
        valid=va,
        test=te,
        train_entities=torch.tensor(train_ids),
        valid_entities=torch.tensor(valid_ids),
        test_entities=torch.tensor(test_ids),
        filter_triples=torch.cat([tr, va, te]),
    )
    return kg, split


class RandomModel:
    def __init__(self, n, seed=0):
        self.table = torch.randn(n, n, generator=torch.Generator().manual_seed(seed))

    def score_tails(self, heads, relations, candidates):
        return self.table[heads][:, candidates]


def _features(n, seed=1):
    return torch.randn(n, 16, generator=torch.Generator().manual_seed(seed))


def test_words_drop_stop_words_and_case():
    assert words("Abnormality of the Kidney-2") == ["abnormality", "kidney", "2"]


def test_tfidf_rows_are_unit_and_unknown_words_give_zero():
    tfidf = TfIdf.fit(["kidney cyst", "liver cyst"])
    x = tfidf.transform(["kidney cyst", "zzz"]).to_dense()
    assert torch.allclose(x[0].norm(), torch.tensor(1.0)) and x[1].abs().sum() == 0
    assert tfidf.idf[tfidf.vocabulary["kidney"]] > tfidf.idf[tfidf.vocabulary["cyst"]]  # rarer word weighs more


def test_containment_is_the_share_of_a_candidates_name_found():
    texts = ["kidney cyst of the left side", "kidney cyst", "liver"]
    score = containment_scorer(texts, texts, torch.tensor([1, 2]))
    s = score(torch.tensor([0]), torch.tensor([1, 2]))
    assert torch.allclose(s, torch.tensor([[1.0, 0.0]]))


def test_oracle_only_the_word_level_comparison_finds_the_planted_parent():
    kg, split = _planted()
    n = kg.num_entities
    out = evaluate_placement(
        RandomModel(n), kg, split, text_features=_features(n), texts=list(kg.entity_descriptions), rerank=RerankConfig()
    )
    assert out["placement_baselines"]["tfidf-nn"]["mrr"] > 0.9  # word level: found
    assert out["placement"]["mrr"] < 0.5 and out["placement_baselines"]["description-nn"]["mrr"] < 0.5
    selection = out["placement_selection"]
    assert selection["combined"]["weights"]["rerank"] > 0  # validation chose the re-ranker
    assert out["placement_combined"]["mrr"] > 0.9
    assert out["placement_combined_without_rerank"]["mrr"] < 0.6
    assert out["placement_rerank"]["weights"]["containment"] > 0  # it learned that names contain parents' names
    assert "tfidf-nn" in selection["valid_reported_only"] and "tfidf-nn" not in selection["valid"]


def test_rerank_weight_is_zero_when_words_carry_nothing():
    """Names with no shared words: the re-ranker cannot help, and validation gives it weight 0."""
    kg, split = _planted()
    n = kg.num_entities
    texts = [f"t{i}" for i in range(n)]  # every text a unique word: nothing to compare
    table = torch.zeros(n, n)
    table[split.valid[:, 0], split.valid[:, 2]] = 5.0  # the model knows every answer
    table[split.test[:, 0], split.test[:, 2]] = 5.0
    model = RandomModel(n)
    model.table = table + 0.01 * torch.randn(n, n, generator=torch.Generator().manual_seed(3))
    out = evaluate_placement(model, kg, split, text_features=_features(n), texts=texts, rerank=RerankConfig())
    assert out["placement_selection"]["combined"]["weights"]["rerank"] == 0
    assert out["placement_combined"] == out["placement_combined_without_rerank"]


def _fit(seed, num_terms=20):
    kg, split = _planted()
    n = kg.num_entities
    feats = _features(n)
    texts = list(kg.entity_descriptions)
    edges = split.train[:, [0, 2]]
    cos = torch.nn.functional.normalize(feats, dim=1)

    def description(t, c):
        return cos[t] @ cos[c].T

    features = PairFeatures(
        {
            "description": description,
            "vote": description,
            "tfidf": tfidf_scorer(texts, split.train_entities),
            "containment": containment_scorer(texts, kg.entity_names, split.train_entities),
        },
        hierarchy_priors(edges, n),
    )
    config = RerankConfig(num_terms=num_terms, seed=seed, top_k=5)
    return fit_reranker(features, description, edges, split.train_entities, config=config), features


def test_fit_is_deterministic_under_a_seed():
    a, _ = _fit(0)
    b, _ = _fit(0)
    c, _ = _fit(1)
    assert a == b
    assert a.weights != c.weights  # another seed samples other training terms


def test_reranker_scorer_is_the_weighted_feature_sum():
    reranker, features = _fit(0)
    terms, cands = torch.tensor([5, 6]), torch.tensor([0, 1, 2, 3])
    f = features(terms, cands)
    w = torch.tensor([reranker.weights[k] for k in features.names])
    assert torch.allclose(reranker_scorer(reranker, features)(terms, cands), f @ w)


def test_hierarchy_priors_children_and_depth():
    edges = torch.tensor([[1, 0], [2, 1], [3, 1]])
    priors = hierarchy_priors(edges, 5)
    assert torch.allclose(priors[:, 0], torch.tensor([1.0, 2.0, 0.0, 0.0, 0.0]).log1p())
    assert priors[:, 1].tolist() == [0.0, 1.0, 2.0, 2.0, 0.0]  # 4 has no parent: a root


def test_new_rows_model_reads_the_replaced_vectors():
    class Tiny:
        interaction = type("I", (), {"score_tails": staticmethod(lambda h, r, t: (h + r) @ t.T)})()

        def entity_matrix(self):
            return torch.eye(3)

        def relation_matrix(self):
            return torch.zeros(1, 3)

    model = NewRowsModel(Tiny(), torch.tensor([2]), torch.tensor([[1.0, 0.0, 0.0]]))
    s = model.score_tails(torch.tensor([2]), torch.tensor([0]), torch.tensor([0, 1]))
    assert s.tolist() == [[1.0, 0.0]]  # entity 2 now reads like entity 0


def test_placement_queries_on_the_planted_graph():
    kg, split = _planted()
    q = placement_queries(kg, split)
    assert q is not None and q.num_queries == P * TEST_CHILDREN
    m = rank_placement(
        tfidf_scorer(list(kg.entity_descriptions), split.train_entities), q, num_entities=len(kg.entities)
    )
    assert m.mrr > 0.9


def test_children_prior_leaves_the_scored_terms_out():
    """A training term fitted as a new term sees its parent as a real new term would: without itself among the
    children (counting it taught the fit that a true parent always has a child); other terms see every child."""
    edges = torch.tensor([[1, 0], [2, 1], [3, 1], [4, 3]])
    zero = lambda t, c: torch.zeros(len(t), len(c))  # noqa: E731
    scorers = dict.fromkeys(("description", "vote", "tfidf", "containment"), zero)
    features = PairFeatures(scorers, hierarchy_priors(edges, 6), parent_edges=edges)
    cands = torch.tensor([0, 1, 3, 5])
    children = features.names.index("children")

    def counts(terms):  # the children column, unstandardised: log(1 + #children) of each candidate
        raw = torch.tensor([1.0, 2.0, 1.0, 0.0]).log1p() if terms is None else terms
        return (raw - raw.mean()) / raw.std(unbiased=False)

    new_term = features(torch.tensor([5]), cands)[0, :, children]  # 5 is nobody's child
    assert torch.allclose(new_term, counts(None))
    fitted = features(torch.tensor([4, 2]), cands)[:, :, children]  # 4 was 3's only child, 2 one of 1's two
    left = counts(torch.tensor([1.0, 1.0, 0.0, 0.0]).log1p())
    assert torch.allclose(fitted, left.expand(2, -1))
    # without the statements, the priors are read as given (a caller that counted them itself)
    as_given = PairFeatures(scorers, hierarchy_priors(edges, 6))(torch.tensor([4]), cands)[0, :, children]
    assert torch.allclose(as_given, counts(None))


def test_fitted_reranker_fits_on_children_without_the_fitted_term(monkeypatch):
    """``fitted_reranker`` wires the statements in: a training child fitted alone sees its parent with two
    children, the other parents with three (counting it, its parent looked like every other)."""
    import textkg.evaluation.placement.rerank as rr

    kg, split = _planted()
    n = kg.num_entities
    cos = torch.nn.functional.normalize(_features(n), dim=1)
    description = lambda t, c: cos[t] @ cos[c].T  # noqa: E731
    seen = {}

    def keep(x, y, **kwargs):
        seen["x"], seen["y"] = x, y
        return [0.0] * x.shape[2], 0.0

    monkeypatch.setattr(rr, "fit_listnet", keep)
    rr.fitted_reranker(
        RerankConfig(batch_size=1, num_terms=1000, top_k=1000, extra=()),
        texts=list(kg.entity_descriptions),
        names=kg.entity_names,
        scorers={"description": description, "vote": description},
        parent_edges=split.train[:, [0, 2]],
        fit_on=split.train_entities,
        first_stage=description,
        candidates=split.train_entities,
    )
    children = rr.feature_names().index("children")
    x, y = seen["x"][..., children], seen["y"]
    positive = (x * y).sum(1) / y.sum(1)
    top = x.max(1).values  # the root, with every parent as a child
    child_lists = positive < top - 1e-6
    assert int(child_lists.sum()) == P * TRAIN_CHILDREN
    between = ((x > positive[:, None] + 1e-6) & (x < top[:, None] - 1e-6)).sum(1)
    assert (between[child_lists] == P - 1).all()  # the other parents, each with all three children
