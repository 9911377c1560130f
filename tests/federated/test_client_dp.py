"""Client-level DP-FedAvg (textkg federate --client-*): oracle of one round, ledger, secret noise, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")

from textkg.cli.main import main
from textkg.federated import client_dp
from textkg.privacy.accountant import RDPAccountant
from textkg.privacy.events import SampledGaussianEvent
from textkg.privacy.randomness import SecretRandomness
from textkg.privacy.rdp import DEFAULT_ORDERS


def test_one_round_is_the_clipped_equal_weight_mean_plus_sigma_c_over_k_noise(
    federate_base, tmp_path, monkeypatch, uploads
):
    """Oracle (McMahan et al. 2018, Alg. 1): theta + mean_k clip_C(theta_k - theta) + N(0, (sigma C / K)^2),
    the noise drawn from the AES-CTR stream of release 0, entry by entry in the parameters' order."""
    monkeypatch.setattr(client_dp, "SecretRandomness", lambda: SecretRandomness.from_seed(7))
    sigma, clip = 0.5, 0.05
    out = tmp_path / "fed"
    assert (
        main(
            [
                *federate_base,
                "--partition",
                "source",
                "--rounds",
                "1",
                "--client-noise-multiplier",
                str(sigma),
                "--client-clip",
                str(clip),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    returned = [params for params, _ in uploads.returned]
    initial = uploads.sent[0]
    names = list(initial)
    k = len(returned)
    deltas = []
    for params in returned:
        d = {n: params[n].double() - initial[n].double() for n in names}
        norm = torch.sqrt(sum((v**2).sum() for v in d.values()))
        assert norm > clip  # so the clipping is exercised
        deltas.append({n: v * min(1.0, clip / float(norm)) for n, v in d.items()})
    g = SecretRandomness.from_seed(7).generator("noise", 0)
    glob = torch.load(out / "best_model.pt", weights_only=True)
    for n in names:
        mean = initial[n].double() + sum(d[n] for d in deltas) / k
        noise = torch.from_numpy(g.standard_normal(tuple(initial[n].shape)))
        torch.testing.assert_close(glob[n].double(), mean + sigma * clip / k * noise, rtol=1e-5, atol=1e-6)


def test_calibrated_ledger_matches_textkg_and_hides_holder_sizes(federate_base, tmp_path):
    out = tmp_path / "fed"
    assert (
        main(
            [
                *federate_base,
                "--partition",
                "random",
                "--clients",
                "3",
                "--rounds",
                "2",
                "--client-target-epsilon",
                "8",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    metrics = json.loads((out / "metrics.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    block = metrics["privacy"]
    assert block["guarantee"] == "dp" and block["unit"] == client_dp.CLIENT_UNIT
    assert block["releases"] == 2 and block["num_clients"] == 3
    assert block["epsilon"] <= 8 + 1e-6 and block["epsilon"] > 7.5  # calibrated, not loose
    ours = RDPAccountant(orders=DEFAULT_ORDERS)
    ours.step(SampledGaussianEvent(sample_rate=1.0, noise_multiplier=block["noise_multiplier"], steps=2))
    assert block["epsilon"] == pytest.approx(ours.get_epsilon(delta=block["delta"]), rel=1e-6)
    assert block["epsilon_textkg"] == pytest.approx(block["epsilon"], rel=1e-6)
    # a holder's statement count is about its data: not in what is written
    assert metrics["federated"]["sizes"] is None and metrics["federated"]["weights"].startswith("equal")
    assert all(set(c) == {"name", "test"} for c in metrics["clients"])  # test statements are public
    assert json.loads((out / "federated.json").read_text())["sizes"] is None


def test_noise_is_secret_not_numpys_global_generator(federate_base, tmp_path):
    """Flower draws with numpy.random.normal; seeding numpy the same way must not repeat the model."""
    outs = []
    for i in range(2):
        np.random.seed(0)
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
                    "1",
                    "--client-noise-multiplier",
                    "1",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        outs.append(torch.load(out / "best_model.pt", weights_only=True))
    assert not torch.equal(outs[0]["relation_embeddings"], outs[1]["relation_embeddings"])


@pytest.mark.parametrize(
    "extra, field",
    [
        (["--client-target-epsilon", "4", "--aggregation", "row"], "aggregation"),
        (["--client-target-epsilon", "4", "--target-epsilon", "4"], "privacy.mode"),  # no --privacy
        (
            ["--client-target-epsilon", "4", "--privacy", "full", "--target-epsilon", "4", "--upload-top-k", "5"],
            "upload-top-k",
        ),  # fmt: skip
        (["--client-target-epsilon", "4", "--client-noise-multiplier", "1"], "client_target_epsilon"),
        (["--client-noise-multiplier", "-1"], "client-noise-multiplier"),
        (["--client-target-epsilon", "4", "--client-delta", "1"], "client-delta"),
    ],
)
def test_bad_client_dp_settings_exit_2_and_write_nothing(federate_base, tmp_path, capsys, extra, field):
    out = tmp_path / "fed"
    try:
        code = main([*federate_base, "--partition", "random", "--clients", "2", *extra, "--out", str(out)])
    except SystemExit as exc:  # a number out of its flag's range stops argparse (textkg.cli.flags.NUMBERS)
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and (f"field '{field}'" in err or f"argument --{field}: " in err) and "Traceback" not in err
    assert not out.exists()
