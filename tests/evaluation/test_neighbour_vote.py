"""The description-kNN vote: a brute-force oracle, a planted answer, and the combination's contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from textkg.evaluation.neighbour_vote import DEFAULT_WEIGHTS, NeighbourVote, VoteScorer, choose_weight

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
    real = neighbour_vote.choose_weight

    def spy(valid_mrr):
        calls.append("choose")
        return real(valid_mrr)

    monkeypatch.setattr(neighbour_vote, "choose_weight", spy)
    block = _train(tmp_path)["test"]["neighbour_vote"]
    assert calls == ["choose"]
    assert block["weight"] in DEFAULT_WEIGHTS
    assert set(block["valid_mrr_by_weight"]) == {f"{w:g}" for w in DEFAULT_WEIGHTS}
    assert block["valid_mrr_by_weight"][f"{block['weight']:g}"] == max(block["valid_mrr_by_weight"].values())
    for name in ("vote_only", "combined"):
        assert 0 < block[name]["mrr"] <= 1 and block[name]["num_triples"] > 0


def test_full_privacy_skips_the_vote_with_its_reason():
    """Under --privacy full no training statement is public: the vote has nothing it may read."""
    import dataclasses

    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser
    from textkg.training import pipeline

    args = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "blp-transe", "--dim", "8"]
    cfg = build_run_config(build_parser().parse_args(args))
    prep = pipeline.prepare(cfg)
    private = dataclasses.replace(cfg, privacy=dataclasses.replace(cfg.privacy, mode="full", noise_multiplier=1.0))
    assert "private" in pipeline._neighbour_vote(prep, private)["skipped"]


@pytest.mark.parametrize("setting, with_placement, reported", [
    ("auto", False, True), ("auto", True, False), ("on", True, True), ("off", False, False),
])  # fmt: skip
def test_the_setting_decides_when_the_vote_is_reported(monkeypatch, setting, with_placement, reported):
    """``auto`` leaves it to the placement tables on ontologies (their own description baselines)."""
    import dataclasses

    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser
    from textkg.evaluation import placement
    from textkg.training import pipeline

    args = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "blp-transe", "--dim", "8"]
    cfg = build_run_config(build_parser().parse_args([*args, "--neighbour-vote", setting]))
    assert cfg.train.neighbour_vote == setting
    prep = pipeline.prepare(cfg)
    monkeypatch.setattr(placement, "placement_queries", lambda kg, split: object() if with_placement else None)
    assert (pipeline._neighbour_vote(prep, cfg) is not None) == reported
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
    assert plain["scoring"] == {"method": "model", "neighbour_vote_weight": 0.0}
    metrics["test"]["neighbour_vote"]["weight"] = 0.0  # validation chose the model alone
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert load_predictor(run, device="cpu").predict(description=description)["scoring"]["method"] == "model"
