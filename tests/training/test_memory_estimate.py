"""The memory estimate printed before a run, and the refusal of a run that cannot fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from textkg.errors import ConfigError
from textkg.pipeline import memory
from textkg.pipeline.memory import MARGIN_BYTES, MARGIN_FRACTION, MemoryEstimate, check_memory, estimate_memory
from textkg.pipeline.memory_report import PlacementSize
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


#: a tiny placement task (textkg.pipeline.memory_report.PlacementSize)
SMALL = PlacementSize(
    queries=5,
    candidates=10,
    batch=4,
    batch_queries=5,
    entities=10,
    feature_dim=8,
    model_dim=4,
    parent_edges=9,
    rerank_features=9,
    components=4,
    text_words=30,
    vocabulary=20,
)


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
        resident=(10**8, 10**8),
    )
    params = 4 * (n + 3) * d
    c, held = est.components, est.in_resident
    assert held["frozen text features"] == 4 * n * 7  # already resident: named, not added again
    assert c["gradients"] == params and c["Adam state"] == 2 * params
    assert next(v for k, v in held.items() if k.startswith("parameters")) == params
    assert c["evaluation scores (eval batch x candidate chunk)"] == 3 * 4 * 32 * n  # n below one chunk
    assert c["entity vectors cached for evaluation (N x d)"] == 4 * n * d
    before = 10**8 + sum(c.values())
    assert est.total == before + int(MARGIN_FRACTION * before) + MARGIN_BYTES
    private = estimate_memory(Table(n, d), _cfg(batch_size=64, num_negatives=8), num_entities=n, private=True)
    noise = next(v for k, v in private.components.items() if k.startswith("DP noise"))
    assert noise == (3 * 8 + 4) * (n + 3) * d  # three float64 steps + the float32 noised gradient
    one_vs_all = estimate_memory(
        Table(n, d), _cfg(batch_size=64, negatives="all", loss="softmax"), num_entities=n, private=False
    )
    assert one_vs_all.components["training scores (B x candidates, with gradient)"] == 2 * 4 * 64 * n


def test_refusal_names_the_components_and_can_be_skipped(monkeypatch, capsys):
    est = MemoryEstimate({"structural table": 3 * 2**30}, resident=2**30, peak_so_far=2**30)
    assert est.total == 4 * 2**30 + int(0.4 * 2**30) + 128 * 2**20  # 4.5 GiB
    with pytest.raises(
        ConfigError, match=r"needs an estimated 4\.5 GiB.*structural table 3\.0 GiB.*3\.5 GiB more.*1\.0 GiB available"
    ):
        check_memory(est, available=2**30)
    assert "memory estimate: 4.5 GiB" in capsys.readouterr().err
    check_memory(est, available=4 * 2**30)  # the 1 GiB held already is not asked for again
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
    not counted. An inductive ontology split now gets its own lines, sized from its queries, candidates,
    texts and features (textkg.pipeline.memory_report)."""
    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser
    from textkg.evaluation.placement.methods import placement_queries
    from textkg.pipeline.job import prepare
    from textkg.pipeline.memory import PLACEMENT, POST_RUN_TRANSIENT, RETENTION, estimate_memory
    from textkg.pipeline.memory_report import TRANSIENT, link_stage_size, placement_parts, placement_size

    args = ["train", "--dataset", "hpo-small", "--split", "inductive", "--model", "transe", "--dim", "8"]
    cfg = build_run_config(build_parser().parse_args(args))
    prep = prepare(cfg)
    size = placement_size(prep, cfg)
    valid = placement_queries(prep.kg, prep.split, which="valid")
    assert size is not None and size.queries == valid.num_queries > 0
    assert size.candidates >= max(len(g) for g in valid.groups) and 0 < size.batch_queries
    assert link_stage_size(prep, cfg) is None  # an ontology runs the placement instead of the vote
    est = estimate_memory(prep.model, cfg, num_entities=prep.kg.num_entities, private=False, placement=size)
    parts = placement_parts(size)
    assert est.components[PLACEMENT] == sum(v for k, v in parts.items() if k != TRANSIENT)
    assert est.components[POST_RUN_TRANSIENT] == est.components[RETENTION] == parts[TRANSIENT]
    assert est.to_dict()["parts_bytes"][PLACEMENT] == parts


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
    assert held.in_resident["frozen text features"] == 4 * n * width + 8 * n
    assert mapped.in_resident["frozen text features"] == 8 * n  # the seen-entity ids stay counted
    line = [k for k in mapped.components if k.startswith("pooled text features, memory-mapped")]
    assert len(line) == 1 and mapped.components[line[0]] == 0 and "23.4 KiB on disk" in line[0]


