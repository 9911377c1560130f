"""``exchange.unit: statement``: every party trains with DP-SGD on its own statements and releases its
DP model's aligned rows as post-processing. The block, the composed ledger, neighbouring datasets,
config errors, and the entity-level mode left as it was."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.federated.cross_graph.config import CrossGraphConfig, load_holders
from textkg.federated.cross_graph.ledger import STATEMENT_UNIT, check_privacy_block, recompute_epsilon
from textkg.federated.cross_graph.runner import run_cross_graph
from textkg.privacy.accountant import RDPAccountant
from textkg.privacy.events import SampledGaussianEvent

PRIVACY = {"mode": "full", "target_epsilon": 4.0, "private_size": 100}


def _statement_config(holders, a, b, **privacy) -> dict:
    config = holders(a, b, unit="statement")
    for h in config["holders"]:
        h["privacy"] = {**PRIVACY, **privacy}
    return config


def _run(config: dict, out, **kwargs) -> dict:
    return run_cross_graph(CrossGraphConfig.from_dict(config), out, progress=False, **kwargs)


def test_the_block_names_the_statement_unit_and_epsilon_composes_training_and_fine_tuning(
    tmp_path, two_graphs, holders
):
    messages: list[dict] = []
    _run(_statement_config(holders, *two_graphs), tmp_path / "out", on_message=messages.append)
    # 2 pre-training epochs + 2 rounds x 1 partner x 1 fine-tuning epoch, round(100 / 32) = 3 steps each
    steps_per_epoch, planned = 3, (2 + 2) * 3
    assert len(messages) == 4
    for m in messages:
        block = m["privacy"]
        assert block["unit"] == STATEMENT_UNIT and block["exchange_unit"] == "statement"
        assert block["guarantee"] == "dp" and block["not_dp_because"] == []
        assert "post-processing" in block["mechanism"]
        assert block["num_private_triples"] is None and block["private_size"] == 100
        assert check_privacy_block(block, file="a release") is block  # what a receiving process accepts (issue 51)
    first_from_alpha = next(m for m in messages if m["from"] == "alpha")["privacy"]
    for name in ("alpha", "beta"):
        metrics = json.loads((tmp_path / "out" / name / "metrics.json").read_text())
        block = metrics["privacy"]
        assert block["steps"] == block["planned_steps"] == planned  # every fine-tuning step, kept or not
        assert 0 < block["epsilon"] <= 4.0
        pre = RDPAccountant()
        for _ in range(2 * steps_per_epoch):
            pre.step(SampledGaussianEvent(sample_rate=block["sample_rate"], noise_multiplier=block["noise_multiplier"]))
        assert block["epsilon"] > pre.get_epsilon(delta=block["delta"]) + 0.1  # more than pre-training alone
        assert metrics["ledger"]["epsilon"] == pytest.approx(recompute_epsilon(metrics["ledger"]), abs=0)
        assert metrics["alone"]["privacy"]["ledger"] == block["ledger"]  # alone takes the same DP-SGD steps
        assert [e["received_privacy"]["unit"] for e in metrics["exchanges"]] == [STATEMENT_UNIT] * 2
    # a release's ε is what the sender had spent when it sent: pre-training and the fine-tuning before it
    assert (
        first_from_alpha["epsilon"]
        < json.loads((tmp_path / "out" / "alpha" / "metrics.json").read_text())["privacy"]["epsilon"]
    )


def _with_extra_statement(a) -> str:
    """Add to ``a``'s training statements one that names a vocabulary entity none of them uses."""
    lines = (a / "train.tsv").read_text().splitlines()
    used = {x for line in lines for x in line.split("\t")[::2]}
    vocabulary = [line.split("\t")[0] for line in (a / "entity2text.txt").read_text().splitlines()]
    unused = sorted(set(vocabulary) - used)
    _, relation, tail = lines[0].split("\t")
    extra = f"{unused[0]}\t{relation}\t{tail}"
    (a / "train.tsv").write_text("\n".join([*lines, extra]) + "\n")
    return extra


def _public_view(messages: list[dict], out) -> dict:
    """Everything a partner sees, with the released values left out: steps, shapes, blocks."""
    sent = [
        (m["step"], m["from"], m["to"], tuple(m["rows"].shape), str(m["rows"].dtype), m["privacy"]) for m in messages
    ]
    metrics = {n: json.loads((out / n / "metrics.json").read_text()) for n in ("alpha", "beta")}
    return {
        "sent": sent,
        "blocks": {n: m["privacy"] for n, m in metrics.items()},
        "aligned": {n: m["aligned"] for n, m in metrics.items()},
        "psi_inputs": {n: m["sizes"]["trained_entities"] for n, m in metrics.items()},  # a partner sees |X|
    }


def test_neighbouring_datasets_one_statement_apart_give_the_same_release_shapes_and_metadata(
    tmp_path, two_graphs, holders
):
    """The adversary is a partner: it sees the releases. Alpha's datasets differ in one training
    statement that names an entity alpha's other statements never use; everything but the released
    values is the same. At the entity level the PSI reads alpha's statements: the size of its PSI
    input, which a partner sees, shows the extra entity."""
    a, b = two_graphs
    views, entity_sizes = [], []
    for k in range(2):
        if k == 1:
            _with_extra_statement(a)
        messages: list[dict] = []
        out = tmp_path / f"stmt{k}"
        _run(_statement_config(holders, a, b), out, on_message=messages.append)
        views.append(_public_view(messages, out))
        _run(holders(a, b, noise_multiplier=0.0), tmp_path / f"entity{k}")
        entity = json.loads((tmp_path / f"entity{k}" / "alpha" / "metrics.json").read_text())
        entity_sizes.append(entity["sizes"]["trained_entities"])
    assert views[0] == views[1]
    assert entity_sizes[0] + 1 == entity_sizes[1]  # what the statement level hides


