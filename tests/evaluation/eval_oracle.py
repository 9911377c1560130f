"""Helpers for evaluation tests: a table scorer and a pure-Python ranking oracle."""

from __future__ import annotations

import torch


class TableScorer:
    """Scores looked up in a dense ``(E, R, E)`` table: ``score(h, r, t) = table[h, r, t]``."""

    def __init__(self, table: torch.Tensor) -> None:
        self.table = table

    def score_tails(self, heads, relations, candidates):
        return self.table[heads[:, None], relations[:, None], candidates[None, :]]

    def score_heads(self, relations, tails, candidates):
        return self.table[candidates[None, :], relations[:, None], tails[:, None]]


def oracle_rank(
    table: torch.Tensor, triple, direction: str, candidates, known: set, *, exclude_query: bool = False
) -> float:
    """Filtered realistic rank by brute force, one candidate at a time (pure Python).

    ``exclude_query``: also skip the query's own entity (``h`` for tails, ``t`` for heads).
    """
    h, r, t = triple
    target = t if direction == "tail" else h
    query = h if direction == "tail" else t

    def score(e):
        return float(table[h, r, e]) if direction == "tail" else float(table[e, r, t])

    s_target = score(target)
    greater = equal = 0
    for e in candidates:
        if e == target or (exclude_query and e == query):
            continue
        if ((h, r, e) if direction == "tail" else (e, r, t)) in known:
            continue
        s = score(e)
        greater += s > s_target
        equal += s == s_target
    return 1 + greater + equal / 2


def oracle_metrics(ranks: list[float], ks=(1, 3, 10)) -> dict:
    out = {"mrr": sum(1 / r for r in ranks) / len(ranks), "mr": sum(ranks) / len(ranks)}
    for k in ks:
        out[f"hits@{k}"] = sum(r <= k for r in ranks) / len(ranks)
    return out


def random_graph(n: int = 200, e: int = 40, r: int = 3, seed: int = 0) -> torch.Tensor:
    """``(n, 3)`` seeded random statements over ``e`` entities and ``r`` relations."""
    g = torch.Generator().manual_seed(seed)
    return torch.stack(
        [
            torch.randint(0, e, (n,), generator=g),
            torch.randint(0, r, (n,), generator=g),
            torch.randint(0, e, (n,), generator=g),
        ],
        1,
    )
