"""The inductive split reads ``holdout_types`` from the graph's info when not given."""

import pytest
import torch

from textkg.data import KnowledgeGraph, make_split
from textkg.errors import DataError


def _kg(info: dict) -> KnowledgeGraph:
    n, r, m = 30, 2, 120
    g = torch.Generator().manual_seed(0)
    triples = torch.unique(
        torch.stack(
            [
                torch.randint(n, (m,), generator=g),
                torch.randint(r, (m,), generator=g),
                torch.randint(n, (m,), generator=g),
            ],
            dim=1,
        ),
        dim=0,
    )
    return KnowledgeGraph(
        name="typed",
        entities=tuple(f"e{i}" for i in range(n)),
        relations=("r0", "r1"),
        entity_names=tuple(f"e{i}" for i in range(n)),
        entity_descriptions=tuple(f"entity {i}" for i in range(n)),
        relation_texts=("r0", "r1"),
        triples={"all": triples},
        entity_types=tuple("a" if i % 3 else "b" for i in range(n)),
        source="typed.pt",
        info=info,
    )


def test_holdout_types_from_info_equal_the_argument():
    from_info = make_split(_kg({"holdout_types": ["b"]}), "inductive", seed=3, valid_fraction=0.2, test_fraction=0.2)
    given = make_split(_kg({}), "inductive", seed=3, valid_fraction=0.2, test_fraction=0.2, holdout_types=["b"])
    assert from_info.extra["holdout_types"] == ["b"]
    for name in ("train", "valid", "test", "valid_entities", "test_entities"):
        assert torch.equal(getattr(from_info, name), getattr(given, name)), name


def test_holdout_types_in_info_must_be_a_list():
    # a bare string would otherwise be read as its characters
    with pytest.raises(DataError, match="must be a list of entity types") as err:
        make_split(_kg({"holdout_types": "b"}), "inductive", seed=0)
    assert err.value.field == "holdout_types" and err.value.file == "typed.pt"
