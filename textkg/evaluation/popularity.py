"""The popularity baseline: rank a candidate by how often it fills the query's slot of the relation.

What a user would try before any model: for ``(?, has_phenotype, new term)``, the diseases with the
most phenotypes first. It reads only the statements it is given and no text, so a model that does
not beat it has learned nothing about the query's own entity.
"""

from __future__ import annotations

import torch


class RelationPopularity:
    """A :class:`~textkg.evaluation.ranking.Scorer`: counts of ``(relation, side, entity)`` in ``triples``.

    Args:
        triples: ``(N, 3)`` statements to count (e.g. the training statements).
        num_entities: ``E``.
        num_relations: ``R``.
    """

    def __init__(self, triples: torch.Tensor, *, num_entities: int, num_relations: int) -> None:
        ones = torch.ones(len(triples), dtype=torch.float32)
        self.head_counts = torch.zeros(num_relations, num_entities).index_put_(
            (triples[:, 1], triples[:, 0]), ones, accumulate=True
        )
        self.tail_counts = torch.zeros(num_relations, num_entities).index_put_(
            (triples[:, 1], triples[:, 2]), ones, accumulate=True
        )

    def score_tails(self, heads: torch.Tensor, relations: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(b, c)``: how often each candidate is a tail of ``relations[i]``."""
        return self.tail_counts[relations][:, candidates]

    def score_heads(self, relations: torch.Tensor, tails: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(b, c)``: how often each candidate is a head of ``relations[i]``."""
        return self.head_counts[relations][:, candidates]
