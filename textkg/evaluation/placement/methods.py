"""Placement of new ontology terms: where are a held-out term's true parents?

For an ontology-shaped graph (``hpo``) the question a curator asks of an
inductive model is not "rank every entity for every statement" but "given a
new term's text, which existing terms are its parents?". This module asks it.

Queries. Every held-out statement ``(new_term, is_a, parent)`` of an inductive
split, with ``new_term`` a test entity and ``parent`` a training entity, is one
query. Its candidates are the training entities of the parent's type when the
graph declares ``entity_types`` (for ``hpo``: phenotype terms only), else every
training entity. As in filtered ranking (Bordes et al. 2013), the term's other
true parents are removed from its ranking, and the query term itself is never
a candidate.

Metrics. MRR and Hits@k use the realistic rank of
:func:`textkg.evaluation.ranking.realistic_ranks` (ties count half;
Berrendorf et al. 2020, arXiv:2002.06914v4, Sec. 2). ``close@1`` is a
hierarchy-aware Hits@1: the fraction of queries whose top suggestion is in the
new term's neighbourhood: one of its true parents (the target, or a sibling
parent of a multi-parent term, which the filter already removes), a grandparent
(a parent of a true parent), a sibling (another child of a true parent; a
"child of a true parent" is exactly that) or one of the new term's own known
children. Parents, grandparents and siblings come from the training ``is_a``
statements only; the new term's parents and children are its held-out gold
statements. A top-1 tie among several candidates counts the fraction of the
tied candidates that are close, the expected value under a random tie-break,
so a constant scorer gets no credit it did not earn.

Baselines need no training: ``description-nn`` ranks candidates by the cosine
similarity of their description features to the new term's;
``parent-of-nearest`` finds the ``k`` candidates whose descriptions are most
similar to the new term's and scores each candidate by the summed similarity
of those neighbours it is a training parent of, breaking ties by description
cosine.

A combined scorer (the model, description cosine and a neighbour vote, each
standardised, in a weighted sum) is tuned on the *validation* placement
queries (``which="valid"``) and reported beside them; the method with the best
validation MRR is the one to suggest (:mod:`.combination`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from textkg.errors import ConfigError
from textkg.evaluation.placement.parents import ChildParents
from textkg.evaluation.ranking import realistic_ranks

#: The relation that places a term under its parent, when the caller names none.
DEFAULT_PARENT_RELATION = "is_a"
#: Neighbours ``parent-of-nearest`` reads.
DEFAULT_NEIGHBOURS = 10
#: Summed neighbour similarities closer than this count as tied (then description cosine decides).
AGGREGATE_RESOLUTION = 1e-4

#: Which new terms and statements :func:`placement_queries` reads, by ``which``.
_SIDES = {
    "test": lambda split: (split.test_entities, split.test),
    "valid": lambda split: (split.valid_entities, split.valid),
}

#: ``score(terms, candidates) -> (b, c)``: higher = more plausible parent.
PlacementScorer = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True, eq=False)
class PlacementQueries:
    """The placement queries of one split, grouped by candidate set.

    Attributes:
        terms: ``(q,)`` long new (held-out) term of each query.
        parents: ``(q,)`` long true parent (a training entity) of each query.
        relation: Id of the parent relation.
        groups: One ``(c_g,)`` sorted long candidate set per entity type (one
            set when the graph has no types).
        group_of: ``(q,)`` long index into ``groups`` of each query's candidates.
        true_parents: Every known parent of each new term (the filter).
        close: Entities a top suggestion for each new term may be and still
            count towards ``close@1`` (see the module docstring).
    """

    terms: torch.Tensor
    parents: torch.Tensor
    relation: int
    groups: tuple[torch.Tensor, ...]
    group_of: torch.Tensor
    true_parents: dict[int, frozenset[int]]
    close: dict[int, frozenset[int]]

    @property
    def num_queries(self) -> int:
        return len(self.terms)


@dataclass(frozen=True)
class PlacementMetrics:
    """Placement quality over ``num_queries`` queries (NaN when there are none).

    Attributes:
        mrr: Mean reciprocal realistic rank of the true parent.
        hits_at_1, hits_at_3, hits_at_10: Fraction of realistic ranks ``<= k``.
        close_at_1: Fraction of queries whose top suggestion is close (module docstring).
        num_queries: Number of ``(new_term, parent)`` queries.
    """

    mrr: float
    hits_at_1: float
    hits_at_3: float
    hits_at_10: float
    close_at_1: float
    num_queries: int

    def to_dict(self) -> dict:
        return {
            "mrr": self.mrr,
            "hits@1": self.hits_at_1,
            "hits@3": self.hits_at_3,
            "hits@10": self.hits_at_10,
            "close@1": self.close_at_1,
            "num_queries": self.num_queries,
        }

    @classmethod
    def from_ranks(cls, ranks: torch.Tensor, close: torch.Tensor) -> PlacementMetrics:
        """Summarise ``(q,)`` realistic ranks and ``(q,)`` close@1 credits in ``[0, 1]``."""

        def mean(x: torch.Tensor) -> float:
            return float(x.double().mean()) if len(x) else float("nan")

        return cls(
            mrr=mean(1.0 / ranks),
            hits_at_1=mean(ranks <= 1),
            hits_at_3=mean(ranks <= 3),
            hits_at_10=mean(ranks <= 10),
            close_at_1=mean(close),
            num_queries=len(ranks),
        )


def placement_queries(
    kg, split, *, relation: str | None = None, hierarchy: torch.Tensor | None = None, which: str = "test"
) -> PlacementQueries | None:
    """Build the placement queries of an inductive split.

    Args:
        kg: The :class:`~textkg.data.graph.KnowledgeGraph`.
        split: An inductive :class:`~textkg.data.graph.Split` of ``kg``.
        relation: Name of the parent relation; ``None`` means ``"is_a"``.
        which: ``"test"``: the test terms and statements; ``"valid"``: the
            validation ones (new terms too, for choosing a method without
            looking at test). Candidates are training entities either way.
        hierarchy: ``(m, 3)`` training statements the hierarchy of ``close@1``
            may read; ``None`` means all of ``split.train``. A private run
            passes its public training statements only, so that no private
            statement reaches a released metric unnoised.

    Returns:
        The queries, or ``None`` when the split is not inductive, the graph has
        no such relation (``relation=None`` only) or no ``which`` statement
        places a new term under a training entity.

    Raises:
        ConfigError: A ``relation`` that was named explicitly is not in the
            graph, or ``which`` is neither ``"test"`` nor ``"valid"``.
    """
    if which not in _SIDES:
        raise ConfigError(f"which must be one of {list(_SIDES)}, got {which!r}", field="which")
    name = DEFAULT_PARENT_RELATION if relation is None else relation
    if name not in kg.relations:
        if relation is None:
            return None
        raise ConfigError(f"unknown parent relation {relation!r}; the graph has {list(kg.relations)}", field="relation")
    if split.kind != "inductive":
        return None
    rel = kg.relations.index(name)
    is_train = _member(split.train_entities, kg.num_entities)
    new_entities, side = _SIDES[which](split)
    is_new = _member(new_entities, kg.num_entities)
    test = side[side[:, 1] == rel]
    test = test[is_new[test[:, 0]] & is_train[test[:, 2]]]
    if not len(test):
        return None
    test = test[torch.argsort(test[:, 0] * kg.num_entities + test[:, 2])]
    terms, parents = test[:, 0].clone(), test[:, 2].clone()

    types = kg.entity_types
    train_ids = split.train_entities.long()
    keys = [None] if types is None else sorted({types[p] for p in parents.tolist()})
    groups = tuple(
        train_ids
        if k is None
        else train_ids[torch.tensor([types[e] == k for e in train_ids.tolist()], dtype=torch.bool)]
        for k in keys
    )
    group_of = torch.tensor([0 if types is None else keys.index(types[p]) for p in parents.tolist()], dtype=torch.long)

    known = split.filter_triples[split.filter_triples[:, 1] == rel].tolist()
    statements = split.train if hierarchy is None else hierarchy
    train_edges = statements[statements[:, 1] == rel].tolist()
    up, down = adjacency(train_edges)
    new = set(terms.tolist())
    true_parents: dict[int, set[int]] = {n: set() for n in new}
    children: dict[int, set[int]] = {n: set() for n in new}
    for h, _, t in known:
        if h in new and is_train[t]:
            true_parents[h].add(t)
        if t in new and is_train[h]:
            children[t].add(h)
    close = {}
    for n in new:
        ps = true_parents[n]
        near = set(ps) | children[n]
        for p in ps:
            near |= up.get(p, set()) | down.get(p, set())
        near.discard(n)
        close[n] = frozenset(near)
    return PlacementQueries(
        terms=terms,
        parents=parents,
        relation=rel,
        groups=groups,
        group_of=group_of,
        true_parents={n: frozenset(v) for n, v in true_parents.items()},
        close=close,
    )


def rank_placement(
    scorer: PlacementScorer,
    queries: PlacementQueries,
    *,
    num_entities: int,
    batch_size: int = 256,
    with_close: bool = True,
) -> PlacementMetrics:
    """:class:`PlacementMetrics` of :func:`placement_ranks` (same arguments)."""
    return PlacementMetrics.from_ranks(
        *placement_ranks(scorer, queries, num_entities=num_entities, batch_size=batch_size, with_close=with_close)
    )


def placement_ranks(
    scorer: PlacementScorer,
    queries: PlacementQueries,
    *,
    num_entities: int,
    batch_size: int = 256,
    with_close: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank each query's true parent among its candidates.

    Each new term is scored once against its candidates, ``batch_size`` terms
    at a time (memory about ``batch_size * c`` floats).

    Args:
        scorer: ``scorer(terms (b,), candidates (c,)) -> (b, c)`` scores, higher
            = more plausible parent; no NaN.
        queries: From :func:`placement_queries`.
        num_entities: Number of entity ids in the graph.
        batch_size: New terms scored at once.
        with_close: Also the close@1 credits (``False``: NaN, for a caller that reads only the
            ranks, such as the tuner's grid, where close@1 was a third of the time on ``hpo``).

    Returns:
        ``(ranks, close)``: ``(q,)`` float64 filtered realistic rank of each
        query's true parent, and ``(q,)`` float64 close@1 credit in ``[0, 1]``.

    Raises:
        ConfigError: ``batch_size`` is not a positive integer.
        ValueError: The scorer returned a wrongly shaped or NaN score matrix.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}", field="batch_size")
    ranks = torch.empty(queries.num_queries, dtype=torch.float64)
    close = torch.full((queries.num_queries,), float("nan"), dtype=torch.float64)
    for g, cands in enumerate(queries.groups):
        column = torch.full((num_entities,), -1, dtype=torch.long)
        column[cands] = torch.arange(len(cands))
        idx = (queries.group_of == g).nonzero().squeeze(1)
        uniq, local = torch.unique(queries.terms[idx], return_inverse=True)
        for start in range(0, len(uniq), batch_size):
            chunk = uniq[start : start + batch_size]
            with torch.no_grad():
                scores = scorer(chunk, cands)
            check_scores(scores, len(chunk), len(cands))
            sel = ((local >= start) & (local < start + len(chunk))).nonzero().squeeze(1)
            rows = scores[local[sel] - start]  # (q_b, c)
            q = idx[sel]
            r, c = filtered_pairs(queries, q, column)
            ranks[q] = realistic_ranks(rows, column[queries.parents[q]], r, c)
            if with_close:
                close[q] = _close_at_1(rows, queries, q, column, r, c)
            del scores, rows  # not held while the next batch is scored (the memory estimate counts one batch)
    return ranks, close


def model_scorer(model, relation: int) -> PlacementScorer:
    """Score ``(term, relation, candidate)`` with a model's ``score_tails``."""

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        # on the CPU, where the description baselines it is compared and combined with live
        return model.score_tails(terms, torch.full_like(terms, relation), candidates).float().cpu()

    return score


