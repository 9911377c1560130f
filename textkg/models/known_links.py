"""A new entity's vector from the few links a user knows (k-shot inference, no retraining).

A new entity usually arrives with some context: a new phenotype term with the diseases that show
it, a new drug with a few known targets. Each known link ``(new, r, other)`` (or ``(other, r,
new)``) says where the new entity should sit: the vector that the link's query points at,
``other − r`` (or ``other + r``) for TransE, ``r ∘ other`` for DistMult
(:meth:`textkg.models.interactions.Interaction.head_from` / ``tail_from``). Their mean over the
entity's known links is the relation-aware neighbour average of ERAvg (Albooyeh et al. 2020,
"Out-of-Sample Representation Learning for Knowledge Graphs", Findings of EMNLP,
arXiv:2004.13230v2), used as the k-shot baseline by Kochsiek & Gemulla 2023 ("A Benchmark for
Semi-Inductive Link Prediction in Knowledge Graphs", Findings of EMNLP, arXiv:2310.11917v1).

The model's own zero-shot vector of the entity ``v0`` (its description, with its description
neighbours' structure under ``model.unseen_structure: neighbours``) is the prior. Two methods
(:data:`METHODS`) move it, each with one prior weight ``c`` (``c = ∞``: the links unused):

* ``mix``: ``v0 + α (mean of the links' estimates − v0)``, ``α = k / (k + c)`` for ``k`` known
  links, so one link moves it a little and many links far. ``c = 0`` is ERAvg alone (the
  entity's own text unused): the ``eravg_no_text`` baseline.
* ``fold-in``: a few Adam steps on the new entity's vector only (every weight of the model
  frozen; Hamaguchi et al. 2017 and Kochsiek & Gemulla 2023 call it fold-in), minimising
  ``Σ_links −log softmax(score / τ)[other] + c ‖v − v0‖²`` over the link's other entity and
  :data:`FOLD_IN_NEGATIVES` sampled entities, ``τ`` the run's ``train.temperature``: the maximum
  a-posteriori vector under a Gaussian prior at ``v0``, so more links pull further.

The method and ``c`` are chosen on validation (:mod:`textkg.evaluation.k_shot`). Both work on the
fused entity vectors (then normalised, for models that normalise entities); for the
``weighted`` and ``gate`` fusions that is the same as moving the structural part, since both
fusions are linear in it.

Nothing is trained and the model is not changed: the known links are the user's own input at
inference time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from textkg.data.known_links import NEW_IS_HEAD
from textkg.errors import ConfigError

#: prior weights ``c`` tried on validation per method (``inf``, the links unused, is shared by both)
PRIOR_WEIGHTS = {
    "mix": (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0),
    "fold-in": (0.0, 0.1, 0.3, 1.0, 3.0, 10.0),
}
#: what a run that chose nothing uses (runs from before k-shot evaluation)
DEFAULT_METHOD, DEFAULT_PRIOR = "fold-in", 1.0
#: fold-in: Adam steps, learning rate, sampled negative entities per step (the softmax temperature is the
#: run's ``train.temperature``: the scale its scores were trained at)
FOLD_IN_STEPS, FOLD_IN_LR, FOLD_IN_NEGATIVES = 50, 0.05, 128


@dataclass(frozen=True)
class LinkMethod:
    """How known links move a new entity's vector: ``name`` in :data:`METHODS`, its prior weight, and
    fold-in's softmax temperature (the run's ``train.temperature``; not part of :attr:`key`)."""

    name: str = DEFAULT_METHOD
    prior: float = DEFAULT_PRIOR
    temperature: float = 1.0

    @property
    def key(self) -> str:
        """``"fold-in:0.1"``, ``"mix:0"``; ``"none"`` for an infinite prior (the links unused)."""
        return "none" if math.isinf(self.prior) else f"{self.name}:{self.prior:g}"

    @classmethod
    def from_key(cls, key: str, *, temperature: float = 1.0) -> LinkMethod:
        """The inverse of :attr:`key`."""
        if key == "none":
            return cls(DEFAULT_METHOD, math.inf, temperature)
        name, _, prior = str(key).partition(":")
        if name not in METHODS:
            raise ConfigError(f"unknown known-links method {name!r}; choose one of {sorted(METHODS)}", field="method")
        try:
            return cls(name, float(prior), temperature)
        except ValueError:
            raise ConfigError(f"bad prior weight in {key!r}", field="method") from None


#: no links used (the zero-shot model)
NO_LINKS = LinkMethod(DEFAULT_METHOD, math.inf)


def link_estimates(model, relations: torch.Tensor, others: torch.Tensor, roles: torch.Tensor) -> torch.Tensor:
    """``(m, d)``: for each known link, the vector its query points at.

    Args:
        model: a :class:`textkg.models.KGEModel`.
        relations: ``(m,)`` relation ids.
        others: ``(m, d)`` vectors of the links' other entities.
        roles: ``(m,)`` :data:`~textkg.data.known_links.NEW_IS_HEAD` or ``NEW_IS_TAIL``.
    """
    inter = model.interaction
    r = model.relation_matrix().detach()[relations.to(others.device)]
    as_head = inter.head_from(r, others)  # (new, r, other): the head that points at other
    as_tail = inter.tail_from(others, r)  # (other, r, new)
    return torch.where((roles.to(others.device) == NEW_IS_HEAD).unsqueeze(1), as_head, as_tail)


def _finish(model, v: torch.Tensor) -> torch.Tensor:
    return F.normalize(v, p=2.0, dim=-1) if model.normalize_entities else v


def mix(model, base, owners, relations, others, roles, matrix, method, generator) -> torch.Tensor:
    """``mix``: ``base + k / (k + prior) · (mean estimate − base)`` per new entity (module docstring)."""
    u = base.shape[0]
    counts = torch.bincount(owners, minlength=u).to(base.dtype)
    estimates = link_estimates(model, relations, matrix[others], roles).to(base.dtype)
    mean = torch.zeros_like(base).index_add_(0, owners, estimates) / counts.clamp(min=1).unsqueeze(1)
    alpha = (counts / (counts + method.prior)).nan_to_num(0.0).unsqueeze(1)  # 0 links and prior 0: keep base
    return _finish(model, (1 - alpha) * base + alpha * mean)


def fold_in(model, base, owners, relations, others, roles, matrix, method, generator) -> torch.Tensor:
    """``fold-in``: :data:`FOLD_IN_STEPS` Adam steps on the new vectors only (module docstring)."""
    priors = torch.tensor([method.prior], dtype=base.dtype, device=base.device)
    return fold_in_priors(model, base, owners, relations, others, roles, matrix, priors, method.temperature, generator)[
        0
    ]


def fold_in_priors(
    model, base, owners, relations, others, roles, matrix, priors: torch.Tensor, temperature: float, generator
) -> torch.Tensor:
    """``(P, u, d)``: :func:`fold_in` at each of ``priors (P,)`` in one optimisation. The runs are
    independent (Adam is elementwise and the loss a sum over them) and share their sampled entities, so
    each slice is what :func:`fold_in` gives at that prior with the same generator."""
    r = model.relation_matrix().detach()[relations]
    head = roles == NEW_IS_HEAD
    inter = model.interaction
    p, m = len(priors), len(others)
    start = base.detach().unsqueeze(0).expand(p, -1, -1)
    v = start.clone().requires_grad_(True)
    opt = torch.optim.Adam([v], lr=FOLD_IN_LR)
    n = matrix.shape[0]
    own = matrix[others].unsqueeze(0).expand(p, -1, -1).reshape(p * m, -1)
    r, head = r.repeat(p, 1), head.repeat(p)
    target = torch.zeros(p * m, dtype=torch.long, device=base.device)
    with torch.enable_grad():
        for _ in range(FOLD_IN_STEPS):
            negatives = matrix[torch.randint(0, n, (min(FOLD_IN_NEGATIVES, n),), generator=generator).to(matrix.device)]
            # as the model scores it (unit length for models that normalise), one row per (run, link)
            q = _finish(model, v)[:, owners].reshape(p * m, -1)
            # (P m, 1 + negatives): each link's own answer (column 0), then the shared sampled entities
            positive = torch.where(head, inter.score(q, r, own), inter.score(own, r, q))
            sampled = torch.where(
                head.unsqueeze(1), inter.score_tails(q, r, negatives), inter.score_heads(r, q, negatives)
            )
            scores = torch.cat([positive.unsqueeze(1), sampled], dim=1)
            loss = F.cross_entropy(scores / temperature, target, reduction="sum")
            loss = loss + (priors.view(p, 1, 1) * (v - start) ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return _finish(model, v.detach())


#: the methods by name: ``f(model, base (u, d), owners (m,), relations (m,), others (m,) ids into matrix,
#: roles (m,), matrix (N, d), method (LinkMethod), generator) -> (u, d)``
METHODS = {"mix": mix, "fold-in": fold_in}


def move_by_links(
    model,
    base: torch.Tensor,
    links: torch.Tensor,
    matrix: torch.Tensor,
    *,
    method: LinkMethod = LinkMethod(),
    seed: int = 0,
) -> torch.Tensor:
    """``(u, d)``: the ``u`` new entities' zero-shot vectors ``base`` moved by their known links.

    Args:
        model: a :class:`textkg.models.KGEModel` (not changed).
        base: ``(u, d)`` zero-shot vectors.
        links: ``(m, 4)`` long ``(row of base, relation, other, role)``; ``other`` indexes ``matrix``.
        matrix: ``(N, d)`` the model's entity vectors (the links' other entities, fold-in's negatives).
        method: which :data:`METHODS` entry and prior weight.
        seed: fold-in's negative sampling.
    """
    if method.prior < 0 or math.isnan(method.prior):
        raise ConfigError(f"the prior weight must be >= 0, got {method.prior}", field="method")
    if not len(links) or math.isinf(method.prior):
        return base
    links = links.to(base.device)
    generator = torch.Generator().manual_seed(seed)
    fn = METHODS[method.name]
    return fn(model, base, links[:, 0], links[:, 1], links[:, 2], links[:, 3], matrix, method, generator)


class KnownLinksScorer:
    """The model's scores with some entities' vectors replaced (a :class:`textkg.evaluation.Scorer`).

    Built by :func:`with_known_links`; scores ``(h, r, c)`` from the model's interaction, its relation
    table and an entity matrix whose rows ``entities`` are ``vectors``, with the model's irreflexive
    relations masked as the model masks them. The *query* entity uses ``matrix`` (its own known links
    moved it); the *candidates* use ``candidate_matrix`` (default ``matrix``), the model's own vectors
    when the caller passes them: a new entity is ranked against the graph as the run has it, as
    ``textkg predict --known-links`` ranks it (another new entity's links are not the user's to give).
    """

    def __init__(self, model, matrix: torch.Tensor, candidate_matrix: torch.Tensor | None = None) -> None:
        self.model = model
        self.matrix = matrix
        self.candidate_matrix = matrix if candidate_matrix is None else candidate_matrix

    def score_tails(self, heads: torch.Tensor, relations: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(b, c)`` scores of ``(heads[i], relations[i], candidates[j])``."""
        m, dev = self.model, self.matrix.device
        heads, relations, candidates = heads.to(dev), relations.to(dev), candidates.to(dev)
        scores = m.interaction.score_tails(
            self.matrix[heads], m.relation_matrix()[relations], self.candidate_matrix[candidates]
        )
        return m._mask_self(scores, heads, relations, candidates)

    def score_heads(self, relations: torch.Tensor, tails: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(b, c)`` scores of ``(candidates[j], relations[i], tails[i])``."""
        m, dev = self.model, self.matrix.device
        relations, tails, candidates = relations.to(dev), tails.to(dev), candidates.to(dev)
        scores = m.interaction.score_heads(
            m.relation_matrix()[relations], self.matrix[tails], self.candidate_matrix[candidates]
        )
        return m._mask_self(scores, tails, relations, candidates)


def with_known_links(
    model,
    links: torch.Tensor,
    *,
    method: LinkMethod = LinkMethod(),
    seed: int = 0,
    matrix: torch.Tensor | None = None,
) -> KnownLinksScorer:
    """A scorer in which each entity named in ``links`` uses its known links.

    Args:
        model: a :class:`textkg.models.KGEModel` in eval mode (not changed).
        links: ``(m, 4)`` long ``(entity, relation, other, role)``: ``entity`` (not seen in training)
            has the known link ``(entity, relation, other)`` (role ``NEW_IS_HEAD``) or
            ``(other, relation, entity)`` (``NEW_IS_TAIL``). Every other vector, the links'
            other entities included, is the model's own, and candidates are always the model's
            own vectors (:class:`KnownLinksScorer`).
        method: how the links move the vectors (:class:`LinkMethod`).
        seed: fold-in's negative sampling.
        matrix: the model's ``(N, d)`` entity matrix when the caller has it (not changed).
    """
    with torch.no_grad():
        matrix = (model.entity_matrix() if matrix is None else matrix).detach().clone()
    if len(links) and not math.isinf(method.prior):
        links = links.to(matrix.device)
        entities, rows = torch.unique(links[:, 0], return_inverse=True)
        local = torch.cat([rows.unsqueeze(1), links[:, 1:]], dim=1)
        frozen = matrix.clone()  # the other entities' vectors: the model's own, not the moved ones
        matrix[entities] = move_by_links(model, frozen[entities], local, frozen, method=method, seed=seed)
        return KnownLinksScorer(model, matrix, candidate_matrix=frozen)  # candidates as the run has them
    return KnownLinksScorer(model, matrix)


def with_known_links_many(
    model, links: torch.Tensor, methods, *, seed: int = 0, matrix: torch.Tensor | None = None
) -> dict[str, KnownLinksScorer]:
    """``{method key: scorer}``: :func:`with_known_links` for each of ``methods``, the fold-in ones of one
    temperature optimised together (:func:`fold_in_priors`: the same vectors, one loop)."""
    with torch.no_grad():
        matrix = (model.entity_matrix() if matrix is None else matrix).detach()
    out: dict[str, KnownLinksScorer] = {}
    folded = [m for m in methods if m.name == "fold-in" and not math.isinf(m.prior)]
    if len(links) and folded:
        links = links.to(matrix.device)
        entities, rows = torch.unique(links[:, 0], return_inverse=True)
        for temperature in sorted({m.temperature for m in folded}):
            group = [m for m in folded if m.temperature == temperature]
            priors = torch.tensor([m.prior for m in group], dtype=matrix.dtype, device=matrix.device)
            generator = torch.Generator().manual_seed(seed)
            moved = fold_in_priors(
                model,
                matrix[entities],
                rows,
                links[:, 1],
                links[:, 2],
                links[:, 3],
                matrix,
                priors,
                temperature,
                generator,
            )
            for method, vectors in zip(group, moved, strict=True):
                full = matrix.clone()
                full[entities] = vectors
                out[method.key] = KnownLinksScorer(model, full, candidate_matrix=matrix)
    for method in methods:
        if method.key not in out:
            out[method.key] = with_known_links(model, links, method=method, seed=seed, matrix=matrix)
    return out


def embed_with_known_links(
    model, new: torch.Tensor, links: torch.Tensor, *, method: LinkMethod = LinkMethod(), seed: int = 0
) -> torch.Tensor:
    """``(n, d)``: brand-new entities' vectors ``new`` (from :meth:`KGEModel.embed_new_entities`) moved by
    their known links ``(m, 4)`` ``(row of new, relation, other entity id, role)``."""
    with torch.no_grad():
        matrix = model.entity_matrix().detach()
    return move_by_links(model, new.detach(), links, matrix, method=method, seed=seed)
