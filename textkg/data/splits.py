"""Transductive and inductive splits, and the candidate entities evaluation ranks.

Every random choice uses a seeded :class:`torch.Generator` over sorted integer
ids, so a split depends only on the graph and the seed (never on
``PYTHONHASHSEED`` or set iteration order).

Protocols (details in ``docs/datasets.md``):

* transductive — the graph's given ``train``/``valid``/``test`` sets; for a
  graph with only ``"all"``, a seeded random triple split in which every
  valid/test entity and relation also occurs in train (offending triples are
  moved to train, in shuffled order, one at a time).
* inductive — the given ``ind-*`` sets; otherwise entities are dropped
  following BLP (Daza, Cochez & Groth, "Inductive Entity Representations from
  Text via Link Prediction", WWW 2021, ``data/utils.py:drop_entities``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import torch

from textkg.data.addition_holdout import BATCH_SHARE, VALID_HOLDOUTS, sibling_batches
from textkg.data.graph import GIVEN_INDUCTIVE_SPLITS, GIVEN_SPLITS, KnowledgeGraph, Split, unique_ids, unique_triples
from textkg.errors import ConfigError, DataError
from textkg.registry import Registry

#: The parent relation whose sibling groups ``valid_holdout="sibling-batches"`` holds out together.
IS_A = "is_a"

#: Relation-count floor used by BLP on FB15k-237; smaller graphs scale it down.
BLP_MIN_RELATION_COUNT = 100


def make_split(
    kg: KnowledgeGraph,
    kind: str,
    *,
    seed: int = 0,
    valid_fraction: float = 0.1,
    test_fraction: float = 0.1,
    min_relation_count: int | None = None,
    min_neighbors: int = 2,
    holdout_types: Sequence[str] | None = None,
    valid_holdout: str | None = None,
) -> Split:
    """Split ``kg`` for training and evaluation.

    Args:
        kg: The graph.
        kind: ``"transductive"`` or ``"inductive"``.
        seed: Seed of a generated split (ignored when the graph ships the split).
        valid_fraction, test_fraction: Share of triples (transductive) or of
            hold-out candidate entities (inductive) to hold out.
        min_relation_count: Inductive: a relation keeps at least this many
            training triples. Default ``min(100, max(1, n_triples // 1000))``
            (100 for FB15k-237 as in BLP, ~20 for ``hpo-small``, 1 for tiny graphs).
        min_neighbors: Inductive: an entity is dropped only if each of its
            neighbours has more than this many distinct neighbours (BLP: 2),
            so none is left with fewer than ``min_neighbors``. At least 1.
        holdout_types: Inductive: only entities of these ``entity_types`` may
            be held out. Default: ``kg.info["holdout_types"]`` (phenotype
            terms for ``hpo``), else every entity.
        valid_holdout: Inductive: how validation entities are drawn. ``random`` (BLP's draw) or
            ``sibling-batches``: up to half of them in whole sibling groups under one ``is_a`` parent,
            often leaving the parent a leaf, as an ontology's real additions come
            (:mod:`textkg.data.addition_holdout`); test entities are the same either way. Default:
            ``kg.info["valid_holdout"]`` (``sibling-batches`` for an ontology file, issue 37), else
            ``random`` (the registered datasets, whose published numbers were measured on it).

    Returns:
        A :class:`Split`; ``extra`` records the protocol and its parameters.

    Raises:
        ConfigError: unknown ``kind`` or impossible parameters.
    """
    if kind not in _BUILDERS:
        raise ConfigError(f"unknown split kind {kind!r}; choose one of {sorted(_BUILDERS.names())}", field="split")
    builder = _BUILDERS.get(kind)
    for name, value in (("valid_fraction", valid_fraction), ("test_fraction", test_fraction)):
        if not 0.0 <= value < 1.0:
            raise ConfigError(f"must be in [0, 1), got {value}", field=name)
    if valid_fraction + test_fraction >= 1.0:
        raise ConfigError("valid_fraction + test_fraction must be < 1", field="test_fraction")
    holdout = valid_holdout if valid_holdout is not None else kg.info.get("valid_holdout", "random")
    if holdout not in VALID_HOLDOUTS:
        raise ConfigError(f"unknown {holdout!r}; choose one of {list(VALID_HOLDOUTS)}", field="valid_holdout")
    return builder(
        kg,
        seed=seed,
        valid_fraction=valid_fraction,
        test_fraction=test_fraction,
        min_relation_count=min_relation_count,
        min_neighbors=min_neighbors,
        holdout_types=holdout_types,
        valid_holdout=holdout,
    )


def candidate_entities(kg: KnowledgeGraph, split: Split, which: str, protocol: str) -> torch.Tensor:
    """Entities ranked against when evaluating ``which`` (sorted ``(c,)`` long).

    Protocols: ``"all"`` every entity of the graph; ``"blp"`` (Daza et al.)
    train ∪ valid entities for ``valid`` and train ∪ valid ∪ test for
    ``test``; ``"split"`` only the entities of the evaluated set's triples.
    """
    if which not in ("valid", "test"):
        raise ConfigError(f"unknown set {which!r}; choose one of ['test', 'valid']", field="which")
    if protocol not in _CANDIDATES:
        raise ConfigError(
            f"unknown candidate protocol {protocol!r}; choose one of {sorted(_CANDIDATES.names())}", field="candidates"
        )
    return _CANDIDATES.get(protocol)(kg, split, which)


def default_min_relation_count(num_triples: int) -> int:
    """``min(100, max(1, num_triples // 1000))``."""
    return min(BLP_MIN_RELATION_COUNT, max(1, num_triples // 1000))


# ---------------------------------------------------------------- helpers


def entities_of(triples: torch.Tensor) -> torch.Tensor:
    if not len(triples):
        return torch.empty(0, dtype=torch.long)
    return unique_ids(triples[:, [0, 2]])


def _union(*tensors: torch.Tensor) -> torch.Tensor:
    parts = [t for t in tensors if t.numel()]
    return unique_triples(torch.cat(parts)) if parts else torch.empty(0, 3, dtype=torch.long)


def _split(kind, train, valid, test, entities, *, seed, extra, filter_triples=None) -> Split:
    train_e, valid_e, test_e = entities
    return Split(
        kind=kind,
        train=train,
        valid=valid,
        test=test,
        train_entities=train_e,
        valid_entities=valid_e,
        test_entities=test_e,
        filter_triples=_union(train, valid, test) if filter_triples is None else filter_triples,
        seed=seed,
        extra=extra,
    )


# ---------------------------------------------------------------- transductive


def _transductive(kg: KnowledgeGraph, *, seed, valid_fraction, test_fraction, **_) -> Split:
    if all(k in kg.triples for k in GIVEN_SPLITS):
        train, valid, test = (kg.triples[k] for k in GIVEN_SPLITS)
        return _split(
            "transductive",
            train,
            valid,
            test,
            (entities_of(train), entities_of(valid), entities_of(test)),
            seed=None,
            extra={"protocol": "given"},
        )
    triples = kg.all_triples()
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(triples), generator=g)
    n_test, n_valid = int(test_fraction * len(triples)), int(valid_fraction * len(triples))
    # label per triple: 0 train, 1 valid, 2 test; held-out triples with an
    # entity/relation unseen in train move to train, in shuffled order.
    label = torch.zeros(len(triples), dtype=torch.long)
    label[perm[:n_test]] = 2
    label[perm[n_test : n_test + n_valid]] = 1
    seen_e = torch.zeros(kg.num_entities, dtype=torch.bool)
    seen_r = torch.zeros(kg.num_relations, dtype=torch.bool)
    in_train = label == 0
    seen_e[triples[in_train][:, [0, 2]].reshape(-1)] = True
    seen_r[triples[in_train][:, 1]] = True
    known_e, known_r = seen_e.tolist(), seen_r.tolist()  # python lists: updated one triple at a time
    held = perm[: n_test + n_valid].tolist()
    rows = triples[perm[: n_test + n_valid]].tolist()
    moved = []
    for i, (h, r, t) in zip(held, rows, strict=True):
        if not (known_e[h] and known_e[t] and known_r[r]):
            moved.append(i)
            known_e[h] = known_e[t] = known_r[r] = True
    if moved:
        label[torch.tensor(moved, dtype=torch.long)] = 0
    train, valid, test = (triples[label == k] for k in (0, 1, 2))
    return _split(
        "transductive",
        train,
        valid,
        test,
        (entities_of(train), entities_of(valid), entities_of(test)),
        seed=seed,
        extra={
            "protocol": "random",
            "valid_fraction": valid_fraction,
            "test_fraction": test_fraction,
            "moved_to_train": len(moved),
        },
    )


# ---------------------------------------------------------------- inductive


def _inductive(
    kg: KnowledgeGraph,
    *,
    seed,
    valid_fraction,
    test_fraction,
    min_relation_count,
    min_neighbors,
    holdout_types,
    valid_holdout: str = "random",
) -> Split:
    if kg.entity_splits is not None and all(k in kg.triples for k in GIVEN_INDUCTIVE_SPLITS):
        train, valid, test = (kg.triples[k] for k in GIVEN_INDUCTIVE_SPLITS)
        ents = tuple(kg.entity_splits[k] for k in GIVEN_INDUCTIVE_SPLITS)
        return _split("inductive", train, valid, test, ents, seed=None, extra={"protocol": "given"})
    if min_neighbors < 1:
        raise ConfigError("must be >= 1 (a neighbour may not be left isolated)", field="min_neighbors")
    triples = kg.all_triples()
    min_rel = default_min_relation_count(len(triples)) if min_relation_count is None else min_relation_count
    if min_rel < 1:
        raise ConfigError("must be >= 1 (every held-out relation must stay in training)", field="min_relation_count")
    if holdout_types is not None:
        types = list(holdout_types)
    else:
        stored = kg.info.get("holdout_types") or []
        if not isinstance(stored, (list, tuple)):
            raise DataError(
                f"the graph's info['holdout_types'] must be a list of entity types, got {stored!r}",
                file=kg.source or None,
                field="holdout_types",
            )
        types = list(stored)
    candidates = _holdout_candidates(kg, triples, types)
    g = torch.Generator().manual_seed(seed)
    order = candidates[torch.randperm(len(candidates), generator=g)].tolist()
    n_test, n_valid = int(test_fraction * len(candidates)), int(valid_fraction * len(candidates))

    def drop(sequence: list[int], target: int) -> list[int]:
        return _drop_entities(
            triples,
            kg.num_entities,
            kg.num_relations,
            sequence,
            target,
            min_neighbors=min_neighbors,
            min_relation_count=min_rel,
        )

    if valid_holdout == "sibling-batches" and IS_A in kg.relations:
        # the same test entities as the random draw (the greedy pass accepts them in the same order), then
        # up to BATCH_SHARE of the validation entities in whole sibling groups, the rest at random
        tested = drop(order, n_test)
        batches = sibling_batches(triples, kg.relations.index(IS_A), candidates, seed=seed)
        is_tested = set(tested)
        first = drop(tested + [e for e in batches if e not in is_tested], n_test + int(BATCH_SHARE * n_valid))
        taken = set(first)
        dropped = drop(first + [e for e in order if e not in taken], n_test + n_valid)
    else:
        valid_holdout = "random"
        dropped = drop(order, n_test + n_valid)
    test_e = torch.tensor(sorted(dropped[:n_test]), dtype=torch.long)
    valid_e = torch.tensor(sorted(dropped[n_test:]), dtype=torch.long)
    is_test = torch.zeros(kg.num_entities, dtype=torch.bool)
    is_valid = torch.zeros(kg.num_entities, dtype=torch.bool)
    is_test[test_e], is_valid[valid_e] = True, True
    touches_test = is_test[triples[:, 0]] | is_test[triples[:, 2]]
    touches_valid = (is_valid[triples[:, 0]] | is_valid[triples[:, 2]]) & ~touches_test
    in_train = ~(touches_test | touches_valid)
    train, valid, test = triples[in_train], triples[touches_valid], triples[touches_test]
    extra = {
        "protocol": "blp-drop-entities",
        "valid_fraction": valid_fraction,
        "test_fraction": test_fraction,
        "min_relation_count": min_rel,
        "min_neighbors": min_neighbors,
        "holdout_types": types or None,
        "valid_holdout": valid_holdout,
        "num_candidates": len(candidates),
        "requested": {"valid": n_valid, "test": n_test},
        "held_out": {"valid": len(valid_e), "test": len(test_e)},
    }
    return _split("inductive", train, valid, test, (entities_of(train), valid_e, test_e), seed=seed, extra=extra)


def _holdout_candidates(kg: KnowledgeGraph, triples: torch.Tensor, types: list[str]) -> torch.Tensor:
    present = entities_of(triples)
    if not types:
        return present
    if kg.entity_types is None:
        raise ConfigError("the graph has no entity_types to restrict hold-out entities by", field="holdout_types")
    known = sorted(set(kg.entity_types))
    unknown = [t for t in types if t not in known]
    if unknown:
        raise ConfigError(f"unknown entity type(s) {unknown}; the graph has {known}", field="holdout_types")
    wanted = set(types)
    mask = torch.tensor([t in wanted for t in kg.entity_types], dtype=torch.bool)
    return present[mask[present]]


def _drop_entities(
    triples: torch.Tensor,
    num_entities: int,
    num_relations: int,
    order: list[int],
    target: int,
    *,
    min_neighbors: int,
    min_relation_count: int,
) -> list[int]:
    """Entities removed in ``order`` as BLP's ``drop_entities`` does (first removed = test).

    An entity is removed only if every neighbour currently has more than
    ``min_neighbors`` distinct neighbours and every relation keeps at least
    ``min_relation_count`` remaining triples afterwards.
    """
    rows = triples.tolist()
    adjacency: list[dict[int, int]] = [{} for _ in range(num_entities)]
    incident: list[list[int]] = [[] for _ in range(num_entities)]
    rel_count = [0] * num_relations
    for i, (h, r, t) in enumerate(rows):
        rel_count[r] += 1
        incident[h].append(i)
        if t != h:
            incident[t].append(i)
            adjacency[h][t] = adjacency[h].get(t, 0) + 1
            adjacency[t][h] = adjacency[t].get(h, 0) + 1
    alive = [True] * len(rows)
    dropped: list[int] = []
    for e in order:
        if len(dropped) >= target:
            break
        if any(len(adjacency[m]) <= min_neighbors for m in adjacency[e]):
            continue
        removed = Counter(rows[i][1] for i in incident[e] if alive[i])
        if any(rel_count[r] - c < min_relation_count for r, c in removed.items()):
            continue
        for m in adjacency[e]:
            del adjacency[m][e]
        adjacency[e] = {}
        for i in incident[e]:
            alive[i] = False
        for r, c in removed.items():
            rel_count[r] -= c
        dropped.append(e)
    return dropped


# ---------------------------------------------------------------- candidates


def _candidates_all(kg: KnowledgeGraph, split: Split, which: str) -> torch.Tensor:
    return torch.arange(kg.num_entities, dtype=torch.long)


def _candidates_blp(kg: KnowledgeGraph, split: Split, which: str) -> torch.Tensor:
    parts = [split.train_entities, split.valid_entities]
    if which == "test":
        parts.append(split.test_entities)
    return unique_ids(torch.cat(parts))


def _candidates_split(kg: KnowledgeGraph, split: Split, which: str) -> torch.Tensor:
    return entities_of(split.triples(which))


SplitBuilder = Callable[..., Split]
CandidateProtocol = Callable[[KnowledgeGraph, Split, str], torch.Tensor]

#: split builders (``data.split``), in the order configs and the CLI list them
_BUILDERS: Registry[SplitBuilder] = Registry("split kind", field="split", sort=False)
#: candidate protocols (``train.candidates``), in the order configs and the CLI list them
_CANDIDATES: Registry[CandidateProtocol] = Registry("candidate protocol", field="candidates", sort=False)


def register_split(name: str, builder: SplitBuilder, *, replace: bool = False) -> SplitBuilder:
    """Make ``builder`` available as ``data.split: name`` (and ``make_split(kg, name)``).

    ``builder(kg, *, seed, valid_fraction, test_fraction, min_relation_count, min_neighbors, valid_holdout,
    holdout_types)`` returns a :class:`Split`. A taken name raises
    (:class:`textkg.registry.DuplicateNameError`) unless ``replace=True``.
    """
    return _BUILDERS.register(name, builder, replace=replace)


def register_candidate_protocol(name: str, protocol: CandidateProtocol, *, replace: bool = False) -> CandidateProtocol:
    """Make ``protocol(kg, split, which)`` → sorted candidate ids available as ``train.candidates: name``."""
    return _CANDIDATES.register(name, protocol, replace=replace)


register_split("transductive", _transductive)
register_split("inductive", _inductive)
register_candidate_protocol("blp", _candidates_blp)
register_candidate_protocol("all", _candidates_all)
register_candidate_protocol("split", _candidates_split)


def list_splits() -> tuple[str, ...]:
    """The registered split kinds, in registration order (``transductive``, ``inductive``)."""
    return tuple(_BUILDERS.names())


def list_candidate_protocols() -> tuple[str, ...]:
    """The registered candidate protocols, in registration order (``blp``, ``all``, ``split``)."""
    return tuple(_CANDIDATES.names())
