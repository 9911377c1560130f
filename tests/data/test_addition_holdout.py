"""Validation terms drawn as an ontology's real additions come: whole sibling batches (issue 37)."""

from __future__ import annotations

import pytest
import torch

from textkg.data.addition_holdout import sibling_batches
from textkg.data.graph import KnowledgeGraph
from textkg.data.splits import make_split
from textkg.errors import ConfigError
from textkg.evaluation.placement.combination import evaluate_combined
from textkg.evaluation.placement.methods import (
    cosine_scorer,
    parent_of_nearest_scorer,
    placement_queries,
    rank_placement,
)


def _ontology(num_parents: int = 60, siblings: int = 4) -> KnowledgeGraph:
    """Two roots; ``num_parents`` parents under both; ``siblings`` leaf children under each parent."""
    names = ["R1", "R2"] + [f"P{i}" for i in range(num_parents)]
    names += [f"C{i}_{j}" for i in range(num_parents) for j in range(siblings)]
    ids = {n: k for k, n in enumerate(names)}
    rows = [(ids[f"P{i}"], 0, ids[r]) for i in range(num_parents) for r in ("R1", "R2")]
    rows += [(ids[f"C{i}_{j}"], 0, ids[f"P{i}"]) for i in range(num_parents) for j in range(siblings)]
    return KnowledgeGraph(
        name="siblings",
        entities=tuple(names),
        relations=("is_a",),
        entity_names=tuple(names),
        entity_descriptions=tuple(names),
        relation_texts=("is a",),
        triples={"all": torch.tensor(rows)},
    )


def _leaf_children(kg: KnowledgeGraph, parent: str) -> list[int]:
    p = kg.entities.index(parent)
    rows = kg.triples["all"]
    return sorted(rows[rows[:, 2] == p][:, 0].tolist())


def test_sibling_batches_lists_whole_groups_emptying_first() -> None:
    kg = _ontology(num_parents=5, siblings=3)
    rows = kg.triples["all"]
    # P0 keeps one child that is not a candidate: its group does not empty it and comes after the others
    allowed = torch.tensor([e for e in range(kg.num_entities) if kg.entities[e] != "C0_0"])
    order = sibling_batches(rows, 0, allowed, seed=3)
    assert len(order) == len(set(order)) == 14
    groups = [order[i : i + 3] for i in range(0, 12, 3)]
    assert sorted(map(sorted, groups)) == sorted(_leaf_children(kg, f"P{i}") for i in range(1, 5))
    assert order[12:] == [kg.entities.index("C0_1"), kg.entities.index("C0_2")]
    assert "R1" not in {kg.entities[e] for e in order}  # parents with children are never listed
    assert sibling_batches(rows, 0, allowed, seed=3) == order


def test_split_keeps_the_test_terms_and_holds_out_leaf_parents() -> None:
    kg = _ontology()
    random = make_split(kg, "inductive", seed=0, min_neighbors=1, valid_holdout="random")
    batches = make_split(kg, "inductive", seed=0, min_neighbors=1, valid_holdout="sibling-batches")
    assert torch.equal(random.test_entities, batches.test_entities)
    assert len(batches.valid_entities) == len(random.valid_entities)
    assert batches.extra["valid_holdout"] == "sibling-batches" and random.extra["valid_holdout"] == "random"

    def emptied(split) -> int:  # validation terms whose parent has no training child left
        parents_in_train = set(split.train[:, 2].tolist())
        rows = kg.triples["all"]
        held = set(split.valid_entities.tolist())
        return sum(1 for c, _, p in rows.tolist() if c in held and p not in parents_in_train)

    assert emptied(batches) >= len(batches.valid_entities) // 2 > emptied(random)


def test_default_comes_from_the_graph_and_bad_names_are_refused() -> None:
    kg = _ontology()
    tagged = KnowledgeGraph(**{**kg.__dict__, "info": {"valid_holdout": "sibling-batches"}})
    assert make_split(tagged, "inductive", min_neighbors=1).extra["valid_holdout"] == "sibling-batches"
    assert make_split(kg, "inductive", min_neighbors=1).extra["valid_holdout"] == "random"
    with pytest.raises(ConfigError, match="sibling-batches"):
        make_split(kg, "inductive", valid_holdout="siblings")


