"""Scaling on synthetic power-law graphs: training, evaluation, encoding and memory against graph size.

Usage::

    python benchmarks/scaling.py [--sizes 10000,100000,1000000] [--out benchmarks/results/scaling.json]
        [--max-minutes 60] [--steps 40] [--warmup 3] [--full-epoch-steps 400] [--nproc 1,2]
        [--privacy none,full] [--optimizers lazy-adam] [--test-triples 1000] [--keep DIR] [--previous FILE]
    python benchmarks/scaling.py --refit benchmarks/results/scaling.json   # recompute the fits only

For each size N the script writes a BLP-format directory (``train.tsv``, ``dev.tsv``,
``test.tsv``, ``entity2text.txt``, ``relation2text.txt``) in a temporary folder:
``10 N`` distinct statements over ``--relations`` relations. Heads and tails are drawn
with Zipf-like probabilities ``p(rank) ∝ rank^-0.8`` over a random order of the entities
(a power-law degree distribution with exponent about 2.25); the first N statements give
every entity one statement as head, so every entity occurs. ``dev.tsv`` and ``test.tsv``
hold ``--test-triples`` statements each, drawn from the Zipf part. Each description is
3-8 words drawn from a fixed vocabulary: 4,000 alphabetic words of GloVe's vocabulary
(ranks 100-4,099), so the offline ``glove-bow`` encoder reads every one.

Every measurement runs in a fresh subprocess (this file with ``--worker``), so its peak
memory (``ru_maxrss``, summed over the ranks of a 2-process run) is its own:

- ``encode``: load the graph (``textkg.data.load_dataset``) and encode every description
  with ``glove-bow`` (``encode_seconds``: the encoder alone), then once more through the
  feature cache that the training workers read (``cached_encode_seconds``: a cold cache
  when the cache folder is new, which it is unless ``--keep`` reuses one).
- ``train``: the pipeline's own pieces (``prepare``, ``build_trainer``) build a fused
  TransE (L1, d = 128, learned global weights of a structural table and a projection of the
  50-d GloVe bag of words), margin loss, 32 sampled negatives, B = 512. The worker takes
  ``--warmup`` steps, then times ``--steps`` steps (the whole epoch when it has at most
  ``--full-epoch-steps`` steps) and extrapolates the epoch from the per-step cost and
  the number of steps per epoch (``epoch_extrapolated`` says when). ``--nproc 2`` runs
  it under ``torch.distributed.run`` with :class:`textkg.distributed.DataParallelTrainer`
  (gloo). ``--privacy full`` is DP-SGD with σ = 1 (``--noise-multiplier 1``), expected
  batch 512. One thread per process (``OMP_NUM_THREADS=1``).
- the one-process, non-private ``train`` worker also ranks ``test.tsv`` (``--test-triples``
  statements, both directions) against every entity with ``evaluate_split`` (chunked
  candidates, the default chunk).

Each row records ``os.getloadavg()`` before and after: the development machine is
shared. A measurement whose peak memory, extrapolated from the smaller sizes, exceeds 90 % of
the memory available is skipped and says so. ``--previous`` keeps an earlier call's rows and
measures only the missing ones; ``--keep`` reuses the graphs and the feature cache.

The growth exponent of each cost is the least-squares slope of log(cost) against log(size)
over the measured sizes (and over the two largest). The projection to Wikidata5M-inductive
and PrimeKG uses the measured per-row and per-step costs (see ``project``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness
import _harness  # noqa: E402

ZIPF_EXPONENT = 0.8
WORDS = (100, 4100)  # GloVe vocabulary ranks the description words come from
DESCRIPTION_WORDS = (3, 8)
#: target graphs of the projection: entities, statements
TARGETS = {
    "wikidata5m-inductive": {"entities": 4_594_485, "triples": 20_614_279},
    "primekg": {"entities": 129_375, "triples": 8_100_498},
}


# -- the synthetic graph --------------------------------------------------------------------
def _zipf(rng, n: int, size: int, exponent: float):
    """``size`` draws of ranks in ``[0, n)``, ``p(rank) ∝ (rank + 1)^-exponent`` (inverse CDF of the continuous law)."""
    import numpy as np

    u = rng.random(size)
    a = 1.0 - exponent
    if abs(a) < 1e-9:  # p ∝ 1/(rank + 1): log-uniform
        r = (n + 1.0) ** u - 1.0
    else:
        r = (u * ((n + 1) ** a - 1.0) + 1.0) ** (1.0 / a) - 1.0
    return np.minimum(r.astype(np.int64), n - 1)


def glove_words() -> list[str]:
    """The fixed description vocabulary: alphabetic words of GloVe's ranks ``WORDS``."""
    from textkg.encoders.glove import glove_vectors

    index, _ = glove_vectors()
    keys = sorted(index, key=index.__getitem__)  # by frequency rank
    return [w for w in keys[WORDS[0] : WORDS[1]] if isinstance(w, str) and w.isalpha()]


