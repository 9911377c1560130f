"""Placement of new terms that arrive with known links (``test.placement_known_links``).

A new phenotype term usually comes with the diseases already annotated to it (the
``phenotype.hpoa`` rows that name it). Here each held-out term of the placement queries
(:mod:`textkg.evaluation.placement.methods`) is given every statement of its split that links it by a
relation other than the parent relation (``has_phenotype``, ``gene_has_phenotype``; never an
``is_a`` statement, which is what is being predicted).

The links vote (:func:`annotation_vote`): a training term that shares the new term's linked
entities (its diseases) votes, with the cosine of the two sets (0/1 vectors over entities), for
itself and for its training parents: terms annotated with the same diseases are its siblings,
parents or children. The placement score is the model's, standardised per term, plus ``weight ×
vote``; the weight is chosen on the validation terms' placement MRR (0 = the model alone, so
terms without links keep their placement). It is the description neighbour vote of
:mod:`textkg.evaluation.placement.combination` with the annotations in place of the descriptions.
On ``hpo-small`` moving the model's vector by the links (:mod:`textkg.models.known_links`)
lowered the validation placement MRR (docs/k_shot.md), so the vote is what places with links.
"""

from __future__ import annotations

import torch

from textkg.data.known_links import NEW_IS_HEAD, NEW_IS_TAIL
from textkg.evaluation.k_shot import choose, summarise
from textkg.evaluation.placement.grid import weighting_ranks
from textkg.evaluation.placement.methods import PlacementQueries, model_scorer, placement_queries
from textkg.evaluation.scoring import combine, weighted_sum

#: weights of the links' vote tried on validation (0: the model alone)
VOTE_WEIGHTS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)


def term_links(queries: PlacementQueries, statements: torch.Tensor) -> torch.Tensor:
    """``(m, 4)`` ``(term, relation, other, role)``: every statement of ``statements`` that links a query
    term by a relation other than the parent relation (a link between two query terms counts for each)."""
    terms = torch.unique(queries.terms)
    keep = statements[:, 1] != queries.relation
    s = statements[keep]
    as_head = s[torch.isin(s[:, 0], terms)]
    as_tail = s[torch.isin(s[:, 2], terms)]
    head_rows = torch.stack([as_head[:, 0], as_head[:, 1], as_head[:, 2], torch.full_like(as_head[:, 0], NEW_IS_HEAD)])
    tail_rows = torch.stack([as_tail[:, 2], as_tail[:, 1], as_tail[:, 0], torch.full_like(as_tail[:, 0], NEW_IS_TAIL)])
    return torch.cat([head_rows.T, tail_rows.T]).long()


def _sparse(rows: torch.Tensor, cols: torch.Tensor, n: int) -> torch.Tensor:
    values = torch.ones(len(rows))
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), values, (n, n), check_invariants=False).coalesce()


class AnnotationVote:
    """The links' vote for parents (module docstring), from the training statements a run may read.

    Args:
        statements: ``(m, 3)`` training statements (the public ones under privacy).
        parent_relation: id of the parent relation (``is_a``).
        num_entities: ``N``.
    """

    def __init__(self, statements: torch.Tensor, parent_relation: int, num_entities: int) -> None:
        n = num_entities
        links = statements[statements[:, 1] != parent_relation]
        edges = statements[statements[:, 1] == parent_relation]
        self.num_entities = n
        # each entity's linked entities (both directions), and each child's parents
        self.linked = _sparse(torch.cat([links[:, 2], links[:, 0]]), torch.cat([links[:, 0], links[:, 2]]), n)
        self.linked = torch.sparse_coo_tensor(
            self.linked.indices(), torch.ones(self.linked.indices().shape[1]), (n, n), check_invariants=False
        ).coalesce()  # 0/1: a pair linked by two relations counts once
        self.degree = torch.sparse.sum(self.linked, 1).to_dense()
        self.parents_of = _sparse(edges[:, 2], edges[:, 0], n)  # (parent, child)

    def bags(self, rows: torch.Tensor, others: torch.Tensor, num_rows: int) -> torch.Tensor:
        """``(num_rows, N)`` 0/1: row ``rows[i]`` is linked to entity ``others[i]``."""
        out = torch.zeros(num_rows, self.num_entities)
        out[rows, others] = 1.0
        return out

    def __call__(self, bags: torch.Tensor) -> torch.Tensor:
        """``(b, N)`` votes of the training terms for each entity as a parent of each bag's term."""
        shared = torch.sparse.mm(self.linked, bags.T).T  # (b, N): linked entities in common
        cosine = shared / (bags.sum(1, keepdim=True).clamp(min=1) * self.degree.clamp(min=1)).sqrt()
        return cosine + torch.sparse.mm(self.parents_of, cosine.T).T  # itself, and its parents


