"""DP / non-DP cost of a step of the private recipe on real data, projected to an epoch.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/private_epoch.py --data ../shared/data/fb15k237 \\
        [--inductive-dir ind_rebuilt_seed0] [--preset cpu-private] [--batch-size 4096] \\
        [--steps 3] [--repeats 3] [--threads 1] [--profile] [--set SECTION.KEY=JSON] \\
        [--out benchmarks/results/private_epoch.json]

Setting: the preset's model built by the library's own pipeline
(:func:`textkg.pipeline.job.prepare`, frozen features from the on-disk
cache) on inductive FB15k-237, and the trainer of a real run
(:func:`textkg.pipeline.job.build_trainer`). Two workers, each in its
own subprocess (so that each has its own peak RSS):

- ``nonprivate``: ``Trainer._public_step`` on ``B`` statements (1-vs-all
  softmax over the training entities, mean, backward, Adam);
- ``dp``: ``Trainer._private_step`` under ``--privacy full`` with a declared
  ``privacy.private_size`` (q = B / N̄): Poisson sample from the step's secret
  stream, exact per-example clipping, secret noise on every trained entry, Adam.

Each worker runs one warm-up step, then ``--steps`` timed steps; the workers
alternate ``--repeats`` times. Reported per worker: wall and process-CPU ms
per step (``time.process_time``: every thread, the noise prefetcher's
included) and the training thread's CPU (``time.thread_time``), peak RSS
(``VmHWM``) and RSS after setup. The ratios DP / non-DP are medians over
repeats; the epoch projection multiplies a step by the recipe's steps per
epoch (``round(N̄ / B)`` for DP, ``ceil(N / B)`` for the non-private epoch of
the same statements). ``--profile`` prints the top of ``torch.profiler``'s
table for one step of each (not timed).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def _rss_mb(field: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _config(args, private: bool):
    from reproduce_fb15k237 import build_config, parse_args

    argv = ["--data", args.data, "--preset", args.preset, "--inductive-dir", args.inductive_dir]
    argv += ["--batch-size", str(args.batch_size), "--negatives", "all", "--epochs", "1"]
    for item in args.set:
        argv += ["--set", item]
    if private:
        argv += ["--set", 'privacy.mode="full"', "--set", f"privacy.noise_multiplier={args.noise_multiplier}"]
        argv += ["--set", f"privacy.private_size={args.private_size}"]
    return build_config(parse_args(argv))


def worker(args, method: str) -> dict:
    import torch

    from textkg.pipeline.job import build_trainer, prepare

    torch.set_num_threads(args.threads)
    cfg = _config(args, private=method == "dp")
    prep = prepare(cfg)  # the text features come from the on-disk feature cache; nothing pickled
    with tempfile.TemporaryDirectory() as tmp:
        trainer, private, _ = build_trainer(prep, cfg, Path(tmp))
        prep.model.train()
        n = len(trainer.public) if private is None else len(private.private_triples)
        gen = torch.Generator().manual_seed(0)

        def step() -> None:
            if private is None:
                trainer._public_step(torch.randint(n, (args.batch_size,), generator=gen))
            else:
                assert trainer._private_step()

        step()  # warm-up (and, for DP, the one-off feature Gram of the pool)
        rss_setup = _rss_mb("VmRSS")
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU]) as prof:
                step()
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25), file=sys.stderr)
        wall, cpu, thread = [], [], []
        for _ in range(args.steps):
            w0, c0, t0 = time.perf_counter(), time.process_time(), time.thread_time()
            step()
            wall.append(1e3 * (time.perf_counter() - w0))
            cpu.append(1e3 * (time.process_time() - c0))
            thread.append(1e3 * (time.thread_time() - t0))
        if private is not None:
            private.close()
        steps_per_epoch = private.steps_per_epoch if private is not None else math.ceil(n / args.batch_size)
    return {
        "method": method,
        "statements": n,
        "pool": len(trainer.entity_pool),
        "steps_per_epoch": steps_per_epoch,
        "ms_per_step_median": statistics.median(wall),
        "ms_per_step": wall,
        "cpu_ms_per_step_median": statistics.median(cpu),
        "thread_cpu_ms_per_step_median": statistics.median(thread),
        "rss_setup_mb": rss_setup,
        "peak_rss_mb": _rss_mb("VmHWM"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _run_worker(args, argv: list[str], method: str) -> dict:
    cmd = [sys.executable, __file__, "--worker", method, *argv]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{method} worker failed:\n{out.stderr[-4000:]}")
    if args.profile:
        print(out.stderr, file=sys.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine() -> dict:
    """The shared machine record (:func:`_harness.machine`: the CPU, date and versions this wrote before, and more)."""
    import _harness

    return _harness.machine()


def summarise(runs: list[dict], steps_dp: int, steps_np: int) -> dict:
    """Median ratios DP / non-DP over repeats (each repeat pairs one DP and one non-DP worker)."""
    dp = [r for r in runs if r["method"] == "dp"]
    np_ = [r for r in runs if r["method"] == "nonprivate"]
    out = {}
    for key in ("ms_per_step_median", "cpu_ms_per_step_median", "thread_cpu_ms_per_step_median", "peak_rss_mb"):
        ratios = [a[key] / b[key] for a, b in zip(dp, np_, strict=True)]
        out[f"step_ratio_{key}"] = statistics.median(ratios)
        out[f"step_ratio_{key}_per_repeat"] = ratios
    for key in ("ms_per_step_median", "cpu_ms_per_step_median"):
        epoch_dp = statistics.median(r[key] for r in dp) * steps_dp / 1e3
        epoch_np = statistics.median(r[key] for r in np_) * steps_np / 1e3
        out[f"epoch_seconds_dp_{key}"] = epoch_dp
        out[f"epoch_seconds_nonprivate_{key}"] = epoch_np
        out[f"epoch_ratio_{key}"] = epoch_dp / epoch_np
    out["peak_rss_ratio"] = out["step_ratio_peak_rss_mb"]
    return out


def main(argv=None) -> dict | None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "fb15k237"))
    ap.add_argument("--inductive-dir", default="ind_rebuilt_seed0")
    ap.add_argument("--preset", default="cpu-private")
    ap.add_argument("--batch-size", type=int, default=4096)
    ap.add_argument("--private-size", type=int, default=209_352, help="declared public size N̄ (q = B / N̄)")
    ap.add_argument("--noise-multiplier", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--methods", default="nonprivate,dp")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--set", action="append", default=[], help="SECTION.KEY=JSON, as reproduce_fb15k237.py")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/private_epoch.json"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args, args.worker)))
        return None
    runs = []
    for r in range(args.repeats):
        for method in args.methods.split(","):
            row = _run_worker(args, argv, method)
            row["repeat"] = r
            runs.append(row)
            print(json.dumps(row), file=sys.stderr)
    result = {
        "benchmark": "private_epoch",
        "tag": args.tag,
        "command": "python benchmarks/private_epoch.py " + " ".join(argv),
        "settings": {k: v for k, v in vars(args).items() if k not in ("worker", "out")},
        "machine": machine(),
        "runs": runs,
    }
    methods = {r["method"] for r in runs}
    if methods == {"dp", "nonprivate"}:
        steps_dp = next(r["steps_per_epoch"] for r in runs if r["method"] == "dp")
        steps_np = next(r["steps_per_epoch"] for r in runs if r["method"] == "nonprivate")
        result["summary"] = summarise(runs, steps_dp, steps_np)
    out = Path(args.out)
    rows = json.loads(out.read_text()) if out.is_file() else []
    rows.append(result)
    import _harness

    _harness.write_results(out, rows, indent=2)
    print(json.dumps(result.get("summary", runs), indent=2))
    return result


if __name__ == "__main__":
    main()