def write_graph(directory: Path, num_entities: int, *, num_relations: int, test_triples: int, seed: int = 0) -> dict:
    """Write the synthetic BLP directory; returns its sizes."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n, total = num_entities, 10 * num_entities
    order = rng.permutation(n)  # rank → entity: hubs are spread over the ids
    cover = np.stack([np.arange(n), _zipf(rng, num_relations, n, 1.0), order[_zipf(rng, n, n, ZIPF_EXPONENT)]], 1)
    keys = np.empty(0, dtype=np.int64)
    cover_keys = (cover[:, 0] * num_relations + cover[:, 1]) * n + cover[:, 2]
    cover_keys = np.unique(cover_keys[cover[:, 0] != cover[:, 2]])
    while len(keys) < total - len(cover_keys):
        k = int(1.2 * (total - len(cover_keys) - len(keys))) + 16
        h = order[_zipf(rng, n, k, ZIPF_EXPONENT)]
        t = order[_zipf(rng, n, k, ZIPF_EXPONENT)]
        r = _zipf(rng, num_relations, k, 1.0)
        new = ((h * num_relations + r) * n + t)[h != t]
        keys = np.setdiff1d(np.unique(np.concatenate([keys, new])), cover_keys, assume_unique=True)
    keys = rng.permutation(keys)[: total - len(cover_keys)]
    held, zipf_train = keys[: 2 * test_triples], keys[2 * test_triples :]
    # an entity without a statement left in training keeps one: every entity occurs in train.tsv
    train = np.concatenate([cover_keys, zipf_train])

    def rows(k):
        t = k % n
        hr = k // n
        return hr // num_relations, hr % num_relations, t

    def write(path: Path, k) -> None:
        h, r, t = (x.tolist() for x in rows(k))
        with path.open("w") as f:
            f.writelines(f"/s/{a}\t/r/{b}\t/s/{c}\n" for a, b, c in zip(h, r, t, strict=True))

    directory.mkdir(parents=True, exist_ok=True)
    write(directory / "train.tsv", rng.permutation(train))
    write(directory / "dev.tsv", held[:test_triples])
    write(directory / "test.tsv", held[test_triples:])
    words = np.array(glove_words())
    lengths = rng.integers(DESCRIPTION_WORDS[0], DESCRIPTION_WORDS[1] + 1, n)
    picks = rng.integers(0, len(words), int(lengths.sum()))
    bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    picked = words[picks].tolist()
    with (directory / "entity2text.txt").open("w") as f:
        f.write("\n".join(f"/s/{i}\t{' '.join(picked[bounds[i] : bounds[i + 1]])}" for i in range(n)) + "\n")
    (directory / "relation2text.txt").write_text("".join(f"/r/{j}\trelation {j}\n" for j in range(num_relations)))
    degree = np.bincount(np.concatenate([rows(train)[0], rows(train)[2]]), minlength=n)
    return {
        "entities": n,
        "relations": num_relations,
        "train_triples": len(train),
        "dev_triples": test_triples,
        "test_triples": test_triples,
        "max_degree": int(degree.max()),
        "median_degree": float(np.median(degree)),
    }


# -- workers (one measurement each, in a fresh process) --------------------------------------
def _vm(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _mib(n: int) -> float:
    return round(n / 2**20, 1)


def run_config(args):
    """The measured run's :class:`RunConfig`."""
    import dataclasses

    from textkg.models import ModelConfig
    from textkg.training.config import DataConfig, PrivacyConfig, RunConfig, TrainConfig

    model = ModelConfig(
        interaction="transe", interaction_kwargs={"p": 1}, dim=args.dim, fusion="weighted", encoder="glove-bow"
    )
    train = {
        "epochs": 1,
        "batch_size": args.batch_size,
        "num_negatives": args.num_negatives,
        "loss": "margin",
        "candidates": "all",
        "valid_max_triples": 0,
        "device": "cpu",
    }
    if args.optimizer and "optimizer" in {f.name for f in dataclasses.fields(TrainConfig)}:
        train["optimizer"] = args.optimizer
    privacy = PrivacyConfig(mode="full", noise_multiplier=1.0) if args.privacy == "full" else PrivacyConfig()
    return RunConfig(
        data=DataConfig(dataset=str(args.data), split="transductive"),
        model=model,
        train=TrainConfig(**train),
        privacy=privacy,
        model_name="scaling-fused-transe",
    )


