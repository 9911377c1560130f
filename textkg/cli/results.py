"""Reading a finished run: ``evaluate`` it again, ``predict`` links of a new entity, ``plot`` its curves.

* ``textkg evaluate RUN [--k-shot KS] [--link-rerank] [--placement]``
* ``textkg predict RUN --description TEXT | --batch FILE [--known-links FILE]``
* ``textkg plot DIR [DIR ...] [--out DIR]``
"""

from __future__ import annotations

from pathlib import Path

from textkg.cli.flags import add_device_flag, number_flag
from textkg.errors import ConfigError, DataError


def add_evaluate(sub) -> None:
    """``textkg evaluate``."""
    import argparse

    ev = sub.add_parser("evaluate", help="re-evaluate a run directory's best model")
    ev.add_argument("run_dir", help="a finished run directory (textkg train --out)")
    ev.add_argument(
        "--exclude-query",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="remove each query's own entity from its ranking (default: as the run was trained)",
    )
    add_device_flag(ev, "where the model is evaluated (not the run's train.device)")
    ev.add_argument(
        "--k-shot",
        metavar="KS",
        help="also rank new entities' statements with k of them known, e.g. 0,1,3,5,10 (docs/k_shot.md)",
    )
    ev.add_argument(
        "--link-rerank",
        action="store_true",
        help="also fit the link re-ranker on validation, rank the test split with and without it, and save "
        "the choice in the run's metrics.json for predict (inductive runs with the neighbour vote)",
    )
    ev.add_argument(
        "--placement",
        action="store_true",
        help="also run the placement report (new terms' parents) again with this version's code and save it in "
        "the run's metrics.json for place and predict: a run trained before a placement change gets it without "
        "retraining (inductive runs of an ontology with is_a)",
    )


def add_predict(sub) -> None:
    """``textkg predict``."""
    pr = sub.add_parser(
        "predict",
        help="zero-shot links for a brand-new entity, scored as the run's evaluation chose (the output's "
        "scoring says how); a new ontology term's parents (is_a tails) as textkg place ranks them",
    )
    pr.add_argument("run_dir", help="a finished run directory or a release bundle")
    pr.add_argument(
        "--dataset",
        metavar="PATH",
        help="your copy of the run's dataset, checked against its graph.json; a release bundle needs it unless it "
        "names a registered dataset (textkg never opens a path a bundle names; default: the run's own)",
    )
    pr.add_argument("--description", "--text", help="the new entity's description")
    pr.add_argument("--name", help="the new entity's name")
    pr.add_argument("--relation", help="only this relation (default: all)")
    pr.add_argument(
        "--direction",
        choices=["head", "tail"],
        help="tail: predict tails, (new, relation, ?), the new entity is the head; head: predict heads, "
        "(?, relation, new), the new entity is the tail. For an ontology's is_a (child is_a parent), "
        "--direction tail gives the new term's parents, ranked as textkg place ranks them; is_a heads (its "
        "children) are not ranked (default: both)",
    )
    pr.add_argument(
        "--top-k", type=number_flag("top_k"), default=10, help="links per (relation, direction) (default: 10)"
    )
    pr.add_argument(
        "--no-vote",
        action="store_true",
        help="score with the model alone, even where the run's evaluation chose the neighbour vote",
    )
    pr.add_argument(
        "--include-held-out",
        action="store_true",
        help="rank every entity of the graph, the run's held-out (validation/test) entities and one named like "
        "the new entity included, with the link scorer, as the link-prediction evaluation ranks them (default: "
        "training entities only, never the new entity's own)",
    )
    pr.add_argument("--batch", metavar="FILE", help="TSV of new entities: name<TAB>description per line")
    pr.add_argument(
        "--known-links",
        metavar="FILE",
        help="TSV of links the new entity already has: relation<TAB>entity id<TAB>direction (tail: "
        "(new, relation, entity); head: (entity, relation, new)); with --batch, each line starts with the batch "
        "row's name: name<TAB>relation<TAB>entity id<TAB>direction; used without retraining, as the run chose on "
        "validation (docs/k_shot.md); a file without a link exits 2",
    )
    add_device_flag(pr, "where the model and encoder run (not the run's train.device)")


