"""Group privacy (textkg.privacy.group): (ε, δ) per record → (kε, k·e^{(k−1)ε}·δ) per group of k, and back.

Oracle values are worked out by hand below; the inverse is checked as a property (forward ∘ inverse = id);
a bad group size or budget is a PrivacyError naming its field."""

from __future__ import annotations

import math

import pytest

from textkg.errors import PrivacyError
from textkg.privacy.group import group_guarantee, record_budget_for_group


@pytest.mark.parametrize(
    ("epsilon", "delta", "k", "expected"),
    [
        # docs/privacy.md's worked example: ε = 1, δ = 1e-5, k = 5 → (5, 5·e⁴·1e-5 = 2.72991...e-3)
        (1.0, 1e-5, 5, (5.0, 5 * 54.598150033144236 * 1e-5)),
        # k = 10 at ε = 1: 10·e⁹ = 81,030.839...
        (1.0, 1e-5, 10, (10.0, 10 * 8103.083927575384 * 1e-5)),
        # one record is its own group
        (0.3, 1e-6, 1, (0.3, 1e-6)),
        # ε = 0.5, k = 3: (1.5, 3·e¹·δ = 8.154845...·δ)
        (0.5, 2e-7, 3, (1.5, 3 * 2.718281828459045 * 2e-7)),
        # pure DP stays pure: (kε, 0)
        (0.25, 0.0, 4, (1.0, 0.0)),
        # a δ term of 1 or more protects nothing: capped at 1 (10·e⁹⁰·δ ≫ 1; no overflow at a huge ε either)
        (10.0, 1e-5, 10, (100.0, 1.0)),
        (1000.0, 1e-5, 10, (10_000.0, 1.0)),
    ],
)
def test_group_guarantee_matches_the_hand_computed_values(epsilon, delta, k, expected):
    eps, d = group_guarantee(epsilon=epsilon, delta=delta, group_size=k)
    assert eps == pytest.approx(expected[0], rel=1e-12)
    assert d == pytest.approx(expected[1], rel=1e-12)


def test_the_inverse_matches_the_hand_computed_values():
    # the default cohort's bound k = 13 (8 terms + 4 noise terms + 1 diagnosis) at ε = 1 per patient:
    # ε_s = 1/13, δ_s = δ / (13·e^{12/13}) = δ / 32.7213...
    eps, d = record_budget_for_group(epsilon=1.0, delta=1 / 30_000, group_size=13)
    assert eps == pytest.approx(1 / 13, rel=1e-12)
    assert d == pytest.approx((1 / 30_000) / (13 * 2.517023173933745), rel=1e-12)  # e^{12/13} by hand
    assert record_budget_for_group(epsilon=4.0, delta=1e-5, group_size=1) == (4.0, 1e-5)


@pytest.mark.parametrize("k", [1, 2, 5, 13, 50])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0, 8.0])
@pytest.mark.parametrize("delta", [1e-9, 1 / 30_000, 0.01])
def test_forward_of_inverse_is_the_target(k, epsilon, delta):
    eps_s, delta_s = record_budget_for_group(epsilon=epsilon, delta=delta, group_size=k)
    assert eps_s <= epsilon and delta_s <= delta  # a record never gets more than the group
    eps, d = group_guarantee(epsilon=eps_s, delta=delta_s, group_size=k)
    assert eps == pytest.approx(epsilon, rel=1e-12) and d == pytest.approx(delta, rel=1e-12)


def test_a_larger_group_gets_a_weaker_guarantee():
    pairs = [group_guarantee(epsilon=0.2, delta=1e-6, group_size=k) for k in range(1, 20)]
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(pairs, pairs[1:], strict=False))


@pytest.mark.parametrize("fn", [group_guarantee, record_budget_for_group])
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"group_size": 0}, "group_size"),
        ({"group_size": -3}, "group_size"),
        ({"group_size": 2.0}, "group_size"),
        ({"group_size": True}, "group_size"),
        ({"group_size": "5"}, "group_size"),
        ({"epsilon": -0.1}, "epsilon"),
        ({"epsilon": math.inf}, "epsilon"),
        ({"epsilon": math.nan}, "epsilon"),
        ({"delta": 1.0}, "delta"),
        ({"delta": -1e-9}, "delta"),
        ({"delta": math.nan}, "delta"),
    ],
)
def test_bad_arguments_are_a_privacy_error_naming_the_field(fn, kwargs, field):
    args = {"epsilon": 1.0, "delta": 1e-5, "group_size": 5, **kwargs}
    with pytest.raises(PrivacyError) as err:
        fn(**args)
    assert err.value.field == field
