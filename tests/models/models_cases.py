"""Contract templates for the model families (PyKEEN ``tests/cases.py`` style).

Every registered interaction has a ``TestX(InteractionCase)`` subclass in
``test_models_interactions.py``; every registered fusion appears in
``FUSION_CASES`` below. Meta-tests fail when one is missing.
"""

from __future__ import annotations

import torch

from textkg.models import build_model
from textkg.models.config import ModelConfig
from textkg.models.interactions import get_interaction

NUM_ENTITIES, NUM_RELATIONS, DIM, TEXT_DIM = 14, 3, 6, 5
SEEN = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])  # 10..13 are unseen

#: fusion name -> extra ModelConfig fields that make a valid config
FUSION_CASES = {
    "structural": {},
    "text": {"encoder": "bert"},
    "weighted": {"encoder": "bert", "structural_dropout": 0.3},
    "gate": {"encoder": "bert", "structural_dropout": 0.3},
}


def random_triples(shape, *, seed: int = 0, num_entities: int = NUM_ENTITIES) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.stack(
        [
            torch.randint(0, num_entities, shape, generator=g),
            torch.randint(0, NUM_RELATIONS, shape, generator=g),
            torch.randint(0, num_entities, shape, generator=g),
        ],
        dim=-1,
    )


def text_features(seed: int = 0) -> torch.Tensor:
    return torch.randn(NUM_ENTITIES, TEXT_DIM, generator=torch.Generator().manual_seed(seed))


def make_model(fusion: str, *, interaction: str = "transe", seed: int = 0, **overrides):
    """A small model with random pooled text features (when the fusion uses text)."""
    torch.manual_seed(seed)
    kwargs = {"p": 1} if interaction == "transe" else {}
    cfg = ModelConfig(
        interaction=interaction,
        interaction_kwargs=kwargs,
        dim=DIM,
        fusion=fusion,
        **{**FUSION_CASES[fusion], **overrides},
    )
    feats = {"text_features": text_features(seed)} if cfg.encoder else {}
    return build_model(cfg, num_entities=NUM_ENTITIES, num_relations=NUM_RELATIONS, seen_entities=SEEN, **feats)


class InteractionCase:
    """Template: every interaction must satisfy these properties.

    Subclasses set ``name`` (registry name) and optionally ``kwargs``.
    """

    name: str = ""
    kwargs: dict = {}
    dim: int = 8
    #: whether tail_from / head_from score best among candidates of their norm (not with type terms)
    estimate_is_best: bool = True

    def make(self):
        return get_interaction(self.name, **self.kwargs)

    def vectors(self, *shape, seed=0):
        inter = self.make()
        g = torch.Generator().manual_seed(seed)
        h = torch.randn(*shape, self.dim, generator=g, dtype=torch.float64)
        r = torch.randn(*shape, inter.relation_dim(self.dim), generator=g, dtype=torch.float64)
        t = torch.randn(*shape, self.dim, generator=g, dtype=torch.float64)
        return inter, h, r, t

    def test_registered_under_its_name(self):
        assert type(self.make()).name == self.name

    def test_score_shape(self):
        inter, h, r, t = self.vectors(4, 3)
        assert inter.score(h, r, t).shape == (4, 3)

    def test_score_broadcasts(self):
        inter, h, r, t = self.vectors(4, 1)
        _, _, _, t2 = self.vectors(1, 5, seed=1)
        s = inter.score(h, r, t2)
        assert s.shape == (4, 5)
        for i in range(4):
            for j in range(5):
                torch.testing.assert_close(s[i, j], inter.score(h[i, 0], r[i, 0], t2[0, j]))

    def test_score_tails_matches_brute_force(self):
        inter, h, r, _ = self.vectors(4)
        _, cands, _, _ = self.vectors(7, seed=2)
        expected = torch.stack([inter.score(h, r, c.expand_as(h)) for c in cands], dim=1)
        torch.testing.assert_close(inter.score_tails(h, r, cands), expected, rtol=1e-6, atol=1e-6)

    def test_score_heads_matches_brute_force(self):
        inter, _, r, t = self.vectors(4)
        _, cands, _, _ = self.vectors(7, seed=2)
        expected = torch.stack([inter.score(c.expand_as(t), r, t) for c in cands], dim=1)
        torch.testing.assert_close(inter.score_heads(r, t, cands), expected, rtol=1e-6, atol=1e-6)

    def test_float32_candidates_close_to_score(self):
        inter, h, r, _ = self.vectors(3)
        _, cands, _, _ = self.vectors(50, seed=3)
        h, r, cands = h.float(), r.float(), cands.float()
        expected = inter.score(h[:, None], r[:, None], cands[None])
        torch.testing.assert_close(inter.score_tails(h, r, cands), expected, rtol=1e-4, atol=1e-4)

    def test_tail_and_head_estimates_score_best(self):
        # tail_from / head_from: the vector the query points at beats every candidate of its norm
        inter, h, r, t = self.vectors(4)
        if not self.estimate_is_best:
            return
        pairs = (
            (inter.tail_from(h, r), lambda c: inter.score_tails(h, r, c)),
            (inter.head_from(r, t), lambda c: inter.score_heads(r, t, c)),
        )
        for estimate, scores in pairs:
            assert estimate.shape == h.shape
            g = torch.Generator().manual_seed(5)
            for i in range(4):
                others = torch.randn(20, self.dim, generator=g, dtype=torch.float64)
                others = others / others.norm(dim=1, keepdim=True) * estimate[i].norm()
                assert int(scores(torch.cat([estimate[i : i + 1], others]))[i].argmax()) == 0

    def test_no_candidates(self):
        inter, h, r, t = self.vectors(3)
        assert inter.score_tails(h, r, h[:0]).shape == (3, 0)
        assert inter.score_heads(r, t, t[:0]).shape == (3, 0)

    def test_gradient_finite_at_exact_match(self):
        # h + r == t (or h ∘ r == t) must not give NaN gradients (DP clipping would be poisoned).
        inter, h, r, t = self.vectors(2)
        h = h.clone().requires_grad_(True)
        s = inter.score(h, r, t).sum() + inter.score(h, torch.zeros_like(r), h).sum()
        (g,) = torch.autograd.grad(s, h)
        assert torch.isfinite(g).all()

    def test_vmap_grad_equals_loop(self):
        inter, h, r, t = self.vectors(5, 3)

        def f(h1, r1, t1):
            return torch.nn.functional.softplus(-inter.score(h1, r1, t1)).sum()

        batched = torch.func.vmap(torch.func.grad(f))(h, r, t)
        for i in range(5):
            torch.testing.assert_close(batched[i], torch.func.grad(f)(h[i], r[i], t[i]))
