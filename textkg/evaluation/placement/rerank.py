"""A learned re-ranker for placement: pair features of (new term, candidate parent), fitted on the graph itself.

The combined scorer (:mod:`.combination`) reads each new term as one
pooled MiniLM vector. The re-ranker adds what a pooled vector loses, the words:
for each (term, candidate) pair it reads a few cached features

* ``description``: MiniLM description cosine, standardised per term;
* ``vote``: the neighbour vote (``parent-of-nearest``'s family), standardised per term;
* ``tfidf``: TF-IDF cosine of the two texts (:func:`.placement_text.tfidf_scorer`);
* ``containment``: the share of the candidate's name words found in the new
  term's text (:func:`.placement_text.containment_scorer`);
* ``children`` and ``depth``: ``log(1 + #children)`` and the ``is_a`` depth of
  the candidate in the training hierarchy (a prior: real additions go under
  terms that already have children, rarely under the root); the terms being
  scored are never counted among the children (:class:`PairFeatures`), so a
  training term fitted as a new term sees its parent as a new term would;
* optional (:attr:`RerankConfig.extra`, :data:`OPTIONAL_FEATURES`; :data:`DEFAULT_EXTRA` by default) ``sibling_max`` and
  ``sibling_mean``: MiniLM cosine to the candidate's most similar child and to its
  children's centroid (:func:`.siblings.children_scorer`: a new term reads like its siblings);
  ``sibling_tfidf``: the same with TF-IDF vectors of the words (:func:`.context.children_tfidf_scorer`);
  ``name_containment``: ``containment`` read on the new term's name (:func:`.context.name_containment_scorer`);
  ``maxsim``: late interaction, the candidate's name words matched to the new term's words by their
  MiniLM word vectors (:func:`.late.maxsim_scorer`; needs a word encoder); ``tfidf_vote``: the neighbour
  vote with TF-IDF neighbours (:func:`.context.word_vote_scorer`); ``synonym_containment``: ``containment`` read
  on the candidate's name and each of its synonyms, the best (:func:`.placement_text.synonym_containment_scorer`);

and scores it with a linear function ``w . f``, a listwise learning-to-rank
model (ListNet-style softmax cross-entropy, Cao et al. 2007, ICML, eq. 2 with a
top-one probability; the multi-parent form sums the positives' probabilities).
It is fitted on **training** terms: each sampled training term plays a new term,
its candidates are the other training terms (the sampled batch itself left out,
so a term never votes for its own parents), the positives are its training
parents and the negatives the current first-stage scorer's own top ``k``
(hard negatives). Only public inputs and the hierarchy the caller passes are
read (under privacy, the public training statements).

Its score joins the combination as one more standardised component, with its
weight chosen on validation terms (:func:`.placement_ensemble.tune_added_weight`);
when validation gives it weight 0 it is not used, and the result says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from textkg.errors import ConfigError
from textkg.evaluation.listwise import fit_listnet
from textkg.evaluation.placement.late import WordEncoder
from textkg.evaluation.placement.methods import STANDARDISE, PlacementScorer
from textkg.evaluation.scoring import standardise

#: Pair features, in the order of :attr:`Reranker.weights` (the last two are candidate priors).
SCORED_FEATURES = ("description", "vote", "tfidf", "containment")
PRIOR_FEATURES = ("children", "depth")
#: Pair features a config may add (between the scored features and the priors, in this order): the
#: children's MiniLM features (:mod:`.siblings`), the children's words and the new term's name
#: (:mod:`.context`), late interaction on word vectors (:mod:`.late`).
OPTIONAL_FEATURES = (
    "sibling_max",
    "sibling_mean",
    "sibling_tfidf",
    "name_containment",
    "maxsim",
    "tfidf_vote",
    "synonym_containment",
)
#: The optional features built from the texts here (the others come with the caller's scorers).
TEXT_FEATURES = ("sibling_tfidf", "name_containment", "maxsim", "tfidf_vote", "synonym_containment")
#: The optional features fitted by default, chosen on the README split's validation terms (docs/results/placement.md,
#: "Late interaction and the candidate's context for the re-ranker", 2026-11-28; its script retired, at commit 5831cda):
#: ``sibling_mean`` alone 0.5986, + ``tfidf_vote`` 0.6094, + ``maxsim`` and ``tfidf_vote`` 0.6128, + those two,
#: ``sibling_tfidf`` and ``name_containment`` 0.6129 (a tie at four digits, at about three times the per-batch cost:
#: the post-run CPU budget binds, so the cheaper set is the default). Those numbers predate the children prior
#: without the scored terms (:class:`PairFeatures`), with which the default reaches 0.6307 (docs/results/placement.md,
#: "The re-ranker's children prior without the scored terms"; its script at commit b25af53).
#: ``synonym_containment`` joined on 2026-12-07 (issue 54; docs/results/placement.md, "A candidate's synonyms"): on the
#: README split's seed-0 run, validation 0.6599 -> 0.6609 (names only 0.5954 -> 0.6023), test 0.6493 -> 0.6517.
DEFAULT_EXTRA = ("sibling_mean", "maxsim", "tfidf_vote", "synonym_containment")
#: Longest ``is_a`` path followed when computing depths (a cycle stops here).
_MAX_DEPTH = 64


@dataclass(frozen=True)
class RerankConfig:
    """How the re-ranker is fitted.

    Attributes:
        top_k: Hard negatives per training term: the first-stage scorer's top ``top_k``.
        num_terms: Training terms sampled to fit on (all when fewer).
        batch_size: Training terms scored at once.
        steps: L-BFGS iterations.
        l2: Ridge penalty on the weights.
        seed: Seeds the sample of training terms (the fit itself is deterministic).
        extra: Features of :data:`OPTIONAL_FEATURES` read besides the fixed ones (default
            :data:`DEFAULT_EXTRA`).
        sibling_share: The share of the ``num_terms`` fitted on in whole sibling batches
            (:func:`sibling_batch_lists`): a parent's leaf children scored together, so that the children prior,
            the children's features and the votes see their parent as an addition's parent often is, a term
            with no children left (0: every term drawn at random).
    """

    top_k: int = 50
    num_terms: int = 3000
    batch_size: int = 64
    steps: int = 100
    l2: float = 1e-3
    seed: int = 0
    extra: tuple[str, ...] = DEFAULT_EXTRA
    sibling_share: float = 0.0

    def __post_init__(self) -> None:
        for name in ("top_k", "num_terms", "batch_size", "steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}", field=name)
        if not self.l2 >= 0:
            raise ConfigError(f"l2 must be >= 0, got {self.l2!r}", field="l2")
        if not 0 <= self.sibling_share <= 1:
            raise ConfigError(f"sibling_share must be in [0, 1], got {self.sibling_share!r}", field="sibling_share")
        unknown = [name for name in self.extra if name not in OPTIONAL_FEATURES]
        if unknown or len(set(self.extra)) != len(self.extra):
            raise ConfigError(
                f"extra must be distinct names of {list(OPTIONAL_FEATURES)}, got {self.extra!r}", field="extra"
            )


@dataclass(frozen=True)
class Reranker:
    """A fitted re-ranker: one weight per feature.

    Attributes:
        weights: ``{feature name: weight}`` in :data:`SCORED_FEATURES` + :data:`PRIOR_FEATURES` order.
        num_terms: Training terms it was fitted on.
        train_loss: Final mean listwise loss on them.
    """

    weights: dict[str, float]
    num_terms: int
    train_loss: float

    def to_dict(self) -> dict:
        return {"weights": dict(self.weights), "num_terms": self.num_terms, "train_loss": self.train_loss}

    @classmethod
    def from_dict(cls, saved: object, *, file: str | None = None) -> Reranker:
        """A re-ranker from :meth:`to_dict`'s output as read from a run's ``metrics.json`` (data from
        outside the process: the six fixed feature names and any of :data:`OPTIONAL_FEATURES`, each a
        finite number).

        Raises:
            ConfigError: Anything else, naming ``file`` and the field.
        """
        import math

        field = "test.placement_rerank.weights"
        weights = saved.get("weights") if isinstance(saved, dict) else None
        fixed = set(SCORED_FEATURES + PRIOR_FEATURES)
        if not isinstance(weights, dict) or not fixed <= set(weights) <= fixed | set(OPTIONAL_FEATURES):
            raise ConfigError(
                f"expected a weight for each of {', '.join(sorted(fixed))} and for any of "
                f"{', '.join(OPTIONAL_FEATURES)}",
                file=file,
                field=field,
            )
        names = feature_names(tuple(n for n in OPTIONAL_FEATURES if n in weights))
        for name, w in weights.items():
            if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w):
                raise ConfigError(f"weight of {name!r} must be a finite number, got {w!r}", file=file, field=field)
        assert isinstance(saved, dict)
        return cls(
            weights={n: float(weights[n]) for n in names},
            num_terms=int(saved.get("num_terms") or 0),
            train_loss=float(saved.get("train_loss") or 0.0),
        )


def feature_names(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The re-ranker's features in weight order: the scored ones, ``extra`` (in :data:`OPTIONAL_FEATURES` order),
    the priors."""
    return SCORED_FEATURES + tuple(n for n in OPTIONAL_FEATURES if n in extra) + PRIOR_FEATURES


