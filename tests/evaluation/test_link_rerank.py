"""The link-prediction re-ranker (textkg.evaluation.link_rerank): an oracle, the weight chosen on validation,
determinism, and ``predict`` scoring as the evaluator does."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from textkg.errors import ConfigError
from textkg.evaluation import FilterIndex
from textkg.evaluation import link_rerank as lr
from textkg.evaluation.link_rerank import FEATURES, LinkFeatures, LinkRerankConfig, LinkReranker

N, SEEN = 60, 40
COUNTRIES = list(range(5))  # the only tails of relation 0 ("nationality") in training
DISTRACTOR = 20  # not a country: the first stage ranks it above the true country


class _Model:
    """Query ``q``'s scores: its country second (below :data:`DISTRACTOR`), every other entity below both."""

    def __init__(self, answer: dict[int, int]):
        g = torch.Generator().manual_seed(0)
        self.table = torch.rand(N, N, generator=g)  # in [0, 1)
        for q, a in answer.items():
            self.table[q, DISTRACTOR] = 3.0
            self.table[q, a] = 2.0

    def score_tails(self, heads, relations, candidates):
        return self.table[heads][:, candidates]

    def score_heads(self, relations, tails, candidates):
        return self.table[tails][:, candidates]


def _graph():
    """Training: every seen entity has a country (relation 0) and a friend (relation 1, any entity); validation
    and test: new entities 40-49 and 50-59 with a country each."""
    g = torch.Generator().manual_seed(1)
    train = [(s, 0, COUNTRIES[s % 5]) for s in range(5, SEEN)]
    train += [(s, 1, int(torch.randint(5, SEEN, (1,), generator=g))) for s in range(5, SEEN)]
    valid = torch.tensor([(q, 0, COUNTRIES[q % 5]) for q in range(40, 50)])
    test = torch.tensor([(q, 0, COUNTRIES[q % 5]) for q in range(50, 60)])
    return torch.tensor(train), valid, test


def _features(train):
    texts = [f"entity {i}" for i in range(N)]
    return LinkFeatures(
        train, seen=torch.arange(SEEN), texts=texts, relation_texts=["nationality", "friend"], vote=None
    )


def _lists(model, features, triples, train, valid, test):
    index = FilterIndex.from_triples(torch.cat([train, valid, test]), N, 2)
    return lr.collect_lists(
        model, None, (0.0, 0.0), features, triples, filter_index=index, candidates=torch.arange(N), top_k=10
    )


def test_the_type_prior_lifts_the_answer_the_first_stage_ranks_second():
    """Oracle: nationality's answers are always countries; the first stage puts a non-country first. Only the
    re-ranker's type feature can tell, and with it every tail query's answer comes first."""
    train, valid, test = _graph()
    model = _Model({int(q): int(a) for q, _, a in torch.cat([valid, test]).tolist()})
    features = _features(train)
    fitted = _lists(model, features, valid, train, valid, test)
    reranker, valid_mrr = lr.choose_rerank(fitted, LinkRerankConfig())
    assert reranker.weight > 0 and valid_mrr[reranker.weight] > valid_mrr[0.0]
    assert reranker.weights["type"] > 0
    assert reranker.feature_set == "shipped"  # no description vectors: the extra features are 0 and tie
    lists = _lists(model, features, test, train, valid, test)
    tail = slice(len(test), None)  # heads first, then tails
    assert lists.base[tail].tolist() == [2.0] * len(test)  # the first stage alone: second
    assert lists.ranks_by(reranker.score(lists.x), reranker.weight)[tail].tolist() == [1.0] * len(test)


def test_weight_zero_when_validation_says_the_re_ranker_does_not_help():
    """A first stage that already ranks every answer first leaves nothing to gain: 0 wins the tie."""
    train, valid, test = _graph()
    model = _Model({})
    for q, _, a in torch.cat([valid, test]).tolist():
        model.table[q, a] = 5.0
        model.table[a, q] = 5.0  # the head queries too
    lists = _lists(model, _features(train), valid, train, valid, test)
    assert lists.base.tolist() == [1.0] * len(lists.base)
    reranker, valid_mrr = lr.choose_rerank(lists, LinkRerankConfig())
    assert reranker.weight == 0.0 and set(valid_mrr.values()) == {1.0}


