"""The link re-ranker's pair features (:class:`LinkFeatures`), and those read from the description vectors of
the training entities that already hold a candidate answer (:class:`AnswerHolders`).

:class:`LinkFeatures` computes every feature of :data:`FEATURES` for a query's top-``k`` list (the module
docstring of :mod:`textkg.evaluation.link_rerank` lists the :data:`SHIPPED` ones). The description-vector
features (:data:`NEIGHBOUR_FEATURES`):

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

from collections.abc import Sequence

import torch

from textkg.errors import ConfigError
from textkg.evaluation.neighbour_vote import NeighbourVote
from textkg.evaluation.placement.text import TfIdf, words

#: Holders of one ``(relation, answer)`` read at most (a seeded sample).
MAX_HOLDERS = 256
#: The features of the first shipped form (a saved re-ranker may name these only).
SHIPPED = ("first_stage", "vote", "type", "type_spread", "tfidf", "stem_tfidf", "relation_text", "degree")
#: The description-vector features (this module's docstring).
NEIGHBOUR_FEATURES = ("holder_max", "holder_mean", "answer_centroid", "text_cosine")
FEATURES = SHIPPED + NEIGHBOUR_FEATURES
#: Characters a word keeps in ``stem_tfidf`` (a crude stemmer: "abandonment" and "abandon" share "aband").
STEM = 5
#: Largest ``relations x entities`` table the priors may hold (float32 each, three tables).
MAX_TABLE_ENTRIES = 50_000_000
#: A query's TF-IDF row, stem TF-IDF row and description vector (``(b, V)``, ``(b, V')``, ``(b, D)``).
QueryRows = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


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


class LinkFeatures:
    """``(b, K, F)`` pair features of queries against their candidates (module docstring).

    Args:
        statements: ``(m, 3)`` training statements the priors read (the public ones under privacy).
        seen: ``(n_seen,)`` training entities.
        texts: Each entity's text.
        relation_texts: Each relation's text.
        vote: The neighbour vote (its spread kernel gives ``type_spread``), or ``None``.
        embeddings: ``(n, D)`` description vectors for :data:`NEIGHBOUR_FEATURES` (default: the vote's; without
            either those features are 0).

    Raises:
        ConfigError: ``relations x entities`` is over :data:`MAX_TABLE_ENTRIES`.
    """

    def __init__(
        self,
        statements: torch.Tensor,
        *,
        seen: torch.Tensor,
        texts: Sequence[str],
        relation_texts: Sequence[str],
        vote: NeighbourVote | None,
        embeddings: torch.Tensor | None = None,
    ) -> None:
        n, num_rel = len(texts), len(relation_texts)
        if n * num_rel > MAX_TABLE_ENTRIES:
            raise ConfigError(
                f"{num_rel} relations x {n} entities is over the re-ranker's table limit ({MAX_TABLE_ENTRIES:,})",
                field="link_rerank",
            )
        h, r, t = torch.as_tensor(statements, dtype=torch.long).reshape(-1, 3).unbind(1)
        count = torch.zeros(2, num_rel * n, dtype=torch.float32)  # [head answers, tail answers]
        count[0].index_add_(0, r * n + h, torch.ones(len(h)))
        count[1].index_add_(0, r * n + t, torch.ones(len(t)))
        self.type = count.reshape(2, num_rel, n).log1p()
        if vote is not None:
            kernel = vote.kernel()  # (n, n): row c, the softmax weights of c's nearest training entities
            flat = self.type.reshape(2 * num_rel, n)
            self.type_spread = torch.sparse.mm(kernel, flat.T).T.reshape(2, num_rel, n).contiguous()
        else:
            self.type_spread = torch.zeros_like(self.type)
        self.degree = torch.bincount(torch.cat([h, t]), minlength=n).float().log1p()
        self.new = torch.ones(n)
        self.new[torch.as_tensor(seen, dtype=torch.long)] = 0.0
        seen_texts = [texts[i] for i in torch.as_tensor(seen).tolist()]
        self.tfidf = TfIdf.fit(seen_texts)
        self.entity_rows = self.tfidf.transform(texts)  # (n, V) sparse
        self.stems = TfIdf.fit([stemmed(t) for t in seen_texts])
        self.entity_stems = self.stems.transform([stemmed(t) for t in texts])
        rel = self.tfidf.transform(relation_texts).to_dense()  # (R, V)
        self.relation_text = torch.sparse.mm(self.entity_rows, rel.T).T.contiguous()  # (R, n)
        if embeddings is None and vote is not None:
            embeddings = vote.features
        self.holders = (
            None if embeddings is None else AnswerHolders(statements, embeddings=embeddings, num_relations=num_rel)
        )

    def _vectors(self, embeddings: torch.Tensor | None, b: int) -> torch.Tensor:
        if self.holders is None:
            return torch.zeros(b, 1)
        if embeddings is None:
            raise ValueError("the re-ranker's description-vector features need the query's description vector")
        return embeddings.float()

    def query_rows(self, texts: Sequence[str], embeddings: torch.Tensor | None = None) -> QueryRows:
        """Dense TF-IDF rows ``(b, V)``, stem TF-IDF rows ``(b, V')`` and description vectors ``(b, D)`` of new
        texts (``textkg predict``; ``embeddings``: their vectors in the vote's space)."""
        tfidf = self.tfidf.transform(texts).to_dense()
        return (
            tfidf,
            self.stems.transform([stemmed(t) for t in texts]).to_dense(),
            self._vectors(embeddings, len(texts)),
        )

    def entity_query_rows(self, entities: torch.Tensor) -> QueryRows:
        """:meth:`query_rows` of entities' own texts."""
        ids = entities.long()
        return (
            torch.index_select(self.entity_rows, 0, ids).to_dense(),
            torch.index_select(self.entity_stems, 0, ids).to_dense(),
            self._vectors(None if self.holders is None else self.holders.embeddings[ids], len(ids)),
        )

    def __call__(
        self,
        query_rows: QueryRows,
        relations: torch.Tensor,
        direction: str,
        candidates: torch.Tensor,
        first: torch.Tensor,
        vote: torch.Tensor,
    ) -> torch.Tensor:
        """``(b, K, F)`` from ``query_rows`` (:meth:`query_rows`), ``relations (b,)``, ``candidates (b, K)`` ids and the
        first stage's and the vote's ``(b, K)`` scores of them."""
        d = 0 if direction == "head" else 1
        rel = relations.long()[:, None]
        text = torch.sparse.mm(self.entity_rows, query_rows[0].float().T).T  # (b, n)
        stem = torch.sparse.mm(self.entity_stems, query_rows[1].float().T).T
        parts = [
            first.float(),
            vote.float(),
            self.type[d][rel, candidates],
            self.type_spread[d][rel, candidates],
            text.gather(1, candidates),
            stem.gather(1, candidates),
            self.relation_text[rel, candidates],
            self.degree[candidates],
        ]
        if self.holders is None:
            parts += [torch.zeros(candidates.shape)] * len(NEIGHBOUR_FEATURES)
        else:
            best, mean, cosine = self.holders.holder_similarity(query_rows[2], relations, direction, candidates)
            parts += [best, mean, self.holders.answer_centroid[d][rel, candidates], cosine]
        return torch.stack(parts, dim=2)


def stemmed(text: str) -> str:
    """``text``'s words cut to :data:`STEM` characters."""
    return " ".join(w[:STEM] for w in words(text))


__all__ = [
    "FEATURES",
    "MAX_HOLDERS",
    "MAX_TABLE_ENTRIES",
    "NEIGHBOUR_FEATURES",
    "SHIPPED",
    "STEM",
    "AnswerHolders",
    "LinkFeatures",
    "QueryRows",
    "stemmed",
]
