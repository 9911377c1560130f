"""Time per step of 1-vs-all training: non-private vs exact per-example clipping (DP-SGD without the noise).

Usage::

    python benchmarks/one_vs_all_clipping.py [--out benchmarks/results/one_vs_all_clipping.json]
        [--batch-sizes 256,1024] [--pools 1000,10000] [--text-dim 818] [--dim 128]
        [--methods nonprivate,gram,gram-cached,direct] [--steps 3] [--threads 1] [--max-gmac 2000]

Setting: the ``cpu-fused`` architecture (frozen ``t``-d features → linear
projection, structural table with an unseen row, learned weighted fusion,
L2-normalised entities, TransE-L2, temperature 0.05, structural dropout 0.5)
with random features, ``P`` training entities (all candidates), 237
relations, ``B`` random positives. Methods:

- ``nonprivate``: ``one_vs_all_loss(...).mean().backward()`` (the public step);
- ``gram`` / ``direct``: :func:`textkg.training.one_vs_all.clipped_gradient_sum`
  with that projection method (norms, then the reweighted backward);
- ``gram-cached``: ``gram`` with the pool's ``(P, P)`` feature Gram matrix
  computed once before the timed steps (what a private run does for
  ``P <= 8192``; ``setup_ms`` reports its cost). The
  Gaussian noise (every entry of every parameter) is not included: its cost
  does not depend on the loss (``benchmarks/dp_step.py`` times it).

Also recorded (``float32_accuracy``; ``--accuracy-only`` recomputes just
that and merges it into ``--out``): the largest relative error of the
float32 norms, ``gram`` and ``direct``, against float64 ``direct`` on
``P = 1000``, ``B = 64`` (with correlated features, where a cancellation
between the Gram expansion's terms would show).

Each (method, B, P) runs in its own subprocess with ``--threads`` torch
threads; reported: ms/step (median of ``--steps`` timed steps after one
warm-up step), process CPU ms/step, peak RSS (``VmHWM``), the method's
multiply-add estimate for the projection part, and the ratio to the
non-private step. A run whose estimate exceeds ``--max-gmac`` is skipped.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness
import _harness  # noqa: E402


def _rss_mb(field: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def worker(method: str, b: int, p: int, t: int, d: int, steps: int, threads: int) -> dict:
    import torch

    from textkg.models import build_model, get_preset
    from textkg.training.one_vs_all import clipped_gradient_sum, one_vs_all_loss, pool_positions

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(p, t, generator=g), dim=-1)
    cfg = dataclasses.replace(get_preset("cpu-fused"), dim=d)
    model = build_model(cfg, num_entities=p, num_relations=237, seen_entities=torch.arange(p), text_features=x).train()
    pool = torch.arange(p)
    positions = pool_positions(pool, p)
    gram, setup_ms = None, 0.0
    if method == "gram-cached":
        from textkg.training.one_vs_all import feature_gram

        t0 = time.perf_counter()
        gram = feature_gram(model, pool)
        setup_ms = 1e3 * (time.perf_counter() - t0)
    rss_setup = _rss_mb("VmRSS")

    def step(s: int) -> None:
        gen = torch.Generator().manual_seed(100 + s)
        triples = torch.stack(
            [
                torch.randint(0, p, (b,), generator=gen),
                torch.randint(0, 237, (b,), generator=gen),
                torch.randint(0, p, (b,), generator=gen),
            ],
            dim=1,
        )
        model.zero_grad(set_to_none=True)
        if method == "nonprivate":
            one_vs_all_loss(
                model, triples, entity_pool=pool, positions=positions, temperature=0.05, generator=gen
            ).mean().backward()
        else:
            clipped_gradient_sum(
                model,
                triples,
                entity_pool=pool,
                positions=positions,
                max_grad_norm=1.0,
                temperature=0.05,
                generator=gen,
                method=method.split("-")[0],
                gram=gram,
            )

    step(0)
    wall, cpu = [], []
    for s in range(1, steps + 1):
        w0, c0 = time.perf_counter(), time.process_time()
        step(s)
        wall.append(1e3 * (time.perf_counter() - w0))
        cpu.append(1e3 * (time.process_time() - c0))
    return {
        "method": method,
        "batch_size": b,
        "pool": p,
        "text_dim": t,
        "dim": d,
        "ms_per_step_median": statistics.median(wall),
        "ms_per_step": wall,
        "cpu_ms_per_step_median": statistics.median(cpu),
        "rss_setup_mb": rss_setup,
        "setup_ms": setup_ms,
        "peak_rss_mb": _rss_mb("VmHWM"),
    }


def accuracy(t: int, d: int, p: int = 1000, b: int = 64) -> dict:
    """Max relative error of float32 whole-gradient norms against float64 ``direct``."""
    import torch

    from textkg.models import build_model, get_preset
    from textkg.training.one_vs_all import per_example_sq_norms, pool_positions

    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(p, t, generator=g) + 0.5, dim=-1)
    torch.manual_seed(0)
    model = build_model(
        dataclasses.replace(get_preset("cpu-fused"), dim=d),
        num_entities=p,
        num_relations=20,
        seen_entities=torch.arange(p),
        text_features=x,
    ).train()
    pool = torch.arange(p)
    triples = torch.stack(
        [
            torch.randint(0, p, (b,), generator=g),
            torch.randint(0, 20, (b,), generator=g),
            torch.randint(0, p, (b,), generator=g),
        ],
        dim=1,
    )

    def norms(dtype, method):
        sq = per_example_sq_norms(
            model.to(dtype),
            triples,
            entity_pool=pool,
            positions=pool_positions(pool, p),
            temperature=0.05,
            generator=torch.Generator().manual_seed(3),
            method=method,
        )
        return torch.stack(list(sq.values())).sum(0).double().sqrt()

    ref = norms(torch.float64, "direct")
    out = {"pool": p, "batch_size": b, "text_dim": t, "dim": d}
    for method in ("gram", "direct"):
        out[f"{method}_float32_max_rel_error"] = float(((norms(torch.float32, method) - ref).abs() / ref).max())
    out["gram_float64_max_rel_error"] = float(((norms(torch.float64, "gram") - ref).abs() / ref).max())
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/one_vs_all_clipping.json"))
    ap.add_argument("--batch-sizes", default="256,1024")
    ap.add_argument("--pools", default="1000,10000")
    ap.add_argument("--text-dim", type=int, default=818)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--methods", default="nonprivate,gram,gram-cached,direct")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-gmac", type=float, default=2000.0)
    ap.add_argument("--accuracy-only", action="store_true")
    ap.add_argument("--worker", nargs=4, metavar=("METHOD", "B", "P", "STEPS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        method, b, p, steps = args.worker
        print(json.dumps(worker(method, int(b), int(p), args.text_dim, args.dim, int(steps), args.threads)))
        return

    sys.path.insert(0, str(ROOT))
    import torch

    if args.accuracy_only:
        path = Path(args.out)
        out = json.loads(path.read_text()) if path.exists() else {}
        out["float32_accuracy"] = accuracy(args.text_dim, args.dim)
        _harness.write_results(path, out, indent=2)
        print(json.dumps(out["float32_accuracy"]))
        return

    from textkg.training.one_vs_all import projection_flops

    runs = []
    for p in (int(v) for v in args.pools.split(",")):
        for b in (int(v) for v in args.batch_sizes.split(",")):
            flops = projection_flops(b, p, args.text_dim, args.dim)
            auto = min(flops, key=flops.get)
            flops["gram-cached"] = projection_flops(b, p, args.text_dim, args.dim, cached=True)["gram"]
            base = None
            for method in args.methods.split(","):
                gmac = flops.get(method, 0.0) / 1e9
                entry = {
                    "method": method,
                    "batch_size": b,
                    "pool": p,
                    "projection_gmac_estimate": gmac,
                    "auto_would_pick": method == auto,
                }
                if gmac > args.max_gmac:
                    entry["skipped"] = f"estimate {gmac:.0f} G multiply-adds > --max-gmac {args.max_gmac:g}"
                    runs.append(entry)
                    print(json.dumps(entry), flush=True)
                    continue
                load = os.getloadavg()[0]
                cmd = [
                    sys.executable,
                    __file__,
                    "--worker",
                    method,
                    str(b),
                    str(p),
                    str(args.steps),
                    "--text-dim",
                    str(args.text_dim),
                    "--dim",
                    str(args.dim),
                    "--threads",
                    str(args.threads),
                ]
                res = subprocess.run(
                    cmd,
                    capture_output=True,
                    text=True,
                    cwd=ROOT,
                    env={**os.environ, "OMP_NUM_THREADS": str(args.threads)},
                )
                if res.returncode:
                    entry["error"] = res.stderr[-2000:]
                else:
                    entry.update(json.loads(res.stdout.strip().splitlines()[-1]))
                    entry["load_before"] = load
                    if method == "nonprivate":
                        base = entry
                    elif base is not None:
                        entry["time_ratio_to_nonprivate"] = entry["ms_per_step_median"] / base["ms_per_step_median"]
                        entry["cpu_ratio_to_nonprivate"] = (
                            entry["cpu_ms_per_step_median"] / base["cpu_ms_per_step_median"]
                        )
                        entry["peak_rss_ratio_to_nonprivate"] = entry["peak_rss_mb"] / base["peak_rss_mb"]
                runs.append(entry)
                print(json.dumps({k: v for k, v in entry.items() if k != "ms_per_step"}), flush=True)
    out = _harness.result(
        "one_vs_all_clipping",
        command=_harness.command_line(argv, "one_vs_all_clipping.py"),
        torch=torch.__version__,  # the top-level keys this file had before the harness
        python=platform.python_version(),
        cpu_count=os.cpu_count(),
        threads=args.threads,
        steps=args.steps,
        text_dim=args.text_dim,
        dim=args.dim,
        setting="cpu-fused architecture, random features, TransE-L2, tau 0.05, dropout 0.5, "
        "237 relations; DP = exact norms + reweighted backward, noise excluded",
        float32_accuracy=accuracy(args.text_dim, args.dim),
        runs=runs,
    )
    _harness.write_results(args.out, out, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
