"""Ranking many weightings at once (``weighting_ranks``) against ranking each one (``placement_ranks``).

The oracle is the code the tuners used before: ``placement_ranks`` of each weighted sum. The planted
graph has two candidate groups (entity types), terms with several parents (the filter), and
component scores on a coarse grid, so that many candidates tie with the target under some weightings.
"""

from __future__ import annotations

import pytest
import torch

from textkg.data.graph import KnowledgeGraph, Split
from textkg.errors import ConfigError
from textkg.evaluation.placement.combination import weight_grid
from textkg.evaluation.placement.grid import weighting_ranks
from textkg.evaluation.placement.methods import placement_queries, placement_ranks
from textkg.evaluation.scoring import standardise, weighted_sum

NUM_TRAIN, NUM_VALID = 300, 60


def planted(seed: int = 0, *, links: bool = False):
    """A graph of 300 training terms (two types) and 60 new terms with 1-3 parents each, of one type;
    with ``links``, also random ``linked`` statements (relation 1) among training terms and from new terms."""
    g = torch.Generator().manual_seed(seed)
    n = NUM_TRAIN + NUM_VALID
    types = tuple("a" if i % 3 else "b" for i in range(n))
    train = [(c, 0, int(torch.randint(0, c, (1,), generator=g))) for c in range(1, NUM_TRAIN)]
    valid = []
    for v in range(NUM_TRAIN, n):
        kind = types[v]
        pool = [i for i in range(NUM_TRAIN) if types[i] == kind]
        for p in torch.randperm(len(pool), generator=g)[: 1 + v % 3].tolist():
            valid.append((v, 0, pool[p]))
    if links:
        train += [(int(a), 1, int(b)) for a, b in torch.randint(0, NUM_TRAIN, (600, 2), generator=g)]
        valid += [
            (int(a), 1, int(b)) for a, b in zip(torch.randint(NUM_TRAIN, n, (90,), generator=g), range(90), strict=True)
        ]
    train_t, valid_t = torch.tensor(train), torch.tensor(valid)
    kg = KnowledgeGraph(
        name="planted",
        entities=tuple(f"e{i}" for i in range(n)),
        relations=("is_a", "linked"),
        entity_names=tuple(f"e{i}" for i in range(n)),
        entity_descriptions=tuple(f"term {i}" for i in range(n)),
        relation_texts=("is_a", "linked"),
        triples={"all": torch.cat([train_t, valid_t])},
        entity_types=types,
    )
    split = Split(
        kind="inductive",
        train=train_t,
        valid=valid_t,
        test=valid_t,
        train_entities=torch.arange(NUM_TRAIN),
        valid_entities=torch.arange(NUM_TRAIN, n),
        test_entities=torch.arange(NUM_TRAIN, n),
        filter_triples=torch.cat([train_t, valid_t]),
    )
    return kg, split


def standardised_table(seed: int, n: int, *, levels: int | None = None):
    """A scorer reading a fixed ``(n, n)`` table, standardised per term as the tuner's components are."""
    table = torch.randn(n, n, generator=torch.Generator().manual_seed(seed))
    if levels is not None:
        table = torch.round(table * levels / 4)  # a coarse grid: ties
    return lambda terms, candidates: standardise(
        table[terms][:, candidates], dtype=torch.float64, population=True
    ).float()


@pytest.mark.parametrize("levels", [None, 3])
def test_every_weighting_ranks_as_its_own_weighted_sum(levels):
    kg, split = planted()
    queries = placement_queries(kg, split, which="valid")
    n = kg.num_entities
    components = [standardised_table(k, n, levels=levels) for k in range(3)]
    grid = [list(w.values()) for w in weight_grid(["a", "b", "c"])]
    got = weighting_ranks(components, grid, queries, num_entities=n, batch_size=7)
    for g, ws in enumerate(grid):

        def scorer(terms, candidates, ws=ws):
            return weighted_sum([(w, s(terms, candidates)) for s, w in zip(components, ws, strict=True)])

        want = placement_ranks(scorer, queries, num_entities=n, batch_size=7, with_close=False)[0]
        assert torch.equal(got[g], want), ws
    if levels is not None:  # the planted ties reach the rank: half-integer ranks
        assert bool((got.frac() == 0.5).any())


