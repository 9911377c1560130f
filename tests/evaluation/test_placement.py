"""Placement of new ontology terms: oracle ranks, filtering, close@1 and baselines on a toy ontology.

The toy hierarchy (``a -> b``: ``a is_a b``; ``*`` = held-out test term)::

    root(0) <- A(1) <- A1(3) <- X(9)
            <- A(1) <- A2(4)
    root(0) <- B(2) <- B1(5)
    N(6)* -> A(1), N(6)* -> B1(5); C(7) -> N(6)*
    M(10)* -> A1(3), M(10)* -> N(6)*   (N is not a training entity: no query)
    D(8): a disease, (D, has_phenotype, A1)

The close neighbourhood of N is {A, B1 (parents), root, B (grandparents),
A1, A2 (siblings), C (its child)}; X (a child of a sibling) is not close.
"""

from __future__ import annotations

import itertools
import json

import pytest
import torch

from textkg.data.graph import KnowledgeGraph, Split
from textkg.errors import ConfigError
from textkg.evaluation.placement.evaluate import evaluate_placement
from textkg.evaluation.placement.methods import (
    PlacementMetrics,
    cosine_scorer,
    parent_of_nearest_scorer,
    placement_queries,
    placement_ranks,
    placement_reading,
)

IS_A, HAS = 0, 1
ROOT, A, B, A1, A2, B1, N, C, D, X, M = range(11)
TRAIN_EDGES = [
    (A, IS_A, ROOT),
    (B, IS_A, ROOT),
    (A1, IS_A, A),
    (A2, IS_A, A),
    (B1, IS_A, B),
    (X, IS_A, A1),
    (D, HAS, A1),
]
TEST_EDGES = [(N, IS_A, A), (N, IS_A, B1), (C, IS_A, N), (M, IS_A, A1), (M, IS_A, N)]
TYPES = ("phenotype",) * 8 + ("disease",) + ("phenotype",) * 2
PHENOTYPE_TRAIN = [ROOT, A, B, A1, A2, B1, C, X]  # candidates: training phenotypes


def _toy(relations=("is_a", "has_phenotype"), types=TYPES):
    train = torch.tensor(TRAIN_EDGES + [(C, IS_A, X)])  # C is a training entity too
    test = torch.tensor(TEST_EDGES)
    kg = KnowledgeGraph(
        name="toy",
        entities=tuple(f"e{i}" for i in range(11)),
        relations=relations,
        entity_names=tuple(f"e{i}" for i in range(11)),
        entity_descriptions=tuple(f"term {i}" for i in range(11)),
        relation_texts=relations,
        triples={"all": torch.cat([train, test])},
        entity_types=types,
    )
    split = Split(
        kind="inductive",
        train=train,
        valid=torch.empty(0, 3, dtype=torch.long),
        test=test,
        train_entities=torch.tensor(sorted({ROOT, A, B, A1, A2, B1, C, D, X})),
        valid_entities=torch.empty(0, dtype=torch.long),
        test_entities=torch.tensor([N, M]),
        filter_triples=torch.cat([train, test]),
    )
    return kg, split


class TableModel:
    """A fake model: ``score(h, r, t) = table[h, t]`` (``r`` must be ``is_a``)."""

    def __init__(self, table: torch.Tensor) -> None:
        self.table = table

    def score_tails(self, heads, relations, candidates):
        assert bool((relations == IS_A).all())
        return self.table[heads][:, candidates]


def _scorer(table):
    return lambda terms, candidates: table[terms][:, candidates]


def _oracle_rank(table, term, parent, true_parents, candidates):
    """Brute force: the realistic rank of ``parent`` among the unfiltered candidates."""
    others = [c for c in candidates if c != term and (c == parent or c not in true_parents)]
    target = table[term, parent]
    greater = sum(1 for c in others if table[term, c] > target)
    equal = sum(1 for c in others if table[term, c] == target and c != parent)
    return 1 + greater + equal / 2


def test_queries_are_new_terms_under_training_parents():
    kg, split = _toy()
    q = placement_queries(kg, split)
    pairs = sorted(zip(q.terms.tolist(), q.parents.tolist(), strict=True))
    assert pairs == [(N, A), (N, B1), (M, A1)]  # not (C, N): C is no new term; not (M, N): N is no known term
    assert [g.tolist() for g in q.groups] == [sorted(PHENOTYPE_TRAIN)]  # the disease D is no candidate
    assert q.true_parents[N] == {A, B1}
    assert q.close[N] == {A, B1, ROOT, B, A1, A2, C}


