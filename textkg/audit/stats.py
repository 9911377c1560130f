"""Statistics of a membership-inference audit (pure functions on score arrays).

Every function takes the attack's scores of the *members* (statements trained
on) and of the *non-members* (held out before training), with the convention
**higher score = "more likely a member"**; an attack whose natural statistic
runs the other way (a loss, a rank) is negated before it gets here. The
threshold test "predict *member* iff score ≥ τ" is swept over every distinct
score.

References:
    * Jagielski, Ullman, Oprea. "Auditing Differentially Private Machine
      Learning: How Private is Private SGD?" NeurIPS 2020, arXiv:2006.07709v1,
      Sec. 3 and Algorithm 2 (Clopper–Pearson bounds on FPR/FNR → ε lower bound).
    * Carlini, Chien, Nasr, Song, Terzis, Tramèr. "Membership Inference Attacks
      From First Principles." IEEE S&P 2022, arXiv:2112.03570v2, Sec. III-B
      (report TPR at low FPR, not only AUC).
    * Steinke, Nasr, Jagielski. "Privacy Auditing with One (1) Training Run."
      NeurIPS 2023, arXiv:2305.08846v1, Sec. 5 and Appendix D (what makes a
      one-run audit valid; :func:`one_run_epsilon_lower_bound`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st


def _as_array(x, name: str) -> np.ndarray:
    if hasattr(x, "detach"):  # torch.Tensor, without importing torch here
        x = x.detach().cpu().numpy()
    a = np.asarray(x, dtype=np.float64).ravel()
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds non-finite scores")
    return a


def _pair(members, non_members) -> tuple[np.ndarray, np.ndarray]:
    return _as_array(members, "members"), _as_array(non_members, "non_members")


def roc_auc(members, non_members) -> float:
    """Area under the ROC curve = P(score(member) > score(non-member)) + ½ P(tie).

    Computed as the Mann–Whitney U statistic with mid-ranks, so ties count ½
    (the same value as ``sklearn.metrics.roc_auc_score`` with members labelled 1).

    Args:
        members: ``(m,)`` attack scores of members.
        non_members: ``(n,)`` attack scores of non-members.
    """
    pos, neg = _pair(members, non_members)
    ranks = _st.rankdata(np.concatenate([pos, neg]))  # mid-ranks for ties
    m, n = len(pos), len(neg)
    u = ranks[:m].sum() - m * (m + 1) / 2.0
    return float(u / (m * n))


@dataclass(frozen=True)
class RocCurve:
    """Operating points of the threshold test, by decreasing threshold.

    Attributes:
        fpr: ``(T,)`` false-positive rates, non-decreasing, from 0 to 1.
        tpr: ``(T,)`` true-positive rates, non-decreasing, from 0 to 1.
        thresholds: ``(T,)`` τ of each point (``+inf`` first: nobody is called a member).
        true_positives: ``(T,)`` members with score ≥ τ.
        false_positives: ``(T,)`` non-members with score ≥ τ.
        num_members, num_non_members: m and n.
    """

    fpr: np.ndarray
    tpr: np.ndarray
    thresholds: np.ndarray
    true_positives: np.ndarray
    false_positives: np.ndarray
    num_members: int
    num_non_members: int


def roc_curve(members, non_members) -> RocCurve:
    """Every operating point of "member iff score ≥ τ", τ over the distinct scores.

    Args:
        members: ``(m,)`` attack scores of members.
        non_members: ``(n,)`` attack scores of non-members.
    """
    pos, neg = _pair(members, non_members)
    thresholds = np.unique(np.concatenate([pos, neg]))[::-1]
    # counts of scores >= tau, via searchsorted on the sorted arrays
    pos_sorted, neg_sorted = np.sort(pos), np.sort(neg)
    tp = len(pos) - np.searchsorted(pos_sorted, thresholds, side="left")
    fp = len(neg) - np.searchsorted(neg_sorted, thresholds, side="left")
    tp = np.concatenate([[0], tp]).astype(np.int64)
    fp = np.concatenate([[0], fp]).astype(np.int64)
    thresholds = np.concatenate([[np.inf], thresholds])
    return RocCurve(
        fpr=fp / len(neg),
        tpr=tp / len(pos),
        thresholds=thresholds,
        true_positives=tp,
        false_positives=fp,
        num_members=len(pos),
        num_non_members=len(neg),
    )


def advantage(members, non_members) -> float:
    """Membership advantage ``max_τ (TPR − FPR)`` (Yeom et al. 2018), in ``[0, 1]``."""
    curve = roc_curve(members, non_members)
    return float(np.max(curve.tpr - curve.fpr))


def tpr_at_fpr(members, non_members, fpr: float) -> float:
    """Highest TPR of a threshold whose empirical FPR is at most ``fpr``.

    Carlini et al. 2022 (arXiv:2112.03570v2, Sec. III-B): an attack matters
    when it identifies *some* members confidently. With ``n`` non-members,
    FPRs below ``1/n`` cannot be resolved: then only thresholds with no
    false positive count. Non-decreasing in ``fpr``.
    """
    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"fpr must be in [0, 1], got {fpr}")
    curve = roc_curve(members, non_members)
    ok = curve.fpr <= fpr + 1e-12
    return float(np.max(curve.tpr[ok]))  # the (0, 0) point is always ok


def clopper_pearson(k, n, alpha: float = 0.05) -> tuple[np.ndarray | float, np.ndarray | float]:
    """Exact two-sided ``1 − alpha`` binomial confidence interval (Clopper & Pearson 1934).

    ``lower = Beta⁻¹(α/2; k, n − k + 1)`` (0 when k = 0),
    ``upper = Beta⁻¹(1 − α/2; k + 1, n − k)`` (1 when k = n).

    Args:
        k: successes (scalar or array).
        n: trials (scalar or array, ≥ 1).
        alpha: 1 − confidence level.

    Returns:
        ``(lower, upper)``, floats for scalar input, arrays otherwise.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    k_arr, n_arr = np.broadcast_arrays(np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64))
    if np.any(n_arr < 1) or np.any(k_arr < 0) or np.any(k_arr > n_arr):
        raise ValueError("need 0 <= k <= n and n >= 1")
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(k_arr > 0, _st.beta.ppf(alpha / 2, k_arr, n_arr - k_arr + 1), 0.0)
        upper = np.where(k_arr < n_arr, _st.beta.ppf(1 - alpha / 2, k_arr + 1, n_arr - k_arr), 1.0)
    if lower.ndim == 0:
        return float(lower), float(upper)
    return lower, upper


