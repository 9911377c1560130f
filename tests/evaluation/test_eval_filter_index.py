"""FilterIndex lookups equal brute-force set queries; bad input is a DataError."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from textkg.errors import DataError
from textkg.evaluation import FilterIndex


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10), st.integers(1, 4), st.integers(0, 40), st.integers(0, 15), st.integers(0, 2**31 - 1))
def test_lookups_match_sets(num_entities, num_relations, n, b, seed):
    g = torch.Generator().manual_seed(seed)
    triples = torch.stack(
        [
            torch.randint(0, num_entities, (n,), generator=g),
            torch.randint(0, num_relations, (n,), generator=g),
            torch.randint(0, num_entities, (n,), generator=g),
        ],
        1,
    )
    index = FilterIndex.from_triples(triples, num_entities, num_relations)
    known = {tuple(x) for x in triples.tolist()}
    assert index.num_triples == len(known)
    e = torch.randint(0, num_entities, (b,), generator=g)
    r = torch.randint(0, num_relations, (b,), generator=g)

    rows, tails = index.true_tails(e, r)
    got = sorted(zip(rows.tolist(), tails.tolist(), strict=True))
    want = sorted((i, t) for i in range(b) for (h, rr, t) in known if (h, rr) == (int(e[i]), int(r[i])))
    assert got == want

    rows, heads = index.true_heads(r, e)
    got = sorted(zip(rows.tolist(), heads.tolist(), strict=True))
    want = sorted((i, h) for i in range(b) for (h, rr, t) in known if (rr, t) == (int(r[i]), int(e[i])))
    assert got == want


def test_empty_index_finds_nothing():
    index = FilterIndex.from_triples(torch.empty(0, 3, dtype=torch.long), 5, 2)
    rows, ents = index.true_tails(torch.tensor([0, 1]), torch.tensor([1, 0]))
    assert rows.numel() == ents.numel() == 0


@pytest.mark.parametrize(
    "triples, match",
    [
        (torch.zeros(4, 2, dtype=torch.long), r"\(n, 3\)"),
        (torch.zeros(4, 3), "integer"),
        (torch.tensor([[0, 0, 0], [0, 2, 1]]), "filter triple 1 has relation id 2"),
        (torch.tensor([[0, 0, 5]]), "filter triple 0 has tail id 5"),
        (torch.tensor([[-1, 0, 0]]), "head id -1"),
    ],
)
def test_bad_triples_raise_data_error(triples, match):
    with pytest.raises(DataError, match=match):
        FilterIndex.from_triples(triples, 5, 2)