def voted_scorer(base, vote: AnnotationVote, links: torch.Tensor, weight: float):
    """``base`` placement scores, standardised, plus ``weight ×`` the links' vote of each query term
    (``links (m, 4)`` ``(term, relation, other, role)``)."""
    standardised, votes = voted_parts(base, vote, links)

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        return weighted_sum([(1.0, standardised(terms, candidates)), (weight, lambda: votes(terms, candidates))])

    return score


def voted_parts(base, vote: AnnotationVote, links: torch.Tensor):
    """``(standardised base, votes)``: the two parts :func:`voted_scorer` adds, as scorers."""

    def standardised(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        return combine(base(terms, candidates))

    def votes(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        row = {t: i for i, t in enumerate(terms.tolist())}
        mine = links[torch.isin(links[:, 0], terms)]
        rows = torch.tensor([row[t] for t in mine[:, 0].tolist()], dtype=torch.long)
        return vote(vote.bags(rows, mine[:, 2], len(terms)))[:, candidates]

    return standardised, votes


def placement_with_known_links(model, kg, split, *, statements: torch.Tensor | None = None) -> dict | None:
    """``test.placement_known_links``: the model's placement of the test terms without and with the vote of
    their known links (``None`` without placement queries or without any such link). ``statements``: the
    training statements the vote may read (default ``split.train``)."""
    valid_q = placement_queries(kg, split, which="valid")
    test_q = placement_queries(kg, split, which="test")
    if valid_q is None or test_q is None:
        return None
    valid_links, test_links = term_links(valid_q, split.valid), term_links(test_q, split.test)
    if not len(valid_links) or not len(test_links):
        return None
    vote = AnnotationVote(split.train if statements is None else statements, valid_q.relation, kg.num_entities)
    model.eval()
    n = kg.num_entities

    def mrr_ranks(queries: PlacementQueries, links: torch.Tensor, weights: list[float]) -> torch.Tensor:
        """``(len(weights), q)`` ranks of ``voted_scorer`` at each weight, from one pass (only the ranks are read)."""
        model_score, votes = voted_parts(model_scorer(model, queries.relation), vote, links)
        return weighting_ranks([model_score, votes], [[1.0, w] for w in weights], queries, num_entities=n)

    with torch.no_grad():
        by_weight = mrr_ranks(valid_q, valid_links, list(VOTE_WEIGHTS))
        valid_mrr = {f"{w:g}": float(r.reciprocal().mean()) for w, r in zip(VOTE_WEIGHTS, by_weight, strict=True)}
        weight = float(choose(valid_mrr))
        ranks = mrr_ranks(test_q, test_links, [0.0, weight] if weight else [0.0])
        without, with_links = ranks[0], ranks[-1]
    has = torch.isin(test_q.terms, test_links[:, 0])
    return {
        "links": "every statement of the term's split by a relation other than the parent relation "
        "(for hpo: its disease and gene annotations)",
        "method": "standardised model score + weight x the vote of training terms sharing the term's linked "
        "entities (cosine of the 0/1 sets) for themselves and their parents",
        "weight": weight,
        "chosen_on": "validation placement MRR",
        "valid_mrr_by_weight": valid_mrr,
        "num_queries": test_q.num_queries,
        "num_queries_with_links": int(has.sum()),
        "num_links": len(test_links),
        "without_links": summarise(without),
        "with_links": summarise(with_links),
        "terms_with_links": {"without_links": summarise(without[has]), "with_links": summarise(with_links[has])},
    }