@dataclass(frozen=True)
class EpsilonLowerBound:
    """Result of :func:`empirical_epsilon_lower_bound`.

    Attributes:
        epsilon: the bound (0 when no threshold gives evidence; never negative).
        threshold: τ of the reported test. ``"same-data"``: the τ that achieved
            ``epsilon`` (``None`` when it is 0). ``"held-out"``: the τ chosen on
            the selection half, reported even when the evaluation half gives 0
            (``None`` when the selection half had no evidence at any τ).
        form: ``"tpr/fpr"`` or ``"tnr/fnr"``, the inequality of that test.
        tpr_lower: Clopper–Pearson lower bound on the TPR at τ (on the evaluation half).
        fpr_upper: Clopper–Pearson upper bound on the FPR at τ (on the evaluation half).
        confidence: ``1 − alpha`` of each interval.
        delta: δ used.
        threshold_selection: ``"held-out"`` (τ and the form picked on one half of
            the candidates, the bound computed on the other) or ``"same-data"``
            (optimistic: see :func:`empirical_epsilon_lower_bound`).
        num_selection: candidates (members + non-members) that picked τ.
        num_evaluation: candidates the reported bound was computed on (the
            same candidates as ``num_selection`` for ``"same-data"``).
        seed: seed of the held-out split (``None`` for ``"same-data"``).
    """

    epsilon: float
    threshold: float | None
    form: str | None
    tpr_lower: float | None
    fpr_upper: float | None
    confidence: float
    delta: float
    threshold_selection: str = "held-out"
    num_selection: int = 0
    num_evaluation: int = 0
    seed: int | None = None

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


