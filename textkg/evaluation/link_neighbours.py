"""Text features of a link query's candidate answers, read from the training entities that already hold them.

For a query ``(q, r, ?)`` and a candidate answer ``c`` (and ``(?, r, q)`` alike), with ``e_x`` the unit
description vector of entity ``x`` (the neighbour vote's frozen features,
:class:`textkg.evaluation.neighbour_vote.NeighbourVote`):

* ``holder_max`` and ``holder_mean``: over the training entities ``s`` with ``(s, r, c)`` a training
  statement (the *holders* of ``(r, c)``), ``max_s cos(e_q, e_s)`` and ``mean_s cos(e_q, e_s)``; 0 where
  ``(r, c)`` has no holder. "Who else points at this answer looks like me": a relation-specific,
  candidate-specific nearest-neighbour score. The neighbour vote reads only ``q``'s ``k`` nearest training
  entities, so an answer whose holders are all outside them gets no vote at all; here every holder
  counts. (kNN classification with one class per ``(r, c)``, Cover & Hart 1967, "Nearest neighbor
  pattern classification", IEEE Trans. Inf. Theory 13(1); the mean is a class-centroid score.) At most
  :data:`MAX_HOLDERS` holders per ``(r, c)`` are read, a seeded sample of them: a popular answer
  ("male") has thousands.
* ``answer_centroid``: ``cos(e_c, m_{r,d})``, ``m_{r,d}`` the mean unit vector of the training answers of
  ``r`` in this direction (each statement counted): the candidate's type by its text, which a new candidate
  (no statement, so no type prior) also has (a nearest-centroid classifier, as Rocchio's relevance
  centroid, Manning et al. 2008, "Introduction to Information Retrieval", section 14.2).
* ``text_cosine``: ``cos(e_q, e_c)``, the query's and the candidate's texts in the same dense space (TF-IDF
  reads the words only).

Only the statements the caller passes are read (the public ones under privacy) and the public texts.
"""

from __future__ import annotations

import torch

#: Holders of one ``(relation, answer)`` read at most (a seeded sample).
MAX_HOLDERS = 256


class AnswerHolders:
    """The holders of every ``(direction, relation, answer)``, in CSR form, and the features above.

    Args:
        statements: ``(m, 3)`` training statements (the public ones under privacy).
        embeddings: ``(n, D)`` description vectors of every entity (normalised here).
        num_relations: ``R``.
        seed: Seeds which :data:`MAX_HOLDERS` holders a popular answer keeps.
        max_holders: Holders read per ``(relation, answer)``.
    """

    def __init__(
        self,
        statements: torch.Tensor,
        *,
        embeddings: torch.Tensor,
        num_relations: int,
        seed: int = 0,
        max_holders: int = MAX_HOLDERS,
    ) -> None:
        self.embeddings = torch.nn.functional.normalize(embeddings.float(), dim=1)
        n = self.embeddings.shape[0]
        self.num_entities, self.max_holders = n, int(max_holders)
        h, r, t = torch.as_tensor(statements, dtype=torch.long).reshape(-1, 3).unbind(1)
        perm = torch.randperm(len(h), generator=torch.Generator().manual_seed(seed))
        h, r, t = h[perm], r[perm], t[perm]
        self.ptr, self.holders = [], []
        count = torch.zeros(2, num_relations * n)
        for d, (answer, holder) in enumerate(((h, t), (t, h))):  # 0: head answers, 1: tail answers
            key = r * n + answer
            order = torch.argsort(key, stable=True)  # stable: the seeded order within a key
            counts = torch.bincount(key, minlength=num_relations * n)
            self.ptr.append(torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)]))
            self.holders.append(holder[order])
            count[d] = counts.float()
        # m_{r,d}: the statements' answers' mean unit vector, normalised; a relation without answers gives 0
        centroid = torch.nn.functional.normalize(
            torch.stack([c.reshape(num_relations, n) @ self.embeddings for c in count]), dim=2
        )  # (2, R, D)
        self.answer_centroid = (centroid @ self.embeddings.T).contiguous()  # (2, R, n)

    def holder_similarity(
        self, queries: torch.Tensor, relations: torch.Tensor, direction: str, candidates: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(holder_max, holder_mean, text_cosine)``, each ``(b, K)`` (module docstring).

        Args:
            queries: ``(b, D)`` the query entities' description vectors (any scale).
            relations: ``(b,)``.
            direction: ``"head"`` or ``"tail"``: which end of the statement the candidates are.
            candidates: ``(b, K)`` entity ids.
        """
        d = 0 if direction == "head" else 1
        n = self.num_entities
        b, k = candidates.shape
        sim = torch.nn.functional.normalize(queries.float(), dim=1) @ self.embeddings.T  # (b, n)
        keys = (relations.long()[:, None] * n + candidates).flatten()
        start = self.ptr[d][keys]
        count = (self.ptr[d][keys + 1] - start).clamp(max=self.max_holders)
        pair = torch.repeat_interleave(torch.arange(b * k), count)
        offset = torch.arange(len(pair)) - torch.repeat_interleave(count.cumsum(0) - count, count)
        holder = self.holders[d][start[pair] + offset]
        s = sim[pair // k, holder]
        best = torch.zeros(b * k).scatter_reduce(0, pair, s, reduce="amax", include_self=False)
        mean = torch.zeros(b * k).index_add_(0, pair, s) / count.clamp(min=1)
        return best.reshape(b, k), mean.reshape(b, k), sim.gather(1, candidates)


__all__ = ["MAX_HOLDERS", "AnswerHolders"]
