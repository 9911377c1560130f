"""Membership attacks on federated KGE: which entities does a holder have statements about?

Two adversaries, both from DP-Flames (Hu et al. 2023, "Quantifying and Defending against Privacy Threats
on Federated Knowledge Graph Embedding", WWW, arXiv:2304.02932):

- a curious *server* that reads one holder's upload (:func:`server_entity_attack`);
- a curious *holder* that reads another holder's data through the global model
  (:func:`client_entity_attack`, below the server's).

*The server's attack.* DP-Flames shows that a KGE server infers a client's entities from the
embedding rows it uploads. Here the server holds what it sent to a holder in a round (``θ``)
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
from textkg.federated.topk import STRUCTURAL_TABLE, dense_upload


@dataclass(frozen=True)
class ServerAttackResult:
    """What an attacker learns from one round (the server from an upload, a holder from the global model).

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
    """``(rows,)`` L2 norm of each row's change between what was sent and what came back.

    A top-k upload (:mod:`textkg.federated.topk`) counts as the rows the server sent where the
    holder uploaded none: those rows did not move, for the server."""
    if table not in sent or table not in upload:
        raise ConfigError(
            f"the upload has no parameter {table!r} (a model with a structural table is needed)", field="table"
        )
    before, after = sent[table].double(), dense_upload(sent, upload, table=table)[table].double()
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
    _check_audit_sets(members, non_members)
    return held_out_attack(
        row_change_scores(sent, upload), struct_index[members], struct_index[non_members], delta=delta, seed=seed
    )


def _check_audit_sets(members: torch.Tensor, non_members: torch.Tensor) -> None:
    if len(members) < 4 or len(non_members) < 4:
        raise ConfigError(
            f"need at least 4 members and 4 non-members, got {len(members)} and {len(non_members)}", field="members"
        )


def held_out_attack(
    scores: torch.Tensor, member_rows: torch.Tensor, non_member_rows: torch.Tensor, *, delta: float, seed: int
) -> ServerAttackResult:
    """The statistics of a row score, its direction learned on one half and measured on the other.

    Args:
        scores: ``(rows,)`` one score per structural row.
        member_rows, non_member_rows: the audited entities' rows.
        delta: δ of the ε lower bound.
        seed: Seed of the halves and of the held-out threshold split.
    """
    pos = scores[member_rows].numpy()
    neg = scores[non_member_rows].numpy()
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


# --- a holder against another holder, through the global model ---------------------------------------------------


def others_update(
    sent: Mapping[str, torch.Tensor],
    own_upload: Mapping[str, torch.Tensor],
    new_global: Mapping[str, torch.Tensor],
    *,
    own_weight: float,
    table: str = STRUCTURAL_TABLE,
) -> torch.Tensor:
    """``(rows, d)`` what the other holders' updates did to ``table``, as one holder can compute it.

    Under FedAvg the next global model is ``θ' = Σ_k w_k θ_k`` (``Σ_k w_k = 1``),
    so holder ``a``, which knows ``θ`` (sent to it), ``θ_a`` (its own upload)
    and its weight ``w_a``, recovers the weighted sum of everyone else's update:

        θ' − θ − w_a (θ_a − θ) = Σ_{k≠a} w_k (θ_k − θ).

    ``own_weight = 0`` gives the plain difference of successive global models.

    Args:
        sent: The round's global parameters ``θ``.
        own_upload: The attacking holder's reply ``θ_a``.
        new_global: The next round's global parameters ``θ'``.
        own_weight: ``w_a`` in ``[0, 1)`` (FedAvg: the holder's share of the own statements,
            published in ``federated.json``'s ``sizes``).
        table: The parameter to read.
    """
    if not 0.0 <= own_weight < 1.0:
        raise ConfigError(f"own_weight must be in [0, 1), got {own_weight!r}", field="own_weight")
    for name, params in (("sent", sent), ("own_upload", own_upload), ("new_global", new_global)):
        if table not in params:
            raise ConfigError(
                f"{name} has no parameter {table!r} (a model with a structural table is needed)", field="table"
            )
    theta = sent[table].double()
    own = dense_upload(sent, own_upload, table=table)[table].double()
    return new_global[table].double() - theta - own_weight * (own - theta)


