"""The curious server's row-movement attack: oracles on planted uploads, member selection, errors."""

from __future__ import annotations

import pytest
import torch

from textkg.errors import ConfigError
from textkg.federated.attacks import STRUCTURAL_TABLE, audit_entities, row_change_scores, server_entity_attack


def _upload(moved: torch.Tensor, rows: int = 40, dim: int = 4, scale: float = 1.0):
    sent = {STRUCTURAL_TABLE: torch.zeros(rows, dim), "relation_embeddings": torch.zeros(2, dim)}
    table = torch.zeros(rows, dim)
    table[moved] = scale
    return sent, {STRUCTURAL_TABLE: table, "relation_embeddings": torch.ones(2, dim)}


def test_scores_are_row_change_norms():
    sent, up = _upload(torch.tensor([1, 3]), scale=0.5)
    s = row_change_scores(sent, up)
    assert s.shape == (40,) and s[1] == pytest.approx(1.0) and s[0] == 0  # ||(0.5,)*4|| = 1


def test_rows_that_moved_give_the_members_away():
    index = torch.arange(40)  # entity e has row e
    members, non = torch.arange(0, 20), torch.arange(20, 40)
    sent, up = _upload(members)
    res = server_entity_attack(sent, up, struct_index=index, members=members, non_members=non)
    assert res.auc == 1.0 and res.tpr_at_1pct_fpr == 1.0 and res.epsilon_lower_bound >= 0
    assert (res.num_members, res.num_non_members) == (10, 10) and res.direction == 1  # held-out halves


def test_the_direction_is_learned_on_the_other_half():
    """Members whose rows move LESS (as with Adam and many negatives) are found just as well."""
    index = torch.arange(40)
    members, non = torch.arange(0, 20), torch.arange(20, 40)
    sent, up = _upload(non)
    res = server_entity_attack(sent, up, struct_index=index, members=members, non_members=non)
    assert res.auc == 1.0 and res.direction == -1


def test_nothing_moved_is_chance():
    index = torch.arange(40)
    sent, up = _upload(torch.tensor([], dtype=torch.long))
    res = server_entity_attack(sent, up, struct_index=index, members=torch.arange(20), non_members=torch.arange(20, 40))
    assert res.auc == 0.5 and res.epsilon_lower_bound == 0.0


def test_members_occur_in_exactly_one_own_statement_and_no_shared_one():
    own = torch.tensor([[0, 0, 1], [1, 0, 2], [3, 0, 4], [5, 0, 5]])
    shared = torch.tensor([[4, 1, 6]])
    members, non = audit_entities(own, shared, torch.arange(10))
    # 0: one statement; 1: two; 2: one; 3: one; 4: shared too; 5: a self-loop counts twice
    assert members.tolist() == [0, 2, 3]
    assert non.tolist() == [7, 8, 9]  # 6 is in a shared statement


def test_a_model_without_a_structural_table_is_a_clear_error():
    with pytest.raises(ConfigError, match="structural"):
        row_change_scores({"relation_embeddings": torch.zeros(2, 2)}, {"relation_embeddings": torch.zeros(2, 2)})


@pytest.mark.slow
def test_the_server_sees_a_holders_entities_in_the_clear_but_not_under_dp(tmp_path):
    """Played as the adversary: one round on hpo-small, the server scores ORPHA's upload.
    Non-private, the rows give ORPHA's single-statement entities away; under record-level
    DP-SGD (epsilon = 1) the same attack is near chance."""
    pytest.importorskip("flwr")
    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser
    from textkg.federated.engines import FederatedConfig, federate

    results = {}
    for label, extra in [("none", []), ("dp", ["--privacy", "full", "--target-epsilon", "1"])]:
        cfg = build_run_config(
            build_parser().parse_args(
                [
                    "train",
                    "--dataset",
                    "hpo-small",
                    "--split",
                    "inductive",
                    "--model",
                    "fused-transe",
                    "--epochs",
                    "1",
                    "--batch-size",
                    "512",
                    "--valid-max-triples",
                    "50",
                    "--no-progress",
                    *extra,
                ]
            )
        )

        def observe(holder, sent, upload, label=label):
            if holder.name == "ORPHA":
                members, non = audit_entities(holder.own, holder.shared, holder.model.seen_entities)
                results[label] = server_entity_attack(
                    sent, upload, struct_index=holder.model.structural.struct_index, members=members, non_members=non
                )

        federate(
            cfg,
            FederatedConfig(partition="source", clients=None, rounds=1, aggregation="fedavg"),
            tmp_path / label,
            progress=False,
            on_upload=observe,
        )
    assert results["none"].auc > 0.7, results["none"]  # 0.82 in benchmarks/federated_attack.py
    assert results["dp"].auc < 0.65, results["dp"]
