"""A split that a private run may use: drawn from public inputs only.

A generated split (hpo's, or a BLP directory without its ``ind-*`` / ``valid`` /
``test`` files) decides which statements are training statements and, in an
inductive split, which entities are held out. Drawn from every statement, it
reads the private ones: two neighbouring datasets then give different held-out
entities, a different public vocabulary (``graph.json``'s ``train_entities``)
and different valid/test counts, all released. So under privacy:

* ``confidential`` / ``public-only``: the split is drawn from the unrestricted
  (public) statements alone, with the same protocol and seed; every confidential
  statement is then a training statement, except (inductive) one that touches a
  held-out entity, which is dropped unread. No confidential statement can move a
  held-out entity, a vocabulary row or a valid/test statement.
* ``full``: every training statement is private, so no statement may draw the
  split. It is drawn from public inputs alone (:func:`public_draw`): held-out
  entities are a seeded sample of the vocabulary (of the hold-out types), and a
  statement's transductive part is a seeded hash of its own ids. Which statements
  are evaluation statements (public) and which are training statements (private)
  is then a per-statement rule, so adding one training statement moves nothing else.
  BLP's degree constraints (``min_neighbors``, ``min_relation_count``) read the
  statements and are not applied.

Given splits are public inputs (docs/privacy.md, "Threat model") and pass through, with one
exception: an inductive split given as ``ind-*.tsv`` files without its entity lists
(``train-ents.txt``, ``dev-ents.txt``, ``test-ents.txt``) takes its entity partition from the
private ``ind-train.tsv`` (a training entity is one a training statement names), so one private
statement can move an entity between the partition's sets, a structural row and the test counts.
Under privacy it is refused (:func:`check_given_partition`).
"""

from __future__ import annotations

import dataclasses

import torch

from textkg.data import make_split
from textkg.data.blp_format import PARTITION_FROM_STATEMENTS, missing_entity_lists
from textkg.data.graph import KnowledgeGraph, Split, unique_triples
from textkg.training.config import RunConfig
from textkg.training.private_training import select_confidential

#: the fractions of :func:`textkg.data.make_split`'s defaults
VALID_FRACTION = TEST_FRACTION = 0.1


def split_for_privacy(kg: KnowledgeGraph, cfg: RunConfig) -> tuple[Split, tuple[str, ...]]:
    """``(split, reasons)``: the run's split, and why it voids a ``dp`` label (empty when it does not).

    Args:
        kg: the graph.
        cfg: the run's config; ``cfg.privacy.mode`` decides how a generated split is drawn.

    Returns:
        The split (``Split.extra["drawn_from"]`` says from what, for a generated one) and the
        reasons to add to the privacy block's ``not_dp_because``.
    """
    holdout = None if cfg.data.valid_holdout == "auto" else cfg.data.valid_holdout  # None: the graph's default
    split = make_split(kg, cfg.data.split, seed=cfg.data.split_seed, valid_holdout=holdout)
    if cfg.privacy.mode != "none" and split.seed is None and split.kind == "inductive":
        check_given_partition(kg, cfg)
    if cfg.privacy.mode == "none" or split.seed is None:  # not private, or given as files: public
        return split, ()
    if cfg.privacy.unit == "entity":  # the unit statements left the graph before the split: it is drawn from
        return split, ()  # public statements only (textkg.data.units.split_units)
    if cfg.privacy.mode == "full":
        return public_draw(kg, kind=cfg.data.split, seed=cfg.data.split_seed), ()
    triples = kg.all_triples()
    confidential = select_confidential(triples, kg.relations, cfg.privacy, seed=cfg.train.seed, entities=kg.entities)
    public_kg = dataclasses.replace(kg, triples={"all": triples[~confidential]}, entity_splits=None)
    split = make_split(public_kg, cfg.data.split, seed=cfg.data.split_seed, valid_holdout=holdout)
    private = triples[confidential]
    if split.kind == "inductive":
        held = torch.zeros(kg.num_entities, dtype=torch.bool)
        held[split.valid_entities] = True
        held[split.test_entities] = True
        private = private[~(held[private[:, 0]] | held[private[:, 2]])]  # dropped unread, never counted
    train = unique_triples(torch.cat([split.train, private]))
    extra = {**split.extra, "drawn_from": "unrestricted statements only (confidential ones added to train)"}
    return dataclasses.replace(split, train=train, extra=extra), ()


def check_given_partition(kg: KnowledgeGraph, cfg: RunConfig) -> None:
    """Refuse a given inductive split whose entity partition is read off the private statements.

    :func:`textkg.pipeline.prepared.load_graph_and_split` refuses it earlier, before any statement is
    read (``load_blp_directory(require_entity_lists=...)``); this check covers a graph loaded without.

    Raises:
        DataError: the graph's inductive split came without ``*-ents.txt`` lists
            (``kg.info["entity_partition"]``), naming the folder and the files it needs.
    """
    if kg.info.get("entity_partition") == PARTITION_FROM_STATEMENTS:
        raise missing_entity_lists(str(kg.info.get("inductive_dir")), f"--privacy {cfg.privacy.mode}")


