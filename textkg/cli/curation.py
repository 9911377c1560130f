"""The curator's and interoperability commands: ``place`` and ``export``.

* ``textkg place RUN --terms FILE.tsv | --obo NEW.obo --out OUT.tsv [--top-k K] [--min-score S]
  [--method M] [--robot-template R.tsv] [--obo-fragment F.obo] [--annotations FILE.hpoa]`` (:mod:`textkg.place`)
* ``textkg export RUN --out DIR`` (:mod:`textkg.export`)
"""

from __future__ import annotations

import sys

from textkg.cli.flags import add_device_flag, number_flag


def add_place(sub) -> None:
    """``textkg place``."""
    pl_ = sub.add_parser(
        "place",
        help="suggest parents for new ontology terms (absent from the run's graph) by the run's chosen method",
    )
    pl_.add_argument("run_dir", help="a finished run on an ontology with an is_a relation (e.g. --dataset hpo)")
    src = pl_.add_mutually_exclusive_group(required=True)
    src.add_argument("--terms", help="TSV: id TAB name [TAB definition], one term per line")
    src.add_argument("--obo", help="OBO file; its [Term] stanzas not in the graph are placed")
    pl_.add_argument("--out", required=True, help="output TSV (term, rank, parent, parent_name, score, evidence, note)")
    pl_.add_argument("--top-k", type=number_flag("top_k"), default=5, help="suggested parents per term (default 5)")
    pl_.add_argument(
        "--min-score",
        type=number_flag("share"),
        help="keep only suggestions whose share is at least this, in [0, 1]: the suggestion's softmax share of the "
        "term's scores over every candidate (the TSV's share column; not a calibrated probability)",
    )
    pl_.add_argument(
        "--method",
        default="auto",
        help="auto (default: the method the run chose on its validation terms; parent-of-nearest for a "
        "transductive run), model, description-nn, parent-of-nearest or combined",
    )
    pl_.add_argument("--robot-template", help="also write the suggestions as a ROBOT template (TSV)")
    pl_.add_argument("--obo-fragment", help="also write them as OBO [Term] stanzas with is_a lines and their evidence")
    pl_.add_argument(
        "--annotations",
        metavar="FILE",
        help="phenotype.hpoa-shaped file of the new terms' annotations (database_id, qualifier, hpo_id): "
        "training terms sharing a new term's diseases vote for its parents (docs/k_shot.md)",
    )
    add_device_flag(pl_, "where the model and encoder run (not the run's train.device)")


def add_export(sub) -> None:
    """``textkg export``."""
    ex = sub.add_parser(
        "export",
        help="a run's entity and relation vectors and vocabulary, for PyKEEN and numpy (.npy, id<TAB>label .tsv.gz)",
    )
    ex.add_argument("run_dir", help="a finished run directory")
    ex.add_argument("--out", required=True, help="new or empty folder")
    add_device_flag(ex, "where the model computes the vectors")


def place(args) -> dict:
    from textkg.place import place_command

    summary = place_command(
        args.run_dir,
        terms_tsv=args.terms,
        obo=args.obo,
        out=args.out,
        top_k=args.top_k,
        device=args.device or "auto",
        min_score=args.min_score,
        method=args.method,
        robot_template=args.robot_template,
        obo_fragment=args.obo_fragment,
        annotations=getattr(args, "annotations", None),
    )
    written = [args.out, args.robot_template, args.obo_fragment]
    print(f"wrote {', '.join(w for w in written if w)}", file=sys.stderr)
    return summary


def export(args) -> dict:
    from textkg.export import export_run

    summary = export_run(args.run_dir, args.out, device=args.device or "auto")
    print(f"wrote {args.out}", file=sys.stderr)
    return summary


PARSERS = {"place": add_place, "export": add_export}
HANDLERS: dict = {("place", None): place, ("export", None): export}
