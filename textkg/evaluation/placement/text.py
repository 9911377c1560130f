"""Word-level comparisons of a new term's text with a candidate's: TF-IDF and name-token overlap.

The MiniLM features that the other placement scorers read pool a text into one
vector. These scorers compare words: a new term ``"Cyst of the left kidney"``
shares ``kidney`` and ``cyst`` with ``"Renal cyst"``'s text only through the
encoder, but shares ``cyst`` with it literally.

* :class:`TfIdf`: a vocabulary and inverse document frequencies fitted on the
  candidates' texts (public training terms), ``idf(w) = log((1 + n) / (1 + df(w))) + 1``
  (the smoothed form of scikit-learn's ``TfidfVectorizer``; Salton & Buckley 1988
  for TF-IDF weighting), rows L2-normalised.
* :func:`tfidf_scorer`: the ``tfidf-nn`` baseline, the cosine of the TF-IDF
  vectors of the new term's text and the candidate's (the simplest word-level
  alternative a curator would try).
* :func:`containment_scorer`: the fraction of a candidate's *name* words
  (IDF-weighted) that occur in the new term's text: a parent's name is often
  contained in its children's names (``"Abnormality of the kidney"`` above
  ``"Abnormality of the renal tubule"``).

Texts are read as data only: lower-cased ASCII word pieces, no code run.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from textkg.evaluation.placement.methods import PlacementScorer

_WORD = re.compile(r"[a-z0-9]+")
#: Function words that carry no placement signal (a fixed list: the texts do not choose it).
STOP_WORDS = frozenset(
    "a an and are as at be by for from in into is it its of on or that the their this to which with".split()
)


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words of ``text``, stop words removed."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


@dataclass(frozen=True, eq=False)
class TfIdf:
    """A TF-IDF vocabulary fitted on a set of documents.

    Attributes:
        vocabulary: Word -> column.
        idf: ``(V,)`` float inverse document frequency per column.
    """

    vocabulary: dict[str, int]
    idf: torch.Tensor

    @classmethod
    def fit(cls, documents: Sequence[str]) -> TfIdf:
        """Vocabulary and smoothed IDF of ``documents`` (module docstring)."""
        df: Counter[str] = Counter()
        for doc in documents:
            df.update(set(words(doc)))
        vocabulary = {w: i for i, w in enumerate(sorted(df))}
        n = len(documents)
        idf = torch.tensor([math.log((1 + n) / (1 + df[w])) + 1 for w in vocabulary], dtype=torch.float32)
        return cls(vocabulary=vocabulary, idf=idf)

    def transform(self, texts: Sequence[str], *, binary: bool = False) -> torch.Tensor:
        """``(n, V)`` sparse COO rows: term frequency (or presence, ``binary``) x IDF, L2-normalised.

        Words outside the vocabulary are dropped; a text with none gives a zero row.
        """
        rows: list[int] = []
        cols, vals = [], []
        for i, text in enumerate(texts):
            counts = Counter(self.vocabulary[w] for w in words(text) if w in self.vocabulary)
            if not counts:
                continue
            col = torch.tensor(sorted(counts), dtype=torch.long)
            tf = torch.ones(len(col)) if binary else torch.tensor([float(counts[c]) for c in col.tolist()])
            v = tf * self.idf[col]
            rows += [i] * len(col)
            cols.append(col)
            vals.append(v / v.norm())
        return sparse_rows(rows, cols, vals, (len(texts), len(self.vocabulary)))


def sparse_rows(
    rows: list[int], cols: list[torch.Tensor], vals: list[torch.Tensor], size: tuple[int, int]
) -> torch.Tensor:
    """A coalesced ``size`` sparse COO matrix from per-row column and value pieces."""
    if not cols:
        index, values = torch.zeros(2, 0, dtype=torch.long), torch.zeros(0)
    else:
        index, values = torch.stack([torch.tensor(rows, dtype=torch.long), torch.cat(cols)]), torch.cat(vals)
    return torch.sparse_coo_tensor(index, values, size, check_invariants=False).coalesce()


def row_entries(starts: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The entries of each of ``rows`` in a row-sorted COO matrix whose row ``r`` holds entries
    ``starts[r]:starts[r + 1]``: ``(request, position)``, ``request[k]`` the index into ``rows`` and
    ``position[k]`` the entry's position."""
    per = starts[rows + 1] - starts[rows]
    request = torch.repeat_interleave(torch.arange(len(rows)), per)
    first = torch.repeat_interleave(torch.cumsum(per, 0) - per, per)
    return request, starts[rows][request] + torch.arange(len(request)) - first


