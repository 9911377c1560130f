"""Membership-inference audits of trained runs (see docs/audit.md).

Public API::

    from textkg.audit import run_audit, write_audit, AuditResult
    result = run_audit("runs/dp", attack="score")     # needs --audit-candidates at training
    result.roc_auc, result.epsilon_lower_bound["epsilon"], result.accountant_epsilon

    from textkg.audit import stats    # roc_auc, roc_curve, advantage, tpr_at_fpr,
                                      # clopper_pearson, empirical_epsilon_lower_bound
    from textkg.audit import get_attack, list_attacks, register_attack
"""

from __future__ import annotations

import importlib

# Attributes load on first use (PEP 562), so that `textkg --help` does not import torch.
_LAZY = {
    "stats": "textkg.audit.stats",
    "get_attack": "textkg.audit.attacks",
    "list_attacks": "textkg.audit.attacks",
    "register_attack": "textkg.audit.attacks",
    "AUDIT_RESULT": "textkg.audit.membership",
    "AUDIT_SPLIT": "textkg.audit.membership",
    "AuditResult": "textkg.audit.membership",
    "attack_scores": "textkg.audit.membership",
    "load_audit_split": "textkg.audit.membership",
    "run_audit": "textkg.audit.membership",
    "write_audit": "textkg.audit.membership",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'textkg.audit' has no attribute {name!r}")
    module = importlib.import_module(_LAZY[name])
    value = module if name == "stats" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
