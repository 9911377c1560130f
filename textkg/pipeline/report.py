"""The post-run report: what ``metrics.json`` says about a trained model, and ``textkg evaluate``.

Filtered ranking of a split (:func:`evaluate_split`, with the ``test.subsets`` masks), the blocks
added to ``test`` after it (placement of new ontology terms, the description neighbour vote, k-shot,
placement with known links) and :func:`evaluate_run`, which re-evaluates a finished run directory.
Nothing here trains; the training job (:mod:`textkg.pipeline.job`) calls it after training.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from textkg.data import KnowledgeGraph, candidate_entities
from textkg.devices import describe_device, resolve_device
from textkg.errors import ConfigError
from textkg.evaluation import FilterIndex, evaluate
from textkg.evaluation.metrics import QueryMask
from textkg.evaluation.popularity import RelationPopularity
from textkg.pipeline.k_shot import k_shot_report, save_k_shot_choice
from textkg.pipeline.prepared import Prepared, prepare, seeded_subset
from textkg.training import checkpoint as ckpt
from textkg.training.config import RunConfig
from textkg.training.features import entity_texts
from textkg.training.private_split import owner_test_statements

if TYPE_CHECKING:
    from textkg.evaluation.placement.shortlist import PairTextScorer

#: Graphs with at most this many relations also get one metrics subset per relation.
MAX_RELATIONS_FOR_SUBSETS = 20


def _subset_masks(triples: torch.Tensor, seen: torch.Tensor, kg: KnowledgeGraph) -> dict[str, torch.Tensor | QueryMask]:
    """Named masks over ``triples``' ranking queries for the ``test.subsets`` metrics.

    Triple level (both queries of each selected triple): ``both_seen`` /
    ``head_unseen`` / ``tail_unseen`` / ``any_unseen`` split the triples by
    whether their entities were in the training graph; graphs with few
    relations (``hpo``) also get ``relation:<name>`` (e.g. ``relation:is_a``
    restricted to ``head_unseen`` is "place a new term under its parents").

    Query level (:class:`QueryMask`): ``answer_seen`` / ``answer_unseen`` take
    every head and tail query and split them by whether the entity being
    predicted was in the training graph; for ``(new_term, is_a, seen_parent)``
    the tail query is ``answer_seen`` and the head query ``answer_unseen``.

    Empty subsets are left out.
    """
    is_seen = torch.zeros(kg.num_entities, dtype=torch.bool)
    is_seen[seen] = True
    head_seen, tail_seen = is_seen[triples[:, 0]], is_seen[triples[:, 2]]
    masks: dict[str, torch.Tensor | QueryMask] = {
        "both_seen": head_seen & tail_seen,
        "head_unseen": ~head_seen,
        "tail_unseen": ~tail_seen,
        "any_unseen": ~(head_seen & tail_seen),
        "answer_seen": QueryMask(head=head_seen, tail=tail_seen),
        "answer_unseen": QueryMask(head=~head_seen, tail=~tail_seen),
    }
    if kg.num_relations <= MAX_RELATIONS_FOR_SUBSETS:
        for rel_id, name in enumerate(kg.relations):
            masks[f"relation:{name}"] = triples[:, 1] == rel_id
    return {k: v for k, v in masks.items() if bool(v.any())}


def evaluate_split(
    prep: Prepared,
    cfg: RunConfig,
    which: str,
    *,
    max_triples: int = 0,
    progress: bool = False,
    filter_index: FilterIndex | None = None,
    triples: torch.Tensor | None = None,
    scorer=None,
):
    """Filtered ranking metrics on ``which``; the filter is the run's (public, under privacy)
    unless ``filter_index`` is given. ``triples``: rank these statements of ``which`` only
    (e.g. one data holder's share), with ``which``'s candidates. ``scorer``: rank with this
    :class:`~textkg.evaluation.ranking.Scorer` instead of the model (e.g. a combination)."""
    triples = seeded_subset(prep.split.triples(which) if triples is None else triples, max_triples, cfg.train.seed)
    candidates = candidate_entities(prep.kg, prep.split, which, cfg.train.candidates)
    prep.model.eval()
    with torch.no_grad():
        return evaluate(
            prep.model if scorer is None else scorer,
            triples,
            filter_index=filter_index or prep.filter_index,
            candidates=candidates,
            num_entities=prep.kg.num_entities,
            batch_size=cfg.train.eval_batch_size,
            subset_masks=_subset_masks(triples, prep.split.train_entities, prep.kg),
            exclude_query=cfg.train.exclude_query,
            progress=progress,
            shard=prep.query_shard,
        )


#: what ``metrics.json`` of a private run says about its filtered ranking
PUBLIC_FILTER_NOTE = (
    "filtered with public statements only (validation, test and unrestricted training "
    "statements); in an inductive split this equals the standard filter"
)
#: metrics that use private statements without noise: kept apart, never released
PRIVATE_METRICS = "private_metrics.json"
PRIVATE_METRICS_NOTE = (
    "for the data owner: these metrics read private statements without noise (`test`: the standard "
    "filter, private training statements included; `confidential_test`: the confidential statements "
    "at the test entities, which no released file reads). NOT covered by the privacy guarantee; "
    "`textkg release` never copies this file."
)


def owner_metrics(prep: Prepared, cfg: RunConfig) -> dict:
    """What goes to ``private_metrics.json``: metrics that read private statements unnoised.

    * ``test``: transductive private runs, the test split under the standard filter (private
      training statements included);
    * ``confidential_test``: inductive ``confidential`` / ``public-only`` runs on a generated split,
      the confidential statements at the test entities (:func:`owner_test_statements`), with the
      owner's filter (every statement of the graph): e.g. ``has_phenotype`` for new HPO terms, the
      number that says whether DP on the annotations beats public-only; beside it
      ``confidential_test_baselines["relation-popularity"]``, the candidates that fill the slot most
      often among the training statements (the owner's, confidential ones included).
    """
    owner: dict = {}
    if prep.private_filter_index is not None:  # transductive: the standard protocol needs private statements
        owner["test"] = evaluate_split(prep, cfg, "test", filter_index=prep.private_filter_index).to_dict()
    held = owner_test_statements(prep.kg, prep.split, cfg)
    if held is not None and len(held):
        everything = FilterIndex.from_triples(prep.kg.all_triples(), prep.kg.num_entities, prep.kg.num_relations)
        owner["confidential_test"] = evaluate_split(prep, cfg, "test", filter_index=everything, triples=held).to_dict()
        # the simplest alternative, on the same statements: the candidates that fill the slot most often in training
        popular = RelationPopularity(
            prep.split.train, num_entities=prep.kg.num_entities, num_relations=prep.kg.num_relations
        )
        owner["confidential_test_baselines"] = {
            "relation-popularity": evaluate_split(
                prep, cfg, "test", filter_index=everything, triples=held, scorer=popular
            ).to_dict()
        }
    return owner


def _placement(
    prep: Prepared,
    cfg: RunConfig,
    run_dir: Path | None = None,
    *,
    progress: bool = False,
    rerank_extra: tuple[str, ...] | None = None,
    rerank_sibling_share: float = 0.0,
) -> dict | None:
    """Placement of the test split's new terms under existing ones
    (:mod:`textkg.evaluation.placement.methods`), with its description baselines; ``None``
    unless the split is inductive and the graph has an ``is_a`` relation.

    Under privacy the ontology that ``close@1``, ``parent-of-nearest`` and the
    combined scorer's vote read is the public training statements (none in
    ``full`` mode), since metrics.json is released; the combination is tuned on
    validation statements, which are public inputs.

    With ``train.placement_cross_encoder`` the cross-encoder is fine-tuned (or read from the cache), copied into
    ``run_dir`` for ``textkg place`` (:data:`CROSS_ENCODER_DIR`) and re-ranks each term's shortlist
    (:mod:`textkg.evaluation.placement.shortlist`); ``test.placement_cross_encoder`` says what it cost.
    ``rerank_extra``: the re-ranker's optional features instead of :func:`rerank_features`'s (an ablation:
    ``benchmarks/investigations/rerank_ablation.py``); ``rerank_sibling_share``: the share of the re-ranker's fitted
    terms drawn in whole sibling batches (:class:`~textkg.evaluation.placement.rerank.RerankConfig`; 0, every term at
    random, is the default: ``benchmarks/investigations/rerank_sibling_fit.py`` measures others)."""
    from textkg.evaluation.placement.evaluate import evaluate_placement
    from textkg.evaluation.placement.methods import placement_queries

    if placement_queries(prep.kg, prep.split) is None:
        return None
    # a private run's hierarchy (close@1, parent-of-nearest, vote) is its public training statements only
    hierarchy = None if prep.private_mask is None else prep.split.train[~prep.private_mask]
    from textkg.evaluation.placement.rerank import RerankConfig
    from textkg.pipeline.placement_names import names_only_placement

    pair_scorer, trained = placement_cross_encoder(prep, cfg, run_dir, progress=progress)
    from textkg.evaluation.placement.shortlist import PairScores, Shortlist

    texts = list(prep.kg.entity_descriptions)
    prep.model.eval()
    features = description_features(prep)
    batch_size = max(1, min(cfg.train.eval_batch_size, 256))
    extra = rerank_features(cfg) if rerank_extra is None else rerank_extra
    with torch.no_grad():
        out = evaluate_placement(
            prep.model,
            prep.kg,
            prep.split,
            text_features=features,
            batch_size=batch_size,
            hierarchy=hierarchy,
            texts=texts,
            rerank=RerankConfig(seed=cfg.train.seed, extra=extra, sibling_share=rerank_sibling_share),
            shortlist=None if pair_scorer is None else Shortlist(PairScores(pair_scorer, texts)),
        )
        extras = cfg.train.placement_extras == "on"
        if extras and out is not None and out.get("placement_selection"):  # the same terms, from their names alone
            names_only = names_only_placement(
                prep,
                cfg,
                features=features,
                encode=lambda texts: _new_description_features(prep, cfg, texts),
                hierarchy=hierarchy,
                reranker=out.get("placement_rerank"),
                batch_size=batch_size,
                pair_scorer=pair_scorer,
            )
            if names_only is not None:
                out["placement_names_only"] = names_only
    if out is not None and trained is not None:
        out["placement_cross_encoder"] = trained
    if out is not None:  # terms textkg place can never propose as parents: they are not training terms
        out["placement_held_out_terms"] = len(torch.cat([prep.split.valid_entities, prep.split.test_entities]).unique())
    return out


#: where a run keeps its placement cross-encoder (safetensors weights, its config and tokenizer) for textkg place
CROSS_ENCODER_DIR = "cross_encoder"
#: a cap on the fine-tuning's wall time (a day): ``train.placement_cross_encoder`` steps are the budget
MAX_CROSS_ENCODER_MINUTES = 24 * 60.0


def placement_cross_encoder(
    prep: Prepared, cfg: RunConfig, run_dir: Path | None, *, progress: bool = False
) -> tuple[PairTextScorer | None, dict | None]:
    """``(pair scorer, what it cost)`` of the run's placement cross-encoder, or ``(None, None)`` when
    ``train.placement_cross_encoder`` is 0: fine-tuned on the training terms' ``is_a`` pairs
    (:func:`textkg.training.adapt_cross.adapt_cross_encoder`, cached by content), copied into
    ``run_dir/cross_encoder`` and loaded from there, as ``textkg place`` loads it."""
    steps = cfg.train.placement_cross_encoder
    if not steps:
        return None, None
    import shutil

    from textkg.encoders.cross_encoder import load_cross_encoder
    from textkg.progress import stage
    from textkg.training.adapt_cross import adapt_cross_encoder
    from textkg.training.features import default_cache_dir

    stage(f"placement cross-encoder: fine-tuning {steps:,} steps on the training is_a pairs", progress=progress)
    summary = adapt_cross_encoder(
        prep.kg,
        prep.split,
        cache_dir=default_cache_dir(),
        split_name=cfg.data.split,
        max_steps=steps,
        max_minutes=MAX_CROSS_ENCODER_MINUTES,  # the steps bound it; the minutes only stop a runaway
        seed=cfg.train.seed,
        progress=progress,
    )
    folder = Path(summary["out"])
    if run_dir is not None:
        # a received run may hold links here: never copy into, nor delete through, one (checked before writing)
        import tempfile

        target = ckpt.folder_in_run(run_dir, CROSS_ENCODER_DIR)
        old = ckpt.folder_in_run(run_dir, CROSS_ENCODER_DIR + ".old")
        shutil.rmtree(old, ignore_errors=True)  # rmtree refuses a link: folder_in_run refused one already
        tmp = Path(tempfile.mkdtemp(dir=run_dir, prefix=".cross_encoder-"))  # new, private: nothing swapped in
        try:
            shutil.copytree(folder, tmp, dirs_exist_ok=True)
            if target.exists():  # set aside, then swapped in: an interruption leaves the old folder or the new one
                target.rename(old)
            tmp.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # only when the swap did not happen
        shutil.rmtree(old, ignore_errors=True)
        folder = target
    scorer = load_cross_encoder(folder)
    kept = ("steps", "planned_steps", "stopped", "loss_first_25", "loss_last_25", "train_seconds", "cached")
    return scorer, {
        **{k: summary.get(k) for k in kept},
        "folder": CROSS_ENCODER_DIR if run_dir is not None else None,
        "weights_sha256": getattr(scorer, "digest", None),
    }


def rerank_features(cfg: RunConfig) -> tuple[str, ...]:
    """The placement re-ranker's optional features for a run: :data:`~textkg.evaluation.placement.rerank.DEFAULT_EXTRA`,
    less ``maxsim`` when the run's text encoder is not ``bert`` (``maxsim`` reads the packaged MiniLM's word
    vectors; a ``glove-bow`` or ``flair`` run does not load a second encoder for them, and ``textkg place``
    on such a run does not either: the saved re-ranker lists its features)."""
    from textkg.evaluation.placement.rerank import DEFAULT_EXTRA

    encoder = getattr(cfg.model, "encoder", None)
    if encoder in (None, "bert"):  # structural runs' description features are MiniLM's already
        return DEFAULT_EXTRA
    return tuple(f for f in DEFAULT_EXTRA if f != "maxsim")


def neighbour_vote_block(prep: Prepared, cfg: RunConfig) -> dict | None:
    """The description-kNN vote for new entities (:mod:`textkg.evaluation.neighbour_vote`): alone
    (a baseline) and added to the model with a weight chosen on the validation subset that
    selected the model. ``None`` unless the split is inductive, has validation statements and the
    model reads descriptions. Under privacy the vote reads the public training statements only,
    and under ``full`` there are none: skipped, with the reason. One scoring pass over the
    validation subset ranks every weight; one over the test split ranks the model, the vote and
    the chosen combination."""
    from textkg.evaluation.metrics import RankingMetrics
    from textkg.evaluation.neighbour_vote import (
        DEFAULT_SPREAD_WEIGHTS,
        DEFAULT_WEIGHTS,
        choose_weights,
        rank_weights,
        weights_key,
    )
    from textkg.evaluation.placement.methods import placement_queries

    if cfg.data.split != "inductive" or not len(prep.split.valid) or getattr(prep.model, "text", None) is None:
        return None
    if cfg.train.neighbour_vote == "off" or (
        cfg.train.neighbour_vote == "auto" and placement_queries(prep.kg, prep.split) is not None
    ):
        return None
    if cfg.privacy.mode == "full":
        return {"skipped": "every training statement is private: the vote has no public statement to read"}
    vote = neighbour_vote_of(prep)
    prep.model.eval()

    def ranks(which: str, triples: torch.Tensor, weights, spread_weights) -> dict:
        return rank_weights(
            prep.model,
            vote,
            triples,
            filter_index=prep.filter_index,
            candidates=candidate_entities(prep.kg, prep.split, which, cfg.train.candidates),
            weights=weights,
            spread_weights=spread_weights,
            batch_size=max(1, min(cfg.train.eval_batch_size, 256)),
            exclude_query=cfg.train.exclude_query,
        )

    max_valid = cfg.train.valid_max_triples
    valid = ranks(
        "valid", seeded_subset(prep.split.valid, max_valid, cfg.train.seed), DEFAULT_WEIGHTS, DEFAULT_SPREAD_WEIGHTS
    )
    by_weights = {
        (w, m): float(torch.cat(valid[weights_key(w, m)]).reciprocal().mean())
        for m in DEFAULT_SPREAD_WEIGHTS
        for w in DEFAULT_WEIGHTS
    }
    weight, spread_weight = choose_weights(by_weights)
    test_triples = prep.split.test
    test = ranks("test", test_triples, [weight], [spread_weight])
    masks = _subset_masks(test_triples, prep.split.train_entities, prep.kg)

    def block(key: str) -> dict:
        head, tail = test[key]
        d = RankingMetrics.from_ranks(head, tail).to_dict()
        out = {k: d[k] for k in ("mrr", "mr", "hits@1", "hits@3", "hits@10", "num_triples")}
        for name in ("answer_seen", "answer_unseen"):
            mask = masks.get(name)
            if isinstance(mask, QueryMask):
                sub = RankingMetrics.from_query_mask(head, tail, mask).to_dict()
                out[name] = {k: sub[k] for k in ("mrr", "hits@1", "hits@10")}
        return out

    return {
        "method": "the k nearest training entities by description vote for their own answers (new query "
        "entities only); the spread passes each candidate the votes of its spread_k nearest training "
        "entities by description (a seen query's own answers stand in for its vote); "
        "combined = standardised model score + weight x vote + spread_weight x spread",
        "k": vote.k,
        "spread_k": vote.spread_k,
        "temperature": vote.temperature,
        "weight": weight,
        "spread_weight": spread_weight,
        "chosen_on": f"validation MRR on {max_valid or 'all'} validation statements (the model-selection subset)",
        "valid_mrr_by_weight": {weights_key(w, m): v for (w, m), v in by_weights.items()},
        "vote_only": block("vote_only"),
        "combined": block(weights_key(weight, spread_weight)),
    }


def _placement_known_links(prep: Prepared, cfg: RunConfig) -> dict | None:
    """:func:`textkg.evaluation.placement.known_links.placement_with_known_links` of the run's model."""
    from textkg.evaluation.placement.known_links import placement_with_known_links

    statements = None if prep.private_mask is None else prep.split.train[~prep.private_mask]  # public ones only
    with torch.no_grad():
        return placement_with_known_links(prep.model, prep.kg, prep.split, statements=statements)


