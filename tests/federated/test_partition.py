"""Partitions of the training statements among data holders."""

from __future__ import annotations

import pytest
import torch

from textkg.data.graph import KnowledgeGraph
from textkg.errors import ConfigError, DataError
from textkg.federated import SHARED, make_partition

ENTS = ("HP:1", "HP:2", "HP:3", "OMIM:10", "ORPHA:20", "DECIPHER:30", "NCBIGene:7")
TYPES = ("phenotype",) * 3 + ("disease",) * 3 + ("gene",)
RELS = ("is_a", "has_phenotype", "gene_has_phenotype", "gene_associated_with_disease")
TRAIN = torch.tensor([[1, 0, 0], [2, 0, 0], [3, 1, 0], [3, 1, 1], [4, 1, 2], [5, 1, 1], [6, 2, 2], [6, 3, 4]])


def _kg(entities=ENTS, types=TYPES):
    return KnowledgeGraph(
        name="toy",
        entities=entities,
        relations=RELS,
        entity_names=entities,
        entity_descriptions=entities,
        relation_texts=RELS,
        triples={"all": TRAIN},
        entity_types=types,
    )


def test_source_partition_follows_the_disease():
    part = make_partition(_kg(), TRAIN, "source")
    assert part.clients == ("OMIM", "ORPHA", "DECIPHER")
    assert part.assignment.tolist() == [SHARED, SHARED, 0, 0, 1, 2, SHARED, 1]
    assert part.sizes() == {"OMIM": 2, "ORPHA": 2, "DECIPHER": 1, "shared": 3}
    assert part.client_triples(TRAIN, 2).tolist() == [[1, 0, 0], [2, 0, 0], [5, 1, 1], [6, 2, 2]]
    assert part.client_triples(TRAIN, 2, include_shared=False).tolist() == [[5, 1, 1]]


def test_source_needs_hpo():
    kg = _kg(entities=tuple(f"e{i}" for i in range(7)))
    with pytest.raises(ConfigError, match="hpo"):
        make_partition(kg, TRAIN, "source")


def test_random_partition_moves_no_statement_when_one_is_added():
    g = torch.Generator().manual_seed(0)
    train = torch.randint(0, 7, (3000, 3), generator=g) % torch.tensor([7, 4, 7])
    part = make_partition(_kg(), train, "random", num_clients=3, seed=1)
    grown = torch.cat([torch.tensor([[0, 0, 1]]), train])
    assert torch.equal(make_partition(_kg(), grown, "random", num_clients=3, seed=1).assignment[1:], part.assignment)
    sizes = torch.bincount(part.assignment, minlength=3)
    assert int(sizes.sum()) == 3000 and int(sizes.min()) > 0


def test_relation_partition_balances_whole_relations():
    part = make_partition(_kg(), TRAIN, "relation", num_clients=2)
    owner = {}
    for (_, r, _), c in zip(TRAIN.tolist(), part.assignment.tolist(), strict=True):
        assert owner.setdefault(r, c) == c  # a relation belongs to one client
    assert sorted(part.sizes()[c] for c in part.clients) == [4, 4]  # has_phenotype (4) | is_a + genes (2+1+1)
    with pytest.raises(ConfigError, match="relations"):
        make_partition(_kg(), TRAIN, "relation", num_clients=5)


@pytest.mark.parametrize("bad", [None, 1, True, 2.0])
def test_bad_client_counts(bad):
    with pytest.raises(ConfigError, match="clients"):
        make_partition(_kg(), TRAIN, "random", num_clients=bad)


def test_unknown_scheme_lists_the_choices():
    with pytest.raises(ConfigError, match="random, relation, source, column"):
        make_partition(_kg(), TRAIN, "hospital")


def _write(tmp_path, rows):
    path = tmp_path / "clients.tsv"
    path.write_text("".join("\t".join(r) + "\n" for r in rows))
    return path


def _rows(kg, client_of):
    return [
        (kg.entities[h], kg.relations[r], kg.entities[t], client_of(i)) for i, (h, r, t) in enumerate(TRAIN.tolist())
    ]


def test_column_file(tmp_path):
    kg = _kg()
    path = _write(tmp_path, _rows(kg, lambda i: "shared" if i < 2 else ("A" if i % 2 else "B")))
    part = make_partition(kg, TRAIN, "column", column_file=path)
    assert part.clients == ("A", "B") and part.assignment[:2].tolist() == [SHARED, SHARED]
    with pytest.raises(ConfigError, match="2 clients, not 3"):
        make_partition(kg, TRAIN, "column", column_file=path, num_clients=3)


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda rows: rows[:-1], "not listed"),
        (lambda rows: rows + [rows[0]], "listed twice"),
        (lambda rows: [rows[0][:3]] + rows[1:], "4 tab-separated"),
        (lambda rows: [("HP:9",) + rows[0][1:]] + rows[1:], "unknown head"),
        (lambda rows: [rows[0][:3] + ("",)] + rows[1:], "empty client"),
        (lambda rows: [("HP:3", "is_a", "HP:2", "A")] + rows[1:], "not a training statement"),
    ],
)
def test_column_file_errors_name_the_line(tmp_path, edit, match):
    kg = _kg()
    path = _write(tmp_path, edit(_rows(kg, lambda i: "A" if i % 2 else "B")))
    with pytest.raises(DataError, match=match) as err:
        make_partition(kg, TRAIN, "column", column_file=path)
    assert str(path) in str(err.value)


def test_hpo_source_partition_end_to_end():
    from textkg.data import load_dataset, make_split

    kg = load_dataset("hpo-small")
    split = make_split(kg, "inductive")
    part = make_partition(kg, split.train, "source")
    sizes = part.sizes()
    assert sizes["shared"] > 0 and all(sizes[c] > 0 for c in part.clients)
    is_a = kg.relations.index("is_a")
    assert bool((part.assignment[split.train[:, 1] == is_a] == SHARED).all())  # the ontology is shared
