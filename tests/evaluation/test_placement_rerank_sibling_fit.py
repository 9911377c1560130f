"""The placement re-ranker fitted partly on whole sibling batches, as an ontology file's validation terms are drawn
(issue 54: real additions often go under a term that had no child before)."""

from __future__ import annotations

import pytest
import torch

from textkg.data.addition_holdout import sibling_batches, sibling_groups
from textkg.errors import ConfigError
from textkg.evaluation.placement.rerank import RerankConfig, fit_batches


def _edges(num_parents: int = 40, siblings: int = 3) -> torch.Tensor:
    """Parents 0..P-1 under root P; ``siblings`` leaf children under each parent (ids after the root)."""
    rows = [(p, num_parents) for p in range(num_parents)]
    child = num_parents + 1
    for p in range(num_parents):
        for _ in range(siblings):
            rows.append((child, p))
            child += 1
    return torch.tensor(rows)


def _terms(edges: torch.Tensor) -> torch.Tensor:
    return torch.unique(edges[:, 0])


def test_share_zero_is_the_random_draw_of_before() -> None:
    """The draw before sibling_share existed, written out: a seeded sample, sorted, cut in batches."""
    edges = _edges()
    terms = _terms(edges)
    config = RerankConfig(num_terms=50, batch_size=16, seed=4)
    g = torch.Generator().manual_seed(4)
    before = torch.sort(terms[torch.randperm(len(terms), generator=g)[:50]]).values
    got = fit_batches(edges, terms, config)
    assert [b.tolist() for b in got] == [before[i : i + 16].tolist() for i in range(0, 50, 16)]


def test_half_in_whole_sibling_groups_that_empty_their_parent() -> None:
    edges = _edges()
    terms = _terms(edges)
    config = RerankConfig(num_terms=60, batch_size=16, seed=1, sibling_share=0.5)
    batches = fit_batches(edges, terms, config)
    flat = [t for b in batches for t in b.tolist()]
    assert len(flat) == len(set(flat)) == 60
    parent = {c: p for c, p in edges.tolist()}
    children: dict[int, set[int]] = {}
    for c, p in edges.tolist():
        children.setdefault(p, set()).add(c)
    grouped = [b for b in batches if all(t in parent and t not in children for t in b.tolist())]
    in_groups = 0
    for batch in batches[:2]:  # the sibling part comes first: 30 terms, whole groups of 3 in batches of <= 16
        members = set(batch.tolist())
        for t in members:
            assert children[parent[t]] <= members  # every sibling scored with it: the parent has no child left
        in_groups += len(members)
    assert in_groups == 30 and grouped
    # the rest is drawn at random from the other terms, the parents among them
    assert any(t < 40 for b in batches[2:] for t in b.tolist())


def test_a_group_larger_than_a_batch_fills_batches_of_its_own() -> None:
    edges = _edges(num_parents=3, siblings=20)
    terms = _terms(edges)
    batches = fit_batches(edges, terms, RerankConfig(num_terms=40, batch_size=8, seed=0, sibling_share=1.0))
    assert all(len(b) <= 8 for b in batches)
    assert sum(len(b) for b in batches) == 40


def test_sibling_groups_are_sibling_batches_order() -> None:
    edges = _edges(num_parents=6, siblings=2)
    triples = torch.stack([edges[:, 0], torch.zeros(len(edges), dtype=torch.long), edges[:, 1]], dim=1)
    cands = _terms(edges)
    groups = sibling_groups(triples, 0, cands, seed=2)
    assert [t for g in groups for t in g] == sibling_batches(triples, 0, cands, seed=2)
    assert all(len(g) == 2 for g in groups)


@pytest.mark.parametrize("share", [-0.1, 1.5, float("nan")])
def test_share_outside_zero_one_is_refused(share: float) -> None:
    with pytest.raises(ConfigError, match="sibling_share"):
        RerankConfig(sibling_share=share)
