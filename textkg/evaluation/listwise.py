"""A linear listwise learning-to-rank fit, shared by the placement and link-prediction re-rankers.

Each list holds a query's candidates as feature rows ``x (K, F)``, some marked
as positives. The score is linear, ``s = x . w``, and the loss is ListNet's
softmax cross-entropy with a top-one probability (Cao et al. 2007, "Learning to
Rank: From Pairwise Approach to Listwise Approach", ICML, eq. 2), in its
multi-positive form (the positives' probabilities summed):

    loss = mean over lists of [ logsumexp_j s_j − logsumexp_{j positive} s_j ] + l2 · |w|²

minimised by L-BFGS with a strong-Wolfe line search from ``w = 0`` (convex, so
the fit is deterministic). Candidates outside a list's ``mask`` take no part.
"""

from __future__ import annotations

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
    opt = torch.optim.LBFGS([w], max_iter=steps, line_search_fn="strong_wolfe")

    def loss_fn() -> torch.Tensor:
        s = x @ w
        every = torch.logsumexp(s.masked_fill(~keep, float("-inf")), 1)
        return (every - torch.logsumexp(s.masked_fill(~positive, float("-inf")), 1)).mean() + l2 * w.pow(2).sum()

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        final = float(loss_fn())
    return w.detach().tolist(), final


__all__ = ["fit_listnet"]
