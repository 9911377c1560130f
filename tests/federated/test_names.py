"""A holder's name becomes a folder under --out: names that would leave it are refused first (exit 2)."""

from __future__ import annotations

import pytest
import torch

from textkg.data.graph import KnowledgeGraph
from textkg.errors import ConfigError, DataError
from textkg.federated import make_partition
from textkg.federated.names import check_name

BAD = ["../x", "..", ".", "/tmp/x", "a/b", "a\\b", ".hidden", "-flag", "a b", "a\nb", "x" * 65, "é", 7]


@pytest.mark.parametrize("name", BAD)
def test_a_name_that_is_not_one_plain_path_component_is_refused(name):
    with pytest.raises(ConfigError, match="not allowed"):
        check_name(name, field="name")


@pytest.mark.parametrize("name", ["OMIM", "domains-a", "client-0", "a.b_c", "x" * 64, "7"])
def test_plain_names_pass(name):
    assert check_name(name, field="name") == name


def test_a_partition_file_naming_a_client_dotdot_is_refused_with_its_line(tmp_path):
    entities, relations = ("a", "b", "c"), ("r",)
    train = torch.tensor([[0, 0, 1], [1, 0, 2]])
    kg = KnowledgeGraph(
        name="toy",
        entities=entities,
        relations=relations,
        entity_names=entities,
        entity_descriptions=entities,
        relation_texts=relations,
        triples={"all": train},
    )
    path = tmp_path / "part.tsv"
    path.write_text("a\tr\tb\tA\nb\tr\tc\t../x\n")
    with pytest.raises(DataError, match="not allowed") as err:
        make_partition(kg, train, "column", column_file=path)
    assert err.value.line == 2 and err.value.field == "client" and err.value.file == str(path)


def test_a_holder_state_file_cannot_leave_the_holder_folder(tmp_path):
    from textkg.federated.checkpointing import holder_state_path, save_holder_state

    assert holder_state_path(tmp_path, "client-0", 3) == tmp_path / "client-0" / "holder-round-3.pt"
    with pytest.raises(ConfigError, match="not allowed"):
        save_holder_state(tmp_path / "clients", "../x", 1, b"state")
    assert not (tmp_path / "x").exists()
