"""The two cuts of issue 38 in the README job's encoding and training, each against the code it replaced.

Usage::

    python benchmarks/main_command_parts.py [--texts 3000] [--steps 30] [--threads 1] [--seed 0]
        [--out benchmarks/results/main_command_parts.json]
    python benchmarks/main_command_parts.py --run-dir runs/quickstart --parts post_run [--profile FILE]
        [--label NAME] [--out benchmarks/results/main_command_post_run.json]

CPU seconds (``time.process_time``), not wall: the development machine is shared, and CPU time is what
two idle cores would spend. Both sides run in the same process, alternately, on the same inputs:

* ``encode``: the README model's encoder (``bert``: packaged MiniLM, mean pooling, 32 word pieces) on a
  seeded sample of ``--texts`` ``hpo`` descriptions, batched by word-piece count (what ``encode`` does
  now) and in the given order (before: ``_lengths`` returning ``None``); the largest difference between
  the two results' entries is reported (padding changes only float rounding).
* ``train_step``: one Adam step of ``fused-transe`` at the README's sizes (36,853 entities, 30,000 seen,
  384-d pooled features, B = 512, 32 negatives, margin loss) on random statements: ``model(batch)``,
  which fuses each distinct end once (now), and ``score_rows(triples, gather(lookup_plan(triples)))``
  (the forward before), CPU seconds per step over ``--steps`` steps after 3 warm-up steps.
* ``post_run`` (with ``--run-dir``, a finished README run): the post-run blocks the job adds after the
  test ranking (:func:`textkg.pipeline.report.extra_test_blocks`: placement with its tuner, the re-ranker
  and names-only placement, the neighbour vote, placement with annotations) re-run on the run's best
  model, CPU and wall seconds per stage, the placement MRRs and the weights chosen on validation; with
  ``--profile FILE``, cProfile's top functions by cumulative and own time, as text. Run it with
  ``PYTHONPATH`` pointing at another checkout to measure that code on the same run (before/after).
* ``tuner`` (with ``--run-dir``): CPU seconds of ``tune_combination`` alone (the vote settings and the
  weight grid on the validation terms) with the run's model, and every validation MRR it tried.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness


def encode_rows(count: int, seed: int) -> dict:
    from textkg.data.registry import load_dataset
    from textkg.encoders import get_encoder

    texts = random.Random(seed).sample(list(load_dataset("hpo").entity_descriptions), count)
    encoder = get_encoder("bert", pooling="mean")
    start = time.process_time()
    by_length = encoder.encode(texts)
    new = time.process_time() - start
    encoder._lengths = lambda texts: None  # type: ignore[method-assign]  # the order the caller gave
    start = time.process_time()
    given = encoder.encode(texts)
    old = time.process_time() - start
    return {
        "texts": count,
        "cpu_s_by_length": round(new, 2),
        "cpu_s_given_order": round(old, 2),
        "max_abs_difference": float((by_length - given).abs().max()),
    }


def step_rows(steps: int, seed: int) -> dict:
    from textkg.models import build_model
    from textkg.models.presets import get_preset
    from textkg.training.losses import margin_ranking
    from textkg.training.negatives import corrupt

    torch.manual_seed(seed)
    n, relations, seen = 36_853, 4, torch.arange(30_000)
    model = build_model(
        get_preset("fused-transe"),
        num_entities=n,
        num_relations=relations,
        seen_entities=seen,
        text_features=torch.randn(n, 384),
    ).train()
    size = 458_308
    train = torch.stack(
        [torch.randint(0, 30_000, (size,)), torch.randint(0, relations, (size,)), torch.randint(0, 30_000, (size,))], 1
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(seed)

    def distinct(batch):
        return model(batch, generator=generator)

    def every_end(batch):
        return model.score_rows(batch, model.gather(model.lookup_plan(batch, generator)))

    def step(forward) -> None:
        idx = torch.randint(0, size, (512,), generator=generator)
        optimizer.zero_grad(set_to_none=True)
        batch = corrupt(train[idx], num_negatives=32, entity_pool=seen, generator=generator)
        margin_ranking(forward(batch)).mean().backward()
        optimizer.step()

    out = {}
    for name, forward in (("distinct_ends", distinct), ("every_end", every_end)):
        for _ in range(3):
            step(forward)
        start = time.process_time()
        for _ in range(steps):
            step(forward)
        out[f"cpu_s_per_step_{name}"] = round((time.process_time() - start) / steps, 4)
    return {"steps": steps, **out}


def post_run_rows(run_dir: Path, profile: Path | None) -> dict:
    import cProfile
    import io
    import pstats

    import textkg.progress
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import extra_test_blocks
    from textkg.pipeline.run_dir import open_run
    from textkg.training import checkpoint as ckpt

    cfg = open_run(run_dir).config
    prep = prepare(cfg, run_dir, device=torch.device("cpu"))
    prep.model.load_state_dict(ckpt.load_weights(run_dir))
    marks: list[tuple[str, float, float]] = []
    real_stage = textkg.progress.stage

    def stage(message: str, *, progress: bool = True) -> None:
        marks.append((message, time.process_time(), time.monotonic()))
        real_stage(message, progress=progress)

    textkg.progress.stage = stage  # type: ignore[assignment]  # extra_test_blocks imports it when called
    profiler = cProfile.Profile() if profile is not None else None
    cpu, wall = time.process_time(), time.monotonic()
    if profiler is not None:
        profiler.enable()
    blocks = extra_test_blocks(prep, cfg, progress=True)
    if profiler is not None:
        profiler.disable()
    marks.append(("end", time.process_time(), time.monotonic()))
    textkg.progress.stage = real_stage  # type: ignore[assignment]
    stages = [
        {"stage": m, "cpu_s": round(marks[i + 1][1] - c, 1), "wall_s": round(marks[i + 1][2] - w, 1)}
        for i, (m, c, w) in enumerate(marks[:-1])
    ]
    if profiler is not None and profile is not None:
        text = io.StringIO()
        for key in ("cumulative", "tottime"):
            pstats.Stats(profiler, stream=text).sort_stats(key).print_stats(30)
        profile.write_text(text.getvalue())
    selection = blocks.get("placement_selection") or {}
    names_only = blocks.get("placement_names_only") or {}
    import resource

    return {
        "run_dir": str(run_dir),
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),  # Linux: KiB
        "cpu_s": round(time.process_time() - cpu, 1),
        "wall_s": round(time.monotonic() - wall, 1),
        "stages": stages,
        "placement": {
            "chosen": selection.get("chosen"),
            "weights": (selection.get("combined") or {}).get("weights"),
            "vote": (selection.get("combined") or {}).get("vote"),
            "combined": blocks.get("placement_combined"),
            "combined_without_rerank": blocks.get("placement_combined_without_rerank"),
            "model": (blocks.get("placement") or {}).get("mrr"),
            "baselines": {k: v.get("mrr") for k, v in (blocks.get("placement_baselines") or {}).items()},
            "names_only_combined": (names_only.get("placement_combined") or {}).get("mrr"),
            "names_only_weights": ((names_only.get("placement_selection") or {}).get("combined") or {}).get("weights"),
        },
        "known_links": {
            k: (blocks.get("placement_known_links") or {}).get(k) for k in ("weight", "valid_mrr_by_weight")
        },
    }


def tuner_rows(run_dir: Path) -> dict:
    from textkg.evaluation.placement.combination import tune_combination
    from textkg.evaluation.placement.methods import cosine_scorer, model_scorer, placement_queries
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import description_features
    from textkg.pipeline.run_dir import open_run
    from textkg.training import checkpoint as ckpt

    cfg = open_run(run_dir).config
    prep = prepare(cfg, run_dir, device=torch.device("cpu"))
    prep.model.load_state_dict(ckpt.load_weights(run_dir))
    prep.model.eval()
    features = description_features(prep)
    valid = placement_queries(prep.kg, prep.split, which="valid")
    if valid is None:
        raise SystemExit(f"{run_dir}: no validation placement queries")
    train = prep.split.train
    components = {"model": model_scorer(prep.model, valid.relation), "description": cosine_scorer(features)}
    with torch.no_grad():
        start = time.process_time()
        combo = tune_combination(
            components,
            valid,
            num_entities=prep.kg.num_entities,
            features=features,
            parent_edges=train[train[:, 1] == valid.relation][:, [0, 2]],
        )
        cpu = time.process_time() - start
    return {"tune_combination_cpu_s": round(cpu, 1), "weights": combo.weights, "tried_valid_mrr": combo.tried}


PARTS = ("encode", "train_step", "post_run", "tuner")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=3000, help="hpo descriptions encoded (default 3000)")
    parser.add_argument("--steps", type=int, default=30, help="training steps timed per side (default 30)")
    parser.add_argument("--run-dir", type=Path, help="a finished README run, for the post_run part")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=["encode", "train_step"])
    parser.add_argument("--profile", type=Path, help="post_run: write cProfile's top functions here")
    parser.add_argument("--label", default=None, help="a name for this record (e.g. the commit measured)")
    _harness.add_common_flags(parser, out="benchmarks/results/main_command_parts.json", seed=0, threads=1)
    args = parser.parse_args(argv)
    _harness.set_threads(args.threads)
    if {"post_run", "tuner"} & set(args.parts) and args.run_dir is None:
        parser.error("the post_run and tuner parts need --run-dir")
    before = _harness.load_average()
    rows: dict = {}
    if "encode" in args.parts:
        rows["encode"] = encode_rows(args.texts, args.seed)
    if "train_step" in args.parts:
        rows["train_step"] = step_rows(args.steps, args.seed)
    if "post_run" in args.parts:
        rows["post_run"] = post_run_rows(args.run_dir, args.profile)
    if "tuner" in args.parts:
        rows["tuner"] = tuner_rows(args.run_dir)
    record = _harness.result(
        "main_command_parts",
        label=args.label,
        threads=args.threads,
        load_average_before=before,
        **rows,
        load_average_after=_harness.load_average(),
    )
    _harness.write_results(args.out, record)
    print(_harness.dumps(record), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
