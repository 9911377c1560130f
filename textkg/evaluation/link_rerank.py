"""A learned re-ranker for link prediction on new entities: a (new entity, relation) query against the
current scorer's top ``k`` answers.

The first stage (the model, or the model + the description neighbour vote chosen on validation,
:mod:`textkg.evaluation.neighbour_vote`) reads a new entity as one pooled vector. Over its top
``k`` answers of each query ``(q, r, ?)`` (and ``(?, r, q)``) the re-ranker reads cheap pair
features (:data:`FEATURES`):

* ``first_stage``: the first stage's score (model standardised per query, plus its votes);
* ``vote``: the neighbour vote alone (0 without one);
* ``type``: ``log(1 + #training statements with the candidate as r's answer in this direction)``, a
  relation-conditioned type prior (answers of "nationality" are countries);
* ``type_spread``: the same prior averaged over the candidate's nearest training entities by
  description (the vote's spread kernel): a new candidate "described like a country";
* ``tfidf``: TF-IDF cosine of the query entity's text and the candidate's
  (:class:`textkg.evaluation.placement.text.TfIdf`);
* ``stem_tfidf``: the same over words cut to their first :data:`STEM` characters (a word and its
  derived forms: WordNet's ``_derivationally_related_form``);
* ``relation_text``: TF-IDF cosine of the relation's text and the candidate's;
* ``degree``: ``log(1 + training degree)`` of the candidate;
* ``holder_max``, ``holder_mean``, ``answer_centroid``, ``text_cosine``: the query's description vector
  against those of the training entities that hold ``(r, candidate)``, the candidate's against ``r``'s
  typical answer, and the two texts' cosine (:mod:`textkg.evaluation.link_features`).

Which features take part is chosen per run with the weight (:data:`FEATURE_SETS`, by the same
cross-fitting): a feature that helps on one graph and hurts on another is left out where it hurts.

No "is the candidate new" feature: held-out statements leave the training graph with their entities, so
a benchmark split over-represents held-out entities as answers, and such a feature (weight +2.5 on
FB15k-237) learns the split's construction, not a signal a curator's new entity carries.

The score ``g(f)`` is added to the first stage as ``first_stage + weight · g(f)`` within the top ``k``;
the order outside it is the first stage's. It has one of two forms (:data:`FORMS`), chosen on validation
with the feature set and the weight:

* ``linear``: ``g(f) = f . w``, fitted listwise (ListNet, :func:`textkg.evaluation.listwise.fit_listnet`);
* ``mlp``: one hidden layer of ``tanh`` units beside a linear skip, on standardised features
  (:func:`textkg.evaluation.listwise.fit_listnet_mlp`), tried on the widest feature set of the run
  (the last of :attr:`LinkRerankConfig.feature_sets`). A feature's worth may then depend on the others:
  on inductive FB15k-237 the holders' similarity, the answer centroid and the type prior count
  differently for "nationality" (five answers) and "film release region" (hundreds), and the linear form
  cannot say so (docs/results/new_entities.md). **It is fitted on validation statements, not training ones**: a
training entity's first-stage score is the score of an entity whose statements the model was
trained on, far better than a new entity's, and no training answer is a new entity, so a fit there
learns to trust the model and the priors too much. Validation entities are new, as test ones are.
The weight is chosen by cross-fitting (:func:`choose_rerank`): the validation lists are split into
folds by query entity, each fold is ranked with the weights fitted on the others, and the weight
with the best out-of-fold MRR wins (0, the first stage alone, wins a tie); the final ``w`` is then
fitted on every validation list. Ranks are filtered and realistic as in
:mod:`textkg.evaluation.ranking`: the list is the top ``k`` after the filter.

Only the statements the caller passes are read (under privacy, the public training statements:
the priors, the degrees and the vote are released through the ranking), the public texts and the
validation statements (public inputs).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import torch

from textkg.errors import ConfigError
from textkg.evaluation.link_features import (
    FEATURES,
    MAX_TABLE_ENTRIES,
    NEIGHBOUR_FEATURES,
    SHIPPED,
    STEM,
    LinkFeatures,
    QueryRows,
    stemmed,
)
from textkg.evaluation.listwise import MLP_PARAMETERS, fit_listnet, fit_listnet_mlp, mlp_scores
from textkg.evaluation.neighbour_vote import NeighbourVote
from textkg.evaluation.scoring import Part, standardise, weighted_sum

#: The feature sets tried on validation, in order (the first wins a tie): each is used or left out whole.
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "shipped": SHIPPED,
    "holders": SHIPPED + ("holder_max", "holder_mean"),
    "centroid": SHIPPED + ("answer_centroid",),
    "cosine": SHIPPED + ("text_cosine",),
    "all": FEATURES,
}
#: The re-ranker's forms (module docstring), in order (the first wins a tie).
FORMS = ("linear", "mlp")
#: Most hidden units a saved ``mlp`` re-ranker may hold (it is read from a run's ``metrics.json``).
MAX_HIDDEN = 256
#: Lists a fitted re-ranker scores at once (:meth:`LinkReranker.score`): 4,096 lists of 50 candidates hold a
#: 52 MiB ``(rows, K, 32)`` float64 block of the ``mlp`` form's activations.
SCORE_ROWS = 4096
#: Re-ranker weights tried on validation (0: the first stage alone).
DEFAULT_RERANK_WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


@dataclass(frozen=True)
class LinkRerankConfig:
    """How the re-ranker is fitted and chosen.

    Attributes:
        top_k: Candidates re-ranked per query (the first stage's top ``top_k`` after the filter).
        folds: Cross-fitting folds over the validation query entities.
        steps: L-BFGS iterations.
        l2: Ridge penalty.
        seed: Seeds the folds (and the ``mlp`` form's start).
        weights: Re-ranker weights tried.
        feature_sets: Names in :data:`FEATURE_SETS` tried with every weight.
        forms: Names in :data:`FORMS` tried: ``linear`` on every feature set, ``mlp`` on the last one.
        hidden: The ``mlp`` form's hidden units.
        mlp_steps: The ``mlp`` form's L-BFGS iterations.
        mlp_l2: The ``mlp`` form's ridge penalty.
    """

    top_k: int = 50
    folds: int = 2
    steps: int = 100
    l2: float = 1e-3
    seed: int = 0
    weights: tuple[float, ...] = DEFAULT_RERANK_WEIGHTS
    feature_sets: tuple[str, ...] = tuple(FEATURE_SETS)
    forms: tuple[str, ...] = FORMS
    hidden: int = 32
    mlp_steps: int = 200
    mlp_l2: float = 1e-4

    def __post_init__(self) -> None:
        for name in ("top_k", "folds", "steps", "hidden", "mlp_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}", field=name)
        if self.folds < 2:
            raise ConfigError(f"folds must be >= 2, got {self.folds}", field="folds")
        if self.hidden > MAX_HIDDEN:
            raise ConfigError(f"hidden must be at most {MAX_HIDDEN}, got {self.hidden}", field="hidden")
        if not self.l2 >= 0 or not self.mlp_l2 >= 0 or not self.weights or any(not w >= 0 for w in self.weights):
            raise ConfigError("l2 and every weight must be >= 0, with one weight at least", field="weights")
        unknown = [f for f in self.feature_sets if f not in FEATURE_SETS]
        if unknown or not self.feature_sets:
            raise ConfigError(
                f"feature_sets must name some of {', '.join(FEATURE_SETS)}, got {list(self.feature_sets)}",
                field="feature_sets",
            )
        if not self.forms or any(f not in FORMS for f in self.forms) or "linear" not in self.forms:
            raise ConfigError(
                f"forms must name some of {', '.join(FORMS)}, linear among them, got {list(self.forms)}", field="forms"
            )

    def candidates(self) -> list[tuple[str, str]]:
        """``(form, feature set)`` pairs tried, in tie-breaking order: ``linear`` on every set, then ``mlp`` on
        the last."""
        out = [("linear", name) for name in self.feature_sets]
        if "mlp" in self.forms:
            out.append(("mlp", self.feature_sets[-1]))
        return out


def candidate_key(form: str, feature_set: str) -> str:
    """The name a ``(form, feature set)`` pair has in reports: the set's name for ``linear``, ``mlp:SET``."""
    return feature_set if form == "linear" else f"{form}:{feature_set}"


@dataclass(frozen=True)
class LinkReranker:
    """A fitted, chosen re-ranker.

    Attributes:
        weights: ``{feature: w}`` in :data:`FEATURES` order (0 outside ``feature_set``); for the ``mlp`` form,
            the linear skip's weights on the standardised features.
        weight: Its weight beside the first stage, chosen on validation (0: not used).
        top_k: Candidates it re-ranks per query.
        feature_set: The :data:`FEATURE_SETS` name chosen with the weight.
        form: The :data:`FORMS` name chosen with them.
        mlp: The ``mlp`` form's other parameters, ``{name: list}`` over :data:`FEATURES`
            (:data:`textkg.evaluation.listwise.MLP_PARAMETERS` less ``linear``; ``None`` for ``linear``).
    """

    weights: dict[str, float]
    weight: float
    top_k: int
    feature_set: str = "shipped"
    form: str = "linear"
    mlp: dict[str, list] | None = None

    @property
    def key(self) -> str:
        return candidate_key(self.form, self.feature_set)

    def to_dict(self) -> dict:
        out = {
            "weights": dict(self.weights),
            "weight": self.weight,
            "top_k": self.top_k,
            "feature_set": self.feature_set,
            "form": self.form,
        }
        if self.mlp is not None:
            out["mlp"] = {n: list(v) for n, v in self.mlp.items()}
        return out

    def score(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., K)`` float64 re-ranker scores ``g(f)`` of features ``x (..., K, F)`` (module docstring).

        Lists ``(n, K, F)`` are scored :data:`SCORE_ROWS` at a time (each list's scores are its own), so that
        the float64 copies and the ``mlp`` form's ``(rows, K, hidden)`` activations stay bounded however many
        test lists there are (all of FB15k-237's 103,436 at once: a 3.9 GB live peak, 6.5 GiB resident)."""
        if x.ndim >= 3 and len(x) > SCORE_ROWS:
            return torch.cat([self.score(x[i : i + SCORE_ROWS]) for i in range(0, len(x), SCORE_ROWS)])
        if self.mlp is None:
            return x.double() @ self.vector()
        params = {n: torch.tensor(v, dtype=torch.float64) for n, v in self.mlp.items()}
        return mlp_scores({**params, "linear": self.vector()}, x)

    @classmethod
    def from_dict(cls, saved: object, *, file: str | None = None) -> LinkReranker:
        """From :meth:`to_dict`'s output as read from a run's ``metrics.json`` (data from outside the process).

        A re-ranker saved before the :data:`NEIGHBOUR_FEATURES` (weights for :data:`SHIPPED` only) still loads,
        with 0 for them.

        Raises:
            ConfigError: Not a weight for each of :data:`SHIPPED` and at most :data:`FEATURES`, a weight that
                is not a finite number, a ``top_k`` that is not a positive integer, or an unknown
                ``feature_set``; naming ``file`` and the field.
        """
        field = "test.link_rerank"
        block = saved if isinstance(saved, dict) else {}
        weights = block.get("weights")
        if not isinstance(weights, dict) or not set(SHIPPED) <= set(weights) <= set(FEATURES):
            raise ConfigError(
                f"expected a weight for each of {', '.join(SHIPPED)} and at most {', '.join(NEIGHBOUR_FEATURES)}",
                file=file,
                field=field,
            )
        feature_set = block.get("feature_set", "shipped")
        if not isinstance(feature_set, str) or feature_set not in FEATURE_SETS:
            raise ConfigError(
                f"feature_set must be one of {', '.join(FEATURE_SETS)}, got {feature_set!r}", file=file, field=field
            )
        for name, w in [*weights.items(), ("weight", block.get("weight"))]:
            if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w < -1e6 or w > 1e6:
                raise ConfigError(f"{name!r} must be a finite number, got {w!r}", file=file, field=field)
        top_k = block.get("top_k")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= 100_000:
            raise ConfigError(f"top_k must be an integer in [1, 100000], got {top_k!r}", file=file, field=field)
        form = block.get("form", "linear")
        if not isinstance(form, str) or form not in FORMS:
            raise ConfigError(f"form must be one of {', '.join(FORMS)}, got {form!r}", file=file, field=field)
        mlp = _read_mlp(block.get("mlp"), file=file) if form == "mlp" else None
        if form == "linear" and "mlp" in block:
            raise ConfigError("a linear re-ranker has no mlp block", file=file, field=field)
        linear = {n: float(weights.get(n, 0.0)) for n in FEATURES}
        return cls(linear, float(block["weight"]), top_k, feature_set, form, mlp)

    def vector(self) -> torch.Tensor:
        return torch.tensor([self.weights[n] for n in FEATURES], dtype=torch.float64)


def _read_mlp(saved: object, *, file: str | None) -> dict[str, list]:
    """The ``mlp`` block of a saved re-ranker, checked: every parameter of
    :data:`textkg.evaluation.listwise.MLP_PARAMETERS` but ``linear``, of its shape over :data:`FEATURES` with
    ``1..MAX_HIDDEN`` hidden units, finite numbers only, ``scale > 0``."""
    field = "test.link_rerank.mlp"
    names = [n for n in MLP_PARAMETERS if n != "linear"]
    if not isinstance(saved, dict) or set(saved) != set(names):
        raise ConfigError(f"expected exactly {', '.join(names)}", file=file, field=field)

    def numbers(value: object, length: int, name: str) -> list[float]:
        if not isinstance(value, list) or len(value) != length:
            raise ConfigError(f"{name} must be a list of {length} numbers", file=file, field=field)
        for v in value:
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or abs(v) > 1e6:
                raise ConfigError(f"{name} must hold finite numbers, got {v!r}", file=file, field=field)
        return [float(v) for v in value]

    f = len(FEATURES)
    hidden = len(saved["hidden_bias"]) if isinstance(saved["hidden_bias"], list) else 0
    if not 1 <= hidden <= MAX_HIDDEN:
        raise ConfigError(f"hidden_bias must hold 1 to {MAX_HIDDEN} numbers", file=file, field=field)
    rows = saved["hidden_in"]
    if not isinstance(rows, list) or len(rows) != f:
        raise ConfigError(f"hidden_in must be {f} rows of {hidden} numbers", file=file, field=field)
    scale = numbers(saved["scale"], f, "scale")
    if any(s <= 0 for s in scale):
        raise ConfigError("scale must be > 0", file=file, field=field)
    out: dict[str, list] = {
        "mean": numbers(saved["mean"], f, "mean"),
        "scale": scale,
        "hidden_in": [numbers(row, hidden, "hidden_in") for row in rows],
        "hidden_bias": numbers(saved["hidden_bias"], hidden, "hidden_bias"),
        "hidden_out": numbers(saved["hidden_out"], hidden, "hidden_out"),
    }
    return out


def first_stage(
    model, vote: NeighbourVote | None, weights: tuple[float, float], queries, relations, candidates, direction: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(first (b, c), vote (b, c))``: standardised model scores + ``λ · vote + μ · spread`` (the
    combination :class:`textkg.evaluation.neighbour_vote.VoteScorer` scores), and the vote alone
    (new query entities only; zeros without a vote)."""
    h_or_t = queries
    s = (
        model.score_tails(h_or_t, relations, candidates)
        if direction == "tail"
        else model.score_heads(relations, h_or_t, candidates)
    )
    z = standardise(s).cpu()
    if vote is None:
        return z, torch.zeros_like(z)
    votes = vote.votes(queries, relations, direction)
    v = votes[:, candidates] * vote.gate(queries)[:, None]
    parts: list[Part] = [(1.0, z), (weights[0], v)]
    if weights[1]:
        parts.append((weights[1], vote.spread(queries, relations, direction, votes=votes)[:, candidates]))
    return weighted_sum(parts), v


@dataclass
class Lists:
    """The top-``k`` lists of a set of ranking queries, cached for fitting and ranking.

    Attributes:
        x: ``(n, K, F)`` features.
        mask: ``(n, K)`` the list's real candidates (fewer than ``K`` remain after the filter).
        target: ``(n,)`` the target's position in its list, -1 when outside it.
        base: ``(n,)`` the first stage's filtered realistic rank.
        query: ``(n,)`` the query entity.
        cpu_seconds: Process CPU seconds spent ``{"first_stage": ..., "features": ...}`` building them.
    """

    x: torch.Tensor
    mask: torch.Tensor
    target: torch.Tensor
    base: torch.Tensor
    query: torch.Tensor
    cpu_seconds: dict[str, float] = dataclasses.field(default_factory=dict)

    def ranks(self, w: torch.Tensor, weight: float) -> torch.Tensor:
        """``(n,)`` float64 ranks with the linear re-ranker ``w`` at ``weight``: within the list, the realistic
        rank of ``first + weight · x . w``; outside it, the first stage's rank."""
        return self.ranks_by(self.x.double() @ w.double(), weight)

    def ranks_by(self, scores: torch.Tensor, weight: float) -> torch.Tensor:
        """:meth:`ranks` with the re-ranker's scores ``g(x)`` given, ``(n, K)``: ``first + weight · g(x)``."""
        if not weight:
            return self.base.clone()
        s = self.x[..., 0].double() + weight * scores.double()
        s = s.masked_fill(~self.mask, float("-inf"))
        inside = self.target >= 0
        t = s.gather(1, self.target.clamp_min(0)[:, None])
        greater = (s > t).sum(1)
        equal = (s == t).sum(1) - 1
        return torch.where(inside, 1.0 + greater.double() + equal.double() / 2, self.base)

    def recall(self) -> float:
        """The share of queries whose target is inside their list (the first stage's filtered recall at ``K``)."""
        return float((self.target >= 0).float().mean()) if len(self.target) else 0.0

    def subset(self, keep: torch.Tensor) -> Lists:
        return Lists(self.x[keep], self.mask[keep], self.target[keep], self.base[keep], self.query[keep])


def collect_lists(
    model,
    vote: NeighbourVote | None,
    vote_weights: tuple[float, float],
    features: LinkFeatures,
    triples: torch.Tensor,
    *,
    filter_index,
    candidates: torch.Tensor,
    top_k: int,
    batch_size: int = 256,
    exclude_query: bool = False,
) -> Lists:
    """:class:`Lists` of both directions of ``triples`` (heads first, then tails, as
    :func:`textkg.evaluation.neighbour_vote.rank_weights` orders them)."""
    from textkg.evaluation.ranking import filtered_targets, realistic_ranks

    column = torch.full((features.new.numel(),), -1, dtype=torch.long)
    column[candidates] = torch.arange(len(candidates))
    k = min(top_k, len(candidates))
    out: list[Lists] = []
    cpu = {"first_stage": 0.0, "features": 0.0}
    with torch.no_grad():
        for direction in ("head", "tail"):
            for start in range(0, len(triples), batch_size):
                h, r, t = triples[start : start + batch_size].unbind(1)
                rows, cols, query, targets = filtered_targets(
                    torch.stack([h, r, t], 1), direction, filter_index, column, exclude_query=exclude_query
                )
                clock = time.process_time()
                first, v = first_stage(model, vote, vote_weights, query, r, candidates, direction)
                base = realistic_ranks(first, targets, rows, cols)
                cpu["first_stage"] += time.process_time() - clock
                clock = time.process_time()
                kept = first.index_put((rows, cols), torch.tensor(float("-inf")))
                top = kept.topk(k, dim=1)
                mask = top.values > float("-inf")
                cand = candidates[top.indices]  # (b, K) ids
                x = features(
                    features.entity_query_rows(query), r, direction, cand, first.gather(1, top.indices),
                    v.gather(1, top.indices),
                )  # fmt: skip
                hit = top.indices == targets[:, None]
                target = torch.where(hit.any(1), hit.float().argmax(1), torch.full_like(targets, -1))
                out.append(Lists(x, mask, target, base, query))
                cpu["features"] += time.process_time() - clock
    fields = ("x", "mask", "target", "base", "query")
    return Lists(**{f: torch.cat([getattr(p, f) for p in out]) for f in fields}, cpu_seconds=cpu)


def fit_on(lists: Lists, config: LinkRerankConfig, feature_set: str = "all") -> torch.Tensor:
    """``(F,)`` weights over :data:`FEATURES` fitted on the lists whose target is inside, with the features of
    ``feature_set`` only (0 for the others; zeros when no target is inside)."""
    inside = lists.target >= 0
    w = torch.zeros(len(FEATURES), dtype=torch.float64)
    if not bool(inside.any()):
        return w
    columns = torch.tensor([FEATURES.index(f) for f in FEATURE_SETS[feature_set]])
    sub = lists.subset(inside)
    y = torch.zeros(sub.mask.shape, dtype=torch.bool)
    y[torch.arange(len(y)), sub.target] = True
    fitted, _ = fit_listnet(sub.x[..., columns], y, steps=config.steps, l2=config.l2, mask=sub.mask)
    w[columns] = torch.tensor(fitted, dtype=torch.float64)
    return w


def fit_candidate(lists: Lists, config: LinkRerankConfig, form: str, feature_set: str, weight: float = 0.0):
    """A :class:`LinkReranker` of ``form`` on ``feature_set`` fitted on ``lists`` (at ``weight``)."""
    if form == "linear":
        w = fit_on(lists, config, feature_set)
        return LinkReranker(dict(zip(FEATURES, w.tolist(), strict=True)), float(weight), config.top_k, feature_set)
    columns = torch.tensor([FEATURES.index(f) for f in FEATURE_SETS[feature_set]])
    f, h = len(FEATURES), config.hidden
    params = {
        "mean": torch.zeros(f, dtype=torch.float64),
        "scale": torch.ones(f, dtype=torch.float64),
        "linear": torch.zeros(f, dtype=torch.float64),
        "hidden_in": torch.zeros(f, h, dtype=torch.float64),
        "hidden_bias": torch.zeros(h, dtype=torch.float64),
        "hidden_out": torch.zeros(h, dtype=torch.float64),
    }
    inside = lists.target >= 0
    if bool(inside.any()):
        sub = lists.subset(inside)
        y = torch.zeros(sub.mask.shape, dtype=torch.bool)
        y[torch.arange(len(y)), sub.target] = True
        fitted, _ = fit_listnet_mlp(
            sub.x[..., columns], y, hidden=h, steps=config.mlp_steps, l2=config.mlp_l2, mask=sub.mask, seed=config.seed
        )
        for name in ("mean", "scale", "linear"):
            params[name][columns] = fitted[name]
        params["hidden_in"][columns] = fitted["hidden_in"]
        params["hidden_bias"], params["hidden_out"] = fitted["hidden_bias"], fitted["hidden_out"]
    weights = dict(zip(FEATURES, params.pop("linear").tolist(), strict=True))
    mlp = {n: v.tolist() for n, v in params.items()}
    return LinkReranker(weights, float(weight), config.top_k, feature_set, form, mlp)


def choose_rerank_sets(lists: Lists, config: LinkRerankConfig) -> tuple[LinkReranker, dict[str, dict[float, float]]]:
    """The re-ranker fitted on validation ``lists``, its form, feature set and weight chosen together by
    cross-fitting (module docstring): the best out-of-fold MRR wins; a tie goes to the earlier of
    :meth:`LinkRerankConfig.candidates` (the fewer features, then the linear form), then to the smaller weight.
    Weight 0 ranks as the first stage alone whatever the candidate, so the first stage alone wins a tie.

    Returns:
        ``(re-ranker, {candidate key: {weight: out-of-fold validation MRR}})``, keys by :func:`candidate_key`.
    """
    entities = torch.unique(lists.query)
    g = torch.Generator().manual_seed(config.seed)
    fold_of = torch.zeros(int(entities.max()) + 1 if len(entities) else 1, dtype=torch.long)
    fold_of[entities[torch.randperm(len(entities), generator=g)]] = torch.arange(len(entities)) % config.folds
    fold = fold_of[lists.query]
    by_set: dict[str, dict[float, float]] = {}
    candidates = config.candidates()
    for form, name in candidates:
        ranks = {w: torch.empty(len(fold), dtype=torch.float64) for w in config.weights}
        for f in range(config.folds):
            held = fold == f
            part = lists.subset(held)
            scores = fit_candidate(lists.subset(~held), config, form, name).score(part.x)
            for weight in config.weights:
                ranks[weight][held] = part.ranks_by(scores, weight)
        by_set[candidate_key(form, name)] = {w: float(r.reciprocal().mean()) for w, r in ranks.items()}
    order = {candidate_key(*c): i for i, c in enumerate(candidates)}
    key, chosen = max(
        ((n, w) for n in by_set for w in by_set[n]), key=lambda nw: (by_set[nw[0]][nw[1]], -order[nw[0]], -nw[1])
    )
    form, name = candidates[order[key]]
    return fit_candidate(lists, config, form, name, chosen), by_set


def choose_rerank(lists: Lists, config: LinkRerankConfig) -> tuple[LinkReranker, dict[float, float]]:
    """:func:`choose_rerank_sets`, with the out-of-fold MRR by weight of the chosen feature set only.

    Returns:
        ``(re-ranker, {weight: out-of-fold validation MRR})``.
    """
    reranker, by_set = choose_rerank_sets(lists, config)
    return reranker, by_set[reranker.key]


def rerank_row(reranker: LinkReranker, first: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``(b, K)`` final scores of a top-``K`` list: ``first + weight · g(x)`` (``first (b, K)``, ``x (b, K, F)``)."""
    return first.double() + reranker.weight * reranker.score(x)


def rerank_top(
    reranker: LinkReranker,
    features: LinkFeatures,
    query_rows: QueryRows,
    relations: torch.Tensor,
    direction: str,
    first: torch.Tensor,
    vote: torch.Tensor,
    k: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(scores (b, k), entity ids (b, k))``: the first stage's top ``reranker.top_k`` of every entity,
    re-scored (:func:`rerank_row`) and sorted; ``first`` and ``vote`` are ``(b, n)`` over all entities
    (``textkg predict``, where nothing is filtered)."""
    top = first.topk(min(reranker.top_k, first.shape[1]), dim=1)
    x = features(query_rows, relations, direction, top.indices, top.values, vote.gather(1, top.indices))
    final = rerank_row(reranker, top.values, x)
    values, order = final.topk(min(k, final.shape[1]), dim=1)
    return values, top.indices.gather(1, order)


__all__ = [
    "DEFAULT_RERANK_WEIGHTS",
    "FEATURES",
    "FEATURE_SETS",
    "FORMS",
    "MAX_HIDDEN",
    "SCORE_ROWS",
    "candidate_key",
    "fit_candidate",
    "NEIGHBOUR_FEATURES",
    "SHIPPED",
    "QueryRows",
    "LinkFeatures",
    "MAX_TABLE_ENTRIES",
    "STEM",
    "stemmed",
    "LinkRerankConfig",
    "LinkReranker",
    "Lists",
    "choose_rerank",
    "choose_rerank_sets",
    "collect_lists",
    "first_stage",
    "rerank_row",
    "rerank_top",
]
