"""k-shot protocol (textkg.evaluation.k_shot): the draw's properties, and an oracle where the
revealed link determines the answer (TransE with planted vectors)."""

from __future__ import annotations

import json

import pytest
import torch
from eval_oracle import random_graph

from textkg.data.known_links import NEW_IS_HEAD
from textkg.errors import ConfigError
from textkg.evaluation import FilterIndex
from textkg.evaluation.k_shot import ERAVG, draw_k_shot, evaluate_k_shot, k_shot_ranks, parse_ks
from textkg.models import build_model
from textkg.models.config import ModelConfig
from textkg.models.known_links import NO_LINKS, LinkMethod, with_known_links

# ---------------------------------------------------------------- the draw


SEEN = torch.arange(20)  # 20..39 are held out


def _statements(triples, entity):
    return ((triples[:, 0] == entity) | (triples[:, 2] == entity)).sum().item()


def test_draw_reveals_k_per_eligible_entity_and_counts_the_rest():
    triples = random_graph()
    for k in (0, 1, 3, 5, 10):
        d = draw_k_shot(triples, SEEN, k, num_entities=40, seed=0)
        per = torch.bincount(d.links[:, 0], minlength=40)
        counts = torch.tensor([_statements(triples, e) for e in range(40)])
        held = [e for e in range(20, 40) if counts[e] > 0]
        assert d.num_entities + d.too_few_statements == len(held)
        for e in held:
            assert per[e] == (k if counts[e] > k else 0)
        assert (per[:20] == 0).all()
        # each link is one of the entity's own statements
        for ent, rel, other, role in d.links.tolist():
            t = (ent, rel, other) if role == NEW_IS_HEAD else (other, rel, ent)
            assert (triples == torch.tensor(t)).all(1).any()


def test_revealed_statements_are_never_ranked_and_only_new_entities_queries_count():
    triples = random_graph()
    d = draw_k_shot(triples, SEEN, 3, num_entities=40, seed=1)
    revealed = {(a, r, b) if role == NEW_IS_HEAD else (b, r, a) for a, r, b, role in d.links.tolist()}
    assert not revealed & {tuple(t) for t in d.queries.tolist()}
    eligible = set(d.links[:, 0].tolist())
    for (h, _, t), hq, tq in zip(d.queries.tolist(), d.head.tolist(), d.tail.tolist(), strict=True):
        assert hq == (t in eligible) and tq == (h in eligible)


def test_draw_is_seeded_and_nested_over_k():
    triples = random_graph()
    a = draw_k_shot(triples, SEEN, 3, num_entities=40, seed=7)
    b = draw_k_shot(triples, SEEN, 3, num_entities=40, seed=7)
    assert torch.equal(a.links, b.links) and torch.equal(a.queries, b.queries)
    c = draw_k_shot(triples, SEEN, 3, num_entities=40, seed=8)
    assert not torch.equal(a.links, c.links)
    one = {tuple(x) for x in draw_k_shot(triples, SEEN, 1, num_entities=40, seed=7).links.tolist()}
    three = {tuple(x) for x in a.links.tolist()}
    eligible_at_3 = set(a.links[:, 0].tolist())
    assert {x for x in one if x[0] in eligible_at_3} <= three


def test_parse_ks():
    assert parse_ks("10,0, 3,1,3") == (0, 1, 3, 10)
    for bad in ("", "a,1", "-1,2"):
        with pytest.raises(ConfigError):
            parse_ks(bad)


# ---------------------------------------------------------------- the oracle

NUM_E, DIM = 12, 4


def _planted_transe():
    """Seen entities 0..9 on planted points; 10 and 11 are new (the unseen row at a far corner).

    Relations r0 = (1,0,0,0) and r1 = (0,1,0,0). New entity 10 sits (hidden) at x = (5,5,5,5):
    entity 1 = x + r0 and entity 2 = x + r1, so either known link gives x exactly, and the other
    statement's answer is then the only candidate at distance 0."""
    cfg = ModelConfig(interaction="transe", interaction_kwargs={"p": 1}, dim=DIM, fusion="structural")
    model = build_model(cfg, num_entities=NUM_E, num_relations=2, seen_entities=torch.arange(10))
    x = torch.full((DIM,), 5.0)
    r = torch.eye(DIM)[:2]
    points = torch.randn(10, DIM, generator=torch.Generator().manual_seed(0)) * 3
    points[1], points[2] = x + r[0], x + r[1]
    with torch.no_grad():
        model.structural.weight[:10] = points
        model.structural.weight[10] = torch.full((DIM,), -20.0)  # the unseen row: far from everything
        model.relation_embeddings.copy_(r)
    model.clear_cache()
    return model.eval()


