"""Does a cross-encoder over the shortlist place new terms better (issue 54, item 2)? No retraining.

Usage::

    python benchmarks/cross_encoder_shortlist.py RUN --steps 300,1000 \
        --out benchmarks/results/cross_encoder_shortlist.json

``RUN`` is a finished ``textkg train`` run on an ontology's inductive split (the README's job). For each
``--steps`` value the run's post-run placement (``test.placement*``: the combination, the re-ranker, the
names-only block) is computed again exactly as ``textkg train --placement-cross-encoder STEPS`` computes it
(:func:`textkg.pipeline.report._placement`): the cross-encoder is fine-tuned on the training terms' ``is_a`` pairs
(cached by content under the textkg cache, so a second call reuses it), re-ranks each held-out term's top
candidates, and validation chooses its weight. Each row records the combination with and without it on the
same terms, the baselines, and the seconds of fine-tuning and of scoring. Nothing is written into ``RUN``. Rows
are kept by label (``RUN``'s folder name and the steps): a second command adds its rows to ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

KEYS = ("mrr", "hits@1", "hits@10")


def _brief(block: dict | None) -> dict | None:
    return None if not block else {k: round(float(block[k]), 4) for k in KEYS if k in block}


def place_again(run_dir: Path, steps: int) -> dict:
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import _placement
    from textkg.pipeline.run_dir import open_run
    from textkg.training import checkpoint as ckpt

    cfg = open_run(run_dir).config
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, placement_cross_encoder=steps))
    prep = prepare(cfg, run_dir)
    prep.model.load_state_dict(ckpt.load_weights(run_dir))
    start, cpu = time.perf_counter(), time.process_time()
    out = _placement(prep, cfg, None, progress=True)
    assert out is not None
    seconds, cpu_s = time.perf_counter() - start, time.process_time() - cpu
    selection = out["placement_selection"]
    names = out.get("placement_names_only") or {}
    encoder = (cfg.model.encoder_kwargs or {}).get("model_name_or_path")
    row = {
        "label": f"{run_dir.name} steps={steps}",
        "command": _harness.command_line(),
        "encoder": "packaged all-MiniLM-L6-v2" if encoder is None else f"another MiniLM folder ({Path(encoder).name})",
        "steps": steps,
        "test": {
            "combined": _brief(out.get("placement_combined")),
            "combined-without-cross-encoder": _brief(out.get("placement_combined_without_cross_encoder")),
            "combined-without-rerank": _brief(out.get("placement_combined_without_rerank")),
            "chosen": selection["chosen"],
            **{name: _brief(block) for name, block in out["placement_baselines"].items()},
            "model": _brief(out.get("placement")),
            "names-only-combined": _brief(names.get("placement_combined")),
            "names-only-combined-without-cross-encoder": _brief(names.get("placement_combined_without_cross_encoder")),
            "num_queries": out["placement"]["num_queries"],
        },
        "cross_encoder": selection["combined"].get("cross_encoder"),
        "names_only_cross_encoder": ((names.get("placement_selection") or {}).get("combined") or {}).get(
            "cross_encoder"
        ),
        "fine_tuning": out.get("placement_cross_encoder"),
        "placement_wall_s": round(seconds, 1),
        "placement_cpu_s": round(cpu_s, 1),
    }
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--steps", default="300", help="comma-separated fine-tuning steps, one row each")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    _harness.set_threads(args.threads)
    old = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    rows = list(old.get("rows", []))  # a row per (run, steps): a new one replaces the row with its label
    for steps in [int(s) for s in args.steps.split(",")]:
        row = place_again(args.run, steps)
        rows = [r for r in rows if r.get("label") != row["label"]] + [row]
        print(_harness.dumps(row))
        _harness.write_results(
            args.out,
            _harness.result(
                "cross_encoder_shortlist",
                command=_harness.command_line(),
                question="Does a cross-encoder fine-tuned on the ontology's own is_a pairs, re-ranking each new "
                "term's top candidates, place new terms better than the combination without it?",
                torch_threads=torch.get_num_threads(),
                rows=rows,
            ),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
