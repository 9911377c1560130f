"""Membership-inference audit of a finished run directory.

The run must have been trained with ``--audit-candidates N``: its
``audit_split.json`` records the members (trained on) and non-members
(removed from training before training), drawn at random from one pool
(:func:`textkg.training.audit_split.draw_audit_split`). Because the two sets
are exchangeable, any separation the attack achieves is caused by training —
which is what the accountant's ε bounds.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from textkg.audit import stats
from textkg.audit.attacks import get_attack
from textkg.errors import ConfigError

AUDIT_SPLIT = "audit_split.json"
AUDIT_RESULT = "audit.json"
#: FPRs at which the TPR is reported (Carlini et al. 2022).
LOW_FPRS = (0.01, 0.001)


@dataclass(frozen=True)
class AuditResult:
    """What ``textkg audit`` reports (``to_dict()`` is ``audit.json``).

    Attributes:
        run_dir: the audited run.
        attack: attack name.
        num_members, num_non_members: audit set sizes.
        candidate_pool: where candidates were drawn from (from ``audit_split.json``).
        roc_auc: area under the ROC curve (0.5 = chance).
        advantage: ``max (TPR − FPR)``.
        tpr_at_fpr: ``{"0.01": TPR, "0.001": TPR}``.
        epsilon_lower_bound: empirical ε lower bound (:class:`stats.EpsilonLowerBound` as a dict):
            threshold chosen on a random half of the candidates and the bound computed on the
            other half (``threshold_selection``, ``num_selection``, ``num_evaluation``, ``seed``).
        accountant_epsilon: the ε the run claims (``None`` for a non-private run).
        delta: δ of the claim (0 for a non-private run).
        guarantee: ``"dp"``, ``"simulation"`` or ``None``.
        privacy_mode: the run's privacy mode.
        roc: ``{"fpr": [...], "tpr": [...]}`` for plotting.
    """

    run_dir: str
    attack: str
    num_members: int
    num_non_members: int
    candidate_pool: str | None
    roc_auc: float
    advantage: float
    tpr_at_fpr: dict
    epsilon_lower_bound: dict
    accountant_epsilon: float | None
    delta: float
    guarantee: str | None
    privacy_mode: str
    roc: dict = field(repr=False)

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> dict:
        """``to_dict()`` without the ROC points (what the CLI prints)."""
        d = self.to_dict()
        d.pop("roc")
        return d


def load_audit_split(run_dir: str | Path) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """``(members (m, 3), non_members (n, 3), record)`` of a run; ConfigError if absent."""
    path = Path(run_dir) / AUDIT_SPLIT
    if not path.is_file():
        raise ConfigError(
            "run has no audit split: train it with --audit-candidates N (e.g. 1000) to hold "
            "out non-members for a membership-inference audit",
            file=path,
        )
    from textkg.pipeline.run_dir import read_run_json

    record = read_run_json(path)
    try:
        members = torch.as_tensor(record["members"], dtype=torch.long).reshape(-1, 3)
        non_members = torch.as_tensor(record["non_members"], dtype=torch.long).reshape(-1, 3)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"malformed audit split ({exc})", file=path) from None
    if not len(members) or not len(non_members):
        raise ConfigError("audit split has no members or no non-members", file=path)
    return members, non_members, record


def _claimed_privacy(run_dir: Path) -> dict | None:
    """The privacy block of the run's metrics.json (the run was opened, its version checked, by
    ``textkg audit`` or by :func:`textkg.load`, whose predictor the audit scores with)."""
    from textkg.pipeline.run_dir import METRICS, read_run_json

    path = run_dir / METRICS
    if not path.is_file():
        raise ConfigError("run has no metrics.json (training did not finish)", file=path)
    return read_run_json(path).get("privacy")


def attack_scores(
    predictor, members: torch.Tensor, non_members: torch.Tensor, *, attack: str = "score", seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attack scores ``(m,)``, ``(n,)`` of members and non-members (higher = member).

    Both sets are scored in one call so that every candidate is treated alike.
    """
    fn = get_attack(attack)
    scores = fn(predictor, torch.cat([members, non_members]), seed=seed).double()
    return scores[: len(members)], scores[len(members) :]


def run_audit(run_dir: str | Path, *, attack: str = "score", alpha: float = 0.05, predictor=None) -> AuditResult:
    """Audit a run directory with one attack.

    Args:
        run_dir: a finished run trained with ``--audit-candidates``.
        attack: a registered attack name (:func:`textkg.audit.attacks.list_attacks`).
        alpha: 1 − confidence of the Clopper–Pearson intervals behind the ε bound.
            The bound's held-out split is seeded by the audit split's ``seed``, so
            re-auditing a run gives the same number.
        predictor: an already loaded ``textkg.load(run_dir)`` (loaded if ``None``).
    """
    run_dir = Path(run_dir)
    get_attack(attack)  # validate the name before the (slow) load
    members, non_members, record = load_audit_split(run_dir)
    claim = _claimed_privacy(run_dir)
    if predictor is None:
        from textkg.predict import load_predictor

        predictor = load_predictor(run_dir)
    seed = int(record.get("seed", 0))
    pos, neg = attack_scores(predictor, members, non_members, attack=attack, seed=seed)
    delta = float(claim["delta"]) if claim else 0.0
    bound = stats.empirical_epsilon_lower_bound(pos, neg, delta=delta, alpha=alpha, seed=seed)
    curve = stats.roc_curve(pos, neg)
    eps = None if claim is None else claim.get("epsilon")
    return AuditResult(
        run_dir=str(run_dir),
        attack=attack if isinstance(attack, str) else getattr(attack, "__name__", "custom"),
        num_members=len(members),
        num_non_members=len(non_members),
        candidate_pool=record.get("candidate_pool"),
        roc_auc=stats.roc_auc(pos, neg),
        advantage=stats.advantage(pos, neg),
        tpr_at_fpr={str(f): stats.tpr_at_fpr(pos, neg, f) for f in LOW_FPRS},
        epsilon_lower_bound=bound.to_dict(),
        accountant_epsilon=None if eps is None or (isinstance(eps, float) and math.isnan(eps)) else float(eps),
        delta=delta,
        guarantee=None if claim is None else claim.get("guarantee"),
        privacy_mode=predictor.config.privacy.mode,
        roc={"fpr": curve.fpr.tolist(), "tpr": curve.tpr.tolist()},
    )


def write_audit(result: AuditResult, path: str | Path) -> Path:
    """Write ``result.to_dict()`` as JSON (atomically)."""
    from textkg.training.checkpoint import atomic_write_json

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, result.to_dict())
    return path
