"""The parts a run is built from: datasets, model presets, text encoders, character language models.

* ``textkg data stats DATASET [--split S]``
* ``textkg data simulate-patients --out DIR [--seed S] [--diseases N] [--patients N] ...``
* ``textkg models list``
* ``textkg charlm train --dataset D --direction forward|backward --out DIR``
* ``textkg encoders list | adapt --dataset D | cross-encoder --dataset D | pretrain-aec --dataset D --out DIR``
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from textkg.cli.flags import number_flag


def add_data(sub) -> None:
    """``textkg data stats`` and ``simulate-patients``."""
    data = sub.add_parser("data", help="dataset utilities").add_subparsers(dest="data_command")
    stats = data.add_parser("stats", help="entity/relation/triple counts as JSON")
    stats.add_argument(
        "dataset", help="any --dataset source: a name, a BLP directory, an OBO/OWL/RDF file, pykeen:PATH"
    )
    stats.add_argument(
        "--split", choices=["transductive", "inductive"], help="also count the split's parts (default: none)"
    )
    stats.add_argument("--inductive-dir", help="sub-directory with ind-*.tsv (BLP-format datasets)")
    add_simulate_patients(data)


def add_simulate_patients(data) -> None:
    """``textkg data simulate-patients``: its flags fill :class:`textkg.data.cohort.CohortRecipe`."""
    from textkg.data.cohort import CohortRecipe

    d = CohortRecipe()
    sp = data.add_parser(
        "simulate-patients",
        help="a simulated patient cohort drawn from the HPO's disease annotations (Köhler et al. 2009: a few "
        "of a disease's phenotypes, some made imprecise, noise added), with a share of the diseases' "
        "annotations withheld from the public graph; a BLP-format folder with patients.txt (docs/diagnosis.md)",
    )
    sp.add_argument("--out", required=True, help="new folder for the cohort (a dataset for textkg train --dataset)")
    # (flag, CohortRecipe field, number kind, help); each help ends with the field's default
    recipe_flags = (
        ("--seed", "seed", "seed", "random seed"),
        ("--diseases", "diseases", "items", "OMIM diseases drawn, each with at least --min-annotations phenotypes"),
        ("--patients", "train_patients", "items", "training patients (train.tsv)"),
        ("--valid-patients", "valid_patients", "items", "validation patients (dev.tsv)"),
        ("--test-patients", "test_patients", "items", "held-out new patients (test.tsv)"),
        (
            "--withheld-fraction",
            "withheld_fraction",
            "share",
            "share of the diseases whose phenotype annotations are withheld from the public graph, below 1",
        ),
        ("--min-terms", "min_terms", "count", "fewest of its disease's phenotypes a patient starts from"),
        ("--max-terms", "max_terms", "count", "most of its disease's phenotypes a patient starts from"),
        (
            "--imprecision",
            "imprecision",
            "probability",
            "probability that a phenotype is replaced by one of its ancestors",
        ),
        ("--noise", "noise", "share", "unrelated phenotypes added per disease phenotype, rounded down (the paper's)"),
        (
            "--popularity-exponent",
            "popularity_exponent",
            "exponent",
            "s of the diseases' Zipf popularity: the r-th most common disease is drawn with weight r^-s, 0 uniform",
        ),
        (
            "--min-annotations",
            "min_annotations",
            "count",
            "fewest phenotype annotations a disease needs to be drawn, at least --min-terms",
        ),
    )
    for flag, field, kind, text in recipe_flags:
        default = getattr(d, field)
        sp.add_argument(
            flag,
            dest=field,
            metavar=flag[2:].upper().replace("-", "_"),
            type=number_flag(kind),
            default=default,
            help=f"{text} (default: {default:g})",
        )


def add_models(sub) -> None:
    """``textkg models list``."""
    models = sub.add_parser("models", help="model presets").add_subparsers(dest="models_command")
    models.add_parser("list", help="list model presets")


def add_charlm(sub) -> None:
    """``textkg charlm train``."""
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
    ct.add_argument("--hidden-size", type=number_flag("dim"), default=256, help="LSTM hidden units (default: 256)")
    ct.add_argument(
        "--max-epochs", type=number_flag("epochs"), default=10, help="passes over the descriptions (default: 10)"
    )
    ct.add_argument(
        "--max-minutes", type=number_flag("minutes"), default=15.0, help="wall-time limit in minutes (default: 15)"
    )
    ct.add_argument("--seed", type=number_flag("seed"), default=0, help="random seed (default: 0)")


def add_encoders(sub) -> None:
    """``textkg encoders list``, ``adapt``, ``cross-encoder`` and ``pretrain-aec``."""
    enc = sub.add_parser("encoders", help="text encoders").add_subparsers(dest="encoders_command")
    enc.add_parser("list", help="list registered encoders")
    ad = enc.add_parser(
        "adapt",
        help="fine-tune the packaged MiniLM on the ontology's own pairs of training terms: (name, "
        "definition/synonym), SapBERT-style, and/or (child, parent) of its is_a statements; prints the folder "
        "for --encoder-model",
    )
    ad.add_argument("--dataset", required=True, help="an ontology --dataset source (e.g. hpo)")
    ad.add_argument(
        "--split",
        default="inductive",
        choices=["transductive", "inductive"],
        help="whose training terms give the pairs; inductive keeps held-out terms out (default: inductive)",
    )
    ad.add_argument(
        "--pairs",
        type=pair_sources,
        default=("names",),
        metavar="SOURCES",
        help="comma-separated pair sources: names ((name, definition) and (name, synonym)), is_a (child text, "
        "parent text) (default: names)",
    )
    ad.add_argument(
        "--hard-negatives",
        action="store_true",
        help="give each is_a pair a third text: the training term most similar to the child by the packaged "
        "MiniLM that is not one of its parents",
    )
    ad.add_argument("--epochs", type=number_flag("epochs"), default=1, help="passes over the pairs (default: 1)")
    ad.add_argument("--batch-size", type=number_flag("batch_size"), default=64, help="pairs per step (default: 64)")
    ad.add_argument("--lr", type=number_flag("lr"), default=2e-5, help="AdamW learning rate (default: 2e-5)")
    ad.add_argument(
        "--frozen-layers",
        type=number_flag("frozen_layers"),
        default=0,
        metavar="N",
        help="keep MiniLM's embeddings and its first N of 6 layers as packaged: a third less time per step and "
        "about 0.9 GiB less memory at N = 3 (default: 0, train every layer)",
    )
    ad.add_argument(
        "--max-pairs",
        type=number_flag("items"),
        default=None,
        help="use at most this many pairs of each source (default: all)",
    )
    add_budget_flags(ad, minutes=15)
    add_cross_encoder(enc)
    pa = enc.add_parser("pretrain-aec", help="pre-train the LSTM autoencoder on a dataset's descriptions")
    pa.add_argument("--dataset", required=True, help="any --dataset source of textkg train")
    pa.add_argument("--encoder", default="glove-bow", help="token-level encoder feeding the autoencoder")
    pa.add_argument(
        "--code-dim", type=number_flag("dim"), default=128, help="size of the autoencoder's code (default: 128)"
    )
    pa.add_argument("--epochs", type=number_flag("epochs"), default=5, help="passes over the descriptions (default: 5)")
    pa.add_argument("--out", required=True, help="new directory for lstm_ae.pt (textkg train --autoencoder)")
    pa.add_argument("--seed", type=number_flag("seed"), default=0, help="random seed (default: 0)")


def add_cross_encoder(enc) -> None:
    """``textkg encoders cross-encoder``: its flags fill :func:`textkg.training.adapt_cross.adapt_cross_encoder`."""
    ce = enc.add_parser(
        "cross-encoder",
        help="fine-tune a cross-encoder (the packaged MiniLM with a one-logit head) on the ontology's training is_a "
        "statements: (child, parent) against hard negatives (nearest terms, siblings, grandparents, the parent's "
        "siblings), softmax cross-entropy per group; prints the summary with the folder (cached by content)",
    )
    ce.add_argument("--dataset", required=True, help="an ontology --dataset source (e.g. hpo)")
    ce.add_argument(
        "--split",
        default="inductive",
        choices=["transductive", "inductive"],
        help="whose training terms and statements give the groups; inductive keeps held-out terms out "
        "(default: inductive)",
    )
    ce.add_argument(
        "--negatives",
        dest="negatives_per_group",
        type=number_flag("count"),
        default=7,
        help="hard negatives per (child, parent) group (default: 7)",
    )
    ce.add_argument(
        "--groups-per-step",
        type=number_flag("batch_size"),
        default=8,
        help="groups per optimizer step (default: 8)",
    )
    ce.add_argument(
        "--lr", type=number_flag("lr"), default=None, help="AdamW learning rate (default: 1e-4, adapt_cross.DEFAULT_LR)"
    )
    ce.add_argument("--epochs", type=number_flag("epochs"), default=1, help="passes over the groups (default: 1)")
    add_budget_flags(ce, minutes=10)


def add_budget_flags(parser, *, minutes: int) -> None:
    """The flags a fine-tuning command shares: its wall-time and step budget, its seed and its progress lines."""
    parser.add_argument(
        "--max-minutes",
        type=number_flag("minutes"),
        default=float(minutes),
        help=f"wall-time limit in minutes (default: {minutes})",
    )
    parser.add_argument(
        "--max-steps", type=number_flag("steps"), default=None, help="stop after this many steps (default: no limit)"
    )
    parser.add_argument("--seed", type=number_flag("seed"), default=0, help="random seed (default: 0)")
    parser.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")


def pair_sources(text: str) -> tuple[str, ...]:
    """The argparse ``type`` of ``encoders adapt --pairs``: comma-separated names of
    :data:`textkg.training.adapt_encoder.PAIR_SOURCES`."""
    from textkg.errors import ConfigError
    from textkg.training.adapt_encoder import check_sources

    try:
        return check_sources([s.strip() for s in text.split(",") if s.strip()])
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def data_stats(args) -> dict:
    from textkg.data import kg_stats, load_dataset, make_split

    kwargs = {"inductive_dir": args.inductive_dir} if args.inductive_dir else {}
    kg = load_dataset(args.dataset, **kwargs)
    split = make_split(kg, args.split) if args.split else None
    return kg_stats(kg, split)


def simulate_patients(args) -> dict:
    """``textkg data simulate-patients``: :func:`textkg.data.cohort.simulate_patients`."""
    from textkg.data.cohort import CohortRecipe
    from textkg.data.cohort import simulate_patients as simulate

    recipe = CohortRecipe(**{f.name: getattr(args, f.name) for f in dataclasses.fields(CohortRecipe)})
    return simulate(args.out, recipe)


def models_list(args) -> dict:
    from textkg.models.presets import get_preset, list_presets

    return {name: get_preset(name).to_dict() for name in list_presets()}


def encoders_list(args) -> dict:
    from textkg.encoders import list_encoders

    return {"encoders": list(list_encoders())}


def charlm_train(args) -> dict:
    from textkg.data import load_dataset
    from textkg.encoders.charlm import read_char_lm_metrics, train_char_lm

    kg = load_dataset(args.dataset, **({"description": args.description} if args.description else {}))
    result = train_char_lm(
        list(kg.entity_descriptions),
        direction=args.direction,
        out_dir=args.out,
        hidden_size=args.hidden_size,
        epochs=args.max_epochs,
        max_seconds=60 * args.max_minutes,
        seed=args.seed,
    )
    return read_char_lm_metrics(result)  # includes "model": the path to pass to the flair encoder


def adapt_encoder(args) -> dict:
    """``textkg encoders adapt``: see :mod:`textkg.training.adapt_encoder`."""
    from textkg.training.adapt_encoder import adapt_encoder as adapt

    return _fine_tune(
        adapt,
        args,
        sources=args.pairs,
        hard_negatives=args.hard_negatives,
        frozen_layers=args.frozen_layers,
        batch_size=args.batch_size,
        lr=args.lr,
        max_pairs=args.max_pairs,
    )


def cross_encoder(args) -> dict:
    """``textkg encoders cross-encoder``: see :mod:`textkg.training.adapt_cross`."""
    from textkg.training.adapt_cross import adapt_cross_encoder

    return _fine_tune(
        adapt_cross_encoder,
        args,
        negatives_per_group=args.negatives_per_group,
        groups_per_step=args.groups_per_step,
        **({} if args.lr is None else {"lr": args.lr}),
    )


def _fine_tune(fine_tune, args, **settings) -> dict:
    """``fine_tune(kg, split, ...)`` on ``--dataset``/``--split`` with the budget flags of :func:`add_budget_flags`
    and ``--epochs``, cached under the textkg cache; its summary."""
    from textkg.data import load_dataset, make_split
    from textkg.training.features import default_cache_dir

    kg = load_dataset(args.dataset)
    return fine_tune(
        kg,
        make_split(kg, args.split),
        cache_dir=default_cache_dir(),
        split_name=args.split,
        epochs=args.epochs,
        max_minutes=args.max_minutes,
        max_steps=args.max_steps,
        seed=args.seed,
        progress=not args.no_progress,
        **settings,
    )


def pretrain_aec(args) -> dict:
    """Pre-train an LSTM autoencoder; a ``torchcoder-aec`` run reads it with
    ``model.text_module_kwargs.path`` (and then trains no autoencoder of its own)."""
    from textkg.data import load_dataset
    from textkg.encoders import get_encoder
    from textkg.encoders.lstm_ae import pretrain_autoencoder
    from textkg.training.features import AUTOENCODER_FILE

    kg = load_dataset(args.dataset)
    encoder = get_encoder(args.encoder)
    tokens, mask = encoder.encode_tokens(list(kg.entity_descriptions))
    module, history = pretrain_autoencoder(tokens, mask, code_dim=args.code_dim, epochs=args.epochs, seed=args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / AUTOENCODER_FILE
    module.save(path)
    return {
        "out": str(path),
        "token_dim": module.token_dim,
        "code_dim": module.code_dim,
        "history": history,
        "use_with": f"textkg train --model torchcoder-aec --autoencoder {path}",
    }


PARSERS = {"data": add_data, "models": add_models, "charlm": add_charlm, "encoders": add_encoders}
HANDLERS: dict = {
    ("data", "stats"): data_stats,
    ("data", "simulate-patients"): simulate_patients,
    ("models", "list"): models_list,
    ("charlm", "train"): charlm_train,
    ("encoders", "list"): encoders_list,
    ("encoders", "pretrain-aec"): pretrain_aec,
    ("encoders", "adapt"): adapt_encoder,
    ("encoders", "cross-encoder"): cross_encoder,
}