def hierarchy_priors(parent_edges: torch.Tensor, num_entities: int) -> torch.Tensor:
    """``(num_entities, 2)`` ``[log(1 + #children), depth]`` from ``(m, 2)`` ``(child, parent)`` statements.

    Depth is the length of the shortest ``is_a`` path up to a term without parents
    (0 for such a term), capped at 64.
    """
    edges = parent_edges.long().reshape(-1, 2)
    child, parent = edges.T
    children = torch.bincount(parent, minlength=num_entities).double()
    depth = torch.full((num_entities,), float(_MAX_DEPTH), dtype=torch.float64)
    has_parent = torch.zeros(num_entities, dtype=torch.bool)
    has_parent[child] = True
    depth[~has_parent] = 0
    for _ in range(_MAX_DEPTH):  # relax: depth(child) = 1 + min depth(parent)
        proposal = torch.full_like(depth, float(_MAX_DEPTH)).scatter_reduce(0, child, depth[parent] + 1, reduce="amin")
        new = torch.minimum(depth, proposal)
        if torch.equal(new, depth):
            break
        depth = new
    return torch.stack([children.log1p(), depth], dim=1).float()


class PairFeatures:
    """``(b, c, f)`` features of terms against candidates (module docstring).

    Args:
        scorers: ``{name: scorer}`` for each of :data:`SCORED_FEATURES`.
        priors: ``(num_entities, 2)`` from :func:`hierarchy_priors`.
        extra: Names of :data:`OPTIONAL_FEATURES` read besides the fixed ones.
        parent_edges: The ``(m, 2)`` ``(child, parent)`` statements ``priors`` were counted from. Given, a
            candidate's ``children`` leaves out the scored terms themselves, as ``sibling_*`` and the vote do:
            a training term fitted as a new term is not among its parents' children, as a real new term
            never is (counting it taught the fit that a true parent always has a child; on the README
            split, validation MRR 0.6128 -> 0.6307: docs/results/placement.md; its script at commit b25af53).
            A term not in ``parent_edges`` (a validation, test or new term) changes nothing.
    """

    def __init__(
        self,
        scorers: Mapping[str, PlacementScorer],
        priors: torch.Tensor,
        extra: Sequence[str] = (),
        *,
        parent_edges: torch.Tensor | None = None,
    ) -> None:
        unknown = set(extra) - set(OPTIONAL_FEATURES)
        if unknown:
            raise ConfigError(
                f"unknown pair features {sorted(unknown)}; optional: {list(OPTIONAL_FEATURES)}", field="extra"
            )
        extra = tuple(n for n in OPTIONAL_FEATURES if n in extra)
        scored = SCORED_FEATURES + extra
        missing = set(scored) - set(scorers)
        if missing:
            raise ConfigError(f"pair features need scorers for {sorted(missing)}", field="scorers")
        self.names = feature_names(extra)
        self.scorers = [scorers[name] for name in scored]
        self.priors = priors.float()
        edges = torch.empty(0, 2, dtype=torch.long) if parent_edges is None else parent_edges.long().reshape(-1, 2)
        self._child, self._parent = edges.T
        self._counts = torch.bincount(self._parent, minlength=len(self.priors)).float()

    def __call__(self, terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        # each feature is written into the (b, c, F) result as it is computed: one (b, c) float64 standardised
        # feature and the result are held at once, not a list of F features, their stack and its copy
        # (:func:`textkg.pipeline.memory.placement_bytes` counts this)
        out = torch.empty(len(terms), len(candidates), len(self.names))
        for i, s in enumerate(self.scorers):
            out[:, :, i] = standardise(s(terms, candidates), **STANDARDISE)  # float64 rounded to float32
        prior = self.priors[candidates]  # (c, 2), scaled over the candidates as the fitted weights were learned
        mine = torch.isin(self._child, terms)  # the scored terms' own statements: not counted as children
        if bool(mine.any()):
            counts = self._counts - torch.bincount(self._parent[mine], minlength=len(self._counts)).float()
            prior = torch.stack([counts[candidates].log1p(), prior[:, 1]], dim=1)
        prior = (prior - prior.mean(0)) / prior.std(0, unbiased=False).clamp_min(1e-6)
        out[:, :, len(self.scorers) :] = prior  # (c, 2), the same for every term
        return out


def reranker_scorer(reranker: Reranker, features: PairFeatures) -> PlacementScorer:
    """``score(terms, candidates) = features(terms, candidates) . w``."""
    w = torch.tensor([reranker.weights[name] for name in features.names], dtype=torch.float32)

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        return features(terms, candidates) @ w

    return score


def fit_reranker(
    features: PairFeatures,
    first_stage: PlacementScorer,
    parent_edges: torch.Tensor,
    candidates: torch.Tensor,
    *,
    config: RerankConfig = RerankConfig(),
) -> Reranker:
    """Fit the re-ranker's weights on training terms (module docstring).

    Args:
        features: The pair features.
        first_stage: The current scorer whose top ``config.top_k`` are the hard negatives.
        parent_edges: ``(m, 2)`` ``(child, parent)`` training statements (the positives).
        candidates: ``(c,)`` training entities a parent is chosen from.
        config: Sample size, negatives, optimiser.

    Raises:
        ConfigError: No training term has a parent among ``candidates``.
    """
    edges = parent_edges.long().reshape(-1, 2)
    size = int(max(int(candidates.max()), int(edges.max()) if len(edges) else 0)) + 1
    is_cand = torch.zeros(size, dtype=torch.bool)
    is_cand[candidates.long()] = True
    edges = edges[is_cand[edges[:, 0]] & is_cand[edges[:, 1]]]
    terms = torch.unique(edges[:, 0])
    if not len(terms):
        raise ConfigError("no training term has a parent among the candidates to fit the re-ranker on")
    batches = fit_batches(edges, terms, config)
    parents_of: dict[int, list[int]] = {}
    for c, p in edges.tolist():
        parents_of.setdefault(c, []).append(p)
    plans = []
    for batch in batches:
        # a term of the batch is no candidate (it would vote for its own parents), unless it is another's parent:
        # then it stays a candidate and its own query is dropped
        needed = {p for t in batch.tolist() for p in parents_of[t]} & set(batch.tolist())
        cands = candidates[
            ~torch.isin(candidates, batch) | torch.isin(candidates, torch.tensor(sorted(needed), dtype=torch.long))
        ]
        plans.append((batch, needed, cands))
    # one list length K for every term (they are stacked): on a small ontology a batch leaves fewer than
    # top_k candidates, and a batch of another size leaves another number (issue 51, item 9)
    k = min(config.top_k, *(len(cands) for _, _, cands in plans))
    xs, ys = [], []
    for batch, needed, cands in plans:
        column = {int(e): i for i, e in enumerate(cands.tolist())}
        with torch.no_grad():
            f = features(batch, cands)  # (b, c, F)
            top = first_stage(batch, cands).topk(k, dim=1).indices  # (b, K)
        for row, term in enumerate(batch.tolist()):
            pos = [column[p] for p in parents_of[term] if p in column]
            if not pos or term in needed:
                continue
            listed = top[row].tolist()
            extra = [p for p in pos if p not in listed][:k]  # the true parents the first stage missed
            index = torch.tensor(listed[: k - len(extra)] + extra)
            xs.append(f[row, index])
            ys.append(torch.isin(index, torch.tensor(pos)))
    if not xs:
        raise ConfigError("no training term kept a parent among its candidates to fit the re-ranker on")
    weights, final = fit_listnet(torch.stack(xs), torch.stack(ys), steps=config.steps, l2=config.l2)  # (n, K, F)
    return Reranker(weights=dict(zip(features.names, weights, strict=True)), num_terms=len(xs), train_loss=final)


def fit_batches(edges: torch.Tensor, terms: torch.Tensor, config: RerankConfig) -> list[torch.Tensor]:
    """The batches of training terms the re-ranker is fitted on: ``config.num_terms`` of ``terms`` (all when fewer),
    ``config.sibling_share`` of them in whole sibling batches (:func:`sibling_batch_lists`), the rest drawn at random
    (seeded by ``config.seed``), each part in batches of at most ``config.batch_size``."""
    g = torch.Generator().manual_seed(config.seed)
    wanted = min(config.num_terms, len(terms))
    grouped = sibling_batch_lists(edges, terms, round(config.sibling_share * wanted), config) if wanted else []
    taken = torch.tensor([t for b in grouped for t in b.tolist()], dtype=torch.long)
    rest = terms[~torch.isin(terms, taken)]
    rest = torch.sort(rest[torch.randperm(len(rest), generator=g)[: wanted - len(taken)]]).values
    return grouped + [rest[i : i + config.batch_size] for i in range(0, len(rest), config.batch_size)]


def sibling_batch_lists(
    edges: torch.Tensor, terms: torch.Tensor, count: int, config: RerankConfig
) -> list[torch.Tensor]:
    """About ``count`` of ``terms`` in batches of whole sibling groups: the groups of
    :func:`textkg.data.addition_holdout.sibling_batches` (the leaf children of one parent, the groups that leave
    their parent with no child first, in an order seeded by ``config.seed``), as the ``sibling-batches`` validation
    terms are drawn; each batch holds whole groups up to ``config.batch_size`` terms (a larger group fills batches
    of its own). Real additions come so: 118 of CL's 349 added pairs went under a term that had no child before
    (:mod:`textkg.data.addition_holdout`), a case a random draw of training terms almost never shows the fit."""
    if count <= 0:
        return []
    from textkg.data.addition_holdout import sibling_groups

    triples = torch.stack([edges[:, 0], torch.zeros(len(edges), dtype=torch.long), edges[:, 1]], dim=1)
    groups: list[list[int]] = []
    listed = 0
    for group in sibling_groups(triples, 0, terms, seed=config.seed):
        if listed >= count:
            break
        groups.append(group)
        listed += len(group)
    batches: list[list[int]] = []
    for group in groups:
        if batches and len(batches[-1]) + len(group) <= config.batch_size:
            batches[-1].extend(group)
        else:
            batches.extend(group[i : i + config.batch_size] for i in range(0, len(group), config.batch_size))
    return [torch.tensor(sorted(b), dtype=torch.long) for b in batches]


def fitted_reranker(
    rerank: RerankConfig | Reranker,
    *,
    texts: Sequence[str],
    names: Sequence[str],
    scorers: Mapping[str, PlacementScorer],
    parent_edges: torch.Tensor,
    fit_on: torch.Tensor,
    first_stage: PlacementScorer | None = None,
    candidates: torch.Tensor | None = None,
    word_encoder: WordEncoder | None = None,
    synonyms: Sequence[Sequence[str]] | None = None,
) -> tuple[Reranker, PlacementScorer]:
    """The re-ranker (fitted per ``rerank`` when a config, else as given) and its scorer.

    Args:
        rerank: A config to fit with, or a fitted re-ranker (e.g. from a run's metrics).
        texts: What each entity id is read from.
        names: Each entity id's name.
        scorers: ``{"description": ..., "vote": ...}`` component scorers.
        parent_edges: ``(m, 2)`` ``(child, parent)`` statements the priors and positives read.
        fit_on: Entity ids whose texts fit the TF-IDF vocabulary (training terms).
        first_stage: The scorer whose top candidates are the hard negatives (to fit only).
        candidates: ``(c,)`` candidate parents of the training terms fitted on (to fit only).
        word_encoder: ``words -> (n, D)`` vectors, for the ``maxsim`` feature (:mod:`.late`).
        synonyms: Each entity id's synonyms (``KnowledgeGraph.entity_synonyms``), for ``synonym_containment``
            (``None``: none known, each candidate read on its name).

    Raises:
        ConfigError: ``rerank`` is a config but ``first_stage`` or ``candidates`` is missing, or it
            reads ``maxsim`` without a ``word_encoder``.
    """
    from textkg.evaluation.placement.text import containment_scorer, last_call_memo, tfidf_scorer

    tfidf = last_call_memo(tfidf_scorer(texts, fit_on))  # read by "tfidf" and "tfidf_vote" on each batch
    extra = (
        rerank.extra if isinstance(rerank, RerankConfig) else tuple(n for n in OPTIONAL_FEATURES if n in rerank.weights)
    )
    features = PairFeatures(
        {
            **scorers,
            "tfidf": tfidf,
            "containment": containment_scorer(texts, names, fit_on),
            **text_feature_scorers(
                extra,
                texts=texts,
                names=names,
                parent_edges=parent_edges,
                fit_on=fit_on,
                word_encoder=word_encoder,
                tfidf=tfidf,
                synonyms=synonyms,
            ),
        },
        hierarchy_priors(parent_edges, len(texts)),
        extra,
        parent_edges=parent_edges,
    )
    if isinstance(rerank, RerankConfig):
        if first_stage is None or candidates is None:
            raise ConfigError("fitting the re-ranker needs first_stage and candidates", field="rerank")
        rerank = fit_reranker(features, first_stage, parent_edges, candidates, config=rerank)
    return rerank, reranker_scorer(rerank, features)


def text_feature_scorers(
    extra: Sequence[str],
    *,
    texts: Sequence[str],
    names: Sequence[str],
    parent_edges: torch.Tensor,
    fit_on: torch.Tensor,
    word_encoder: WordEncoder | None,
    tfidf: PlacementScorer | None = None,
    synonyms: Sequence[Sequence[str]] | None = None,
) -> dict[str, PlacementScorer]:
    """The scorers of the :data:`TEXT_FEATURES` named in ``extra`` (see :func:`fitted_reranker`'s arguments;
    ``tfidf``: the TF-IDF cosine scorer, when the caller has one, for ``tfidf_vote`` to share; ``synonyms``: each
    entity id's synonyms, for ``synonym_containment``).

    Raises:
        ConfigError: ``maxsim`` without a ``word_encoder``.
    """
    from textkg.evaluation.placement.context import children_tfidf_scorer, name_containment_scorer, word_vote_scorer
    from textkg.evaluation.placement.late import WordVectors, maxsim_scorer
    from textkg.evaluation.placement.text import synonym_containment_scorer

    def maxsim() -> PlacementScorer:
        if word_encoder is None:
            raise ConfigError("the maxsim re-ranker feature needs a word encoder", field="word_encoder")
        return maxsim_scorer(texts, names, fit_on, WordVectors.encode([*texts, *names], word_encoder))

    builders = {
        "sibling_tfidf": lambda: children_tfidf_scorer(texts, parent_edges, fit_on),
        "name_containment": lambda: name_containment_scorer(names, fit_on),
        "maxsim": maxsim,
        "tfidf_vote": lambda: word_vote_scorer(texts, parent_edges, fit_on, similarity=tfidf),
        "synonym_containment": lambda: synonym_containment_scorer(texts, names, synonyms or (), fit_on),
    }
    return {name: builders[name]() for name in TEXT_FEATURES if name in extra}


__all__ = [
    "DEFAULT_EXTRA",
    "OPTIONAL_FEATURES",
    "PRIOR_FEATURES",
    "SCORED_FEATURES",
    "TEXT_FEATURES",
    "PairFeatures",
    "RerankConfig",
    "Reranker",
    "fit_reranker",
    "feature_names",
    "fit_batches",
    "fitted_reranker",
    "hierarchy_priors",
    "reranker_scorer",
    "sibling_batch_lists",
    "text_feature_scorers",
]
