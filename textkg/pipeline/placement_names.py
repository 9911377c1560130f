"""Placement of the same held-out terms from their names alone (``test.placement_names_only``).

A new ontology term often arrives with a label and nothing else. This block
re-reads every validation and test term of an inductive split from its **name
only** (its definition, synonyms and any other text removed), and reports every
placement method on the same queries as ``test.placement``: the trained model
(the term's vector rebuilt from its name), ``description-nn``,
``parent-of-nearest``, ``tfidf-nn`` and the combination, whose weights are
chosen again on the validation terms read the same way (name only), so that
``textkg place`` can use that choice for a term that arrives without a
definition. The re-ranker fitted for ``test.placement`` (on training terms'
full texts) is reused; only its weight is chosen again.

Training terms keep their full texts: they are the existing ontology.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from textkg.evaluation.placement.evaluate import evaluate_placement
from textkg.evaluation.placement.late import WordEncoder
from textkg.evaluation.placement.methods import NewRowsModel
from textkg.evaluation.placement.rerank import Reranker
from textkg.evaluation.placement.shortlist import PairScores, PairTextScorer, Shortlist
from textkg.pipeline.prepared import Prepared
from textkg.training.config import RunConfig


def embed_texts(prep: Prepared, cfg: RunConfig, texts: list[str]) -> torch.Tensor:
    """``(n, d)`` the model's own zero-shot vectors of new entities read from ``texts``
    (:meth:`KGEModel.embed_new_entities`, with the nearest seen entities' structure under
    ``model.unseen_structure: neighbours``)."""
    from textkg.training.features import text_inputs
    from textkg.training.unseen_structure import nearest_seen, pooled_features

    inputs = text_inputs(cfg.model, texts, seed=cfg.train.seed, autoencoder=prep.autoencoder)
    inputs.pop("autoencoder", None)
    inputs.pop("text_module", None)
    neighbours = None
    existing = pooled_features(prep.model)
    if prep.model.any_unseen_neighbours and "text_features" in inputs and existing is not None:
        neighbours = nearest_seen(existing, prep.split.train_entities, inputs["text_features"].cpu())
    with torch.no_grad():
        return prep.model.embed_new_entities(structural_neighbours=neighbours, **inputs)


def names_only_placement(
    prep: Prepared,
    cfg: RunConfig,
    *,
    features: torch.Tensor,
    encode: Callable[[list[str]], torch.Tensor],
    hierarchy: torch.Tensor | None,
    reranker: dict | None,
    batch_size: int,
    word_encoder: WordEncoder | None = None,
    pair_scorer: PairTextScorer | None = None,
) -> dict | None:
    """``evaluate_placement``'s result with every validation and test term read from its name alone.

    Args:
        prep, cfg: The run.
        features: ``(num_entities, D)`` the description features ``test.placement`` read.
        encode: ``texts -> (n, D)`` features of new texts in the same space as ``features``.
        hierarchy: The training statements the placement may read (public ones under privacy).
        reranker: ``test.placement_rerank`` (its fitted weights), or ``None``.
        batch_size: New terms scored at once.
        word_encoder: Word vectors for a re-ranker that reads ``maxsim`` (:mod:`textkg.evaluation.placement.late`).
        pair_scorer: The run's cross-encoder (:mod:`textkg.evaluation.placement.shortlist`), reading the names.
    """
    kg, split = prep.kg, prep.split
    ids = torch.cat([split.valid_entities, split.test_entities]).long().unique()
    if not len(ids):
        return None
    names = [kg.entity_names[i] for i in ids.tolist()]
    model: object = prep.model  # a structural model reads no text: a new term's vector is the same either way
    if prep.model.text is not None:
        model = NewRowsModel(prep.model, ids, embed_texts(prep, cfg, names))
    named = features.float().clone()
    named[ids] = encode(names).float()
    texts = list(kg.entity_descriptions)
    for i, name in zip(ids.tolist(), names, strict=True):
        texts[i] = name
    return evaluate_placement(
        model,
        kg,
        split,
        text_features=named,
        batch_size=batch_size,
        hierarchy=hierarchy,
        texts=texts,
        rerank=None if reranker is None else Reranker.from_dict(reranker),
        word_encoder=word_encoder,
        shortlist=None if pair_scorer is None else Shortlist(PairScores(pair_scorer, texts)),
    )


__all__ = ["embed_texts", "names_only_placement"]
