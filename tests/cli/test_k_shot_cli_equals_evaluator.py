"""What a user gets through ``textkg predict --known-links`` is what ``textkg evaluate --k-shot`` measured
(issue 38): the choice made on validation is saved in the run, ``predict --batch --known-links`` uses it
with the model loaded once, and its rankings of the held-out statements equal the evaluator's on the
same reveals."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import torch

from textkg.cli.main import main
from textkg.data.known_links import DIRECTIONS
from textkg.evaluation.k_shot import draw_k_shot

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp_ind"
K = 2


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kshot-cli") / "run"
    argv = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "fused-transe"]
    argv += ["--encoder", "glove-bow", "--dim", "8", "--epochs", "2", "--seed", "3", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def evaluated(run) -> tuple[dict, str]:
    """``textkg evaluate RUN --k-shot 0,K`` once, on the run without a k-shot choice (as a run on a graph
    with a placement task has it): ``(what it prints, the run's metrics.json text after it)``."""
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["test"].pop("k_shot_selection")
    metrics["test"].pop("k_shot")
    (run / "metrics.json").write_text(json.dumps(metrics))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["evaluate", str(run), "--k-shot", f"0,{K}", "--device", "cpu"]) == 0
    return json.loads(out.getvalue()), (run / "metrics.json").read_text()


def _evaluate(run: Path, evaluated) -> dict:
    """The run as ``evaluate --k-shot`` left it (a test may have changed metrics.json since); what it printed."""
    (run / "metrics.json").write_text(evaluated[1])
    return evaluated[0]


def test_evaluate_k_shot_saves_its_choice_in_the_run(run, evaluated):
    printed = _evaluate(run, evaluated)
    saved = json.loads((run / "metrics.json").read_text())
    selection = saved["test"]["k_shot_selection"]
    assert selection["chosen"] == printed["test"]["k_shot_selection"]["chosen"]
    assert selection["made_by"] == f"textkg evaluate --k-shot 0,{K}"
    assert saved["test"]["k_shot"] == printed["test"]["k_shot"]
    assert printed["saved_k_shot_choice"] == str(run / "metrics.json")
    assert "NaN" not in (run / "metrics.json").read_text()  # strict JSON
    fixed = saved["test"]["k_shot"]["0"]["fixed_entities"]
    assert fixed["eligible_at_k"] == K and fixed["num_entities"] == saved["test"]["k_shot"][str(K)]["num_entities"]


