"""Late interaction on word vectors: a candidate's name words, each matched to its most similar word of the new term.

The description features pool a whole text into one vector, and :func:`.text.containment_scorer`
matches words only when they are spelled the same. Late interaction (ColBERT, Khattab & Zaharia
2020, SIGIR, "ColBERT: Efficient and Effective Passage Search via Contextualized Late Interaction
over BERT", eq. 3, MaxSim) keeps one vector per token and scores a pair by the sum, over one side's
tokens, of the largest cosine with the other side's tokens. Here:

* the tokens are **words** (:func:`.text.words`), each encoded once, alone, by the description
  encoder (MiniLM, mean pooled; :class:`WordVectors`). A word's vector does not depend on the text it
  appears in, so one ``(W, D)`` table of the vocabulary's words, cached on disk by the caller's
  encoder, replaces per-text token vectors (36,853 HPO texts x 32 word pieces x 384 floats would be
  1.8 GB; the 26,689 words of their texts are 41 MB);
* :func:`maxsim_scorer` (``maxsim``) scores a new term ``q`` against a candidate ``c`` as

      maxsim(q, c) = sum over name words v of c of  a_c(v) * max over words w of q's text of s(w, v),

  ``a_c(v) = idf(v)^2 / sum_u idf(u)^2`` over ``c``'s name words (the weights of
  :func:`.text.containment_scorer`) and ``s(w, v)`` the cosine of the two words' vectors where it is
  among ``w``'s :data:`TOP_WORDS` closest name words and at least :data:`THRESHOLD`, else 0. A word
  matches itself with ``s = 1``, so the feature is :func:`.text.containment_scorer` with spelling
  replaced by meaning (``renal`` in the new term's text finds ``kidney`` in a candidate's name).

Texts and names are public inputs; nothing else is read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from textkg.evaluation.placement.methods import PlacementScorer
from textkg.evaluation.placement.text import SparseRows, TfIdf, name_weights, words

#: A word's closest name words kept (the rest count as 0).
TOP_WORDS = 16
#: Cosine below which two words do not match (MiniLM word vectors of unrelated words lie around 0.1-0.4).
THRESHOLD = 0.6
#: Vocabulary words compared with the name words at once (a ``(chunk, V)`` float32 block).
MATCH_BLOCK = 2048
#: Fewest rows of such a block (a smaller one is padded: :class:`_Matches`).
MIN_BLOCK = 16
#: Texts whose best matches are gathered at once (bounds the transient ``(text, match)`` arrays).
_TEXTS = 4096

#: ``words -> (len(words), D)`` float vectors, e.g. a cached sentence encoder.
WordEncoder = Callable[[list[str]], torch.Tensor]


@dataclass(frozen=True, eq=False)
class WordVectors:
    """One L2-normalised vector per word of a vocabulary.

    Attributes:
        vocabulary: Word -> row.
        vectors: ``(W, D)`` float32, rows L2-normalised.
    """

    vocabulary: dict[str, int]
    vectors: torch.Tensor

    @classmethod
    def encode(cls, texts: Sequence[str], encoder: WordEncoder) -> WordVectors:
        """The vectors of every word of ``texts`` (:func:`.text.words`), sorted, encoded by ``encoder``."""
        vocabulary = sorted({w for text in texts for w in words(text)})
        vectors = encoder(vocabulary).detach().float() if vocabulary else torch.zeros(0, 1)
        if vectors.shape[0] != len(vocabulary) or vectors.ndim != 2:
            raise ValueError(f"the word encoder returned {tuple(vectors.shape)} for {len(vocabulary)} words")
        return cls({w: i for i, w in enumerate(vocabulary)}, torch.nn.functional.normalize(vectors, dim=1))


class _Matches:
    """Each vocabulary word's cosine to its :data:`TOP_WORDS` closest ``targets`` words (column ``targets[word]``),
    those of at least :data:`THRESHOLD`, computed the first time a scored text holds the word.

    Comparing every vocabulary word with every name word up front is a ``W x V`` product (34,850 x 11,420 words on
    MONDO), most of whose rows no scored text reads (the words of terms that are only candidates); here a batch
    compares only the words it meets for the first time, so the cost follows the words of the terms scored.
    A block of fewer than :data:`MIN_BLOCK` words is padded to it, so that every word's cosines come from the
    matrix-product kernel a full block uses, whichever words a batch needs (on the CPU measured, products of one to
    six rows took another path, whose float sums differ in the last bit: a cosine at the threshold could flip).
    """

    def __init__(self, vectors: WordVectors, targets: dict[str, int]) -> None:
        order = [w for w in sorted(targets, key=targets.__getitem__) if w in vectors.vocabulary]
        self.vectors = vectors.vectors
        self.targets = vectors.vectors[[vectors.vocabulary[w] for w in order]]  # (V', D)
        self.columns = torch.tensor([targets[w] for w in order], dtype=torch.long)
        size, k = len(vectors.vocabulary), min(TOP_WORDS, len(order))
        self.cols = torch.full((size, k), -1, dtype=torch.long)  # -1: no match
        self.vals = torch.zeros(size, k)
        self.done = torch.zeros(size, dtype=torch.bool)

    def rows(self, words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cols, vals)``, ``(len(words), k)`` each: the matches of each encoded word (row of ``vectors``)."""
        missing = torch.unique(words[~self.done[words]])
        k = self.cols.shape[1]
        for start in range(0, len(missing) if k else 0, MATCH_BLOCK):
            block = missing[start : start + MATCH_BLOCK]
            x = self.vectors[block]
            if len(block) < MIN_BLOCK:
                x = torch.cat([x, x[:1].expand(MIN_BLOCK - len(block), -1)])
            top, at = (x @ self.targets.T)[: len(block)].topk(k, dim=1)  # (chunk, k)
            keep = top >= THRESHOLD
            self.cols[block] = torch.where(keep, self.columns[at], -1)
            self.vals[block] = torch.where(keep, top.clamp(max=1.0), 0.0)
        self.done[missing] = True
        return self.cols[words], self.vals[words]