def dense_rows(matrix: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Dense ``(len(ids), V)`` rows of a sparse COO matrix."""
    return torch.index_select(matrix, 0, ids.long()).to_dense()


class SparseRows:
    """Rows of a sparse COO ``(n, V)`` matrix, each read from its own entries (``torch.index_select`` on a sparse
    matrix passes over all of them, and its result must be coalesced again: a sort, once per batch of terms).

    Args:
        matrix: ``(n, V)`` sparse COO.
    """

    def __init__(self, matrix: torch.Tensor) -> None:
        matrix = matrix.coalesce()
        self.shape = tuple(matrix.shape)
        self.index, self.values = matrix.indices(), matrix.values()
        self.starts = torch.searchsorted(self.index[0].contiguous(), torch.arange(self.shape[0] + 1))

    def sparse(self, ids: torch.Tensor) -> torch.Tensor:
        """``(len(ids), V)`` coalesced sparse rows: equal to ``index_select(matrix, 0, ids).coalesce()``."""
        row, at = row_entries(self.starts, ids.long())  # row ascending, each row's columns ascending: coalesced
        index = torch.stack([row, self.index[1, at]])
        size = (len(ids), self.shape[1])
        return torch.sparse_coo_tensor(index, self.values[at], size, check_invariants=False, is_coalesced=True)

    def dense(self, ids: torch.Tensor) -> torch.Tensor:
        """``(len(ids), V)`` dense rows: equal to :func:`dense_rows`."""
        row, at = row_entries(self.starts, ids.long())
        out = torch.zeros(len(ids), self.shape[1], dtype=self.values.dtype)
        out[row, self.index[1, at]] = self.values[at]
        return out


def pairwise_scorer(queries: torch.Tensor, candidates: torch.Tensor) -> PlacementScorer:
    """``score(terms, candidates) = queries[terms] . candidates[candidates]`` for sparse ``(n, V)`` rows."""
    query_rows, candidate_rows = SparseRows(queries), SparseRows(candidates)

    def score(terms: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
        # the terms' rows as a contiguous (V, b): the product reads each entry's row of it at once
        # (a strided transposed view was 3-4 times slower, for the same sums in the same order)
        dense = query_rows.dense(terms).T.contiguous()
        return torch.sparse.mm(candidate_rows.sparse(cands), dense).T.contiguous()  # (b, c)

    return score


def _batch_key(terms: torch.Tensor, candidates: torch.Tensor) -> tuple:
    """A batch's identity by content: its term ids, and its candidates' shape and ids (a freed tensor's memory may
    hold the next one, so never its address)."""
    return tuple(terms.tolist()), tuple(candidates.shape), hash(candidates.cpu().contiguous().numpy().tobytes())


def last_call_memo(scorer: PlacementScorer) -> PlacementScorer:
    """``scorer``, keeping its last result: two features that read the same scores (the re-ranker's ``tfidf`` and
    the vote over TF-IDF neighbours; the description cosine and the neighbour votes) compute them once per batch of
    terms. The result is shared: a caller must not write into it. A call is the last one again when its terms and
    its candidates hold the same ids (compared by content: a freed tensor's memory may hold the next one)."""
    last: dict[tuple, torch.Tensor] = {}

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        key = _batch_key(terms, candidates)
        if key not in last:
            last.clear()
            last[key] = scorer(terms, candidates)
        return last[key]

    return score


#: Bytes of results :func:`kept_scorer` keeps at most (the report's memory estimate counts them:
#: :func:`textkg.pipeline.memory_report.placement_parts`).
KEPT_SCORES_BYTES = 256 << 20


def kept_scorer(scorer: PlacementScorer, *, budget: int = KEPT_SCORES_BYTES) -> PlacementScorer:
    """``scorer``, keeping its results for batches it may be asked again, up to ``budget`` bytes (the oldest
    dropped first). The post-run report ranks the same validation and test batches with the re-ranker in several
    passes (the added weight's grid, parent support's tuning and its rows, the final ranks: four to eight calls per
    batch on the README split); its pair features are most of each call's cost. Each call returns a copy, so a
    caller may write into it; a batch is the same when its terms and its candidates hold the same ids (compared by
    content, as :func:`last_call_memo` does)."""
    kept: dict[tuple, torch.Tensor] = {}
    held = [0]  # bytes in kept

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        key = _batch_key(terms, candidates)
        if key in kept:
            kept[key] = kept.pop(key)  # the most recent last
            return kept[key].clone()
        result = scorer(terms, candidates)
        size = _nbytes(result)
        if size <= budget:
            while held[0] + size > budget:
                held[0] -= _nbytes(kept.pop(next(iter(kept))))
            kept[key] = result.clone()
            held[0] += size
        return result

    return score


def _nbytes(t: torch.Tensor) -> int:
    return t.element_size() * t.nelement()


def tfidf_scorer(texts: Sequence[str], fit_on: torch.Tensor) -> PlacementScorer:
    """``tfidf-nn``: cosine of TF-IDF vectors of ``texts`` (one per entity id), IDF fitted on ``fit_on`` ids' texts."""
    model = TfIdf.fit([texts[i] for i in fit_on.tolist()])
    x = model.transform(texts)
    return pairwise_scorer(x, x)


def containment_scorer(texts: Sequence[str], names: Sequence[str], fit_on: torch.Tensor) -> PlacementScorer:
    """IDF-weighted share of a candidate's name words that occur in the new term's text, in ``[0, 1]``.

    Args:
        texts: What each entity id's new term is read from (its description, or its name alone).
        names: Each entity id's name.
        fit_on: Entity ids whose names fit the IDF (the candidates: public training terms).
    """
    model = TfIdf.fit([names[i] for i in fit_on.tolist()])
    present = _presence(model, texts)
    return pairwise_scorer(present, name_weights(model, names))


#: Candidate names and synonyms compared at once by :func:`synonym_containment_scorer` (its ``(b, strings)`` block).
SYNONYM_BLOCK = 1 << 16


def synonym_containment_scorer(
    texts: Sequence[str], names: Sequence[str], synonyms: Sequence[Sequence[str]], fit_on: torch.Tensor
) -> PlacementScorer:
    """:func:`containment_scorer` read on the candidate's name **and each of its synonyms**, the best of them: an
    ontology names a parent one way and its children may use a synonym (HPO's "Dyschromatopsia", exact synonym
    "Color blindness"). The IDF is fitted on the names and synonyms of ``fit_on``; an entity without synonyms
    (``synonyms[i]`` empty, or ``i`` past its end: a new term) is read on its name alone, as ``containment``.

    Args:
        texts: What each entity id's new term is read from.
        names: Each entity id's name.
        synonyms: Each entity id's synonyms (``KnowledgeGraph.entity_synonyms``).
        fit_on: Entity ids whose names and synonyms fit the IDF (the candidates: public training terms).
    """
    strings: list[str] = []
    starts = [0]
    for i, name in enumerate(names):
        own = synonyms[i] if i < len(synonyms) else ()
        strings += [name, *own]
        starts.append(len(strings))
    begin = torch.tensor(starts, dtype=torch.long)
    fit = fit_on.long()
    model = TfIdf.fit([strings[j] for i in fit.tolist() for j in range(starts[i], starts[i + 1])])
    present = _presence(model, texts)
    term_rows, string_rows = SparseRows(present), SparseRows(name_weights(model, strings))

    def score(terms: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
        dense = term_rows.dense(terms).T.contiguous()  # (V, b)
        out = torch.zeros(len(terms), len(cands), dtype=dense.dtype)
        owner, at = row_entries(begin, cands.long())  # each candidate's strings: (its column, the string's row)
        # at most SYNONYM_BLOCK strings at once (one candidate's may span blocks): a file's synonym count does not
        # set the (b, strings) block's memory
        for start in range(0, len(at), SYNONYM_BLOCK):
            cols, rows = owner[start : start + SYNONYM_BLOCK], at[start : start + SYNONYM_BLOCK]
            shares = torch.sparse.mm(string_rows.sparse(rows), dense).T  # (b, block): each string's share
            out.scatter_reduce_(1, cols.expand(len(terms), -1), shares, reduce="amax", include_self=True)
        return out

    return score


def _presence(model: TfIdf, texts: Sequence[str]) -> torch.Tensor:
    """``(n, V)`` sparse: 1 where a vocabulary word occurs in the text."""
    present = model.transform(texts, binary=True)
    return torch.sparse_coo_tensor(
        present.indices(), torch.ones_like(present.values()), present.shape, check_invariants=False
    ).coalesce()


def name_weights(model: TfIdf, names: Sequence[str]) -> torch.Tensor:
    """``(n, V)`` sparse: each name's words weighted ``idf^2 / sum idf^2`` (the share of the name's weight)."""
    squared = model.idf.pow(2)
    rows: list[int] = []
    cols, vals = [], []
    for i, name in enumerate(names):
        col = sorted({model.vocabulary[w] for w in words(name) if w in model.vocabulary})
        if col:
            c = torch.tensor(col, dtype=torch.long)
            rows += [i] * len(col)
            cols.append(c)
            vals.append(squared[c] / squared[c].sum())
    return sparse_rows(rows, cols, vals, (len(names), len(model.vocabulary)))


__all__ = [
    "STOP_WORDS",
    "SparseRows",
    "TfIdf",
    "containment_scorer",
    "dense_rows",
    "kept_scorer",
    "last_call_memo",
    "name_weights",
    "pairwise_scorer",
    "row_entries",
    "sparse_rows",
    "synonym_containment_scorer",
    "tfidf_scorer",
    "words",
]
