"""Evaluation sharded across processes (``QueryShard``): the gathered ranks are one process's ranks."""

from __future__ import annotations

import pytest
import torch
from eval_oracle import TableScorer
from hypothesis import given, settings
from hypothesis import strategies as st
from test_eval_candidate_chunks import problems

from textkg.errors import ConfigError
from textkg.evaluation import FilterIndex, compute_ranks
from textkg.evaluation.ranking import QueryShard


class _Gather:
    """All-gather over simulated ranks: every share's ranks of the direction asked, in rank order."""

    def __init__(self, world: int, scorer, triples, kwargs) -> None:
        self.parts = [compute_ranks(scorer, triples[r::world], **kwargs) for r in range(world)]
        self.calls = 0

    def __call__(self, part: torch.Tensor) -> list[torch.Tensor]:
        direction = ("head", "tail")[self.calls]  # compute_ranks gathers heads, then tails
        self.calls += 1
        return [getattr(p, f"{direction}_ranks") for p in self.parts]


@settings(max_examples=150, deadline=None)
@given(problems(), st.integers(2, 4), st.booleans())
def test_gathered_shard_ranks_equal_one_process_ranks(problem, world, exclude_query):
    table, triples, filter_triples, candidates, batch_size = problem
    index = FilterIndex.from_triples(filter_triples, table.shape[0], table.shape[1])
    kwargs = dict(
        filter_index=index,
        candidates=candidates,
        num_entities=table.shape[0],
        batch_size=batch_size,
        exclude_query=exclude_query,
    )
    scorer = TableScorer(table)
    whole = compute_ranks(scorer, triples, **kwargs)
    for rank in range(world):  # every rank ends with the whole split's ranks
        shard = QueryShard(rank=rank, world=world, gather=_Gather(world, scorer, triples, kwargs))
        sharded = compute_ranks(scorer, triples, shard=shard, **kwargs)
        assert torch.equal(sharded.head_ranks, whole.head_ranks)
        assert torch.equal(sharded.tail_ranks, whole.tail_ranks)
        assert sharded.num_candidates == whole.num_candidates


def test_a_bad_triple_in_another_share_stops_this_rank_before_any_gather():
    table = torch.zeros(4, 1, 4)
    index = FilterIndex.from_triples(torch.tensor([[0, 0, 1]]), 4, 1)
    triples = torch.tensor([[0, 0, 1], [0, 0, 9]])  # row 1 is rank 1's, and out of range

    def gather(part):
        raise AssertionError("gathered before checking the whole split")

    with pytest.raises(Exception) as err:
        compute_ranks(TableScorer(table), triples, filter_index=index, num_entities=4, shard=QueryShard(0, 2, gather))
    assert not isinstance(err.value, AssertionError)
    with pytest.raises(ConfigError, match="candidates"):  # a target outside the candidates, in rank 1's share
        compute_ranks(
            TableScorer(table),
            torch.tensor([[0, 0, 1], [0, 0, 2]]),
            filter_index=index,
            num_entities=4,
            candidates=torch.tensor([0, 1]),
            shard=QueryShard(0, 2, gather),
        )
