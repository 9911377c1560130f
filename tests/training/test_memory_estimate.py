"""The memory estimate printed before a run, and the refusal of a run that cannot fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from textkg.errors import ConfigError
from textkg.pipeline import memory
from textkg.pipeline.memory import OVERHEAD_BYTES, MemoryEstimate, check_memory, estimate_memory
from textkg.training.config import RunConfig

#: the tiny fixture: the estimate is printed (and a run that cannot fit refused) before any dataset's
#: training; hpo-small's post-run evaluation took most of the suite's 38 s here (issue 38)
ARGS = [
    "train",
    "--dataset",
    str(Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"),
    "--split",
    "inductive",
    "--model",
    "transe",
    "--epochs",
    "1",
    "--dim",
    "16",
    "--valid-max-triples",
    "20",
]


class Table(torch.nn.Module):
    def __init__(self, n, d, features=None):
        super().__init__()
        self.entity = torch.nn.Parameter(torch.zeros(n, d))
        self.relation = torch.nn.Parameter(torch.zeros(3, d))
        self.register_buffer("features", torch.zeros(n, 7) if features else torch.zeros(0))


def _cfg(**train):
    import dataclasses

    cfg = RunConfig()
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **train))


def test_components_are_rows_times_width_times_bytes():
    n, d = 1000, 16
    est = estimate_memory(
        Table(n, d, features=True),
        _cfg(batch_size=64, num_negatives=8, eval_batch_size=32),
        num_entities=n,
        private=False,
    )
    params = 4 * (n + 3) * d
    c = est.components
    assert c["frozen text features"] == 4 * n * 7
    assert c["gradients"] == params and c["Adam state"] == 2 * params
    assert next(v for k, v in c.items() if k.startswith("parameters")) == params
    assert c["evaluation scores (eval batch x candidate chunk)"] == 3 * 4 * 32 * n  # n below one chunk
    assert c["entity vectors cached for evaluation (N x d)"] == 4 * n * d
    assert est.total == sum(c.values()) + OVERHEAD_BYTES
    private = estimate_memory(Table(n, d), _cfg(batch_size=64, num_negatives=8), num_entities=n, private=True)
    noise = next(v for k, v in private.components.items() if k.startswith("DP noise"))
    assert noise == (3 * 8 + 4) * (n + 3) * d  # three float64 steps + the float32 noised gradient
    one_vs_all = estimate_memory(
        Table(n, d), _cfg(batch_size=64, negatives="all", loss="softmax"), num_entities=n, private=False
    )
    assert one_vs_all.components["training scores (B x candidates, with gradient)"] == 2 * 4 * 64 * n


def test_refusal_names_the_components_and_can_be_skipped(monkeypatch, capsys):
    est = MemoryEstimate({"structural table": 3 * 2**30})
    with pytest.raises(
        ConfigError, match=r"needs an estimated 3\.8 GiB.*structural table 3\.0 GiB.*1\.0 GiB available"
    ):
        check_memory(est, available=2**30)
    assert "memory estimate: 3.8 GiB" in capsys.readouterr().err
    monkeypatch.setenv(memory.SKIP_ENV, "1")
    check_memory(est, available=2**30)  # printed, not refused
    check_memory(est, available=None if memory.available_bytes() is None else 2**40)


def test_a_run_that_cannot_fit_exits_2_and_writes_nothing(tmp_path, monkeypatch, capsys):
    from textkg.cli.main import main

    monkeypatch.setattr(memory, "available_bytes", lambda: 2**20)
    monkeypatch.delenv(memory.SKIP_ENV, raising=False)
    out = tmp_path / "run"
    assert main([*ARGS, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "field 'memory'" in err and "Traceback" not in err
    assert not out.exists()


def test_the_estimate_is_printed_before_training(tmp_path, capsys):
    from textkg.cli.main import main

    out = tmp_path / "run"
    assert main([*ARGS, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "memory estimate:" in err and "available" in err
    json.loads((out / "metrics.json").read_text())


def test_placement_is_itemised_for_an_ontology_split():
    """The README run peaked at 2.0 GiB against an estimate of 1.0 GiB: the placement evaluation was
    not counted. An inductive ontology split now gets its own line, sized from its queries."""
    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser
    from textkg.evaluation.placement.methods import placement_queries
    from textkg.pipeline.job import placement_size, prepare
    from textkg.pipeline.memory import estimate_memory, placement_bytes

    args = ["train", "--dataset", "hpo-small", "--split", "inductive", "--model", "transe", "--dim", "8"]
    cfg = build_run_config(build_parser().parse_args(args))
    prep = prepare(cfg)
    size = placement_size(prep)
    valid = placement_queries(prep.kg, prep.split, which="valid")
    assert size == (valid.num_queries, max(len(g) for g in valid.groups)) and size[0] > 0
    est = estimate_memory(prep.model, cfg, num_entities=prep.kg.num_entities, private=False, placement=size)
    line = [v for k, v in est.components.items() if k.startswith("placement evaluation")]
    assert line == [
        placement_bytes(num_valid_queries=size[0], num_candidates=size[1], num_entities=prep.kg.num_entities)
    ]
    assert placement_bytes(num_valid_queries=2097, num_candidates=15228, num_entities=36853) > 750 * 2**20  # hpo


def test_evaluation_scores_are_bounded_by_the_candidate_chunk():
    """Ranking scores at most chunk + batch candidates per call (textkg.evaluation.ranking), so the
    evaluation's score matrix stops growing with N once N exceeds a chunk."""
    from textkg.evaluation.ranking import EVAL_SCORE_BYTES, default_candidate_chunk

    key = "evaluation scores (eval batch x candidate chunk)"
    b = 256
    chunk = default_candidate_chunk(b)
    sizes = {}
    for n in (1_000, chunk + b, 10**7, 10**8):
        est = estimate_memory(Table(10, 4), _cfg(eval_batch_size=b), num_entities=n, private=False)
        sizes[n] = est.components[key]
    assert sizes[1_000] == 3 * 4 * b * 1_000
    assert sizes[10**7] == sizes[10**8] == sizes[chunk + b] == 3 * 4 * b * (chunk + b)
    assert sizes[10**8] <= 3 * (EVAL_SCORE_BYTES + 4 * b * b)  # scores, comparisons, scorer workspace
    assert memory.eval_score_columns(b, 10**8) == chunk + b


class TextModel(torch.nn.Module):
    def __init__(self, n, width):
        super().__init__()
        self.entity = torch.nn.Parameter(torch.zeros(n, 4))
        self.text = torch.nn.Module()
        self.text.register_buffer("text_text_features", torch.zeros(n, width))
        self.register_buffer("seen_entities", torch.arange(n))


def test_memory_mapped_features_are_listed_but_not_counted():
    n, width = 500, 12
    held = estimate_memory(TextModel(n, width), _cfg(), num_entities=n, private=False)
    mapped = estimate_memory(TextModel(n, width), _cfg(), num_entities=n, private=False, mapped_features=True)
    assert held.components["frozen text features"] == 4 * n * width + 8 * n
    assert mapped.components["frozen text features"] == 8 * n  # the seen-entity ids stay counted
    line = [k for k in mapped.components if k.startswith("pooled text features, memory-mapped")]
    assert len(line) == 1 and mapped.components[line[0]] == 0 and "23.4 KiB on disk" in line[0]
    assert held.total - mapped.total == 4 * n * width
