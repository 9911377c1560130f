"""``textkg`` command line: text-augmented, inductive knowledge-graph embeddings, with or without DP.

User errors (:class:`textkg.errors.TextKGError`) are printed as one line
``error: <file:line, field 'x': message>`` on stderr with exit status 2 — no
traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from textkg.cli.flags import _add_device_flag, _add_train_flags
from textkg.errors import TextKGError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="textkg", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="store_true", help="print the version")
    sub = parser.add_subparsers(dest="command")

    data = sub.add_parser("data", help="dataset utilities").add_subparsers(dest="data_command")
    stats = data.add_parser("stats", help="entity/relation/triple counts as JSON")
    stats.add_argument(
        "dataset", help="any --dataset source: a name, a BLP directory, an OBO/OWL/RDF file, pykeen:PATH"
    )
    stats.add_argument(
        "--split", choices=["transductive", "inductive"], help="also count the split's parts (default: none)"
    )
    stats.add_argument("--inductive-dir", help="sub-directory with ind-*.tsv (BLP-format datasets)")

    tr = sub.add_parser("train", help="train and evaluate a model")
    _add_train_flags(tr)
    tr.add_argument(
        "--nproc",
        type=int,
        help="data-parallel training in N processes: runs this command under torchrun --standalone "
        "--nproc-per-node N; private runs keep one process's mechanism and ledger (docs/scaling.md)",
    )

    ev = sub.add_parser("evaluate", help="re-evaluate a run directory's best model")
    ev.add_argument("run_dir", help="a finished run directory (textkg train --out)")
    ev.add_argument(
        "--exclude-query",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="remove each query's own entity from its ranking (default: as the run was trained)",
    )
    _add_device_flag(ev, "where the model is evaluated (not the run's train.device)")
    ev.add_argument(
        "--k-shot",
        metavar="KS",
        help="also rank new entities' statements with k of them known, e.g. 0,1,3,5,10 (docs/k_shot.md)",
    )

    pr = sub.add_parser(
        "predict",
        help="zero-shot links for a brand-new entity, scored as the run's evaluation chose (the output's "
        "scoring says how); parents of new ontology terms: textkg place",
    )
    pr.add_argument("run_dir", help="a finished run directory or a release bundle")
    pr.add_argument("--description", "--text", help="the new entity's description")
    pr.add_argument("--name", help="the new entity's name")
    pr.add_argument("--relation", help="only this relation (default: all)")
    pr.add_argument(
        "--direction",
        choices=["head", "tail"],
        help="tail: predict tails, (new, relation, ?), the new entity is the head; head: predict heads, "
        "(?, relation, new), the new entity is the tail. For an ontology's is_a (child is_a parent), "
        "--direction tail gives the new term's parents (default: both)",
    )
    pr.add_argument("--top-k", type=int, default=10, help="links per (relation, direction) (default: 10)")
    pr.add_argument(
        "--no-vote",
        action="store_true",
        help="score with the model alone, even where the run's evaluation chose the neighbour vote",
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
    _add_device_flag(pr, "where the model and encoder run (not the run's train.device)")

    models = sub.add_parser("models", help="model presets").add_subparsers(dest="models_command")
    models.add_parser("list", help="list model presets")

    charlm = sub.add_parser("charlm", help="flair character language models").add_subparsers(dest="charlm_command")
    ct = charlm.add_parser("train", help="train a char LM on a dataset's descriptions")
    ct.add_argument("--dataset", required=True, help="any --dataset source of textkg train")
    ct.add_argument(
        "--description",
        help="BLP-format datasets: which description file to train on "
        "(short, long, first-sentence; as for textkg train)",
    )
    ct.add_argument(
        "--direction", choices=["forward", "backward"], required=True, help="which way the LM reads the text"
    )
    ct.add_argument("--out", required=True, help="new directory for the LM and its metrics.json")
    ct.add_argument("--hidden-size", type=int, default=256, help="LSTM hidden units (default: 256)")
    ct.add_argument("--max-epochs", type=int, default=10, help="passes over the descriptions (default: 10)")
    ct.add_argument("--max-minutes", type=float, default=15.0, help="wall-time limit in minutes (default: 15)")
    ct.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")

    enc = sub.add_parser("encoders", help="text encoders").add_subparsers(dest="encoders_command")
    enc.add_parser("list", help="list registered encoders")
    ad = enc.add_parser(
        "adapt",
        help="fine-tune the packaged MiniLM on the ontology's own (name, definition/synonym) pairs of "
        "training terms (SapBERT-style); prints the folder for --encoder-model",
    )
    ad.add_argument("--dataset", required=True, help="an ontology --dataset source (e.g. hpo)")
    ad.add_argument(
        "--split",
        default="inductive",
        choices=["transductive", "inductive"],
        help="whose training terms give the pairs; inductive keeps held-out terms out (default: inductive)",
    )
    ad.add_argument("--epochs", type=int, default=1, help="passes over the pairs (default: 1)")
    ad.add_argument("--batch-size", type=int, default=64, help="pairs per step (default: 64)")
    ad.add_argument("--lr", type=float, default=2e-5, help="AdamW learning rate (default: 2e-5)")
    ad.add_argument("--max-minutes", type=float, default=15.0, help="wall-time limit in minutes (default: 15)")
    ad.add_argument("--max-pairs", type=int, default=None, help="use at most this many pairs (default: all)")
    ad.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    pa = enc.add_parser("pretrain-aec", help="pre-train the LSTM autoencoder on a dataset's descriptions")
    pa.add_argument("--dataset", required=True, help="any --dataset source of textkg train")
    pa.add_argument("--encoder", default="glove-bow", help="token-level encoder feeding the autoencoder")
    pa.add_argument("--code-dim", type=int, default=128, help="size of the autoencoder's code (default: 128)")
    pa.add_argument("--epochs", type=int, default=5, help="passes over the descriptions (default: 5)")
    pa.add_argument("--out", required=True, help="new directory for lstm_ae.pt (textkg train --autoencoder)")
    pa.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")

    from textkg.cli import extra_commands

    extra_commands.add_parsers(sub)
    return parser


def _print_json(obj) -> None:
    from textkg.training.checkpoint import strict_json

    json.dump(strict_json(obj), sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def dispatch(args) -> int:
    from textkg.cli import commands

    if args.version:
        from textkg._version import __version__

        print(__version__)
        return 0
    handlers = {
        ("data", "stats"): commands.data_stats,
        ("train", None): commands.train,
        ("evaluate", None): commands.evaluate,
        ("predict", None): commands.predict,
        ("models", "list"): commands.models_list,
        ("charlm", "train"): commands.charlm_train,
        ("encoders", "list"): commands.encoders_list,
        ("encoders", "pretrain-aec"): commands.pretrain_aec,
        ("encoders", "adapt"): commands.adapt_encoder,
    }
    from textkg.cli import extra_commands

    handlers.update(extra_commands.HANDLERS)
    sub = getattr(args, f"{args.command}_command", None) if args.command else None
    handler = handlers.get((args.command, sub))
    if handler is None:
        build_parser().print_help(sys.stderr)
        return 2
    result = handler(args)
    if result is not None:
        _print_json(result)
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # textkg train --nproc re-runs it under torchrun
    try:
        return dispatch(args)
    except TextKGError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
