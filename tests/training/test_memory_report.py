"""The post-run report's memory, sized before training (issue 50, item 4: an estimate that bounds).

The estimate printed before ``textkg train`` counted the placement evaluation as the tuner's validation
scores and a few vote arrays (641 MiB on hp.obo, whose placement stage peaked 1.2 GiB above the resident
size), and nothing for the link re-ranker (FB15k-237 peaked at 6.5 GiB against an estimate of 0.96 GiB).
:mod:`textkg.pipeline.memory_report` counts what those stages hold, from sizes known before training.
"""

from __future__ import annotations

import dataclasses
import gc
import random
from pathlib import Path

import pytest
import torch

from textkg.pipeline import memory
from textkg.pipeline.memory_report import (
    MINILM_DIM,
    TRANSIENT,
    LinkStageSize,
    PlacementSize,
    link_stage_parts,
    placement_bytes,
    placement_parts,
)

#: hpo's README split (2026-12-06): 2,097 validation queries, 15,228 phenotype candidates, 36,853 entities
HPO = PlacementSize(
    queries=2097,
    candidates=15228,
    batch=256,
    batch_queries=480,
    entities=36853,
    feature_dim=384,
    model_dim=128,
    parent_edges=20000,
    rerank_features=9,
    components=4,
    text_words=600_000,
    vocabulary=26689,
)


@pytest.mark.parametrize(
    "field",
    [
        "candidates",
        "batch",
        "batch_queries",
        "entities",
        "feature_dim",
        "model_dim",
        "parent_edges",
        "rerank_features",
        "text_words",
        "vocabulary",
    ],
)
def test_the_placement_estimate_grows_with_what_it_allocates(field):
    """Each size that an allocation of the placement evaluation grows with moves the estimate (the old one read
    the validation queries, the candidates and the entities only)."""
    base = PlacementSize(**{**HPO.to_dict(), "text_words": 20_000, "vocabulary": 2_000, "batch_queries": 300})
    bigger = dataclasses.replace(base, **{field: 4 * getattr(base, field)})
    assert placement_bytes(bigger) > placement_bytes(base)


def test_a_batch_of_terms_is_counted_once_however_many_terms_there_are():
    """Held-out terms are scored ``b`` at a time and each batch is freed before the next: past the budget of the
    re-ranker's kept results, the validation queries move nothing; the batch and the candidates move the transient
    part."""
    from textkg.evaluation.placement.text import KEPT_SCORES_BYTES

    kept = "re-ranker scores kept between passes (terms x c float32, bounded)"
    more_terms = dataclasses.replace(HPO, queries=10 * HPO.queries)
    assert placement_parts(more_terms)[kept] == KEPT_SCORES_BYTES
    assert placement_parts(dataclasses.replace(more_terms, queries=100 * HPO.queries)) == placement_parts(more_terms)
    few = dataclasses.replace(HPO, queries=10)
    assert placement_parts(few)[kept] == 2 * 4 * HPO.candidates * 10  # a small run is not charged the budget
    half = dataclasses.replace(HPO, batch=128, batch_queries=240)
    assert placement_parts(half)[TRANSIENT] < placement_parts(HPO)[TRANSIENT]


def test_the_link_reranker_counts_its_lists_and_its_fits():
    """FB15k-237's sizes: 10,000 validation statements fit on, 51,718 test ones; the lists grow with the test
    statements, the fit with the hidden units, and scoring is bounded by SCORE_ROWS lists at a time."""
    fb = LinkStageSize(
        entities=14541,
        batch=256,
        statements=209_352,
        valid_lists=20_000,
        test_lists=103_436,
        top_k=50,
        features=12,
        hidden=32,
        model_dim=128,
        k_shot_methods=8,
    )
    parts = link_stage_parts(fb)
    lists = next(v for k, v in parts.items() if k.startswith("link re-ranker lists"))
    assert lists >= 2 * 4 * 123_436 * 50 * 12  # the (lists, K, F) float32 features, gathered and concatenated
    wider = link_stage_parts(dataclasses.replace(fb, hidden=64))
    assert wider[TRANSIENT] > parts[TRANSIENT]
    more = link_stage_parts(dataclasses.replace(fb, test_lists=10 * fb.test_lists))
    assert more[TRANSIENT] < 2 * parts[TRANSIENT]  # not the (lists, K, H) activations of every test list at once
    assert TRANSIENT in link_stage_parts(dataclasses.replace(fb, valid_lists=0, test_lists=0))


