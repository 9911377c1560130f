"""Time and memory per training step of a TransE-like model: non-private vs DP-SGD (ours; Opacus).

Usage::

    python benchmarks/dp_step.py [--out benchmarks/results/dp_step.json]
        [--batch-sizes 64,256,1024] [--negatives 32] [--steps 10]
        [--methods autograd,rowsparse,rowsparse-secret,opacus] [--opacus-max-batch 256]
        [--threads 1] [--repeats 1] [--noise-draws 10]

TransE over an FB15k-237-sized table (14,541 × 200 + 237 × 200), 1 positive + k corrupted tails, SGD.
Methods ``autograd``, ``rowsparse``, ``rowsparse-secret``, ``unit-secret`` (not in the default ``--methods``)
and ``opacus`` (skipped above ``--opacus-max-batch``): docs/results/private_step.md §5 describes each step
and holds the results. Each (method, B) runs in its own subprocess with ``--threads`` torch threads, the
methods but Opacus ``--repeats`` times, alternating. Per worker: ms per step (median after 2 warm-up steps)
of wall, process CPU and training-thread time, RSS after setup and peak (``VmHWM``), the load average; per
(DP method, B) the ratios to ``autograd`` (targets: time ≤ 1.5, memory ≤ 2). ``noise-draw`` times one step's
noise alone; ε of 10⁵ SGM steps at δ = 1e-5 is timed too (target ≤ 50 ms, median of 5 calls).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness
import _harness  # noqa: E402

NUM_ENTITIES, NUM_RELATIONS, DIM = 14_541, 237, 200
SIGMA, C, LR = 1.0, 1.0, 0.1


def _rss_mb(field: str) -> float:
    """``VmRSS`` (current) or ``VmHWM`` (peak, tracked by the kernel) of this process, MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"{field} not in /proc/self/status")


def _batch(generator, b: int, k: int):
    import torch

    h = torch.randint(NUM_ENTITIES, (b,), generator=generator)
    r = torch.randint(NUM_RELATIONS, (b,), generator=generator)
    t = torch.randint(NUM_ENTITIES, (b,), generator=generator)
    neg = torch.randint(NUM_ENTITIES, (b, k), generator=generator)
    return torch.cat([h[:, None], t[:, None], neg], dim=1), r[:, None]  # (b, 2 + k), (b, 1)


def _scores(ent_rows, rel_rows):
    """``ent_rows (..., 2 + k, d)`` = [h, t, negatives], ``rel_rows (..., 1, d)`` → ``(..., 1 + k)``."""
    h, cands = ent_rows[..., :1, :], ent_rows[..., 1:, :]
    return -(h + rel_rows - cands).norm(dim=-1)


def _batch_loss(rows):
    """Per-example losses ``(B,)`` of a whole batch of gathered rows."""
    import torch.nn.functional as F

    scores = _scores(rows["entity"], rows["relation"])  # (B, 1 + k)
    return -F.log_softmax(scores, dim=-1)[:, 0]


