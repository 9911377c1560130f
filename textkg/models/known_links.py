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

The model's own zero-shot vector of the entity (its description, with its description
neighbours' structure under ``model.unseen_structure: neighbours``) is the prior; the links'
mean moves it with weight ``α = k / (k + c)`` for ``k`` known links, so one or two links move
it a little and many links move it far. ``c = 0`` is ERAvg alone (the entity's own text
unused); ``c = ∞`` ignores the links (the zero-shot model). ``c`` is chosen on validation
(:mod:`textkg.evaluation.k_shot`). The mix is taken on the fused entity vectors (then
normalised, for models that normalise entities); for the ``weighted`` and ``gate`` fusions it
is the same as mixing the structural part, since both fusions are linear in it.

Nothing is trained and the model is not changed: the known links are the user's own input at
inference time.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from textkg.data.known_links import NEW_IS_HEAD

#: prior weights ``c`` (mix ``α = k / (k + c)``) tried on validation; ``0`` = ERAvg alone, ``inf`` = no links
PRIOR_WEIGHTS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, math.inf)
#: the prior weight of a run that chose none (runs from before k-shot evaluation)
DEFAULT_PRIOR = 1.0


def link_estimates(model, relations: torch.Tensor, others: torch.Tensor, roles: torch.Tensor) -> torch.Tensor:
    """``(m, d)``: for each known link, the vector its query points at.

    Args:
        model: a :class:`textkg.models.KGEModel`.
        relations: ``(m,)`` relation ids.
        others: ``(m, d)`` vectors of the links' other entities.
        roles: ``(m,)`` :data:`NEW_IS_HEAD` or :data:`NEW_IS_TAIL`.
    """
    inter = model.interaction
    r = model.relation_matrix()[relations.to(others.device)]
    as_head = inter.head_from(r, others)  # (new, r, other): the head that points at other
    as_tail = inter.tail_from(others, r)  # (other, r, new)
    return torch.where((roles.to(others.device) == NEW_IS_HEAD).unsqueeze(1), as_head, as_tail)


def mix_with_links(
    model,
    base: torch.Tensor,
    owners: torch.Tensor,
    estimates: torch.Tensor,
    *,
    prior: float = DEFAULT_PRIOR,
) -> torch.Tensor:
    """``(u, d)``: each of ``u`` new entities' zero-shot vector ``base`` moved towards the mean of its
    known links' ``estimates`` ``(m, d)`` (``owners (m,)`` in ``[0, u)``) with weight ``k / (k + prior)``.
    An entity without links keeps its ``base`` row."""
    if prior < 0 or math.isnan(prior):
        raise ValueError(f"prior must be >= 0, got {prior}")
    u = base.shape[0]
    owners = owners.to(base.device)
    counts = torch.bincount(owners, minlength=u).to(base.dtype)
    if math.isinf(prior) or not len(owners):
        return base
    sums = torch.zeros_like(base).index_add_(0, owners, estimates.to(base.dtype))
    mean = sums / counts.clamp(min=1).unsqueeze(1)
    alpha = (counts / (counts + prior)).nan_to_num(0.0).unsqueeze(1)  # 0 links and prior 0: keep base
    mixed = (1 - alpha) * base + alpha * mean
    return F.normalize(mixed, p=2.0, dim=-1) if model.normalize_entities else mixed


class KnownLinksScorer:
    """The model's scores with some entities' vectors replaced (a :class:`textkg.evaluation.Scorer`).

    Built by :func:`with_known_links`; scores ``(h, r, c)`` from the model's interaction, its relation
    table and an entity matrix whose rows ``entities`` are ``vectors``, with the model's irreflexive
    relations masked as the model masks them.
    """

    def __init__(self, model, matrix: torch.Tensor) -> None:
        self.model = model
        self.matrix = matrix

    def score_tails(self, heads: torch.Tensor, relations: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(b, c)`` scores of ``(heads[i], relations[i], candidates[j])``."""
        m, dev = self.model, self.matrix.device
        heads, relations, candidates = heads.to(dev), relations.to(dev), candidates.to(dev)
        scores = m.interaction.score_tails(self.matrix[heads], m.relation_matrix()[relations], self.matrix[candidates])
        return m._mask_self(scores, heads, relations, candidates)

    def score_heads(self, relations: torch.Tensor, tails: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(b, c)`` scores of ``(candidates[j], relations[i], tails[i])``."""
        m, dev = self.model, self.matrix.device
        relations, tails, candidates = relations.to(dev), tails.to(dev), candidates.to(dev)
        scores = m.interaction.score_heads(m.relation_matrix()[relations], self.matrix[tails], self.matrix[candidates])
        return m._mask_self(scores, tails, relations, candidates)


def with_known_links(model, links: torch.Tensor, *, prior: float = DEFAULT_PRIOR) -> KnownLinksScorer:
    """A scorer in which each entity named in ``links`` uses its known links.

    Args:
        model: a :class:`textkg.models.KGEModel` in eval mode.
        links: ``(m, 4)`` long ``(entity, relation, other, role)``: ``entity`` (not seen in training)
            has the known link ``(entity, relation, other)`` (role :data:`NEW_IS_HEAD`) or
            ``(other, relation, entity)`` (:data:`NEW_IS_TAIL`). Every other vector, the links'
            other entities included, is the model's own.
        prior: ``c`` of the mix (:func:`mix_with_links`).
    """
    with torch.no_grad():
        matrix = model.entity_matrix().clone()
        if len(links) and not math.isinf(prior):
            links = links.to(matrix.device)
            entities, owners = torch.unique(links[:, 0], return_inverse=True)
            estimates = link_estimates(model, links[:, 1], matrix[links[:, 2]], links[:, 3])
            matrix[entities] = mix_with_links(model, matrix[entities], owners, estimates, prior=prior)
    return KnownLinksScorer(model, matrix)


def embed_with_known_links(
    model, new: torch.Tensor, links: torch.Tensor, *, prior: float = DEFAULT_PRIOR
) -> torch.Tensor:
    """``(n, d)``: brand-new entities' vectors ``new`` (from :meth:`KGEModel.embed_new_entities`) moved by
    their known links ``(m, 4)`` ``(row of new, relation, other entity id, role)``."""
    if not len(links) or math.isinf(prior):
        return new
    with torch.no_grad():
        links = links.to(new.device)
        others = model.entity_matrix(links[:, 2])
        estimates = link_estimates(model, links[:, 1], others, links[:, 3])
        return mix_with_links(model, new, links[:, 0], estimates, prior=prior)