@pytest.mark.parametrize("seed", range(5))
def test_ranks_match_a_brute_force_oracle(seed):
    kg, split = _toy()
    g = torch.Generator().manual_seed(seed)
    table = torch.randint(0, 4, (11, 11), generator=g).float()  # few values: many ties
    q = placement_queries(kg, split)
    ranks, _ = placement_ranks(_scorer(table), q, num_entities=11, batch_size=1 + seed % 2)
    for i, (term, parent) in enumerate(zip(q.terms.tolist(), q.parents.tolist(), strict=True)):
        assert ranks[i] == _oracle_rank(table, term, parent, q.true_parents[term], PHENOTYPE_TRAIN)


def test_without_types_every_training_entity_is_a_candidate():
    kg, split = _toy(types=None)
    q = placement_queries(kg, split)
    assert [g.tolist() for g in q.groups] == [split.train_entities.tolist()]
    table = torch.zeros(11, 11)
    table[N, D] = 5.0  # the disease now competes
    ranks, _ = placement_ranks(_scorer(table), q, num_entities=11)
    # (N, A): D above; 8 others tie at 0 minus B1 (filtered) -> 1 + 1 + 6/2
    assert ranks[0] == 1 + 1 + 6 / 2


def test_other_true_parents_and_the_query_term_are_excluded():
    kg, split = _toy()
    table = torch.zeros(11, 11)
    table[N, N], table[N, B1], table[N, A], table[N, D] = 9.0, 8.0, 7.0, 10.0  # D: a disease, no candidate
    q = placement_queries(kg, split)
    ranks, _ = placement_ranks(_scorer(table), q, num_entities=11)
    assert ranks[:2].tolist() == [1.0, 1.0]  # each of N's parents is first once the other is filtered


@pytest.mark.parametrize(("top", "credit"), [(ROOT, 1.0), (B, 1.0), (A1, 1.0), (A2, 1.0), (C, 1.0), (X, 0.0)])
def test_close_at_1_counts_parents_grandparents_siblings_children(top, credit):
    kg, split = _toy()
    table = torch.zeros(11, 11)
    table[N, A], table[N, B1], table[N, top] = 1.0, 1.0, 2.0
    q = placement_queries(kg, split)
    _, close = placement_ranks(_scorer(table), q, num_entities=11)
    assert close[:2].tolist() == [credit, credit]