def neighbour_vote_of(prep: Prepared):
    """The run's :class:`~textkg.evaluation.neighbour_vote.NeighbourVote`: frozen description
    features, and the training statements it may read (the public ones under privacy)."""
    from textkg.evaluation.neighbour_vote import NeighbourVote

    graph = prep.split.train if prep.private_mask is None else prep.split.train[~prep.private_mask]
    return NeighbourVote(
        description_features(prep), graph, prep.split.train_entities, num_relations=prep.kg.num_relations
    )


def description_features(prep: Prepared) -> torch.Tensor:
    """``(num_entities, D)`` frozen description features: the model's own pooled ones if
    it has them, else the default ``bert`` encoder's (cached on disk)."""
    text = getattr(prep.model, "text", None)
    if text is not None and getattr(text, "module", None) is None and hasattr(text, "text_text_features"):
        return text.text_text_features.cpu()  # the votes and baselines read them on the CPU
    from textkg.encoders import cached_encode, get_encoder
    from textkg.training.features import default_cache_dir

    return cached_encode(get_encoder("bert"), entity_texts(prep.kg), cache_dir=default_cache_dir()).float()


def _new_description_features(prep: Prepared, cfg: RunConfig, texts: list[str]) -> torch.Tensor:
    """``(n, D)`` features of new texts in :func:`description_features`' space (the model's own
    frozen pooled encoder, else the default ``bert`` encoder's; cached on disk)."""
    from textkg.training.unseen_structure import pooled_features

    if pooled_features(prep.model) is not None:
        from textkg.training.features import text_inputs

        inputs = text_inputs(cfg.model, texts, seed=cfg.train.seed, autoencoder=prep.autoencoder)
        return inputs["text_features"].float().cpu()
    from textkg.encoders import cached_encode, get_encoder
    from textkg.training.features import default_cache_dir

    return cached_encode(get_encoder("bert"), texts, cache_dir=default_cache_dir()).float()


