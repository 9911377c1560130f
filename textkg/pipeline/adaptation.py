"""The run's encoder, adapted to the ontology before anything is encoded (issue 54, item 1).

``train.adapt_encoder_steps`` fine-tunes the packaged all-MiniLM-L6-v2 on the ontology's own training
``is_a`` pairs (child text -> parent description, in-batch negatives: sentence-transformers'
``MultipleNegativesRankingLoss``, Henderson et al. 2017, arXiv:1705.00652; the recipe of SimKGC, Wang et al.,
ACL 2022, without its pre-batch negatives; the upper layers only, :data:`AUTO_FROZEN_LAYERS`) with
:func:`textkg.training.adapt_encoder.adapt_encoder`, and the run then encodes every text with the adapted
weights: the model's text features, description NN, parent-of-nearest, the vote and the re-ranker's description
features, and ``textkg place``'s new terms.
No held-out term's text, and no statement that touches one, is read (the adaptation's own test).

``None`` (the default) resolves here, once per ``textkg train`` run, to :data:`AUTO_STEPS` or to 0, by public,
stated rules (:func:`blocker`, :data:`AUTO_MIN_PAIRS`); the resolved number and the adapted folder (in the
user's textkg cache, which a run folder may name: ``docs/security.md``) are what ``config.json`` keeps, so a
resumed run, ``predict`` and ``place`` read the same encoder and never fine-tune again.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from textkg.errors import ConfigError
from textkg.pipeline.prepared import load_graph_units_and_split
from textkg.training.adapt_encoder import SUMMARY_FILE, is_packaged
from textkg.training.config import RunConfig

#: the automatic adaptation's recipe, chosen on the README split's validation terms among seven (learning rate 2e-5 /
#: 8e-5 / 2.4e-4, nothing / the word embeddings / the embeddings and 3 layers frozen, 100 or 150 steps;
#: docs/results/placement.md, "A higher learning rate, the lower layers frozen"): a peak learning rate of 2.4e-4
#: (warm-up over the first tenth, then linear decay to 0), MiniLM's embeddings and its first 3 of 6 layers left as
#: packaged. Freezing them makes a step a third cheaper and lowers the peak by about 0.9 GiB. 150 steps of batches
#: of 64 pairs: the same 9,600 pairs in batches of 128 (75 steps, 127 in-batch negatives per pair instead of 63)
#: raised the README split's validation (0.661 -> 0.668) but lowered UBERON's real additions on two seeds (0.351 ->
#: 0.326, 0.349 -> 0.335), so the default stayed at 64 (docs/results/placement.md, "Bigger batches, the same pairs").
AUTO_STEPS = 150
AUTO_BATCH_SIZE = 64
AUTO_LR = 2.4e-4
AUTO_FROZEN_LAYERS = 3
#: the automatic adaptation needs at least this many training ``is_a`` pairs (child, parent): a smaller
#: ontology gives too few batches to learn from, and a test fixture stays fast
AUTO_MIN_PAIRS = 1_000
#: a cap on the adaptation's wall time (a day): the steps are the budget, the minutes only stop a runaway
MAX_ADAPT_MINUTES = 24 * 60.0
#: encoders whose weights the adaptation replaces: the ``bert`` encoder over the packaged MiniLM (the run keeps
#: the adapted weights in ``RUN/encoder``, which only this encoder reads: :mod:`textkg.pipeline.run_files`)
ADAPTED_ENCODERS = ("bert",)


def blocker(cfg: RunConfig) -> str | None:
    """Why this run cannot adapt its encoder, in words, or ``None``: a private run (the adaptation reads
    every training ``is_a`` statement), a transductive split (no new term to place), or an encoder other
    than the packaged MiniLM."""
    if cfg.privacy.mode != "none" or cfg.privacy.unit != "statement":
        return f"a private run (--privacy {cfg.privacy.mode}, unit {cfg.privacy.unit})"
    if cfg.data.split != "inductive":
        return f"a {cfg.data.split} split (no new term to place)"
    encoder = cfg.model.encoder
    if encoder not in ADAPTED_ENCODERS:
        return f"the model's text encoder is {encoder!r}, not bert over the packaged MiniLM"
    path = (cfg.model.encoder_kwargs or {}).get("model_name_or_path")
    if path and not is_packaged(path):
        return f"the encoder is already {path}"
    return None


def _adapted_already(cfg: RunConfig) -> bool:
    """The config names the folder an adaptation wrote (a run's own ``config.json`` given again)."""
    path = (cfg.model.encoder_kwargs or {}).get("model_name_or_path")
    return isinstance(path, str) and bool(path) and (Path(path) / SUMMARY_FILE).is_file()


def _with_steps(cfg: RunConfig, steps: int, folder: str | None = None) -> RunConfig:
    model = cfg.model
    if folder is not None:
        model = type(model).from_dict(
            {**model.to_dict(), "encoder_kwargs": {**(model.encoder_kwargs or {}), "model_name_or_path": folder}}
        )
    return dataclasses.replace(cfg, model=model, train=dataclasses.replace(cfg.train, adapt_encoder_steps=steps))


def resolve_adaptation(cfg: RunConfig, *, progress: bool = False) -> tuple[RunConfig, tuple | None, dict]:
    """``(cfg, loaded, record)`` for a new ``textkg train`` run: ``cfg`` with ``train.adapt_encoder_steps``
    resolved and, when it is above 0, the encoder's ``model_name_or_path`` set to the adapted folder (fine-tuned
    here, or read from the cache); ``loaded``, the ``(kg, split, units)`` read to decide (``None`` when the
    config alone decided), for :func:`textkg.pipeline.prepared.prepare` to reuse; ``record``, what
    ``metrics.json`` says (``encoder_adaptation``).

    Raises:
        ConfigError: A number of steps asked for where :func:`blocker` gives a reason.
    """
    asked = cfg.train.adapt_encoder_steps
    if asked == 0:
        return cfg, None, {"steps": 0, "why": "off (--adapt-encoder 0)"}
    if asked and _adapted_already(cfg):
        folder = cfg.model.encoder_kwargs["model_name_or_path"]
        return cfg, None, {"steps": asked, "why": "the config names its adapted encoder", "folder": folder}
    reason = blocker(cfg)
    if reason is not None:
        if asked:
            raise ConfigError(
                f"--adapt-encoder fine-tunes the packaged MiniLM for a non-private inductive run; this one is {reason}",
                field="train.adapt_encoder_steps",
            )
        return _with_steps(cfg, 0), None, {"steps": 0, "why": f"automatic: off for {reason}"}
    from textkg.training.adapt_encoder import adapt_encoder, is_a_edges
    from textkg.training.features import default_cache_dir

    loaded = load_graph_units_and_split(cfg)
    kg, split, _ = loaded
    pairs = len(is_a_edges(kg, split))
    if asked is None and pairs < AUTO_MIN_PAIRS:
        why = f"automatic: off, {pairs:,} training is_a pairs (it needs {AUTO_MIN_PAIRS:,})"
        return _with_steps(cfg, 0), loaded, {"steps": 0, "why": why}
    steps = AUTO_STEPS if asked is None else asked
    summary = adapt_encoder(
        kg,
        split,
        cache_dir=default_cache_dir(),
        split_name=cfg.data.split,
        sources=("is_a",),
        max_steps=steps,
        batch_size=AUTO_BATCH_SIZE,
        lr=AUTO_LR,
        frozen_layers=AUTO_FROZEN_LAYERS,
        max_minutes=MAX_ADAPT_MINUTES,
        seed=cfg.train.seed,
        progress=progress,
    )
    kept = ("steps", "planned_steps", "pairs", "batch_size", "lr", "loss_first_25", "loss_last_25", "train_seconds")
    record = {
        **{k: summary.get(k) for k in kept},
        "frozen_layers": summary.get("frozen_layers", 0),
        "why": "automatic" if asked is None else "asked (--adapt-encoder)",
        "is_a_pairs": pairs,
        "cached": summary.get("cached", False),
        "folder": summary["out"],
    }
    return _with_steps(cfg, steps, summary["out"]), loaded, record