THRESHOLD_SELECTIONS = ("held-out", "same-data")


def _best_on(
    pos: np.ndarray, neg: np.ndarray, delta: float, alpha: float
) -> tuple[float, float | None, str | None, float | None, float | None]:
    """``(ε, τ, form, tpr_lower, fpr_upper)`` maximised over every threshold and both forms."""
    curve = roc_curve(pos, neg)
    tpr_lo, _ = clopper_pearson(curve.true_positives, curve.num_members, alpha)
    _, fpr_up = clopper_pearson(curve.false_positives, curve.num_non_members, alpha)
    # the (T,) counts of the curve give (T,) bounds, never the scalar form
    assert isinstance(tpr_lo, np.ndarray) and isinstance(fpr_up, np.ndarray)
    with np.errstate(divide="ignore", invalid="ignore"):
        forms: dict[str, np.ndarray] = {
            "tpr/fpr": np.log(np.clip(tpr_lo - delta, 0.0, None) / fpr_up),
            "tnr/fnr": np.log(np.clip(1.0 - fpr_up - delta, 0.0, None) / (1.0 - tpr_lo)),
        }
    best: tuple[float, float | None, str | None, float | None, float | None] = (0.0, None, None, None, None)
    for form, values in forms.items():
        i = int(np.argmax(values))
        if math.isfinite(values[i]) and values[i] > best[0]:
            best = (float(values[i]), float(curve.thresholds[i]), form, float(tpr_lo[i]), float(fpr_up[i]))
    return best


def _bound_at(
    pos: np.ndarray, neg: np.ndarray, threshold: float, form: str, delta: float, alpha: float
) -> tuple[float, float, float]:
    """``(ε, tpr_lower, fpr_upper)`` of the one test "member iff score ≥ τ" in ``form``."""
    tp, fp = int(np.sum(pos >= threshold)), int(np.sum(neg >= threshold))
    tpr_lo, _ = clopper_pearson(tp, len(pos), alpha)
    _, fpr_up = clopper_pearson(fp, len(neg), alpha)
    tpr_lo, fpr_up = float(tpr_lo), float(fpr_up)
    with np.errstate(divide="ignore", invalid="ignore"):
        if form == "tpr/fpr":
            value = np.log(max(tpr_lo - delta, 0.0) / fpr_up) if fpr_up > 0 else math.inf
        else:
            value = np.log(max(1.0 - fpr_up - delta, 0.0) / (1.0 - tpr_lo)) if tpr_lo < 1 else math.inf
    value = float(value)
    return (max(value, 0.0) if math.isfinite(value) else 0.0), tpr_lo, fpr_up


