"""A cross-encoder over the shortlist: the last stage of placement (issue 54, item 2).

The first stage (the tuned combination, :mod:`.combination`, with the re-ranker) reads a new term as
one pooled vector plus hand-made pair features. A cross-encoder reads the two texts together
(``[CLS] new term [SEP] candidate [SEP]`` → one logit; BERTSubs, Chen et al. 2023, World Wide Web
26, fine-tunes one on an ontology's own subsumptions; Dong et al. 2024, ESWC, re-rank a retrieved
shortlist with one), at about a thousand times the cost of a cosine, so it scores only each new
term's top :data:`TOP_K` candidates of the first stage (:mod:`textkg.encoders.cross_encoder` holds the
model, :mod:`textkg.training.adapt_cross` fine-tunes it on training terms only).

Its score joins the first stage as one more component, inside the shortlist only::

    score(t, c) = A(t, c) + w · B(t, c)
    A = standardise(first stage)            over every candidate (the first stage's own ranking)
    B = standardise(cross-encoder logits)   over the term's top K, and −OUTSIDE for the rest

so ``w = 0`` is the first stage exactly, and any ``w > 0`` keeps the top ``K`` above every other
candidate and re-orders them by ``A + w · B`` (the ranks below ``K`` are unchanged). ``w`` is chosen on
validation terms (:func:`tune_shortlist_weight`, every value of :data:`WEIGHTS` ranked in one pass by
:func:`.grid.weighting_ranks`); on a tie the smaller, so ``0`` (not used) wins a tie.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from textkg.errors import ConfigError
from textkg.evaluation.placement.grid import tune_second_weight
from textkg.evaluation.placement.methods import (
    STANDARDISE,
    PlacementQueries,
    PlacementScorer,
)
from textkg.evaluation.placement.text import last_call_memo
from textkg.evaluation.scoring import standardise

#: Candidates of the first stage the cross-encoder re-scores per new term (the issue asks for 20–50; each is one
#: transformer pass over a pair of texts, the stage's whole cost).
TOP_K = 20
#: Weights of the cross-encoder's standardised score tried on validation (the first stage's weight is 1).
WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 16.0)
#: Below the shortlist: far below anything a standardised row of a few thousand candidates reaches (|z| < 100).
OUTSIDE = 1e4

#: ``pairs of (new term text, candidate text) -> (n,) logits`` (:class:`textkg.encoders.cross_encoder.CrossScorer`).
PairTextScorer = Callable[[Sequence[tuple[str, str]]], torch.Tensor]


class PairScores:
    """Cross-encoder scores of ``(term id, candidate id)`` pairs, read from ``texts`` and kept: validation
    ranks the same shortlists for every weight, and a pair is scored once.

    Args:
        score_pairs: The cross-encoder.
        texts: What each entity id is read from (a new term's: what it arrives with).
    """

    def __init__(self, score_pairs: PairTextScorer, texts: Sequence[str]) -> None:
        self.score_pairs = score_pairs
        self.texts = texts
        self._memo: dict[tuple[int, int], float] = {}
        self.seconds = 0.0

    @property
    def pairs_scored(self) -> int:
        return len(self._memo)

    def __call__(self, terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(b, k)`` float64 scores of term ``terms[i]`` against ``candidates[i, j]``."""
        b, k = candidates.shape
        keys = list(zip(terms.repeat_interleave(k).tolist(), candidates.reshape(-1).tolist(), strict=True))
        missing = [key for key in dict.fromkeys(keys) if key not in self._memo]
        if missing:
            start = time.perf_counter()
            logits = self.score_pairs([(self.texts[t], self.texts[c]) for t, c in missing])
            if tuple(logits.shape) != (len(missing),) or not bool(torch.isfinite(logits).all()):
                raise ValueError(f"the cross-encoder returned {tuple(logits.shape)} scores for {len(missing)} pairs")
            self._memo.update(zip(missing, logits.double().tolist(), strict=True))
            self.seconds += time.perf_counter() - start
        return torch.tensor([self._memo[key] for key in keys], dtype=torch.float64).reshape(b, k)


@dataclass(frozen=True)
class Shortlist:
    """The cross-encoder stage's settings: its pair scores and how many candidates it reads per term."""

    pair_scores: PairScores
    top_k: int = TOP_K
    weights: tuple[float, ...] = WEIGHTS

    def __post_init__(self) -> None:
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 2:
            raise ConfigError(f"top_k must be an integer >= 2, got {self.top_k!r}", field="top_k")
        if not self.weights or any(not w >= 0 for w in self.weights):
            raise ConfigError(f"weights must be non-negative numbers, got {self.weights!r}", field="weights")


def shortlist_parts(first: PlacementScorer, shortlist: Shortlist) -> tuple[PlacementScorer, PlacementScorer]:
    """``(A, B)`` of the module docstring, from one call of ``first`` per batch of terms."""

    def parts(terms: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = standardise(first(terms, candidates), **STANDARDISE)
        k = min(shortlist.top_k, a.shape[1])
        top = a.topk(k, dim=1).indices  # (b, k)
        cross = shortlist.pair_scores(terms, candidates[top])
        z = (cross - cross.mean(1, keepdim=True)) / cross.std(1, unbiased=False, keepdim=True).clamp_min(1e-6)
        b = torch.full_like(a, -OUTSIDE).scatter_(1, top, z)
        return a, b

    both = last_call_memo(parts)  # type: ignore[arg-type]  # returns a pair; A and B are read per batch in turn
    return (lambda t, c: both(t, c)[0]), (lambda t, c: both(t, c)[1])  # type: ignore[index]


def shortlist_scorer(first: PlacementScorer, shortlist: Shortlist, weight: float) -> PlacementScorer:
    """``A + weight · B`` (module docstring); ``weight == 0``: ``A``, and the cross-encoder is not called."""
    if weight == 0:
        return lambda terms, candidates: standardise(first(terms, candidates), **STANDARDISE)
    a, b = shortlist_parts(first, shortlist)
    return lambda terms, candidates: a(terms, candidates) + weight * b(terms, candidates)


def tune_shortlist_weight(
    first: PlacementScorer,
    shortlist: Shortlist,
    valid: PlacementQueries,
    *,
    num_entities: int,
    batch_size: int = 256,
) -> tuple[float, dict[str, float]]:
    """The cross-encoder's weight with the best validation MRR (the smallest on a tie), and every weight's MRR
    (``{"w=0.5": mrr, ...}``), from one pass over the validation terms."""
    a, b = shortlist_parts(first, shortlist)
    return tune_second_weight(a, b, shortlist.weights, valid, num_entities=num_entities, batch_size=batch_size)


__all__ = [
    "OUTSIDE",
    "TOP_K",
    "WEIGHTS",
    "PairScores",
    "PairTextScorer",
    "Shortlist",
    "shortlist_parts",
    "shortlist_scorer",
    "tune_shortlist_weight",
]
