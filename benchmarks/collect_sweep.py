"""Collect a sweep directory's runs (metrics + audit) into one JSON, as benchmarks/results/privacy_sweep_*.json."""

# usage: python benchmarks/collect_sweep.py SWEEP_DIR OUT.json "COMMAND"
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

src, out, command = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
rows = []
for r in ["none", "public-only", "full-eps1", "full-eps4", "confidential-eps1", "confidential-eps4"]:
    d = src / r
    if not (d / "metrics.json").exists():
        continue
    m = json.loads((d / "metrics.json").read_text())
    a = json.loads((d / "audit.json").read_text()) if (d / "audit.json").exists() else None
    if a is not None:
        a.pop("roc", None)
    rows.append(
        {
            "run": r,
            "privacy": m["privacy"],
            "train": {k: m["train"][k] for k in ("epochs", "steps", "seconds")},
            "test": {k: v for k, v in m["test"].items() if k not in ("subsets", "head", "tail")},
            "test_subsets_mrr": {k: v["mrr"] for k, v in m["test"]["subsets"].items()},
            "audit": a,
        }
    )
# "command" is the sweep's own command (the runs'), as before the harness
_harness.write_results(out, _harness.result("collect_sweep", command=command, source=str(src), rows=rows))
print(out, len(rows))
