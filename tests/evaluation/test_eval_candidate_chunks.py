"""Ranking in candidate chunks: the same ranks as one call over every candidate, bounded calls."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from eval_oracle import TableScorer, oracle_rank
from hypothesis import given, settings
from hypothesis import strategies as st

from textkg.data import candidate_entities, load_dataset, make_split
from textkg.errors import ConfigError
from textkg.evaluation import FilterIndex, compute_ranks, evaluate
from textkg.evaluation.ranking import EVAL_SCORE_BYTES, default_candidate_chunk, topk_in_chunks
from textkg.models import build_model

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp_ind"


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@st.composite
def problems(draw):
    """A tie-heavy integer score table (sometimes with infinities), a filter, candidates, a batch size."""
    num_entities = draw(st.integers(1, 12))
    num_relations = draw(st.integers(1, 3))
    n = draw(st.integers(1, 10))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    levels = draw(st.sampled_from([1, 2, 3, 10]))
    table = torch.randint(0, levels, (num_entities, num_relations, num_entities), generator=g).float()
    if draw(st.booleans()):
        special = torch.tensor([-math.inf, math.inf])[torch.randint(0, 2, table.shape, generator=g)]
        table = torch.where(torch.rand(table.shape, generator=g) < 0.2, special, table)

    def random_triples(k):
        return torch.stack(
            [
                torch.randint(0, num_entities, (k,), generator=g),
                torch.randint(0, num_relations, (k,), generator=g),
                torch.randint(0, num_entities, (k,), generator=g),
            ],
            1,
        )

    triples = random_triples(n)
    filter_triples = torch.cat([triples, random_triples(draw(st.integers(0, 4 * n)))])
    if draw(st.booleans()):
        candidates = None
    else:  # every target plus a random subset of the rest, in random order
        pick = torch.rand(num_entities, generator=g) < 0.5
        pick[torch.cat([triples[:, 0], triples[:, 2]])] = True
        ids = pick.nonzero().squeeze(1)
        candidates = ids[torch.randperm(len(ids), generator=g)]
    return table, triples, filter_triples, candidates, draw(st.integers(1, 6))


@settings(max_examples=300, deadline=None)
@given(problems(), st.integers(1, 14), st.booleans())
def test_chunked_ranks_equal_unchunked_ranks(problem, chunk, exclude_query):
    """Chunks of 1, of sizes that do not divide c, and larger than c: the same float64 ranks, exactly."""
    table, triples, filter_triples, candidates, batch_size = problem
    index = FilterIndex.from_triples(filter_triples, table.shape[0], table.shape[1])
    kwargs = dict(
        filter_index=index,
        candidates=candidates,
        num_entities=table.shape[0],
        batch_size=batch_size,
        exclude_query=exclude_query,
    )
    whole = compute_ranks(TableScorer(table), triples, candidate_chunk=table.shape[0], **kwargs)
    chunked = compute_ranks(TableScorer(table), triples, candidate_chunk=chunk, **kwargs)
    assert torch.equal(chunked.head_ranks, whole.head_ranks)
    assert torch.equal(chunked.tail_ranks, whole.tail_ranks)
    known = {tuple(x) for x in filter_triples.tolist()}
    cands = list(range(table.shape[0])) if candidates is None else candidates.tolist()
    expected = [
        oracle_rank(table, tuple(x), "tail", cands, known, exclude_query=exclude_query) for x in triples.tolist()
    ]
    assert chunked.tail_ranks.tolist() == expected


class ShiftedPerCall(TableScorer):
    """Adds a constant that depends on the call's number of columns: a stand-in for a kernel whose
    rounding depends on the shape (``torch.cdist`` changes algorithm above 25 columns)."""

    def score_tails(self, heads, relations, candidates):
        return super().score_tails(heads, relations, candidates) + 0.25 * (len(candidates) % 3)

    def score_heads(self, relations, tails, candidates):
        return super().score_heads(relations, tails, candidates) + 0.25 * (len(candidates) % 3)


@settings(max_examples=100, deadline=None)
@given(problems(), st.integers(1, 5))
def test_targets_are_compared_with_scores_of_the_same_call(problem, chunk):
    """A target scored in a call of its own would meet its tied candidates with another offset."""
    table, triples, filter_triples, candidates, batch_size = problem
    index = FilterIndex.from_triples(filter_triples, table.shape[0], table.shape[1])
    kwargs = dict(filter_index=index, candidates=candidates, num_entities=table.shape[0], batch_size=batch_size)
    plain = compute_ranks(TableScorer(table), triples, candidate_chunk=table.shape[0], **kwargs)
    shifted = compute_ranks(ShiftedPerCall(table), triples, candidate_chunk=chunk, **kwargs)
    assert torch.equal(shifted.all_ranks(), plain.all_ranks())


class CallRecorder(TableScorer):
    def __init__(self, table):
        super().__init__(table)
        self.widths: list[int] = []

    def score_tails(self, heads, relations, candidates):
        self.widths.append(len(candidates))
        return super().score_tails(heads, relations, candidates)

    def score_heads(self, relations, tails, candidates):
        self.widths.append(len(candidates))
        return super().score_heads(relations, tails, candidates)


def test_each_call_scores_at_most_chunk_plus_batch_candidates():
    g = torch.Generator().manual_seed(0)
    e, b, chunk = 300, 8, 37
    table = torch.randint(0, 5, (e, 2, e), generator=g).float()
    triples = torch.stack([torch.randint(0, e, (50,)), torch.randint(0, 2, (50,)), torch.randint(0, e, (50,))], 1)
    index = FilterIndex.from_triples(triples, e, 2)
    scorer = CallRecorder(table)
    compute_ranks(scorer, triples, filter_index=index, num_entities=e, batch_size=b, candidate_chunk=chunk)
    assert max(scorer.widths) <= chunk + b
    assert min(scorer.widths) < chunk  # the last chunk (300 = 8 * 37 + 4) is short
    scorer.widths.clear()
    compute_ranks(scorer, triples, filter_index=index, num_entities=e, batch_size=b)  # default: one chunk here
    assert set(scorer.widths) == {e}


class WholeRow(CallRecorder):
    whole_row_scores = True


def test_a_whole_row_scorer_is_never_chunked():
    table = torch.randint(0, 3, (20, 1, 20), generator=torch.Generator().manual_seed(1)).float()
    triples = torch.tensor([[0, 0, 1], [2, 0, 3]])
    scorer = WholeRow(table)
    compute_ranks(
        scorer, triples, filter_index=FilterIndex.from_triples(triples, 20, 1), num_entities=20, candidate_chunk=3
    )
    assert set(scorer.widths) == {20}


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8"])
def test_bad_candidate_chunk_raises_config_error(bad):
    triples = torch.tensor([[0, 0, 1]])
    with pytest.raises(ConfigError) as err:
        compute_ranks(
            TableScorer(torch.zeros(3, 1, 3)),
            triples,
            filter_index=FilterIndex.from_triples(triples, 3, 1),
            num_entities=3,
            candidate_chunk=bad,
        )
    assert err.value.field == "candidate_chunk"


def test_default_chunk_keeps_a_batch_of_scores_under_the_bound():
    for b in (1, 7, 256, 512, 4096):
        chunk = default_candidate_chunk(b)
        assert 4 * b * chunk <= EVAL_SCORE_BYTES < 4 * b * (chunk + 1)
    assert default_candidate_chunk(512) == 131_072
    assert default_candidate_chunk(10**9) == 1  # never 0
    with pytest.raises(ConfigError):
        default_candidate_chunk(0)


# -- an oracle test on models built over the checked-in fixture ----------------------------------


def _fixture_model(interaction: str, kwargs: dict, fusion: str):
    kg = load_dataset(FIXTURE)
    split = make_split(kg, "inductive")
    torch.manual_seed(0)
    cfg = {"interaction": interaction, "interaction_kwargs": kwargs, "dim": 16, "fusion": fusion}
    extra = {}
    if fusion != "structural":
        cfg["encoder"] = "bert"  # not run: the features are given
        extra["text_features"] = torch.randn(kg.num_entities, 12, generator=torch.Generator().manual_seed(2))
    model = build_model(
        cfg, num_entities=kg.num_entities, num_relations=kg.num_relations, seen_entities=split.train_entities, **extra
    )
    model.eval()
    if interaction == "distmult":
        # Quarter-valued parameters make every product and partial sum exact in float32, so the
        # shared unseen row gives exactly tied scores in any summation order. A BLAS matrix
        # product otherwise rounds a column by where it falls in the kernel's blocks (seen on AMD
        # EPYC: equal vectors scored 1 ulp apart, so a tie became a strict order and ranks moved).
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(torch.round(parameter * 4) / 4)
    return kg, split, model


@pytest.mark.parametrize(
    "interaction, kwargs, fusion",
    [
        ("transe", {"p": 2}, "structural"),  # torch.cdist; every unseen entity shares one row: many exact ties
        ("distmult", {}, "structural"),  # a matrix product, with the same shared row
        ("transe", {"p": 1}, "weighted"),  # text + structure: distinct vectors
    ],
)
def test_fixture_model_ranks_match_the_oracle_in_every_chunking(interaction, kwargs, fusion):
    kg, split, model = _fixture_model(interaction, kwargs, fusion)
    index = FilterIndex.from_triples(split.filter_triples, kg.num_entities, kg.num_relations)
    candidates = candidate_entities(kg, split, "test", "blp")
    triples = split.test
    with torch.no_grad():  # the oracle's table: every (h, r) against every entity, one call per relation
        table = torch.stack(
            [
                model.score_tails(
                    torch.arange(kg.num_entities), torch.full((kg.num_entities,), r), torch.arange(kg.num_entities)
                )
                for r in range(kg.num_relations)
            ],
            1,
        )
    known = {tuple(x) for x in split.filter_triples.tolist()}
    expected_tail = [oracle_rank(table, tuple(x), "tail", candidates.tolist(), known) for x in triples.tolist()]
    c = len(candidates)
    ranks = {}
    with torch.no_grad():
        for chunk in (1, 3, 7, 25, 26, c - 1, c):
            ranks[chunk] = compute_ranks(
                model,
                triples,
                filter_index=index,
                candidates=candidates,
                num_entities=kg.num_entities,
                batch_size=16,
                candidate_chunk=chunk,
            )
    for chunk, result in ranks.items():
        assert torch.equal(result.head_ranks, ranks[c].head_ranks), chunk
        assert torch.equal(result.tail_ranks, ranks[c].tail_ranks), chunk
        assert result.tail_ranks.tolist() == expected_tail, chunk
    if fusion == "structural":  # the shared unseen row does make ties: the test exercises them
        assert any(r != int(r) for r in ranks[1].all_ranks().tolist())


def test_evaluate_passes_the_chunk_on():
    kg, split, model = _fixture_model("distmult", {}, "structural")
    index = FilterIndex.from_triples(split.filter_triples, kg.num_entities, kg.num_relations)
    kwargs = dict(filter_index=index, num_entities=kg.num_entities, batch_size=8)
    with torch.no_grad():
        a = evaluate(model, split.test, candidate_chunk=5, **kwargs).to_dict()
        b = evaluate(model, split.test, **kwargs).to_dict()
    assert a == b


# -- top-k in chunks ------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.integers(1, 30), st.integers(1, 12), st.integers(1, 35), st.integers(0, 2**31 - 1))
def test_topk_in_chunks_keeps_the_best_values(b, c, k, chunk, seed):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 4, (b, c), generator=g).float()  # many ties
    values, indices = topk_in_chunks(lambda lo, hi: scores[:, lo:hi], c, k, chunk=chunk)
    expected = scores.topk(min(k, c), dim=1).values
    assert torch.equal(values, expected)
    assert torch.equal(scores.gather(1, indices), values)
    assert all(len(set(row)) == len(row) for row in indices.tolist())  # no candidate twice
