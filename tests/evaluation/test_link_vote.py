"""The link-profile vote for k-shot entities (textkg.evaluation.link_vote): an oracle for the voters and
the votes, ranks equal to compute_ranks', a planted graph where only the vote finds the answer, the
selection block, and what it may read under privacy."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import torch
from eval_oracle import random_graph

from textkg.data.known_links import NEW_IS_HEAD, NEW_IS_TAIL
from textkg.evaluation import FilterIndex, compute_ranks
from textkg.evaluation.k_shot import draw_k_shot, evaluate_k_shot
from textkg.evaluation.link_vote import LinkVote, LinkVoteScorer, rank_link_vote
from textkg.models import build_model
from textkg.models.config import ModelConfig
from textkg.models.known_links import NO_LINKS, with_known_links


def _brute_voters(graph, seen, links, num_entities, k):
    """Dense idf-weighted profiles, cosine, top-k, normalised: the module docstring's formulas."""
    items = {}
    prof = [dict() for _ in range(num_entities)]
    for h, r, t in graph.tolist():
        for owner, key in ((h, (r, t, 0)), (t, (r, h, 1))):
            items.setdefault(key, set()).add(owner)
            prof[owner][key] = 1
    n_seen = len(seen)
    idf = {key: math.log(n_seen / len(owners)) for key, owners in items.items()}
    out = {}
    for owner in sorted({int(x) for x in links[:, 0]}):
        q = {}
        for o, r, other, role in links.tolist():
            key = (r, other, 0 if role == NEW_IS_HEAD else 1)
            if o == owner and key in idf:
                q[key] = idf[key]
        qn = math.sqrt(sum(v * v for v in q.values()))
        sims = torch.zeros(num_entities)
        for s in range(num_entities):
            p = {key: idf[key] for key in prof[s]}
            pn = math.sqrt(sum(v * v for v in p.values()))
            if qn and pn:
                sims[s] = sum(q[key] * p.get(key, 0.0) for key in q) / (qn * pn)
        top = sims.topk(k)
        w = top.values.clamp_min(0)
        out[owner] = dict(zip(top.indices.tolist(), (w / w.sum().clamp_min(1e-12)).tolist(), strict=True))
    return out


def test_voters_and_votes_match_a_brute_force_oracle():
    graph, seen = random_graph(300, 30), torch.arange(30)
    vote = LinkVote(graph, seen, num_entities=40, num_relations=3, k=5)
    links = torch.tensor([[31, 0, 3, NEW_IS_HEAD], [31, 1, 7, NEW_IS_TAIL], [32, 2, 11, NEW_IS_HEAD]])
    owners, ids, weights = vote.voters(links)
    assert owners.tolist() == [31, 32]
    oracle = _brute_voters(graph, seen, links, 40, 5)
    for row, owner in enumerate(owners.tolist()):
        got = {i: w for i, w in zip(ids[row].tolist(), weights[row].tolist(), strict=True) if w > 0}
        want = {i: w for i, w in oracle[owner].items() if w > 0}
        assert got.keys() == want.keys()
        for i in want:
            assert abs(got[i] - want[i]) < 1e-5
    votes = vote.votes(ids, weights, torch.tensor([1, 2]), "tail")
    for row in range(2):
        expect = torch.zeros(40)
        for s, w in zip(ids[row].tolist(), weights[row].tolist(), strict=True):
            answers = {t for h, r, t in graph.tolist() if h == s and r == [1, 2][row]}
            for t in answers:
                expect[t] += w
        torch.testing.assert_close(votes[row], expect)


def test_an_unknown_item_gives_no_voters_and_no_vote():
    vote = LinkVote(random_graph(300, 30), torch.arange(30), num_entities=40, num_relations=3, k=4)
    owners, ids, weights = vote.voters(torch.tensor([[35, 0, 38, NEW_IS_HEAD]]))  # 38: never in the graph
    assert owners.tolist() == [35] and float(weights.sum()) == 0.0


DIM, NUM_E = 4, 14


def _planted():
    """Seen 0..11; 12 and 13 new, on the unseen row (far from everything): the model cannot place them.

    Training: entities 0..4 have (x, r0, 5) and (x, r1, 6) (a "type"); entities 7..9 have (x, r0, 8)
    and (x, r1, 9). New entity 12 has the known link (12, r0, 5): its link profile is that of 0..4,
    whose r1-answer is 6."""
    train = [[x, 0, 5] for x in range(5)] + [[x, 1, 6] for x in range(5)]
    train += [[x, 0, 8] for x in (7, 8, 9)] + [[x, 1, 9] for x in (7, 8, 9)]
    cfg = ModelConfig(interaction="transe", interaction_kwargs={"p": 1}, dim=DIM, fusion="structural")
    model = build_model(cfg, num_entities=NUM_E, num_relations=2, seen_entities=torch.arange(12))
    with torch.no_grad():
        model.structural.weight[:12] = torch.randn(12, DIM, generator=torch.Generator().manual_seed(0))
        model.structural.weight[12] = torch.full((DIM,), -20.0)
    model.clear_cache()
    return model.eval(), torch.tensor(train)