def link_rerank_of(prep: Prepared, cfg: RunConfig, vote_block: dict | None, config=None) -> dict | None:
    """``test.link_rerank`` (:mod:`textkg.pipeline.link_rerank`) over the first stage ``vote_block`` chose
    (``test.neighbour_vote``; computed here when ``None``, e.g. for a run evaluated before the re-ranker)."""
    from textkg.pipeline.link_rerank import MAX_FIT_TRIPLES, link_rerank_report

    vote_block = neighbour_vote_block(prep, cfg) if vote_block is None else vote_block
    voters = None if vote_block is None or "skipped" in vote_block else neighbour_vote_of(prep)
    valid = seeded_subset(prep.split.valid, MAX_FIT_TRIPLES, cfg.train.seed)
    return link_rerank_report(prep, cfg, vote_block, vote=voters, valid=valid, config=config)


def extra_test_blocks(prep: Prepared, cfg: RunConfig, *, progress: bool = False, run_dir: Path | None = None) -> dict:
    """What the post-run report adds to ``metrics.json``'s ``test`` block after the ranking metrics, in
    this order (each only where it applies); ``progress``: a stage line before each (where the time goes)."""
    from textkg.progress import stage

    out: dict = {}
    stage("placement of the held-out terms (where it applies)", progress=progress)
    # inductive splits of graphs with an is_a relation only
    placement = _placement(prep, cfg, run_dir, progress=progress)
    if placement is not None:
        out.update(placement)  # placement, placement_baselines[, placement_combined, placement_selection]
    stage("the description neighbour vote (where it applies)", progress=progress)
    vote = neighbour_vote_block(prep, cfg)  # inductive splits with descriptions only
    if vote is not None:
        out["neighbour_vote"] = vote
        stage("the link-prediction re-ranker over the vote's top answers", progress=progress)
        out["link_rerank"] = link_rerank_of(prep, cfg, vote)
    # inductive splits only: test.k_shot, test.k_shot_selection. Not by default on a graph with a placement task
    # (an ontology: thousands of new terms made it the slowest part of the README's run); evaluate --k-shot gives it
    k_shot = k_shot_report(prep, cfg) if placement is None else None
    if k_shot is not None:
        out.update(k_shot)
    stage("placement with the terms' annotations (where it applies)", progress=progress)
    # ontologies: placement with the terms' annotations (train.placement_extras: off leaves it out)
    placed = _placement_known_links(prep, cfg) if cfg.train.placement_extras == "on" else None
    if placed is not None:
        out["placement_known_links"] = placed
    return out


