"""Filtered ranking scores each distinct query once (issue 38: ``hpo``'s 49,576 test statements ask
15,508 distinct tail queries and 4,220 distinct head queries), with the ranks of scoring every triple."""

from __future__ import annotations

import pytest
import torch
from eval_oracle import TableScorer, oracle_rank, random_graph

from textkg.evaluation import FilterIndex, compute_ranks


class CountingScorer(TableScorer):
    """A :class:`TableScorer` that counts the query rows it is asked to score."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__(table)
        self.rows = 0

    def score_tails(self, heads, relations, candidates):
        self.rows += len(heads)
        return super().score_tails(heads, relations, candidates)

    def score_heads(self, relations, tails, candidates):
        self.rows += len(tails)
        return super().score_heads(relations, tails, candidates)


@pytest.mark.parametrize("batch_size, chunk", [(512, None), (7, None), (7, 5)])
def test_each_distinct_query_is_scored_once_with_the_oracles_ranks(batch_size, chunk):
    e, r = 12, 2
    triples = random_graph(n=300, e=e, r=r, seed=1)  # 300 statements, at most 24 distinct queries a direction
    table = torch.randint(0, 4, (e, r, e), generator=torch.Generator().manual_seed(2)).float()  # many ties
    scorer = CountingScorer(table)
    index = FilterIndex.from_triples(triples, e, r)
    result = compute_ranks(
        scorer, triples, filter_index=index, num_entities=e, batch_size=batch_size, candidate_chunk=chunk
    )
    known = {tuple(t) for t in triples.tolist()}
    for direction, ranks in (("head", result.head_ranks), ("tail", result.tail_ranks)):
        expected = [oracle_rank(table, tuple(t), direction, range(e), known) for t in triples.tolist()]
        assert ranks.tolist() == expected
    distinct = sum(len({(t[q], t[1]) for t in triples.tolist()}) for q in (0, 2))
    batches = -(-len(triples) // batch_size)
    chunks = 1 if chunk is None else -(-e // chunk)
    assert scorer.rows <= (distinct + 2 * batches) * chunks  # at most one extra row per batch boundary
    assert scorer.rows < 2 * len(triples) * chunks / 2  # far fewer than one row per triple and direction