def encode_worker(args) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    from textkg.data import load_dataset
    from textkg.encoders import cached_encode, get_encoder
    from textkg.training.features import entity_texts

    rss0 = _vm("VmRSS")
    start = time.perf_counter()
    kg = load_dataset(str(args.data))
    load = time.perf_counter() - start
    load_peak = _vm("VmHWM")
    texts = entity_texts(kg)
    encoder = get_encoder("glove-bow")
    start = time.perf_counter()
    features = encoder.encode(texts)  # the encoder alone, no cache
    encode = time.perf_counter() - start
    start = time.perf_counter()
    cached_encode(encoder, texts, cache_dir=args.cache)  # fills the cache the training workers read
    cached = time.perf_counter() - start
    return {
        "entities": kg.num_entities,
        "load_seconds": round(load, 2),
        "load_peak_rss_mib": _mib(load_peak),
        "encode_seconds": round(encode, 2),
        "encode_us_per_row": round(1e6 * encode / len(texts), 2),
        "cached_encode_seconds": round(cached, 2),
        "feature_shape": list(features.shape),
        "rss_after_imports_mib": _mib(rss0),
        "peak_rss_mib": _mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024),
    }


def train_worker(args) -> dict:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(args.threads)
    from textkg.pipeline.job import build_trainer, evaluate_split, prepare
    from textkg.pipeline.memory import estimate_memory
    from textkg.training.schedule import public_batches
    from textkg.training.trainer import Trainer

    world = int(os.environ.get("WORLD_SIZE", "1"))
    trainer_class: type[Trainer] = Trainer
    if world > 1:
        from textkg.distributed import DataParallelTrainer

        dist.init_process_group(backend="gloo")
        trainer_class = DataParallelTrainer
    rank = dist.get_rank() if world > 1 else 0
    rss0 = _vm("VmRSS")
    cfg = run_config(args)
    start = time.perf_counter()
    prep = prepare(cfg)
    prepare_seconds = time.perf_counter() - start
    private = cfg.privacy.mode != "none"
    estimate = estimate_memory(prep.model, cfg, num_entities=prep.kg.num_entities, private=private).total
    out = Path(tempfile.mkdtemp(prefix=f"scaling-run{rank}-"))
    trainer, private_training, _ = build_trainer(prep, cfg, out, trainer_class=trainer_class)
    after_prepare = _vm("VmHWM")
    steps_per_epoch = trainer.plan.public_steps + trainer.plan.private_steps
    if private:

        def step() -> None:
            if not trainer._private_step():
                raise RuntimeError("privacy budget reached")

    else:
        batches = public_batches(
            len(trainer.public), batch_size=cfg.train.batch_size, generator=trainer._epoch_generator()
        )

        def step() -> None:
            try:
                idx = next(batches)
            except StopIteration:  # the warm-up took the first batches of a whole measured epoch
                idx = torch.randperm(len(trainer.public), generator=trainer.generator)[: cfg.train.batch_size]
            trainer._public_step(idx)

    prep.model.train()
    for _ in range(args.warmup):
        step()
    steps = steps_per_epoch if steps_per_epoch <= args.full_epoch_steps else min(args.steps, steps_per_epoch)
    if world > 1:
        dist.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if world > 1:
        dist.barrier()
    train_seconds = time.perf_counter() - start
    if private_training is not None:
        private_training.close()
    after_train = _vm("VmHWM")
    result = {
        "rank": rank,
        "world": world,
        "entities": prep.kg.num_entities,
        "train_triples": len(prep.split.train),
        "prepare_seconds": round(prepare_seconds, 2),
        "steps_per_epoch": steps_per_epoch,
        "steps_measured": steps,
        "warmup_steps": args.warmup,
        "seconds_per_step": train_seconds / steps,
        "epoch_seconds": train_seconds / steps * steps_per_epoch,
        "epoch_extrapolated": steps < steps_per_epoch,
        "triples_per_second": cfg.train.batch_size * steps / train_seconds,
        "memory_estimate_mib": _mib(estimate),
        "rss_after_imports_mib": _mib(rss0),
        "peak_rss_after_prepare_mib": _mib(after_prepare),
        "peak_rss_after_train_mib": _mib(after_train),
    }
    if args.eval and rank == 0:
        start = time.perf_counter()
        metrics = evaluate_split(prep, cfg, "test").to_dict()
        result["eval_seconds"] = round(time.perf_counter() - start, 2)
        result["eval_queries"] = 2 * metrics["num_triples"]
        result["eval_candidates"] = prep.kg.num_entities
        result["peak_rss_after_eval_mib"] = _mib(_vm("VmHWM"))
    result["peak_rss_mib"] = _mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    shutil.rmtree(out, ignore_errors=True)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return result


