"""A combined placement scorer whose settings are chosen on validation terms only.

:mod:`textkg.evaluation.placement.methods` ranks a new term's true parents with the
trained model and with two baselines that need no training. This module adds:

* **Neighbour votes** (:func:`neighbour_vote_scorer`), the family that
  ``parent-of-nearest`` belongs to. The ``k`` existing terms whose descriptions
  are most similar to the new term vote for their own training parents.
  :class:`VoteConfig` sets how: the weight of a vote (raw cosine similarity, or
  a softmax over the ``k`` similarities at a temperature), whether a neighbour
  with several parents splits its vote among them, and whether grandparents get
  a share (``ancestor_decay`` times the parent's vote). The default
  ``VoteConfig()`` is ``parent-of-nearest``'s vote, and so is its ranking once
  ties are broken by cosine (:func:`vote_scorer`).
* **The combined scorer** (:func:`combined_scorer`). It is a weighted sum of
  each component's scores, standardised per new term over its candidates
  (zero mean, unit variance). The components are the trained model, the
  description cosine and a neighbour vote. A component with weight zero is
  never computed, and a single positive weight gives exactly that component's
  ranking.
* **The tuner** (:func:`tune_combination`). It runs on validation placement
  queries only: first the vote setting with the best MRR (ties broken by cosine),
  then the weights with the best MRR on a small grid. :func:`evaluate_combined`
  reports it on test. It also names the method, among the model, the baselines
  and the combination, with the best *validation* MRR. That method is the one
  the product suggests; test numbers never choose anything.

Everything the scorers read comes from the caller: description features
(public inputs) and the ``(child, parent)`` statements of the hierarchy, which in
a private run are the public training statements only (``hierarchy=`` of
:func:`evaluate_placement`). Validation queries are
built from validation statements, which are public inputs (docs/privacy.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from textkg.errors import ConfigError
from textkg.evaluation.placement.grid import weighting_ranks
from textkg.evaluation.placement.methods import AGGREGATE_RESOLUTION as _VOTE_RESOLUTION  # ties as parent-of-nearest
from textkg.evaluation.placement.methods import (
    DEFAULT_NEIGHBOURS,
    STANDARDISE,
    PlacementMetrics,
    PlacementQueries,
    PlacementScorer,
    cosine_scorer,  # noqa: F401  (re-exported: callers and tests read combination.cosine_scorer)
    rank_placement,
)
from textkg.evaluation.placement.parent_support import ROOT, parent_support_scorer, tune_parent_support
from textkg.evaluation.placement.parents import ChildParents
from textkg.evaluation.placement.shortlist import Shortlist, shortlist_scorer, tune_shortlist_weight
from textkg.evaluation.scoring import standardise, weighted_sum

#: Components of the combined scorer, in the order weights are listed.
COMPONENTS = ("model", "description", "vote")
#: Weight values tried per component (log-spaced: a sparse vote's standardised scores are large, so
#: it wants small weights); a combination is scaled so its largest weight is 1.
DEFAULT_WEIGHT_VALUES = (0.0, 0.03, 0.1, 0.3, 1.0)


@dataclass(frozen=True)
class VoteConfig:
    """How the ``k`` nearest existing terms vote for their parents.

    Attributes:
        k: Neighbours per new term (the most similar candidates by description cosine).
        temperature: ``None``: a neighbour's vote is its cosine similarity
            (``parent-of-nearest``). A positive number ``T``: the votes are
            ``softmax(similarity / T)`` over the ``k`` neighbours, so a small
            ``T`` trusts the nearest neighbours more.
        ancestor_decay: A parent also passes ``ancestor_decay`` times its vote
            to each of its own parents (the neighbour's grandparents); 0 = off.
        per_parent: A neighbour with ``p`` parents gives each ``1 / p`` of its vote.
    """

    k: int = DEFAULT_NEIGHBOURS
    temperature: float | None = None
    ancestor_decay: float = 0.0
    per_parent: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(f"k must be a positive integer, got {self.k!r}", field="k")
        if self.temperature is not None and not self.temperature > 0:
            raise ConfigError(f"temperature must be positive or None, got {self.temperature!r}", field="temperature")
        if not 0 <= self.ancestor_decay <= 1:
            raise ConfigError(f"ancestor_decay must be in [0, 1], got {self.ancestor_decay!r}", field="ancestor_decay")

    @property
    def name(self) -> str:
        """``parent-of-nearest`` plus the settings that differ from its own, e.g. ``parent-of-nearest[k=20,T=0.05]``."""
        parts = [f"k={self.k}"] if self.k != DEFAULT_NEIGHBOURS else []
        parts += [f"T={self.temperature:g}"] if self.temperature is not None else []
        parts += [f"grandparents={self.ancestor_decay:g}"] if self.ancestor_decay else []
        parts += ["per-parent"] if self.per_parent else []
        return "parent-of-nearest" + (f"[{','.join(parts)}]" if parts else "")

    def to_dict(self) -> dict:
        return {
            "k": self.k,
            "temperature": self.temperature,
            "ancestor_decay": self.ancestor_decay,
            "per_parent": self.per_parent,
        }


#: Vote settings the tuner tries (the first is ``parent-of-nearest`` itself): the best on the
#: *validation* terms of ``hpo`` and ``hpo-small`` (docs/results/placement.md; its script retired, at
#: commit 6a15498). Grandparent shares and per-parent splitting lost there, and are left out.
DEFAULT_VOTES = (
    VoteConfig(),
    VoteConfig(temperature=0.1),
    VoteConfig(k=20, temperature=0.1),
    VoteConfig(k=40, temperature=0.1),
    VoteConfig(k=20, temperature=0.05),
)


def neighbour_vote_scorer(
    features: torch.Tensor,
    parent_edges: torch.Tensor,
    *,
    vote: VoteConfig = VoteConfig(),
    similarity: PlacementScorer | None = None,
) -> PlacementScorer:
    """Summed votes of a new term's nearest existing terms for their parents (no tie-break).

    Args:
        features: ``(num_entities, D)`` description features.
        parent_edges: ``(m, 2)`` long ``(child, parent)`` training statements.
        vote: How neighbours vote.
        similarity: ``cosine_scorer(features)`` when the caller has it, e.g. kept for the batch
            (:func:`.text.last_call_memo`) so that the description component and the votes compute the
            ``(b, c)`` cosines once; ``None``: computed here (the same numbers).

    Returns:
        ``score(terms (b,), candidates (c,)) -> (b, c)`` float64 votes. A
        candidate no neighbour votes for scores 0.
    """
    x, votes = _votes_of_similarities(features, parent_edges, vote)

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        sim = x[terms] @ x[candidates].T if similarity is None else similarity(terms, candidates)
        return votes(sim, candidates)

    return score


def _votes_of_similarities(features: torch.Tensor, parent_edges: torch.Tensor, vote: VoteConfig):
    """``(x, votes)``: the L2-normalised features (``(b, c)`` cosines are ``x[terms] @ x[candidates].T``, as
    :func:`cosine_scorer`'s) and ``votes(cosines, candidates) -> (b, c)`` the summed votes."""
    x = torch.nn.functional.normalize(features.detach().float(), dim=1)
    n = x.shape[0]
    parents = ChildParents(parent_edges, n)  # the neighbours' statements only (:mod:`.parents`)
    child, parent = parents.child, parents.parent
    share = 1.0 / torch.bincount(child, minlength=n).double()[child] if vote.per_parent else None

    def up(w: torch.Tensor) -> torch.Tensor:  # (b, n) votes on children -> (b, n) votes on their parents
        return torch.zeros_like(w).index_add_(1, parent, w[:, child] * (1.0 if share is None else share))

    def votes(sim: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        top, cols = sim.topk(min(vote.k, sim.shape[1]), dim=1)  # neighbours among the candidates
        top = top.double() if vote.temperature is None else torch.softmax(top.double() / vote.temperature, 1)
        if not vote.ancestor_decay:
            return parents.votes(candidates[cols], top, candidates, share)
        weights = torch.zeros(len(sim), n, dtype=torch.float64).scatter_(1, candidates[cols], top)
        summed = up(weights)  # grandparents read every parent's votes: dense over the entities
        return (summed + vote.ancestor_decay * up(summed))[:, candidates]

    return x, votes


def vote_scorer(
    features: torch.Tensor, parent_edges: torch.Tensor, *, vote: VoteConfig = VoteConfig()
) -> PlacementScorer:
    """A neighbour vote with ties broken by description cosine; ``VoteConfig()`` ranks as ``parent-of-nearest``."""
    x, votes = _votes_of_similarities(features, parent_edges, vote)

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        sim = x[terms] @ x[candidates].T  # the description cosine, read once for the votes and the tie-break
        key = torch.round(votes(sim, candidates) / _VOTE_RESOLUTION)
        return key * 4 + (sim.double() + 1)  # cosine + 1 lies in [0, 2]

    return score


def combined_scorer(components: Mapping[str, PlacementScorer], weights: Mapping[str, float]) -> PlacementScorer:
    """``sum_i weights[i] * standardise(components[i])``: a weighted sum of standardised scores.

    Args:
        components: Named scorers.
        weights: Non-negative weight per name; names with weight 0 (or absent)
            are not computed.

    Raises:
        ConfigError: A weight names no component, is negative, or all are 0.
    """
    unknown = set(weights) - set(components)
    if unknown:
        raise ConfigError(
            f"weights for unknown components {sorted(unknown)}; known: {list(components)}", field="weights"
        )
    if any(w < 0 for w in weights.values()) or not any(w > 0 for w in weights.values()):
        raise ConfigError(f"weights must be non-negative and not all 0, got {dict(weights)}", field="weights")
    used = [(components[name], float(w)) for name, w in weights.items() if w > 0]

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        # one component standardised at a time, added in order (not all K held before the sum)
        return weighted_sum((w, standardise(s(terms, candidates), **STANDARDISE)) for s, w in used)

    return score


def weight_grid(names: Sequence[str], values: Sequence[float] = DEFAULT_WEIGHT_VALUES) -> list[dict[str, float]]:
    """Every weighting of ``names`` from ``values`` whose largest weight is 1 (scale does not change a ranking).

    Simpler weightings (fewer non-zero weights) come first, so that on a tie the tuner keeps them;
    among equally simple ones, those that weigh the earlier names more.
    """
    top = max(values)
    grid = [
        dict(zip(names, (v / top for v in ws), strict=True))
        for ws in itertools.product(values, repeat=len(names))
        if max(ws) == top
    ]
    return sorted(grid, key=lambda w: (sum(v > 0 for v in w.values()), [-v for v in w.values()]))


@dataclass(frozen=True)
class Combination:
    """The combined scorer the tuner chose, and its validation metrics.

    Attributes:
        weights: Weight per component (:data:`COMPONENTS` that were available).
        vote: The vote setting (``None`` when no hierarchy statement was available).
        valid: Metrics of the combination on the validation queries.
        tried: Validation MRR of every vote setting and weighting tried, by name.
    """

    weights: dict[str, float]
    vote: VoteConfig | None
    valid: PlacementMetrics
    tried: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "weights": self.weights,
            "vote": None if self.vote is None else self.vote.to_dict(),
            "valid_mrr": self.valid.mrr,
            "tried_valid_mrr": self.tried,
        }


def tune_combination(
    components: Mapping[str, PlacementScorer],
    valid: PlacementQueries,
    *,
    num_entities: int,
    features: torch.Tensor | None = None,
    parent_edges: torch.Tensor | None = None,
    votes: Sequence[VoteConfig] = DEFAULT_VOTES,
    weight_values: Sequence[float] = DEFAULT_WEIGHT_VALUES,
    batch_size: int = 256,
) -> Combination:
    """Choose the combined scorer on validation placement queries only.

    Step 1 (when ``features`` and a non-empty ``parent_edges`` are given):
    the vote setting with the best validation MRR, each ranked with ties broken
    by cosine (:func:`vote_scorer`); it becomes component ``"vote"``. Step 2:
    the weighting of the components (:func:`weight_grid`) with the best
    validation MRR; on a tie the earlier (simpler) one.

    Args:
        components: Named scorers besides the vote, e.g. ``{"model": ...,
            "description": ...}``.
        valid: Validation placement queries (never test ones).
        num_entities: Number of entity ids in the graph.
        features: ``(num_entities, D)`` description features for the votes.
        parent_edges: ``(m, 2)`` ``(child, parent)`` statements the votes may read.
        votes: Vote settings to try.
        weight_values: Weight values per component.
        batch_size: New terms scored at once.
    """
    weights, vote, tried = _tuned(
        components,
        valid,
        num_entities=num_entities,
        features=features,
        parent_edges=parent_edges,
        votes=votes,
        weight_values=weight_values,
        batch_size=batch_size,
    )
    if vote is not None:
        assert features is not None and parent_edges is not None  # a vote is only chosen from them
        components = {**components, "vote": neighbour_vote_scorer(features, parent_edges, vote=vote)}
    metrics = rank_placement(
        combined_scorer(components, weights), valid, num_entities=num_entities, batch_size=batch_size
    )  # the scorer reported on test, on validation
    return Combination(weights=weights, vote=vote, valid=metrics, tried=tried)


def _tuned(
    components: Mapping[str, PlacementScorer],
    valid: PlacementQueries,
    *,
    num_entities: int,
    features: torch.Tensor | None,
    parent_edges: torch.Tensor | None,
    votes: Sequence[VoteConfig],
    weight_values: Sequence[float],
    batch_size: int,
    similarity: PlacementScorer | None = None,
) -> tuple[dict[str, float], VoteConfig | None, dict[str, float]]:
    """:func:`tune_combination`'s choice, ``(weights, vote, tried)``, without ranking it again on ``valid``
    (:func:`evaluate_combined` with an added component ranks only the weighting that adds it); ``similarity``: as
    :func:`evaluate_combined`'s."""
    if valid.num_queries == 0:
        raise ConfigError("no validation placement queries to tune on", field="valid")
    tried: dict[str, float] = {}
    components = dict(components)
    vote = None
    if features is not None and parent_edges is not None and len(parent_edges):
        if not votes:
            raise ConfigError("votes is empty", field="votes")
        best: tuple[float, VoteConfig] | None = None
        for v in votes:
            mrr = rank_placement(
                vote_scorer(features, parent_edges, vote=v),
                valid,
                num_entities=num_entities,
                batch_size=batch_size,
                with_close=False,  # only the MRR chooses
            ).mrr
            tried[v.name] = mrr
            if best is None or mrr > best[0]:
                best = (mrr, v)
        assert best is not None  # votes is not empty
        vote = best[1]
        components["vote"] = neighbour_vote_scorer(features, parent_edges, vote=vote, similarity=similarity)
    names = list(components)
    grid = weight_grid(names, weight_values)
    mrrs = _weighting_mrrs(components, grid, valid, num_entities=num_entities, batch_size=batch_size)
    best_weights: tuple[float, dict[str, float]] | None = None
    for weights, mrr in zip(grid, mrrs, strict=True):
        tried["combined" + _weights_name(weights)] = mrr
        if best_weights is None or mrr > best_weights[0]:
            best_weights = (mrr, weights)
    assert best_weights is not None  # the grid has at least one point
    return best_weights[1], vote, tried


#: Weights tried for one component added to a tuned combination (whose largest weight is 1); 0 leaves it out.
ADDED_WEIGHT_VALUES = (0.0, 0.1, 0.3, 1.0, 3.0, 10.0)


def tune_added_weight(
    components: Mapping[str, PlacementScorer],
    weights: Mapping[str, float],
    name: str,
    scorer: PlacementScorer,
    valid: PlacementQueries,
    *,
    num_entities: int,
    values: Sequence[float] = ADDED_WEIGHT_VALUES,
    batch_size: int = 256,
) -> tuple[dict[str, float], dict[str, float]]:
    """The weight of one more component ``name`` added to a tuned combination, chosen on validation.

    Tries ``weights`` plus ``name`` at each of ``values`` (in order; on a tie the
    earlier, so 0, "left out", wins a tie), then ``name`` alone.

    Returns:
        ``(weights, tried)``: the chosen weighting (``name`` included, possibly at 0)
        and the validation MRR of each weighting tried, by name.
    """
    everything = {n: s for n, s in {**components, name: scorer}.items() if weights.get(n, 0) > 0 or n == name}
    options = [{**weights, name: float(v)} for v in values]
    options.append({**{n: 0.0 for n in weights}, name: 1.0})
    options = [w for w in options if any(v > 0 for v in w.values())]
    tried: dict[str, float] = {}
    best: tuple[float, dict[str, float]] | None = None
    if options:
        mrrs = _weighting_mrrs(everything, options, valid, num_entities=num_entities, batch_size=batch_size)
        for w, mrr in zip(options, mrrs, strict=True):
            tried["combined" + _weights_name(w)] = mrr
            if best is None or mrr > best[0]:
                best = (mrr, w)
    if best is None:
        raise ConfigError("no weighting to try: values holds no positive weight", field="values")
    return best[1], tried


def evaluate_combined(
    components: Mapping[str, PlacementScorer],
    valid: PlacementQueries,
    test: PlacementQueries,
    *,
    num_entities: int,
    baselines: Mapping[str, PlacementScorer],
    features: torch.Tensor | None = None,
    parent_edges: torch.Tensor | None = None,
    votes: Sequence[VoteConfig] = DEFAULT_VOTES,
    weight_values: Sequence[float] = DEFAULT_WEIGHT_VALUES,
    batch_size: int = 256,
    added: tuple[str, PlacementScorer] | None = None,
    reported: Mapping[str, PlacementScorer] | None = None,
    similarity: PlacementScorer | None = None,
    shortlist: Shortlist | None = None,
) -> dict:
    """Tune the combination on ``valid``, report it on ``test``, and choose the method to suggest on ``valid``.

    Args:
        components: ``{"model": ..., "description": ...}`` scorers (see :func:`tune_combination`).
        valid, test: Validation and test placement queries.
        num_entities: Number of entity ids in the graph.
        baselines: The named baselines (``description-nn``, ``parent-of-nearest``)
            that compete with the model and the combination for the choice.
        features, parent_edges, votes, weight_values, batch_size: See :func:`tune_combination`.
        added: ``(name, scorer)`` of one more component (the re-ranker) whose weight is chosen on
            ``valid`` after the others' (:func:`tune_added_weight`); the combination without it is
            reported beside it (``placement_combined_without_<name>``).
        reported: Scorers reported on ``valid`` (``valid_reported_only``) but never chosen
            (e.g. ``tfidf-nn``, which ``textkg place`` does not offer).
        similarity: ``cosine_scorer(features)`` kept for the batch (:func:`.text.last_call_memo`), which the
            chosen vote reads with an added component, instead of computing the cosines again
            (:func:`neighbour_vote_scorer`); the same numbers.
        shortlist: A cross-encoder over the combination's top candidates (:mod:`.shortlist`), its weight chosen
            on ``valid`` after everything else; the combination without it is reported beside it
            (``placement_combined_without_cross_encoder``) and its settings under
            ``placement_selection.combined.cross_encoder``.

    With ``parent_edges``, parent support (:mod:`.parent_support`: a candidate's best parent's score, weight
    chosen on ``valid``, 0 = not used) is added to the tuned combination before the shortlist; the
    combination without it is reported beside it (``placement_combined_without_parent_support``) and its
    settings under ``placement_selection.combined.parent_support``.

    Returns:
        ``{"placement_combined": test metrics of the combination,
        "placement_selection": {"chosen": name, "criterion": ..., "valid":
        {name: validation metrics}, "combined": Combination.to_dict()}}``.
        ``chosen`` is ``"model"``, a baseline's name or ``"combined"``: the
        best validation MRR; on a tie the simpler (earlier in that order).
    """
    settings: dict[str, Any] = {
        "num_entities": num_entities,
        "features": features,
        "parent_edges": parent_edges,
        "votes": votes,
        "weight_values": weight_values,
        "batch_size": batch_size,
    }
    if added is None:
        combo = tune_combination(components, valid, **settings)
        weights, vote, tried = combo.weights, combo.vote, combo.tried
    else:  # ranked on validation once, below, with the added component's weight
        weights, vote, tried = _tuned(components, valid, **settings, similarity=similarity)
    scorers = dict(components)
    if vote is not None:
        # the tuner only picks a vote when it was given the features and the parent statements
        assert features is not None and parent_edges is not None
        scorers["vote"] = neighbour_vote_scorer(features, parent_edges, vote=vote, similarity=similarity)
    out: dict = {}
    if added is not None:
        name, scorer = added
        with_added, added_tried = tune_added_weight(
            scorers, weights, name, scorer, valid, num_entities=num_entities, batch_size=batch_size
        )
        out[f"placement_combined_without_{name}"] = rank_placement(
            combined_scorer(scorers, weights), test, num_entities=num_entities, batch_size=batch_size
        ).to_dict()
        scorers[name] = scorer
        combo = Combination(
            weights=with_added,
            vote=vote,
            valid=rank_placement(
                combined_scorer(scorers, with_added), valid, num_entities=num_entities, batch_size=batch_size
            ),
            tried={**tried, **added_tried},
        )
    final = combined_scorer(scorers, combo.weights)
    support: dict | None = None
    if parent_edges is not None and len(parent_edges):
        weight_p, support_tried = tune_parent_support(
            final, parent_edges, valid, num_entities=num_entities, batch_size=batch_size
        )
        out["placement_combined_without_parent_support"] = rank_placement(
            final, test, num_entities=num_entities, batch_size=batch_size
        ).to_dict()
        if weight_p > 0:
            final = parent_support_scorer(final, parent_edges, weight_p)
            combo = replace(combo, valid=rank_placement(final, valid, num_entities=num_entities, batch_size=batch_size))
        support = {"weight": weight_p, "root": ROOT, "tried_valid_mrr": support_tried}
    cross: dict | None = None
    if shortlist is not None:
        weight, cross_tried = tune_shortlist_weight(
            final, shortlist, valid, num_entities=num_entities, batch_size=batch_size
        )
        out["placement_combined_without_cross_encoder"] = rank_placement(
            final, test, num_entities=num_entities, batch_size=batch_size
        ).to_dict()
        if weight > 0:
            final = shortlist_scorer(final, shortlist, weight)
            combo = replace(combo, valid=rank_placement(final, valid, num_entities=num_entities, batch_size=batch_size))
        cross = {
            "top_k": shortlist.top_k,
            "weight": weight,
            "tried_valid_mrr": cross_tried,
        }
    test_metrics = rank_placement(final, test, num_entities=num_entities, batch_size=batch_size)
    if cross is not None and shortlist is not None:  # after the test terms' shortlists
        cross.update(pairs_scored=shortlist.pair_scores.pairs_scored, seconds=round(shortlist.pair_scores.seconds, 1))
    on_valid = (
        {"model": rank_placement(components["model"], valid, num_entities=num_entities, batch_size=batch_size)}
        if "model" in components
        else {}
    )
    on_valid.update(
        {
            name: rank_placement(s, valid, num_entities=num_entities, batch_size=batch_size)
            for name, s in baselines.items()
        }
    )
    on_valid["combined"] = combo.valid
    chosen = max(on_valid, key=lambda name: (on_valid[name].mrr, -list(on_valid).index(name)))
    not_chosen = {
        name: rank_placement(s, valid, num_entities=num_entities, batch_size=batch_size).to_dict()
        for name, s in (reported or {}).items()
    }
    return {
        "placement_combined": test_metrics.to_dict(),
        **out,
        "placement_selection": {
            "chosen": chosen,
            "criterion": "validation placement MRR",
            "valid": {name: m.to_dict() for name, m in on_valid.items()},
            **({"valid_reported_only": not_chosen} if not_chosen else {}),
            "combined": {
                **combo.to_dict(),
                **({"parent_support": support} if support is not None else {}),
                **({"cross_encoder": cross} if cross is not None else {}),
            },
        },
    }


def _weights_name(weights: Mapping[str, float]) -> str:
    return "[" + ",".join(f"{name}={w:g}" for name, w in weights.items() if w > 0) + "]"


def _weighting_mrrs(
    components: Mapping[str, PlacementScorer],
    weightings: Sequence[Mapping[str, float]],
    valid: PlacementQueries,
    *,
    num_entities: int,
    batch_size: int,
) -> list[float]:
    """Validation MRR of ``combined_scorer(components, w)`` for each ``w`` of ``weightings``, equal to
    :func:`rank_placement`'s, from one pass over the standardised components (:func:`weighting_ranks`)."""
    names = list(components)
    standardised = [_standardised(components[n]) for n in names]
    vectors = [[float(w.get(n, 0.0)) for n in names] for w in weightings]
    ranks = weighting_ranks(standardised, vectors, valid, num_entities=num_entities, batch_size=batch_size)
    nan = torch.full((valid.num_queries,), float("nan"), dtype=torch.float64)  # close@1 is not read
    return [PlacementMetrics.from_ranks(r, nan).mrr for r in ranks]


def _standardised(scorer: PlacementScorer) -> PlacementScorer:
    """``standardise(scorer)`` as :func:`combined_scorer` computes it, in float32 as the grid adds it."""
    return lambda terms, candidates: standardise(scorer(terms, candidates), **STANDARDISE).float()


__all__ = [
    "COMPONENTS",
    "Combination",
    "DEFAULT_VOTES",
    "DEFAULT_WEIGHT_VALUES",
    "VoteConfig",
    "combined_scorer",
    "evaluate_combined",
    "neighbour_vote_scorer",
    "tune_added_weight",
    "tune_combination",
    "vote_scorer",
    "weight_grid",
]
