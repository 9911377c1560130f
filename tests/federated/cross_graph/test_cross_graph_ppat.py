"""``exchange.method: ppat`` (FKGE's PPAT): noisy votes, accounting, disjoint teachers, determinism, errors, a run."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import yaml
from scipy import stats

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.federated.cross_graph.config import CrossGraphConfig, load_holders
from textkg.federated.cross_graph.ledger import UNIT, PPATLedger, recompute_epsilon
from textkg.federated.cross_graph.ppat import (
    PPATConfig,
    PPATHost,
    gnmax_event,
    gnmax_rdp,
    noisy_argmax,
    ppat_noise,
    split_noise,
    teacher_parts,
    vote_histogram,
)
from textkg.federated.cross_graph.runner import run_cross_graph
from textkg.privacy.accountant import RDPAccountant
from textkg.privacy.rdp import DEFAULT_ORDERS

SMALL = {"teachers": 4, "iterations": 3, "queries": 5, "student_steps": 5}


def _ppat(holders, graphs, **exchange) -> dict:
    return holders(*graphs, method="ppat", ppat=dict(SMALL), **exchange)


def _run(config: dict, out, **kwargs) -> dict:
    return run_cross_graph(CrossGraphConfig.from_dict(config), out, progress=False, **kwargs)


# -- the host's mechanism -------------------------------------------------------------------------
def test_vote_histogram_and_noisy_argmax_match_an_oracle():
    g = torch.Generator().manual_seed(0)
    votes = torch.randint(0, 2, (7, 50), generator=g)  # 7 teachers, 50 queries, 1 = real
    counts = vote_histogram(votes)
    oracle = np.stack([np.bincount(votes[:, j].numpy(), minlength=2) for j in range(50)])
    assert counts.tolist() == oracle.tolist() and (counts.sum(1) == 7).all()
    assert noisy_argmax(counts, sigma=0.0, noise=torch.zeros(50, 2)).tolist() == oracle.argmax(1).tolist()
    z = torch.randn(50, 2, generator=g, dtype=torch.float64)
    want = (oracle + 3.0 * z.numpy()).argmax(1)
    assert noisy_argmax(counts, sigma=3.0, noise=z).tolist() == want.tolist()
    tie = torch.tensor([[2, 2]])  # without noise a tie goes to fake
    assert noisy_argmax(tie, sigma=0.0, noise=torch.zeros(1, 2)).item() == 0
    with pytest.raises(ValueError):
        noisy_argmax(counts, sigma=1.0, noise=torch.zeros(3, 2))


def test_noisy_argmax_noise_has_the_stated_scale():
    """P(real wins | counts fake 6, real 4, σ) = Φ(−2/(σ√2)): the noise is N(0, σ²) on each count."""
    n, sigma = 40_000, 3.0
    counts = torch.tensor([[6, 4]]).repeat(n, 1)
    z = torch.from_numpy(np.random.default_rng(1).standard_normal((n, 2)))
    share = noisy_argmax(counts, sigma=sigma, noise=z).double().mean().item()
    want = stats.norm.cdf(-2.0 / (sigma * math.sqrt(2.0)))
    assert share == pytest.approx(want, abs=4 * math.sqrt(want * (1 - want) / n))


# -- accounting -----------------------------------------------------------------------------------
def test_gnmax_accounting_matches_a_hand_computation():
    sigma, queries, delta = 40.0, 150, 1e-5
    acc = RDPAccountant()
    acc.step(gnmax_event(sigma=sigma, queries=queries))
    orders = np.asarray(acc.orders)
    hand = queries * orders / sigma**2  # Papernot et al. 2018, Prop. 8, composed (Mironov 2017, Prop. 1)
    np.testing.assert_allclose(acc.rdp(), hand, rtol=1e-12)
    np.testing.assert_allclose(gnmax_rdp(sigma=sigma, queries=queries, orders=orders), hand, rtol=1e-12)
    # CKS 2020 (arXiv:2004.00010v3), Prop. 12, minimised over the grid by hand
    eps = hand + np.log1p(-1 / orders) - (math.log(delta) + np.log(orders)) / (orders - 1)
    assert acc.get_epsilon(delta=delta) == pytest.approx(float(eps.min()), rel=1e-12)


def test_gnmax_accounting_matches_dp_accounting():
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.rdp import RdpAccountant

    sigma, queries, delta = 25.0, 80, 1e-5
    theirs = RdpAccountant(list(DEFAULT_ORDERS))
    # GNMax at count noise σ: the Gaussian mechanism at L2 sensitivity √2, i.e. noise multiplier σ/√2
    theirs.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma / math.sqrt(2)), queries))
    ours = RDPAccountant()
    ours.step(gnmax_event(sigma=sigma, queries=queries))
    assert ours.get_epsilon(delta=delta) == pytest.approx(theirs.get_epsilon(delta), rel=1e-6)


def test_a_partys_releases_and_answers_together_meet_its_budget():
    """split_noise is exact: the party's events have the RDP of one Gaussian at the calibrated σ."""
    releases, answers_per, share = 2, 30, 0.3
    rows, votes = split_noise(1.7, releases=releases, vote_exchanges=releases, queries=answers_per, vote_share=share)
    assert releases / rows**2 + 2 * releases * answers_per / votes**2 == pytest.approx(1 / 1.7**2, rel=1e-12)
    assert split_noise(0.0, releases=2, vote_exchanges=2, queries=3, vote_share=0.5) == (0.0, 0.0)
    rows, votes = ppat_noise(
        target_epsilon=4.0, delta=1e-5, releases=releases, vote_exchanges=releases, queries=answers_per, vote_share=0.5
    )
    ledger = PPATLedger("p", delta=1e-5, noise_multiplier=rows, votes_noise=votes, clip=1.0, secret=True)
    for step in range(releases):
        ledger.record_release(step=2 * step + 1, to="q", rows=10)
        ledger.record_votes(step=2 * step + 2, to="q", answers=answers_per)
    block = ledger.block()
    assert 3.99 < block["epsilon"] <= 4.0 and block["releases"] == 2 and block["answers"] == 60
    assert block["epsilon"] == pytest.approx(recompute_epsilon(ledger.state_dict()), abs=0)
    assert block["unit"] == UNIT and block["data_dependent_analysis"] is False