def test_the_fit_and_the_choice_are_deterministic_under_a_seed():
    train, valid, test = _graph()
    model = _Model({int(q): int(a) for q, _, a in torch.cat([valid, test]).tolist()})
    features = _features(train)
    first = lr.choose_rerank(_lists(model, features, valid, train, valid, test), LinkRerankConfig(seed=3))
    again = lr.choose_rerank(_lists(model, features, valid, train, valid, test), LinkRerankConfig(seed=3))
    assert first == again


def test_a_saved_reranker_is_read_back_and_bad_ones_are_refused():
    saved = LinkReranker(dict.fromkeys(FEATURES, 0.5), 2.0, 50).to_dict()
    assert LinkReranker.from_dict(json.loads(json.dumps(saved))) == LinkReranker.from_dict(saved)
    for bad in (
        {**saved, "weight": float("nan")},
        {**saved, "weights": {"first_stage": 1.0}},
        {**saved, "top_k": 0},
        {**saved, "weight": True},
        [],
    ):
        with pytest.raises(ConfigError, match="test.link_rerank"):
            LinkReranker.from_dict(bad, file="metrics.json")


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp_ind"


def test_predict_through_the_cli_uses_the_chosen_reranker_as_the_evaluator_scores(tmp_path, capsys, monkeypatch):
    """A run whose validation chose the re-ranker: ``textkg predict`` of a test entity's own text gives the
    evaluator's re-ranked top answers and scores (the same features, read from the entity's id), and says so.

    The test entity is in the graph, so the evaluator masks its own column (``model.irreflexive``) where a
    new text has none: the mask is off on both sides. The neighbour vote's weights are 0: a re-encoded
    text's vote differs from the stored features' by the encoder's batch noise, sharpened by its softmax."""
    from textkg.cli.main import main
    from textkg.models.kge import KGEModel
    from textkg.pipeline.link_rerank import link_features
    from textkg.pipeline.report import neighbour_vote_of
    from textkg.predict import load_predictor
    from textkg.training.features import entity_texts

    out = tmp_path / "run"
    args = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "blp-transe", "--dim", "8"]
    assert main([*args, "--epochs", "1", "--batch-size", "32", "--no-progress", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    block = metrics["test"]["link_rerank"]
    assert set(block["weights"]) == set(FEATURES) and math.isfinite(block["with"]["mrr"])
    capsys.readouterr()
    assert main(["evaluate", str(out), "--link-rerank", "--device", "cpu"]) == 0  # the same choice, saved again
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["saved_link_rerank"] == str(out / "metrics.json")
    assert evaluated["test"]["link_rerank"]["with"] == block["with"]
    assert evaluated["test"]["link_rerank"]["weights"] == block["weights"]
    weights = {name: 0.0 for name in FEATURES} | {"first_stage": 1.0, "type": 3.0, "degree": -1.0, "tfidf": 2.0}
    block.update(weights=weights, weight=1.0, top_k=5, form="linear")  # as if validation had chosen it
    block.pop("mlp", None)  # features the re-encoded text shares exactly (the description vectors' differ a little)
    metrics["test"]["neighbour_vote"].update(weight=0.0, spread_weight=0.0)
    monkeypatch.setattr(KGEModel, "_mask_self", lambda self, scores, *_: scores)
    (out / "metrics.json").write_text(json.dumps(metrics))

    predictor = load_predictor(out, device="cpu")
    kg, split = predictor.kg, predictor.prepared.split
    q, r, _ = split.test[0].tolist()
    text = entity_texts(kg)[q]
    capsys.readouterr()
    assert main(["predict", str(out), "--description", text, "--relation", kg.relations[r],
                 "--direction", "tail", "--top-k", "3", "--include-held-out"]) == 0  # fmt: skip
    printed = json.loads(capsys.readouterr().out)  # --include-held-out: every entity, as the evaluator ranks
    assert printed["scoring"]["link_rerank"]["used"] is True and "re-ranker" in printed["scoring"]["method"]

    vote = neighbour_vote_of(predictor.prepared)
    features = link_features(predictor.prepared, vote)
    with torch.no_grad():
        first, v = lr.first_stage(
            predictor.model,
            vote,
            (0.0, 0.0),
            torch.tensor([q]),
            torch.tensor([r]),
            torch.arange(kg.num_entities),
            "tail",
        )
    reranker = LinkReranker.from_dict(block)
    rows = features.entity_query_rows(torch.tensor([q]))
    values, ids = lr.rerank_top(reranker, features, rows, torch.tensor([r]), "tail", first, v, 3)
    assert [p["entity"] for p in printed["predictions"]] == [kg.entities[i] for i in ids[0].tolist()]
    assert [p["score"] for p in printed["predictions"]] == pytest.approx(values[0].tolist(), abs=1e-4)

    # the mlp form through the same path: a network on the features the re-encoded text shares exactly
    exact = ("first_stage", "type", "degree", "tfidf")
    hidden_in = [[0.8, -0.6] if name in exact else [0.0, 0.0] for name in FEATURES]
    mlp = {"mean": [0.0] * len(FEATURES), "scale": [1.0] * len(FEATURES), "hidden_in": hidden_in,
           "hidden_bias": [0.1, -0.2], "hidden_out": [1.5, -0.7]}  # fmt: skip
    block.update(form="mlp", mlp=mlp)
    (out / "metrics.json").write_text(json.dumps(metrics))
    capsys.readouterr()
    assert main(["predict", str(out), "--description", text, "--relation", kg.relations[r],
                 "--direction", "tail", "--top-k", "3", "--include-held-out"]) == 0  # fmt: skip
    printed = json.loads(capsys.readouterr().out)
    reranker = LinkReranker.from_dict(block)
    assert reranker.form == "mlp"
    values, ids = lr.rerank_top(reranker, features, rows, torch.tensor([r]), "tail", first, v, 3)
    assert [p["entity"] for p in printed["predictions"]] == [kg.entities[i] for i in ids[0].tolist()]
    assert [p["score"] for p in printed["predictions"]] == pytest.approx(values[0].tolist(), abs=1e-4)

    block["weight"] = 12345.5
    (out / "metrics.json").write_text(json.dumps(metrics).replace("12345.5", "1e400"))  # inf on reading
    capsys.readouterr()
    assert main(["predict", str(out), "--description", text]) == 2
    assert "test.link_rerank" in capsys.readouterr().err


def test_full_privacy_skips_the_reranker_with_its_reason_and_it_reads_public_statements_only():
    """Under --privacy full no training statement is public: nothing for the priors to read. Under a partial
    mode the re-ranker's statements are the training ones less the private ones."""
    import dataclasses

    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser
    from textkg.pipeline.link_rerank import link_rerank_report, public_statements
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import neighbour_vote_block

    args = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "blp-transe", "--dim", "8"]
    cfg = build_run_config(build_parser().parse_args(args))
    prep = prepare(cfg)
    private = dataclasses.replace(cfg, privacy=dataclasses.replace(cfg.privacy, mode="full", noise_multiplier=1.0))
    block = link_rerank_report(prep, private, neighbour_vote_block(prep, private))
    assert block is not None and "private" in block["skipped"]
    mask = torch.zeros(len(prep.split.train), dtype=torch.bool)
    mask[::2] = True
    kept = public_statements(dataclasses.replace(prep, private_mask=mask))
    assert torch.equal(kept, prep.split.train[1::2])


def _planted_lists(emb, train, valid, test, wrong, feature_sets):
    """Lists of a planted graph whose texts are all alike (TF-IDF tells nothing): the first stage ranks
    ``wrong[q][0]`` first, the true answer second and ``wrong[q][1:]`` next for every query ``q`` (so that no
    monotone use of the first stage's score finds the answer); the description vectors ``emb`` carry the
    pattern. Returns the re-ranker chosen on validation and the test split's tail ranks."""
    table = _Model({})
    for q, _, a in torch.cat([valid, test]).tolist():
        table.table[q, a] = 2.0
        for e, score in zip(wrong[q], (3.0, 1.5, 1.2), strict=False):
            table.table[q, e] = score
    features = LinkFeatures(
        train, seen=torch.arange(SEEN), texts=["an entity"] * N, relation_texts=["r0", "r1"], vote=None, embeddings=emb
    )
    config = LinkRerankConfig(feature_sets=feature_sets, forms=("linear",))  # which feature tells, in the linear form
    reranker, _ = lr.choose_rerank(_lists(table, features, valid, train, valid, test), config)
    lists = _lists(table, features, test, train, valid, test)
    tail = slice(len(test), None)
    assert lists.base[tail].tolist() == [2.0] * len(test)  # the first stage alone: second
    return reranker, lists.ranks_by(reranker.score(lists.x), reranker.weight)[tail]


def _basis(i: int, noise: float = 0.05, seed: int = 0) -> torch.Tensor:
    v = torch.zeros(16)
    v[i] = 1.0
    return v + noise * torch.randn(16, generator=torch.Generator().manual_seed(seed))


def test_holder_similarity_finds_the_answer_whose_holders_look_like_the_query():
    """Oracle: answers 0-3 of relation 0 have five training holders each (the same type prior and degree),
    those of answer ``a`` described like ``X_a``; a new entity described like ``X_a`` answers ``a``. Only
    ``holder_max`` / ``holder_mean`` (the query against each answer's holders) can tell."""
    emb = torch.stack([_basis(15, seed=i) for i in range(N)])  # 15: every answer's own vector, and the rest
    train = torch.tensor([(s, 0, s % 4) for s in range(4, 24)])
    for s in range(4, 24):
        emb[s] = _basis(s % 4, seed=s)
    answer = {q: q % 4 for q in range(40, 60)}
    for q in answer:
        emb[q] = _basis(answer[q], seed=q)
    valid = torch.tensor([(q, 0, answer[q]) for q in range(40, 50)])
    test = torch.tensor([(q, 0, answer[q]) for q in range(50, 60)])
    wrong = {q: [(a + i) % 4 for i in (1, 2, 3)] for q, a in answer.items()}
    _, shipped = _planted_lists(emb, train, valid, test, wrong, ("shipped",))
    assert shipped.tolist() == [2.0] * len(test)  # the eight shipped features cannot tell
    reranker, ranks = _planted_lists(emb, train, valid, test, wrong, ("shipped", "holders"))
    assert reranker.feature_set == "holders" and reranker.weight > 0
    assert reranker.weights["holder_max"] + reranker.weights["holder_mean"] > 0
    assert ranks.tolist() == [1.0] * len(test)


def test_answer_centroid_finds_a_new_answer_described_like_the_relations_answers():
    """Oracle: relation 0's training answers (0-9) are described like X. Each query's answer and the first
    stage's favourite are both new (no statement: no type prior, degree or holder); the answer is described like
    X, the favourite like Y, the query like neither. Only ``answer_centroid`` can tell."""
    emb = torch.stack([_basis(3, seed=i) for i in range(N)])  # 3: the holders and the queries
    for a in range(10):
        emb[a] = _basis(0, seed=a)
    train = torch.tensor([(s, 0, s % 10) for s in range(10, 30)])
    answer = {q: 30 + q % 5 for q in range(40, 60)}
    wrong = {q: [35 + q % 5] for q in range(40, 60)}
    for q in range(40, 60):
        emb[answer[q]], emb[wrong[q][0]] = _basis(0, seed=100 + q), _basis(1, seed=200 + q)
    valid = torch.tensor([(q, 0, answer[q]) for q in range(40, 50)])
    test = torch.tensor([(q, 0, answer[q]) for q in range(50, 60)])
    _, shipped = _planted_lists(emb, train, valid, test, wrong, ("shipped",))
    assert shipped.tolist() == [2.0] * len(test)
    reranker, ranks = _planted_lists(emb, train, valid, test, wrong, ("shipped", "holders", "centroid"))
    assert reranker.feature_set == "centroid" and reranker.weights["answer_centroid"] > 0
    assert ranks.tolist() == [1.0] * len(test)


def test_text_cosine_finds_the_new_answer_described_like_the_query():
    """Oracle: each query's answer and the first stage's favourite are new, the relation's training answers are
    described like neither; the answer is described like the query, the favourite unlike it. Only
    ``text_cosine`` can tell."""
    emb = torch.stack([_basis(10, seed=i) for i in range(N)])  # 10: the holders
    for a in range(10):
        emb[a] = _basis(11, seed=a)  # the relation's training answers
    train = torch.tensor([(s, 0, s % 10) for s in range(10, 30)])
    answer = {q: 30 + q % 5 for q in range(40, 60)}
    wrong = {q: [35 + q % 5] for q in range(40, 60)}
    for j in range(5):
        emb[30 + j], emb[35 + j] = _basis(j, seed=100 + j), _basis(5 + j, seed=200 + j)
    for q in range(40, 60):
        emb[q] = _basis(q % 5, seed=q)
    valid = torch.tensor([(q, 0, answer[q]) for q in range(40, 50)])
    test = torch.tensor([(q, 0, answer[q]) for q in range(50, 60)])
    _, shipped = _planted_lists(emb, train, valid, test, wrong, ("shipped", "holders", "centroid"))
    assert shipped.tolist() == [2.0] * len(test)
    reranker, ranks = _planted_lists(emb, train, valid, test, wrong, ("shipped", "centroid", "cosine"))
    assert reranker.feature_set == "cosine" and reranker.weights["text_cosine"] > 0
    assert ranks.tolist() == [1.0] * len(test)


def test_a_reranker_saved_before_the_neighbour_features_loads_and_unknown_names_are_refused():
    old = {"weights": dict.fromkeys(lr.SHIPPED, 0.5), "weight": 2.0, "top_k": 50}  # as 3d9cc9b saved it
    loaded = LinkReranker.from_dict(old)
    assert loaded.feature_set == "shipped" and all(loaded.weights[f] == 0.0 for f in lr.NEIGHBOUR_FEATURES)
    for bad in (
        {**old, "weights": {**old["weights"], "new": 2.5}},
        {**old, "feature_set": "everything"},
        {**old, "feature_set": ["all"]},
    ):
        with pytest.raises(ConfigError, match="test.link_rerank"):
            LinkReranker.from_dict(bad, file="metrics.json")
    with pytest.raises(ConfigError, match="feature_sets"):
        LinkRerankConfig(feature_sets=("shipped", "magic"))


def _bump_lists(forms):
    """Lists where every feature but the first stage's score is alike, and the answer always sits second by it:
    the first stage puts ``wrong[q][0]`` (3.0) above it (2.0) and ``wrong[q][1:]`` (1.5, 1.2) below. No weight on
    a monotone score finds it; a score that peaks at the answer's level does."""
    emb = torch.stack([_basis(0, seed=i) for i in range(N)])
    train = torch.tensor([(s, 1, (s + 1) % SEEN) for s in range(SEEN)])  # relation 0 has no statement: no prior
    answer = {q: 20 + q % 10 for q in range(40, 60)}
    wrong = {q: [30 + q % 10, 5 + q % 10, 10 + q % 5] for q in range(40, 60)}
    valid = torch.tensor([(q, 0, answer[q]) for q in range(40, 50)])
    test = torch.tensor([(q, 0, answer[q]) for q in range(50, 60)])
    table = _Model({})
    for q, _, a in torch.cat([valid, test]).tolist():
        table.table[q] *= 0.1  # the rest well below
        table.table[q, a] = 2.0
        for e, score in zip(wrong[q], (3.0, 1.5, 1.2), strict=True):
            table.table[q, e] = score
    features = LinkFeatures(
        train, seen=torch.arange(SEEN), texts=["an entity"] * N, relation_texts=["r0", "r1"], vote=None, embeddings=emb
    )
    config = LinkRerankConfig(forms=forms, feature_sets=("shipped",))
    fitted = _lists(table, features, valid, train, valid, test)
    reranker, valid_mrr = lr.choose_rerank(fitted, config)
    lists = _lists(table, features, test, train, valid, test)
    tail = slice(len(test), None)
    assert lists.base[tail].tolist() == [2.0] * len(test)  # the first stage alone: second
    return reranker, lists.ranks_by(reranker.score(lists.x), reranker.weight)[tail], fitted


def test_the_mlp_form_finds_what_no_linear_score_can():
    """Oracle (:func:`_bump_lists`): the linear form leaves every answer second, so validation keeps the first
    stage alone; the mlp form, chosen on validation, puts every test answer first."""
    linear, ranks, _ = _bump_lists(("linear",))
    assert ranks.tolist() == [2.0] * len(ranks)
    chosen, ranks, _ = _bump_lists(("linear", "mlp"))
    assert chosen.form == "mlp" and chosen.weight > 0 and chosen.key == "mlp:shipped"
    assert ranks.tolist() == [1.0] * len(ranks)


def test_the_mlp_form_is_deterministic_and_round_trips_through_metrics_json():
    first, _, fitted = _bump_lists(("linear", "mlp"))
    again, _, _ = _bump_lists(("linear", "mlp"))
    assert first == again
    saved = json.loads(json.dumps(first.to_dict()))
    loaded = LinkReranker.from_dict(saved, file="metrics.json")
    assert loaded == first
    assert torch.equal(loaded.score(fitted.x), first.score(fitted.x))
    first_stage = fitted.x[..., 0]
    expected = first_stage.double() + first.weight * first.score(fitted.x)
    assert torch.equal(lr.rerank_row(loaded, first_stage, fitted.x), expected)


def test_a_saved_mlp_reranker_is_checked_before_use():
    """``metrics.json`` comes from outside the process: a malformed mlp block names the file and the field."""
    good, _, _ = _bump_lists(("linear", "mlp"))
    saved = good.to_dict()
    mlp = saved["mlp"]
    f = len(FEATURES)
    for bad_mlp in (
        {**mlp, "mean": mlp["mean"][:-1]},
        {**mlp, "scale": [0.0] * f},
        {**mlp, "hidden_bias": []},
        {**mlp, "hidden_bias": [0.0] * (lr.MAX_HIDDEN + 1), "hidden_out": [0.0] * (lr.MAX_HIDDEN + 1)},
        {**mlp, "hidden_in": [row[:-1] for row in mlp["hidden_in"]]},
        {**mlp, "hidden_out": [float("nan")] * len(mlp["hidden_out"])},
        {**mlp, "code": "import os"},
        {k: v for k, v in mlp.items() if k != "scale"},
        "mlp",
    ):
        with pytest.raises(ConfigError, match=r"test\.link_rerank\.mlp"):
            LinkReranker.from_dict({**saved, "mlp": bad_mlp}, file="metrics.json")
    with pytest.raises(ConfigError, match="form"):
        LinkReranker.from_dict({**saved, "form": "tree"}, file="metrics.json")
    with pytest.raises(ConfigError, match="no mlp block"):
        LinkReranker.from_dict({**saved, "form": "linear"}, file="metrics.json")
    with pytest.raises(ConfigError, match="forms"):
        LinkRerankConfig(forms=("mlp",))
    with pytest.raises(ConfigError, match="hidden"):
        LinkRerankConfig(hidden=lr.MAX_HIDDEN + 1)
