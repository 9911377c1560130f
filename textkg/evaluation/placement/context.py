"""Word-level features of a candidate parent's context: its children's texts and its name against the new term's name.

:mod:`.text` compares the new term's text with the candidate's own text. A candidate's
*children* say how its children are named (``"Abnormal renal morphology"``'s children are
``"Renal cyst"``, ``"Renal hypoplasia"``, ...), and a new term is usually named like its siblings:

* :func:`children_tfidf_scorer` (``sibling_tfidf``): the mean TF-IDF cosine
  (:class:`.text.TfIdf`) of the new term's text with each of the candidate's children's texts,
  the word-level counterpart of :func:`.siblings.children_scorer`'s ``mean``. As there, a child
  that is among the scored terms is left out (a training term playing a new term while the
  re-ranker is fitted must not find itself among its true parent's children), and a candidate
  without children scores 0.
* :func:`name_containment_scorer` (``name_containment``): :func:`.text.containment_scorer` read
  on the new term's *name* rather than its whole text (ontology names are compositional: a
  parent's name words recur in its children's names, while a definition mentions many terms).
* :func:`word_vote_scorer` (``tfidf_vote``): the neighbour vote with neighbours found by their words
  (TF-IDF) rather than by their pooled MiniLM vectors.

Only texts and names (public inputs) and the ``(child, parent)`` statements the caller passes are read.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from textkg.evaluation.placement.methods import PlacementScorer
from textkg.evaluation.placement.parents import ChildParents
from textkg.evaluation.placement.text import (
    SparseRows,
    TfIdf,
    containment_scorer,
    pairwise_scorer,
    row_entries,
    tfidf_scorer,
)


def children_tfidf_scorer(texts: Sequence[str], parent_edges: torch.Tensor, fit_on: torch.Tensor) -> PlacementScorer:
    """``score(terms (b,), candidates (c,)) -> (b, c)``: mean TF-IDF cosine of a term's text with each child's text.

    Args:
        texts: What each entity id is read from.
        parent_edges: ``(m, 2)`` long ``(child, parent)`` statements (the hierarchy the caller may read).
        fit_on: Entity ids whose texts fit the IDF (training terms).
    """
    n = len(texts)
    x = TfIdf.fit([texts[i] for i in fit_on.tolist()]).transform(texts)  # (n, V) sparse, rows L2-normalised
    edges = parent_edges.long().reshape(-1, 2)
    child, parent = (torch.unique(edges, dim=0) if len(edges) else edges).T
    sums = _children_sums(x, child, parent)  # (n, V) each term's children's rows summed
    counts = torch.bincount(parent, minlength=n).float()
    summed = pairwise_scorer(x, sums)
    rows = SparseRows(x)

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        s = summed(terms, candidates)  # (b, c) dot products with the children's sums
        k = counts[candidates].clone()
        mine = torch.isin(child, terms) & torch.isin(parent, candidates)
        if bool(mine.any()):  # take out the scored terms' own rows from their parents' sums
            at = torch.full((n,), -1, dtype=torch.long)
            at[candidates] = torch.arange(len(candidates))
            row = torch.full((n,), -1, dtype=torch.long)
            row[terms] = torch.arange(len(terms))
            dense = rows.dense(terms)  # (b, V)
            gram = dense @ dense.T  # (b, b)
            columns = at[parent[mine]]
            s.index_add_(1, columns, -gram[:, row[child[mine]]])
            k.index_add_(0, columns, -torch.ones(len(columns)))
        return torch.where(k > 0, s / k.clamp_min(1), torch.zeros_like(s))

    return score


def _children_sums(x: torch.Tensor, child: torch.Tensor, parent: torch.Tensor) -> torch.Tensor:
    """``(n, V)`` sparse: row ``p`` is the sum of the rows of ``x`` (coalesced sparse COO) of ``p``'s children."""
    index, values = x.indices(), x.values()
    edge, source = row_entries(torch.searchsorted(index[0], torch.arange(x.shape[0] + 1)), child)
    summed = torch.stack([parent[edge], index[1, source]])
    return torch.sparse_coo_tensor(summed, values[source], tuple(x.shape), check_invariants=False).coalesce()


def word_vote_scorer(
    texts: Sequence[str],
    parent_edges: torch.Tensor,
    fit_on: torch.Tensor,
    *,
    k: int = 20,
    temperature: float = 0.1,
    similarity: PlacementScorer | None = None,
) -> PlacementScorer:
    """``tfidf_vote``: the neighbour vote (:func:`.combination.neighbour_vote_scorer`) with TF-IDF neighbours.

    The ``k`` candidates whose texts are most TF-IDF-similar to the new term's (:func:`.text.tfidf_scorer`)
    each give ``softmax(similarity / temperature)`` over the ``k`` to their own parents (in ``parent_edges``).
    ``similarity``: that TF-IDF scorer when the caller has it already (the re-ranker's ``tfidf`` feature).
    """
    similarity = tfidf_scorer(texts, fit_on) if similarity is None else similarity
    parents = ChildParents(parent_edges, len(texts))  # the neighbours' statements only (:mod:`.parents`)

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        top, cols = similarity(terms, candidates).topk(min(k, len(candidates)), dim=1)  # (b, k)
        return parents.votes(candidates[cols], torch.softmax(top / temperature, 1), candidates)

    return score


def name_containment_scorer(names: Sequence[str], fit_on: torch.Tensor) -> PlacementScorer:
    """IDF-weighted share of a candidate's name words found in the new term's **name** (module docstring)."""
    return containment_scorer(names, names, fit_on)


__all__ = ["children_tfidf_scorer", "name_containment_scorer", "word_vote_scorer"]
