"""``exchange.method: average``: each party averages its aligned rows with its partners' rows.

Under ``exchange.unit: statement`` every party's model is a DP-SGD model of the SAME shared part of
``hpo`` by source (the ontology's terms and genes) with independent noise, and the noise dominates
(docs/cross_graph.md, "Statement level": the two models' aligned rows correlate at 0.11). The
``procrustes`` method fits Gower's least-squares scale, which falls with that correlation, so its
update is nearly ``(1 − λ)·own + λ·mean``: shrinkage, which the no-information control matches.

Here the receiver treats each partner's rows as one more estimate of its own rows:

1. it maps the sender's release into its space by the orthogonal Procrustes rotation fitted on the
   aligned rows, scaled so that the mapped rows have its own spread
   (:func:`~textkg.federated.cross_graph.procrustes.matched_procrustes`);
2. it replaces its aligned rows by the running mean of its own and its partners' mapped rows: the
   ``j``-th message it receives in a round gets weight ``1/(j + 1)``, so after all ``K − 1`` partners
   (and no fine-tuning between) a row is ``(own + Σ_k mapped_k) / K``. With K estimates whose errors
   are independent and of equal variance, the equal-weight mean is the minimum-variance unbiased
   combination (inverse-variance weighting; Cochran 1954, Biometrics 10(1), "The combination of
   estimates from different experiments", §2): the noise variance falls K-fold, the signal stays;
3. the runner takes the slot's DP-SGD fine-tuning and keeps or rolls back
   (:func:`~textkg.federated.cross_graph.runner.apply_release`), as for ``procrustes``.

What it reads: the sender's release (post-processing of its DP-SGD model, or the Gaussian release at
the entity level) and the receiver's own rows; the weight reads the public schedule (how many
messages of this round the receiver has had). The release, the ledger and the block are the
``procrustes`` method's, so the guarantee is unchanged. ``exchange.mix`` is not used: the weight is
the running mean's (a ``mix`` other than its default is refused).
"""

from __future__ import annotations

import torch

from textkg.federated.cross_graph.procrustes import matched_procrustes
from textkg.federated.cross_graph.runner import ProcrustesExchange


class AverageExchange(ProcrustesExchange):
    """``procrustes``'s release and ledger; a spread-matched rotation and a running mean at the receiver."""

    name = "average"
    one_way = True

    def translate(self, released: torch.Tensor, own: torch.Tensor, ex) -> torch.Tensor:
        """``(n, d)`` the released rows rotated into the receiver's space, with its spread."""
        return matched_procrustes(released, own)(released)

    def mix_weight(self, receiver, rnd: int, ex) -> float:
        """``1/(j + 1)`` for the ``j``-th message the receiver gets in round ``rnd`` (from the public
        schedule: every received message is logged, kept or not)."""
        j = 1 + sum(e["round"] == rnd for e in receiver.ledger.exchanges)
        return 1.0 / (j + 1)