def _features(kg: KnowledgeGraph, *, seed: int = 0) -> torch.Tensor:
    """A child reads like its parent plus a signature its siblings share: its siblings are nearer to it than
    its parent is (so ``description-nn`` ranks them first), and ``parent-of-nearest`` finds the parent
    through them, as long as they are in training."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(kg.num_entities, 64, generator=g)
    signature: dict[str, torch.Tensor] = {}
    for e, name in enumerate(kg.entities):
        if name.startswith("C"):
            parent = name[1:].split("_")[0]
            sig = signature.setdefault(parent, torch.randn(64, generator=g))
            x[e] = x[kg.entities.index(f"P{parent}")] + 1.2 * sig + 0.3 * torch.randn(64, generator=g)
    return x


def _chosen(kg: KnowledgeGraph, split, features: torch.Tensor) -> str:
    """The method ``textkg`` chooses on this split's validation terms (the pipeline's own selection)."""
    edges = split.train[:, [0, 2]]
    cosine = cosine_scorer(features)
    valid = placement_queries(kg, split, which="valid")
    out = evaluate_combined(
        {"description": cosine},
        valid,
        valid,
        num_entities=kg.num_entities,
        baselines={"description-nn": cosine, "parent-of-nearest": parent_of_nearest_scorer(features, edges)},
    )
    return out["placement_selection"]["chosen"]


def test_oracle_sibling_batch_validation_chooses_what_holds_on_real_additions() -> None:
    """On a release that adds whole sibling batches, the vote through siblings fails and the description
    wins; random hold-out keeps the siblings in training and so chooses the vote. The sibling-batch
    validation chooses the method that is right on the additions."""
    kg = _ontology()
    features = _features(kg)
    random = make_split(kg, "inductive", seed=0, min_neighbors=1, valid_holdout="random")
    batches = make_split(kg, "inductive", seed=0, min_neighbors=1, valid_holdout="sibling-batches")
    # the real additions: whole sibling groups of other parents, held out together (another seed's draw)
    additions = make_split(
        kg, "inductive", seed=7, valid_fraction=0.3, min_neighbors=1, valid_holdout="sibling-batches"
    )
    queries = placement_queries(kg, additions, which="valid")
    emptied = set(queries.parents.tolist()) - set(additions.train[:, 2].tolist())
    keep = torch.tensor([p in emptied for p in queries.parents.tolist()])
    assert keep.sum() >= 20
    queries = type(queries)(**{**queries.__dict__, "terms": queries.terms[keep], "parents": queries.parents[keep]})
    queries = type(queries)(**{**queries.__dict__, "group_of": queries.group_of[keep]})
    edges = additions.train[:, [0, 2]]
    on_additions = {
        "description-nn": rank_placement(cosine_scorer(features), queries, num_entities=kg.num_entities).mrr,
        "parent-of-nearest": rank_placement(
            parent_of_nearest_scorer(features, edges), queries, num_entities=kg.num_entities
        ).mrr,
    }
    assert on_additions["description-nn"] > on_additions["parent-of-nearest"] + 0.3

    assert _chosen(kg, random, features) == "parent-of-nearest"
    assert _chosen(kg, batches, features) in ("description-nn", "combined")  # combined = description alone here


def test_the_run_config_chooses_the_draw_and_auto_follows_the_graph() -> None:
    from textkg.training.config import DataConfig, RunConfig
    from textkg.training.private_split import split_for_privacy

    kg = _ontology()
    tagged = KnowledgeGraph(**{**kg.__dict__, "info": {"valid_holdout": "sibling-batches"}})
    auto = split_for_privacy(tagged, RunConfig(data=DataConfig(split="inductive")))[0]
    forced = split_for_privacy(tagged, RunConfig(data=DataConfig(split="inductive", valid_holdout="random")))[0]
    assert auto.extra["valid_holdout"] == "sibling-batches" and forced.extra["valid_holdout"] == "random"
    with pytest.raises(ConfigError, match="valid_holdout"):
        DataConfig(valid_holdout="siblings")