TEST = torch.tensor([[10, 0, 1], [10, 1, 2], [11, 0, 3]])  # entity 11 has one statement only


def test_oracle_the_revealed_link_determines_the_answer():
    model = _planted_transe()
    index = FilterIndex.from_triples(TEST, NUM_E, 2)
    d1 = draw_k_shot(TEST, torch.arange(10), 1, num_entities=NUM_E, seed=0)
    assert d1.num_entities == 1 and d1.too_few_statements == 1 and d1.num_queries == 1
    ranks = k_shot_ranks(
        model, d1, [ERAVG, NO_LINKS], filter_index=index, candidates=torch.arange(NUM_E), num_entities=NUM_E
    )
    assert ranks["mix:0"].tolist() == [1.0]  # ERAvg: x + r_other is exactly the other answer
    assert ranks["none"].item() > 3  # without the link: the unseen row, far from it
    d0 = draw_k_shot(TEST, torch.arange(10), 0, num_entities=NUM_E, seed=0)
    assert d0.num_queries == 3 and not len(d0.links)


def test_known_links_leave_the_model_unchanged():
    model = _planted_transe()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    links = torch.tensor([[10, 0, 1, NEW_IS_HEAD]])
    scorer = with_known_links(model, links, method=ERAVG)
    torch.testing.assert_close(scorer.matrix[10], torch.full((DIM,), 5.0))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_evaluate_k_shot_chooses_on_validation_and_reports_strict_json():
    model = _planted_transe()
    valid = torch.tensor([[10, 0, 1], [10, 1, 2]])
    test = TEST
    index = FilterIndex.from_triples(torch.cat([valid, test]), NUM_E, 2)
    out = evaluate_k_shot(
        model,
        valid=valid,
        test=test,
        seen=torch.arange(10),
        filter_index=index,
        valid_candidates=torch.arange(NUM_E),
        test_candidates=torch.arange(NUM_E),
        num_entities=NUM_E,
        ks=(0, 1, 3),
    )
    json.dumps(out, allow_nan=False)
    assert set(out["k_shot"]) == {"0", "1", "3"}
    chosen = out["k_shot_selection"]["chosen"]
    assert chosen.startswith("mix:") and out["k_shot_selection"]["valid_mrr"][chosen] == 1.0  # exact links win
    one = out["k_shot"]["1"]
    assert one["mrr"] == 1.0 and one["baselines"]["eravg_no_text"]["mrr"] == 1.0
    assert one["baselines"]["no_links"]["mrr"] < 0.5
    assert one["too_few_statements"] == 1 and one["seed"] == 0
    three = out["k_shot"]["3"]
    assert three["num_queries"] == 0 and three["mrr"] is None and three["too_few_statements"] == 2
    assert out["k_shot"]["0"]["baselines"]["eravg_no_text"] is None


def test_fold_in_raises_the_known_links_scores_and_a_larger_prior_pulls_less():
    model = _planted_transe()
    links = torch.tensor([[10, 0, 1, NEW_IS_HEAD], [10, 1, 2, NEW_IS_HEAD]])
    e, r = model.entity_matrix().detach(), model.relation_matrix().detach()

    def known_score(m):
        v = m.matrix[10]
        return float(model.interaction.score(v, r[0], e[1]) + model.interaction.score(v, r[1], e[2]))

    before = known_score(with_known_links(model, links, method=NO_LINKS))
    free = known_score(with_known_links(model, links, method=LinkMethod("fold-in", 0.0)))
    held = known_score(with_known_links(model, links, method=LinkMethod("fold-in", 10.0)))
    assert before < held < free
    again = with_known_links(model, links, method=LinkMethod("fold-in", 0.0)).matrix
    torch.testing.assert_close(again, with_known_links(model, links, method=LinkMethod("fold-in", 0.0)).matrix)


def test_method_keys_round_trip():
    for key in ("none", "mix:0", "mix:0.5", "fold-in:0.1"):
        assert LinkMethod.from_key(key).key == key
    with pytest.raises(ConfigError):
        LinkMethod.from_key("average:1")


def test_fold_in_priors_together_equal_one_at_a_time():
    from textkg.models.known_links import with_known_links_many

    model = _planted_transe()
    links = torch.tensor([[10, 0, 1, NEW_IS_HEAD], [10, 1, 2, NEW_IS_HEAD], [11, 0, 3, NEW_IS_HEAD]])
    methods = [NO_LINKS, ERAVG, LinkMethod("fold-in", 0.0), LinkMethod("fold-in", 3.0)]
    together = with_known_links_many(model, links, methods, seed=4)
    for method in methods:
        alone = with_known_links(model, links, method=method, seed=4).matrix
        torch.testing.assert_close(together[method.key].matrix, alone, rtol=1e-5, atol=1e-5)
