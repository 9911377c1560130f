"""Audit runner on a fake released model (no training needed)."""

import json
from types import SimpleNamespace

import pytest
import torch

from textkg.audit import AuditResult, attack_scores, get_attack, list_attacks, run_audit, write_audit
from textkg.errors import ConfigError
from textkg.training.config import PrivacyConfig, RunConfig, TrainConfig


class _Memorizer(torch.nn.Module):
    """Scores a triple 1 + noise if it was 'trained on', noise otherwise."""

    def __init__(self, members: torch.Tensor, strength: float) -> None:
        super().__init__()
        self.members = {tuple(t) for t in members.tolist()}
        self.strength = strength

    def forward(self, triples: torch.Tensor) -> torch.Tensor:
        flat = triples.reshape(-1, 3)
        bonus = torch.tensor([self.strength * (tuple(t) in self.members) for t in flat.tolist()])
        noise = torch.sin(flat.sum(-1).double() * 12.9898) * 0.5  # deterministic pseudo-noise
        return (bonus + noise).reshape(triples.shape[:-1]).float()


def _run_dir(tmp_path, *, strength=5.0, privacy=None, m=100):
    g = torch.Generator().manual_seed(0)
    cands = torch.stack(
        [
            torch.randperm(10_000, generator=g)[: 2 * m],
            torch.randint(3, (2 * m,), generator=g),
            torch.randint(50, (2 * m,), generator=g),
        ],
        dim=1,
    )
    members, non_members = cands[:m], cands[m:]
    (tmp_path / "audit_split.json").write_text(
        json.dumps(
            {
                "seed": 0,
                "members": members.tolist(),
                "non_members": non_members.tolist(),
                "candidate_pool": "all training statements",
            }
        )
    )
    (tmp_path / "metrics.json").write_text(json.dumps({"privacy": privacy}))
    cfg = RunConfig(
        train=TrainConfig(num_negatives=4),
        privacy=PrivacyConfig(mode="full", noise_multiplier=1.0) if privacy else PrivacyConfig(),
    )
    predictor = SimpleNamespace(
        model=_Memorizer(members, strength),
        config=cfg,
        prepared=SimpleNamespace(split=SimpleNamespace(train_entities=torch.arange(10_000))),
    )
    return predictor


def test_registry_lists_attacks_and_rejects_unknown():
    assert set(list_attacks()) >= {"score", "loss", "rank"}
    with pytest.raises(ConfigError, match="score"):
        get_attack("nope")


def test_missing_audit_split_tells_how_to_fix(tmp_path):
    with pytest.raises(ConfigError, match="--audit-candidates"):
        run_audit(tmp_path)


def test_malformed_audit_split(tmp_path):
    (tmp_path / "audit_split.json").write_text('{"members": [[1, 2]]}')
    with pytest.raises(ConfigError, match="audit_split.json"):
        run_audit(tmp_path)


def test_strong_memorisation_is_detected(tmp_path):
    predictor = _run_dir(tmp_path, strength=5.0)
    result = run_audit(tmp_path, attack="score", predictor=predictor)
    assert isinstance(result, AuditResult)
    assert result.roc_auc == 1.0 and result.advantage == 1.0
    assert result.num_members == result.num_non_members == 100
    assert result.accountant_epsilon is None and result.delta == 0.0 and result.guarantee is None
    assert result.epsilon_lower_bound["epsilon"] > 2.0
    assert result.tpr_at_fpr["0.01"] == 1.0
    d = result.to_dict()
    json.dumps(d)  # JSON-able
    assert "roc" not in result.summary() and len(d["roc"]["fpr"]) == len(d["roc"]["tpr"])
    out = write_audit(result, tmp_path / "sub" / "a.json")
    assert json.loads(out.read_text())["roc_auc"] == 1.0


def test_no_memorisation_gives_no_evidence(tmp_path):
    predictor = _run_dir(tmp_path, strength=0.0, privacy={"epsilon": 1.5, "delta": 1e-5, "guarantee": "dp"})
    result = run_audit(tmp_path, attack="score", predictor=predictor)
    assert 0.3 < result.roc_auc < 0.7
    assert result.epsilon_lower_bound["epsilon"] < 1.5
    assert result.accountant_epsilon == 1.5 and result.delta == 1e-5 and result.guarantee == "dp"


