"""A receiving party attacks what a cross-graph sender released (textkg.federated.cross_graph.attacks).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/cross_graph_attack.py --holders examples/cross_graph/hpo_small.yaml \\
        --epsilons inf,16,4,1 --out benchmarks/results/cross_graph_attack_hpo_small.json

The first holder receives, the second sends. The sender trains alone (its ``train.epochs``), the
two run the PSI, and for each ε (each party's budget over its ``(K − 1)·rounds`` releases, σ
calibrated as in the run; ``inf``: no noise) the receiver plays the row-membership game on one
release of the sender's aligned rows (AUC, the held-out empirical ε lower bound at the run's δ,
the claimed ε of one release and of the whole budget, and the mean cosine of a released row to
the true clipped row), and guesses which entities the sender holds outside the intersection.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> None:
    from textkg.audit.stats import empirical_epsilon_lower_bound, roc_auc
    from textkg.federated.cross_graph.attacks import (
        psi_membership_scores,
        reconstruction_cosine,
        row_membership_scores,
    )
    from textkg.federated.cross_graph.config import load_holders
    from textkg.federated.cross_graph.ledger import planned_noise_multiplier
    from textkg.federated.cross_graph.party import Party
    from textkg.federated.cross_graph.psi import PSIParty, private_intersection
    from textkg.privacy.accountant import epsilon_of

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--holders", required=True)
    ap.add_argument("--epsilons", default="inf,16,4,1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/cross_graph_attack_hpo_small.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    config = load_holders(args.holders)
    ex = config.exchange
    releases = ex.rounds * (len(config.holders) - 1)
    receiver_spec, sender_spec = config.holders[0], config.holders[1]
    work = Path("/tmp") / f"textkg-cg-attack-{time.time_ns()}"
    receiver, sender = Party(receiver_spec, work / "r"), Party(sender_spec, work / "s")
    sender.train_epochs(sender.cfg.train.epochs)
    aligned = list(private_intersection(PSIParty(receiver.items()), PSIParty(sender.items())).intersection)
    rows = sender.rows(aligned)
    g = torch.Generator().manual_seed(args.seed)
    results = []
    for eps in [float(e) for e in args.epsilons.split(",")]:
        sigma = (
            0.0 if math.isinf(eps) else planned_noise_multiplier(target_epsilon=eps, delta=ex.delta, releases=releases)
        )
        members, non = row_membership_scores(rows, clip=ex.clip, noise_multiplier=sigma, generator=g)
        bound = empirical_epsilon_lower_bound(members.numpy(), non.numpy(), delta=ex.delta, seed=args.seed)
        results.append(
            {
                "budget_epsilon": None if math.isinf(eps) else eps,
                "noise_multiplier": sigma,
                "epsilon_one_release": None
                if sigma == 0
                else epsilon_of(sample_rate=1.0, noise_multiplier=sigma, steps=1, delta=ex.delta),
                "row_membership_auc": roc_auc(members.numpy(), non.numpy()),
                "empirical_epsilon_lower_bound": bound.epsilon,
                "reconstruction_cosine": reconstruction_cosine(rows, clip=ex.clip, noise_multiplier=sigma, generator=g),
            }
        )
        print(results[-1], file=sys.stderr)
    mine, theirs = set(receiver.items()), set(sender.items())
    absent = [e for e in sender.prep.kg.entities if e not in mine and e not in theirs]
    psi = psi_membership_scores(receiver.items(), sender.items(), absent)
    record = {
        "command": "python benchmarks/cross_graph_attack.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "receiver": receiver_spec.name,
        "sender": sender_spec.name,
        "aligned": len(aligned),
        "delta": ex.delta,
        "clip": ex.clip,
        "releases_per_party": releases,
        "row_membership": results,
        "psi_membership": {
            "members": len(psi["dh-psi"][0]),
            "non_members": len(psi["dh-psi"][1]),
            "auc": {name: roc_auc(*scores) for name, scores in psi.items()},
        },
    }
    out = _harness.write_results(args.out, record)
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
