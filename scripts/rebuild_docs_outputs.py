"""Rebuild every generated documentation output from the current code, in one command.

    PYTHONPATH=. python scripts/rebuild_docs_outputs.py                  # cli.md, frontier_hpo.png, notebooks
    PYTHONPATH=. python scripts/rebuild_docs_outputs.py --no-notebooks   # the fast part (seconds)
    PYTHONPATH=. python scripts/rebuild_docs_outputs.py --notebooks 02_privacy_utility

1. ``docs/cli.md``: the command-line reference, read back from the parser (:mod:`textkg.cli.reference`).
2. ``docs/frontier_hpo.png``: the privacy–utility frontier of the full ``hpo`` sweep, drawn by
   :func:`textkg.report.plots.plot_frontier` from a sweep's rows (``--frontier-sweep``: a
   ``benchmarks/results/privacy_sweep_*.json`` collected by ``python -m benchmarks collect-sweep``, or a
   sweep folder's ``sweep.json``), each run labelled as the current rules label it: a block that
   released the exact private count (``num_private_triples``; runs from before declared sizes) is a
   ``simulation``, drawn hollow and dotted, whatever label it was given on its day.
3. ``docs/notebooks/*.ipynb``: every notebook executed with nbclient (``notebooks/publish.py``; needs
   ``pip install -e '.[notebooks]'``; notebook 02 trains seven runs, about 10 minutes on two cores).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SWEEP = ROOT / "benchmarks" / "results" / "privacy_sweep_hpo_release_rules.json"


def label_today(privacy: dict | None) -> str | None:
    """The label the current rules give a recorded privacy block (``None``: a non-private run)."""
    if not privacy:
        return None
    if privacy.get("guarantee") == "dp" and privacy.get("num_private_triples") is None:
        return "dp"
    return "simulation"


def frontier_rows(path: Path) -> list[dict]:
    """``plot_frontier`` rows (mode, epsilon, guarantee, mrr) of a collected sweep JSON or a ``sweep.json``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for row in data["rows"]:
        if "privacy" in row:  # python -m benchmarks collect-sweep: the run's privacy block and test metrics
            privacy, mrr = row["privacy"], (row.get("test") or {}).get("mrr")
            mode = (privacy or {}).get("mode") or row["run"].split("-")[0]
        else:  # a sweep folder's sweep.json (labelled by the code that wrote it)
            guarantee = row.get("guarantee")
            privacy = None if guarantee is None else {"guarantee": guarantee}
            mode, mrr = row["mode"], row.get("mrr")
        eps = None if not privacy else privacy.get("epsilon", row.get("epsilon"))
        rows.append({"mode": mode, "epsilon": eps, "guarantee": label_today(privacy), "mrr": mrr})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frontier-sweep", type=Path, default=DEFAULT_SWEEP, help="sweep rows for frontier_hpo.png")
    parser.add_argument("--no-notebooks", action="store_true", help="skip executing the notebooks (minutes)")
    parser.add_argument("--notebooks", nargs="*", default=[], metavar="NAME", help="only these notebooks")
    args = parser.parse_args(argv)

    from textkg.cli.reference import render
    from textkg.report.plots import plot_frontier

    (ROOT / "docs" / "cli.md").write_text(render(), encoding="utf-8")
    print("wrote docs/cli.md", file=sys.stderr)
    plot_frontier(frontier_rows(args.frontier_sweep), ROOT / "docs" / "frontier_hpo.png")
    print(f"wrote docs/frontier_hpo.png from {args.frontier_sweep}", file=sys.stderr)
    if not args.no_notebooks:
        sys.path.insert(0, str(ROOT / "notebooks"))
        import publish

        publish.main(args.notebooks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
