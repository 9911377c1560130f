"""A curious server against the holders' uploads, and a curious holder against another through the global model
(DP-Flames' two inference attacks), with and without DP.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/federated_attack.py --dataset hpo-small --partition source \\
        --rounds 2 --target-epsilons 1,4 [--attacker OMIM --victim ORPHA] \\
        [--defences none,top-k,decay,top-k+decay --upload-top-k 1000 --noise-decay 0.5] \\
        [--out benchmarks/results/federated_attack_hpo_small.json]

For each privacy setting (none, then record-level DP-SGD at each ε) and ``--defences`` entry, one federation
runs. In every round the server scores each entity by how far its structural row moved in a holder's upload
(:func:`textkg.federated.attacks.server_entity_attack`) to tell the entities in exactly one of the holder's
statements from training entities in none: one row per (setting, round, holder) with AUC, TPR at FPR 1 % and
the empirical ε lower bound. ``--attacker A --victim V``: holder A also compares each global model with what
it was sent and uploaded (:class:`textkg.federated.attacks.CuriousHolder`; rows ``"attack": "client"``).
DP-Flames' defence: ``top-k`` uploads only ``--upload-top-k`` structural rows (a list runs each K), ``decay``
lowers σ by ``--noise-decay`` every round (DP settings only). Results: docs/results/federated.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness, federated.py
import _harness


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="hpo-small")
    p.add_argument("--partition", default="source")
    p.add_argument("--clients", type=int, default=None)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--model", default="fused-transe")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target-epsilons", default="1,4")
    p.add_argument("--attacker", default=None, help="a holder that attacks --victim through the global model")
    p.add_argument("--victim", default=None)
    p.add_argument("--defences", default="none", help="comma-separated: none, top-k, decay, top-k+decay")
    p.add_argument("--upload-top-k", default="1000", help="K, or comma-separated Ks")
    p.add_argument("--noise-decay", type=float, default=0.5)
    p.add_argument("--skip-clear", action="store_true", help="run the DP settings only")
    p.add_argument("--out", default="benchmarks/results/federated_attack_hpo_small.json")
    args = p.parse_args(argv)
    defences = [d.strip() for d in args.defences.split(",") if d.strip()]
    unknown = set(defences) - {"none", "top-k", "decay", "top-k+decay"}
    if unknown:
        p.error(f"unknown defences {sorted(unknown)}")
    if (args.attacker is None) != (args.victim is None):
        p.error("--attacker and --victim go together")

    from federated import train_flags, write_results  # benchmarks/federated.py, beside this script

    from textkg.federated.attacks import CuriousHolder, audit_entities, server_entity_attack
    from textkg.federated.engines import FederatedConfig, federate
    from textkg.training.checkpoint import load as load_checkpoint

    epsilons = [None] * (not args.skip_clear) + [float(e) for e in args.target_epsilons.split(",") if e]
    ks = [int(k) for k in args.upload_top_k.split(",") if k.strip()]
    settings = [
        (e, d, k)
        for e in epsilons
        for d in defences
        for k in (ks if "top-k" in d else [None])
        if e is not None or "decay" not in d
    ]
    rows = []
    run = {"model": args.model, "epochs": args.rounds, "batch_size": args.batch_size, "seed": args.seed}
    with tempfile.TemporaryDirectory() as tmp:
        for eps, defence, top_k in settings:
            private = [] if eps is None else ["--privacy", "full", "--target-epsilon", str(eps)]
            cfg = _harness.train_config([*train_flags(["--dataset", args.dataset], **run), *private])
            fed = FederatedConfig(
                partition=args.partition,
                clients=args.clients,
                rounds=args.rounds,
                local_epochs=1,
                aggregation="fedavg",
                upload_top_k=top_k,
                noise_decay=args.noise_decay if "decay" in defence else None,
            )
            counter: dict[str, int] = {}
            label = "none" if eps is None else f"record-level eps={eps:g}"
            if defence != "none":
                label += f" + {defence}" + (f" (K={top_k})" if len(ks) > 1 and top_k is not None else "")
            head = {"privacy": label, "defence": defence}
            spy = None if args.attacker is None else CuriousHolder(args.attacker, args.victim, seed=args.seed)

            def observe(holder, sent, upload, counter=counter, spy=spy, head=head):
                if spy is not None:  # the curious holder sees every round (it needs every holder's weight)
                    spy(holder, sent, upload)
                members, non = audit_entities(holder.own, holder.shared, holder.model.seen_entities)
                counter[holder.name] = counter.get(holder.name, 0) + 1
                if len(members) < 2:
                    return
                res = server_entity_attack(
                    sent,
                    upload,
                    struct_index=holder.model.structural.struct_index,
                    members=members,
                    non_members=non,
                    seed=args.seed,
                )
                row = {"attack": "server", **head, "round": counter[holder.name], "holder": holder.name}
                rows.append({**row, **res.to_dict()})
                print(json.dumps(rows[-1]), file=sys.stderr)

            t0 = time.perf_counter()
            out = Path(tmp) / f"fed-{len(rows)}"
            m = federate(cfg, fed, out, progress=False, on_upload=observe)
            if spy is not None:
                spy.finish(load_checkpoint(out / "best_model.pt"))  # the last round, read from the final global model
                for r in spy.results:
                    rows.append({"attack": "client", **head, "attacker": args.attacker, "holder": args.victim, **r})
                    print(json.dumps(rows[-1]), file=sys.stderr)
            seconds = time.perf_counter() - t0
            print(json.dumps({"privacy": label, "test_mrr": m["test"]["mrr"], "seconds": seconds}), file=sys.stderr)
            for r in rows:
                if r["privacy"] == label:
                    r["global_test_mrr"] = m["test"]["mrr"]
                    r["seconds"] = seconds
                    r["epsilon_max"] = None if m["privacy"] is None else m["privacy"]["epsilon"]
            rows.append(
                {
                    "attack": "summary",
                    **head,
                    "global_test_mrr": m["test"]["mrr"],
                    "valid_mrr_by_round": [r["valid_mrr"] for r in m["rounds"]],
                    "epsilon_max": None if m["privacy"] is None else m["privacy"]["epsilon"],
                    "ledgers": [c["privacy"] and c["privacy"]["ledger"] for c in m["clients"]],
                    "seconds": seconds,
                    "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                    "load_average_1min": os.getloadavg()[0],
                }
            )
    write_results(args.out, "federated_attack.py", sys.argv[1:] if argv is None else argv, vars(args), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