def _cli_ranks(run: Path, tmp_path: Path, capsys) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """``(CLI ranks, evaluator ranks, one CLI result)`` of the counted test queries at ``K``, heads first."""
    from textkg.evaluation.k_shot import k_shot_ranks
    from textkg.evaluation.link_vote import LinkVoteScorer, rank_link_vote
    from textkg.models.known_links import LinkMethod, with_known_links_many
    from textkg.pipeline.k_shot import link_vote_of
    from textkg.predict import Predictor

    predictor = Predictor(run, device="cpu")
    prep, kg, cfg = predictor.prepared, predictor.kg, predictor.config
    draw = draw_k_shot(prep.split.test, prep.split.train_entities, K, num_entities=kg.num_entities, seed=cfg.train.seed)
    owners = draw.eligible.tolist()
    batch, links = tmp_path / "batch.tsv", tmp_path / "links.tsv"
    batch.write_text("".join(f"{kg.entities[e]}\t{kg.entity_descriptions[e]}\n" for e in owners), encoding="utf-8")
    word = {role: w for w, role in DIRECTIONS.items()}
    links.write_text(
        "# name\trelation\tentity\tdirection\n"
        + "".join(
            f"{kg.entities[e]}\t{kg.relations[r]}\t{kg.entities[o]}\t{word[role]}\n"
            for e, r, o, role in draw.links.tolist()
        ),
        encoding="utf-8",
    )
    capsys.readouterr()
    argv = ["predict", str(run), "--batch", str(batch), "--known-links", str(links), "--device", "cpu"]
    # every entity a candidate, held-out ones and the query's own included, as the evaluator ranks them
    assert main([*argv, "--top-k", str(kg.num_entities), "--include-held-out"]) == 0
    results = {r["entity"]["name"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    true = {tuple(t) for t in torch.cat([prep.split.train, prep.split.valid, prep.split.test]).tolist()}

    irreflexive = prep.model.irreflexive if prep.model.any_irreflexive else torch.zeros(kg.num_relations, dtype=bool)

    def rank(entity: int, r: int, answer: int, direction: str) -> float:
        """The filtered realistic rank (:func:`textkg.evaluation.ranking.realistic_ranks`) from the CLI's scores;
        the entity's own row in the graph stands in for nothing where the model rules ``(e, r, e)`` out."""
        preds = results[kg.entities[entity]]["predictions"]
        rows = [p for p in preds if p["relation"] == kg.relations[r] and p["direction"] == direction]
        score = {kg.entities.index(p["entity"]): p["score"] for p in rows}
        target = score.pop(answer)
        others = [
            s
            for c, s in score.items()
            if ((entity, r, c) if direction == "tail" else (c, r, entity)) not in true
            and not (c == entity and bool(irreflexive[r]))
        ]
        return 1 + sum(s > target for s in others) + sum(s == target for s in others) / 2

    cli = [rank(t, r, h, "head") for h, r, t in draw.queries[draw.head].tolist()]
    cli += [rank(h, r, t, "tail") for h, r, t in draw.queries[draw.tail].tolist()]
    # the evaluator's ranks of the same queries, as evaluate_k_shot computes them for the saved choice
    selection = json.loads((run / "metrics.json").read_text())["test"]["k_shot_selection"]
    method = LinkMethod.from_key(selection["chosen"], temperature=cfg.train.temperature)
    candidates = torch.arange(kg.num_entities)
    weight = selection["link_vote"]["weight"]
    with torch.no_grad():
        if weight:
            base = with_known_links_many(prep.model, draw.links, [method], seed=cfg.train.seed)[method.key]
            vote, _ = link_vote_of(prep)
            scorer = LinkVoteScorer(base, vote, draw.links, 0.0)
            ranked = rank_link_vote(
                scorer, draw.queries, draw.head, draw.tail, filter_index=prep.filter_index, candidates=candidates,
                weights=[weight],
            )  # fmt: skip
            evaluator = ranked[f"{weight:g}"]
        else:
            evaluator = k_shot_ranks(
                prep.model, draw, [method], filter_index=prep.filter_index, candidates=candidates,
                num_entities=kg.num_entities, seed=cfg.train.seed,
            )[method.key]  # fmt: skip
    return torch.tensor(cli, dtype=torch.float64), evaluator.double(), next(iter(results.values()))


@pytest.mark.parametrize("override", [None, ("mix:0", 2.0), ("fold-in:1", 0.5)])
def test_predict_through_the_cli_equals_the_evaluator_on_the_same_reveals(run, evaluated, tmp_path, capsys, override):
    """Query by query, for the saved choice and for other choices a run can save (fold-in, whose negatives
    are drawn from the run's seed; the link vote, standardised over every entity).

    The new entity's text vector comes from encoding its description alone (``predict``) or with every
    entity (the evaluator): the two agree to float rounding (~1e-7), which the link vote's standardisation
    can turn into a swapped near-tie and fold-in's 50 Adam steps amplify (Adam's step is about ``lr ·
    sign(g)`` where ``g`` is near 0). So the ranks are equal exactly where neither applies, and
    otherwise equal for most queries with the same MRR within 0.02."""
    _evaluate(run, evaluated)
    metrics = json.loads((run / "metrics.json").read_text())
    reported = metrics["test"]["k_shot"][str(K)]["mrr"]
    if override is not None:
        selection = metrics["test"]["k_shot_selection"]
        selection["chosen"], selection["link_vote"]["weight"] = override
        (run / "metrics.json").write_text(json.dumps(metrics))
    cli, evaluator, result = _cli_ranks(run, tmp_path, capsys)
    if override is None:  # the evaluator's own number
        assert float(evaluator.reciprocal().mean()) == pytest.approx(reported, abs=1e-9)
    assert len(cli) == len(evaluator) > 0
    mrr_cli, mrr_eval = float(cli.reciprocal().mean()), float(evaluator.reciprocal().mean())
    exact = override is None or (not override[0].startswith("fold-in") and not override[1])
    if exact or override == ("mix:0", 2.0):
        torch.testing.assert_close(cli, evaluator, atol=0.0, rtol=0.0)
    else:
        assert float((cli == evaluator).double().mean()) >= 0.75 and mrr_cli == pytest.approx(mrr_eval, abs=0.02)
    known = result["scoring"]["known_links"]
    assert known["chosen_on_validation"] is True and "chose on validation" in known["reading"]


def test_predict_says_when_the_run_made_no_k_shot_choice(run, tmp_path, capsys):
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["test"].pop("k_shot_selection", None)
    (run / "metrics.json").write_text(json.dumps(metrics))
    links = tmp_path / "links.tsv"
    links.write_text("/r/likes\t/e/33\ttail\n", encoding="utf-8")
    capsys.readouterr()
    argv = ["predict", str(run), "--text", "a new person", "--known-links", str(links), "--device", "cpu"]
    assert main(argv) == 0
    known = json.loads(capsys.readouterr().out)["scoring"]["known_links"]
    assert known["chosen_on_validation"] is False
    assert "DEFAULT" in known["reading"] and "evaluate RUN --k-shot" in known["reading"]
    assert "chose on validation" not in known["reading"]


@pytest.mark.parametrize("content", ["", "\n\n", "# relation\tentity\tdirection\n# nothing else\n"])
def test_a_known_links_file_without_a_link_exits_2(run, tmp_path, capsys, content):
    links = tmp_path / "links.tsv"
    links.write_text(content, encoding="utf-8")
    capsys.readouterr()
    argv = ["predict", str(run), "--text", "someone", "--known-links", str(links), "--device", "cpu"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {links}" in err and "no known link" in err and "Traceback" not in err


def test_batch_known_links_naming_an_unknown_row_exits_2(run, tmp_path, capsys):
    batch, links = tmp_path / "batch.tsv", tmp_path / "links.tsv"
    batch.write_text("alice\ta new person\n", encoding="utf-8")
    links.write_text("alice\t/r/likes\t/e/33\ttail\nbob\t/r/likes\t/e/22\ttail\n", encoding="utf-8")
    capsys.readouterr()
    argv = ["predict", str(run), "--batch", str(batch), "--known-links", str(links), "--device", "cpu"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{links}:2" in err and "field 'name'" in err
