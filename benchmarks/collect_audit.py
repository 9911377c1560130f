"""Membership-inference audits of FB15k-237 runs: one markdown row per (run, attack).

Usage::

    python benchmarks/collect_audit.py benchmarks/results/fb15k237_audit [--out benchmarks/results/fb15k237_audit.json]

Reads the ``textkg audit RUN --attack A --out DIR/RUN-A.json`` results in the directory and
prints AUC, TPR at FPR 1 % and 0.1 %, the empirical ε lower bound and the accounted ε.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root")
    p.add_argument("--out", default="benchmarks/results/fb15k237_audit.json")
    args = p.parse_args()
    rows = []
    for f in sorted(Path(args.root).glob("*.json")):
        d = json.loads(f.read_text())
        d.pop("roc", None)
        rows.append({"file": f.name, **d})
    _harness.write_results(args.out, _harness.result("collect_audit", source=str(args.root), audits=rows))
    print(
        "| run | attack | members / non-members | AUC | TPR @ FPR 1% | TPR @ FPR 0.1% "
        "| ε lower bound (95%) | accounted ε |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        eps = r["accountant_epsilon"]
        print(
            f"| `{Path(r['run_dir']).name}` | {r['attack']} | {r['num_members']} / {r['num_non_members']} | "
            f"{r['roc_auc']:.3f} | {r['tpr_at_fpr']['0.01']:.3f} | {r['tpr_at_fpr']['0.001']:.3f} | "
            f"{r['epsilon_lower_bound']['epsilon']:.2f} | {'—' if eps is None else f'{eps:.2f}'} |"
        )


if __name__ == "__main__":
    main()
