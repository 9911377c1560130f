"""End to end on the checked-in tiny inductive BLP fixture, every candidate protocol."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from eval_oracle import TableScorer, oracle_rank

from textkg.data import candidate_entities, load_dataset, make_split
from textkg.evaluation import FilterIndex, compute_ranks

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp_ind"


@pytest.fixture(scope="module")
def prepared():
    kg = load_dataset(FIXTURE)
    split = make_split(kg, "inductive")
    index = FilterIndex.from_triples(split.filter_triples, kg.num_entities, kg.num_relations)
    g = torch.Generator().manual_seed(0)
    table = torch.randint(0, 4, (kg.num_entities, kg.num_relations, kg.num_entities), generator=g).float()
    return kg, split, index, table


@pytest.mark.parametrize("which", ["valid", "test"])
@pytest.mark.parametrize("protocol", ["all", "blp", "split"])
def test_fixture_ranks_match_oracle(prepared, which, protocol):
    kg, split, index, table = prepared
    candidates = candidate_entities(kg, split, which, protocol)
    triples = split.triples(which)
    result = compute_ranks(
        TableScorer(table),
        triples,
        filter_index=index,
        candidates=candidates,
        num_entities=kg.num_entities,
        batch_size=16,
    )
    known = {tuple(x) for x in split.filter_triples.tolist()}
    cands = candidates.tolist()
    for direction, ranks in (("head", result.head_ranks), ("tail", result.tail_ranks)):
        assert ranks.tolist() == [oracle_rank(table, tuple(x), direction, cands, known) for x in triples.tolist()]