def test_the_vote_finds_what_similar_entities_do_and_ranks_match_compute_ranks():
    model, train = _planted()
    test = torch.tensor([[12, 0, 5], [12, 1, 6]])
    index = FilterIndex.from_triples(torch.cat([train, test]), NUM_E, 2)
    vote = LinkVote(train, torch.arange(12), num_entities=NUM_E, num_relations=2, k=4)
    draw = draw_k_shot(test, torch.arange(12), 1, num_entities=NUM_E, seed=0)
    base = with_known_links(model, draw.links, method=NO_LINKS)
    cands = torch.arange(NUM_E)
    ranks = rank_link_vote(
        LinkVoteScorer(base, vote, draw.links, 0.0),
        draw.queries,
        draw.head,
        draw.tail,
        filter_index=index,
        candidates=cands,
        weights=[0.0, 8.0],
    )
    assert ranks["8"].tolist() == [1.0] and ranks["0"].item() > 1
    for w in (0.0, 8.0):
        result = compute_ranks(
            LinkVoteScorer(base, vote, draw.links, w),
            draw.queries,
            filter_index=index,
            candidates=cands,
            num_entities=NUM_E,
        )
        want = torch.cat([result.head_ranks[draw.head], result.tail_ranks[draw.tail]])
        torch.testing.assert_close(ranks[f"{w:g}"], want)


def test_evaluate_k_shot_chooses_the_vote_weight_on_validation_and_reports_both_parts():
    model, train = _planted()
    valid = torch.tensor([[12, 0, 5], [12, 1, 6]])
    test = torch.tensor([[13, 0, 8], [13, 1, 9]])
    index = FilterIndex.from_triples(torch.cat([train, valid, test]), NUM_E, 2)
    vote = LinkVote(train, torch.arange(12), num_entities=NUM_E, num_relations=2, k=4)
    common = dict(
        valid=valid,
        test=test,
        seen=torch.arange(12),
        filter_index=index,
        valid_candidates=torch.arange(NUM_E),
        test_candidates=torch.arange(NUM_E),
        num_entities=NUM_E,
        ks=(0, 1),
        methods=[NO_LINKS],
    )
    out = evaluate_k_shot(model, link_vote=vote, link_vote_weights=(0.0, 4.0), **common)
    json.dumps(out, allow_nan=False)
    chosen = out["k_shot_selection"]["link_vote"]
    assert chosen["weight"] == 4.0 and chosen["statements_read"] == len(train)
    one = out["k_shot"]["1"]
    assert one["mrr"] == 1.0 and one["baselines"]["without_link_vote"]["mrr"] < 1.0
    assert one["baselines"]["link_vote_only"]["mrr"] == 1.0
    assert "without_link_vote" not in out["k_shot"]["0"]["baselines"]
    without = evaluate_k_shot(model, link_vote_skipped="why", **common)
    assert without["k_shot_selection"]["link_vote"] == {"weight": 0.0, "skipped": "why"}
    assert without["k_shot"]["1"]["mrr"] == one["baselines"]["without_link_vote"]["mrr"]


def _prep(train, private_mask):
    split = SimpleNamespace(train=train, train_entities=torch.arange(12))
    return SimpleNamespace(
        split=split, private_mask=private_mask, kg=SimpleNamespace(num_entities=NUM_E, num_relations=2)
    )


def test_under_privacy_the_vote_reads_only_public_statements():
    """Played as the adversary who holds metrics.json: a private statement changed changes no vote."""
    from textkg.pipeline.k_shot import link_vote_of

    _, train = _planted()
    mask = torch.zeros(len(train), dtype=torch.bool)
    mask[:5] = True  # (x, r0, 5) for x in 0..4 are confidential
    neighbour = train.clone()
    neighbour[0] = torch.tensor([0, 0, 8])  # a different private statement
    links = torch.tensor([[12, 0, 8, NEW_IS_HEAD]])
    a, _ = link_vote_of(_prep(train, mask))
    b, _ = link_vote_of(_prep(neighbour, mask))
    assert a.num_statements == b.num_statements == len(train) - 5
    for x, y in zip(a.voters(links), b.voters(links), strict=True):
        torch.testing.assert_close(x, y)
    none, why = link_vote_of(_prep(train, torch.ones(len(train), dtype=torch.bool)))
    assert none is None and "private" in why
