"""Each party alone vs cross-graph federation (FKGE-style, with and without DP) vs FedAvg over one vocabulary.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/cross_graph.py --holders examples/cross_graph/hpo_small.yaml \\
        --seeds 0,1,2 --epsilons inf,16,4 --fedavg --out benchmarks/results/cross_graph_hpo_small.json

For every seed (holder k's seed is ``10·seed + k``), ε of ``--epsilons`` and method of ``--methods``,
``run_cross_graph`` runs the holders file; every row is one party's test metrics on its own graph (``alone``,
``cross-graph eps=ε``, ``alone eps=ε`` and ``--no-information`` controls under statement-level DP, ``fedavg``
with ``--fedavg``). Writes one JSON with the rows, the per-party means (``summary``) and the commands, after
every run; ``--merge`` joins per-seed outputs. Rows, controls and results: docs/cross_graph.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness


def _with_seed(config, seed: int, *, paired_noise: bool = False):
    holders = tuple(dataclasses.replace(h, seed=10 * seed + k) for k, h in enumerate(config.holders))
    if paired_noise:  # DP-SGD streams from a public seed: the runs of one seed share them (simulation)
        holders = tuple(
            dataclasses.replace(h, privacy={**h.privacy, "reproducible_noise": 1000 * seed + k}) if h.private else h
            for k, h in enumerate(holders)
        )
    return dataclasses.replace(config, holders=holders)


#: ``--paired-noise``: the runs of a seed share their DP-SGD streams (public seed; docs/cross_graph.md).
PAIRED_NOISE = False


#: ``--epsilons 0``: the no-information control; the received rows carry nothing (docs/cross_graph.md).
CONTROL_SIGMA = 1e9


def _statement_level(config) -> bool:
    return config.exchange.unit == "statement"


def _with_epsilon(config, eps: float):
    if _statement_level(config):
        if math.isinf(eps):  # the no-DP reference: the same holders without privacy
            holders = tuple(dataclasses.replace(h, privacy={}) for h in config.holders)
            ex = dataclasses.replace(config.exchange, unit="entity", target_epsilon=None, noise_multiplier=0.0)
        else:
            holders = tuple(
                dataclasses.replace(h, privacy={**h.privacy, "target_epsilon": eps}) for h in config.holders
            )
            ex = config.exchange
        return dataclasses.replace(config, holders=holders, exchange=ex)
    if eps == 0:
        ex = dataclasses.replace(config.exchange, target_epsilon=None, noise_multiplier=CONTROL_SIGMA)
    elif math.isinf(eps):
        ex = dataclasses.replace(config.exchange, target_epsilon=None, noise_multiplier=0.0)
    else:
        ex = dataclasses.replace(config.exchange, target_epsilon=eps, noise_multiplier=None)
    return dataclasses.replace(config, exchange=ex)


#: seeds whose ``alone`` rows are written
_ALONE_DONE: set[int] = set()


@contextlib.contextmanager
def _no_information():
    """The statement-level control: every release is replaced by N(0, CONTROL_SIGMA²) draws, so the
    Procrustes scale is ~0 and the update only pulls the receiver's aligned rows toward its own mean."""
    from textkg.federated.cross_graph import runner

    send = runner.send_release

    def noise_only(step, sender, to, ex):
        message = send(step, sender, to, ex)
        g = torch.Generator().manual_seed(step)
        return {**message, "rows": CONTROL_SIGMA * torch.randn(message["rows"].shape, generator=g, dtype=torch.float64)}

    runner.send_release = noise_only
    try:
        yield
    finally:
        runner.send_release = send


def with_method(config, spec: str | None):
    """The holders with ``exchange.method`` from a ``--methods`` entry (None: as in the file)."""
    from textkg.federated.cross_graph.ppat import PPATConfig

    if spec is None:
        return config
    ex = config.exchange
    ppat = ex.ppat if ex.method == "ppat" else PPATConfig()
    if spec in ("procrustes", "average"):
        ex = dataclasses.replace(ex, method=spec, ppat=PPATConfig())
    elif spec in ("ppat", "ppat-clear"):
        release = "clear" if spec == "ppat-clear" else "gaussian"
        ex = dataclasses.replace(ex, method="ppat", ppat=dataclasses.replace(ppat, client_release=release))
    else:
        raise SystemExit(f"--methods: unknown {spec!r}; choose from procrustes, average, ppat, ppat-clear")
    return dataclasses.replace(config, exchange=ex)


def _method_label(config) -> str:
    """The rows' prefix: '' for procrustes (the names above), else ``ppat`` / ``ppat-clear``."""
    ex = config.exchange
    if ex.method == "procrustes":
        return ""
    return "ppat-clear" if ex.ppat.client_release == "clear" else ex.method