def victim_audit_entities(
    victim_own: torch.Tensor,
    third_parties: torch.Tensor,
    train_entities: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(members, non_members)`` of the victim for an attacking holder.

    A *member* occurs in exactly one of the victim's own statements and in no
    statement of a third party (the other holders but the attacker, and the
    shared statements), so whether the others' update moved its row is about
    that one statement. A *non-member* occurs in no statement of the victim or
    of a third party. Both may occur in the attacker's own statements: the
    attacker subtracts its own update (:func:`others_update`).

    Args:
        victim_own: ``(n, 3)`` the victim's own statements.
        third_parties: ``(m, 3)`` the statements of every holder but the victim and the attacker,
            and the shared ones.
        train_entities: ``(E,)`` entities with a structural row.
    """
    return audit_entities(victim_own, third_parties, train_entities)


def client_entity_attack(
    sent: Mapping[str, torch.Tensor],
    own_upload: Mapping[str, torch.Tensor],
    new_global: Mapping[str, torch.Tensor],
    *,
    own_weight: float,
    struct_index: torch.Tensor,
    members: torch.Tensor,
    non_members: torch.Tensor,
    delta: float = 0.0,
    seed: int = 0,
) -> ServerAttackResult:
    """DP-Flames' client-side inference: a holder scores entities by how far the others moved their rows.

    The attacker is an honest-but-curious holder: it follows the protocol and
    sees only what every holder sees (the global model of each round, its own
    upload, the FedAvg weights). It scores entity ``e`` by

        s(e) = ‖(Σ_{k≠a} w_k (θ_k − θ))[row(e)]‖₂   (:func:`others_update`)

    and learns the direction on one half of the audited entities, as the
    server's attack does (:func:`held_out_attack`). Members and non-members:
    :func:`victim_audit_entities`. Under record-level DP every ``θ_k`` is a DP
    release of holder ``k``'s statements and ``s`` is post-processing of them,
    so the victim's (ε, δ) bounds this attack as it bounds the server's.

    Args:
        sent, own_upload, new_global, own_weight: As for :func:`others_update`.
        struct_index: ``(num_entities,)`` entity id → structural row.
        members, non_members: From :func:`victim_audit_entities`.
        delta: δ of the ε lower bound.
        seed: Seed of the held-out halves.
    """
    _check_audit_sets(members, non_members)
    scores = others_update(sent, own_upload, new_global, own_weight=own_weight).norm(dim=1)
    return held_out_attack(scores, struct_index[members], struct_index[non_members], delta=delta, seed=seed)


class CuriousHolder:
    """An ``on_upload`` observer of :func:`textkg.federated.engines.federate` that plays one holder against another.

    In every round it keeps what the attacking holder received and uploaded;
    when the attacker receives the next global model (the next round, or
    :meth:`finish` with the final model) it runs :func:`client_entity_attack`
    on the victim. Its view is only the attacker's: the global models, its own
    upload, and the holders' FedAvg weights (their own-statement counts, which
    the federation publishes). The victim's and third parties' statements are
    read only to choose the audited entities.

    Args:
        attacker, victim: Holder names.
        seed: Seed of the held-out halves.

    Attributes:
        results: One ``{"round": r, **ServerAttackResult.to_dict()}`` per attacked round.
    """

    def __init__(self, attacker: str, victim: str, *, seed: int = 0) -> None:
        if attacker == victim:
            raise ConfigError("the attacker and the victim must be different holders", field="victim")
        self.attacker, self.victim, self.seed = attacker, victim, seed
        self.holders: dict = {}
        self.results: list[dict] = []
        self._last: tuple[dict, dict] | None = None
        self._round = 0

    def __call__(self, holder, sent: Mapping[str, torch.Tensor], upload: Mapping[str, torch.Tensor]) -> None:
        self.holders[holder.name] = holder
        if holder.name != self.attacker:
            return
        self.finish(sent)
        self._round += 1
        self._last = ({k: v.clone() for k, v in sent.items()}, {k: v.clone() for k, v in upload.items()})

    def finish(self, new_global: Mapping[str, torch.Tensor]) -> None:
        """Attack the last round with the global model that followed it (no-op before the attacker's first round)."""
        if self._last is None:
            return
        if self.victim not in self.holders:
            raise ConfigError(f"no holder named {self.victim!r} took part", field="victim")
        sent, own = self._last
        self._last = None
        attacker, victim = self.holders[self.attacker], self.holders[self.victim]
        third = [h.own for name, h in self.holders.items() if name not in (self.attacker, self.victim)]
        members, non = victim_audit_entities(
            victim.own, torch.cat([victim.shared, *third]), attacker.model.seen_entities
        )
        weight = attacker.num_examples / sum(h.num_examples for h in self.holders.values())
        res = client_entity_attack(
            sent,
            own,
            new_global,
            own_weight=weight,
            struct_index=attacker.model.structural.struct_index,
            members=members,
            non_members=non,
            seed=self.seed,
        )
        self.results.append({"round": self._round, "own_weight": weight, **res.to_dict()})
