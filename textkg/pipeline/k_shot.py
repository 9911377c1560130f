"""k-shot in the post-run report: new entities with a few known links, and the choice ``textkg evaluate
--k-shot`` saves in the run for ``predict --known-links`` (issue 38).

:func:`k_shot_report` evaluates the protocol of :mod:`textkg.evaluation.k_shot` on a prepared run,
:func:`link_vote_of` builds the link-profile vote from the training statements the run may read, and
:func:`save_k_shot_choice` writes the validation choice into ``metrics.json``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from textkg.data import candidate_entities
from textkg.pipeline.prepared import Prepared, seeded_subset
from textkg.training import checkpoint as ckpt
from textkg.training.config import RunConfig


def k_shot_report(prep: Prepared, cfg: RunConfig, ks: tuple[int, ...] | None = None) -> dict | None:
    """``{"k_shot": {"0": ..., "1": ...}, "k_shot_selection": ...}``: new entities with ``ks`` known links
    (:mod:`textkg.evaluation.k_shot`), the mix of the links chosen on the model-selection validation
    subset; ``None`` unless the split is inductive. The known links are valid and test statements
    (public inputs, as a user's own links are at inference); no training statement is read."""
    from textkg.evaluation.k_shot import DEFAULT_KS, evaluate_k_shot

    if cfg.data.split != "inductive":
        return None
    inter = prep.model.interaction
    try:  # an interaction registered by a user may lack the links' estimates (Interaction.tail_from)
        inter.tail_from(prep.model.relation_embeddings.new_zeros(1, prep.model.dim), prep.model.relation_embeddings[:1])
    except NotImplementedError as exc:
        return {"k_shot_skipped": str(exc)}
    prep.model.eval()
    link_vote, skipped = link_vote_of(prep)
    with torch.no_grad():
        return evaluate_k_shot(
            prep.model,
            valid=seeded_subset(prep.split.valid, cfg.train.valid_max_triples, cfg.train.seed),
            test=prep.split.test,
            seen=prep.split.train_entities,
            filter_index=prep.filter_index,
            valid_candidates=candidate_entities(prep.kg, prep.split, "valid", cfg.train.candidates),
            test_candidates=candidate_entities(prep.kg, prep.split, "test", cfg.train.candidates),
            num_entities=prep.kg.num_entities,
            ks=DEFAULT_KS if ks is None else ks,
            seed=cfg.train.seed,
            batch_size=max(1, min(cfg.train.eval_batch_size, 256)),
            exclude_query=cfg.train.exclude_query,
            temperature=cfg.train.temperature,  # fold-in's softmax at the scale the scores were trained at
            link_vote=link_vote,
            link_vote_skipped=skipped,
        )


def link_vote_of(prep: Prepared):
    """``(LinkVote or None, why not)``: the link-profile vote over the training statements the run
    may read in what it releases (the public ones under privacy; none under ``--privacy full``)."""
    from textkg.evaluation.link_vote import LinkVote

    statements = prep.split.train if prep.private_mask is None else prep.split.train[~prep.private_mask]
    if not len(statements):
        return None, "no public training statement to vote from (every training statement is private)"
    vote = LinkVote(
        statements, prep.split.train_entities, num_entities=prep.kg.num_entities, num_relations=prep.kg.num_relations
    )
    return vote, None


def save_k_shot_choice(run_dir: Path, report: dict, ks: tuple[int, ...]) -> str | None:
    """Write ``report``'s ``k_shot`` and ``k_shot_selection`` into the run's ``metrics.json`` ``test`` block
    (atomically, strict JSON), replacing the ones there, so that every command that reads the run's choices
    (``predict``, ``place``) uses the one made on validation; ``made_by`` says which command made it.
    Returns the file written, or ``None`` when there was no choice to save (no ``k >= 1`` was asked, the
    run has no ``metrics.json``: it has not finished) or the folder is a release bundle (its files are
    listed with their hashes in ``RELEASE.json``, so it is never changed)."""
    from textkg.pipeline.run_dir import METRICS, is_bundle, open_run

    selection = report.get("k_shot_selection") or {}
    metrics = open_run(run_dir).metrics()
    if metrics is None or not selection.get("valid_mrr") or is_bundle(run_dir):
        return None
    selection = {**selection, "made_by": f"textkg evaluate --k-shot {','.join(map(str, ks))}"}
    metrics["test"] = {**(metrics.get("test") or {}), "k_shot": report["k_shot"], "k_shot_selection": selection}
    path = Path(run_dir) / METRICS
    ckpt.atomic_write_json(path, metrics)
    return str(path)