def make_step(method: str, b: int, k: int, generator):
    import torch
    import torch.nn.functional as F

    tables = {
        "entity": torch.randn(NUM_ENTITIES, DIM, generator=generator) * 0.1,
        "relation": torch.randn(NUM_RELATIONS, DIM, generator=generator) * 0.1,
    }
    if method == "autograd":
        params = {n: t.clone().requires_grad_(True) for n, t in tables.items()}

        def step():
            ent_idx, rel_idx = _batch(generator, b, k)
            scores = _scores(params["entity"][ent_idx], params["relation"][rel_idx])
            loss = -F.log_softmax(scores, dim=-1)[:, 0].mean()
            grads = torch.autograd.grad(loss, list(params.values()))
            with torch.no_grad():
                for p, g in zip(params.values(), grads, strict=True):
                    p.add_(g, alpha=-LR)  # as torch.optim.SGD: in place, no temporary

        return step

    if method in ("rowsparse", "rowsparse-secret"):
        from textkg.privacy import DPSGDStep, RDPAccountant, as_row_grads, per_example_input_grads

        accountant = RDPAccountant()
        sizes = {n: t.shape[0] for n, t in tables.items()}
        prefetcher = None
        if method == "rowsparse-secret":  # as PrivateTrainer.step: secret key, noise of t+1 drawn during step t
            from textkg.privacy.randomness import NoisePrefetcher, SecretRandomness

            prefetcher = NoisePrefetcher(SecretRandomness(), {n: tuple(t.shape) for n, t in tables.items()})
        mech = DPSGDStep(
            noise_multiplier=SIGMA,
            max_grad_norm=C,
            expected_batch_size=b,
            accountant=accountant,
            sample_rate=b / 272_115,
            generator=None if prefetcher else generator,
        )

        def step():
            noise = None if prefetcher is None else prefetcher.get(accountant.steps)
            ent_idx, rel_idx = _batch(generator, b, k)
            idx = {"entity": ent_idx, "relation": rel_idx}
            gathered = {n: tables[n][i] for n, i in idx.items()}
            row_g = per_example_input_grads(_batch_loss, gathered)
            noised = mech({}, as_row_grads(idx, row_g), sizes, noise)
            for n, t in tables.items():
                t.add_(noised[n], alpha=-LR)

        step.close = prefetcher.close if prefetcher else lambda: None
        return step

    if method == "unit-secret":
        return _unit_step(b, k, generator)

    if method == "opacus":
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer

        class TransE(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.entity = torch.nn.Embedding(NUM_ENTITIES, DIM, _weight=tables["entity"].clone())
                self.relation = torch.nn.Embedding(NUM_RELATIONS, DIM, _weight=tables["relation"].clone())

            def forward(self, ent_idx, rel_idx):
                scores = _scores(self.entity(ent_idx), self.relation(rel_idx))
                return -F.log_softmax(scores, dim=-1)[:, 0]

        model = GradSampleModule(TransE())
        optimizer = DPOptimizer(
            torch.optim.SGD(model.parameters(), lr=LR),
            noise_multiplier=SIGMA,
            max_grad_norm=C,
            expected_batch_size=b,
            generator=generator,
        )

        def step():
            ent_idx, rel_idx = _batch(generator, b, k)
            optimizer.zero_grad(set_to_none=True)
            model(ent_idx, rel_idx).mean().backward()
            optimizer.step()

        return step
    raise ValueError(f"unknown method {method!r}")


#: statements per unit of ``unit-secret`` (B statements are B / UNIT_SIZE units)
UNIT_SIZE = 8


def _unit_step(b: int, k: int, generator):
    """``unit-secret``: :class:`UnitPrivateStep` on ``b // UNIT_SIZE`` units of UNIT_SIZE random statements each."""
    import dataclasses

    import torch

    from textkg.data.units import UnitLinks
    from textkg.models import build_model, get_preset
    from textkg.privacy import DPSGDStep, RDPAccountant
    from textkg.privacy.randomness import NoisePrefetcher, SecretRandomness
    from textkg.training.losses import softmax_cross_entropy
    from textkg.training.private_step import noise_shapes
    from textkg.training.unit_step import UnitPrivateStep

    cfg = dataclasses.replace(get_preset("transe-l2"), dim=DIM, normalize_entities=False)
    model = build_model(
        cfg, num_entities=NUM_ENTITIES, num_relations=NUM_RELATIONS, seen_entities=torch.arange(NUM_ENTITIES)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    randomness = SecretRandomness()
    prefetcher = NoisePrefetcher(randomness, noise_shapes(model))
    accountant, units = RDPAccountant(), max(1, b // UNIT_SIZE)
    pool = torch.arange(NUM_ENTITIES)

    def step():
        n = units * UNIT_SIZE
        links = torch.stack(
            [
                torch.arange(units).repeat_interleave(UNIT_SIZE),
                torch.randint(NUM_RELATIONS, (n,), generator=generator),
                torch.randint(NUM_ENTITIES, (n,), generator=generator),
                torch.randint(2, (n,), generator=generator),
            ],
            dim=1,
        )
        t = accountant.steps
        mech = DPSGDStep(
            noise_multiplier=SIGMA,
            max_grad_norm=C,
            expected_batch_size=units,
            accountant=accountant,
            sample_rate=units / 34_014,
            generator=None,
        )
        UnitPrivateStep(
            model,
            units=UnitLinks(units=tuple(map(str, range(units))), links=links),
            entity_pool=pool,
            loss_fn=softmax_cross_entropy,
            num_negatives=k,
            max_statements=UNIT_SIZE,
            mechanism=mech,
            sample_rate=1.0,  # the same B statements every method sees: every unit of the batch
            generator=generator,
            randomness=randomness,
            step=t,
            noise=prefetcher.get(t),
        )()
        optimizer.step()

    step.close = prefetcher.close
    return step


def worker(method: str, b: int, k: int, steps: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(0)
    step = make_step(method, b, k, generator)
    baseline = _rss_mb("VmRSS")
    for _ in range(2):
        step()
    times, cpu_times, main_cpu_times = [], [], []
    for _ in range(steps):
        t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        step()
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
        main_cpu_times.append(time.thread_time() - m0)
    getattr(step, "close", lambda: None)()
    return {
        "method": method,
        "batch_size": b,
        "negatives": k,
        "timed_steps": steps,
        "threads": threads,
        "ms_per_step_median": 1000 * statistics.median(times),
        "ms_per_step_mean": 1000 * statistics.fmean(times),
        "ms_per_step_min": 1000 * min(times),
        "cpu_ms_per_step_median": 1000 * statistics.median(cpu_times),
        "main_thread_cpu_ms_per_step_median": 1000 * statistics.median(main_cpu_times),
        "rss_after_setup_mb": baseline,
        "peak_rss_mb": _rss_mb("VmHWM"),
    }


def noise_worker(draws: int, threads: int) -> dict:
    """The floor: one step's noise for both tables, drawn alone on the calling thread.

    ``secret``: :meth:`SecretRandomness.normal` (AES-128-CTR + numpy's float64
    ziggurat), what :class:`NoisePrefetcher` runs on its thread. ``torch``:
    :func:`textkg.privacy.noise.gaussian_noise` in float32 from a ``torch.Generator``
    (mt19937), what the old path runs on the main thread.
    """
    import torch

    from textkg.privacy.noise import gaussian_noise
    from textkg.privacy.randomness import SecretRandomness

    torch.set_num_threads(threads)
    shapes = {"entity": (NUM_ENTITIES, DIM), "relation": (NUM_RELATIONS, DIM)}
    randomness, generator = SecretRandomness(), torch.Generator().manual_seed(0)
    arms = {
        "secret_float64": lambda t: randomness.normal(shapes, step=t),
        "torch_float32": lambda t: [gaussian_noise(s, std=0.1, generator=generator) for s in shapes.values()],
    }
    times = {name: [] for name in arms}
    for t in range(draws + 1):  # interleaved; draw 0 is a warm-up
        for name, draw in arms.items():
            t0 = time.perf_counter()
            draw(t)
            if t:
                times[name].append(time.perf_counter() - t0)
    return {
        "method": "noise-draw",
        "gaussians_per_step": sum(a * d for a, d in shapes.values()),
        "draws": draws,
        "threads": threads,
        **{f"{name}_ms_median": 1000 * statistics.median(v) for name, v in times.items()},
        **{f"{name}_ms_min": 1000 * min(v) for name, v in times.items()},
    }


#: DP methods compared with ``autograd`` (repeated with it, alternating)
REPEATED = ("autograd", "rowsparse", "rowsparse-secret", "unit-secret")
#: (ratio, the worker's field it divides)
RATIOS = (
    ("time_ratio", "ms_per_step_median"),
    ("cpu_time_ratio", "cpu_ms_per_step_median"),
    ("peak_rss_ratio", "peak_rss_mb"),
)


def _ratio(results: list[dict], method: str, base: str, b: int) -> dict | None:
    """``method`` / ``base`` at batch size ``b``, each repeat's workers paired: the median over repeats of each
    ratio, ``best_time_ratio`` (the fastest step over the fastest) and each repeat's ratios; None without a pair."""
    by = {(r["method"], r["batch_size"], r.get("repeat", 0)): r for r in results if "ms_per_step_median" in r}
    pairs = [
        (by[key], by[(base, b, key[2])]) for key in sorted(by) if key[:2] == (method, b) and (base, b, key[2]) in by
    ]
    if not pairs:
        return None
    ratios = {name: [dp[field] / ref[field] for dp, ref in pairs] for name, field in RATIOS}
    return {
        **{name: statistics.median(values) for name, values in ratios.items()},
        "best_time_ratio": min(dp["ms_per_step_min"] for dp, _ in pairs) / min(r["ms_per_step_min"] for _, r in pairs),
        **{f"{name}_per_repeat": values for name, values in ratios.items()},
    }


def _ratios(results: list[dict]) -> tuple[list[dict], list[dict]]:
    """Every DP method / ``autograd`` per batch size, and ``unit-secret`` / ``rowsparse-secret`` (the patient-level
    step against the statement-level step on the same B statements, the same secret noise)."""
    timed = [r for r in results if "ms_per_step_median" in r]
    sizes, methods = sorted({r["batch_size"] for r in timed}), sorted({r["method"] for r in timed} - {"autograd"})
    dp = [
        {"method": m, "batch_size": b, **ratio, "time_target": 1.5, "memory_target": 2.0}
        for b in sizes
        for m in methods
        if (ratio := _ratio(results, m, "autograd", b))
    ]
    unit = [
        {"batch_size": b, "units": max(1, b // UNIT_SIZE), "statements_per_unit": UNIT_SIZE, **ratio}
        for b in sizes
        if (ratio := _ratio(results, "unit-secret", "rowsparse-secret", b))
    ]
    return dp, unit


def _time_accounting(steps: int = 100_000, repeats: int = 5) -> dict:
    """Wall time of ε for ``steps`` composed SGM steps (q = 512/272,115, σ = 1)."""
    from textkg.privacy import RDPAccountant, SampledGaussianEvent

    times, eps = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        acc = RDPAccountant()
        acc.step(SampledGaussianEvent(sample_rate=512 / 272_115, noise_multiplier=1.0, steps=steps))
        eps, alpha = acc.get_privacy_spent(delta=1e-5)
        times.append(time.perf_counter() - start)
    return {
        "steps": steps,
        "sample_rate": 512 / 272_115,
        "noise_multiplier": 1.0,
        "delta": 1e-5,
        "epsilon": eps,
        "alpha": alpha,
        "num_orders": len(acc.orders),
        "ms_median": 1000 * statistics.median(times),
        "target_ms": 50,
    }


def _loadavg() -> str | None:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _harness.add_common_flags(parser, out="benchmarks/results/dp_step.json", threads=1)
    parser.add_argument("--batch-sizes", default="64,256,1024")
    parser.add_argument("--negatives", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--opacus-steps", type=int, default=5)
    parser.add_argument("--methods", default="autograd,rowsparse,rowsparse-secret,opacus")
    parser.add_argument("--opacus-max-batch", type=int, default=256, help="skip opacus above this batch size")
    parser.add_argument("--repeats", type=int, default=1, help="workers per (method but opacus, B), alternating")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per (method, B) subprocess")
    parser.add_argument("--noise-draws", type=int, default=10, help="noise draws timed alone per repeat (0: none)")
    parser.add_argument("--noise-worker", nargs=2, metavar=("DRAWS", "THREADS"), help=argparse.SUPPRESS)
    parser.add_argument("--worker", nargs=5, metavar=("METHOD", "B", "K", "STEPS", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        method, b, k, steps, threads = args.worker
        print(json.dumps(worker(method, int(b), int(k), int(steps), int(threads))))
        return 0
    if args.noise_worker:
        print(json.dumps(noise_worker(*map(int, args.noise_worker))))
        return 0

    import psutil

    results = []
    load_before = _loadavg()
    runs = [
        (b, method, rep)
        for b in (int(x) for x in args.batch_sizes.split(","))
        for rep in range(args.repeats)
        for method in args.methods.split(",")
        if rep == 0 or method in REPEATED
    ]
    runs += [(0, "noise-draw", rep) for rep in range(args.repeats if args.noise_draws else 0)]
    for b, method, rep in runs:
        if method == "opacus" and b > args.opacus_max_batch:
            dense = f"dense per-example grads: {b * NUM_ENTITIES * DIM * 4 / 2**30:.1f} GiB"
            skipped = f"B > --opacus-max-batch {args.opacus_max_batch} ({dense})"
            results.append({"method": method, "batch_size": b, "skipped": skipped})
            continue
        steps = args.opacus_steps if method == "opacus" else args.steps
        cmd = [sys.executable, __file__, "--worker", method, str(b), str(args.negatives), str(steps), str(args.threads)]
        if method == "noise-draw":
            cmd = [sys.executable, __file__, "--noise-worker", str(args.noise_draws), str(args.threads)]
        load = _loadavg()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT)
            tail = " | ".join((proc.stderr or "").strip().splitlines()[-3:])
            error = f"exit {proc.returncode}: {tail}" if proc.returncode else None
        except subprocess.TimeoutExpired:
            error = f"timeout after {args.timeout}s"
        row = {"method": method, "batch_size": b, "error": error}
        if not error:
            row = {**json.loads(proc.stdout.strip().splitlines()[-1]), "repeat": rep, "loadavg_before": load}
            row["loadavg_after"] = _loadavg()
        results.append(row)
        print(f"{method} B={b} #{rep}: {_harness.dumps(row, indent=None)}", end="", file=sys.stderr)
    noise = [r for r in results if r.get("method") == "noise-draw" and "repeat" in r]
    ratios, unit_vs_statement = _ratios(results)
    out = _harness.result(
        "dp_step",
        command=_harness.command_line(argv, "dp_step.py"),
        machine_extra={  # the keys this file had before the harness (torch_threads: each worker's)
            "cpus": psutil.cpu_count(),
            "torch_threads": args.threads,
            "repeats": args.repeats,
            "timed_steps": args.steps,
            "loadavg_before": load_before,
            "loadavg_after": _loadavg(),
            "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        },
        ratios=ratios,
        **({"unit_vs_statement": unit_vs_statement} if unit_vs_statement else {}),
        noise_draw_ms_median={
            arm: statistics.median(r[f"{arm}_ms_median"] for r in noise) for arm in ("secret_float64", "torch_float32")
        }
        if noise
        else None,
        accounting=_time_accounting(),
        setting={
            "num_entities": NUM_ENTITIES,
            "num_relations": NUM_RELATIONS,
            "dim": DIM,
            "negatives": args.negatives,
            "noise_multiplier": SIGMA,
            "max_grad_norm": C,
            "score": "TransE -||h + r - t||_2, cross-entropy over 1 + k",
        },
        results=results,
    )
    path = _harness.write_results(args.out, out, indent=2)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
