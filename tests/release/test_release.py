"""``textkg release``: a whitelist bundle, refused unless ``dp``, usable by ``textkg.load``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import textkg
from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser
from textkg.errors import ConfigError
from textkg.pipeline.job import run
from textkg.release import WHITELIST, recompute_epsilon, release

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
NEVER = {"checkpoint.pt", "audit_split.json", "private_metrics.json"}


def _train(out: Path, *flags: str) -> Path:
    args = build_parser().parse_args(
        [
            "train",
            "--dataset",
            str(FIXTURE),
            "--split",
            "transductive",
            "--model",
            "fused-transe",
            "--encoder",
            "glove-bow",
            "--dim",
            "8",
            "--epochs",
            "2",
            "--batch-size",
            "32",
            "--seed",
            "0",
            "--audit-candidates",
            "20",
            *flags,
        ]
    )
    run(build_run_config(args), out, progress=False)
    return out


@pytest.fixture(scope="module")
def dp_run(tmp_path_factory):
    flags = ("--privacy", "full", "--private-size", "256", "--noise-multiplier", "1.0")
    return _train(tmp_path_factory.mktemp("runs") / "dp", *flags)


def test_a_dp_bundle_holds_the_whitelist_and_nothing_secret(dp_run, tmp_path):
    assert {"checkpoint.pt", "audit_split.json", "private_metrics.json"} & {p.name for p in dp_run.iterdir()}
    out = tmp_path / "bundle"
    manifest = release(dp_run, out)
    names = {p.name for p in out.iterdir()}
    assert names <= set(WHITELIST) and not names & NEVER
    assert set(manifest["files"]) == names - {"RELEASE.json"}
    key = torch.load(dp_run / "checkpoint.pt", weights_only=False)["privacy"]["randomness"]["key"]
    for path in out.iterdir():
        data = path.read_bytes()
        assert key.encode() not in data and bytes.fromhex(key) not in data, path.name
    privacy = json.loads((out / "privacy.json").read_text())["privacy"]
    assert privacy["guarantee"] == "dp" and manifest["guarantee"] == "dp"
    assert recompute_epsilon(privacy) == pytest.approx(privacy["epsilon"], rel=1e-9)
    card = (out / "MODEL_CARD.md").read_text()
    assert "Threat model" in card and "differential privacy" in card and "NOT" not in card.split("\n")[0]


def test_the_bundle_predicts_as_the_run_does(dp_run, tmp_path):
    out = tmp_path / "bundle"
    release(dp_run, out)
    kwargs = dict(description="a new thing near the others", relation="/r/likes", direction="tail", top_k=5)
    assert textkg.load(out, dataset=FIXTURE).predict(**kwargs) == textkg.load(dp_run).predict(**kwargs)


def test_a_simulation_run_is_refused_without_the_flag_and_labelled_with_it(tmp_path):
    sim = _train(tmp_path / "sim", "--privacy", "full", "--noise-multiplier", "1.0", "--reproducible-noise", "0")
    refused = tmp_path / "refused"
    proc = subprocess.run(
        [sys.executable, "-m", "textkg.cli.main", "release", str(sim), "--out", str(refused)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--allow-simulation" in proc.stderr and not refused.exists()
    out = tmp_path / "labelled"
    release(sim, out, allow_simulation=True)
    for name in ("RELEASE.json", "privacy.json", "metrics.json"):
        assert json.loads((out / name).read_text())["label"].startswith("NOT DIFFERENTIALLY PRIVATE"), name
    assert json.loads((out / "config.json").read_text())["release_label"].startswith("NOT DIFFERENTIALLY")
    assert (out / "MODEL_CARD.md").read_text().startswith("**NOT DIFFERENTIALLY PRIVATE")
    textkg.load(out, dataset=FIXTURE)  # a labelled config still loads


def test_a_non_private_run_is_refused_and_nothing_is_written(tmp_path):
    plain = _train(tmp_path / "plain")
    with pytest.raises(ConfigError, match="without privacy"):
        release(plain, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_tampered_privacy_block_is_refused(dp_run, tmp_path):
    import shutil

    run_dir = tmp_path / "tampered"
    shutil.copytree(dp_run, run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics["privacy"]["epsilon"] *= 0.5
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(ConfigError, match="ledger gives"):
        release(run_dir, tmp_path / "out")
    del metrics["privacy"]["ledger"]
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(ConfigError, match="lacks ledger"):
        release(run_dir, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_unfinished_run_or_a_full_out_dir_is_refused(dp_run, tmp_path):
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    from textkg._version import __version__

    (unfinished / "config.json").write_text(json.dumps({"textkg_version": __version__}))
    with pytest.raises(ConfigError, match="not finished"):
        release(unfinished, tmp_path / "a")
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        release(dp_run, full)