def empirical_epsilon_lower_bound(
    members,
    non_members,
    *,
    delta: float = 0.0,
    alpha: float = 0.05,
    threshold_selection: str = "held-out",
    seed: int = 0,
) -> EpsilonLowerBound:
    """Empirical lower bound on ε from one member/non-member audit.

    An (ε, δ)-DP training algorithm makes every test "member iff score ≥ τ"
    satisfy ``TPR ≤ e^ε · FPR + δ`` and ``TNR ≤ e^ε · FNR + δ``
    (Kairouz et al. 2015; Jagielski et al. 2020, arXiv:2006.07709v1, Sec. 3).
    With Clopper–Pearson bounds at confidence ``1 − alpha`` on each rate,

        ε ≥ ln((TPR_lower − δ) / FPR_upper)   and
        ε ≥ ln((1 − FPR_upper − δ) / (1 − TPR_lower)).

    ``threshold_selection="held-out"`` (default): members and non-members are
    each split in two halves at random (``seed``). The threshold τ AND the form
    are both chosen on the first halves (the largest bound there over every τ
    and both forms). What is reported is that ONE pre-registered test evaluated
    on the second halves, clipped at 0. Nothing about the second halves was
    looked at before the test was fixed, so no correction for the choice of τ
    or of the form is needed and plain ``alpha`` applies: if the algorithm is
    (ε, δ)-DP, the reported bound exceeds ε only when TPR_lower > TPR or
    FPR_upper < FPR, which has probability at most ``alpha/2 + alpha/2 =
    alpha`` (each interval is two-sided). Under no signal the bound is > 0
    far less often than that (``tests/audit/test_stats.py``).

    ``threshold_selection="same-data"`` picks the best τ and form on the data
    it reports, as earlier versions (and many one-shot audit reports) did.
    That is OPTIMISTIC: it is the maximum over ~(m + n) tests × 2 forms, so its
    confidence is not ``1 − alpha``. With no signal at 500 + 500 it gave a
    bound > 0 in 580 of 10,000 audits (5.8 %; Clopper–Pearson 95 % interval
    5.35–6.28 %), above the nominal 5 %.

    Caveat, either way: the intervals treat the candidates as independent
    Bernoulli trials. In a one-run audit they are not: all members share one
    training run. Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One
    (1) Training Run", arXiv:2305.08846: their analysis is what makes one-run
    audits valid, and it needs every candidate to be included independently with
    probability 1/2 (a fair coin per candidate), and then bounds the number of
    correct guesses (:func:`one_run_epsilon_lower_bound`). Our audit split
    (``textkg.training.audit_split.draw_audit_split``) does NOT do that: it
    draws exactly half of the candidates as members (a random permutation), so
    the membership of one candidate carries information about the others and
    their theorem does not apply as is. Read this bound as the conventional
    (Jagielski et al.) estimate, not as a proof-backed one-run bound.

    Args:
        members: ``(m,)`` attack scores of members.
        non_members: ``(n,)`` attack scores of non-members.
        delta: δ of the guarantee being audited.
        alpha: each interval is two-sided at ``1 − alpha``.
        threshold_selection: ``"held-out"`` or ``"same-data"``.
        seed: the held-out split.
    """
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be in [0, 1), got {delta}")
    if threshold_selection not in THRESHOLD_SELECTIONS:
        raise ValueError(f"threshold_selection must be one of {THRESHOLD_SELECTIONS}, got {threshold_selection!r}")
    pos, neg = _pair(members, non_members)
    if threshold_selection == "same-data":
        eps, tau, form, tpr_lo, fpr_up = _best_on(pos, neg, delta, alpha)
        n = len(pos) + len(neg)
        return EpsilonLowerBound(eps, tau, form, tpr_lo, fpr_up, 1.0 - alpha, delta, "same-data", n, n)
    if len(pos) < 2 or len(neg) < 2:
        raise ValueError("a held-out bound needs at least 2 members and 2 non-members")
    rng = np.random.default_rng(seed)
    pos, neg = rng.permutation(pos), rng.permutation(neg)
    hp, hn = len(pos) // 2, len(neg) // 2
    sel_pos, eval_pos, sel_neg, eval_neg = pos[:hp], pos[hp:], neg[:hn], neg[hn:]
    sizes = {"num_selection": hp + hn, "num_evaluation": len(eval_pos) + len(eval_neg), "seed": int(seed)}
    _, tau, form, _, _ = _best_on(sel_pos, sel_neg, delta, alpha)
    if tau is None:
        return EpsilonLowerBound(0.0, None, None, None, None, 1.0 - alpha, delta, "held-out", **sizes)
    assert form is not None  # _best_on returns τ and the form together (both None or both set)
    eps, tpr_lo, fpr_up = _bound_at(eval_pos, eval_neg, tau, form, delta, alpha)
    return EpsilonLowerBound(eps, tau, form, tpr_lo, fpr_up, 1.0 - alpha, delta, "held-out", **sizes)


def _check_one_run_counts(num_candidates: int, num_guesses: int, num_correct: int, delta: float) -> None:
    for name, value in (("num_candidates", num_candidates), ("num_guesses", num_guesses), ("num_correct", num_correct)):
        if isinstance(value, bool) or int(value) != value:
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if not 0 <= num_correct <= num_guesses <= num_candidates:
        raise ValueError(
            f"need 0 <= num_correct <= num_guesses <= num_candidates, got "
            f"{num_correct}, {num_guesses}, {num_candidates}"
        )
    if not 0.0 <= delta <= 1.0:
        raise ValueError(f"delta must be in [0, 1], got {delta}")


