"""Centralized vs federated vs each data holder alone, non-private and with record-level DP.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/federated.py --dataset hpo-small --partition source \\
        --rounds 3 --local-epochs 1 [--target-epsilons 4] [--model fused-transe] \\
        [--out benchmarks/results/federated_hpo_small.json]
    # a BLP-format directory (inductive FB15k-237), K = 3 random holders, only some rows:
    OMP_NUM_THREADS=1 python benchmarks/federated.py --data ../shared/data/fb15k237 \\
        --inductive-dir ind_rebuilt_seed0 --partition random --clients 3 --model cpu-best \\
        --train-args "--negatives sampled" --aggregations fedavg --methods centralized,federated,alone

For each privacy setting (none, then ``--privacy full --target-epsilon ε`` per ε), on one inductive split and
model, the rows of ``--methods``: ``centralized`` (under DP: :func:`_central_privacy`), ``federated:<agg>``
(R rounds of E local epochs), ``alone:<holder>`` and ``public-only`` (the control, ε = 0; only where the
partition shares statements); ``--client-epsilons`` adds client-level DP-FedAvg rows. Every row is the final
model's test metrics; the JSON is rewritten after every row. Rows and results: docs/results/federated.md.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

METHODS = ("centralized", "federated", "alone", "public-only")
#: the control's row: the shared (public) statements alone, same epochs and split, ε = 0
PUBLIC_ONLY = "public-only"


def write_results(path: str, script: str, argv: list[str], settings: dict, rows: list[dict]) -> None:
    """Write a benchmark's rows with the command that made them (``benchmarks/results/*.json``)."""
    command = f"python benchmarks/{script} " + shlex.join(argv)
    record = _harness.result(Path(script).stem, command=command, settings=settings, rows=rows)
    out = _harness.write_results(path, record)
    print(f"wrote {out}", file=sys.stderr)


def _central_privacy(args, clients, seed: int) -> list[str]:
    """The centralized run's privacy flags that protect what the holders keep private.

    Federated holders train the shared statements (e.g. ``hpo``'s ontology) as
    public; a fair centralized DP baseline then protects only the other
    statements: ``--privacy confidential`` over the relations they use (the
    ``source`` partition keeps whole relations apart), or ``--privacy full``
    when nothing is shared.
    """
    from textkg.federated.partition import SHARED, make_partition
    from textkg.pipeline.prepared import load_graph_and_split

    if args.partition == "random":  # every statement goes to one holder: nothing is shared
        return ["--privacy", "full"]
    kg, split = load_graph_and_split(_cfg(args, {}))
    train = split.train
    part = make_partition(kg, train, args.partition, num_clients=clients, seed=seed)
    shared = part.assignment == SHARED
    if not bool(shared.any()):
        return ["--privacy", "full"]
    private_rel = set(train[~shared][:, 1].tolist())
    if private_rel & set(train[shared][:, 1].tolist()):
        raise SystemExit("the partition shares part of a relation; no centralized confidential baseline matches it")
    return [
        "--privacy",
        "confidential",
        "--confidential-relations",
        ",".join(kg.relations[r] for r in sorted(private_rel)),
    ]


def train_flags(data: list[str], *, model: str, epochs: int, batch_size: int, seed: int) -> list[str]:
    """The ``textkg train`` flags of a run of this script and of ``federated_attack.py``: ``data`` (``--dataset
    ...``), the inductive split, the model, epochs, batch size and seed, no progress bar."""
    flags = ["--split", "inductive", "--model", model, "--epochs", str(epochs), "--batch-size", str(batch_size)]
    return [*data, *flags, "--seed", str(seed), "--no-progress"]


def _cfg(args, privacy: dict):
    data = ["--dataset", args.dataset]
    if args.data:  # a BLP-format directory: its inductive split folder, descriptions and candidate protocol
        data = ["--dataset", args.data, "--inductive-dir", args.inductive_dir, "--description", args.description]
        data += ["--candidates", "blp"]
    epochs = args.rounds * args.local_epochs
    argv = train_flags(data, model=args.model, epochs=epochs, batch_size=args.batch_size, seed=args.seed)
    argv += shlex.split(args.train_args)
    if privacy:
        argv += [*privacy["flags"], "--target-epsilon", str(privacy["target_epsilon"])]
    return _harness.train_config(argv)