def test_the_estimate_bounds_what_is_resident_and_what_is_to_come():
    """Issue 50: the estimate is an upper bound, so it is never below the process's peak so far, nor below
    what it holds now plus every buffer still to be allocated."""
    model = Table(500, 8)
    for resident, peak in ((2**28, 2**28), (2**28, 2**30)):
        est = estimate_memory(model, _cfg(), num_entities=500, private=False, resident=(resident, peak))
        assert est.total >= peak + MARGIN_BYTES
        assert est.total >= resident + sum(est.components.values()) + MARGIN_BYTES
        assert est.still_needed == est.total - resident


@pytest.mark.parametrize(
    ("field", "low", "high"),
    [
        ("num_entities", 1_000, 50_000),
        ("batch_size", 64, 4096),
        ("eval_batch_size", 32, 512),
        ("num_negatives", 4, 256),
    ],
)
def test_the_estimate_grows_with_the_run(field, low, high):
    """Monotone: a larger graph, batch, evaluation batch or negative sample never lowers the estimate."""
    totals = []
    for value in (low, high):
        n = value if field == "num_entities" else 1_000
        train = {} if field == "num_entities" else {field: value}
        est = estimate_memory(Table(n, 16), _cfg(**train), num_entities=n, private=False, resident=(2**28, 2**28))
        totals.append(est.total)
    assert totals[0] < totals[1]
    private = [
        estimate_memory(Table(1_000, 16), _cfg(), num_entities=1_000, private=p, resident=(2**28, 2**28)).total
        for p in (False, True)
    ]
    assert private[0] < private[1]


def test_a_placement_run_counts_the_encoders_it_loads_later(monkeypatch):
    """The placement re-ranker loads MiniLM during evaluation, also when every text came from the cache:
    its weights and, unless imported already, transformers are counted."""
    import sys

    from textkg.encoders.bert import default_minilm_path

    weights = sum(f.stat().st_size for f in Path(default_minilm_path()).glob("*.safetensors"))
    cfg = _cfg()
    key = "text encoders loaded for placement (MiniLM word vectors, names-only encoding)"
    est = estimate_memory(Table(10, 4), cfg, num_entities=10, private=False, placement=SMALL, resident=(0, 0))
    loaded = "transformers" in sys.modules
    assert est.components[key] == weights + (0 if loaded else memory.TRANSFORMERS_BYTES)
    monkeypatch.delitem(sys.modules, "transformers", raising=False)
    est = estimate_memory(Table(10, 4), cfg, num_entities=10, private=False, placement=SMALL, resident=(0, 0))
    assert est.components[key] == weights + memory.TRANSFORMERS_BYTES
    assert key not in estimate_memory(Table(10, 4), cfg, num_entities=10, private=False, resident=(0, 0)).components


def test_a_placement_cross_encoder_is_its_own_component():
    """``--placement-cross-encoder`` fine-tunes MiniLM during evaluation: its weights five times (weights,
    gradients, Adam's two moments, the copy scored from) and a step's activations; nothing without it."""
    import dataclasses

    from textkg.encoders.bert import default_minilm_path

    weights = sum(f.stat().st_size for f in Path(default_minilm_path()).glob("*.safetensors"))
    cfg = _cfg()
    with_it = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, placement_cross_encoder=50))
    est = estimate_memory(Table(10, 4), with_it, num_entities=10, private=False, placement=SMALL, resident=(0, 0))
    assert est.components[memory.CROSS_ENCODER] == 5 * weights + memory.CROSS_ENCODER_ACTIVATIONS
    without = estimate_memory(Table(10, 4), cfg, num_entities=10, private=False, placement=SMALL, resident=(0, 0))
    assert memory.CROSS_ENCODER not in without.components
    assert (
        memory.CROSS_ENCODER
        not in estimate_memory(Table(10, 4), with_it, num_entities=10, private=False, resident=(0, 0)).components
    )  # no placement, no cross-encoder


@pytest.mark.skipif(memory.resident_bytes() is None, reason="needs /proc/self/status (Linux)")
def test_a_measured_training_step_stays_under_the_estimate():
    """Measured, in this process: an estimate read from /proc bounds the peak after a training step has
    allocated gradients and Adam state for a 64 MiB table (a lower bound of the estimate's components)."""
    n, d = 262_144, 64
    model = Table(n, d)
    est = estimate_memory(model, _cfg(batch_size=512, num_negatives=32), num_entities=n, private=False)
    now, peak = memory.resident_bytes()
    assert est.resident <= now and est.total >= max(peak, now + 3 * 4 * n * d)  # gradients + two Adam moments
    optimizer = torch.optim.Adam(model.parameters())
    model.entity.sum().backward()
    optimizer.step()
    assert memory.resident_bytes()[1] <= est.total