def test_the_link_reranker_scores_lists_a_block_at_a_time(monkeypatch):
    """Scoring lists in blocks gives each list the scores it gets alone (both forms)."""
    from textkg.evaluation import link_rerank
    from textkg.evaluation.link_features import FEATURES

    g = torch.Generator().manual_seed(0)
    f, h = len(FEATURES), 8
    mlp = {
        "mean": torch.randn(f, generator=g).tolist(),
        "scale": (torch.rand(f, generator=g) + 0.5).tolist(),
        "hidden_in": torch.randn(f, h, generator=g).tolist(),
        "hidden_bias": torch.randn(h, generator=g).tolist(),
        "hidden_out": torch.randn(h, generator=g).tolist(),
    }
    weights = dict(zip(FEATURES, torch.randn(f, generator=g).tolist(), strict=True))
    x = torch.randn(50, 7, f, generator=g)
    for reranker in (
        link_rerank.LinkReranker(weights, 1.0, 7, "all"),
        link_rerank.LinkReranker(weights, 1.0, 7, "all", "mlp", mlp),
    ):
        whole = reranker.score(x)
        monkeypatch.setattr(link_rerank, "SCORE_ROWS", 8)
        blocks = reranker.score(x)
        monkeypatch.setattr(link_rerank, "SCORE_ROWS", 4096)
        assert blocks.shape == whole.shape == (50, 7)
        torch.testing.assert_close(blocks, whole, rtol=4 * torch.finfo(torch.float64).eps, atol=0.0)


# ---------------------------------------------------------------- measured: an estimate that bounds


def _synthetic_obo(path: Path, terms: int = 3000, words: int = 2500, seed: int = 0) -> Path:
    """An ontology of ``terms`` terms under one root (each under one or two earlier terms), named and defined
    with words drawn from a ``words``-word vocabulary."""
    rng = random.Random(seed)
    vocab = [f"w{i}x{rng.randrange(10**6)}" for i in range(words)]
    lines = ["format-version: 1.2", "ontology: sy", ""]
    for i in range(1, terms + 1):
        name = " ".join(rng.choices(vocab, k=rng.randint(2, 5)))
        definition = " ".join(rng.choices(vocab, k=rng.randint(6, 18)))
        lines += ["[Term]", f"id: SY:{i:07d}", f"name: {name}", f'def: "{definition}." []']
        if i > 1:
            for p in {rng.randint(max(1, i - 400), i - 1) for _ in range(rng.choice((1, 1, 1, 2)))}:
                lines.append(f"is_a: SY:{p:07d}")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _status(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _reset_peak() -> bool:
    """Reset this process's ``VmHWM`` to its ``VmRSS`` (Linux ``clear_refs`` 5); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return _status("VmHWM") <= _status("VmRSS") + (1 << 20)


@pytest.mark.skipif(memory.resident_bytes() is None, reason="needs /proc/self/status (Linux)")
def test_the_placement_stage_peaks_under_its_estimate(tmp_path, monkeypatch):
    """Property, measured in this process: the placement stage of a synthetic ontology (3,000 terms, a
    2,500-word vocabulary) raises the resident set by less than the estimate's post-run components (the
    placement's parts, its largest transient and the allocator's share). Random vectors stand in for MiniLM's
    (no encoder is loaded: the estimate's encoder line is left out of the comparison)."""
    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser
    from textkg.evaluation.placement import evaluate as evaluate_module
    from textkg.pipeline import report
    from textkg.pipeline.memory_report import placement_size
    from textkg.pipeline.prepared import prepare

    obo = _synthetic_obo(tmp_path / "synthetic.obo")
    args = ["train", "--dataset", str(obo), "--split", "inductive", "--model", "transe", "--dim", "32"]
    cfg = build_run_config(build_parser().parse_args(args))
    prep = prepare(cfg)
    g = torch.Generator().manual_seed(0)
    features = torch.randn(prep.kg.num_entities, MINILM_DIM, generator=g)
    monkeypatch.setattr(report, "description_features", lambda prep: features)
    monkeypatch.setattr(
        report, "_new_description_features", lambda prep, cfg, texts: torch.randn(len(texts), features.shape[1])
    )
    monkeypatch.setattr(
        evaluate_module, "minilm_word_encoder", lambda: lambda words: torch.randn(len(words), features.shape[1])
    )
    size = placement_size(prep, cfg)
    assert size is not None and size.candidates > 1000 and size.batch == 256
    estimate = memory.estimate_memory(prep.model, cfg, num_entities=prep.kg.num_entities, private=False, placement=size)
    bound = sum(estimate.components[k] for k in (memory.PLACEMENT, memory.POST_RUN_TRANSIENT, memory.RETENTION))
    gc.collect()
    if not _reset_peak():
        pytest.skip("cannot reset VmHWM (/proc/self/clear_refs)")
    before = _status("VmRSS")
    out = report.extra_test_blocks(prep, cfg)
    grown = _status("VmHWM") - before
    assert out.get("placement_selection") and out.get("placement_names_only")  # the whole stage ran
    assert grown <= bound, f"the placement stage grew the resident set by {grown >> 20} MiB, estimate {bound >> 20}"
