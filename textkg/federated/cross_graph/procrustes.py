"""The DP exchange between two parties' aligned embeddings: a Gaussian release of clipped rows,
and a scaled orthogonal Procrustes map from the sender's space to the receiver's.

Mechanism (the sender's side, the only step that reads the sender's embeddings):
each aligned row is clipped to L2 norm C and N(0, σ²C²) is added to every entry
(the Gaussian mechanism, Dwork & Roth 2014, *The Algorithmic Foundations of DP*, Thm. A.1; its
RDP, Mironov 2017, arXiv:1702.07476v3, Prop. 7). Unit: one aligned entity's embedding at the
sender. Adjacency: that row replaced by zeros ("zero-out", Kairouz et al. 2021, arXiv:2103.00039,
§2), so the L2 sensitivity of the released matrix is C; each row is its own mechanism and the
rows are disjoint (parallel composition), so one release is one Gaussian mechanism of
noise multiplier σ, ``SampledGaussianEvent(sample_rate=1.0, noise_multiplier=σ)`` in the
project's accountant. Replacing a row by another (replace-one adjacency) doubles the sensitivity:
that guarantee is the one at σ/2.

Post-processing (the receiver's side; Dwork & Roth 2014, Prop. 2.1): the cross-covariance
M = B̃_cᵀ A_c of the received rows B̃ and the receiver's own A (both centred), its SVD
M = U Σ Vᵀ, the rotation R = U Vᵀ minimising ‖A_c − B̃_c R‖_F over orthogonal R (Schönemann
1966, Psychometrika 31(1), "A generalized solution of the orthogonal Procrustes problem"), and the
least-squares scale s = tr Σ / ‖B̃_c‖²_F (Gower 1975, Psychometrika 40(1), §2). Noise inflates
‖B̃_c‖², so s shrinks the translated rows toward the receiver's mean: the map is more cautious
the noisier the release.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def clip_rows(rows: torch.Tensor, max_norm: float) -> torch.Tensor:
    """``(n, d)`` each row scaled down to L2 norm at most ``max_norm`` (a new tensor)."""
    if not max_norm > 0:
        raise ValueError(f"max_norm must be > 0, got {max_norm}")
    norms = rows.norm(dim=1, keepdim=True)
    return rows * torch.clamp(max_norm / norms.clamp_min(1e-12), max=1.0)


def release_rows(rows: torch.Tensor, *, clip: float, noise_multiplier: float, noise: torch.Tensor) -> torch.Tensor:
    """The Gaussian release ``clip(rows) + σ·C·z`` (module docstring), ``z`` standard normal.

    Args:
        rows: ``(n, d)`` the sender's aligned embeddings.
        clip: C > 0.
        noise_multiplier: σ >= 0 (0: no privacy).
        noise: ``(n, d)`` standard normal draws from the sender's secret stream.
    """
    if noise.shape != rows.shape:
        raise ValueError(f"noise {tuple(noise.shape)} does not match rows {tuple(rows.shape)}")
    if not noise_multiplier >= 0:
        raise ValueError(f"noise_multiplier must be >= 0, got {noise_multiplier}")
    return clip_rows(rows.double(), clip) + float(noise_multiplier) * float(clip) * noise.double()


@dataclass(frozen=True)
class ProcrustesMap:
    """``x ↦ target_mean + scale · (x − source_mean) R``: the sender's space into the receiver's.

    Attributes:
        rotation: ``(d, d)`` orthogonal R.
        scale: s >= 0.
        source_mean, target_mean: ``(d,)``.
    """

    rotation: torch.Tensor
    scale: float
    source_mean: torch.Tensor
    target_mean: torch.Tensor

    def __call__(self, rows: torch.Tensor) -> torch.Tensor:
        """``(n, d)`` rows of the source space mapped into the target space."""
        return self.target_mean + self.scale * (rows.double() - self.source_mean) @ self.rotation


def procrustes(source: torch.Tensor, target: torch.Tensor, *, center: bool = True, scale: bool = True) -> ProcrustesMap:
    """The scaled orthogonal Procrustes map of ``source`` onto ``target`` (module docstring).

    Args:
        source: ``(n, d_s)`` rows in the sender's space (noisy in the DP exchange).
        target: ``(n, d_t)`` the same entities' rows in the receiver's space; with d_s != d_t the
            map is a partial isometry (``(d_s, d_t)``, orthonormal rows or columns).
        center: Remove each side's mean first (a translation between the spaces).
        scale: Fit the scale s; otherwise s = 1.
    """
    if source.ndim != 2 or target.ndim != 2 or len(source) != len(target):
        raise ValueError(f"source {tuple(source.shape)} and target {tuple(target.shape)} need the same rows")
    s, t = source.double(), target.double()
    s_mean = s.mean(0) if center else torch.zeros(s.shape[1], dtype=torch.float64)
    t_mean = t.mean(0) if center else torch.zeros(t.shape[1], dtype=torch.float64)
    sc, tc = s - s_mean, t - t_mean
    u, sigma, vh = torch.linalg.svd(sc.T @ tc, full_matrices=False)  # cross-covariance M = U Σ Vᵀ
    rotation = u @ vh
    factor = float(sigma.sum() / (sc * sc).sum().clamp_min(1e-12)) if scale else 1.0
    return ProcrustesMap(rotation, factor, s_mean, t_mean)


def matched_procrustes(source: torch.Tensor, target: torch.Tensor) -> ProcrustesMap:
    """The orthogonal Procrustes map of ``source`` onto ``target`` with the scale that gives the mapped
    rows the target's spread, s = ‖A_c‖_F / ‖B̃_c‖_F (the "symmetric" scaling of Mardia, Kent & Bibby
    1979, *Multivariate Analysis*, §14.7), instead of Gower's least-squares s.

    Gower's s = tr Σ / ‖B̃_c‖² is a regression slope: with two noisy models of the same rows it falls
    with their correlation (0.11 between two DP-SGD parties on ``hpo-small``), so the map returns
    nearly the receiver's mean and averaging with it is mere shrinkage. The matched scale keeps the
    partner's rows as one more estimate, of the receiver's scale, for
    :class:`~textkg.federated.cross_graph.average_exchange.AverageExchange` to average.

    Args:
        source: ``(n, d_s)`` rows in the sender's space.
        target: ``(n, d_t)`` the same entities' rows in the receiver's space.
    """
    fitted = procrustes(source, target, scale=False)
    spread_source = (source.double() - fitted.source_mean).norm()
    spread_target = (target.double() - fitted.target_mean).norm()
    factor = float(spread_target / spread_source.clamp_min(1e-12))
    return ProcrustesMap(fitted.rotation, factor, fitted.source_mean, fitted.target_mean)