def _test(metrics: dict) -> dict:
    """Headline test metrics, plus the MRR of each relation's statements: the shared ontology's
    (``is_a``) and the holders' own (``has_phenotype``, ...), which federation is for."""
    out = {k: metrics[k] for k in ("mrr", "hits@1", "hits@3", "hits@10", "num_triples") if k in metrics}
    out["relation_mrr"] = {
        name.split(":", 1)[1]: sub["mrr"]
        for name, sub in metrics.get("subsets", {}).items()
        if name.startswith("relation:")
    }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="hpo-small")
    p.add_argument("--data", default=None, help="a BLP-format directory instead of --dataset (e.g. FB15k-237)")
    p.add_argument("--inductive-dir", default="ind_rebuilt_seed0", help="with --data: its inductive split folder")
    p.add_argument("--description", default="first-sentence", help="with --data: which descriptions")
    p.add_argument(
        "--train-args", default="", help='more `textkg train` flags for every row, e.g. "--negatives sampled --lr 0.01"'
    )
    p.add_argument(
        "--methods",
        default="centralized,federated,alone,public-only",
        help="comma-separated kinds of rows to run (all four)",
    )
    p.add_argument("--partition", default="source")
    p.add_argument("--clients", type=int, default=None)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--local-epochs", type=int, default=1)
    p.add_argument("--model", default="fused-transe")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--aggregations", default="row,fedavg", help="comma-separated server aggregations")
    p.add_argument("--target-epsilons", default="4", help="comma-separated; empty: non-private only")
    p.add_argument(
        "--client-epsilons",
        default="",
        help="comma-separated: also run client-level DP-FedAvg at each epsilon (one row each)",
    )
    p.add_argument("--client-clip", type=float, default=1.0)
    p.add_argument("--no-nonprivate", action="store_true", help="skip the non-private rows")
    p.add_argument("--only-client-dp", action="store_true", help="run only the client-level DP rows")
    p.add_argument("--out", default="benchmarks/results/federated_hpo_small.json")
    args = p.parse_args(argv)

    from textkg.federated.engines import FederatedConfig, federate
    from textkg.pipeline.job import run

    methods = set(args.methods.split(","))
    unknown = methods - set(METHODS)
    if unknown:
        p.error(f"--methods: unknown {', '.join(sorted(unknown))}; expected {', '.join(METHODS)}")
    flags = _central_privacy(args, args.clients, args.seed)
    record = sys.argv[1:] if argv is None else argv

    def federation(aggregation: str, **client_dp) -> FederatedConfig:
        rounds = {"rounds": args.rounds, "local_epochs": args.local_epochs}
        return FederatedConfig(
            partition=args.partition, clients=args.clients, **rounds, aggregation=aggregation, **client_dp
        )

    def done(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
        write_results(args.out, "federated.py", record, vars(args), rows)

    settings = [{}] + [{"target_epsilon": float(e), "flags": flags} for e in args.target_epsilons.split(",") if e]
    if args.no_nonprivate:
        settings = settings[1:]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for eps in [float(e) for e in args.client_epsilons.split(",") if e]:
            fed = federation("fedavg", client_target_epsilon=eps, client_clip=args.client_clip)
            t0 = time.perf_counter()
            m = federate(_cfg(args, {}), fed, Path(tmp) / f"client-dp-{len(rows)}", progress=False)
            done(
                {
                    "privacy": f"client-level eps={eps:g}",
                    "method": "federated:dp-fedavg",
                    "test": _test(m["test"]),
                    "epsilon": m["privacy"]["epsilon"],
                    "noise_multiplier": m["privacy"]["noise_multiplier"],
                    "clip": args.client_clip,
                    "num_clients": m["privacy"]["num_clients"],
                    "seconds": time.perf_counter() - t0,
                }
            )
        for privacy in [] if args.only_client_dp else settings:
            label = "none" if not privacy else f"record-level eps={privacy['target_epsilon']:g}"
            cfg = _cfg(args, privacy)
            if "centralized" in methods:
                t0 = time.perf_counter()
                m = run(cfg, Path(tmp) / f"central-{len(rows)}", progress=False)
                done(
                    {
                        "privacy": label,
                        "method": "centralized",
                        "test": _test(m["test"]),
                        "privacy_flags": privacy.get("flags"),
                        "epsilon": None if m["privacy"] is None else m["privacy"]["epsilon"],
                        "steps": m["train"].get("steps"),
                        "seconds": time.perf_counter() - t0,
                    }
                )
            fed_cfg = cfg if not privacy else _cfg(args, {**privacy, "flags": ["--privacy", "full"]})
            for aggregation in args.aggregations.split(",") if "federated" in methods else []:
                t0 = time.perf_counter()
                m = federate(fed_cfg, federation(aggregation), Path(tmp) / f"fed-{len(rows)}", progress=False)
                done(
                    {
                        "privacy": label,
                        "method": f"federated:{aggregation}",
                        "test": _test(m["test"]),
                        "epsilon": None if m["privacy"] is None else m["privacy"]["epsilon"],
                        "privacy_block": m["privacy"],  # metrics.json's: guarantee dp or simulation
                        "clients": [
                            {
                                "name": c["name"],
                                "num_statements": c["num_statements"],
                                "epsilon": None if c["privacy"] is None else c["privacy"]["epsilon"],
                                "delta": None if c["privacy"] is None else c["privacy"]["delta"],
                                "steps": None if c["privacy"] is None else c["privacy"].get("steps"),
                                "privacy_block": c["privacy"],
                            }
                            for c in m["clients"]
                        ],
                        "rounds": m["rounds"],
                        "sizes": m["federated"]["sizes"],
                        "seconds": time.perf_counter() - t0,
                    }
                )
            if methods & {"alone", "public-only"}:  # the same privacy and split as in the federation
                _alone(
                    args, fed_cfg, label, Path(tmp), done, holders="alone" in methods, public="public-only" in methods
                )
    return 0


def _alone(args, cfg, label: str, tmp: Path, done, *, holders: bool = True, public: bool = False) -> None:
    """Each holder trains R × E epochs on its own statements (and the shared ones), no federation;
    with ``public``, the control: the shared statements alone, without privacy, on the same split."""
    import dataclasses

    import torch

    from textkg.federated.partition import make_partition
    from textkg.federated.runner import DataHolder, trained_state
    from textkg.pipeline.job import evaluate_split, prepare
    from textkg.training.config import PrivacyConfig

    prep = prepare(cfg)
    part = make_partition(prep.kg, prep.split.train, args.partition, num_clients=args.clients, seed=cfg.train.seed)
    shared = prep.split.train[part.assignment == -1]
    initial = trained_state(prep.model)
    todo = [
        (name, cfg, part.client_triples(prep.split.train, k, include_shared=False))
        for k, name in enumerate(part.clients)
    ]
    todo = todo if holders else []
    if public and len(shared):  # no private statement at all, so no privacy is needed: ε = 0
        todo.append((PUBLIC_ONLY, dataclasses.replace(cfg, privacy=PrivacyConfig()), shared[:0]))
    for name, holder_cfg, own in todo:
        t0 = time.perf_counter()
        torch.manual_seed(cfg.train.seed)
        holder = DataHolder(name, prep, holder_cfg, own, shared, tmp / f"alone-{label}-{name}")
        new, _ = holder.fit(initial, args.rounds * args.local_epochs)
        holder.close()
        prep.model.load_state_dict(new, strict=False)
        test = evaluate_split(prep, cfg, "test").to_dict()
        prep.model.load_state_dict(initial, strict=False)
        done(
            {
                "privacy": label,
                "method": name if name == PUBLIC_ONLY else f"alone:{name}",
                "test": _test(test),
                "epsilon": 0.0 if name == PUBLIC_ONLY else None if holder.private is None else holder.private.epsilon(),
                "privacy_block": None if holder.private is None else holder.private.report(),
                "num_statements": holder.num_own,
                "seconds": time.perf_counter() - t0,
            }
        )


if __name__ == "__main__":
    sys.exit(main())
