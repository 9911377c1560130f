"""1-vs-all softmax cross-entropy: every training entity is a negative.

For a positive ``(h, r, t)`` the loss is the cross-entropy of the softmax
over ``score(h, r, e) / τ`` for every entity ``e`` of the pool (target
``t``), plus the same over ``score(e, r, t) / τ`` (target ``h``). This is the
"1vsAll + cross-entropy" training of Ruffinelli, Broscheit & Gemulla, "You
CAN Teach an Old Dog New Tricks! On Training Knowledge Graph Embeddings"
(ICLR 2020), and the full-softmax objective of Lacroix, Usunier & Obozinski
(ICML 2018); the temperature ``τ`` is the one of contrastive text encoders
(e.g. SimKGC, Wang et al. 2022). Other true answers in the pool count as
negatives (training is not filtered), as in both papers.

Entity vectors come from ``model.entity_matrix`` with the step's generator,
so structural dropout applies to the pool: at each step each seen entity
independently reads the learned unseen row with probability
``structural_dropout``, as query *and* as candidate. Fused models therefore
practise both test-time situations of an inductive split: a new entity as
the query, and a new entity as the answer ranked among seen entities that
have structure. (Without dropout a fused model would never train its unseen
row under this loss.)

Each example's loss depends on its own triple and on the fixed pool only,
never on the other examples of the batch. Its per-example gradient reaches
every entity row, so DP training does not form it: for the models
:mod:`textkg.training.one_vs_all.clipping` supports, each example's norm is
computed exactly from the gradient's structure; other models are refused
(see :class:`textkg.training.config.RunConfig`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from textkg.errors import ConfigError
from textkg.models.top_layers import text_focus


def pool_positions(entity_pool: torch.Tensor, num_entities: int) -> torch.Tensor:
    """``(num_entities,)`` position of each entity in ``entity_pool``; ``-1`` if absent."""
    positions = torch.full((num_entities,), -1, dtype=torch.long)
    positions[entity_pool] = torch.arange(len(entity_pool))
    return positions


def on_model_device(model, *ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``ids`` (triples, pool, positions: built on the CPU) moved to the device of ``model``'s
    parameters; the same tensors when they are there already (always, on the CPU)."""
    device = model.relation_embeddings.device
    return tuple(x.to(device) for x in ids)


def one_vs_all_loss(
    model,
    triples: torch.Tensor,
    *,
    entity_pool: torch.Tensor,
    positions: torch.Tensor,
    temperature: float = 1.0,
    label_smoothing: float = 0.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Per-example 1-vs-all loss, tail and head prediction summed.

    Args:
        model: a :class:`textkg.models.KGEModel` (its ``entity_matrix`` and
            ``interaction`` are used, so it must be in the mode you want).
        triples: ``(B, 3)`` positive triples whose ends all lie in ``entity_pool``.
        entity_pool: ``(P,)`` the candidate entities (the training entities).
        positions: :func:`pool_positions` of ``entity_pool``.
        temperature: ``τ > 0``; scores are divided by it before the softmax.
        label_smoothing: as in :func:`torch.nn.functional.cross_entropy`.
        generator: randomness for structural dropout (training mode only);
            ``None`` = no dropout.

    Returns:
        ``(B,)`` losses.

    Raises:
        ConfigError: A triple's head or tail is not in the pool.
    """
    triples, entity_pool, positions = on_model_device(model, triples, entity_pool, positions)
    heads, tails = positions[triples[:, 0]], positions[triples[:, 2]]
    if bool((heads < 0).any() or (tails < 0).any()):
        raise ConfigError(
            "1-vs-all training needs every head and tail in the entity pool (training entities)", field="train.loss"
        )
    # a text module that trains on a few rows per step (top-layers) trains on the batch's own entities
    with text_focus(model, torch.cat([triples[:, 0], triples[:, 2]])):
        pool_vectors = model.entity_matrix(entity_pool, generator=generator)  # one text/fusion pass for the pool
    relations = model.relation_embeddings[triples[:, 1]]
    h, t = pool_vectors[heads], pool_vectors[tails]
    tail_scores = model.interaction.score_tails(h, relations, pool_vectors) / temperature
    head_scores = model.interaction.score_heads(relations, t, pool_vectors) / temperature
    irreflexive = getattr(model, "irreflexive", None)
    # the query is never its own answer (model.irreflexive)
    if irreflexive is not None and getattr(model, "any_irreflexive", False):
        if label_smoothing:  # smoothing would put weight on the masked logits
            raise ConfigError("label smoothing needs model.irreflexive 'none'", field="model.irreflexive")
        slots = torch.arange(len(entity_pool), device=heads.device).unsqueeze(0)
        flagged = irreflexive[triples[:, 1]].unsqueeze(1)
        lowest = torch.finfo(tail_scores.dtype).min
        tail_scores = tail_scores.masked_fill(flagged & (slots == heads.unsqueeze(1)), lowest)
        head_scores = head_scores.masked_fill(flagged & (slots == tails.unsqueeze(1)), lowest)
    return F.cross_entropy(tail_scores, tails, reduction="none", label_smoothing=label_smoothing) + F.cross_entropy(
        head_scores, heads, reduction="none", label_smoothing=label_smoothing
    )


def sample_pool(
    entity_pool: torch.Tensor,
    triples: torch.Tensor,
    size: int,
    *,
    num_entities: int,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A step's candidate pool for sampled 1-vs-all (``train.pool_size``).

    ``size`` entities drawn uniformly without replacement from ``entity_pool``,
    shared by the whole batch, plus every head and tail of ``triples`` (so
    each target is in the pool). This is the sampled softmax of Jean, Cho,
    Memisevic & Bengio, "On Using Very Large Target Vocabulary for Neural
    Machine Translation" (ACL 2015) with a uniform proposal, which makes its
    correction term the same for every sampled candidate. It cuts the cost of
    a step for models whose entity vectors are expensive (a DKRL CNN over
    every pool entity's tokens) from the whole pool to ``size + 2B`` rows.

    Returns:
        ``(pool, positions)``: the sorted unique pool entities and their
        :func:`pool_positions`.
    """
    if size >= len(entity_pool):
        return entity_pool, pool_positions(entity_pool, num_entities)
    drawn = entity_pool[torch.randperm(len(entity_pool), generator=generator)[:size]]
    pool = torch.unique(torch.cat([drawn, triples[:, 0], triples[:, 2]]))
    return pool, pool_positions(pool, num_entities)
