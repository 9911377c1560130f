"""The 1-vs-all softmax loss and its exact per-example clipping, one package with one public interface.

* :mod:`.loss`: the per-example 1-vs-all loss over an entity pool (and the sampled pool);
* :mod:`.clipping`: exact per-example gradient norms and the clipped sum under DP-SGD, without
  per-example gradients (ghost clipping and book-keeping, Li et al. 2022; Bu et al. 2023);
* :mod:`.factors`: the low-rank factors of each example's gradient that :mod:`.clipping` works from.

Callers import from here; the modules import each other's public names only.
"""

from textkg.training.one_vs_all.clipping import (
    METHODS,
    ClippedSum,
    clipped_gradient_sum,
    per_example_sq_norms,
    private_refusal,
    trained_parameters,
)
from textkg.training.one_vs_all.factors import feature_gram, projection_flops
from textkg.training.one_vs_all.loss import on_model_device, one_vs_all_loss, pool_positions, sample_pool

__all__ = [
    "METHODS",
    "ClippedSum",
    "clipped_gradient_sum",
    "feature_gram",
    "on_model_device",
    "one_vs_all_loss",
    "per_example_sq_norms",
    "pool_positions",
    "private_refusal",
    "projection_flops",
    "sample_pool",
    "trained_parameters",
]
