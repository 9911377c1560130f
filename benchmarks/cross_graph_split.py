"""Split a BLP-format graph into two graphs by relation domain, for ``benchmarks/cross_graph.py``.

Usage::

    python benchmarks/cross_graph_split.py --data ../shared/data/fb15k237 --out runs/fb-split \\
        --domains award,film,tv,media_common,influence,celebrities [--dim 32 --epochs 3]

A relation's domain is the first component of its name (``/film/actor/...`` → ``film``). Graph
``a`` keeps the train/dev/test statements whose relation is in ``--domains``, graph ``b`` the
others; both keep every entity text. The graphs overlap on the entities that occur in both. Writes
``OUT/a``, ``OUT/b``, ``OUT/holders.yaml`` (TransE, transductive, the given dim and epochs) and
``OUT/split.json`` (the harness's record: command, machine, statements kept per graph and file).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--domains", required=True, help="comma-separated relation domains of graph a")
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=1024)
    args = ap.parse_args(argv)
    data, out = Path(args.data), Path(args.out)
    domains = set(args.domains.split(","))
    counts: dict[str, dict[str, int]] = {}
    for name, keep in (("a", True), ("b", False)):
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        for f in ("entity2text.txt", "relation2text.txt"):
            shutil.copy(data / f, d / f)
        for f in ("train.tsv", "dev.tsv", "test.tsv"):
            lines = (data / f).read_text().splitlines()
            kept = [x for x in lines if (x.split("\t")[1].split("/")[1] in domains) == keep]
            (d / f).write_text("\n".join(kept) + "\n")
            counts.setdefault(name, {})[f] = len(kept)
    holder = {
        "model": "transe",
        "data": {"split": "transductive"},
        "model_overrides": {"dim": args.dim},
        "train": {"epochs": args.epochs, "batch_size": args.batch_size, "lr": 0.01, "valid_max_triples": 2000},
    }
    config = {
        "exchange": {"rounds": 1, "target_epsilon": 4.0, "fine_tune_epochs": 1, "valid_max_triples": 2000},
        "holders": [
            {"name": "domains-a", "dataset": str(out / "a"), "seed": 1, **holder},
            {"name": "domains-b", "dataset": str(out / "b"), "seed": 2, **holder},
        ],
    }
    (out / "holders.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    # how the split was made: the command, the machine and the statements each graph kept
    record = _harness.result(
        "cross_graph_split",
        command=_harness.command_line(argv, "cross_graph_split.py"),
        data=str(data),
        domains=sorted(domains),
        statements=counts,
    )
    _harness.write_results(out / "split.json", record)
    print(out / "holders.yaml")


if __name__ == "__main__":
    main()
