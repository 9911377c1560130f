"""Exact per-example clipping of the 1-vs-all loss against a one-example-at-a-time oracle.

Oracle: ``torch.func.grad`` of :func:`one_vs_all_loss` on ONE triple at a
time, every call starting from the same generator state (so every example
sees the step's one dropout mask), over every trained parameter, in float64.
The structured norms (:func:`per_example_sq_norms`, both projection methods)
must equal the oracle's per parameter, and :func:`clipped_gradient_sum` must
equal ``Σ_b min(1, C/(‖g_b‖ + 1e-6)) g_b`` of the oracle gradients.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn
from torch.func import functional_call, grad

from textkg.errors import ConfigError
from textkg.models import build_model, get_preset
from textkg.training.one_vs_all import (
    clipped_gradient_sum,
    feature_gram,
    one_vs_all_loss,
    per_example_sq_norms,
    pool_positions,
    trained_parameters,
)
from textkg.training.one_vs_all.factors import build_pool

NUM_ENTITIES, NUM_SEEN, NUM_RELATIONS, DIM, TEXT_DIM = 48, 40, 5, 8, 12
TEMPERATURE = 0.3


def make_model(preset: str = "cpu-fused", **changes):
    cfg = dataclasses.replace(get_preset(preset), dim=DIM, **changes)
    x = torch.randn(NUM_ENTITIES, TEXT_DIM, generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    feats = {"text_features": x} if cfg.encoder is not None else {}
    model = (
        build_model(
            cfg, num_entities=NUM_ENTITIES, num_relations=NUM_RELATIONS, seen_entities=torch.arange(NUM_SEEN), **feats
        )
        .double()
        .train()
    )
    if cfg.fusion == "weighted":  # away from the symmetric start, so both weights matter
        with torch.no_grad():
            model.fusion.w_structural.fill_(0.7)
            model.fusion.w_text.fill_(1.3)
    return model


def make_triples(n: int = 9, seed: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    triples = torch.stack(
        [
            torch.randint(0, NUM_ENTITIES, (n,), generator=g),
            torch.randint(0, NUM_RELATIONS, (n,), generator=g),
            torch.randint(0, NUM_ENTITIES, (n,), generator=g),
        ],
        dim=1,
    )
    triples[1, 2] = triples[1, 0]  # head == tail
    triples[2, 0] = NUM_SEEN + 1  # an unseen head: reads the unseen row
    return triples


#: every entity is a candidate, so the unseen row is read by the 8 unseen ones AND by dropped-out seen ones
POOL = torch.arange(NUM_ENTITIES)
POSITIONS = pool_positions(POOL, NUM_ENTITIES)


class _Loss(nn.Module):
    def __init__(self, model, label_smoothing: float) -> None:
        super().__init__()
        self.model, self.label_smoothing = model, label_smoothing

    def forward(self, triples, generator):
        return one_vs_all_loss(
            self.model,
            triples,
            entity_pool=POOL,
            positions=POSITIONS,
            temperature=TEMPERATURE,
            label_smoothing=self.label_smoothing,
            generator=generator,
        ).sum()


def oracle(model, triples, seed: int, label_smoothing: float = 0.0, skip: int = 0) -> list[dict[str, torch.Tensor]]:
    """Per-example gradients, one ``torch.func.grad`` call per example, all from the same mask.

    The mask comes from a generator seeded with ``seed`` after ``skip`` uniforms (a Poisson sample's).
    """
    wrapper = _Loss(model, label_smoothing)
    params = {f"model.{k}": p.detach() for k, p in trained_parameters(model).items()}
    out = []
    for b in range(len(triples)):
        gen = torch.Generator().manual_seed(seed)
        torch.rand(skip, generator=gen)
        one = triples[b : b + 1]
        grads = grad(lambda prm, one=one, gen=gen: functional_call(wrapper, prm, (one, gen)))(params)
        out.append({k[len("model.") :]: v for k, v in grads.items()})
    return out


def oracle_sq_norms(grads: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {k: torch.stack([g[k].square().sum() for g in grads]) for k in grads[0]}


CASES = [
    ("cpu-fused", {}, 0.0),
    ("cpu-fused", {"normalize_entities": False}, 0.0),
    ("cpu-fused", {}, 0.1),
    ("cpu-best", {}, 0.0),
    ("transe-l2", {"structural_dropout": 0.5}, 0.0),
    ("cpu-fused", {"structural_buckets": 3}, 0.0),  # hashed rows: several candidates share a row
    ("transe-l2", {"structural_buckets": 2, "structural_dropout": 0.5}, 0.0),
]


@pytest.mark.parametrize("method", ["gram", "gram-cached", "direct"])
@pytest.mark.parametrize("preset,changes,smoothing", CASES)
def test_per_parameter_norms_match_oracle(preset, changes, smoothing, method):
    """``gram-cached``: the head/tail columns' products read gathered rows of ``X X^T``."""
    model = make_model(preset, **changes)
    if method == "gram-cached" and model.text is None:
        pytest.skip("no text features, no feature Gram")
    gram = feature_gram(model, POOL) if method == "gram-cached" else None
    triples = make_triples()
    want = oracle_sq_norms(oracle(model, triples, seed=11, label_smoothing=smoothing))
    got = per_example_sq_norms(
        model,
        triples,
        entity_pool=POOL,
        positions=POSITIONS,
        temperature=TEMPERATURE,
        label_smoothing=smoothing,
        generator=torch.Generator().manual_seed(11),
        method=method.split("-")[0],
        gram=gram,
    )
    assert set(got) == set(want) == set(trained_parameters(model))
    for k in want:
        assert torch.allclose(got[k], want[k], rtol=1e-9, atol=1e-12), (k, got[k], want[k])
    if preset == "cpu-fused" and not changes:
        assert set(want) == {
            "structural.weight",
            "relation_embeddings",
            "fusion.w_structural",
            "fusion.w_text",
            "text.projection.weight",
            "text.projection.bias",
        }
        for k in want:  # every trained parameter contributes: dropping one would change the norm
            assert bool((want[k] > 1e-8).all()), k


@pytest.mark.parametrize("method", ["gram", "direct"])
def test_small_chunks_give_the_oracle_norms(monkeypatch, method):
    """Examples one at a time and the (P, P) Gram matrix in 7-row blocks (its upper triangle counted twice)."""
    import textkg.training.one_vs_all.clipping as module

    monkeypatch.setattr(module, "_CHUNK_ELEMENTS", 7 * NUM_ENTITIES)
    model = make_model()
    triples = make_triples()
    want = oracle_sq_norms(oracle(model, triples, seed=11))
    got = per_example_sq_norms(
        model,
        triples,
        entity_pool=POOL,
        positions=POSITIONS,
        temperature=TEMPERATURE,
        generator=torch.Generator().manual_seed(11),
        method=method,
    )
    for k in want:
        assert torch.allclose(got[k], want[k], rtol=1e-9, atol=1e-12), k


def test_a_cached_feature_gram_gives_the_same_norms():
    model = make_model()
    triples = make_triples()
    kwargs = {"entity_pool": POOL, "positions": POSITIONS, "temperature": TEMPERATURE, "method": "gram"}
    plain = per_example_sq_norms(model, triples, generator=torch.Generator().manual_seed(1), **kwargs)
    cached = per_example_sq_norms(
        model, triples, generator=torch.Generator().manual_seed(1), gram=feature_gram(model, POOL), **kwargs
    )
    for k in plain:
        assert torch.allclose(plain[k], cached[k], rtol=1e-12), k


def test_norms_fail_without_the_projection_part():
    """A norm that forgot the projection weight would differ from the oracle's."""
    model = make_model()
    triples = make_triples()
    want = oracle_sq_norms(oracle(model, triples, seed=11))
    got = per_example_sq_norms(
        model,
        triples,
        entity_pool=POOL,
        positions=POSITIONS,
        temperature=TEMPERATURE,
        generator=torch.Generator().manual_seed(11),
    )
    total = sum(want.values()).sqrt()
    assert torch.allclose(sum(got.values()).sqrt(), total, rtol=1e-9)
    without = sum(v for k, v in got.items() if k != "text.projection.weight").sqrt()
    assert bool(((total - without) / total > 1e-3).all())


@pytest.mark.parametrize("book_keeping", [True, False])
@pytest.mark.parametrize(
    "preset,changes", [("cpu-fused", {}), ("cpu-best", {}), ("cpu-fused", {"structural_buckets": 3})]
)
def test_clipped_sum_matches_oracle(preset, changes, book_keeping):
    """Both ways to the clipped sum: book-kept factors (one pass) and the reweighted backward."""
    model = make_model(preset, **changes)
    triples = make_triples()
    grads = oracle(model, triples, seed=5)
    norms = torch.stack([sum(g.square().sum() for g in ex.values()) for ex in grads]).sqrt()
    c = float(norms.median())  # about half the examples are clipped
    coef = (c / (norms + 1e-6)).clamp(max=1.0)
    assert bool((coef < 1).any() and (coef == 1).any())
    gen = torch.Generator().manual_seed(5)
    out = clipped_gradient_sum(
        model,
        triples,
        entity_pool=POOL,
        positions=POSITIONS,
        max_grad_norm=c,
        temperature=TEMPERATURE,
        generator=gen,
        gram=feature_gram(model, POOL),
        book_keeping=book_keeping,
    )
    assert torch.allclose(out.norms, norms, rtol=1e-9)
    for k, got in out.gradients.items():
        want = sum(cb * ex[k] for cb, ex in zip(coef, grads, strict=True))
        assert torch.allclose(got, want, rtol=1e-8, atol=1e-12), k
    after = torch.Generator().manual_seed(5)  # the generator ends where one loss evaluation leaves it
    one_vs_all_loss(model, triples, entity_pool=POOL, positions=POSITIONS, generator=after)
    assert torch.equal(gen.get_state(), after.get_state())


def test_infinite_bound_gives_the_batch_gradient():
    model = make_model()
    triples = make_triples()
    out = clipped_gradient_sum(
        model,
        triples,
        entity_pool=POOL,
        positions=POSITIONS,
        max_grad_norm=1e12,
        temperature=TEMPERATURE,
        generator=torch.Generator().manual_seed(2),
    )
    assert bool((out.coefficients == 1).all())
    loss = one_vs_all_loss(
        model,
        triples,
        entity_pool=POOL,
        positions=POSITIONS,
        temperature=TEMPERATURE,
        generator=torch.Generator().manual_seed(2),
    ).sum()
    params = trained_parameters(model)
    want = torch.autograd.grad(loss, list(params.values()))
    for (k, _), w in zip(params.items(), want, strict=True):
        assert torch.allclose(out.gradients[k], w, rtol=1e-10, atol=1e-13), k


def test_empty_batch():
    model = make_model()
    out = clipped_gradient_sum(
        model,
        torch.zeros(0, 3, dtype=torch.long),
        entity_pool=POOL,
        positions=POSITIONS,
        max_grad_norm=1.0,
        generator=torch.Generator().manual_seed(0),
    )
    assert out.norms.shape == (0,)
    assert all(float(g.abs().sum()) == 0 for g in out.gradients.values())


def test_dropout_mask_is_the_one_entity_matrix_draws_on_large_pools():
    """The mask is drawn in entity_matrix's chunks: pools above one chunk read the same rows."""
    n = 9000
    cfg = dataclasses.replace(get_preset("transe-l2"), dim=2, structural_dropout=0.5)
    model = build_model(cfg, num_entities=n, num_relations=1, seen_entities=torch.arange(n)).train()
    pool = torch.arange(n)
    with torch.no_grad():
        got = build_pool(model, pool, torch.Generator().manual_seed(4)).vectors
        want = model.entity_matrix(pool, generator=torch.Generator().manual_seed(4))
    assert torch.equal(got, want)


@pytest.mark.parametrize("preset,changes", [("transe", {}), ("gated-transe", {"encoder": "bert"}), ("distmult", {})])
def test_unsupported_models_are_refused(preset, changes):
    model = make_model(preset, **changes)
    with pytest.raises(ConfigError):
        per_example_sq_norms(model, make_triples(), entity_pool=POOL, positions=POSITIONS)


def test_unknown_method_is_refused():
    with pytest.raises(ConfigError, match="method|one of"):
        per_example_sq_norms(make_model(), make_triples(), entity_pool=POOL, positions=POSITIONS, method="fast")


def test_float32_fast_paths_stay_at_float32_rounding():
    """The gathered-Gram norms and the book-kept sum in float32 against float64 ``direct`` + backward."""
    p, b, t, d = 300, 32, 96, 16
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(p, t, generator=g) + 0.5, dim=-1)  # correlated features
    torch.manual_seed(0)
    model = build_model(
        dataclasses.replace(get_preset("cpu-private"), dim=d),
        num_entities=p,
        num_relations=7,
        seen_entities=torch.arange(p),
        text_features=x,
    ).train()
    pool = torch.arange(p)
    triples = torch.stack(
        [
            torch.randint(0, p, (b,), generator=g),
            torch.randint(0, 7, (b,), generator=g),
            torch.randint(0, p, (b,), generator=g),
        ],
        1,
    )

    def run(dtype, method, book_keeping):
        m = model.to(dtype)
        return clipped_gradient_sum(
            m,
            triples,
            entity_pool=pool,
            positions=pool_positions(pool, p),
            max_grad_norm=1.0,
            temperature=0.05,
            generator=torch.Generator().manual_seed(3),
            method=method,
            gram=feature_gram(m, pool) if method == "gram" else None,
            book_keeping=book_keeping,
        )

    ref = run(torch.float64, "direct", False)
    fast = run(torch.float32, "gram", True)
    assert float(((fast.norms.double() - ref.norms).abs() / ref.norms).max()) < 1e-5
    for k, want in ref.gradients.items():
        assert float((fast.gradients[k].double() - want).norm() / want.norm()) < 1e-5, k
