"""Train and evaluate a textkg preset on inductive FB15k-237 (BLP protocol).

Usage::

    python benchmarks/reproduce_fb15k237.py --data PATH/fb15k237 --preset blp-transe [--epochs N] \\
        [--set model.encoder_kwargs.pooling=\\"mean\\" --set train.weight_decay=1e-6 ...] \\
        [--tag NAME] [--out benchmarks/results/reproduce_fb15k237.json] [--run-dir DIR]

The run goes through the library's own pipeline (:func:`textkg.pipeline.job.run`) on the BLP-format
directory ``--data`` (never assumed) with the BLP candidate protocol, and appends one row to ``--out`` (a
JSON list): the preset, every setting, test and valid metrics, the seconds of training and in all, the
machine and the published numbers for that preset. Each flag and row: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "reproduce_fb15k237.json"

#: Published numbers on inductive FB15k-237 (filtered, BLP protocol); see the
#: data README. Keys: model name as published.
PUBLISHED = {
    "GloVe-BOW": {"mrr": 0.172, "hits@1": 0.099, "hits@3": 0.188, "hits@10": 0.316, "source": "Daza et al. 2021"},
    "BE-BOW": {"mrr": 0.173, "hits@1": 0.103, "hits@3": 0.184, "hits@10": 0.316, "source": "Daza et al. 2021"},
    "GloVe-DKRL": {"mrr": 0.112, "hits@1": 0.062, "hits@3": 0.111, "hits@10": 0.211, "source": "Daza et al. 2021"},
    "BE-DKRL": {"mrr": 0.144, "hits@1": 0.084, "hits@3": 0.151, "hits@10": 0.263, "source": "Daza et al. 2021"},
    "BLP-TransE": {"mrr": 0.195, "hits@1": 0.113, "hits@3": 0.213, "hits@10": 0.363, "source": "Daza et al. 2021"},
    "BLP-DistMult": {"mrr": 0.146, "hits@1": 0.076, "hits@3": 0.156, "hits@10": 0.286, "source": "Daza et al. 2021"},
    "BLP-ComplEx": {"mrr": 0.148, "hits@1": 0.081, "hits@3": 0.154, "hits@10": 0.283, "source": "Daza et al. 2021"},
    "StATIK": {"mrr": 0.224, "hits@1": 0.143, "hits@3": 0.248, "hits@10": 0.381, "source": "Markowitz et al. 2022"},
    "DKRL-BERT": {"mrr": 0.082, "hits@1": 0.046, "hits@3": 0.080, "hits@10": 0.145, "source": "seed paper, Table 1"},
    "DKRL-Flair": {"mrr": 0.098, "hits@1": 0.052, "hits@3": 0.096, "hits@10": 0.184, "source": "seed paper, Table 1"},
    "Torchcoder-AEC": {
        "mrr": 0.013,
        "hits@1": 0.0004,
        "hits@3": 0.0019,
        "hits@10": 0.0054,
        "source": "seed paper, Table 1",
    },
}

#: Which published rows each preset is compared with (the first is its own paper row).
REFERENCES = {
    "blp-transe": ["BLP-TransE", "StATIK"],
    "blp-distmult": ["BLP-DistMult"],
    "blp-complex": ["BLP-ComplEx"],
    "glove-bow": ["GloVe-BOW"],
    "dkrl-bert": ["DKRL-BERT", "BE-DKRL"],
    "dkrl-flair": ["DKRL-Flair"],
    "torchcoder-aec": ["Torchcoder-AEC"],
    "cpu-best": ["BLP-TransE", "StATIK"],
    "cpu-fused": ["BLP-TransE", "StATIK"],
}
DEFAULT_REFERENCES = ["BLP-TransE", "StATIK"]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="BLP-format FB15k-237 directory")
    p.add_argument("--inductive-dir", default="ind_rebuilt_seed0")
    p.add_argument(
        "--description", default="first-sentence", help="short (names), long, or first-sentence (StAR, default)"
    )
    p.add_argument("--preset", required=True, help="model preset (textkg models list)")
    p.add_argument("--epochs", type=int, help="default: the preset's, else 3")
    p.add_argument("--lr", type=float)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--loss", choices=["margin", "softplus", "softmax"])
    p.add_argument(
        "--negatives",
        choices=["sampled", "all"],
        help="all = 1-vs-all against every training entity (with --loss softmax)",
    )
    p.add_argument("--temperature", type=float, help="softmax loss temperature")
    p.add_argument("--margin", type=float)
    p.add_argument("--dim", type=int)
    p.add_argument("--max-minutes", type=float)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="any other override, e.g. model.encoder_kwargs.pooling=mean or "
        "train.weight_decay=1e-6 (VALUE is parsed as JSON when possible)",
    )
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--tag", default=None, help="free-text label stored with the row")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="JSON list the row is appended to")
    p.add_argument("--run-dir", default=None, help="run directory (default: a new temporary one)")
    p.add_argument("--progress", action="store_true")
    return p.parse_args(argv)


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _set_nested(d: dict, dotted: str, value) -> None:
    keys = dotted.split(".")
    for k in keys[:-1]:
        d = d.setdefault(k, {})
        if not isinstance(d, dict):
            raise SystemExit(f"--set {dotted}: {k} is not a mapping")
    d[keys[-1]] = value


def build_config(args):
    from textkg.models import get_preset
    from textkg.models.presets import preset_train_defaults
    from textkg.training.config import RunConfig

    cfg = {
        "data": {
            "dataset": str(Path(args.data).resolve()),
            "split": "inductive",
            "inductive_dir": args.inductive_dir,
            "description": args.description,
        },
        "model_name": args.preset,
        "model": get_preset(args.preset).to_dict(),
        "train": {"epochs": 3, "seed": args.seed, "candidates": "blp"},  # validation: 2,000 triples (the default)
        "privacy": {"mode": "none"},
    }
    cfg["train"].update(preset_train_defaults(args.preset))  # then the flags below override
    flags = {
        "epochs": ("train", "epochs"),  # after the preset's defaults: --epochs wins over them
        "lr": ("train", "lr"),
        "batch_size": ("train", "batch_size"),
        "loss": ("train", "loss"),
        "margin": ("train", "margin"),
        "max_minutes": ("train", "max_minutes"),
        "negatives": ("train", "negatives"),
        "temperature": ("train", "temperature"),
        "dim": ("model", "dim"),
    }
    for flag, (section, key) in flags.items():
        value = getattr(args, flag)
        if value is not None:
            cfg[section][key] = value
    for item in args.set:
        dotted, sep, text = item.partition("=")
        if not sep or "." not in dotted:
            raise SystemExit(f"--set expects SECTION.KEY=VALUE, got {item!r}")
        _set_nested(cfg, dotted, _value(text))
    return RunConfig.from_dict(cfg, source="reproduce_fb15k237 arguments")


def _metrics(d: dict | None) -> dict | None:
    if d is None:
        return None
    keys = ("mrr", "mr", "hits@1", "hits@3", "hits@10", "num_triples")
    return {k: d[k] for k in keys if k in d}


def append_row(path: Path, row: dict) -> None:
    rows = json.loads(path.read_text()) if path.is_file() else []
    rows.append(row)
    _harness.write_results(path, rows, indent=2)


def main(argv=None) -> dict:
    args = parse_args(argv)
    _harness.set_threads(args.threads)
    from textkg.pipeline.job import run

    cfg = build_config(args)
    run_dir = Path(args.run_dir) if args.run_dir else Path(tempfile.mkdtemp(prefix="reproduce_fb15k237-"))
    started = time.perf_counter()
    metrics = run(cfg, run_dir, progress=args.progress)
    total = time.perf_counter() - started
    train = metrics["train"]
    refs = REFERENCES.get(args.preset, DEFAULT_REFERENCES)
    row = {
        "benchmark": "reproduce_fb15k237",
        "tag": args.tag,
        "preset": args.preset,
        "settings": cfg.to_dict(),
        "epochs_run": train["epochs"],
        "best_epoch": train["best_epoch"],
        "stopped": train["stopped"],
        "train_seconds": round(train["seconds"], 1),
        "train_minutes": round(train["seconds"] / 60, 2),
        "seconds_per_epoch": round(train["seconds"] / max(1, train["epochs"]), 1),
        "total_seconds": round(total, 1),
        "num_parameters": metrics["model"].get("num_parameters"),
        "test": _metrics(metrics["test"]),
        "test_subsets": {k: _metrics(v) for k, v in ((metrics["test"] or {}).get("subsets") or {}).items()},
        "valid": _metrics(metrics["valid"]),
        "history": train["history"],
        "privacy": metrics.get("privacy"),  # the run's privacy block, as metrics.json has it (None: not private)
        "fusion_weights": metrics["model"].get("fusion_weights"),
        "published": {name: PUBLISHED[name] for name in refs},
        "run_dir": str(run_dir),
        "machine": _harness.machine(load_at_end_key=True),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    append_row(Path(args.out), row)
    shown = ("preset", "tag", "train_minutes", "total_seconds", "test", "published")
    print(json.dumps({**{k: row[k] for k in shown}, "valid_mrr": (row["valid"] or {}).get("mrr")}, indent=1))
    return row


if __name__ == "__main__":
    main()
