"""End to end on hpo-small: train with an audit split, audit it, plot it, sweep it."""

import json

import pytest

from textkg.cli.main import main

SMALL = [
    "--dataset",
    "hpo-small",
    "--split",
    "transductive",
    "--model",
    "transe",
    "--epochs",
    "1",
    "--dim",
    "16",
    "--valid-max-triples",
    "100",
    "--no-progress",
]


def _json(capsys):
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_train_audit_plot(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *SMALL, "--audit-candidates", "200", "--out", str(run)]) == 0
    capsys.readouterr()
    split = json.loads((run / "audit_split.json").read_text())
    assert len(split["members"]) == len(split["non_members"]) == 100

    assert main(["audit", str(run)]) == 0
    result = _json(capsys)
    assert result["num_members"] == result["num_non_members"] == 100
    assert 0.0 <= result["roc_auc"] <= 1.0 and 0.0 <= result["advantage"] <= 1.0
    assert result["accountant_epsilon"] is None and result["guarantee"] is None
    assert result["epsilon_lower_bound"]["epsilon"] >= 0.0
    assert set(result["tpr_at_fpr"]) == {"0.01", "0.001"}
    assert "roc" not in result
    saved = json.loads((run / "audit.json").read_text())
    assert saved["roc_auc"] == result["roc_auc"] and len(saved["roc"]["fpr"]) > 1

    for attack in ("loss", "rank"):
        out = tmp_path / f"{attack}.json"
        assert main(["audit", str(run), "--attack", attack, "--out", str(out)]) == 0
        assert _json(capsys)["attack"] == attack and out.is_file()

    assert main(["plot", str(run)]) == 0
    names = {p.split("/")[-1] for p in _json(capsys)["plots"][str(run)]}
    assert {"valid_mrr.png", "audit_roc.png"} <= names


@pytest.mark.slow
def test_run_without_audit_split_is_a_user_error(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *SMALL, "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["audit", str(run)]) == 2
    assert "--audit-candidates" in capsys.readouterr().err


@pytest.mark.slow
def test_sweep_with_audit(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert (
        main(
            [
                "sweep",
                *SMALL,
                "--batch-size",
                "2048",
                "--num-negatives",
                "4",
                "--privacy-modes",
                "none,full",
                "--noise-multipliers",
                "2",
                "--private-size",  # a public size of the private set (docs/privacy.md)
                "16000",
                "--audit-candidates",
                "200",
                "--audit",
                "score",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = _json(capsys)["rows"]
    assert [r["name"] for r in rows] == ["none", "full-sigma2"]
    private = rows[1]
    assert private["guarantee"] == "dp" and private["epsilon"] > 0 and private["noise_multiplier"] == 2
    # the empirical lower bound never exceeds the accountant's epsilon
    assert 0.0 <= private["audit_epsilon_lb"] <= private["epsilon"]
    assert (out / "sweep.json").is_file() and (out / "frontier.png").stat().st_size > 1000