def test_close_at_1_credits_the_true_parent_and_splits_ties():
    kg, split = _toy()
    table = torch.zeros(11, 11)
    table[N, A], table[N, B1], table[N, X] = 2.0, 1.0, 1.5  # X: a child of a sibling, not close
    table[M, A1], table[M, X], table[M, ROOT] = 3.0, 3.0, 3.0  # X is a sibling of M; root is not close to M
    q = placement_queries(kg, split)
    ranks, close = placement_ranks(_scorer(table), q, num_entities=11)
    assert close.tolist() == [1.0, 0.0, pytest.approx(2 / 3)]  # (N, B1): A is filtered, X is on top
    assert ranks.tolist() == [1.0, 2.0, 2.0]  # (M, A1) ties with two others: 1 + 0 + 2/2
    m = PlacementMetrics.from_ranks(ranks, close).to_dict()
    assert list(m) == ["mrr", "hits@1", "hits@3", "hits@10", "close@1", "num_queries"]
    assert m["hits@1"] == pytest.approx(1 / 3) and m["num_queries"] == 3
    assert m["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 2) / 3) and m["close@1"] == pytest.approx(5 / 9)


# Description features: N is closest to A2 (whose parent is A), then A1; A itself is orthogonal.
FEATURES = torch.tensor(
    [
        [0, 0, 1],
        [0, 1, 0],
        [0, 0.2, 1],
        [1, 0.5, 0],
        [1, 0.1, 0],
        [0.3, 0, 1],
        [1, 0, 0],
        [0, -1, 0],
        [1, 0, 0],
        [-1, 0, 0],
        [0, 0, -1],
    ],
    dtype=torch.float,
)


def test_description_nn_ranks_by_cosine():
    kg, split = _toy()
    q = placement_queries(kg, split)
    ranks, close = placement_ranks(cosine_scorer(FEATURES), q, num_entities=11)
    # (N, A): A2, A1 above; root, B, C tie with A at 0 (B1 filtered) -> 1 + 2 + 3/2
    assert ranks[0] == 4.5
    assert ranks[1] == 3.0  # (N, B1): cos 0.29, below A2 and A1 only
    assert close[0] == 1.0  # the top suggestion, A2, is a sibling


@pytest.mark.parametrize("k", [1, 2])
def test_parent_of_nearest_promotes_the_neighbours_parent(k):
    kg, split = _toy()
    q = placement_queries(kg, split)
    train = split.train[split.train[:, 1] == IS_A][:, [0, 2]]
    ranks, _ = placement_ranks(parent_of_nearest_scorer(FEATURES, train, k=k), q, num_entities=11)
    assert ranks[0] == 1.0  # A: the parent of N's nearest neighbours A2 (and A1)
    # (N, B1): with A filtered no candidate is a neighbour's parent: cosine decides (A2, A1 above)
    assert ranks[1] == 3.0


def test_parent_of_nearest_breaks_aggregate_ties_by_cosine():
    feats = torch.zeros(11, 3)
    feats[N], feats[A2], feats[A], feats[B], feats[ROOT] = (
        torch.tensor(v) for v in ([1.0, 0, 0], [1.0, 0.1, 0], [0.5, 1, 0], [0.0, 1, 0], [0.0, 0, 1])
    )
    scorer = parent_of_nearest_scorer(feats, torch.tensor([[A2, A], [A2, B]]), k=1)
    s = scorer(torch.tensor([N]), torch.tensor([A, B, A2, ROOT]))[0]
    # A and B: both parents of the nearest neighbour A2, A nearer to N by cosine;
    # A2 itself: no neighbour's parent, but nearer than root.
    assert s[0] > s[1] > s[2] > s[3]


def test_evaluate_placement_returns_model_and_baselines():
    kg, split = _toy()
    table = torch.zeros(11, 11)
    table[N, A], table[N, B1], table[M, A1] = 1.0, 1.0, 1.0
    out = evaluate_placement(TableModel(table), kg, split, text_features=FEATURES, k=2)
    assert out["placement"]["hits@1"] == 1.0 and out["placement"]["mrr"] == 1.0
    assert set(out["placement_baselines"]) == {"description-nn", "parent-of-nearest"}
    json.dumps(out)
    assert "100%" in placement_reading(out)
    assert evaluate_placement(TableModel(table), kg, split)["placement_baselines"] == {}


def test_no_parent_relation_means_no_placement():
    kg, split = _toy(relations=("subclass", "has_phenotype"))
    assert placement_queries(kg, split) is None
    assert evaluate_placement(TableModel(torch.zeros(11, 11)), kg, split) is None
    with pytest.raises(ConfigError, match="parent relation"):
        placement_queries(kg, split, relation="is_a")
    assert placement_queries(kg, split, relation="subclass").num_queries == 3


def test_bad_scores_are_rejected():
    kg, split = _toy()
    q = placement_queries(kg, split)
    with pytest.raises(ValueError, match="shape"):
        placement_ranks(lambda t, c: torch.zeros(len(t), 2), q, num_entities=11)
    with pytest.raises(ValueError, match="NaN"):
        placement_ranks(lambda t, c: torch.full((len(t), len(c)), float("nan")), q, num_entities=11)
    with pytest.raises(ConfigError):
        placement_ranks(_scorer(torch.zeros(11, 11)), q, num_entities=11, batch_size=0)


def test_hpo_small_inductive_end_to_end():
    """A real ontology: hpo-small's inductive split, a random text model and description baselines."""
    from textkg.data import load_dataset, make_split
    from textkg.models import build_model
    from textkg.models.presets import get_preset

    kg = load_dataset("hpo-small")
    split = make_split(kg, "inductive")
    feats = torch.randn(kg.num_entities, 8, generator=torch.Generator().manual_seed(0))
    cfg = get_preset("fused-transe")
    torch.manual_seed(0)
    model = build_model(
        cfg,
        num_entities=kg.num_entities,
        num_relations=kg.num_relations,
        seen_entities=split.train_entities,
        text_features=feats,
    ).eval()
    with torch.no_grad():
        out = evaluate_placement(model, kg, split, text_features=feats)
    q = placement_queries(kg, split)
    assert out["placement"]["num_queries"] == q.num_queries > 50
    assert all(kg.entity_types[p] == "phenotype" for p in q.parents.tolist())
    for m in itertools.chain([out["placement"]], out["placement_baselines"].values()):
        assert 0 < m["mrr"] <= 1 and 0 <= m["hits@1"] <= m["hits@3"] <= m["hits@10"] <= 1
        assert 0 <= m["close@1"] <= 1


def test_train_reports_placement_first(tmp_path, capsys, monkeypatch):
    """``textkg train`` on an inductive ontology split: placement leads the summary and metrics.json."""
    from textkg.cli.main import main
    from textkg.pipeline import report as pipeline  # the post-run report reads the description features

    calls = []

    def fake_features(prep):  # no MiniLM in unit tests: random description features
        calls.append(prep.kg.num_entities)
        return torch.randn(prep.kg.num_entities, 8, generator=torch.Generator().manual_seed(0))

    monkeypatch.setattr(pipeline, "description_features", fake_features)
    monkeypatch.setattr(  # the names-only block encodes the held-out terms' names alone
        pipeline, "_new_description_features", lambda prep, cfg, texts: torch.randn(len(texts), 8)
    )
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--dataset",
                "hpo-small",
                "--split",
                "inductive",
                "--model",
                "transe",
                "--epochs",
                "1",
                "--dim",
                "16",
                "--valid-max-triples",
                "50",
                "--no-progress",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert list(summary)[0] == "placement" and {"out", "test", "valid", "privacy"} <= set(summary)
    assert summary["placement"]["reading"].startswith("New terms: the suggestions come from ")
    assert summary["placement"]["next"].startswith(f"textkg place {out} ")
    assert set(summary["placement"]["baselines"]) == {"description-nn", "parent-of-nearest", "tfidf-nn"}
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["test"]["placement"] == summary["placement"]["model"]
    assert metrics["test"]["placement"]["num_queries"] > 50 and len(calls) == 1
    # the method the summary leads with is the best on validation terms, never chosen on test
    selection = metrics["test"]["placement_selection"]
    valid_mrr = {name: m["mrr"] for name, m in selection["valid"].items()}
    assert summary["placement"]["chosen_on_validation"] == selection["chosen"] == max(valid_mrr, key=valid_mrr.get)
    assert set(valid_mrr) == {"model", "description-nn", "parent-of-nearest", "combined"}
    assert summary["placement"]["combined"] == metrics["test"]["placement_combined"]
    # issue 37: the same terms from their names alone, what place can never propose, and too few steps
    names_only = metrics["test"]["placement_names_only"]
    assert names_only["placement"]["num_queries"] == metrics["test"]["placement"]["num_queries"]
    assert summary["placement"]["names_only"]["reading"].startswith("New terms read from their names alone:")
    assert f"{metrics['test']['placement_held_out_terms']:,} held-out" in summary["placement"]["held_out_terms"]
    assert summary["warning"] == metrics["train"]["warning"] and "training steps" in summary["warning"]


def test_hierarchy_limits_what_placement_reads():
    """``hierarchy=``: close@1 and parent-of-nearest read only the statements given (a private run's
    public ones). Changing a statement outside it changes nothing; with no parent statement in it
    parent-of-nearest is left out."""
    kg, split = _toy()
    table = torch.zeros(11, 11)
    table[N, ROOT], table[M, A1] = 1.0, 1.0  # N's top suggestion is a grandparent via A -> root
    public = split.train[torch.tensor([(h, r, t) != (A, IS_A, ROOT) for h, r, t in split.train.tolist()])]
    full = evaluate_placement(TableModel(table), kg, split, text_features=FEATURES, k=2)
    restricted = evaluate_placement(TableModel(table), kg, split, text_features=FEATURES, k=2, hierarchy=public)
    assert restricted["placement"]["close@1"] < full["placement"]["close@1"]  # root no longer known as close
    moved = split.train.clone()
    moved[(moved == torch.tensor([A, IS_A, ROOT])).all(1)] = torch.tensor([A, IS_A, B])
    import dataclasses

    other = dataclasses.replace(split, train=moved)
    assert evaluate_placement(TableModel(table), kg, other, text_features=FEATURES, k=2, hierarchy=public) == restricted
    none = evaluate_placement(
        TableModel(table), kg, split, text_features=FEATURES, hierarchy=split.train[split.train[:, 1] == HAS]
    )
    assert set(none["placement_baselines"]) == {"description-nn"}


def _private_hpo_small_run(monkeypatch, tmp_path, *privacy):
    """Train a tiny private ``hpo-small`` run (random description features, no encoder) and return its
    directory; ``privacy`` is the privacy flags (``--privacy MODE ...``)."""
    from textkg.cli.main import main
    from textkg.pipeline import report as pipeline  # the post-run report reads the description features

    monkeypatch.setattr(
        pipeline,
        "description_features",
        lambda prep: torch.randn(prep.kg.num_entities, 8, generator=torch.Generator().manual_seed(0)),
    )
    monkeypatch.setattr(pipeline, "_new_description_features", lambda prep, cfg, texts: torch.randn(len(texts), 8))
    out = tmp_path / "run"
    argv = "train --dataset hpo-small --split inductive --model transe --epochs 1 --dim 8 --valid-max-triples 20"
    argv += " --no-progress --noise-multiplier 1.0 --batch-size 512"
    assert main([*argv.split(), *privacy, "--out", str(out)]) == 0
    return out


def test_private_run_placement_reads_no_private_statement(tmp_path, monkeypatch):
    """Adversary's view: under ``--privacy full`` every training statement is private, so the released
    placement block has no parent-of-nearest baseline and a close@1 built from public statements only."""
    from textkg.evaluation.placement import evaluate as placement_module  # where evaluate_placement looks

    seen = {}

    original = placement_module.evaluate_placement

    def spy(*args, **kwargs):
        seen["hierarchy"] = kwargs.get("hierarchy")
        return original(*args, **kwargs)

    monkeypatch.setattr(placement_module, "evaluate_placement", spy)
    out = _private_hpo_small_run(monkeypatch, tmp_path, "--privacy", "full")
    assert seen["hierarchy"] is not None and len(seen["hierarchy"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["test"]["placement_baselines"]) == {"description-nn", "tfidf-nn"}  # text only
    # the combination has no hierarchy to vote with: model and description only, tuned on validation
    combined = metrics["test"]["placement_selection"]["combined"]
    assert combined["vote"] is None and set(combined["weights"]) == {"model", "description"}


def test_confidential_run_placement_votes_with_public_statements_only(tmp_path, monkeypatch):
    """Adversary's view: with half the training statements confidential, every (child, parent) statement
    that parent-of-nearest or the combination's vote reads is a public one, and some private ``is_a``
    statements existed to leak."""
    from textkg.evaluation.placement import combination as placement_ensemble
    from textkg.evaluation.placement import evaluate as placement_module  # where evaluate_placement looks

    seen, read = {}, []
    original = placement_module.evaluate_placement

    def spy(model, kg, split, **kwargs):
        seen.update(train=split.train, hierarchy=kwargs.get("hierarchy"), valid=split.valid)
        return original(model, kg, split, **kwargs)

    def recording(factory):
        def wrapped(features, parent_edges, **kwargs):
            read.append(parent_edges.clone())
            return factory(features, parent_edges, **kwargs)

        return wrapped

    monkeypatch.setattr(placement_module, "evaluate_placement", spy)
    monkeypatch.setattr(
        placement_module, "parent_of_nearest_scorer", recording(placement_module.parent_of_nearest_scorer)
    )
    vote = placement_ensemble.neighbour_vote_scorer
    for module in (placement_ensemble, placement_module):  # the tuner's votes and the re-ranker's
        monkeypatch.setattr(module, "neighbour_vote_scorer", recording(vote))
    out = _private_hpo_small_run(monkeypatch, tmp_path, "--privacy", "confidential", "--confidential-fraction", "0.5")
    is_a = json.loads((out / "graph.json").read_text())["relations"].index("is_a")
    public = {(h, t) for h, r, t in seen["hierarchy"].tolist() if r == is_a}
    private = {(h, t) for h, r, t in seen["train"].tolist() if r == is_a} - public
    assert private and public and len(read) >= 2  # parent-of-nearest and at least one vote
    for edges in read:
        assert {tuple(e) for e in edges.tolist()} <= public
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["test"]["placement_selection"]["combined"]["vote"] is not None
