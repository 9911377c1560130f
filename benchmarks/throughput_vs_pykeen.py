"""Training throughput of textkg against PyKEEN on transductive FB15k-237, side by side.

Usage (each flag: benchmarks/README.md; the setting, the differences between the two models and the
results: docs/results/throughput.md)::

    python benchmarks/throughput_vs_pykeen.py --data PATH/fb15k237 --pykeen-python PYKEEN_ENV/bin/python
        [--repeats 2] [--textkg-validate]

Both tools train TransE (L1) with the sLCWA recipe, each run in a fresh process (PyKEEN in the interpreter of
its own environment: never a dependency of textkg), the tools alternating for ``--repeats`` rounds so that
the shared machine's load falls on both alike. Timed apart: each training epoch (wall and CPU seconds),
textkg's per-epoch validation (``--textkg-validate``) and the test ranking (PyKEEN's in the first
``--pykeen-eval-repeats`` rounds only); each run records ``os.getloadavg()`` before and after it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness
import _harness  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "throughput_vs_pykeen.json"
SETTINGS = ("epochs", "dim", "batch_size", "num_negatives", "margin", "lr", "seed", "threads")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="FB15k-237 directory with train.tsv, dev.tsv, test.tsv")
    p.add_argument("--pykeen-python", help="interpreter of a Python environment with pykeen (left out: textkg only)")
    p.add_argument("--repeats", type=int, default=2, help="rounds of the alternation")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--num-negatives", type=int, default=32)
    p.add_argument("--margin", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--pykeen-eval-repeats", type=int, default=1, help="rounds in which PyKEEN ranks the test set")
    p.add_argument("--pykeen-eval-batch-size", type=int, default=256)
    p.add_argument("--textkg-validate", action="store_true", help="also time textkg's per-epoch validation")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--worker", choices=["textkg", "pykeen"], help=argparse.SUPPRESS)
    p.add_argument("--evaluate", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# -- workers (each in a fresh process) ----------------------------------------------------------


def textkg_worker(args) -> dict:
    """Train and evaluate textkg's ``transe`` preset through its Python API."""
    import torch

    _harness.set_threads(args.threads)
    from textkg.pipeline.job import build_trainer, evaluate_split, prepare

    flags = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in SETTINGS if k != "threads"]
    argv = ["--dataset", str(Path(args.data).resolve()), "--split", "transductive", "--model", "transe", *flags]
    cfg = _harness.train_config([*argv, "--loss", "margin", "--valid-max-triples", "2000"])
    start = time.perf_counter()
    prep = prepare(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        trainer, _, _ = build_trainer(prep, cfg, Path(tmp))
        setup = time.perf_counter() - start
        epochs, cpu, valid, losses = [], [], [], []
        for _ in range(args.epochs):
            t, c = time.perf_counter(), time.process_time()
            losses += trainer.train_epochs(1)
            epochs.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            if args.textkg_validate:
                t = time.perf_counter()
                trainer.validate(prep.model)
                valid.append(time.perf_counter() - t)
    t, c = time.perf_counter(), time.process_time()
    test = evaluate_split(prep, cfg, "test").to_dict()
    return {
        "setup_seconds": setup,
        "epoch_seconds": epochs,
        "epoch_cpu_seconds": cpu,
        "valid_seconds": valid or None,
        "epoch_loss": losses,
        "steps_per_epoch": trainer.plan.public_steps,
        "eval_seconds": time.perf_counter() - t,
        "eval_cpu_seconds": time.process_time() - c,
        "test_mrr": test["mrr"],
        "test_hits10": test["hits@10"],
        "num_candidates": prep.kg.num_entities,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def pykeen_worker(args) -> dict:
    """Train and (with ``--evaluate``) evaluate PyKEEN's TransE with an sLCWA training loop."""
    import torch

    _harness.set_threads(args.threads)
    from importlib.metadata import version

    from pykeen.evaluation import RankBasedEvaluator
    from pykeen.losses import MarginRankingLoss
    from pykeen.models import TransE
    from pykeen.training import SLCWATrainingLoop
    from pykeen.training.callbacks import TrainingCallback
    from pykeen.triples import TriplesFactory

    class EpochClock(TrainingCallback):
        def __init__(self) -> None:
            super().__init__()
            self.stamps: list[tuple[float, float]] = []

        def post_epoch(self, epoch, epoch_loss, **kwargs) -> None:
            self.stamps.append((time.perf_counter(), time.process_time()))

    data = Path(args.data)
    start = time.perf_counter()
    train = TriplesFactory.from_path(data / "train.tsv")
    maps = {"entity_to_id": train.entity_to_id, "relation_to_id": train.relation_to_id}
    valid = TriplesFactory.from_path(data / "dev.tsv", **maps)
    test = TriplesFactory.from_path(data / "test.tsv", **maps)
    model = TransE(
        triples_factory=train,
        embedding_dim=args.dim,
        scoring_fct_norm=1,
        loss=MarginRankingLoss(margin=args.margin),
        random_seed=args.seed,
    )
    loop = SLCWATrainingLoop(
        model=model,
        triples_factory=train,
        optimizer=torch.optim.Adam(model.get_grad_params(), lr=args.lr),
        negative_sampler="basic",
        negative_sampler_kwargs={"num_negs_per_pos": args.num_negatives},
    )
    clock = EpochClock()
    setup = time.perf_counter() - start
    t0 = (time.perf_counter(), time.process_time())
    losses = loop.train(
        triples_factory=train, num_epochs=args.epochs, batch_size=args.batch_size, use_tqdm=False, callbacks=clock
    )
    stamps = [t0, *clock.stamps]
    out = {
        "setup_seconds": setup,
        "epoch_seconds": [b[0] - a[0] for a, b in zip(stamps, stamps[1:], strict=False)],
        "epoch_cpu_seconds": [b[1] - a[1] for a, b in zip(stamps, stamps[1:], strict=False)],
        "valid_seconds": None,
        "epoch_loss": losses,
        "steps_per_epoch": -(-train.num_triples // args.batch_size),
        "eval_seconds": None,
        "eval_cpu_seconds": None,
        "test_mrr": None,
        "test_hits10": None,
        "num_candidates": train.num_entities,
        "torch": torch.__version__,
        "pykeen": version("pykeen"),
        "threads": torch.get_num_threads(),
    }
    if args.evaluate:
        t, c = time.perf_counter(), time.process_time()
        result = RankBasedEvaluator(filtered=True).evaluate(
            model,
            test.mapped_triples,
            additional_filter_triples=[train.mapped_triples, valid.mapped_triples],
            batch_size=args.pykeen_eval_batch_size,
            use_tqdm=False,
        )
        out["eval_seconds"] = time.perf_counter() - t
        out["eval_cpu_seconds"] = time.process_time() - c
        out["test_mrr"] = float(result.get_metric("both.realistic.inverse_harmonic_mean_rank"))
        out["test_hits10"] = float(result.get_metric("both.realistic.hits_at_10"))
    return out


# -- the driver ------------------------------------------------------------------------------


def _worker_command(args, python: str, tool: str, result: Path, *, evaluate: bool) -> list[str]:
    cmd = [python, str(Path(__file__).resolve()), "--worker", tool, "--data", args.data, "--result", str(result)]
    for name in SETTINGS:
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    cmd += ["--pykeen-eval-batch-size", str(args.pykeen_eval_batch_size)]
    if evaluate:
        cmd.append("--evaluate")
    if args.textkg_validate:
        cmd.append("--textkg-validate")
    return cmd


def _run(cmd: list[str], *, threads: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    load_before = os.getloadavg()
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - start
    row = json.loads(Path(cmd[cmd.index("--result") + 1]).read_text())
    row.update(wall_seconds=wall, loadavg_before=list(load_before), loadavg_after=list(os.getloadavg()))
    return row


def _summary(runs: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for tool in dict.fromkeys(r["tool"] for r in runs):
        rows = [r for r in runs if r["tool"] == tool]
        epochs = [s for r in rows for s in r["epoch_seconds"]]
        cpu = [s for r in rows for s in r["epoch_cpu_seconds"]]
        evals = [r for r in rows if r["eval_seconds"] is not None]
        valid = [s for r in rows for s in (r["valid_seconds"] or [])]
        out[tool] = {
            "runs": len(rows),
            "median_epoch_seconds": statistics.median(epochs),
            "min_epoch_seconds": min(epochs),
            "median_epoch_cpu_seconds": statistics.median(cpu),
            "median_train_seconds": statistics.median(sum(r["epoch_seconds"]) for r in rows),
            "median_valid_seconds": statistics.median(valid) if valid else None,
            "median_eval_seconds": statistics.median(r["eval_seconds"] for r in evals) if evals else None,
            "median_eval_cpu_seconds": statistics.median(r["eval_cpu_seconds"] for r in evals) if evals else None,
            "test_mrr": evals[0]["test_mrr"] if evals else None,
            "test_hits10": evals[0]["test_hits10"] if evals else None,
        }
    return out


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.worker is not None:
        worker = textkg_worker if args.worker == "textkg" else pykeen_worker
        _harness.write_results(args.result, worker(args))  # read back by the parent process
        return
    tools = [("textkg", sys.executable, "textkg")]
    if args.pykeen_python:
        tools.append(("pykeen", args.pykeen_python, "pykeen"))
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for label, python, worker in tools:
                evaluate = worker == "textkg" or repeat < args.pykeen_eval_repeats
                result = Path(tmp) / f"{label}-{repeat}.json"
                row = _run(_worker_command(args, python, worker, result, evaluate=evaluate), threads=args.threads)
                runs.append({"tool": label, "repeat": repeat, **row})
                shown = {k: row[k] for k in ("epoch_seconds", "epoch_cpu_seconds", "eval_seconds", "test_mrr")}
                print(f"{label} round {repeat}:", json.dumps(shown), flush=True)
    record = _harness.result(
        "throughput_vs_pykeen",
        command=_harness.command_line(argv, "throughput_vs_pykeen.py"),
        data=str(Path(args.data).resolve()),
        settings={name: getattr(args, name) for name in SETTINGS}
        | {"model": "TransE L1", "sampler": "sLCWA, head or tail corruption", "loss": "margin ranking"},
        runs=runs,
        summary=_summary(runs),
    )
    _harness.write_results(args.out, record, indent=2)
    print(json.dumps(record["summary"], indent=2))


if __name__ == "__main__":
    main()
