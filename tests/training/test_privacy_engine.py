"""The privacy engine (issue 40, item 1): one façade builds every private step, and a new mechanism or
accountant is one class plus one registration, end to end through ``textkg train``."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest
import torch

from textkg.privacy import claims
from textkg.privacy.claims import Claim, get_claim, register_claim
from textkg.training import mechanisms
from textkg.training.mechanisms import Mechanism, register_mechanism

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tiny_blp"


class NoiseOnly(Mechanism):
    """A toy mechanism: every trained parameter's gradient is N(0, σ²C²) / (q·N̄) and reads no statement
    (its output does not depend on the data). Its ledger still records one Sampled Gaussian step."""

    sampling = "none: no statement is read"
    clipping = "none needed: the update reads no statement"
    calls: list[int] = []

    def step(self, run, model, *, generator, step):
        scale = run.step_noise_multiplier(step) * run.cfg.max_grad_norm / (run.sample_rate * run.public_size)
        for p in model.parameters():
            if p.requires_grad:
                p.grad = scale * torch.randn(p.shape, generator=generator, dtype=p.dtype)
        run.accountant.step(run.next_event())
        NoiseOnly.calls.append(step)


class BasicComposition(Claim):
    """A toy accountant: each of k steps is (ε_1, δ/k)-DP by the RDP claim, so the run is (k·ε_1, δ)-DP by
    basic composition (Dwork & Roth 2014, *The Algorithmic Foundations of DP*, Thm. 3.16)."""

    conversion = "basic composition of per-step RDP claims (Dwork & Roth 2014, Thm. 3.16)"

    def epsilon(self, ledger, *, delta):
        k = sum(n for _, _, n in ledger)
        rdp = get_claim("rdp", orders=self.orders)
        return sum(n * rdp.epsilon([(q, sigma, 1)], delta=delta / k) for q, sigma, n in ledger) if k else 0.0


@pytest.fixture
def toy_registries(monkeypatch):
    """Register the toys into copies of the two registries (nothing stays registered after the test)."""
    monkeypatch.setattr(mechanisms, "_MECHANISMS", mechanisms._MECHANISMS.copy())
    monkeypatch.setattr(claims, "_CLAIMS", claims._CLAIMS.copy())
    register_mechanism("noise-only")(NoiseOnly)
    register_claim("basic")(BasicComposition)
    NoiseOnly.calls = []


def test_a_new_mechanism_and_accountant_train_end_to_end(toy_registries, tmp_path):
    from textkg.cli.main import main

    config = tmp_path / "private.json"
    config.write_text(
        json.dumps(
            {
                "privacy": {
                    "mode": "full",
                    "mechanism": "noise-only",
                    "accountant": "basic",
                    "noise_multiplier": 2.0,
                    "private_size": 200,
                }
            }
        )
    )
    out = tmp_path / "run"
    args = ["train", "--dataset", str(FIXTURE), "--split", "transductive", "--model", "transe", "--dim", "8"]
    args += ["--epochs", "2", "--batch-size", "20", "--seed", "1", "--no-progress", "--config", str(config)]
    assert main([*args, "--out", str(out)]) == 0
    block = json.loads((out / "metrics.json").read_text())["privacy"]
    steps = 2 * round(200 / 20)
    assert NoiseOnly.calls == list(range(steps))  # every private step was the toy's
    assert block["guarantee"] == "dp" and block["not_dp_because"] == []
    assert (block["sampling"], block["clipping"]) == (NoiseOnly.sampling, NoiseOnly.clipping)
    assert block["accountant"] == "basic" and block["conversion"] == BasicComposition.conversion
    assert block["ledger"] == [{"sample_rate": 0.1, "noise_multiplier": 2.0, "steps": steps}]
    # the claimed ε is the toy accountant's: k times the one-step RDP claim at δ/k (oracle, by hand)
    one = get_claim("rdp").epsilon([(0.1, 2.0, 1)], delta=block["delta"] / steps)
    assert block["epsilon"] == pytest.approx(steps * one, rel=1e-12)
    assert block["epsilon"] > block["epsilon_rdp"] > 0 and math.isfinite(block["epsilon_pld"])


def test_an_unregistered_mechanism_is_refused_with_the_registered_names(tmp_path, capsys):
    from textkg.cli.main import main

    config = tmp_path / "private.json"
    config.write_text(json.dumps({"privacy": {"mode": "full", "mechanism": "noise-only", "noise_multiplier": 1.0}}))
    args = ["train", "--dataset", str(FIXTURE), "--split", "transductive", "--model", "transe", "--no-progress"]
    assert main([*args, "--config", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "'noise-only' is not one of dp-sgd, simulation" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def _calls_and_imports(path: Path) -> tuple[set[str], set[tuple[str, str]]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    imports = {(n.module or "", a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    return calls, imports


def test_the_engine_is_the_only_place_that_builds_a_private_step():
    """train, the federated holder and the cross-graph party all go through PrivacyEngine.make_private."""
    builders, users = [], []
    for path in sorted((ROOT / "textkg").rglob("*.py")):
        calls, imports = _calls_and_imports(path)
        rel = path.relative_to(ROOT).as_posix()
        if "PrivateTraining" in calls:
            builders.append(rel)
        if "PrivacyEngine" in calls:
            users.append(rel)
        assert ("textkg.pipeline.job", "_trained_parameter_names") not in imports, rel
    assert builders == ["textkg/training/privacy_engine.py"]
    assert {
        "textkg/pipeline/job.py",
        "textkg/federated/runner.py",
        "textkg/federated/holder.py",
        "textkg/federated/cross_graph/party.py",
    } <= set(users)


def test_no_string_branch_or_isinstance_chooses_a_mechanism_or_accountant():
    for rel in [
        "textkg/training/private_training.py",
        "textkg/training/one_vs_all/clipping.py",
        "textkg/federated/runner.py",
        "textkg/training/config.py",
    ]:
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                names = {ast.unparse(x) for x in [node.left, *node.comparators]}
                assert not any(n.endswith((".mechanism", ".accountant")) for n in names), (rel, ast.unparse(node))
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance":
                assert "Claim" not in ast.unparse(node) and "Accountant" not in ast.unparse(node), rel
        _, imports = _calls_and_imports(ROOT / rel)
        assert ("textkg.privacy.accountant", "RDPAccountant") not in imports, rel


def test_one_vs_all_is_one_package_whose_modules_share_only_public_names():
    package = ROOT / "textkg" / "training" / "one_vs_all"
    assert not list((ROOT / "textkg" / "training").glob("one_vs_all*.py"))
    for path in package.glob("*.py"):
        _, imports = _calls_and_imports(path)
        private = [(m, n) for m, n in imports if m.startswith("textkg.") and n.startswith("_")]
        assert not private, (path.name, private)
    for path in (ROOT / "textkg").rglob("*.py"):
        _, imports = _calls_and_imports(path)
        outside = [(m, n) for m, n in imports if m.startswith("textkg.training.one_vs_all") and n.startswith("_")]
        assert not outside, (path, outside)
