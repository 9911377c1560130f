"""``--partition relation`` under DP reads public inputs only (issue 51 item 4).

Without DP the relation partition balances statement counts (largest relation first onto the lightest
holder), so one private statement more or less can swap two holders' relations. Under any DP run
(record- or client-level) the holders' relations come from the relation names and the public seed
alone: neighbouring datasets (one private statement added or removed) give the same assignment.
"""

from __future__ import annotations

import pytest
import torch

from textkg.data.graph import KnowledgeGraph
from textkg.federated import make_partition

RELS = ("r0", "r1", "r2", "r3")
ENTS = tuple(f"e{i}" for i in range(6))
#: r0 and r1 have 3 statements each, r2 two, r3 one: greedy balancing gives r0, r2 to one holder
TRAIN = torch.tensor(
    [[0, 0, 1], [1, 0, 2], [2, 0, 3], [0, 1, 4], [1, 1, 5], [2, 1, 0], [3, 2, 1], [4, 2, 2], [5, 3, 0]]
)


def _kg():
    return KnowledgeGraph(
        name="toy",
        entities=ENTS,
        relations=RELS,
        entity_names=ENTS,
        entity_descriptions=ENTS,
        relation_texts=RELS,
        triples={"all": TRAIN},
    )


def _owners(train: torch.Tensor, **kwargs) -> dict[int, int]:
    part = make_partition(_kg(), train, "relation", num_clients=2, seed=3, **kwargs)
    return {r: c for (_, r, _), c in zip(train.tolist(), part.assignment.tolist(), strict=True)}


NEIGHBOURS = {
    "remove-one": TRAIN[1:],  # r0 loses a statement: greedy now puts r1 first
    "add-one": torch.cat([TRAIN, torch.tensor([[3, 3, 4], [4, 3, 5]])[:1]]),
}


@pytest.mark.parametrize("neighbour", list(NEIGHBOURS))
def test_under_dp_neighbouring_datasets_give_the_same_relation_holders(neighbour):
    assert _owners(TRAIN) != _owners(NEIGHBOURS["remove-one"])  # the attack's premise: greedy reads the counts
    mine, theirs = _owners(TRAIN, public_only=True), _owners(NEIGHBOURS[neighbour], public_only=True)
    assert mine == theirs and sorted(set(mine.values())) == [0, 1]


@pytest.mark.parametrize(
    "flags",
    [("--privacy", "full", "--noise-multiplier", "1.0"), ("--client-noise-multiplier", "1.0")],
    ids=["record", "client"],
)
def test_a_dp_federation_partitions_by_public_inputs(monkeypatch, flags):
    """The runner asks for the public rule whenever the run is DP (record- or client-level)."""
    from textkg.cli.config_loading import build_run_config
    from textkg.cli.federation import _federated_config
    from textkg.cli.main import build_parser
    from textkg.federated import partition, runner

    seen = []
    real = partition.make_partition

    def spy(*args, **kwargs):
        seen.append(kwargs.get("public_only"))
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "make_partition", spy)
    base = ["federate", "--dataset", "hpo-small", "--split", "inductive", "--model", "transe", "--dim", "8"]
    args = build_parser().parse_args([*base, "--partition", "relation", "--clients", "2", *flags])
    cfg, fed = build_run_config(args), _federated_config(args)
    runner.prepare_federation(cfg, fed)
    assert seen == [True]