def cross_graph_rows(config, seed: int, eps: float, work: Path, *, control: bool = False) -> list[dict]:
    from textkg.federated.cross_graph.runner import run_cross_graph

    label, fraction = _method_label(config), config.exchange.aligned_fraction
    out = work / f"cg-s{seed}-e{eps}{'-control' if control else ''}{label}"
    t0 = time.perf_counter()
    with _no_information() if control else contextlib.nullcontext():
        run_cross_graph(_with_epsilon(_with_seed(config, seed, paired_noise=PAIRED_NOISE), eps), out, progress=False)
    seconds = time.perf_counter() - t0
    rows = []
    statement = _statement_level(config) and not math.isinf(eps)
    run = f"{label} control run" if label and control else f"{label} run" if label else "control run" if control else ""
    baseline = f"alone eps={eps:g}" + (f" ({run})" if run else "") if statement else "alone"
    from textkg.pipeline.run_dir import read_run_json

    for h in config.holders:
        m = read_run_json(out / h.name / "metrics.json")
        common = {"seed": seed, "party": h.name, "sizes": m["sizes"], "aligned": m["aligned"], "baseline": baseline}
        if statement:  # the alone track takes the same DP-SGD steps at this budget
            alone = {**common, "method": baseline, "test": m["alone"]["test"], "privacy": m["alone"]["privacy"]}
            rows.append(alone)
        elif seed not in _ALONE_DONE:  # the alone track does not depend on the exchange's budget
            rows.append({**common, "method": "alone", "test": m["alone"]["test"], "privacy": None})
        if statement:
            method = f"{'control: no information' if control else 'statement-level'} eps={eps:g}"
            method = f"{label} {method}" if label else method
        elif _statement_level(config):
            method = "cross-graph no DP"
        else:
            method = "control: no information" if eps == 0 else f"cross-graph eps={eps:g}"
            method = f"{label} {method.replace('cross-graph ', '')}" if label else method
        rows.append(
            {
                **common,
                "method": method + ("" if fraction == 1.0 else f" overlap={fraction:g}"),
                "aligned_fraction": fraction,
                "test": m["federated"]["test"],
                "updates_kept": sum(e["kept"] == "update" for e in m["exchanges"]),
                "exchanges": len(m["exchanges"]),
                "privacy": m["privacy"],
                "seconds": seconds,
                **({"control": control, "epsilon_target": eps} if statement else {}),
            }
        )
    if not statement:
        _ALONE_DONE.add(seed)
    return rows


def fedavg_rows(config, seed: int, work: Path) -> list[dict]:
    """FedAvg over hpo's shared vocabulary, evaluated on every party's own test statements."""
    from textkg.federated.config import FederatedConfig
    from textkg.federated.cross_graph.party import Party
    from textkg.federated.engines import federate
    from textkg.training.checkpoint import load_weights

    config = _with_seed(config, seed)
    if _statement_level(config):  # FedAvg stays the no-DP reference
        config = _with_epsilon(config, math.inf)
    first = config.holders[0]
    spec = dataclasses.replace(first, name="fedavg", source=None)
    cfg = spec.run_config()
    rounds = cfg.train.epochs + config.exchange.rounds * (len(config.holders) - 1) * config.exchange.fine_tune_epochs
    fed = FederatedConfig(partition="source", clients=None, rounds=rounds, local_epochs=1)
    out = work / f"fedavg-s{seed}"
    t0 = time.perf_counter()
    federate(cfg, fed, out, progress=False)
    seconds = time.perf_counter() - t0
    state = load_weights(out)
    rows = []
    for h in config.holders:
        party = Party(h, work / f"eval-{h.name}")
        own = party.model.state_dict()
        same = {k: v for k, v in state.items() if k in own and v.shape == own[k].shape}
        party.model.load_state_dict(same, strict=False)
        rows.append(
            {
                "seed": seed,
                "party": h.name,
                "method": "fedavg",
                "test": party.test_metrics(),
                "privacy": None,
                "rounds": rounds,
                "seconds": seconds,
            }  # fmt: skip
        )
    return rows


def summarise(rows: list[dict]) -> list[dict]:
    """Mean test MRR per (party, method) over seeds, and the gain over its ``alone`` (``baseline``)."""
    out = []
    keys = sorted({(r["party"], r["method"]) for r in rows}, key=lambda k: (k[0], not k[1].startswith("alone"), k[1]))
    for party, method in keys:
        mine = [r for r in rows if (r["party"], r["method"]) == (party, method)]
        mrrs = [r["test"]["mrr"] for r in mine]
        baseline = mine[0].get("baseline", "alone")
        alone = [r["test"]["mrr"] for r in rows if (r["party"], r["method"]) == (party, baseline)]
        mean = sum(mrrs) / len(mrrs)
        base = sum(alone) / len(alone) if alone else None
        eps = [
            r["privacy"]["epsilon"] if r["privacy"]["epsilon"] is not None else r["privacy"].get("epsilon_if_secret")
            for r in rows
            if (r["party"], r["method"]) == (party, method) and r["privacy"]
        ]
        out.append(
            {
                "party": party,
                "method": method,
                "test_mrr_mean": mean,
                "test_mrr_per_seed": mrrs,
                "baseline": baseline,
                "gain_over_alone": None if base is None else mean - base,
                "seeds_above_alone": None
                if len(alone) != len(mrrs)
                else sum(m > a for m, a in zip(mrrs, alone, strict=True)),
                "relative_gain": None if not base else (mean - base) / base,
                "epsilon_max": max((e for e in eps if e is not None), default=None),
                **_against_controls(rows, mine),
            }
        )
    return out


