"""``exchange.method: average``: the spread-matched rotation (an oracle), the running mean of the parties'
rows (an oracle through the runner's update), what the exchange reads (the sender's private statements
perturbed after its release change nothing at the receiver), and exit-2 errors."""

from __future__ import annotations

import json
import types

import pytest
import torch
import yaml

from textkg.cli.main import main
from textkg.federated.cross_graph import runner
from textkg.federated.cross_graph.average_exchange import AverageExchange
from textkg.federated.cross_graph.config import CrossGraphConfig, ExchangeConfig
from textkg.federated.cross_graph.procrustes import matched_procrustes, procrustes

PRIVACY = {"mode": "full", "target_epsilon": 4.0, "private_size": 100, "reproducible_noise": 5}


def _random_rotation(d: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return q


def test_the_matched_map_undoes_a_similarity_transform_exactly():
    g = torch.Generator().manual_seed(0)
    own = torch.randn(50, 6, generator=g, dtype=torch.float64)
    released = 3.0 * own @ _random_rotation(6, 1) + torch.randn(6, generator=g, dtype=torch.float64)
    fitted = matched_procrustes(released, own)
    assert fitted.scale == pytest.approx(1 / 3)
    assert torch.allclose(fitted(released), own, atol=1e-9)


def test_the_matched_scale_keeps_the_receivers_spread_where_gowers_shrinks_a_noisy_release():
    g = torch.Generator().manual_seed(0)
    own = torch.randn(400, 8, generator=g, dtype=torch.float64)
    noisy = own @ _random_rotation(8, 2) + 3.0 * torch.randn(400, 8, generator=g, dtype=torch.float64)
    mapped = matched_procrustes(noisy, own)(noisy)
    assert (mapped - mapped.mean(0)).norm() == pytest.approx((own - own.mean(0)).norm().item(), rel=1e-9)
    assert procrustes(noisy, own).scale < 0.2  # Gower's slope falls with the correlation: shrinkage


class _Rows:
    """A party's entity table as the runner's update reads and writes it."""

    def __init__(self, rows: torch.Tensor) -> None:
        self.table = rows.clone()

    def rows(self, names):
        return self.table[[int(n) for n in names]].clone()

    def set_rows(self, names, rows):
        self.table[[int(n) for n in names]] = rows


def test_the_update_is_the_running_mean_of_own_and_every_partners_rotated_rows():
    g = torch.Generator().manual_seed(3)
    own = torch.randn(30, 4, generator=g, dtype=torch.float64)
    first, second = (torch.randn(30, 4, generator=g, dtype=torch.float64) for _ in range(2))
    receiver = types.SimpleNamespace(party=_Rows(own), ledger=types.SimpleNamespace(exchanges=[]))
    ex = ExchangeConfig(method="average", unit="statement")
    names = [str(i) for i in range(30)]
    runner._move_aligned_rows(receiver, 1, names, first, ex)
    mapped_first = matched_procrustes(first, own)(first)
    assert torch.allclose(receiver.party.table, (own + mapped_first) / 2)
    receiver.ledger.exchanges.append({"round": 1})  # the runner logs every received message, kept or not
    after_first = receiver.party.table.clone()
    runner._move_aligned_rows(receiver, 1, names, second, ex)
    mapped_second = matched_procrustes(second, after_first)(second)
    assert torch.allclose(receiver.party.table, (own + mapped_first + mapped_second) / 3)
    receiver.ledger.exchanges.append({"round": 1})
    assert AverageExchange().mix_weight(receiver, 2, ex) == 0.5  # a new round starts a new mean


def _config(holders, a, b) -> dict:
    config = holders(a, b, unit="statement", method="average")
    config["exchange"]["rounds"] = 1
    for h in config["holders"]:
        h["privacy"] = dict(PRIVACY)
    return config


def _receiver_after_first_update(tmp_path, config: dict, monkeypatch, *, perturb: bool) -> torch.Tensor:
    """beta's entity table just after it averaged alpha's release in (step 1, before fine-tuning and the
    keep-or-roll-back decision); with ``perturb``, alpha's private statements are replaced by other
    statements once its pre-training is over, just before it sends."""
    real_step, real_move = runner.exchange_step, runner._move_aligned_rows
    seen: list[torch.Tensor] = []

    def step(n, rnd, sender, receiver, ex):
        if perturb and n == 1:
            party = sender.party
            scrambled = party.train.flip(0)[:, [2, 1, 0]].clone()  # other statements, same public size
            party.train = scrambled
            party.private.private_triples = scrambled
        return real_step(n, rnd, sender, receiver, ex)

    def move(receiver, rnd, names, released, ex):
        real_move(receiver, rnd, names, released, ex)
        seen.append(receiver.party.model.tables()["entity"].detach().clone())

    monkeypatch.setattr(runner, "exchange_step", step)
    monkeypatch.setattr(runner, "_move_aligned_rows", move)
    out = tmp_path / ("perturbed" if perturb else "plain")
    runner.run_cross_graph(CrossGraphConfig.from_dict(config), out, progress=False)
    return seen[0]


def test_the_receivers_update_reads_only_the_senders_release(tmp_path, two_graphs, holders, monkeypatch):
    config = _config(holders, *two_graphs)
    plain = _receiver_after_first_update(tmp_path, config, monkeypatch, perturb=False)
    perturbed = _receiver_after_first_update(tmp_path, config, monkeypatch, perturb=True)
    assert torch.equal(plain, perturbed)


def test_an_average_run_keeps_the_statement_level_block(tmp_path, two_graphs, holders):
    summary = runner.run_cross_graph(
        CrossGraphConfig.from_dict(_config(holders, *two_graphs)), tmp_path / "o", progress=False
    )
    assert summary["exchange"]["method"] == "average"
    block = json.loads((tmp_path / "o" / "alpha" / "metrics.json").read_text())["privacy"]
    assert block["exchange_unit"] == "statement" and 0 < block["epsilon_if_secret"] <= 4.0


def test_a_mix_with_average_exits_2_naming_the_file_line_and_field(tmp_path, two_graphs, holders, capsys):
    config = _config(holders, *two_graphs)
    config["exchange"]["mix"] = 0.3
    path = tmp_path / "holders.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    code = main(["federate", "--mode", "cross-graph", "--holders", str(path), "--out", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{path}:2, field 'mix'" in err and "running mean" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