class NewRowsModel:
    """A model whose entities ``ids`` are read from ``vectors`` (e.g. new terms re-read from their names alone).

    Offers the ``score_tails`` that :func:`model_scorer` calls; the other entities keep the model's vectors.

    Args:
        model: A :class:`~textkg.models.kge.KGEModel` in eval mode.
        ids: ``(n,)`` entity ids to replace.
        vectors: ``(n, d)`` their vectors (:meth:`KGEModel.embed_new_entities`).
    """

    def __init__(self, model, ids: torch.Tensor, vectors: torch.Tensor) -> None:
        with torch.no_grad():
            entities = model.entity_matrix().detach().clone()
            entities[ids.to(entities.device)] = vectors.to(entities)
        self.entities, self.relations = entities, model.relation_matrix().detach()
        self.interaction = model.interaction

    def score_tails(self, heads: torch.Tensor, relations: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        device = self.entities.device
        return self.interaction.score_tails(
            self.entities[heads.to(device)], self.relations[relations.to(device)], self.entities[candidates.to(device)]
        )


def cosine_scorer(features: torch.Tensor) -> PlacementScorer:
    """``description-nn``: cosine similarity of ``(num_entities, D)`` description features."""
    x = torch.nn.functional.normalize(features.detach().float(), dim=1)

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        return x[terms] @ x[candidates].T

    return score


def parent_of_nearest_scorer(
    features: torch.Tensor, parent_edges: torch.Tensor, *, k: int = DEFAULT_NEIGHBOURS
) -> PlacementScorer:
    """``parent-of-nearest``: parents of the ``k`` candidates most similar to the new term.

    A candidate's score is the summed cosine similarity of the neighbours it is
    a parent of (quantised to ``1e-4``), ties broken by its own cosine
    similarity to the new term.

    Args:
        features: ``(num_entities, D)`` description features.
        parent_edges: ``(m, 2)`` long ``(child, parent)`` training statements.
        k: Neighbours per new term.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}", field="k")
    cosine = cosine_scorer(features)
    parents = ChildParents(parent_edges, features.shape[0])

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        sim = cosine(terms, candidates)  # (b, c)
        top, cols = sim.topk(min(k, sim.shape[1]), dim=1)  # neighbours among the candidates
        aggregate = parents.votes(candidates[cols], top, candidates)  # (b, c) the neighbours' summed similarity
        key = torch.round(aggregate.double() / AGGREGATE_RESOLUTION)
        return key * 4 + (sim.double() + 1)  # cosine + 1 lies in [0, 2]: a lexicographic key

    return score


#: How a placement component is standardised (:func:`textkg.evaluation.scoring.standardise`): in float64,
#: since ``parent-of-nearest``'s keys (``key × 4 + cosine``) would tie in float32, by the population std.
STANDARDISE: dict = {"dtype": torch.float64, "population": True}

#: How the CLI names each placement method to a curator.
METHOD_LABELS = {
    "model": "the trained model",
    "description-nn": "the most similar existing term by description (baseline, no training)",
    "parent-of-nearest": "the parents of the most similar existing terms (baseline, no training)",
    "tfidf-nn": "the existing term sharing the most words (TF-IDF; baseline, no training)",
}
_COMPONENT_LABELS = {
    "model": "the trained model",
    "description": "description similarity",
    "vote": "the parents of the most similar existing terms",
    "rerank": "a re-ranker reading the words of both terms",
}
#: what a run's validation may choose to place with (``test.placement_selection.chosen``): the model, a
#: baseline (``tfidf-nn`` is reported, never chosen) or the combination
SELECTABLE_METHODS = ("model", "description-nn", "parent-of-nearest", "combined")
#: what a combination may weigh (``test.placement_selection.combined.weights``)
COMBINED_COMPONENTS = tuple(_COMPONENT_LABELS)


def placement_reading(result: dict) -> str:
    """One sentence a curator can read, from :func:`textkg.evaluation.placement.evaluate.evaluate_placement`'s result.

    With a ``placement_selection`` the sentence leads with the method chosen on
    validation terms, named, and puts the others' test numbers beside it;
    without one (no validation terms), with the trained model.
    """
    tests = {"model": result["placement"], **result.get("placement_baselines", {})}
    if result.get("placement_combined"):
        tests["combined"] = result["placement_combined"]
    selection = result.get("placement_selection")
    chosen = selection["chosen"] if selection else "model"
    m = tests[chosen]
    if selection:
        label = _method_label(chosen, selection)
        text = (
            f"New terms: the suggestions come from {label}, the best of {len(tests)} methods on the "
            f"validation terms; the true parent is its top suggestion for {m['hits@1']:.0%} of "
            f"{m['num_queries']:,} held-out (term, parent) pairs and in its top 10 for {m['hits@10']:.0%}"
        )
    else:
        text = (
            f"New terms: the true parent is the top suggestion for {m['hits@1']:.0%} of {m['num_queries']:,} "
            f"held-out (term, parent) pairs and in the top 10 for {m['hits@10']:.0%}"
        )
    text += (
        f"; the top suggestion is the parent or a close relative (grandparent, sibling, child) for {m['close@1']:.0%}"
    )
    others = [
        f"{'combined' if name == 'combined' else METHOD_LABELS[name].split(' (')[0]} "
        f"{o['hits@1']:.0%} / {o['hits@10']:.0%}"
        for name, o in tests.items()
        if name != chosen
    ]
    if others:
        text += f" (top 1 / top 10 of the others: {', '.join(others)})"
    if chosen in ("description-nn", "parent-of-nearest"):
        text += "; a baseline that needs no training is the better suggestion here"
    return text + "."


def _method_label(name: str, selection: dict) -> str:
    if name != "combined":
        return METHOD_LABELS[name]
    used = {c: w for c, w in selection["combined"]["weights"].items() if w > 0}
    parts = [_COMPONENT_LABELS[c] for c in used]
    names = " and ".join(parts) if len(parts) < 3 else ", ".join(parts[:-1]) + " and " + parts[-1]
    support = (selection["combined"].get("parent_support") or {}).get("weight", 0)
    lifted = f", each candidate lifted by {support:g} x its best parent's score" if support else ""
    if len(used) == 1:
        return names + lifted
    return f"a weighted combination of {names} (weights {', '.join(f'{w:g}' for w in used.values())}){lifted}"


# ---------------------------------------------------------------- helpers


def _member(ids: torch.Tensor, n: int) -> torch.Tensor:
    mask = torch.zeros(n, dtype=torch.bool)
    mask[ids.long()] = True
    return mask


def adjacency(edges: list[list[int]]) -> tuple[dict[int, set[int]], dict[int, set[int]]]:
    """``(parents_of, children_of)`` from ``[child, relation, parent]`` rows."""
    up: dict[int, set[int]] = {}
    down: dict[int, set[int]] = {}
    for child, _, parent in edges:
        up.setdefault(child, set()).add(parent)
        down.setdefault(parent, set()).add(child)
    return up, down


def filtered_pairs(
    queries: PlacementQueries, q: torch.Tensor, column: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(row, column)`` pairs removed from each query's ranking: other true parents and the term."""
    rows, cols = [], []
    for row, i in enumerate(q.tolist()):
        term, parent = int(queries.terms[i]), int(queries.parents[i])
        for e in (queries.true_parents[term] - {parent}) | {term}:
            c = int(column[e])
            if c >= 0:
                rows.append(row)
                cols.append(c)
    return torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)


