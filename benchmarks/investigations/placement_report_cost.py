"""What the post-run placement report costs on a trained run, and what it reports (issue 54).

Usage::

    python benchmarks/investigations/placement_report_cost.py --run-dir RUN --label L [--out FILE]

Runs the run's placement report (``textkg evaluate RUN --placement``'s computation, without writing into the run)
on this code and the run's checkpoint, and records its wall time, CPU time and the process's peak RSS beside the
combination's test and validation MRR and whether every placement block equals the one the run saved. Run it with
two versions of the code (``PYTHONPATH=WORKTREE``) to compare them; each row is keyed by ``--label``. Default
``--out``: ``benchmarks/results/placement_report_cost.json``. docs/results/placement.md, "The re-ranker's scores
kept between the report's passes".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness
from rerank_ablation import summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--label", required=True, help="this row's key (e.g. the code's commit)")
    _harness.add_common_flags(parser, out="benchmarks/results/placement_report_cost.json", seed=0, threads=2)
    args = parser.parse_args(argv)
    _harness.set_threads(args.threads)
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import _placement
    from textkg.pipeline.run_dir import open_run
    from textkg.training import checkpoint as ckpt

    metrics = args.run_dir / "metrics.json"
    if not metrics.is_file():
        parser.error(f"{args.run_dir}: no metrics.json (not a finished run)")
    saved = json.loads(metrics.read_text(encoding="utf-8")).get("test") or {}
    if not saved.get("placement_selection"):
        parser.error(f"{args.run_dir}: the run has no placement task to report")
    cfg = open_run(args.run_dir).config
    prep = prepare(cfg, args.run_dir)
    ckpt.load_run_weights(prep.model, args.run_dir)
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    out = _placement(prep, cfg, None)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    assert out is not None
    blocks = sorted(k for k in out if k.startswith("placement"))
    canonical = json.JSONEncoder(sort_keys=True).encode  # json.dumps(obj, sort_keys=True): compared and hashed only
    same = {k: canonical(out[k]) == canonical(saved.get(k)) for k in blocks}
    row = {
        "wall_s": round(wall, 1),
        "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
        "peak_rss_gib": round(after.ru_maxrss / 2**20, 2),  # the whole process: the run loaded, then the report
        **summary(out),
        "blocks_equal_to_the_saved_run": same,
        # two rows with the same sha256 reported the same numbers, weights included, to the last bit
        "sha256": hashlib.sha256(canonical({k: out[k] for k in blocks}).encode()).hexdigest(),
    }
    command = shlex.join(
        ["python", "benchmarks/investigations/placement_report_cost.py", *(sys.argv[1:] if argv is None else argv)]
    )
    row = {**row, "command": command, "machine": _harness.machine(), "date": _harness.utc_now()}
    old = json.loads(Path(args.out).read_text(encoding="utf-8")) if Path(args.out).is_file() else {}
    rows = {**old.get("rows", {}), args.label: row}  # each row keeps its own command, machine and date
    result = _harness.result("placement_report_cost", command=command, run=args.run_dir.name, rows=rows)
    _harness.write_results(args.out, result)
    print(_harness.dumps(result), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