# -- the teachers ---------------------------------------------------------------------------------
def test_teachers_parts_are_disjoint_and_one_row_changes_one_teacher():
    names = [f"e{i}" for i in range(60)]
    parts = teacher_parts(names, 5, session="a|b")
    assert parts.tolist() == teacher_parts(names[::-1], 5, session="a|b").flip(0).tolist()  # by id alone
    assert teacher_parts(names[:30], 5, session="a|b").tolist() == parts[:30].tolist()  # removing rows moves none
    config = PPATConfig(teachers=5, teacher_steps=3)
    rows = torch.randn(60, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    host = PPATHost(rows, parts, config, seed=11)
    seen = torch.cat(host.real)
    assert len(seen) == 60 and len({tuple(r.tolist()) for r in seen}) == 60  # a partition: each row once
    for t, real in enumerate(host.real):
        assert torch.equal(real, rows[parts == t].float())
    changed = rows.clone()
    changed[7] = 10.0  # one aligned entity's embedding replaced
    other = PPATHost(changed, parts, config, seed=11)
    fake = torch.randn(40, 4, generator=torch.Generator().manual_seed(1))
    host.fit(fake)
    other.fit(fake)

    def same(t: int) -> bool:
        pairs = zip(host.teachers[t].parameters(), other.teachers[t].parameters(), strict=True)
        return all(torch.equal(p, q) for p, q in pairs)

    differ = [t for t in range(5) if not same(t)]
    assert differ == [int(parts[7])]  # only the teacher whose part holds the row
    queries = torch.randn(200, 4, generator=torch.Generator().manual_seed(2))
    moved = (host.votes(queries) - other.votes(queries)).abs()
    assert moved.max() <= 1 and (moved.sum(1) <= 2).all()  # each count by at most 1: L1 2, L2 √2


# -- the exchange ---------------------------------------------------------------------------------
def test_ppat_run_writes_both_blocks_composes_them_in_the_ledger_and_backtracks(tmp_path, two_graphs, holders):
    messages: list[dict] = []
    summary = _run(_ppat(holders, two_graphs, target_epsilon=2.0), tmp_path / "out", on_message=messages.append)
    assert len(messages) == 4 and summary["exchange"]["method"] == "ppat"
    for m in messages:
        assert m["object"] == "translated rows" and m["rows"].dtype == torch.float64
        assert m["privacy"]["unit"] == UNIT and m["privacy"]["guarantee"] == "dp" and 0 < m["privacy"]["epsilon"] <= 2
        (reply,) = m["replies"]
        assert reply["object"] == "noisy teacher labels" and reply["from"] == m["to"] and reply["to"] == m["from"]
        assert reply["labels"].shape == (SMALL["iterations"] * SMALL["queries"],)
        assert set(reply["labels"].tolist()) <= {0, 1} and 0 < reply["privacy"]["epsilon"] <= 2.0
    for name in ("alpha", "beta"):
        metrics = json.loads((tmp_path / "out" / name / "metrics.json").read_text())
        ledger = json.loads((tmp_path / "out" / name / "ledger.json").read_text())
        objects = sorted(m["object"] for m in ledger["sent"])
        assert objects == ["aligned rows", "aligned rows", "noisy teacher labels", "noisy teacher labels"]
        assert all(m["privacy"]["delta"] == 1e-5 and m["privacy"]["epsilon"] > 0 for m in ledger["sent"])
        assert ledger["epsilon"] == pytest.approx(recompute_epsilon(ledger), abs=0) and 1.9 < ledger["epsilon"] <= 2.0
        block = metrics["privacy"]
        assert block["releases"] == 2 and block["answers"] == 2 * 15 and block["votes_noise"] > 0
        assert len(metrics["exchanges"]) == 2
        if all(e["kept"] != "update" for e in metrics["exchanges"]):  # backtracking: never below alone's track
            assert metrics["federated"] == metrics["alone"]


def test_ppat_is_deterministic_from_a_seed_and_resumes_with_the_same_ledgers(tmp_path, two_graphs, holders):
    config = _ppat(holders, two_graphs, target_epsilon=3.0, reproducible_noise=3)
    first: list[dict] = []
    _run(config, tmp_path / "one", on_message=first.append)
    again: list[dict] = []
    _run(config, tmp_path / "two", on_message=again.append)
    for a, b in zip(first, again, strict=True):
        assert torch.equal(a["rows"], b["rows"]) and torch.equal(a["replies"][0]["labels"], b["replies"][0]["labels"])

    def crash(message):
        if message["step"] == 2:
            raise KeyboardInterrupt("crash")

    with pytest.raises(KeyboardInterrupt):
        _run(config, tmp_path / "crashed", on_message=crash)
    _run(config, tmp_path / "crashed", resume=True)
    for name in ("alpha", "beta"):
        full = json.loads((tmp_path / "one" / name / "metrics.json").read_text())
        resumed = json.loads((tmp_path / "crashed" / name / "metrics.json").read_text())
        assert resumed["ledger"] == full["ledger"] and resumed["federated"] == full["federated"]
        assert resumed["privacy"]["guarantee"] == "simulation" and resumed["privacy"]["epsilon_if_secret"] <= 3.0


def test_without_noise_ppat_says_no_guarantee(tmp_path, two_graphs, holders):
    _run(_ppat(holders, two_graphs, noise_multiplier=0.0), tmp_path / "out")
    block = json.loads((tmp_path / "out" / "alpha" / "metrics.json").read_text())["privacy"]
    assert block["guarantee"] == "none" and block["epsilon"] is None and block["votes_noise"] == 0


@pytest.mark.parametrize(
    ("exchange", "field"),
    [
        ({"method": "pate"}, "method"),
        ({"method": "ppat", "ppat": {"teachers": 1}}, "ppat.teachers"),
        ({"method": "ppat", "ppat": {"vote_share": 1.0}}, "ppat.vote_share"),
        ({"method": "ppat", "ppat": {"students": 3}}, "ppat"),
        ({"ppat": {"teachers": 8}}, "ppat"),  # settings of a method not chosen
    ],
)
def test_ppat_config_errors_name_the_file_and_field_and_exit_2(tmp_path, two_graphs, holders, exchange, field):
    path = tmp_path / "holders.yaml"
    path.write_text(yaml.safe_dump(holders(*two_graphs, **exchange)))
    with pytest.raises(ConfigError) as err:
        load_holders(path)
    assert err.value.file == str(path) and err.value.field == field and err.value.line is not None
    if field == "method":
        assert "procrustes, ppat" in err.value.message  # the choices come from the registry
    assert main(["federate", "--mode", "cross-graph", "--holders", str(path), "--out", str(tmp_path / "o")]) == 2


def test_ppat_with_statement_unit_or_processes_exits_2(tmp_path, two_graphs, holders):
    path = tmp_path / "holders.yaml"
    config = holders(*two_graphs, method="ppat", unit="statement", target_epsilon=None)
    del config["exchange"]["target_epsilon"]
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match="unit entity"):
        load_holders(path)
    path.write_text(yaml.safe_dump(holders(*two_graphs, method="ppat")))
    args = ["federate", "--mode", "cross-graph", "--holders", str(path), "--out", str(tmp_path / "p"), "--processes"]
    assert main(args) == 2


def test_ppat_as_published_spends_the_budget_on_the_votes_and_says_the_rows_have_no_guarantee(
    tmp_path, two_graphs, holders
):
    config = holders(*two_graphs, method="ppat", ppat={**SMALL, "client_release": "clear"}, target_epsilon=2.0)
    messages: list[dict] = []
    _run(config, tmp_path / "out", on_message=messages.append)
    for m in messages:
        assert m["privacy"]["guarantee"] == "none" and m["privacy"]["epsilon"] is None
        votes = m["replies"][0]["privacy"]
        assert votes["votes_guarantee"] == "dp" and 0 < votes["votes_epsilon"] <= 2.0
    block = json.loads((tmp_path / "out" / "beta" / "metrics.json").read_text())["privacy"]
    assert block["noise_multiplier"] == 0 and block["releases"] == 2 and 1.9 < block["votes_epsilon"] <= 2.0