@pytest.mark.slow
def test_neighbouring_datasets_give_identical_disclosures_on_the_wire_between_processes(tmp_path, two_graphs, holders):
    """The same neighbours, each party in its own process (gRPC, mutual TLS). Every frame either party
    sends (PSI points, releases with their privacy blocks: kinds, steps, array shapes and dtypes, byte
    sizes, metadata) is the same; only the values differ. The parties' published blocks too."""
    from textkg.federated.cross_graph.distributed import WIRE_LOG, run_cross_graph_processes

    a, b = two_graphs
    disclosed = []
    for k in range(2):
        if k == 1:
            _with_extra_statement(a)
        out = tmp_path / f"procs{k}"
        run_cross_graph_processes(CrossGraphConfig.from_dict(_statement_config(holders, a, b)), out, timeout_s=300)
        wire = {n: [json.loads(x) for x in (out / n / WIRE_LOG).read_text().splitlines()] for n in ("alpha", "beta")}
        blocks = {n: json.loads((out / n / "metrics.json").read_text())["privacy"] for n in ("alpha", "beta")}
        disclosed.append((wire, blocks))
    assert [m["header"]["kind"] for m in disclosed[0][0]["alpha"]] == [
        "psi-request",
        "psi-result",
        "release",
        "release",
    ]
    assert disclosed[0] == disclosed[1]


def test_the_entity_level_mode_is_unchanged(tmp_path, two_graphs, holders):
    """Pinned from the code before ``exchange.unit`` existed (commit 0f6cf6c), public noise seed."""
    messages: list[dict] = []
    summary = _run(
        holders(*two_graphs, target_epsilon=3.0, reproducible_noise=7), tmp_path / "out", on_message=messages.append
    )
    mrr = {p["party"]: (p["alone_test_mrr"], p["federated_test_mrr"]) for p in summary["parties"]}
    assert mrr["alpha"] == pytest.approx((0.09466788103898448, 0.09466788103898448), rel=1e-6)
    assert mrr["beta"] == pytest.approx((0.07085889203406988, 0.07085889203406988), rel=1e-6)
    sums = [float(m["rows"].sum()) for m in messages]
    assert sums == pytest.approx([-14.636771914907275, -13.341726921725153, 56.93759185938674, 0.9331956098299692])
    assert all(m["rows"].dtype == torch.float64 and m["privacy"]["unit"].startswith("one aligned") for m in messages)


@pytest.mark.parametrize(
    ("exchange", "privacy", "field", "words"),
    [
        ({"unit": "statement"}, None, "holders[0].privacy.mode", "needs every holder to train with DP-SGD"),
        ({}, PRIVACY, "holders[0].privacy", "needs exchange.unit: statement"),
        ({"unit": "statement", "target_epsilon": 4.0}, PRIVACY, "target_epsilon", "adds no noise"),
        ({"unit": "row"}, None, "unit", "must be one of entity, statement"),
        ({"unit": "statement"}, {"mode": "full", "noise_multiplier": 1.0}, "holders[0].privacy.target_epsilon", ""),
        ({"unit": "statement"}, {**PRIVACY, "private_size": 0}, "holders[0].privacy.private_size", ">= 1"),
    ],
)
def test_bad_combinations_name_the_file_line_and_field(tmp_path, two_graphs, holders, exchange, privacy, field, words):
    config = holders(*two_graphs, **exchange)
    if privacy is not None:
        for h in config["holders"]:
            h["privacy"] = privacy
    path = tmp_path / "holders.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    with pytest.raises(ConfigError) as err:
        load_holders(path)
    assert err.value.field == field and words in err.value.message
    assert err.value.file == str(path) and err.value.line is not None
    code = main(["federate", "--mode", "cross-graph", "--holders", str(path), "--out", str(tmp_path / "o")])
    assert code == 2


def test_a_crash_mid_run_resumes_with_the_same_dp_sgd_ledger_and_models(tmp_path, two_graphs, holders):
    """The DP-SGD ledger and key live in each party's checkpoint: a resumed run neither composes a
    step twice nor draws other noise (public noise seeds here, so the runs can be compared)."""
    config = _statement_config(holders, *two_graphs)
    for k, h in enumerate(config["holders"]):
        h["privacy"]["reproducible_noise"] = 11 + k
    _run(config, tmp_path / "full")

    def crash(message):
        if message["step"] == 3:
            raise KeyboardInterrupt("crash")

    with pytest.raises(KeyboardInterrupt):
        _run(config, tmp_path / "crashed", on_message=crash)
    _run(config, tmp_path / "crashed", resume=True)
    for name in ("alpha", "beta"):
        full = json.loads((tmp_path / "full" / name / "metrics.json").read_text())
        again = json.loads((tmp_path / "crashed" / name / "metrics.json").read_text())
        assert again["privacy"]["ledger"] == full["privacy"]["ledger"] and again["privacy"]["steps"] == 12
        assert again["privacy"]["guarantee"] == "simulation" and again["privacy"]["epsilon_if_secret"] <= 4.0
        assert again["federated"] == full["federated"] and again["alone"] == full["alone"]
        a = torch.load(tmp_path / "full" / name / "checkpoint.pt", weights_only=True)["snapshot"]["model"]
        b = torch.load(tmp_path / "crashed" / name / "checkpoint.pt", weights_only=True)["snapshot"]["model"]
        assert all(torch.equal(a[k], b[k]) for k in a)