def one_run_p_value(
    *, num_candidates: int, num_guesses: int, num_correct: int, epsilon: float, delta: float = 0.0
) -> float:
    """p-value of ``num_correct`` right guesses out of ``num_guesses`` if the algorithm is (ε, δ)-DP.

    Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One (1) Training
    Run", arXiv:2305.08846v1, Sec. 5 and the code of Appendix D
    (``p_value_DP_audit``). Setting: each of the ``m = num_candidates``
    candidates is included in training *independently with probability 1/2*;
    the auditor guesses "in" or "out" for ``r = num_guesses`` of them (abstains
    on the rest) and ``v = num_correct`` guesses are right. With
    ``q = e^ε / (e^ε + 1)`` (the accuracy of ε-DP randomized response),

        p = P[Binomial(r, q) ≥ v] + 2 m δ · max_{1 ≤ i ≤ v} P[v − i ≤ Binomial(r, q) < v] / i,

    capped at 1. For δ = 0 it is the binomial tail alone.
    """
    _check_one_run_counts(num_candidates, num_guesses, num_correct, delta)
    if not epsilon >= 0.0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    r, v = int(num_guesses), int(num_correct)
    q = 1.0 / (1.0 + math.exp(-epsilon)) if epsilon < 700 else 1.0
    tail = float(_st.binom.sf(v - 1, r, q))  # P[Binomial(r, q) >= v]
    if v == 0 or delta == 0.0:
        return min(tail, 1.0)
    below = np.cumsum(_st.binom.pmf(np.arange(v - 1, -1, -1), r, q))  # i-th: P[v - i <= B < v]
    worst = float(np.max(below / np.arange(1, v + 1)))
    return min(tail + worst * delta * 2 * int(num_candidates), 1.0)


def one_run_epsilon_lower_bound(
    *,
    num_candidates: int,
    num_guesses: int,
    num_correct: int,
    delta: float = 0.0,
    beta: float = 0.05,
    max_epsilon: float = 100.0,
) -> float:
    """Largest ε that :func:`one_run_p_value` rejects at level ``beta`` (0 if none is rejected).

    The one-run audit of Steinke, Nasr & Jagielski 2023 (arXiv:2305.08846v1,
    Appendix D, ``get_eps_audit``): bisection on ε, 30 steps after bracketing,
    returning the low (conservative) end. With confidence ``1 − beta`` the
    algorithm is not (ε, δ)-DP for any ε below the result.

    Only valid when every candidate was included by an independent fair coin.
    ``textkg.training.audit_split`` draws exactly half of the candidates
    instead, so :func:`textkg.audit.run_audit` does not report this number:
    with a fixed number of members, a right guess on one candidate makes right
    guesses on others more likely, and the binomial tail can be too small
    (two candidates, exactly one a member: guessing one of them by ε-DP
    randomized response and the other as its opposite gives 2 right guesses
    with probability q, not q²).

    Args:
        num_candidates: m, candidates each included with probability 1/2.
        num_guesses: r ≤ m, guesses made (abstentions excluded).
        num_correct: v ≤ r, right guesses.
        delta: δ of the null hypothesis.
        beta: 1 − confidence.
        max_epsilon: the search stops here (returned if even it is rejected).
    """
    _check_one_run_counts(num_candidates, num_guesses, num_correct, delta)
    if not 0.0 < beta < 1.0:
        raise ValueError(f"beta must be in (0, 1), got {beta}")

    def rejected(eps: float) -> bool:
        return (
            one_run_p_value(
                num_candidates=num_candidates,
                num_guesses=num_guesses,
                num_correct=num_correct,
                epsilon=eps,
                delta=delta,
            )
            < beta
        )

    lo, hi = 0.0, 1.0  # invariant: rejected(lo) (or lo = 0), not rejected(hi)
    if not rejected(lo):
        return 0.0
    while rejected(hi):
        if hi >= max_epsilon:
            return float(max_epsilon)
        lo, hi = hi, hi + 1.0
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rejected(mid) else (lo, mid)
    return lo
