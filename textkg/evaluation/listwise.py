"""A linear listwise learning-to-rank fit, shared by the placement and link-prediction re-rankers.

Each list holds a query's candidates as feature rows ``x (K, F)``, some marked
as positives. The score is linear, ``s = x . w``, and the loss is ListNet's
softmax cross-entropy with a top-one probability (Cao et al. 2007, "Learning to
Rank: From Pairwise Approach to Listwise Approach", ICML, eq. 2), in its
multi-positive form (the positives' probabilities summed):

    loss = mean over lists of [ logsumexp_j s_j − logsumexp_{j positive} s_j ] + l2 · |w|²

minimised by L-BFGS with a strong-Wolfe line search from ``w = 0`` (convex, so
the fit is deterministic). Candidates outside a list's ``mask`` take no part.

:func:`fit_listnet_mlp` fits the same loss with a score that is not linear: one hidden layer of ``tanh``
units beside a linear skip, on standardised features (a one-hidden-layer network as RankNet's scorer,
Burges et al. 2005, "Learning to Rank using Gradient Descent", ICML; the listwise loss as above):

    z = (x − μ) / σ,   s = z . w + tanh(z U + b) . v

so a feature's worth may depend on the others (a holder similarity that counts for one kind of relation and
not another) and need not be monotone. It is not convex; the fit starts from a seeded ``U`` (``w``, ``b``,
``v`` at 0) and runs L-BFGS in float64, so the same lists and seed give the same weights.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def fit_listnet(
    x: torch.Tensor, y: torch.Tensor, *, steps: int, l2: float, mask: torch.Tensor | None = None
) -> tuple[list[float], float]:
    """Weights ``w (F,)`` and the final loss of the listwise fit (module docstring).

    Args:
        x: ``(n, K, F)`` features of ``n`` lists of ``K`` candidates.
        y: ``(n, K)`` bool, the positives (each list needs one inside ``mask``).
        steps: L-BFGS iterations.
        l2: Ridge penalty.
        mask: ``(n, K)`` bool, the candidates that take part (all when ``None``).

    Returns:
        ``(weights, loss)``.
    """
    x = x.double()
    keep = torch.ones(y.shape, dtype=torch.bool) if mask is None else mask.bool()
    positive = y.bool() & keep
    x = x.masked_fill(~keep[..., None], 0.0)
    w = torch.zeros(x.shape[2], dtype=torch.float64, requires_grad=True)
    final = minimise_listnet([w], lambda: x @ w, keep=keep, positive=positive, penalised=[w], l2=l2, steps=steps)
    return w.detach().tolist(), final


def minimise_listnet(
    parameters: list[torch.Tensor],
    scores: Callable[[], torch.Tensor],
    *,
    keep: torch.Tensor | None,
    positive: torch.Tensor,
    penalised: list[torch.Tensor],
    l2: float,
    steps: int,
) -> float:
    """Minimise the listwise loss of the module docstring over ``parameters`` by L-BFGS (strong-Wolfe line
    search), in place; ``scores()`` gives the ``(n, K)`` scores, ``keep`` the candidates that take part (all
    when ``None``), ``positive`` the positives, ``penalised`` the tensors under the ridge ``l2``. Returns the
    final loss."""
    opt = torch.optim.LBFGS(parameters, max_iter=steps, line_search_fn="strong_wolfe")

    def loss_fn() -> torch.Tensor:
        s = scores()
        every = torch.logsumexp(s if keep is None else s.masked_fill(~keep, float("-inf")), 1)
        fit = (every - torch.logsumexp(s.masked_fill(~positive, float("-inf")), 1)).mean()
        return fit + l2 * sum(p.pow(2).sum() for p in penalised)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return float(loss_fn())


#: Standardised features are clipped to ``[-CLIP, CLIP]``: a first stage that masks the query's own column scores
#: it near the float minimum, and one such value must not take the network's units with it.
CLIP = 10.0
#: Feature values beyond this size (masked scores) take no part in ``μ`` and ``σ``.
LARGEST = 1e6
#: The parameters of :func:`fit_listnet_mlp`'s score, with their shapes (``F`` features, ``H`` hidden units).
MLP_PARAMETERS = {"mean": "F", "scale": "F", "linear": "F", "hidden_in": "F x H", "hidden_bias": "H", "hidden_out": "H"}


def mlp_scores(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``(..., K)`` float64 scores of :func:`fit_listnet_mlp`'s network for features ``x (..., K, F)``."""
    z = ((x.double() - params["mean"]) / params["scale"]).clamp(-CLIP, CLIP)
    return z @ params["linear"] + torch.tanh(z @ params["hidden_in"] + params["hidden_bias"]) @ params["hidden_out"]


def fit_listnet_mlp(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    hidden: int,
    steps: int,
    l2: float,
    mask: torch.Tensor | None = None,
    seed: int = 0,
) -> tuple[dict[str, torch.Tensor], float]:
    """The network of the module docstring fitted with the listwise loss of :func:`fit_listnet`.

    Args:
        x: ``(n, K, F)`` features of ``n`` lists of ``K`` candidates.
        y: ``(n, K)`` bool, the positives (each list needs one inside ``mask``).
        hidden: ``H``, the hidden units.
        steps: L-BFGS iterations.
        l2: Ridge penalty on ``w``, ``U`` and ``v``.
        mask: ``(n, K)`` bool, the candidates that take part (all when ``None``).
        seed: Seeds ``U``'s start.

    Returns:
        ``({name: float64 tensor}, loss)``, the names and shapes of :data:`MLP_PARAMETERS`; ``μ`` and ``σ`` are
        the mean and standard deviation of each feature over the candidates that take part, values beyond
        :data:`LARGEST` left out (``σ = 1`` where a feature is constant).
    """
    x = x.double()
    keep = torch.ones(y.shape, dtype=torch.bool) if mask is None else mask.bool()
    positive = y.bool() & keep
    rows = x[keep]
    usable = rows.abs() <= LARGEST
    count = usable.sum(0).clamp_min(1)
    mean = torch.where(usable, rows, 0.0).sum(0) / count
    var = torch.where(usable, (rows - mean) ** 2, 0.0).sum(0) / (count - 1).clamp_min(1)
    scale = torch.where(var.sqrt() > 1e-12, var.sqrt(), torch.ones_like(var))
    g = torch.Generator().manual_seed(seed)
    f = x.shape[2]
    params = {
        "mean": mean,
        "scale": scale,
        "linear": torch.zeros(f, dtype=torch.float64, requires_grad=True),
        "hidden_in": (torch.randn(f, hidden, generator=g, dtype=torch.float64) / f**0.5).requires_grad_(),
        "hidden_bias": torch.zeros(hidden, dtype=torch.float64, requires_grad=True),
        "hidden_out": torch.zeros(hidden, dtype=torch.float64, requires_grad=True),
    }
    trained = [params[n] for n in ("linear", "hidden_in", "hidden_bias", "hidden_out")]
    penalised = [params[n] for n in ("linear", "hidden_in", "hidden_out")]
    final = minimise_listnet(
        trained, lambda: mlp_scores(params, x), keep=keep, positive=positive, penalised=penalised, l2=l2, steps=steps
    )
    return {n: p.detach().clone() for n, p in params.items()}, final


__all__ = ["CLIP", "LARGEST", "MLP_PARAMETERS", "fit_listnet", "fit_listnet_mlp", "minimise_listnet", "mlp_scores"]
