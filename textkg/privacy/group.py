"""Group privacy: what an (ε, δ) guarantee about one record says about k records at once, and back.

A mechanism that is (ε, δ)-DP with respect to one record (one statement) is (kε, k·e^{(k−1)ε}·δ)-DP with
respect to any k records (one patient with k statements): Dwork & Roth 2014, *The Algorithmic Foundations
of Differential Privacy*, §2.3, Theorem 2.2 (pure DP, kε) and the remark after it (the δ term). It is the
chain through the k − 1 datasets in between: ``P[M(x_0) ∈ S] ≤ e^{kε} P[M(x_k) ∈ S] + δ Σ_{i<k} e^{iε}``,
and ``Σ_{i<k} e^{iε} ≤ k·e^{(k−1)ε}``. docs/privacy.md and the model card use the same formula.

:func:`group_guarantee` goes from the record to the group; :func:`record_budget_for_group` is its inverse:
the per-record (ε, δ) that gives a target per-group (ε, δ). Both know nothing about graphs.
"""

from __future__ import annotations

import math

from textkg.errors import PrivacyError


def _check(*, epsilon: float, delta: float, group_size: int) -> None:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise PrivacyError(f"must be an integer >= 1, got {group_size!r}", field="group_size")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0 <= epsilon < math.inf:
        raise PrivacyError(f"must be a finite number >= 0, got {epsilon!r}", field="epsilon")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 <= delta < 1:
        raise PrivacyError(f"must be a number in [0, 1), got {delta!r}", field="delta")


def group_guarantee(*, epsilon: float, delta: float, group_size: int) -> tuple[float, float]:
    """The (ε, δ) that an (``epsilon``, ``delta``)-DP mechanism gives a group of ``group_size`` records.

    Dwork & Roth 2014, §2.3, Theorem 2.2 and the remark after it: ``(k·ε, k·e^{(k−1)ε}·δ)``. The δ term is
    capped at 1 (a δ of 1 or more protects nothing).

    Args:
        epsilon: ε per record, finite, >= 0.
        delta: δ per record, in [0, 1).
        group_size: k, the records of one group (e.g. the statements of one patient), an int >= 1.

    Returns:
        ``(k·ε, min(1, k·e^{(k−1)ε}·δ))``.

    Raises:
        PrivacyError: an argument out of range (naming it).
    """
    _check(epsilon=epsilon, delta=delta, group_size=group_size)
    k = group_size
    if delta == 0:
        return k * epsilon, 0.0
    log_delta = math.log(k) + (k - 1) * epsilon + math.log(delta)  # in logs: e^{(k−1)ε} may overflow
    return k * epsilon, 1.0 if log_delta >= 0 else math.exp(log_delta)


def record_budget_for_group(*, epsilon: float, delta: float, group_size: int) -> tuple[float, float]:
    """The per-record (ε_s, δ_s) whose group guarantee (:func:`group_guarantee`) is (``epsilon``, ``delta``).

    ``ε_s = ε/k`` and ``δ_s = δ / (k·e^{(k−1)ε_s})``: the inverse of Dwork & Roth 2014, §2.3 (Theorem 2.2
    and the remark after it), so that training each record at (ε_s, δ_s) protects every group of k records
    at (ε, δ).

    Args:
        epsilon: the target ε per group, finite, >= 0.
        delta: the target δ per group, in [0, 1).
        group_size: k, an int >= 1 (a public bound on the records of one group).

    Raises:
        PrivacyError: an argument out of range (naming it).
    """
    _check(epsilon=epsilon, delta=delta, group_size=group_size)
    k = group_size
    eps = epsilon / k
    return eps, delta * math.exp(-(k - 1) * eps) / k
