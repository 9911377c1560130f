"""Seconds per training step with Adam and lazy Adam as the entity table grows.

Usage::

    python benchmarks/optimizer_step.py [--sizes 10000,100000,1000000] [--dim 128]
        [--batch-size 512] [--num-negatives 32] [--steps 20] [--out benchmarks/results/optimizer_step.json]

Structural TransE (L1, margin loss) on random triples, one thread. For each table
size N and each ``train.optimizer`` (``adam``, ``lazy-adam``) the same model takes
``--steps`` steps of B positives with K corruptions through the trainer's own
``build_optimizer``; the median seconds per step is reported, split into the
forward/backward and the optimizer's step. Adam reads and writes every row's moments
at every step (O(N·d)); lazy Adam only the rows the batch touched (O(B·K·d)).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness


def measure(n: int, optimizer: str, args) -> dict:
    import torch

    from textkg.models import build_model
    from textkg.models.config import ModelConfig
    from textkg.training.losses import get_loss
    from textkg.training.negatives import corrupt
    from textkg.training.optim import build_optimizer

    torch.manual_seed(0)
    cfg = ModelConfig(interaction="transe", interaction_kwargs={"p": 1}, dim=args.dim, fusion="structural")
    model = build_model(cfg, num_entities=n, num_relations=50, seen_entities=torch.arange(n))
    opt = build_optimizer(model, name=optimizer, lr=1e-3, weight_decay=0.0)
    margin = get_loss("margin")
    g = torch.Generator().manual_seed(0)
    pool = torch.arange(n)
    forward, step = [], []
    for _ in range(args.steps + 2):  # two warm-up steps
        pos = torch.stack(
            [
                torch.randint(n, (args.batch_size,), generator=g),
                torch.randint(50, (args.batch_size,), generator=g),
                torch.randint(n, (args.batch_size,), generator=g),
            ],
            dim=1,
        )
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        batch = corrupt(pos, num_negatives=args.num_negatives, entity_pool=pool, generator=g)
        margin(model(batch), margin=1.0).mean().backward()
        t1 = time.perf_counter()
        opt.step()
        t2 = time.perf_counter()
        forward.append(t1 - t0)
        step.append(t2 - t1)
    forward, step = forward[2:], step[2:]
    return {
        "num_entities": n,
        "optimizer": optimizer,
        "forward_backward_s": statistics.median(forward),
        "optimizer_step_s": statistics.median(step),
        "step_s": statistics.median([a + b for a, b in zip(forward, step, strict=True)]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--num-negatives", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    _harness.add_common_flags(parser, out="benchmarks/results/optimizer_step.json")
    args = parser.parse_args()
    _harness.set_threads(1)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        for name in ("adam", "lazy-adam"):
            row = measure(n, name, args)
            row["loadavg_1min"] = os.getloadavg()[0]
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = _harness.result(  # "machine" was the processor's name; it is the harness's record (its "processor")
        "optimizer_step",
        settings={k: getattr(args, k) for k in ("dim", "batch_size", "num_negatives", "steps")},
        threads=1,
        rows=rows,
    )
    _harness.write_results(args.out, out, indent=2)


if __name__ == "__main__":
    main()
