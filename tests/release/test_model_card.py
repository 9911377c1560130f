"""The model card tells a data officer what a person with k statements gets (issue 41)."""

from __future__ import annotations

import math

from textkg.release import group_privacy_lines, model_card


def _dp_metrics(epsilon: float, delta: float) -> dict:
    privacy = {
        "guarantee": "dp",
        "mode": "full",
        "epsilon": epsilon,
        "delta": delta,
        "sample_rate": 0.01,
        "steps": 100,
        "max_grad_norm": 1.0,
        "noise_multiplier": 1.0,
        "private_size_source": "--private-size",
        "public_inputs": ["entity descriptions"],
    }
    return {"privacy": privacy, "test": {"mrr": 0.1, "hits@10": 0.2, "num_triples": 10}, "dataset": "toy"}


def test_group_privacy_follows_dwork_and_roth():
    (line, _) = group_privacy_lines(1.0, 1e-5, sizes=(5,))
    assert f"k = 5: (5, {5 * math.exp(4) * 1e-5:.2g})" in line  # (kε, k·e^{(k−1)ε}·δ)


def test_a_delta_above_one_is_shown_as_one():
    (line, _) = group_privacy_lines(4.0, 1e-5, sizes=(10,))
    assert "k = 10: (40, 1)" in line  # 10·e^36·1e-5 > 1: no protection left


def test_the_dp_model_card_carries_it():
    card = model_card(_dp_metrics(1.0, 1e-5), {"model_name": "transe"}, "dp")
    assert "group privacy" in card and "k = 5: (5, 0.0027)" in card


def test_the_card_names_the_accountant_that_gave_its_epsilon():
    """A PLD run's card said "RDP accounting converted with Canonne–Kamath–Steinke" (issue 53, item 2)."""
    cards = {}
    for accountant, other in (("rdp", "epsilon_pld"), ("pld", "epsilon_rdp")):
        metrics = _dp_metrics(1.0, 1e-5)
        metrics["privacy"].update(accountant=accountant, **{other: 1.5})
        cards[accountant] = model_card(metrics, {"model_name": "transe"}, "dp")
    assert "ε by PLD accounting" in cards["pld"] and "ε by RDP accounting" not in cards["pld"]
    rdp_beside = "; RDP accounting (converted with Canonne–Kamath–Steinke 2020) of the same ledger gives ε = 1.5"
    assert rdp_beside in cards["pld"]
    assert "ε by RDP accounting" in cards["rdp"] and "ε by PLD accounting" not in cards["rdp"]
    assert "; PLD accounting of the same ledger gives ε = 1.5" in cards["rdp"]
    assert all("textkg account --from" in card for card in cards.values())