def maxsim_scorer(
    texts: Sequence[str], names: Sequence[str], fit_on: torch.Tensor, vectors: WordVectors
) -> PlacementScorer:
    """``maxsim`` (module docstring): a candidate's name words, IDF-weighted, each matched to the new term's text.

    Args:
        texts: What each entity id's new term is read from.
        names: Each entity id's name.
        fit_on: Entity ids whose names fit the IDF (the candidates: public training terms).
        vectors: Word vectors of (at least) the words of ``texts`` and ``names``; a word without one
            matches only itself.
    """
    model = TfIdf.fit([names[i] for i in fit_on.tolist()])
    vocabulary = model.vocabulary
    matches = _Matches(vectors, vocabulary)
    weights = SparseRows(name_weights(model, names))  # a_c(v) = idf(v)^2 / sum idf^2 over c's name words

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        soft = torch.zeros(len(terms), len(vocabulary))  # (b, V) the max cosine of each name word over the text
        ids = terms.tolist()
        for start in range(0, len(ids), _TEXTS):
            piece = ids[start : start + _TEXTS]
            key, best = _best_matches([texts[i] for i in piece], vectors.vocabulary, vocabulary, matches)
            soft.view(-1)[key + start * len(vocabulary)] = best
        return torch.sparse.mm(weights.sparse(candidates), soft.T.contiguous()).T.contiguous()  # (b, c)

    return score


def _best_matches(
    texts: Sequence[str], encoded_words: dict[str, int], name_words: dict[str, int], matches: _Matches
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(keys, best)`` of ``texts``: ``key = text * V + name word`` (``text`` its position) and the name word's
    largest match over the text's words (a spelled match counts 1)."""
    encoded: tuple[list[int], list[int]] = ([], [])  # (text, encoded word) pairs
    spelled: tuple[list[int], list[int]] = ([], [])  # (text, name word) pairs: a word matches itself
    for i, text in enumerate(texts):
        for w in set(words(text)):
            if w in encoded_words:
                encoded[0].append(i)
                encoded[1].append(encoded_words[w])
            if w in name_words:
                spelled[0].append(i)
                spelled[1].append(name_words[w])
    text_of, word = (torch.tensor(x, dtype=torch.long) for x in encoded)
    cols, vals = matches.rows(word)  # (pairs, k)
    found = cols >= 0
    owner = torch.cat([text_of[:, None].expand_as(cols)[found], torch.tensor(spelled[0], dtype=torch.long)])
    column = torch.cat([cols[found], torch.tensor(spelled[1], dtype=torch.long)])
    value = torch.cat([vals[found], torch.ones(len(spelled[0]))])
    key, inverse = torch.unique(owner * len(name_words) + column, return_inverse=True)
    return key, torch.zeros(len(key)).scatter_reduce(0, inverse, value, reduce="amax")


def minilm_word_encoder() -> WordEncoder:
    """Word vectors from the packaged MiniLM, mean pooled (the README model's description encoder), cached on disk
    as description features are (:func:`textkg.encoders.cached_encode`); the model is loaded on the first call."""

    def encode(vocabulary: list[str]) -> torch.Tensor:
        from textkg.encoders import cached_encode, get_encoder

        return cached_encode(get_encoder("bert", pooling="mean"), vocabulary)

    return encode


__all__ = [
    "MATCH_BLOCK",
    "MIN_BLOCK",
    "THRESHOLD",
    "TOP_WORDS",
    "WordEncoder",
    "WordVectors",
    "maxsim_scorer",
    "minilm_word_encoder",
]
