"""Interactions: the contract template for each registered one, plus reference values."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from models_cases import InteractionCase

from textkg.errors import ConfigError
from textkg.models.interactions import (
    ComplEx,
    DistMult,
    Interaction,
    RotatE,
    TransE,
    get_interaction,
    list_interactions,
    register_interaction,
)

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA


class TestTransEL1(InteractionCase):
    name, kwargs = "transe", {"p": 1}


class TestTransEL2(InteractionCase):
    name, kwargs = "transe", {"p": 2}


class TestTypedTransEL1(InteractionCase):
    name, kwargs = "transe-typed", {"p": 1}
    estimate_is_best = False  # the type terms favour other tails


class TestTypedTransEL2(InteractionCase):
    name, kwargs = "transe-typed", {"p": 2}
    estimate_is_best = False  # the type terms favour other tails


class TestDistMult(InteractionCase):
    name = "distmult"


class TestComplEx(InteractionCase):
    name = "complex"


class TestRotatE(InteractionCase):
    name = "rotate"


CASES = [TestTransEL1, TestTransEL2, TestTypedTransEL1, TestTypedTransEL2, TestDistMult, TestComplEx, TestRotatE]


def test_every_registered_interaction_has_a_contract_test():
    tested = {case.name for case in CASES}
    missing = set(list_interactions()) - tested
    assert not missing, f"registered interactions without a contract test: {sorted(missing)}"


def test_registry_names():
    assert list_interactions() == ["complex", "distmult", "rotate", "transe", "transe-typed"]


def test_typed_transe_known_value():
    h, t = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 2.0])
    r = torch.tensor([0.0, 1.0, 3.0, 0.0, 0.0, -1.0])  # translation, head type, tail type
    # −‖(1, 1) − (0, 2)‖₁ + ⟨(3, 0), h⟩ + ⟨(0, −1), t⟩ = −2 + 3 − 2
    assert float(get_interaction("transe-typed", p=1).score(h, r, t)) == pytest.approx(-1.0)
    assert get_interaction("transe-typed").relation_dim(4) == 12


def test_unknown_name_lists_the_registry():
    with pytest.raises(ConfigError) as info:
        get_interaction("transh")
    for name in list_interactions():
        assert name in str(info.value)


def test_name_class_and_instance():
    assert get_interaction("transe", p=2).p == 2
    assert get_interaction(TransE, p=2).p == 2
    inst = DistMult()
    assert get_interaction(inst) is inst
    with pytest.raises(ConfigError):
        get_interaction(inst, p=1)
    with pytest.raises(ConfigError):
        get_interaction("distmult", p=1)  # DistMult takes no p
    with pytest.raises(ConfigError):
        get_interaction(42)


def test_register_duplicate_name_fails():
    class Other(Interaction):
        name = "transe"

    with pytest.raises(ConfigError):
        register_interaction(Other)


@pytest.mark.parametrize("p", [0, 3, "1", True])
def test_transe_rejects_other_norms(p):
    with pytest.raises(ConfigError):
        TransE(p=p)


@pytest.mark.parametrize("cls", [ComplEx, RotatE])
def test_complex_space_needs_even_dim(cls):
    with pytest.raises(ConfigError):
        cls().relation_dim(7)


def test_relation_dims():
    assert TransE().relation_dim(8) == DistMult().relation_dim(8) == ComplEx().relation_dim(8) == 8
    assert RotatE().relation_dim(8) == 4


def test_transe_known_values():
    h, r, t = torch.tensor([1.0, 2.0]), torch.tensor([0.5, -1.0]), torch.tensor([0.0, 0.0])
    assert float(TransE(p=1).score(h, r, t)) == pytest.approx(-2.5)
    assert float(TransE(p=2).score(h, r, t)) == pytest.approx(-math.sqrt(1.5**2 + 1.0))
    assert float(TransE(p=1).score(h, t - h, t)) == 0.0  # a perfect translation


def test_distmult_known_value():
    h, r, t = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2.0, 0.5, -1.0]), torch.tensor([1.0, 1.0, 1.0])
    assert float(DistMult().score(h, r, t)) == pytest.approx(2 + 1 - 3)


def test_complex_known_value():
    # h = 1 + 2i, r = i, t = 3 - i: Re(h r conj(t)) = Re((−2 + i)(3 + i)) = −7
    h, r, t = torch.tensor([1.0, 2.0]), torch.tensor([0.0, 1.0]), torch.tensor([3.0, -1.0])
    assert float(ComplEx().score(h, r, t)) == pytest.approx(-7.0)


def test_complex_equals_distmult_when_imaginary_parts_are_zero():
    g = torch.Generator().manual_seed(0)
    hr, rr, tr = (torch.randn(5, 4, generator=g) for _ in range(3))
    zeros = torch.zeros(5, 4)
    cat = lambda x: torch.cat([x, zeros], dim=-1)  # noqa: E731
    torch.testing.assert_close(ComplEx().score(cat(hr), cat(rr), cat(tr)), DistMult().score(hr, rr, tr))


def test_complex_antisymmetry_needs_imaginary_relation():
    g = torch.Generator().manual_seed(1)
    h, t = torch.randn(4, generator=g), torch.randn(4, generator=g)
    r = torch.tensor([0.0, 0.0, 1.0, 1.0])  # purely imaginary: s(h, r, t) = −s(t, r, h)
    assert float(ComplEx().score(h, r, t)) == pytest.approx(-float(ComplEx().score(t, r, h)), abs=1e-6)


def test_rotate_with_zero_phases_is_l1_of_complex_moduli():
    g = torch.Generator().manual_seed(0)
    h, t = torch.randn(6, 8, generator=g), torch.randn(6, 8, generator=g)
    diff = h - t
    expected = -torch.sqrt(diff[:, :4] ** 2 + diff[:, 4:] ** 2).sum(-1)
    torch.testing.assert_close(RotatE().score(h, torch.zeros(6, 4), t), expected)
    # with zero imaginary parts this is TransE-L1 on the real parts
    h[:, 4:], t[:, 4:] = 0.0, 0.0
    torch.testing.assert_close(
        RotatE().score(h, torch.zeros(6, 4), t), TransE(p=1).score(h[:, :4], torch.zeros(6, 4), t[:, :4])
    )


def test_rotate_half_turn_known_value():
    # h = 1, r = e^{iπ/2} = i, t = i: h∘r − t = 0 → score 0; t = 1: |i − 1| = √2
    h = torch.tensor([1.0, 0.0])
    r = torch.tensor([math.pi / 2])
    assert float(RotatE().score(h, r, torch.tensor([0.0, 1.0]))) == pytest.approx(0.0, abs=1e-6)
    assert float(RotatE().score(h, r, torch.tensor([1.0, 0.0]))) == pytest.approx(-math.sqrt(2.0))


def test_rotate_chunking_matches_unchunked(monkeypatch):
    import textkg.models.interactions as mod

    g = torch.Generator().manual_seed(0)
    h, r, c = torch.randn(3, 8, generator=g), torch.randn(3, 4, generator=g), torch.randn(20, 8, generator=g)
    full = RotatE().score_tails(h, r, c)
    monkeypatch.setattr(mod, "_CHUNK_ELEMENTS", 13)
    torch.testing.assert_close(RotatE().score_tails(h, r, c), full)
    torch.testing.assert_close(RotatE().score_heads(r, h, c), RotatE().score(c[None], r[:, None], h[:, None]))


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(["transe", "distmult", "complex", "rotate"]),
    b=st.integers(1, 4),
    c=st.integers(1, 6),
    seed=st.integers(0, 10_000),
)
def test_candidate_scoring_property(name, b, c, seed):
    inter = get_interaction(name)
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(b, 6, generator=g, dtype=torch.float64)
    r = torch.randn(b, inter.relation_dim(6), generator=g, dtype=torch.float64)
    cands = torch.randn(c, 6, generator=g, dtype=torch.float64)
    torch.testing.assert_close(inter.score_tails(h, r, cands), inter.score(h[:, None], r[:, None], cands[None]))
    torch.testing.assert_close(inter.score_heads(r, h, cands), inter.score(cands[None], r[:, None], h[:, None]))


def test_typed_transe_estimates_are_the_translation():
    inter = get_interaction("transe-typed", p=1)
    h, t = torch.randn(3, 4), torch.randn(3, 4)
    r = torch.randn(3, 12)
    torch.testing.assert_close(inter.tail_from(h, r), h + r[:, :4])
    torch.testing.assert_close(inter.head_from(r, t), t - r[:, :4])
