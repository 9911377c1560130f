"""DP-Flames' second attack: a holder reads another holder's entities through the global model."""

from __future__ import annotations

import pytest
import torch

from textkg.errors import ConfigError
from textkg.federated.attacks import (
    STRUCTURAL_TABLE,
    CuriousHolder,
    client_entity_attack,
    others_update,
    victim_audit_entities,
)


def _round(rows: int = 40, dim: int = 4):
    """A FedAvg round on planted updates: the attacker (weight 0.5) moves rows 0-9, the victim rows 0-19."""
    sent = {STRUCTURAL_TABLE: torch.zeros(rows, dim)}
    own = torch.zeros(rows, dim)
    own[:10] = 1.0
    victim = torch.zeros(rows, dim)
    victim[:20] = 2.0
    new = {STRUCTURAL_TABLE: 0.5 * own + 0.5 * victim}
    return sent, {STRUCTURAL_TABLE: own}, new


def test_the_attacker_recovers_the_others_update_exactly():
    sent, own, new = _round()
    others = others_update(sent, own, new, own_weight=0.5)
    assert torch.allclose(others[:20], torch.ones(20, 4, dtype=torch.float64))  # 0.5 * victim's 2.0
    assert others[20:].abs().max() == 0


def test_the_victims_rows_give_its_entities_away_and_the_own_update_is_subtracted():
    sent, own, new = _round()
    index = torch.arange(40)
    members, non = torch.arange(0, 20), torch.arange(20, 40)
    res = client_entity_attack(sent, own, new, own_weight=0.5, struct_index=index, members=members, non_members=non)
    assert res.auc == 1.0 and res.direction == 1
    # rows 10-19 moved only by the victim; subtracting the own update makes rows 0-9 look the same
    scores = others_update(sent, own, new, own_weight=0.5).norm(dim=1)
    assert torch.allclose(scores[:10], scores[10:20])


def test_the_weight_must_be_a_share():
    sent, own, new = _round()
    with pytest.raises(ConfigError, match="own_weight"):
        others_update(sent, own, new, own_weight=1.0)


def test_victim_members_may_be_in_the_attackers_statements_but_not_a_third_partys():
    victim = torch.tensor([[0, 0, 1], [2, 0, 3]])
    third = torch.tensor([[3, 1, 4]])
    members, non = victim_audit_entities(victim, third, torch.arange(7))
    assert members.tolist() == [0, 1, 2]  # 3 is a third party's too
    assert non.tolist() == [5, 6]


@pytest.mark.slow
def test_a_holder_sees_another_holders_entities_in_the_clear_but_not_under_dp(tmp_path):
    """Played as the adversary on hpo-small (a structural TransE, no text encoder: seconds): OMIM
    attacks ORPHA through the global model of round 2. Non-private, ORPHA's single-statement
    entities stand out; under record-level DP-SGD (epsilon = 1 per holder) the same attack is at chance."""
    pytest.importorskip("flwr")
    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser
    from textkg.federated.engines import FederatedConfig, federate

    results = {}
    for label, extra in [("none", []), ("dp", ["--privacy", "full", "--target-epsilon", "1"])]:
        argv = ["train", "--dataset", "hpo-small", "--split", "inductive", "--model", "transe", "--dim", "32",
                "--lr", "0.01", "--epochs", "2", "--batch-size", "512", "--valid-max-triples", "20", "--no-progress",
                *extra]  # fmt: skip
        cfg = build_run_config(build_parser().parse_args(argv))
        spy = CuriousHolder("OMIM", "ORPHA")
        fed = FederatedConfig(partition="source", clients=None, rounds=2, aggregation="fedavg")
        federate(cfg, fed, tmp_path / label, progress=False, on_upload=spy)
        spy.finish(torch.load(tmp_path / label / "best_model.pt"))  # round 2, read from the final global model
        assert [r["round"] for r in spy.results] == [1, 2]
        results[label] = spy.results[-1]
    assert results["none"]["num_members"] >= 50, results["none"]
    assert results["none"]["auc"] > 0.8, results["none"]  # 0.94 at seed 0
    assert results["dp"]["auc"] < 0.62, results["dp"]  # 0.55 at seed 0; the null's sd is about 0.04