def test_added_weights_above_one_and_a_sparse_vote_rank_the_same(monkeypatch):
    """The re-ranker's weight goes up to 10, and a vote's standardised scores are large and mostly tied;
    candidates the vote ties with the target are still skipped where another component weighs in."""
    import textkg.evaluation.placement.grid as grid_module

    compared, everything = [], []
    real = grid_module._counted_ranks

    def spy(rows, z_t, keep, w):
        compared.append(int(keep.sum()) * len(w))
        everything.append(keep.numel() * len(w))
        return real(rows, z_t, keep, w)

    monkeypatch.setattr(grid_module, "_counted_ranks", spy)
    kg, split = planted(1)
    queries = placement_queries(kg, split, which="valid")
    n = kg.num_entities
    sparse = torch.zeros(n, n)
    sparse[torch.rand(n, n, generator=torch.Generator().manual_seed(5)) < 0.02] = 1.0

    def vote(terms, candidates):
        return standardise(sparse[terms][:, candidates], dtype=torch.float64, population=True).float()

    components = [standardised_table(0, n), vote, standardised_table(2, n)]
    grid = [[1.0, 0.1, w] for w in (0.1, 0.3, 1.0, 3.0, 10.0)] + [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    got = weighting_ranks(components, grid, queries, num_entities=n)
    for g, ws in enumerate(grid):

        def scorer(terms, candidates, ws=ws):
            return weighted_sum([(w, s(terms, candidates)) for s, w in zip(components, ws, strict=True)])

        assert torch.equal(got[g], placement_ranks(scorer, queries, num_entities=n, with_close=False)[0])
    assert sum(compared) < 0.8 * sum(everything)  # random scores: the target is mid-ranked, yet some are skipped


def test_reads_each_component_once_per_batch_and_never_an_unused_one():
    kg, split = planted()
    queries = placement_queries(kg, split, which="valid")
    n = kg.num_entities
    calls = [0, 0, 0]

    def counted(k):
        inner = standardised_table(k, n)

        def score(terms, candidates):
            calls[k] += 1
            return inner(terms, candidates)

        return score

    grid = [[1.0, 0.3, 0.0], [0.1, 1.0, 0.0], [1.0, 0.0, 0.0]]
    weighting_ranks([counted(k) for k in range(3)], grid, queries, num_entities=n, batch_size=1000)
    assert calls == [len(queries.groups), len(queries.groups), 0]


@pytest.mark.parametrize("grid", [[], [[1.0, 0.0]], [[0.0, 0.0, 0.0]], [[1.0, -0.1, 0.0]], [[float("nan"), 1, 1]]])
def test_bad_weightings_are_refused(grid):
    kg, split = planted()
    queries = placement_queries(kg, split, which="valid")
    components = [standardised_table(k, kg.num_entities) for k in range(3)]
    with pytest.raises(ConfigError):
        weighting_ranks(components, grid, queries, num_entities=kg.num_entities)


def exhaustive_grid(components, valid, num_entities):
    """The tuner's grid as it ran before (every weighting ranked on its own): ``{name: MRR}``."""
    from textkg.evaluation.placement.combination import _weights_name
    from textkg.evaluation.placement.methods import rank_placement

    def standardised(s):
        return lambda t, c: standardise(s(t, c), dtype=torch.float64, population=True).float()

    parts = {name: standardised(s) for name, s in components.items()}
    out = {}
    for weights in weight_grid(list(parts)):

        def scorer(t, c, weights=weights):
            return weighted_sum([(w, parts[name](t, c)) for name, w in weights.items()])

        mrr = rank_placement(scorer, valid, num_entities=num_entities, with_close=False).mrr
        out["combined" + _weights_name(weights)] = mrr
    return out


def test_tuner_tries_every_weighting_with_the_exhaustive_mrr_in_one_ranking_pass(monkeypatch):
    """The tuner's choice and every MRR it records equal the exhaustive grid's, while it ranks the
    validation queries once per vote setting and once for the chosen combination (not once per weighting)."""
    import textkg.evaluation.placement.combination as combination

    kg, split = planted(2)
    valid = placement_queries(kg, split, which="valid")
    n = kg.num_entities
    features = torch.randn(n, 8, generator=torch.Generator().manual_seed(3))
    edges = split.train[:, [0, 2]]
    components = {"model": standardised_table(7, n, levels=3), "description": combination.cosine_scorer(features)}
    vote = combination.neighbour_vote_scorer(features, edges, vote=combination.DEFAULT_VOTES[0])
    want = exhaustive_grid({**components, "vote": vote}, valid, n)
    calls = []
    real = combination.rank_placement
    monkeypatch.setattr(combination, "rank_placement", lambda *a, **k: calls.append(1) or real(*a, **k))
    combo = combination.tune_combination(
        components, valid, num_entities=n, features=features, parent_edges=edges, votes=combination.DEFAULT_VOTES[:1]
    )
    assert len(calls) == 2  # the one vote setting, and the chosen combination's metrics
    assert {k: v for k, v in combo.tried.items() if k.startswith("combined")} == want
    best = max(want.values())
    assert combo.tried["combined" + combination._weights_name(combo.weights)] == best
    first_best = next(k for k, v in want.items() if v == best)  # on a tie, the earlier (simpler) weighting
    assert "combined" + combination._weights_name(combo.weights) == first_best


class TableModel:
    """``score_tails`` read from a fixed ``(n, n)`` table (the relation is ignored)."""

    def __init__(self, n: int, seed: int) -> None:
        self.table = torch.round(torch.randn(n, n, generator=torch.Generator().manual_seed(seed)) * 2)  # ties
        self.calls = 0

    def eval(self):
        return self

    def score_tails(self, heads, relations, candidates):
        self.calls += 1
        return self.table[heads][:, candidates]


def test_known_links_weights_rank_as_the_voted_scorer_at_each_weight():
    """``placement_with_known_links`` ranks all its vote weights from one pass: the same validation MRR per
    weight, the same choice and the same test ranks as ``placement_ranks`` of ``voted_scorer`` at each weight."""
    from textkg.evaluation.k_shot import choose, summarise
    from textkg.evaluation.placement.known_links import (
        VOTE_WEIGHTS,
        AnnotationVote,
        placement_with_known_links,
        term_links,
        voted_scorer,
    )
    from textkg.evaluation.placement.methods import model_scorer

    kg, split = planted(4, links=True)
    model = TableModel(kg.num_entities, 9)
    got = placement_with_known_links(model, kg, split)
    valid = placement_queries(kg, split, which="valid")
    test = placement_queries(kg, split, which="test")
    assert model.calls == len(valid.groups) + len(test.groups)  # once per batch, not once per weight
    vote = AnnotationVote(split.train, valid.relation, kg.num_entities)

    def ranks(queries, links, w):
        scorer = voted_scorer(model_scorer(model, queries.relation), vote, links, w)
        return placement_ranks(scorer, queries, num_entities=kg.num_entities, with_close=False)[0]

    valid_links, test_links = term_links(valid, split.valid), term_links(test, split.test)
    want = {f"{w:g}": float(ranks(valid, valid_links, w).reciprocal().mean()) for w in VOTE_WEIGHTS}
    assert got["valid_mrr_by_weight"] == want
    assert got["weight"] == float(choose(want)) > 0
    assert got["with_links"] == summarise(ranks(test, test_links, got["weight"]))
    assert got["without_links"] == summarise(ranks(test, test_links, 0.0))
