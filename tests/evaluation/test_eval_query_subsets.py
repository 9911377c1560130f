"""Query-level subsets (:class:`QueryMask`): hand-computed ranks, the pipeline's
``answer_seen`` / ``answer_unseen`` masks, and properties against triple-level subsets."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from eval_oracle import TableScorer, oracle_rank

from textkg.errors import ConfigError
from textkg.evaluation import FilterIndex, RankingMetrics, evaluate
from textkg.evaluation.metrics import QueryMask
from textkg.pipeline.report import _subset_masks

# One relation (think ``is_a``), four entities; 0 and 1 were seen in training, 2 and 3 are new.
E, R = 4, 1
SEEN = torch.tensor([0, 1])
KG = SimpleNamespace(num_entities=E, num_relations=R, relations=["is_a"])
# score(h, is_a, t) = M[h][t]
M = [[0.0, 5.0, 1.0, 2.0], [7.0, 0.0, 4.0, 1.0], [6.0, 2.0, 0.0, 7.0], [1.0, 5.0, 1.0, 0.0]]
TABLE = torch.tensor(M)[:, None, :]
TRIPLES = torch.tensor(
    [
        [2, 0, 0],  # new term 2 is_a seen 0: tail answer seen, head answer unseen
        [0, 0, 1],  # both seen
        [1, 0, 3],
    ]
)  # seen 1 is_a new 3: head answer seen, tail answer unseen
FILTER = torch.cat([TRIPLES, torch.tensor([[0, 0, 3]])])  # plus one known (training) triple
# Filtered realistic ranks, by hand:
#   (2,0,?) target 0 (6): only 3 (7) beats it                                -> tail 2
#   (?,0,0) target 2 (6): only 1 (7) beats it                                -> head 2
#   (0,0,?) target 1 (5): 3 is filtered, 0 (0) and 2 (1) lose                -> tail 1
#   (?,0,1) target 0 (5): 3 ties (5), 1 (0) and 2 (2) lose                   -> head 1.5
#   (1,0,?) target 3 (1): 0 (7) and 2 (4) beat it, 1 (0) loses               -> tail 3
#   (?,0,3) target 1 (1): 0 is filtered, 2 (7) beats it, 3 (0) loses         -> head 2
HEAD_RANKS = [2.0, 1.5, 2.0]
TAIL_RANKS = [2.0, 1.0, 3.0]


def run_eval(subset_masks):
    index = FilterIndex.from_triples(FILTER, E, R)
    return evaluate(
        TableScorer(TABLE), TRIPLES, filter_index=index, num_entities=E, subset_masks=subset_masks
    ).to_dict()


def test_hand_ranks_agree_with_the_oracle():
    known = {tuple(x) for x in FILTER.tolist()}
    for direction, expected in (("head", HEAD_RANKS), ("tail", TAIL_RANKS)):
        got = [oracle_rank(TABLE, tuple(x), direction, range(E), known) for x in TRIPLES.tolist()]
        assert got == expected, direction


def test_answer_seen_and_unseen_from_hand_ranks():
    d = run_eval(_subset_masks(TRIPLES, SEEN, KG))
    assert d["mrr"] == pytest.approx((1 / 2 + 2 / 3 + 1 / 2 + 1 / 2 + 1 + 1 / 3) / 6)

    seen = d["subsets"]["answer_seen"]  # head queries of triples 1, 2 (1.5, 2); tail of 0, 1 (2, 1)
    assert seen["mrr"] == pytest.approx((2 / 3 + 1 / 2 + 1 / 2 + 1) / 4)
    assert seen["mr"] == pytest.approx((1.5 + 2 + 2 + 1) / 4)
    assert (seen["hits@1"], seen["hits@3"], seen["num_triples"]) == (0.25, 1.0, 3)
    assert seen["head"]["mrr"] == pytest.approx((2 / 3 + 1 / 2) / 2) and seen["head"]["num_triples"] == 2
    assert seen["tail"]["mrr"] == pytest.approx((1 / 2 + 1) / 2) and seen["tail"]["num_triples"] == 2

    unseen = d["subsets"]["answer_unseen"]  # head query of triple 0 (2); tail query of triple 2 (3)
    assert unseen["mrr"] == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert (unseen["mr"], unseen["hits@1"], unseen["hits@3"], unseen["num_triples"]) == (2.5, 0.0, 1.0, 2)
    assert unseen["head"] == pytest.approx(
        {"mrr": 0.5, "mr": 2.0, "hits@1": 0.0, "hits@3": 1.0, "hits@10": 1.0, "num_triples": 1}
    )
    assert unseen["tail"]["mrr"] == pytest.approx(1 / 3) and unseen["tail"]["num_triples"] == 1

    # the triple-level subsets are unchanged: head_unseen is triple 0, both queries
    assert d["subsets"]["head_unseen"]["mrr"] == pytest.approx(0.5)
    assert d["subsets"]["head_unseen"]["num_triples"] == 1


def test_subset_layout_matches_triple_subsets():
    d = run_eval(_subset_masks(TRIPLES, SEEN, KG))
    assert list(d["subsets"]) == [
        "both_seen",
        "head_unseen",
        "tail_unseen",
        "any_unseen",
        "answer_seen",
        "answer_unseen",
        "relation:is_a",
    ]
    keys = set(d["subsets"]["both_seen"])
    for sub in d["subsets"].values():
        assert set(sub) == keys == {"mrr", "mr", "hits@1", "hits@3", "hits@10", "num_triples", "head", "tail"}


def test_all_seen_leaves_out_answer_unseen_and_answer_seen_is_everything():
    d = run_eval(_subset_masks(TRIPLES, torch.arange(E), KG))
    assert "answer_unseen" not in d["subsets"] and "head_unseen" not in d["subsets"]
    everything = {k: v for k, v in d.items() if k != "subsets"}
    assert d["subsets"]["answer_seen"] == everything


def same(a: dict, b: dict) -> bool:
    """Equal dicts, NaN equal to NaN (an empty subset)."""
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k])) for k in a
    )


def test_triple_level_query_mask_equals_from_ranks():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        n = int(torch.randint(1, 30, (1,), generator=g))
        head = torch.randint(1, 50, (n,), generator=g).double() / 2 + 0.5
        tail = torch.randint(1, 50, (n,), generator=g).double() / 2 + 0.5
        mask = torch.rand(n, generator=g) < 0.5
        a = RankingMetrics.from_query_mask(head, tail, QueryMask.of_triples(mask))
        b = RankingMetrics.from_ranks(head[mask], tail[mask])
        for part in ("both", "head", "tail"):
            assert same(getattr(a, part), getattr(b, part)), part


def test_seen_and_unseen_answers_partition_the_queries():
    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        n = int(torch.randint(1, 30, (1,), generator=g))
        head = torch.randint(1, 50, (n,), generator=g).double()
        tail = torch.randint(1, 50, (n,), generator=g).double()
        hs, ts = torch.rand(n, generator=g) < 0.5, torch.rand(n, generator=g) < 0.5
        seen = RankingMetrics.from_query_mask(head, tail, QueryMask(head=hs, tail=ts)).both
        unseen = RankingMetrics.from_query_mask(head, tail, QueryMask(head=~hs, tail=~ts)).both
        overall = RankingMetrics.from_ranks(head, tail).both
        m_seen, m_unseen = int(hs.sum() + ts.sum()), int((~hs).sum() + (~ts).sum())
        assert m_seen + m_unseen == 2 * n
        total = sum(m * d["mrr"] for m, d in ((m_seen, seen), (m_unseen, unseen)) if m)
        assert total / (2 * n) == pytest.approx(overall["mrr"], rel=1e-12)


def test_empty_direction_is_nan_with_zero_count():
    head, tail = torch.tensor([1.0, 2.0]), torch.tensor([4.0, 1.0])
    m = RankingMetrics.from_query_mask(
        head, tail, QueryMask(head=torch.tensor([False, False]), tail=torch.tensor([True, False]))
    )
    assert m.head["num_triples"] == 0 and math.isnan(m.head["mrr"])
    assert m.tail["mrr"] == m.both["mrr"] == 0.25 and m.both["num_triples"] == 1
    assert not QueryMask(head=torch.tensor([False]), tail=torch.tensor([False])).any()


@pytest.mark.parametrize(
    "mask, match",
    [
        (
            QueryMask(head=torch.ones(2, dtype=torch.bool), tail=torch.ones(3, dtype=torch.bool)),
            "'q' \\(head queries\\)",
        ),
        (QueryMask(head=torch.ones(3, dtype=torch.bool), tail=torch.ones(3)), "'q' \\(tail queries\\)"),
        (QueryMask(head=[True, True, True], tail=torch.ones(3, dtype=torch.bool)), "'q' \\(head queries\\)"),
    ],
)
def test_bad_query_mask_raises_config_error(mask, match):
    with pytest.raises(ConfigError, match=match) as err:
        run_eval({"q": mask})
    assert err.value.field == "subset_masks"
