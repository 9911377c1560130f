"""``textkg federate``: Flower's FedAvg over data holders, record-level DP, outputs a user can load."""

from __future__ import annotations

import json

import pytest
import torch
from fed_threads import one_thread

from textkg.cli.main import main
from textkg.federated.runner import FederatedConfig

pytest.importorskip("flwr")


@pytest.mark.parametrize("aggregation", ["fedavg", "row"])
def test_fedavg_is_the_example_weighted_mean_of_the_holders(federate_base, tmp_path, uploads, capsys, aggregation):
    """Oracle: after one round the global parameters are sum_k n_k theta_k / sum_k n_k (McMahan et al. 2017);
    ``row``: per row, over the holders whose row changed (a row no one changed keeps its value)."""
    out = tmp_path / "fed"
    # source: OMIM / ORPHA / DECIPHER; DECIPHER's 13 statements never use some relations, so their rows
    # are changed by fewer than all holders
    assert (
        main(
            [*federate_base, "--partition", "source", "--rounds", "1", "--aggregation", aggregation, "--out", str(out)]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    returned = [(params, metrics["num-examples"]) for params, metrics in uploads.returned]
    # Flower samples the nodes in random order; the FedAvg weight is each holder's own statements
    assert sorted(c["num_statements"] for c in summary["clients"]) == sorted(n for _, n in returned)
    total = sum(n for _, n in returned)
    glob = torch.load(out / "best_model.pt", weights_only=True)
    initial = uploads.sent[0]
    for name in returned[0][0]:
        expected = sum(params[name].double() * n for params, n in returned) / total
        if aggregation == "row" and initial[name].ndim == 2:
            w = torch.stack([(params[name] != initial[name]).any(1).double() * n for params, n in returned])
            num = sum(params[name].double() * w[k, :, None] for k, (params, _) in enumerate(returned))
            den = w.sum(0)[:, None]
            expected = torch.where(den > 0, num / den.clamp_min(1e-300), initial[name].double())
            if name == "relation_embeddings":
                assert bool((w > 0).sum(0).lt(3).any())  # some rows were changed by fewer than all holders
        torch.testing.assert_close(glob[name].double(), expected, rtol=1e-5, atol=1e-6)


def test_outputs_load_predict_and_are_strict_json(federate_base, tmp_path):
    import textkg

    out = tmp_path / "fed"
    assert main([*federate_base, "--partition", "source", "--rounds", "2", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    assert [r["round"] for r in metrics["rounds"]] == [0, 1, 2]
    assert metrics["federated"]["clients"] == ["OMIM", "ORPHA", "DECIPHER"]
    assert metrics["federated"]["sizes"]["shared"] > 0  # the ontology: every holder trains on it
    assert metrics["privacy"] is None and 0 < metrics["test"]["mrr"] <= 1
    fed = json.loads((out / "federated.json").read_text())
    assert fed["rounds"] == 2 and fed["engine"] == "flower-inprocess"
    predictor = textkg.load(out)
    assert predictor is not None


def test_record_level_dp_ledgers_compose_over_rounds(federate_base, tmp_path):
    """Each holder's ledger holds every private step of every round, is calibrated to the target and
    recomputes to its epsilon with Opacus; the noise is secret (two runs differ)."""
    from textkg.release import recompute_epsilon
    from textkg.training.schedule import plan_epoch

    outs = []
    for i in range(2):
        out = tmp_path / f"fed{i}"
        assert (
            main(
                [
                    *federate_base,
                    "--partition",
                    "random",
                    "--clients",
                    "2",
                    "--rounds",
                    "2",
                    "--local-epochs",
                    "2",
                    "--privacy",
                    "full",
                    "--private-size",
                    "6000",
                    "--target-epsilon",
                    "2",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        outs.append(out)
    metrics = json.loads((outs[0] / "metrics.json").read_text())
    assert metrics["privacy"]["guarantee"] == "dp"
    eps = []
    for client in metrics["clients"]:
        block = client["privacy"]
        assert block["guarantee"] == "dp" and block["planned_steps"] == block["steps"]
        per_epoch = plan_epoch(num_public=0, num_private=6000, batch_size=1024).private_steps  # the declared size
        assert block["steps"] == 4 * per_epoch  # 2 rounds x 2 local epochs
        assert block["epsilon"] <= 2.0 + 1e-9
        assert recompute_epsilon(block) == pytest.approx(block["epsilon"], rel=1e-6)
        eps.append(block["epsilon"])
    assert metrics["privacy"]["epsilon"] == max(eps)
    a, b = (torch.load(o / "best_model.pt", weights_only=True) for o in outs)
    assert not torch.equal(a["relation_embeddings"], b["relation_embeddings"])


@pytest.mark.parametrize(
    "extra, field",
    [
        (["--rounds", "0"], "rounds"),
        (["--partition", "column"], "partition_file"),
        (["--partition", "random", "--clients", "1"], "clients"),
        (["--partition", "source", "--clients", "2"], "clients"),
    ],
)
def test_bad_settings_exit_2_and_write_nothing(federate_base, tmp_path, capsys, extra, field):
    out = tmp_path / "fed"
    assert main([*federate_base, *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert (f"field '{field}'" in err or f"argument --{field}:" in err) and "Traceback" not in err
    assert not out.exists()


def test_config_validation():
    with pytest.raises(Exception, match="local-epochs"):
        FederatedConfig(local_epochs=0)


def test_a_non_private_federation_repeats_exactly(federate_base, tmp_path):
    """Same seed, same weights: Flower's node order is seeded, the holders' trainers too
    (one torch thread: a multi-threaded CPU reduction may sum in another order)."""
    one_thread(lambda: _repeat(federate_base, tmp_path))


def _repeat(federate_base, tmp_path):
    outs = []
    for i in range(2):
        out = tmp_path / f"fed{i}"
        assert (
            main([*federate_base, "--partition", "random", "--clients", "3", "--rounds", "2", "--out", str(out)]) == 0
        )
        outs.append(torch.load(out / "best_model.pt", weights_only=True))
    assert all(torch.equal(outs[0][k], outs[1][k]) for k in outs[0])


def test_release_refuses_a_federated_run_clearly(federate_base, tmp_path, capsys):
    out = tmp_path / "fed"
    assert (
        main(
            [
                *federate_base,
                "--partition",
                "random",
                "--clients",
                "2",
                "--rounds",
                "1",
                "--privacy",
                "full",
                "--private-size",
                "6000",
                "--target-epsilon",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["release", str(out), "--out", str(tmp_path / "rel")]) == 2
    assert "federated run is not supported yet" in capsys.readouterr().err
    assert not (tmp_path / "rel").exists()


def test_each_holder_gets_the_global_models_test_on_its_own_share(federate_base, tmp_path):
    """``random``: every test statement goes to one holder by the training hash, so the holders' test
    shares partition the test set and their MRRs average (weighted by queries) to the global MRR."""
    out = tmp_path / "fed"
    assert main([*federate_base, "--partition", "random", "--clients", "3", "--rounds", "1", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    tests = [c["test"] for c in metrics["clients"]]
    assert all(t is not None and t["num_triples"] > 0 for t in tests)
    assert sum(t["num_triples"] for t in tests) == metrics["test"]["num_triples"]
    n = [t["num_queries"] if "num_queries" in t else t["num_triples"] for t in tests]
    pooled = sum(t["mrr"] * k for t, k in zip(tests, n, strict=True)) / sum(n)
    assert pooled == pytest.approx(metrics["test"]["mrr"], rel=1e-6)


def test_source_holders_test_on_their_own_diseases(federate_base, tmp_path):
    """``source``: a holder's test share is every test statement naming one of its diseases (brute force)."""
    from textkg.federated.partition import HPO_SOURCES
    from textkg.pipeline.job import prepare
    from textkg.training.config import RunConfig

    out = tmp_path / "fed"
    assert main([*federate_base, "--partition", "source", "--rounds", "1", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    got = {c["name"]: (c["test"] or {}).get("num_triples", 0) for c in metrics["clients"]}
    prep = prepare(RunConfig.from_dict(json.loads((out / "config.json").read_text())))
    ents, types = prep.kg.entities, prep.kg.entity_types
    for src in HPO_SOURCES:
        want = sum(
            any(ents[e].startswith(src + ":") and types[e] == "disease" for e in (h, t))
            for h, _, t in prep.split.test.tolist()
        )
        assert got[src] == want, src
    assert sum(got.values()) < metrics["test"]["num_triples"]  # is_a statements are the shared ontology