def test_a_nan_claim_in_a_runs_metrics_is_refused_naming_the_file(tmp_path):
    """metrics.json is strict JSON (issue 51): a NaN epsilon is refused where the run is read, not carried on."""
    from textkg.errors import ConfigError

    predictor = _run_dir(tmp_path, strength=5.0, privacy={"epsilon": float("nan"), "delta": 1e-5, "guarantee": "dp"})
    with pytest.raises(ConfigError, match="metrics.json"):
        run_audit(tmp_path, attack="score", predictor=predictor)


def test_epsilon_bound_is_held_out_seeded_and_strict_json(tmp_path):
    predictor = _run_dir(tmp_path, strength=5.0, privacy={"epsilon": None, "delta": 1e-5, "guarantee": "dp"})
    result = run_audit(tmp_path, attack="score", predictor=predictor)
    bound = result.epsilon_lower_bound
    # the keys older audit.json files had are all still there; the selection is recorded
    assert {"epsilon", "threshold", "form", "tpr_lower", "fpr_upper", "confidence", "delta"} <= set(bound)
    assert bound["threshold_selection"] == "held-out" and bound["seed"] == 0  # the audit split's seed
    assert bound["num_selection"] == bound["num_evaluation"] == 100  # 50 + 50 in each half of 100 + 100
    assert bound["epsilon"] > 2.0  # perfect separation survives halving
    assert run_audit(tmp_path, attack="score", predictor=predictor).epsilon_lower_bound == bound
    assert result.accountant_epsilon is None  # no claim -> null
    text = json.dumps(result.to_dict(), allow_nan=False)  # strict JSON: raises on NaN / inf
    out = write_audit(result, tmp_path / "audit.json")
    assert json.loads(out.read_text()) == json.loads(text)


def test_loss_attack_sees_memorisation_and_is_seeded(tmp_path):
    predictor = _run_dir(tmp_path, strength=5.0)
    split = json.loads((tmp_path / "audit_split.json").read_text())
    members, non_members = torch.tensor(split["members"]), torch.tensor(split["non_members"])
    a = attack_scores(predictor, members, non_members, attack="loss", seed=3)
    b = attack_scores(predictor, members, non_members, attack="loss", seed=3)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert a[0].mean() > a[1].mean()  # members have lower loss -> higher attack score


def test_audit_cli_errors(tmp_path, capsys):
    from textkg.cli.main import main

    assert main(["audit", str(tmp_path)]) == 2
    assert "no config.json" in capsys.readouterr().err
    (tmp_path / "config.json").write_text("{}")
    assert main(["audit", str(tmp_path)]) == 2  # every command opens a run through one loader: version checked
    assert "textkg_version" in capsys.readouterr().err
    from textkg._version import __version__

    (tmp_path / "config.json").write_text(json.dumps({"textkg_version": __version__}))
    assert main(["audit", str(tmp_path)]) == 2
    assert "--audit-candidates" in capsys.readouterr().err


def test_rank_attack_combines_reciprocal_tail_and_head_ranks(tmp_path, monkeypatch):
    import textkg.evaluation

    seen = {}

    def fake_compute_ranks(model, triples, *, filter_index, candidates, num_entities, batch_size):
        seen.update(n=len(triples), candidates=candidates, num_entities=num_entities)
        tail = torch.arange(1, len(triples) + 1).double()
        return SimpleNamespace(head_ranks=2 * tail, tail_ranks=tail)

    monkeypatch.setattr(textkg.evaluation, "compute_ranks", fake_compute_ranks, raising=False)
    predictor = _run_dir(tmp_path)
    predictor.prepared.kg = SimpleNamespace(num_entities=7)
    predictor.prepared.filter_index = None
    members, non_members = torch.zeros(2, 3, dtype=torch.long), torch.ones(3, 3, dtype=torch.long)
    pos, neg = attack_scores(predictor, members, non_members, attack="rank")
    assert seen == {"n": 5, "candidates": None, "num_entities": 7}  # all entities
    ranks = torch.arange(1, 6).double()
    expected = 0.5 * (1 / ranks + 1 / (2 * ranks))
    assert torch.allclose(torch.cat([pos, neg]), expected)
