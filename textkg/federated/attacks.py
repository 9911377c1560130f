"""A curious server's attack on a holder's upload: which entities does this holder have statements about?

DP-Flames (Hu et al. 2023, "Quantifying and Defending against Privacy Threats
on Federated Knowledge Graph Embedding", WWW, arXiv:2304.02932)
shows that a KGE server infers a client's entities from the embedding rows it
uploads. Here the server holds what it sent to a holder in a round (``θ``)
and what came back (``θ_k``), and scores each entity ``e`` by how far its
structural row moved:

    s(e) = ‖θ_k[row(e)] − θ[row(e)]‖₂.

Rows that only the holder's negatives touched move too, and with Adam a row
touched by one positive statement can move *less* than one touched by many
negatives, so the direction of the signal depends on the training recipe. The
attacker learns it: members and non-members are split in two halves at random
(seeded), the direction (``s`` or ``−s``) with the larger AUC on the first
halves is kept, and every reported number is computed on the second halves
only.

Members and non-members are chosen so that the attack audits the record-level
guarantee (one statement): a *member* is an entity that occurs in exactly one
of the holder's own statements and in no shared (public) statement, so
whether its row moved is about that one statement; a *non-member* is a
training entity that occurs in none of the holder's statements, own or shared.
Statistics are those of ``textkg audit`` (:mod:`textkg.audit.stats`): ROC AUC,
TPR at FPR 1 %, and an empirical ε lower bound with a held-out threshold
(Jagielski et al. 2020, arXiv:2006.07709v1, Sec. 3). Members and non-members are
different entities, not two worlds of one entity, so the bound is heuristic in
the same way as the loss-attack audit's (docs/audit.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from textkg.audit.stats import empirical_epsilon_lower_bound, roc_auc, tpr_at_fpr
from textkg.errors import ConfigError

#: The parameter that holds one row per training entity.
STRUCTURAL_TABLE = "structural.weight"


@dataclass(frozen=True)
class ServerAttackResult:
    """What the server learns from one upload.

    Every number is on the held-out halves (see the module docstring).

    Attributes:
        auc: ROC AUC of the score in the chosen direction (0.5: chance).
        tpr_at_1pct_fpr: TPR at FPR 1 %.
        epsilon_lower_bound: Held-out empirical ε lower bound (0 when no evidence).
        num_members: Held-out entities in exactly one own statement and no shared one.
        num_non_members: Held-out training entities in none of the holder's statements.
        direction: ``+1``: members' rows move more; ``-1``: less (chosen on the other halves).
    """

    auc: float
    tpr_at_1pct_fpr: float
    epsilon_lower_bound: float
    num_members: int
    num_non_members: int
    direction: int = 1

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def row_change_scores(
    sent: Mapping[str, torch.Tensor], upload: Mapping[str, torch.Tensor], *, table: str = STRUCTURAL_TABLE
) -> torch.Tensor:
    """``(rows,)`` L2 norm of each row's change between what was sent and what came back."""
    if table not in sent or table not in upload:
        raise ConfigError(
            f"the upload has no parameter {table!r} (a model with a structural table is needed)", field="table"
        )
    before, after = sent[table].double(), upload[table].double()
    if before.shape != after.shape:
        raise ValueError(f"{table}: sent {tuple(before.shape)}, got back {tuple(after.shape)}")
    return (after - before).norm(dim=1)


def audit_entities(
    own: torch.Tensor, shared: torch.Tensor, train_entities: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(members, non_members)`` entity ids for the audit (see the module docstring).

    Args:
        own: ``(n, 3)`` the holder's own statements.
        shared: ``(m, 3)`` the shared (public) statements every holder trains.
        train_entities: ``(E,)`` entities with a structural row.
    """
    ends = own[:, [0, 2]].reshape(-1)
    ids, counts = torch.unique(ends, return_counts=True)
    in_shared = torch.isin(ids, shared[:, [0, 2]].reshape(-1))
    # an entity in a statement with itself at both ends counts twice: not "exactly one statement"
    members = ids[(counts == 1) & ~in_shared]
    touched = torch.cat([ends, shared[:, [0, 2]].reshape(-1)])
    non_members = train_entities[~torch.isin(train_entities, touched)]
    return members, non_members


def server_entity_attack(
    sent: Mapping[str, torch.Tensor],
    upload: Mapping[str, torch.Tensor],
    *,
    struct_index: torch.Tensor,
    members: torch.Tensor,
    non_members: torch.Tensor,
    delta: float = 0.0,
    seed: int = 0,
) -> ServerAttackResult:
    """Score members and non-members by how far their rows moved in the upload.

    Args:
        sent, upload: The round's global parameters and the holder's reply.
        struct_index: ``(num_entities,)`` entity id → structural row.
        members, non_members: From :func:`audit_entities`.
        delta: δ of the ε lower bound.
        seed: Seed of the held-out threshold split.
    """
    if len(members) < 4 or len(non_members) < 4:
        raise ConfigError(
            f"need at least 4 members and 4 non-members, got {len(members)} and {len(non_members)}", field="members"
        )
    scores = row_change_scores(sent, upload)
    pos = scores[struct_index[members]].numpy()
    neg = scores[struct_index[non_members]].numpy()
    rng = np.random.default_rng(seed)
    pos, neg = rng.permutation(pos), rng.permutation(neg)
    pos_sel, pos_eval = pos[: len(pos) // 2], pos[len(pos) // 2 :]
    neg_sel, neg_eval = neg[: len(neg) // 2], neg[len(neg) // 2 :]
    direction = 1 if roc_auc(pos_sel, neg_sel) >= 0.5 else -1
    pos_eval, neg_eval = direction * pos_eval, direction * neg_eval
    bound = empirical_epsilon_lower_bound(pos_eval, neg_eval, delta=delta, seed=seed)
    return ServerAttackResult(
        auc=float(roc_auc(pos_eval, neg_eval)),
        tpr_at_1pct_fpr=float(tpr_at_fpr(pos_eval, neg_eval, 0.01)),
        epsilon_lower_bound=float(np.nan_to_num(bound.epsilon)),
        num_members=len(pos_eval),
        num_non_members=len(neg_eval),
        direction=direction,
    )
