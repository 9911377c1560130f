"""The description-kNN vote: a brute-force oracle, a planted answer, and the combination's contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from textkg.evaluation.neighbour_vote import (
    DEFAULT_SPREAD_WEIGHTS,
    DEFAULT_WEIGHTS,
    NeighbourVote,
    VoteScorer,
    choose_weight,
    choose_weights,
    weights_key,
)

N, R, D = 12, 3, 5


def _setup(seed=0, k=3, temperature=0.1):
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(N, D, generator=g)
    seen = torch.arange(8)  # entities 8..11 are new
    graph = torch.stack(
        [
            torch.randint(0, 8, (30,), generator=g),
            torch.randint(0, R, (30,), generator=g),
            torch.randint(0, 8, (30,), generator=g),
        ],
        dim=1,
    )
    graph = torch.cat([graph, graph[:3]])  # duplicates count once
    return features, seen, graph, NeighbourVote(features, graph, seen, num_relations=R, k=k, temperature=temperature)


def _oracle(features, seen, graph, q, r, direction, k, temperature):
    x = torch.nn.functional.normalize(features, dim=1)
    sims = {int(s): float(x[q] @ x[s]) for s in seen if int(s) != q}
    top = sorted(sims, key=lambda s: -sims[s])[:k]
    w = torch.softmax(torch.tensor([sims[s] for s in top]) / temperature, 0)
    out = torch.zeros(N)
    facts = {tuple(t) for t in graph.tolist()}
    for s, ws in zip(top, w.tolist(), strict=True):
        for c in range(N):
            fact = (s, r, c) if direction == "tail" else (c, r, s)
            if fact in facts:
                out[c] += ws
    return out


@pytest.mark.parametrize("direction", ["tail", "head"])
def test_votes_match_a_brute_force_oracle(direction):
    features, seen, graph, vote = _setup()
    queries = torch.tensor([8, 9, 10, 11, 0, 5])  # new and seen entities (a seen one never votes for itself)
    relations = torch.tensor([0, 1, 2, 0, 1, 2])
    got = vote.votes(queries, relations, direction)
    for i, (q, r) in enumerate(zip(queries.tolist(), relations.tolist(), strict=True)):
        want = _oracle(features, seen, graph, q, r, direction, 3, 0.1)
        torch.testing.assert_close(got[i], want, rtol=1e-5, atol=1e-6)


def test_a_new_entity_described_like_a_known_one_gets_its_answer_first():
    features, seen, graph, _ = _setup()
    features[9] = features[2] * 3.0  # same direction: cosine 1
    graph = torch.cat([graph, torch.tensor([[2, 1, 7]])])
    vote = NeighbourVote(features, graph, seen, num_relations=R, k=1, temperature=0.1)
    v = vote.votes(torch.tensor([9]), torch.tensor([1]), "tail")[0]
    assert int(v.argmax()) == 7 or float(v[7]) == float(v.max())
    assert vote.gate(torch.tensor([9, 2])).tolist() == [1.0, 0.0]


class _Model:
    def __init__(self, table):
        self.table = table

    def score_tails(self, heads, relations, candidates):
        return self.table[heads][:, candidates] + relations[:, None].float()

    def score_heads(self, relations, tails, candidates):
        return self.table[tails][:, candidates] - relations[:, None].float()


def test_weight_zero_keeps_the_models_ranking_and_vote_only_ignores_the_model():
    features, seen, graph, vote = _setup()
    model = _Model(torch.randn(N, N, generator=torch.Generator().manual_seed(3)))
    q, r, cands = torch.tensor([8, 1, 10]), torch.tensor([0, 2, 1]), torch.arange(N)
    plain = model.score_tails(q, r, cands)
    zero = VoteScorer(model, vote, 0.0).score_tails(q, r, cands)
    assert torch.equal(plain.argsort(1), zero.argsort(1))
    only = VoteScorer(None, vote, 0.0).score_heads(r, q, cands)
    want = vote.votes(q, r, "head") * vote.gate(q)[:, None]
    assert torch.equal(only, want) and float(only[1].abs().sum()) == 0.0  # entity 1 is seen: no vote


def test_choose_weight_prefers_the_model_on_a_tie():
    assert choose_weight({0.0: 0.5, 1.0: 0.5, 8.0: 0.4}) == 0.0
    assert choose_weight({0.0: 0.1, 1.0: 0.3, 8.0: 0.3, 16.0: 0.2}) == 1.0


@pytest.mark.parametrize("exclude_query", [False, True])
def test_one_pass_ranks_equal_compute_ranks_of_each_scorer(exclude_query):
    """``rank_weights`` scores once and ranks every weight: the ranks of ``compute_ranks`` on each VoteScorer."""
    from textkg.evaluation import FilterIndex
    from textkg.evaluation.neighbour_vote import rank_weights
    from textkg.evaluation.ranking import compute_ranks

    features, seen, graph, vote = _setup()
    g = torch.Generator().manual_seed(5)
    model = _Model(torch.randint(0, 3, (N, N), generator=g).float())  # many ties
    triples = torch.stack(
        [
            torch.randint(0, N, (20,), generator=g),
            torch.randint(0, R, (20,), generator=g),
            torch.randint(0, N, (20,), generator=g),
        ],
        dim=1,
    )
    filt = FilterIndex.from_triples(torch.cat([graph, triples]), N, R)
    cands = torch.arange(N)
    got = rank_weights(model, vote, triples, filter_index=filt, candidates=cands, weights=(0.0, 1.0, 8.0),
                       batch_size=7, exclude_query=exclude_query)  # fmt: skip
    for key, scorer in [("0", VoteScorer(model, vote, 0.0)), ("1", VoteScorer(model, vote, 1.0)),
                        ("8", VoteScorer(model, vote, 8.0)), ("vote_only", VoteScorer(None, vote, 0.0))]:  # fmt: skip
        want = compute_ranks(scorer, triples, filter_index=filt, candidates=cands, num_entities=N,
                             exclude_query=exclude_query)  # fmt: skip
        torch.testing.assert_close(got[key][0], want.head_ranks)
        torch.testing.assert_close(got[key][1], want.tail_ranks)


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp_ind"


def _train(tmp_path, *extra):
    from textkg.cli.main import main

    out = tmp_path / "run"
    args = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "blp-transe", "--dim", "8"]
    args += ["--epochs", "1", "--batch-size", "32", "--no-progress", "--out", str(out), *extra]
    assert main(args) == 0
    return json.loads((out / "metrics.json").read_text(), parse_constant=lambda c: pytest.fail(c))


def test_an_inductive_run_reports_the_vote_and_the_combination(tmp_path, monkeypatch):
    """The weight is chosen on validation statements: the test split is ranked only after the choice."""
    from textkg.evaluation import neighbour_vote

    calls = []
    real = neighbour_vote.choose_weights

    def spy(valid_mrr):
        calls.append("choose")
        return real(valid_mrr)

    monkeypatch.setattr(neighbour_vote, "choose_weights", spy)
    block = _train(tmp_path)["test"]["neighbour_vote"]
    assert calls == ["choose"]
    assert block["weight"] in DEFAULT_WEIGHTS and block["spread_weight"] in DEFAULT_SPREAD_WEIGHTS
    assert set(block["valid_mrr_by_weight"]) == {
        weights_key(w, m) for w in DEFAULT_WEIGHTS for m in DEFAULT_SPREAD_WEIGHTS
    }
    chosen = weights_key(block["weight"], block["spread_weight"])
    assert block["valid_mrr_by_weight"][chosen] == max(block["valid_mrr_by_weight"].values())
    for name in ("vote_only", "combined"):
        assert 0 < block[name]["mrr"] <= 1 and block[name]["num_triples"] > 0


def test_full_privacy_skips_the_vote_with_its_reason():
    """Under --privacy full no training statement is public: the vote has nothing it may read."""
    import dataclasses

    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import neighbour_vote_block

    args = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "blp-transe", "--dim", "8"]
    cfg = build_run_config(build_parser().parse_args(args))
    prep = prepare(cfg)
    private = dataclasses.replace(cfg, privacy=dataclasses.replace(cfg.privacy, mode="full", noise_multiplier=1.0))
    assert "private" in neighbour_vote_block(prep, private)["skipped"]


@pytest.mark.parametrize("setting, with_placement, reported", [
    ("auto", False, True), ("auto", True, False), ("on", True, True), ("off", False, False),
])  # fmt: skip
def test_the_setting_decides_when_the_vote_is_reported(monkeypatch, setting, with_placement, reported):
    """``auto`` leaves it to the placement tables on ontologies (their own description baselines)."""
    import dataclasses

    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser
    from textkg.evaluation.placement import methods as placement
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import neighbour_vote_block

    args = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "blp-transe", "--dim", "8"]
    cfg = build_run_config(build_parser().parse_args([*args, "--neighbour-vote", setting]))
    assert cfg.train.neighbour_vote == setting
    prep = prepare(cfg)
    monkeypatch.setattr(placement, "placement_queries", lambda kg, split: object() if with_placement else None)
    assert (neighbour_vote_block(prep, cfg) is not None) == reported
    with pytest.raises(Exception, match="neighbour_vote"):
        dataclasses.replace(cfg.train, neighbour_vote="sometimes")


def test_predict_uses_the_vote_the_run_chose_and_its_neighbours_answers_come_first(tmp_path):
    """A new entity described exactly like a training entity s: with the vote chosen (a large weight),
    ``predict``'s first tail for relation r is one of s's own r-tails; ``vote=False`` is the model alone."""
    from textkg.predict import load_predictor
    from textkg.training.features import entity_texts

    metrics = _train(tmp_path)
    run = tmp_path / "run"
    metrics["test"]["neighbour_vote"]["weight"] = 1000.0  # as if validation had chosen it
    metrics["test"]["neighbour_vote"]["spread_weight"] = 0.0
    metrics["test"]["link_rerank"]["weight"] = 0.0  # and no link re-ranker: the vote alone orders the answers
    (run / "metrics.json").write_text(json.dumps(metrics))
    predictor = load_predictor(run, device="cpu")
    kg, train = predictor.kg, predictor.prepared.split.train
    h, r, _ = train[0].tolist()
    tails = {kg.entities[t] for hh, rr, t in train.tolist() if hh == h and rr == r}
    description = entity_texts(kg)[h]  # the text the run encoded for h
    out = predictor.predict(description=description, relation=kg.relations[r], direction="tail", top_k=3)
    assert out["scoring"]["neighbour_vote_weight"] == 1000.0 and "vote" in out["scoring"]["method"]
    assert out["predictions"][0]["entity"] in tails
    plain = predictor.predict(description=description, relation=kg.relations[r], direction="tail", vote=False)
    assert plain["scoring"]["link_rerank"]["used"] is False  # the link re-ranker goes with the vote
    plain["scoring"].pop("link_rerank")
    assert plain["scoring"] == {"method": "model", "neighbour_vote_weight": 0.0, "spread_weight": 0.0}
    metrics["test"]["neighbour_vote"]["weight"] = 0.0  # validation chose the model alone
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert load_predictor(run, device="cpu").predict(description=description)["scoring"]["method"] == "model"


def _spread_oracle(features, seen, graph, q, r, direction, k, spread_k, temperature):
    """Brute force: the base votes (the vote for a new q, q's own r-answers for a seen one), then each
    entity c receives the softmax-weighted base of its spread_k nearest seen entities (c left out)."""
    x = torch.nn.functional.normalize(features, dim=1)
    facts = {tuple(t) for t in graph.tolist()}
    if q in seen.tolist():
        base = torch.tensor([float(((q, r, c) if direction == "tail" else (c, r, q)) in facts) for c in range(N)])
    else:
        base = _oracle(features, seen, graph, q, r, direction, k, temperature)
    out = torch.zeros(N)
    for c in range(N):
        sims = {int(s): float(x[c] @ x[s]) for s in seen if int(s) != c}
        top = sorted(sims, key=lambda s: -sims[s])[:spread_k]
        w = torch.softmax(torch.tensor([sims[s] for s in top]) / temperature, 0)
        out[c] = sum(ws * base[s] for s, ws in zip(top, w.tolist(), strict=True))
    return out


@pytest.mark.parametrize("direction", ["tail", "head"])
def test_the_spread_matches_a_brute_force_oracle(direction):
    features, seen, graph, _ = _setup()
    vote = NeighbourVote(features, graph, seen, num_relations=R, k=3, temperature=0.1, spread_k=2)
    queries = torch.tensor([8, 9, 10, 11, 0, 5])
    relations = torch.tensor([0, 1, 2, 0, 1, 2])
    got = vote.spread(queries, relations, direction)
    for i, (q, r) in enumerate(zip(queries.tolist(), relations.tolist(), strict=True)):
        want = _spread_oracle(features, seen, graph, q, r, direction, 3, 2, 0.1)
        torch.testing.assert_close(got[i], want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(vote.kernel(chunk=3).to_dense(), vote.kernel().to_dense())  # built once


def test_the_spread_lifts_a_new_answer_described_like_a_neighbours_answer():
    """New query q is described like seen s, and s -r-> t; new entity c is described like t.
    The vote cannot name c (it was never a training answer); the spread ranks c first of the new entities."""
    features, seen, graph, _ = _setup()
    s, t, q, c, r = 2, 5, 9, 10, 1
    features[q] = features[s] * 2.0
    features[c] = features[t] * 3.0
    graph = torch.cat([graph, torch.tensor([[s, r, t]])])
    vote = NeighbourVote(features, graph, seen, num_relations=R, k=1, temperature=0.05, spread_k=1)
    assert vote.votes(torch.tensor([q]), torch.tensor([r]), "tail")[0, c] == 0
    spread = vote.spread(torch.tensor([q]), torch.tensor([r]), "tail")[0]
    assert spread[c] > 0.99 and int(spread[8:].argmax()) + 8 == c


def test_choose_weights_breaks_ties_toward_less_spread_then_less_vote():
    assert choose_weights({(0.0, 0.0): 0.2, (1.0, 0.0): 0.3, (1.0, 2.0): 0.3, (4.0, 2.0): 0.3}) == (1.0, 0.0)
    assert choose_weights({(0.0, 0.0): 0.2, (8.0, 1.0): 0.31, (1.0, 2.0): 0.3}) == (8.0, 1.0)
    assert weights_key(8.0) == "8" and weights_key(8.0, 0.5) == "8,0.5"


@pytest.mark.parametrize("exclude_query", [False, True])
def test_one_pass_ranks_with_spread_equal_compute_ranks(exclude_query):
    from textkg.evaluation import FilterIndex
    from textkg.evaluation.neighbour_vote import rank_weights
    from textkg.evaluation.ranking import compute_ranks

    features, seen, graph, vote = _setup()
    g = torch.Generator().manual_seed(6)
    model = _Model(torch.randn(N, N, generator=g))
    triples = torch.stack(
        [torch.randint(0, N, (20,), generator=g), torch.randint(0, R, (20,), generator=g),
         torch.randint(0, N, (20,), generator=g)], dim=1,
    )  # fmt: skip
    filt = FilterIndex.from_triples(torch.cat([graph, triples]), N, R)
    cands = torch.arange(N)
    got = rank_weights(model, vote, triples, filter_index=filt, candidates=cands, weights=(0.0, 2.0),
                       spread_weights=(0.0, 4.0), batch_size=7, exclude_query=exclude_query)  # fmt: skip
    assert set(got) == {"0", "2", "0,4", "2,4", "vote_only"}
    for w, m in [(0.0, 0.0), (2.0, 0.0), (0.0, 4.0), (2.0, 4.0)]:
        want = compute_ranks(VoteScorer(model, vote, w, m), triples, filter_index=filt, candidates=cands,
                             num_entities=N, exclude_query=exclude_query)  # fmt: skip
        torch.testing.assert_close(got[weights_key(w, m)][0], want.head_ranks)
        torch.testing.assert_close(got[weights_key(w, m)][1], want.tail_ranks)


def test_predict_adds_the_spread_the_run_chose(tmp_path):
    from textkg.predict import load_predictor
    from textkg.training.features import entity_texts

    metrics = _train(tmp_path)
    run = tmp_path / "run"
    metrics["test"]["neighbour_vote"].update(weight=0.0, spread_weight=1000.0)
    metrics["test"]["link_rerank"]["weight"] = 0.0  # no link re-ranker: the spread alone orders the answers
    (run / "metrics.json").write_text(json.dumps(metrics))
    predictor = load_predictor(run, device="cpu")
    kg = predictor.kg
    h, r, _ = predictor.prepared.split.train[0].tolist()
    out = predictor.predict(description=entity_texts(kg)[h], relation=kg.relations[r], direction="tail", top_k=3)
    assert out["scoring"]["spread_weight"] == 1000.0 and "spread" in out["scoring"]["method"]
    features = predictor._vote_features([entity_texts(kg)[h]], predictor._embed([entity_texts(kg)[h]])[1])
    spread = predictor._vote.spread_for_new(features, torch.tensor([r]), "tail")[0]
    train = predictor.prepared.split.train_entities.long()  # predict proposes training entities only
    want = int(train[spread[train].argmax()])
    assert out["predictions"][0]["entity"] == kg.entities[want]
