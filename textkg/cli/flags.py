"""The flags several commands share (``train``, ``sweep``, ``federate``, ``tune``, ``place``, ...).

Every command module takes its flags from here, so no command module imports ``textkg.cli.main``
(which imports every command module's ``add_parsers``): no import circle (issue 30).
"""

from __future__ import annotations

import argparse


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
    p.add_argument(
        "--split",
        choices=["transductive", "inductive"],
        help="transductive: every entity is seen in training; inductive: new entities held out for test",
    )
    p.add_argument("--split-seed", type=int, help="seed of the inductive split (which entities are held out)")
    p.add_argument("--inductive-dir", help="sub-directory with ind-*.tsv (BLP-format datasets)")
    p.add_argument(
        "--valid-holdout",
        choices=["auto", "random", "sibling-batches"],
        help="how an inductive split draws its validation terms: auto (sibling-batches for an ontology file, "
        "else random), random, or sibling-batches (up to half in whole sibling groups, as a release adds terms)",
    )
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
    p.add_argument("--dim", type=int, help="embedding dimension (overrides the --model preset's)")
    p.add_argument(
        "--structural-dropout",
        type=float,
        help="probability in [0, 1] that a training entity's structural row is replaced by the unseen row "
        "(overrides the --model preset's)",
    )
    p.add_argument(
        "--autoencoder",
        metavar="FILE",
        help="lstm-ae models (torchcoder-aec): use this pre-trained autoencoder "
        "(textkg encoders pretrain-aec) instead of pre-training one in the run",
    )
    p.add_argument("--epochs", type=int, help="passes over the training statements (under DP: expected passes)")
    p.add_argument("--batch-size", type=int, help="statements per step (under DP: the expected Poisson batch size B)")
    p.add_argument("--lr", type=float, help="Adam learning rate")
    p.add_argument(
        "--lr-schedule",
        choices=["constant", "cosine"],
        help="constant, or cosine: decay the rate to 0 over --epochs",
    )
    p.add_argument(
        "--ema-decay",
        type=float,
        metavar="D",
        help="keep a moving average of the weights (decay D, e.g. 0.99) and validate it beside "
        "the raw weights; the better is kept. Costs no privacy (post-processing)",
    )
    p.add_argument(
        "--optimizer",
        choices=["adam", "lazy-adam"],
        help="lazy-adam: update only the entity rows a batch touched (large graphs; non-private, sampled negatives)",
    )
    p.add_argument("--num-negatives", type=int, help="--negatives sampled: corruptions per statement")
    p.add_argument(
        "--loss",
        choices=["margin", "softplus", "softmax"],
        help="margin (ranking), softplus (logistic) or softmax (cross-entropy over the statement and its negatives)",
    )
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
    p.add_argument("--margin", type=float, help="--loss margin: the margin, in score units")
    p.add_argument("--temperature", type=float, help="softmax loss: divide scores by this")
    p.add_argument(
        "--seed", type=int, help="seed of initialisation and negatives (DP noise is secret unless --reproducible-noise)"
    )
    p.add_argument("--eval-every", type=int, help="validate every this many epochs (model selection by MRR)")
    p.add_argument(
        "--valid-max-triples", type=int, help="validate on a seeded subset of at most this many statements (0: all)"
    )
    p.add_argument(
        "--candidates",
        choices=["blp", "all", "split"],
        help="candidate entities ranked in evaluation: blp (valid: train+valid entities, test: all), all, split",
    )
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
    p.add_argument("--max-minutes", type=float, help="stop training after this wall time, in minutes (unset: no limit)")
    p.add_argument(
        "--checkpoint-every", type=int, help="also checkpoint every this many steps (0: only once per epoch)"
    )
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
    p.add_argument(
        "--mechanism",
        choices=["dp-sgd", "simulation"],
        help="dp-sgd: Poisson sampling, per-example clipping, Gaussian noise (the only mechanism labelled dp); "
        "simulation: the seed paper's batch-level clipping, always labelled simulation",
    )
    p.add_argument(
        "--noise-multiplier",
        type=float,
        metavar="SIGMA",
        help="sigma: noise standard deviation in units of --max-grad-norm (unset: calibrated to --target-epsilon)",
    )
    p.add_argument(
        "--target-epsilon",
        type=float,
        metavar="EPS",
        help="privacy budget epsilon (per statement, at --delta): sigma is calibrated to it, or with "
        "--noise-multiplier training stops before exceeding it",
    )
    p.add_argument("--delta", type=float, help="delta of the guarantee (unset: 1/(10 N), N = --private-size)")
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
    p.add_argument(
        "--max-grad-norm",
        type=float,
        metavar="C",
        help="clipping bound C: the L2 norm of each private example's whole gradient",
    )
    p.add_argument(
        "--confidential-relations",
        metavar="NAMES",
        help="comma-separated relation names (as in the dataset, e.g. has_phenotype) whose statements are confidential",
    )
    p.add_argument(
        "--confidential-fraction",
        type=float,
        help="instead of --confidential-relations: a seeded random fraction in (0, 1] of training statements",
    )
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
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    _note_config_defaults(p)


def _note_config_defaults(p: argparse.ArgumentParser) -> None:
    """Append each config-backed flag's config key and default to its help text.

    The default is read from the frozen dataclass that the flag fills
    (:data:`textkg.cli.config_loading.FLAG_FIELDS`), so it is documented once and ``--help`` and
    docs/cli.md cannot drift from it; presets that set their own value are named.
    """
    import dataclasses

    from textkg.cli.config_loading import FLAG_FIELDS, SECTIONS
    from textkg.models.presets import PRESET_TRAIN_DEFAULTS

    for action in p._actions:
        if action.dest not in FLAG_FIELDS or action.help is None:
            continue
        section, name = FLAG_FIELDS[action.dest]
        fields = {f.name: f for f in dataclasses.fields(SECTIONS[section])}
        default = fields[name].default
        shown = "unset" if default is None else "none" if default == () else repr(default).strip("'")
        note = f"config {section}.{name}; default {shown}"
        presets = sorted(n for n, d in PRESET_TRAIN_DEFAULTS.items() if section == "train" and name in d)
        if presets:
            note += f"; the presets {', '.join(presets)} set their own"
        action.help = f"{action.help} [{note}]".replace("%", "%%")