def _against_controls(rows: list[dict], mine: list[dict]) -> dict:
    """A statement-level exchange's rows against every no-information control at the same ε (each
    method's own, e.g. ``procrustes``'s shrinkage and ``average``'s): per seed, the best control's MRR;
    the mean gain over it and the seeds above it. Empty for other rows."""
    if not mine or mine[0].get("control") is not False:
        return {}
    party, eps = mine[0]["party"], mine[0]["epsilon_target"]
    controls = [r for r in rows if r["party"] == party and r.get("control") and r.get("epsilon_target") == eps]
    best = {}
    for r in controls:
        best[r["seed"]] = max(best.get(r["seed"], -math.inf), r["test"]["mrr"])
    paired = [(r["test"]["mrr"], best[r["seed"]]) for r in mine if r["seed"] in best]
    if not paired:
        return {}
    return {
        "controls": sorted({r["method"] for r in controls}),
        "gain_over_best_control": sum(m - c for m, c in paired) / len(paired),
        "seeds_above_every_control": sum(m > c for m, c in paired),
        "seeds_compared_with_controls": len(paired),
    }


def main(argv: list[str] | None = None) -> None:
    from textkg.federated.cross_graph.config import load_holders

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--holders", required=True)
    ap.add_argument("--seeds", default="0")
    ap.add_argument(
        "--epsilons",
        default="inf,4",
        help="comma-separated per-party epsilons; inf = no noise; 0 = the no-information control (sigma 1e9)",
    )
    ap.add_argument("--fedavg", action="store_true", help="add FedAvg over the shared vocabulary (hpo source)")
    ap.add_argument(
        "--no-information",
        action="store_true",
        help="statement level: also each finite epsilon with every release replaced by noise (the control)",
    )
    ap.add_argument(
        "--paired-noise",
        action="store_true",
        help="statement level: DP-SGD streams from a public seed per seed and holder, shared by the runs of a seed",
    )
    ap.add_argument(
        "--methods",
        default=None,
        help="comma-separated exchange methods at every epsilon: procrustes, ppat, ppat-clear (default: the file's)",
    )
    ap.add_argument(
        "--merge",
        default="",
        help="comma-separated outputs of this script (same holders file, e.g. one seed each, run side by side): "
        "their rows and commands join --out's before this command's (--seeds '' runs nothing)",
    )
    ap.add_argument("--out", default="benchmarks/results/cross_graph_hpo_small.json")
    args = ap.parse_args(argv)
    global PAIRED_NOISE
    PAIRED_NOISE = args.paired_noise
    torch.set_num_threads(1)
    config = load_holders(args.holders)
    methods = args.methods.split(",") if args.methods else [None]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    epsilons = [float(e) for e in args.epsilons.split(",")]
    rows: list[dict] = []
    command = _harness.command_line(argv, "cross_graph.py")
    commands = []
    for path in filter(None, args.merge.split(",")):  # earlier commands' rows (alone rows too)
        earlier = json.loads(Path(path).read_text())
        if earlier["holders"] != config.to_dict():
            raise SystemExit(f"{path} was made from another holders file than {args.holders}")
        rows.extend(earlier["rows"])
        commands += earlier.get("commands", [earlier["command"]])
        _ALONE_DONE.update(r["seed"] for r in rows if r["method"] == "alone")
    record = {
        "command": command,
        "commands": [*commands, command],
        "date": time.strftime("%Y-%m-%d"),
        "machine": {**_harness.machine(), "threads": torch.get_num_threads()},
        "holders": config.to_dict(),
        "rows": rows,
    }
    with tempfile.TemporaryDirectory(prefix="textkg-cross-graph-") as tmp:
        for seed in seeds:
            for eps in epsilons:
                for method in methods:
                    rows.extend(cross_graph_rows(with_method(config, method), seed, eps, Path(tmp)))
                    if args.no_information and _statement_level(config) and not math.isinf(eps):
                        rows.extend(cross_graph_rows(with_method(config, method), seed, eps, Path(tmp), control=True))
                    _write(args.out, record)
            if args.fedavg:
                rows.extend(fedavg_rows(config, seed, Path(tmp)))
                _write(args.out, record)
    _write(args.out, record)


def _write(path: str, record: dict) -> None:
    record["summary"] = summarise(record["rows"])
    out = _harness.write_results(path, record)
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