def _close_at_1(
    scores: torch.Tensor,
    queries: PlacementQueries,
    q: torch.Tensor,
    column: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
) -> torch.Tensor:
    """``(q_b,)`` fraction of each row's top-scoring unfiltered candidates that are close.

    A filtered entry counts as ``-inf`` (so it is among the top only in a row whose every unfiltered score is
    ``-inf``); the scores are not copied: only the rows where a filtered entry reaches the row's maximum are.
    """
    best = scores.amax(1)  # (q_b,) the row maximum over the unfiltered entries, once corrected below
    hit = scores[rows, cols] >= best[rows]
    if bool(hit.any()):  # a filtered entry is the maximum: those rows again, without their filtered entries
        again = torch.unique(rows[hit])
        mine = torch.isin(rows, again)
        sub = scores[again].clone()
        sub[torch.searchsorted(again, rows[mine]), cols[mine]] = float("-inf")
        best[again] = sub.amax(1)
    top = scores == best[:, None]  # (q_b, c)
    top[rows, cols] = best[rows] == float("-inf")
    near_rows, near_cols = [], []
    for row, i in enumerate(q.tolist()):
        c = column[torch.tensor(sorted(queries.close[int(queries.terms[i])]), dtype=torch.long)]
        near_cols.append(c[c >= 0])
        near_rows.append(torch.full((len(near_cols[-1]),), row, dtype=torch.long))
    r, c = torch.cat(near_rows), torch.cat(near_cols)
    width = scores.shape[1]
    r, c = (x[~torch.isin(r * width + c, rows * width + cols)] for x in (r, c))  # a filtered entry is never close
    close = torch.bincount(r[top[r, c]], minlength=len(top))
    return close.double() / top.sum(1).double()


def check_scores(scores, b: int, c: int) -> None:
    if not isinstance(scores, torch.Tensor) or tuple(scores.shape) != (b, c):
        shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(f"placement scorer returned shape {shape}, expected ({b}, {c})")
    if torch.isnan(scores).any():
        raise ValueError("placement scorer returned NaN; cannot rank NaN scores")


__all__ = [
    "DEFAULT_NEIGHBOURS",
    "DEFAULT_PARENT_RELATION",
    "METHOD_LABELS",
    "NewRowsModel",
    "PlacementMetrics",
    "PlacementQueries",
    "check_scores",
    "cosine_scorer",
    "filtered_pairs",
    "model_scorer",
    "parent_of_nearest_scorer",
    "placement_queries",
    "placement_ranks",
    "placement_reading",
    "rank_placement",
]