# -- the driver ------------------------------------------------------------------------------
def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(kind: str, setting: dict, args, data: Path, cache: Path, timeout: float) -> dict:
    """Run one worker in a fresh process; its JSON result plus the wall time and the machine load."""
    nproc = setting.get("nproc", 1)
    with tempfile.TemporaryDirectory(prefix="scaling-result-") as tmp:
        result = Path(tmp) / "result"
        worker = [str(Path(__file__).resolve()), "--worker", kind, "--data", str(data), "--cache", str(cache)]
        worker += ["--result", str(result), "--steps", str(args.steps), "--warmup", str(args.warmup)]
        worker += ["--full-epoch-steps", str(args.full_epoch_steps), "--dim", str(args.dim)]
        worker += ["--batch-size", str(args.batch_size), "--num-negatives", str(args.num_negatives)]
        worker += ["--privacy", setting.get("privacy", "none"), "--threads", "1"]
        if setting.get("optimizer"):
            worker += ["--optimizer", setting["optimizer"]]
        if setting.get("eval"):
            worker.append("--eval")
        if nproc > 1:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *worker]
        else:
            cmd = [sys.executable, *worker]
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "TEXTKG_CACHE_DIR": str(cache),
            "TEXTKG_SKIP_MEMORY_CHECK": "1",
        }
        load_before, start = _load(), time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
        )
        try:
            _, stderr = proc.communicate(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # torchrun's workers too: they share the new session
            proc.communicate()
            return {"kind": kind, **setting, "error": f"over --max-minutes: killed after {timeout:.0f} s"}
        wall = time.perf_counter() - start
        if proc.returncode:
            return {"kind": kind, **setting, "error": f"exit {proc.returncode}: {stderr[-2000:]}"}
        ranks = [json.loads(p.read_text()) for p in sorted(Path(tmp).glob("result.rank*.json"))]
    row = {"kind": kind, **setting, **ranks[0]}
    row.pop("rank", None)
    row["peak_rss_mib"] = round(sum(r["peak_rss_mib"] for r in ranks), 1)
    if len(ranks) > 1:
        row["peak_rss_mib_per_rank"] = [r["peak_rss_mib"] for r in ranks]
    row.update(wall_seconds=round(wall, 2), loadavg_before=load_before, loadavg_after=_load())
    return row


def slope(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log(y) on log(x); ``None`` with fewer than two points."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return round(sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx, 3) if sxx else None


def _setting_key(row: dict) -> str:
    key = f"nproc={row.get('nproc', 1)},privacy={row.get('privacy', 'none')}"
    return key + (f",optimizer={row['optimizer']}" if row.get("optimizer") else "")


def _exponent(rows: list[dict], x: str, y) -> dict:
    """``all``: the log-log slope over every size; ``largest_two``: over the two largest only (where the
    constant parts weigh least). ``y`` is a key or a function of the row."""
    rows = sorted(rows, key=lambda r: r[x])
    ys = [y(r) if callable(y) else r[y] for r in rows]
    xs = [r[x] for r in rows]
    return {"all": slope(xs, ys), "largest_two": slope(xs[-2:], ys[-2:]), "sizes": len(rows)}


def fit_exponents(rows: list[dict]) -> dict:
    """Growth exponent of each cost against the graph's size, per setting."""
    ok = [r for r in rows if "error" not in r and "skipped" not in r]
    enc = [r for r in ok if r["kind"] == "encode"]
    out: dict[str, dict] = {
        "encode": {
            "encode_seconds_vs_entities": _exponent(enc, "entities", "encode_seconds"),
            "load_seconds_vs_entities": _exponent(enc, "entities", "load_seconds"),
            "load_peak_rss_vs_entities": _exponent(enc, "entities", "load_peak_rss_mib"),
        }
    }
    for key in sorted({_setting_key(r) for r in ok if r["kind"] == "train"}):
        tr = [r for r in ok if r["kind"] == "train" and _setting_key(r) == key]
        fit = {
            "epoch_seconds_vs_triples": _exponent(tr, "train_triples", "epoch_seconds"),
            "seconds_per_step_vs_entities": _exponent(tr, "entities", "seconds_per_step"),
            "peak_rss_vs_entities": _exponent(tr, "entities", "peak_rss_mib"),
            "prepare_seconds_vs_triples": _exponent(tr, "train_triples", "prepare_seconds"),
        }
        ev = [r for r in tr if "eval_seconds" in r]
        if ev:
            fit["eval_seconds_vs_entities"] = _exponent(ev, "entities", "eval_seconds")
        out[key] = fit
    return out


def _linear(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares ``y = a + b x`` (``b`` alone through the origin with one point)."""
    if len(xs) == 1:
        return 0.0, ys[0] / xs[0]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def project(rows: list[dict], batch_size: int) -> dict:
    """Per-epoch time, encoding time and peak memory of the target graphs on this machine (CPU, 1 thread).

    Time: a step's cost is a line ``a + b N`` through the measured sizes (a step's dense parts, Adam's
    update of the entity table and under DP the noise on it, grow with N), and an epoch is ``T / B``
    steps. Encoding: the per-row cost at the largest size, times N. Memory: ``a + b_e N + b_t T``. The
    synthetic graphs have T = 10 N, so the two slopes cannot both be fitted from them: ``b_t`` is the
    slope of the graph-loading peak against T (the encode worker, which only loads and encodes), and
    ``b_e`` is what the training peak's slope in N leaves after ``10 b_t``.
    """
    ok = [r for r in rows if "error" not in r and "skipped" not in r]
    enc = sorted((r for r in ok if r["kind"] == "encode"), key=lambda r: r["entities"])
    if not enc:
        return {}
    per_row = enc[-1]["encode_seconds"] / enc[-1]["entities"]
    _, per_triple = _linear([10.0 * r["entities"] for r in enc], [r["load_peak_rss_mib"] for r in enc])
    out: dict[str, dict] = {}
    for name, target in TARGETS.items():
        n, t = target["entities"], target["triples"]
        block: dict[str, dict | float] = {"entities": n, "triples": t, "encode_minutes": round(per_row * n / 60, 1)}
        for key in sorted({_setting_key(r) for r in ok if r["kind"] == "train"}):
            tr = [r for r in ok if r["kind"] == "train" and _setting_key(r) == key]
            a, b = _linear([r["entities"] for r in tr], [r["seconds_per_step"] for r in tr])
            ma, mb = _linear([r["entities"] for r in tr], [r["peak_rss_mib"] for r in tr])
            step = a + b * n
            block[key] = {
                "seconds_per_step": round(step, 3),
                "epoch_hours": round(step * t / batch_size / 3600, 1),
                "peak_rss_gib": round((ma + (mb - 10 * per_triple) * n + per_triple * t) / 1024, 1),
                "fitted_on_sizes": sorted(r["entities"] for r in tr),
            }
        out[name] = block
    out["assumptions"] = {
        "what": "this machine's CPU under the load recorded in the rows, one thread per process, the measured "
        f"model (fused TransE L1, d = 128, glove-bow, 32 sampled negatives, B = {batch_size}) and the measured "
        "settings; lines a + b N through the measured per-step costs and peaks; encode = per-row cost at the "
        "largest size x N",
        "memory_per_statement_bytes": round(per_triple * 2**20),
        "not_counted": "evaluation of a full test split (the eval rows give the cost of 2,000 queries against N "
        "candidates, linear in both), TEXTKG_MMAP_FEATURES, more threads",
        "gpu": "NOT MEASURED (no GPU here). A rough guess only: the O(N d) part of a step (dense Adam, DP noise) is "
        "memory-bound and GPU memory is ~100-300x faster than this shared CPU's, the per-example part is small "
        "matrix work; a GPU step might take milliseconds to tens of milliseconds, i.e. minutes per epoch for "
        "the non-private runs, with the same memory held on the device",
    }
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated entity counts")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "scaling.json"))
    p.add_argument("--max-minutes", type=float, default=60.0, help="wall-time budget; later measurements are skipped")
    p.add_argument("--steps", type=int, default=40, help="timed training steps (after the warm-up)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--full-epoch-steps", type=int, default=400, help="time the whole epoch when it is this short")
    p.add_argument("--nproc", default="1,2")
    p.add_argument("--privacy", default="none,full")
    p.add_argument(
        "--optimizers", default="", help="also measure these train.optimizer values (non-private, 1 process)"
    )
    p.add_argument("--relations", type=int, default=32)
    p.add_argument("--test-triples", type=int, default=1000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--num-negatives", type=int, default=32)
    p.add_argument("--keep", default=None, help="write the graphs and the feature cache here and keep them")
    p.add_argument("--refit", default=None, help="recompute the exponents and the projection of this result file")
    p.add_argument("--previous", default=None, help="an earlier result: keep its rows, measure only the rest")
    # worker mode
    p.add_argument("--worker", choices=["encode", "train"], help=argparse.SUPPRESS)
    p.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--optimizer", default=None, help=argparse.SUPPRESS)
    p.add_argument("--eval", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.refit:  # recompute the fits of an existing result file, in place
        record = json.loads(Path(args.refit).read_text())
        record["exponents"] = fit_exponents(record["rows"])
        record["projection"] = project(record["rows"], record.get("batch_size", args.batch_size))
        _harness.write_results(args.refit, record)
        return
    if args.worker:
        result = encode_worker(args) if args.worker == "encode" else train_worker(args)
        rank = result.get("rank", 0)
        _harness.write_results(f"{args.result}.rank{rank}.json", result)  # read back by the parent process
        return
    run(args, argv)


def run(args, argv: list[str] | None) -> None:
    deadline = time.perf_counter() + 60 * args.max_minutes
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    settings: list[dict] = []
    for privacy in [x for x in args.privacy.split(",") if x]:
        for nproc in [int(x) for x in args.nproc.split(",") if x]:
            settings.append({"nproc": nproc, "privacy": privacy, "eval": nproc == 1 and privacy == "none"})
            if nproc == 1 and privacy == "none":
                settings += [{"nproc": 1, "privacy": "none", "optimizer": o} for o in args.optimizers.split(",") if o]
    rows: list[dict] = []
    graphs: dict[int, dict] = {}
    previous: list[dict] = []
    if args.previous:  # an earlier call's measurements: kept, and not measured again
        earlier = json.loads(Path(args.previous).read_text())
        previous = [r for r in earlier["rows"] if "skipped" not in r and "error" not in r]
        graphs = {int(k): v for k, v in earlier.get("graphs", {}).items()}
    done = {(r["kind"], r["entities"], _setting_key(r)) for r in previous}
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="textkg-scaling-"))
    cache = base / "cache"
    (cache / "glove").parent.mkdir(parents=True, exist_ok=True)
    shared_glove = Path(os.environ.get("TEXTKG_CACHE_DIR", Path.home() / ".cache" / "textkg")) / "glove"
    if shared_glove.is_dir() and not (cache / "glove").exists():
        (cache / "glove").symlink_to(shared_glove)  # the converted GloVe vectors, not features
    try:
        for size in sizes:
            left = deadline - time.perf_counter()
            if left <= 0:
                rows.append({"kind": "all", "entities": size, "skipped": "over --max-minutes"})
                continue
            data = base / f"n{size}"
            start = time.perf_counter()
            if not (data / "train.tsv").exists():
                graphs[size] = write_graph(data, size, num_relations=args.relations, test_triples=args.test_triples)
            graphs.setdefault(size, {"entities": size}).setdefault(
                "write_seconds", round(time.perf_counter() - start, 2)
            )
            print(json.dumps({"graph": graphs[size]}), file=sys.stderr)
            for kind, setting in [("encode", {})] + [("train", s) for s in settings]:
                if (kind, size, _setting_key(setting)) in done:
                    continue
                left = deadline - time.perf_counter()
                if left <= 0:
                    rows.append({"kind": kind, "entities": size, **setting, "skipped": "over --max-minutes"})
                    continue
                too_big = _predicted_over_memory([*previous, *rows], kind, setting, size)
                if too_big:
                    rows.append({"kind": kind, "entities": size, **setting, "skipped": too_big})
                    print(json.dumps(rows[-1]), file=sys.stderr)
                    continue
                row = measure(kind, setting, args, data, cache, left)
                row.setdefault("entities", size)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
            if not args.keep:
                shutil.rmtree(data, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    rows = sorted([*previous, *rows], key=lambda r: r["entities"])  # stable: each size keeps its order
    measured = [r for r in rows if "skipped" not in r]
    record = _harness.result(
        "scaling",
        command=_harness.command_line(argv, "scaling.py"),
        machine_extra={  # the keys this file had before the harness
            "cpus": os.cpu_count(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "note": "shared machine: other jobs ran at the same time; see loadavg_before/after of each row",
        },
        description="scaling on synthetic power-law graphs (benchmarks/scaling.py)",
        git=_git(),
        setting={
            "model": f"fused TransE L1 (weighted fusion of a structural table and glove-bow), d = {args.dim}",
            "loss": f"margin 1, {args.num_negatives} sampled negatives, batch {args.batch_size}, Adam lr 1e-3",
            "privacy_full": "DP-SGD, noise multiplier 1, max grad norm 1, expected batch as above (Poisson)",
            "threads_per_process": 1,
            "graph": f"Zipf heads/tails (exponent {ZIPF_EXPONENT}), {args.relations} relations, 10 x N statements",
            "eval": f"{args.test_triples} test statements, both directions, candidates = all entities, filtered",
            "epoch": "timed steps x steps per epoch; epoch_extrapolated is true when fewer than all steps ran",
        },
        graphs=graphs,
        rows=rows,
        batch_size=args.batch_size,
        exponents=fit_exponents(measured),
        projection=project(measured, args.batch_size),
    )
    _harness.write_results(args.out, record)
    print(f"wrote {args.out}", file=sys.stderr)


def _available_mib() -> float | None:
    """``MemAvailable`` of ``/proc/meminfo`` in MiB (``None`` where it cannot be read)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _predicted_over_memory(rows: list[dict], kind: str, setting: dict, size: int) -> str | None:
    """Why a measurement is skipped for memory, or ``None``: its peak, extrapolated from the same setting
    at smaller sizes (a line ``a + b N`` through the two largest, or ``peak x N / n`` from one), above 90 %
    of the memory available now. The machine is shared: an out-of-memory kill could hit another job."""
    key = _setting_key({**setting, "kind": kind})
    same = sorted(
        (
            r
            for r in rows
            if r["kind"] == kind and "peak_rss_mib" in r and r["entities"] < size and _setting_key(r) == key
        ),
        key=lambda r: r["entities"],
    )
    available = _available_mib()
    if not same or available is None:
        return None
    if len(same) == 1:
        predicted, basis = same[0]["peak_rss_mib"] * size / same[0]["entities"], f"{same[0]['entities']:,}"
    else:
        a, b = _linear([r["entities"] for r in same[-2:]], [r["peak_rss_mib"] for r in same[-2:]])
        predicted, basis = a + b * size, f"{same[-2]['entities']:,} and {same[-1]['entities']:,}"
    if predicted <= 0.9 * available:
        return None
    return (
        f"predicted peak {predicted / 1024:.1f} GiB (a line in N through the peaks at {basis} entities) is above "
        f"90 % of the {available / 1024:.1f} GiB available then"
    )


def _git() -> dict:
    def git(*a: str) -> str:
        done = subprocess.run(["git", *a], capture_output=True, text=True, cwd=ROOT)
        return done.stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty_files": len(git("status", "--porcelain").splitlines())}


if __name__ == "__main__":
    main()