def add_plot(sub) -> None:
    """``textkg plot``."""
    pl = sub.add_parser("plot", help="PNG plots of run / sweep directories into DIR/plots/")
    pl.add_argument("run_dirs", nargs="+", metavar="DIR", help="run or sweep directories")
    pl.add_argument("--out", help="where the comparison plots of several DIRs go (default: the first DIR's plots/)")


def evaluate(args) -> dict:
    from textkg.pipeline.report import evaluate_run

    k_shot = None
    if getattr(args, "k_shot", None):
        from textkg.evaluation.k_shot import parse_ks

        k_shot = parse_ks(args.k_shot, field="--k-shot")
    return evaluate_run(
        Path(args.run_dir),
        exclude_query=args.exclude_query,
        device=args.device or "auto",
        k_shot=k_shot,
        link_rerank=bool(getattr(args, "link_rerank", False)),
        placement=bool(getattr(args, "placement", False)),
    )


def predict(args) -> dict:
    from textkg.predict import load_predictor

    known_links = getattr(args, "known_links", None)
    if known_links:  # an empty or comments-only file exits 2 before the run is loaded
        from textkg.data.known_links import link_lines

        link_lines(known_links)
    if args.batch:  # the files' own errors before the run is loaded
        entities = _read_batch_file(args.batch)
        names = [n for n, _ in entities]
        if known_links and len(set(names)) < len(names):
            raise DataError("with --known-links, each batch row needs its own name (first column)", file=args.batch)
    predictor = load_predictor(args.run_dir, device=args.device or "auto", dataset=getattr(args, "dataset", None))
    options = {
        "relation": args.relation,
        "direction": args.direction,
        "top_k": args.top_k,
        "vote": not args.no_vote,
        "include_held_out": bool(getattr(args, "include_held_out", False)),
    }
    if args.batch:
        links: dict = {}
        if known_links:  # name, relation, entity, direction per line (textkg.data.known_links)
            from textkg.data.known_links import read_known_links_by_name

            kg = predictor.kg
            links = read_known_links_by_name(known_links, names=names, entities=kg.entities, relations=kg.relations)
        by_row = {i: links[n] for i, (n, _) in enumerate(entities) if n in links}
        return {"results": predictor.predict_batch(entities, known_links=by_row, **options)}
    if not args.description:
        raise ConfigError("give --description TEXT (or --batch FILE)", field="description")
    return predictor.predict(
        description=args.description,
        name=args.name,
        **options,
        **({"known_links": known_links} if known_links else {}),
    )


def _read_batch_file(path: str) -> list[tuple[str, str]]:
    from textkg.data.io import read_text

    rows = []
    text = read_text(path)  # bounded in size and line length like every data file (docs/security.md)
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise DataError(
                f"expected 2 tab-separated columns (name, description), got {len(parts)}", file=path, line=i
            )
        if not parts[1].strip():
            raise DataError("empty description", file=path, line=i, field="description")
        rows.append((parts[0], parts[1]))
    return rows


def plot(args) -> dict:
    from textkg.report import require_plots

    require_plots("textkg plot")
    from textkg.report import write_comparison_plots, write_run_plots

    dirs = [Path(d) for d in args.run_dirs]
    for d in dirs:
        if not d.is_dir():
            raise ConfigError("no such directory", file=d)
    written = {str(d): [str(p) for p in write_run_plots(d)] for d in dirs}
    if len(dirs) > 1:
        out = Path(args.out) if args.out else dirs[0] / "plots"
        written["comparison"] = [str(p) for p in write_comparison_plots(dirs, out)]
    if not any(written.values()):
        raise ConfigError("nothing to plot: no metrics.json, audit.json or sweep.json", file=dirs[0])
    return {"plots": written}


PARSERS = {"evaluate": add_evaluate, "predict": add_predict, "plot": add_plot}
HANDLERS: dict = {("evaluate", None): evaluate, ("predict", None): predict, ("plot", None): plot}