def final_valid(prep: Prepared, cfg: RunConfig, progress: bool) -> dict | None:
    """Validation metrics of the selected model, on the same seeded subset that
    selected it (``train.valid_max_triples``; ``num_triples`` says how many)."""
    if not len(prep.split.valid):
        return None
    return _flat(evaluate_split(prep, cfg, "valid", max_triples=cfg.train.valid_max_triples, progress=progress))


def _flat(result) -> dict:
    d = result.to_dict()
    return {k: d[k] for k in ("mrr", "mr", "hits@1", "hits@3", "hits@10", "num_triples")}


def fusion_weights_block(model) -> dict:
    fn = getattr(model, "fusion_weights", None)
    return {"fusion_weights": fn()} if callable(fn) else {}


def evaluate_run(
    run_dir: Path,
    *,
    progress: bool = True,
    exclude_query: bool | None = None,
    device: str | torch.device = "auto",
    k_shot: tuple[int, ...] | None = None,
    link_rerank: bool = False,
    placement: bool = False,
) -> dict:
    """Re-evaluate a finished run's best model on its validation and test splits.

    ``exclude_query``: override the run's ``train.exclude_query`` protocol.
    ``k_shot``: also the k-shot protocol at these numbers of known links (:func:`k_shot_report`;
    inductive runs only); the choice it makes on validation is saved in the run
    (:func:`save_k_shot_choice`), so ``predict --known-links`` uses it. ``link_rerank``: also fit and
    choose the link re-ranker (:mod:`textkg.pipeline.link_rerank`) and save its choice for ``predict``.
    ``placement``: also run the placement report again (:func:`_placement`, this version's code) and save its
    ``test.placement*`` blocks in the run's ``metrics.json`` (:func:`save_placement`), which ``place`` reads.
    ``device``: where to evaluate (a name as for ``--device``, or a :class:`torch.device`);
    not the run's ``train.device``, which may name a device this machine lacks.
    """
    if not isinstance(device, torch.device):
        device = resolve_device(device, field="device")
    from textkg.pipeline.run_dir import METRICS, is_bundle, open_run

    run_dir = Path(run_dir)
    cfg = open_run(run_dir).config
    if exclude_query is not None:  # an evaluation protocol choice, not a training one
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, exclude_query=exclude_query))
    if k_shot is not None or link_rerank or placement:  # each writes its choice back into metrics.json
        ckpt.folder_in_run(run_dir, files=[METRICS])  # a link there is refused before the work, not after it
    prep = prepare(cfg, run_dir, device=device)
    ckpt.load_run_weights(prep.model, run_dir)
    out = {
        "device": describe_device(device),
        "exclude_query": cfg.train.exclude_query,
        "valid": _flat(evaluate_split(prep, cfg, "valid", progress=progress)) if len(prep.split.valid) else None,
        "test": evaluate_split(prep, cfg, "test", progress=progress).to_dict(),
    }
    if placement:
        from textkg.evaluation.placement.methods import placement_queries

        if placement_queries(prep.kg, prep.split) is None:  # before anything is computed or saved
            raise ConfigError(
                "--placement needs a run on an inductive split of an ontology with an is_a relation", field="placement"
            )
    # every report first, then every save: an error (or Ctrl-C) in a report leaves metrics.json as it was
    saves: list = []
    if k_shot is not None:
        k_report = k_shot_report(prep, cfg, k_shot)
        if k_report is None:
            raise ConfigError("--k-shot needs a run on an inductive split (new entities)", field="k_shot")
        out["test"].update(k_report)
        saves.append(("saved_k_shot_choice", lambda: save_k_shot_choice(run_dir, k_report, k_shot)))
    if link_rerank:
        from textkg.pipeline.link_rerank import save_link_rerank

        saved = (open_run(run_dir).metrics() or {}).get("test") or {}
        out["test"]["link_rerank"] = block = link_rerank_of(prep, cfg, saved.get("neighbour_vote"))
        if block and "skipped" not in block:
            chosen: dict = block
            saves.append(("saved_link_rerank", lambda: save_link_rerank(run_dir, chosen)))
        else:
            out["saved_link_rerank"] = None
    if placement:
        # a release bundle's files are listed with their hashes in RELEASE.json: its cross_encoder/ is not replaced
        report = _placement(prep, cfg, None if is_bundle(run_dir) else run_dir, progress=progress)
        assert report is not None  # placement_queries was checked above
        out["test"].update(report)
        saves.append(("saved_placement", lambda: save_placement(run_dir, report)))
    for key, save in saves:
        out[key] = save()
    return out


def save_placement(run_dir: Path, report: dict) -> str | None:
    """Write the placement report's blocks (``placement``, ``placement_selection``, ...) into the run's
    ``metrics.json`` ``test`` (atomically, strict JSON; the blocks it replaces are the earlier report's), so that
    ``textkg place`` uses the new choice; ``None`` (nothing written) for a run without ``metrics.json`` or a
    release bundle (its files are listed with their hashes in ``RELEASE.json``)."""
    from textkg.pipeline.run_dir import METRICS, is_bundle, open_run

    metrics = open_run(run_dir).metrics()
    if metrics is None or is_bundle(run_dir):
        return None
    earlier = {  # the earlier report's blocks go (one it made and this one does not would be stale)
        k: v
        for k, v in (metrics.get("test") or {}).items()
        if not k.startswith("placement") or k == "placement_known_links"  # that block is not the report's
    }
    metrics["test"] = {**earlier, **report}
    path = Path(run_dir) / METRICS
    ckpt.atomic_write_json(path, metrics)
    return str(path)
