"""``textkg`` command line: data, train, evaluate, predict, charlm, encoders, audit, sweep, plot, account, calibrate.

User errors (:class:`textkg.errors.TextKGError`) are printed as one line
``error: <file:line, field 'x': message>`` on stderr with exit status 2 — no
traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from textkg.errors import TextKGError


def _add_device_flag(p: argparse.ArgumentParser, what: str) -> None:
    # validated by textkg.devices (importing torch here would slow every call)
    p.add_argument(
        "--device",
        metavar="{auto,cpu,cuda,cuda:N,mps}",
        help=f"{what}: auto (default: cuda if available, else mps, else cpu), cpu, cuda, cuda:N or mps; "
        "a device this machine lacks is an error (docs/scaling.md, Devices)",
    )


def _add_train_flags(p: argparse.ArgumentParser) -> None:
    # Every flag defaults to None so that the config file / preset default wins.
    p.add_argument("--config", help="YAML/JSON file filling the same config as the flags")
    p.add_argument(
        "--dataset",
        help="hpo, hpo-small, a BLP-format directory, or a file: FILE.obo, FILE.owl, FILE.ttl|.nt|.rdf, "
        "obo:/owl:/rdf:/pykeen:PATH, optionally #types=TYPE=ROOT,... (docs/datasets.md)",
    )
    p.add_argument("--split", choices=["transductive", "inductive"])
    p.add_argument("--split-seed", type=int)
    p.add_argument("--inductive-dir", help="sub-directory with ind-*.tsv (BLP-format datasets)")
    # validated by the loader against its own table (importing it here would load torch on every call)
    p.add_argument(
        "--description",
        help="description file of a BLP-format directory: auto (default: long, else "
        "first-sentence, else short, whichever the directory has), short "
        "(entity2text.txt), long (entity2textlong.txt), first-sentence "
        "(entity2text_firstsentence_StAR.txt)",
    )
    p.add_argument("--model", help="model preset (textkg models list)")
    p.add_argument("--encoder", help="override the preset's text encoder")
    p.add_argument(
        "--encoder-model",
        help="local transformer folder for the preset's bert / sentence-transformers encoder "
        "(e.g. the output of textkg encoders adapt)",
    )
    p.add_argument("--fusion", help="override the preset's fusion")
    p.add_argument("--dim", type=int)
    p.add_argument("--structural-dropout", type=float)
    p.add_argument(
        "--autoencoder",
        metavar="FILE",
        help="lstm-ae models (torchcoder-aec): use this pre-trained autoencoder "
        "(textkg encoders pretrain-aec) instead of pre-training one in the run",
    )
    p.add_argument("--epochs", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument(
        "--lr-schedule",
        choices=["constant", "cosine"],
        help="cosine: decay the rate to 0 over --epochs (default constant)",
    )
    p.add_argument(
        "--optimizer",
        choices=["adam", "lazy-adam"],
        help="lazy-adam: update only the entity rows a batch touched (large graphs; non-private, sampled negatives)",
    )
    p.add_argument("--num-negatives", type=int)
    p.add_argument("--loss", choices=["margin", "softplus", "softmax"])
    p.add_argument(
        "--negatives",
        choices=["sampled", "all"],
        help="sampled: --num-negatives corruptions per triple; all: every training entity "
        "(1-vs-all, needs --loss softmax; with --privacy only for TransE-L2 models over pooled "
        "features, e.g. cpu-fused, and without --pool-size)",
    )
    p.add_argument(
        "--pool-size",
        type=int,
        help="--negatives all: draw this many candidate entities per "
        "step instead of every training entity (sampled softmax; 0 = all)",
    )
    p.add_argument("--margin", type=float)
    p.add_argument("--temperature", type=float, help="softmax loss: divide scores by this")
    p.add_argument("--seed", type=int)
    p.add_argument("--eval-every", type=int)
    p.add_argument("--valid-max-triples", type=int)
    p.add_argument("--candidates", choices=["blp", "all", "split"])
    p.add_argument(
        "--exclude-query",
        action="store_true",
        default=None,
        help="evaluation: remove each query's own entity from its ranking (irreflexive relations)",
    )
    p.add_argument(
        "--neighbour-vote",
        choices=["auto", "on", "off"],
        default=None,
        help="report the description-kNN vote for new entities, alone and combined with the model "
        "(test.neighbour_vote; auto: inductive splits with descriptions, except graphs with a placement task)",
    )
    p.add_argument("--max-minutes", type=float)
    p.add_argument("--checkpoint-every", type=int)
    p.add_argument(
        "--init-from",
        metavar="RUN",
        help="initialise the model from RUN's best_model.pt (same graph and model); under --privacy "
        "confidential RUN must be a --privacy public-only run with the same confidential statements",
    )
    p.add_argument("--audit-candidates", type=int, help="hold out half of N candidate statements as audit non-members")
    p.add_argument(
        "--privacy",
        choices=["none", "full", "confidential", "public-only"],
        help="none; full (every training statement private); confidential (DP on the confidential "
        "statements only); public-only (drop the confidential statements: the baseline, epsilon 0)",
    )
    p.add_argument("--mechanism", choices=["dp-sgd", "simulation"])
    p.add_argument("--noise-multiplier", type=float)
    p.add_argument("--target-epsilon", type=float)
    p.add_argument("--delta", type=float, help="delta of the guarantee (default 1/(10 N), N = --private-size)")
    p.add_argument(
        "--private-size",
        type=int,
        metavar="N",
        help="a PUBLIC size of the private set (an estimate or a round bound you may publish): q = B/N, "
        "round(N/B) steps per epoch. The exact count is private; without this or --sample-rate the run "
        "is labelled simulation (docs/privacy.md)",
    )
    p.add_argument(
        "--sample-rate", type=float, metavar="Q", help="a PUBLIC Poisson sampling rate q (instead of --private-size)"
    )
    p.add_argument("--max-grad-norm", type=float)
    p.add_argument("--confidential-relations", help="comma-separated relation ids")
    p.add_argument("--confidential-fraction", type=float)
    p.add_argument("--orders", help="RDP orders, e.g. 2-64 (default: 1.1..10.9, 11..63, 128..1024)")
    p.add_argument(
        "--accountant",
        choices=["rdp", "pld"],
        help="what calibrates sigma and gives the claimed epsilon: rdp (default) or pld "
        "(dp-accounting's privacy-loss distributions: tighter, slower); both are reported",
    )
    p.add_argument(
        "--reproducible-noise",
        type=int,
        metavar="SEED",
        help="derive the private steps' noise and sampling from this PUBLIC seed (tests, "
        "research); the run is then labelled 'simulation', not 'dp'",
    )
    p.add_argument(
        "--public-entities",
        metavar="FILE",
        help="private runs: entity ids (one per line) that get a structural row; default: "
        "every entity the split does not hold out",
    )
    _add_device_flag(p, "train.device: where the run computes")
    p.add_argument("--out", help="run directory (must be new or empty)")
    p.add_argument("--resume", metavar="DIR", help="continue a run directory from its checkpoint")
    p.add_argument("--no-progress", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="textkg", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="store_true", help="print the version")
    sub = parser.add_subparsers(dest="command")

    data = sub.add_parser("data", help="dataset utilities").add_subparsers(dest="data_command")
    stats = data.add_parser("stats", help="entity/relation/triple counts as JSON")
    stats.add_argument(
        "dataset", help="any --dataset source: a name, a BLP directory, an OBO/OWL/RDF file, pykeen:PATH"
    )
    stats.add_argument("--split", choices=["transductive", "inductive"])
    stats.add_argument("--inductive-dir")

    tr = sub.add_parser("train", help="train and evaluate a model")
    _add_train_flags(tr)
    tr.add_argument(
        "--nproc",
        type=int,
        help="data-parallel training in N processes: runs this command under torchrun --standalone "
        "--nproc-per-node N; private runs keep one process's mechanism and ledger (docs/scaling.md)",
    )

    ev = sub.add_parser("evaluate", help="re-evaluate a run directory's best model")
    ev.add_argument("run_dir")
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

    pr = sub.add_parser("predict", help="zero-shot links for a brand-new entity")
    pr.add_argument("run_dir")
    pr.add_argument("--description", "--text", help="the new entity's description")
    pr.add_argument("--name", help="the new entity's name")
    pr.add_argument("--relation", help="only this relation (default: all)")
    pr.add_argument(
        "--direction",
        choices=["head", "tail"],
        help="the new entity is the head (predict tails) or the tail (predict heads)",
    )
    pr.add_argument("--top-k", type=int, default=10)
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
        "(new, relation, entity); head: (entity, relation, new)); used without retraining (docs/k_shot.md)",
    )
    _add_device_flag(pr, "where the model and encoder run (not the run's train.device)")

    models = sub.add_parser("models", help="model presets").add_subparsers(dest="models_command")
    models.add_parser("list", help="list model presets")

    charlm = sub.add_parser("charlm", help="flair character language models").add_subparsers(dest="charlm_command")
    ct = charlm.add_parser("train", help="train a char LM on a dataset's descriptions")
    ct.add_argument("--dataset", required=True)
    ct.add_argument(
        "--description",
        help="BLP-format datasets: which description file to train on "
        "(short, long, first-sentence; as for textkg train)",
    )
    ct.add_argument("--direction", choices=["forward", "backward"], required=True)
    ct.add_argument("--out", required=True)
    ct.add_argument("--hidden-size", type=int, default=256)
    ct.add_argument("--max-epochs", type=int, default=10)
    ct.add_argument("--max-minutes", type=float, default=15.0)
    ct.add_argument("--seed", type=int, default=0)

    enc = sub.add_parser("encoders", help="text encoders").add_subparsers(dest="encoders_command")
    enc.add_parser("list", help="list registered encoders")
    ad = enc.add_parser(
        "adapt",
        help="fine-tune the packaged MiniLM on the ontology's own (name, definition/synonym) pairs of "
        "training terms (SapBERT-style); prints the folder for --encoder-model",
    )
    ad.add_argument("--dataset", required=True)
    ad.add_argument("--split", default="inductive", choices=["transductive", "inductive"])
    ad.add_argument("--epochs", type=int, default=1)
    ad.add_argument("--batch-size", type=int, default=64)
    ad.add_argument("--lr", type=float, default=2e-5)
    ad.add_argument("--max-minutes", type=float, default=15.0)
    ad.add_argument("--max-pairs", type=int, default=None)
    ad.add_argument("--seed", type=int, default=0)
    pa = enc.add_parser("pretrain-aec", help="pre-train the LSTM autoencoder on a dataset's descriptions")
    pa.add_argument("--dataset", required=True)
    pa.add_argument("--encoder", default="glove-bow", help="token-level encoder feeding the autoencoder")
    pa.add_argument("--code-dim", type=int, default=128)
    pa.add_argument("--epochs", type=int, default=5)
    pa.add_argument("--out", required=True)
    pa.add_argument("--seed", type=int, default=0)

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
