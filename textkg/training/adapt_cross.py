"""``textkg encoders cross-encoder``: fine-tune a cross-encoder on the ontology's own ``is_a`` statements.

The placement shortlist (:mod:`textkg.evaluation.placement.shortlist`) re-scores each new term's top
candidate parents with a cross-encoder (:mod:`textkg.encoders.cross_encoder`): one logit for a (new term
text, candidate text) pair. This module trains it, as BERTSubs does (Chen et al. 2023, "Contextual
semantic embeddings for ontology subsumption prediction", World Wide Web journal 26: a BERT
cross-encoder fine-tuned on the ontology's own subsumptions), with the localized contrastive estimation
loss of Gao, Dai & Callan 2021 ("Rethink Training of BERT Rerankers in Multi-Stage Retrieval Pipeline",
ECIR, arXiv:2101.08751: "LCE"): for each group of one positive and ``n`` hard negatives drawn as the
first stage would rank them, softmax cross-entropy over the group's ``1 + n`` logits with the positive as
the target.

Groups (:func:`cross_training_groups`) come from **training-partition terms and statements only**
(:func:`~textkg.training.adapt_encoder.is_a_edges`): held-out (validation or test) terms are the new terms
to place, so no held-out term's text and no statement touching one is read. For each training ``is_a``
edge ``(child, parent)``:

* anchor: the child's description; for about :data:`NAME_ANCHOR_SHARE` of the edges whose child has a
  description beyond its name, a second group with the child's name alone as anchor (a new term may arrive
  with its name only);
* positive: the parent's description;
* ``n`` hard negatives, taken in turn from four pools: the child's nearest training terms by the packaged
  MiniLM's description cosine (the first stage's description similarity, features cached on disk), its
  siblings (other children of its parents), its grandparents, and its parents' siblings.

A negative is never the child, never one of its parents, never an ancestor more than two levels up (a
great-grandparent is a coarser but not a wrong parent: teaching the model that it is wrong would fight the
ontology), and never a text equal to the child's name or description or to a parent's description.
Grandparents *are* negatives: the task is the direct parent, and a grandparent is the nearest miss a
reranker must learn to put below it. Descendants of the child may be negatives (they are wrong parents).

Training stops after ``epochs`` passes, ``max_steps`` steps or ``max_minutes``, whichever comes first, with
:func:`~textkg.training.adapt_encoder.budget_train` (AdamW, warm-up over the first tenth of the steps the
budget allows, linear decay to zero, gradients clipped to norm 1). The model is saved with safetensors in the
textkg cache, keyed by the settings and the groups' every text (the ontology's content); a second call
returns the cached summary. ``load_cross_encoder(summary["out"])`` reads it.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import time
from pathlib import Path

from textkg.errors import ConfigError
from textkg.training.adapt_encoder import PROGRESS_EVERY, budget_train, cache_folder, is_a_edges, nearest_training_terms

#: settings that name a cached cross-encoder
CROSS_VERSION = 1
#: share of the edges (whose child's description is more than its name) that also give a name-anchored group
NAME_ANCHOR_SHARE = 1 / 3
#: AdamW learning rate: the one-logit head starts from random weights; over a few hundred steps on hpo, 1e-4
#: lowered the group loss from ln 8 = 2.08 to 1.80 in 100 steps, 3e-5 to 2.02 (helper measurement, issue 54)
DEFAULT_LR = 1e-4
#: summary file in the saved folder
SUMMARY_FILE = "textkg_cross.json"

Group = tuple[str, list[str]]  # (anchor, [positive, negative, ...])


def _hierarchy(edges: list[tuple[int, int]]) -> tuple[dict[int, set[int]], dict[int, set[int]]]:
    """``(parents, children)`` of the training ``is_a`` edges."""
    parents: dict[int, set[int]] = {}
    children: dict[int, set[int]] = {}
    for child, parent in edges:
        parents.setdefault(child, set()).add(parent)
        children.setdefault(parent, set()).add(child)
    return parents, children


def _ancestors(term: int, parents: dict[int, set[int]]) -> set[int]:
    seen: set[int] = set()
    stack = list(parents.get(term, ()))
    while stack:
        t = stack.pop()
        if t not in seen:
            seen.add(t)
            stack.extend(parents.get(t, ()))
    return seen


def _shuffled(items, rng: random.Random) -> list[int]:
    out = sorted(items)
    rng.shuffle(out)
    return out


def cross_training_groups(
    kg, split, *, negatives_per_group: int = 7, cache_dir: Path | None = None, seed: int = 0
) -> list[Group]:
    """``(anchor, [positive, negative, ...])`` groups of training terms only (module docstring), in edge order.

    Args:
        kg: The knowledge graph (its ``is_a`` relation gives the edges).
        split: Its split; only training terms and training statements are read.
        negatives_per_group: Hard negatives per group, at most (fewer where the pools run dry; a group with
            none is left out).
        cache_dir: Where the MiniLM description features are cached (``None``: the default cache).
        seed: Draws the pools' order and the name-anchored edges.

    Returns:
        The groups; texts stripped; the positive first. Deterministic given ``seed``.
    """
    if negatives_per_group < 1:
        raise ConfigError("must be >= 1", field="negatives_per_group")
    edges = is_a_edges(kg, split)
    if not edges:
        return []
    parents, children = _hierarchy(edges)
    grand = {c: set().union(*(parents.get(p, set()) for p in ps)) - ps - {c} for c, ps in parents.items()}
    banned = {c: (_ancestors(c, parents) - grand[c]) | {c} for c in parents}  # parents included
    nearest = nearest_training_terms(kg, split, per_child=negatives_per_group, banned=banned, cache_dir=cache_dir)
    desc = {e: kg.entity_descriptions[e].strip() for edge in edges for e in edge}
    rng = random.Random(seed)
    groups: list[Group] = []
    for child, parent in edges:
        name = kg.entity_names[child].strip()
        taboo = {desc[child], name, *(desc[p] for p in parents[child])}
        siblings = set().union(*(children[p] for p in parents[child])) - banned[child]
        uncles = set().union(*(children[g] for g in grand[child])) - banned[child] - siblings
        pools = [
            list(nearest.get(child, [])),
            _shuffled(siblings, rng),
            _shuffled(grand[child] - banned[child], rng),
            _shuffled(uncles, rng),
        ]
        chosen: list[str] = []
        while len(chosen) < negatives_per_group and any(pools):
            for pool in pools:
                while pool and len(chosen) < negatives_per_group:
                    text = desc[pool.pop(0)]
                    if text and text not in taboo and text not in chosen:
                        chosen.append(text)
                        break
        positive = desc[parent]
        anchors = [desc[child]]
        if name and name != desc[child] and rng.random() < NAME_ANCHOR_SHARE:
            anchors.append(name)
        for anchor in anchors:
            if anchor and chosen and anchor != positive:
                groups.append((anchor, [positive, *chosen]))
    return groups


def _check_settings(
    *, negatives_per_group: int, groups_per_step: int, lr: float, max_steps: int | None, max_minutes: float, epochs: int
) -> None:
    if negatives_per_group < 1:
        raise ConfigError("must be >= 1", field="negatives_per_group")
    if groups_per_step < 1:
        raise ConfigError("must be >= 1", field="groups_per_step")
    if not (math.isfinite(lr) and lr > 0):
        raise ConfigError("must be a finite number > 0", field="lr")
    if max_steps is not None and max_steps < 1:
        raise ConfigError("must be >= 1", field="max_steps")
    if not (math.isfinite(max_minutes) and max_minutes > 0):
        raise ConfigError("must be a finite number > 0", field="max_minutes")
    if epochs < 1:
        raise ConfigError("must be >= 1", field="epochs")


def group_loss(scorer, groups: list[Group]):
    """Localized contrastive estimation (LCE; Gao, Dai & Callan 2021): the mean over ``groups`` of the softmax
    cross-entropy of each group's ``(1 + n,)`` logits with its first text (the positive) as the target.
    Returns ``(loss, share of groups whose positive scores highest)``."""
    import torch

    pairs = [(anchor, text) for anchor, texts in groups for text in texts]
    sizes = [len(texts) for _, texts in groups]
    logits = scorer.logits(pairs)
    table = torch.full((len(groups), max(sizes)), float("-inf"))
    mask = torch.arange(max(sizes))[None, :] < torch.tensor(sizes)[:, None]
    table = table.masked_scatter(mask, logits)  # row-major: each group's logits in its row, -inf after
    loss = torch.nn.functional.cross_entropy(table, torch.zeros(len(groups), dtype=torch.long))
    hits = float((table.detach().argmax(dim=1) == 0).float().mean())
    return loss, hits


def adapt_cross_encoder(
    kg,
    split,
    *,
    cache_dir: Path,
    split_name: str,
    negatives_per_group: int = 7,
    groups_per_step: int = 8,
    lr: float = DEFAULT_LR,
    max_steps: int | None = None,
    max_minutes: float = 10.0,
    epochs: int = 1,
    seed: int = 0,
    progress: bool = False,
) -> dict:
    """Fine-tune a cross-encoder from the packaged MiniLM on :func:`cross_training_groups`.

    Returns:
        A summary: ``out`` (the folder for :func:`~textkg.encoders.cross_encoder.load_cross_encoder`),
        ``digest`` (its weights' short sha256), ``steps``, ``planned_steps``, ``stopped``, the mean loss and
        hit rate of the first and last 25 steps, ``seconds``, ``groups``, the settings, and ``cached``.

    Raises:
        ConfigError: Bad settings, or a training partition that gives no group.
    """
    _check_settings(
        negatives_per_group=negatives_per_group,
        groups_per_step=groups_per_step,
        lr=lr,
        max_steps=max_steps,
        max_minutes=max_minutes,
        epochs=epochs,
    )
    from textkg.encoders.base import file_fingerprint
    from textkg.encoders.bert import default_minilm_path
    from textkg.encoders.cross_encoder import MAX_PAIR_TOKENS, WEIGHTS_FILE, CrossScorer, initial_cross_model
    from textkg.progress import stage

    start = time.perf_counter()
    stage("cross-encoder: groups from training is_a statements (training terms only)", progress=progress)
    groups = cross_training_groups(kg, split, negatives_per_group=negatives_per_group, cache_dir=cache_dir, seed=seed)
    if not groups:
        raise ConfigError("the training partition gives no is_a group to train on", field="dataset")
    settings = {
        "version": CROSS_VERSION,
        "dataset": kg.name,
        "split": split_name,
        "base": file_fingerprint(Path(default_minilm_path()) / WEIGHTS_FILE),
        "groups": len(groups),
        "pairs": sum(len(texts) for _, texts in groups),
        "texts_sha256": _digest(groups),
        "max_pair_tokens": MAX_PAIR_TOKENS,
        "name_anchor_share": round(NAME_ANCHOR_SHARE, 4),
        "negatives_per_group": negatives_per_group,
        "groups_per_step": groups_per_step,
        "lr": lr,
        "epochs": epochs,
        "max_steps": max_steps,
        "max_minutes": max_minutes,
        "seed": seed,
    }
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    out = cache_folder(cache_dir, "cross", kg.name, split_name, key)
    summary_path = out / SUMMARY_FILE
    if summary_path.is_file():
        return {**json.loads(summary_path.read_text()), "cached": True}

    rng = random.Random(seed)
    order = list(groups)
    rng.shuffle(order)
    epoch_batches = [order[i : i + groups_per_step] for i in range(0, len(order), groups_per_step)]
    planned = epochs * len(epoch_batches) if max_steps is None else min(max_steps, epochs * len(epoch_batches))
    tokenizer, model = initial_cross_model(seed)
    model.train()
    scorer = CrossScorer(tokenizer, model, digest="training")
    hit_rates: list[float] = []

    def step_loss(batch: list[Group]):
        loss, hits = group_loss(scorer, batch)
        hit_rates.append(hits)
        return loss

    prepared = time.perf_counter() - start
    stage(
        f"cross-encoder: {len(groups):,} groups of 1 positive + up to {negatives_per_group} negatives, "
        f"{len(epoch_batches):,} steps of {groups_per_step} groups per epoch; at most {planned:,} steps or "
        f"{max_minutes:g} min",
        progress=progress,
    )
    done, losses, seconds = budget_train(
        [p for p in model.parameters() if p.requires_grad],
        epoch_batches,
        step_loss,
        rng,
        planned=planned,
        lr=lr,
        budget_s=60 * max_minutes,
        progress=progress,
        name="cross-encoder",
    )
    model.eval()
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # a run that died while saving
    model.save_pretrained(str(tmp), safe_serialization=True)
    tokenizer.save_pretrained(str(tmp))
    summary = {
        **settings,
        "out": str(out),
        "digest": file_fingerprint(tmp / WEIGHTS_FILE),
        "steps": done,
        "planned_steps": planned,
        "steps_per_epoch": len(epoch_batches),
        "stopped": None if done == planned else f"max_minutes={max_minutes:g} reached",
        "loss_first_25": _mean(losses[:PROGRESS_EVERY]),
        "loss_last_25": _mean(losses[-PROGRESS_EVERY:]),
        "hit_rate_first_25": _mean(hit_rates[:PROGRESS_EVERY]),
        "hit_rate_last_25": _mean(hit_rates[-PROGRESS_EVERY:]),
        "seconds_per_step": round(seconds / done, 3) if done else None,
        "prepare_seconds": round(prepared, 1),
        "train_seconds": round(seconds, 1),
        "seconds": round(time.perf_counter() - start, 1),
    }
    (tmp / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    if out.exists():  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
        return {**json.loads(summary_path.read_text()), "cached": True}
    tmp.rename(out)
    return {**summary, "cached": False}


def _digest(groups: list[Group]) -> str:
    """sha256 of every text of every group, in order: the cache key's hold on the ontology's content."""
    h = hashlib.sha256()
    for anchor, texts in groups:
        h.update("\x1f".join([anchor, *texts]).encode() + b"\x1e")
    return h.hexdigest()


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None