def owner_test_statements(kg: KnowledgeGraph, split: Split, cfg: RunConfig) -> torch.Tensor | None:
    """The confidential statements a generated inductive split dropped unread at a test entity.

    Under ``confidential`` / ``public-only`` a confidential statement that touches a held-out
    entity is no training statement and no public test statement (:func:`split_for_privacy`).
    Its owner may still rank it: ``private_metrics.json`` (never released) holds that test, e.g.
    ``has_phenotype`` for new HPO terms when the annotations are confidential. Nothing released
    reads these statements.

    Returns:
        ``(M, 3)`` statements touching a test entity and no validation entity, or ``None`` when the
        run has no such set (not private by statement, not inductive, or a split given as files).
    """
    if cfg.privacy.mode not in ("confidential", "public-only") or split.kind != "inductive" or split.seed is None:
        return None
    if cfg.privacy.unit == "entity":  # no confidential statement is left in the graph
        return None
    triples = kg.all_triples()
    triples = triples[
        select_confidential(triples, kg.relations, cfg.privacy, seed=cfg.train.seed, entities=kg.entities)
    ]
    is_test = torch.zeros(kg.num_entities, dtype=torch.bool)
    is_valid = torch.zeros(kg.num_entities, dtype=torch.bool)
    is_test[split.test_entities], is_valid[split.valid_entities] = True, True
    touches_test = is_test[triples[:, 0]] | is_test[triples[:, 2]]
    touches_valid = is_valid[triples[:, 0]] | is_valid[triples[:, 2]]
    return unique_triples(triples[touches_test & ~touches_valid])


def public_draw(kg: KnowledgeGraph, *, kind: str, seed: int) -> Split:
    """A split drawn from public inputs only: the entity vocabulary, its types and each statement's own ids.

    Args:
        kg: the graph (its vocabulary and ``entity_types`` are public).
        kind: ``"inductive"``: 10 % / 10 % of the hold-out candidates (entities of
            ``kg.info["holdout_types"]``, else every entity), a seeded permutation of their ids,
            are valid / test entities, and a statement touching one is a valid / test statement;
            ``"transductive"``: a statement is a test / valid statement iff a seeded hash of its own
            ``(h, r, t)`` (:func:`statement_uniforms`) falls below 0.1 / 0.2.
        seed: the split seed.

    Returns:
        The split; ``extra["protocol"]`` is ``"public-draw"``.
    """
    from textkg.data.splits import entities_of  # the split module's own helper
    from textkg.training.private_training import statement_uniforms

    triples = kg.all_triples()
    if kind == "inductive":
        stored = kg.info.get("holdout_types") or []
        types = {str(t) for t in stored} if isinstance(stored, (list, tuple)) else set()
        if types and kg.entity_types is not None:
            candidates = torch.tensor([i for i, t in enumerate(kg.entity_types) if t in types], dtype=torch.long)
        else:
            candidates = torch.arange(kg.num_entities)
        order = candidates[torch.randperm(len(candidates), generator=torch.Generator().manual_seed(seed))]
        n_test, n_valid = int(TEST_FRACTION * len(order)), int(VALID_FRACTION * len(order))
        test_e, valid_e = order[:n_test].sort().values, order[n_test : n_test + n_valid].sort().values
        is_test = torch.zeros(kg.num_entities, dtype=torch.bool)
        is_valid = torch.zeros(kg.num_entities, dtype=torch.bool)
        is_test[test_e], is_valid[valid_e] = True, True
        touches_test = is_test[triples[:, 0]] | is_test[triples[:, 2]]
        touches_valid = (is_valid[triples[:, 0]] | is_valid[triples[:, 2]]) & ~touches_test
        train = triples[~(touches_test | touches_valid)]
        valid, test = triples[touches_valid], triples[touches_test]
        train_e = torch.nonzero(~(is_test | is_valid)).reshape(-1)
    else:
        u = statement_uniforms(triples, seed=seed + 104729)
        test = triples[u < TEST_FRACTION]
        valid = triples[(u >= TEST_FRACTION) & (u < TEST_FRACTION + VALID_FRACTION)]
        train = triples[u >= TEST_FRACTION + VALID_FRACTION]
        train_e, valid_e, test_e = entities_of(train), entities_of(valid), entities_of(test)
    return Split(
        kind="inductive" if kind == "inductive" else "transductive",
        train=train,
        valid=valid,
        test=test,
        train_entities=train_e,
        valid_entities=valid_e,
        test_entities=test_e,
        filter_triples=unique_triples(torch.cat([train, valid, test])),
        seed=seed,
        extra={
            "protocol": "public-draw",
            "drawn_from": "public inputs only (the vocabulary and its types; each statement's own ids)",
            "valid_fraction": VALID_FRACTION,
            "test_fraction": TEST_FRACTION,
        },
    )
