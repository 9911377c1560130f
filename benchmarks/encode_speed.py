"""Descriptions per second and peak RSS of each frozen encoder, cold and cached.

Usage::

    python benchmarks/encode_speed.py --out encode_speed.json [--texts-from hpo|FILE] [--limit N]
        [--encoders bert,sentence-transformers,glove-bow,flair] [--charlm-seconds 120]
        [--charlm-hidden-size 128] [--threads 2]

Every measurement runs in its own subprocess (so peak RSS is its own) with
``--threads`` torch threads and a fresh cache directory per encoder:

* ``cold`` (one process): build the encoder (``load_seconds``) and encode every
  text through :func:`textkg.encoders.cached_encode` with an empty cache
  (``encode_seconds``); ``cold_seconds`` = load + encode. The same call is then
  repeated in that process (``cached_read_seconds``: rows read back from disk,
  encoder already in memory).
* ``cached reload`` (a second, fresh process): build the encoder again and call
  ``cached_encode`` on the now-filled cache (``cached_reload_seconds`` = load +
  read, what a later run pays); the rows are checked equal to the cold ones.

Import time (``import torch`` + ``encoders``) is reported apart
(``import_seconds``), as is each process's wall time including interpreter
start (``wall_seconds``). For ``flair`` the two character LMs (forward,
backward) are first trained on the texts, each in its own process, for
``--charlm-seconds`` (validation/test perplexity, the per-split validation
curve and the training process's peak RSS are reported). Load averages are
recorded before and after every process: the development machine is shared.
``FILE`` holds one description per line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness
import _harness  # noqa: E402

DEFAULT_ENCODERS = "bert,sentence-transformers,glove-bow,flair"
KWARGS = {"bert": {"max_tokens": 32}, "sentence-transformers": {"max_tokens": 32}, "glove-bow": {}, "flair": {}}
_SPLIT_LINE = re.compile(
    r"end of split\s+(\d+)\s*/\s*(\d+)\s*\|\s*epoch\s+(\d+)\s*\|\s*time:\s*([\d.]+)s\s*\|\s*valid loss\s+([\d.]+)"
    r"\s*\|\s*valid ppl\s+([\d.]+)\s*\|\s*learning rate\s+([\d.]+)"
)


def load_texts(source: str, limit: int | None) -> list[str]:
    if source == "hpo":
        from textkg.data import load_dataset

        texts = list(load_dataset("hpo").entity_descriptions)
    else:
        texts = Path(source).read_text(encoding="utf-8").splitlines()
    # one description per line in the workers' text file: collapse whitespace (incl. newlines)
    texts = [" ".join(t.split()) for t in texts]
    texts = [t for t in texts if t]
    return texts[:limit] if limit else texts


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def charlm_curve(loss_txt: Path) -> list[dict]:
    """Per-split validation perplexity from flair's ``loss.txt`` (elapsed = cumulative split time)."""
    curve, elapsed = [], 0.0
    if not loss_txt.exists():
        return curve
    for line in loss_txt.read_text(encoding="utf-8").splitlines():
        m = _SPLIT_LINE.search(line)
        if m:
            elapsed += float(m.group(4))
            curve.append(
                {
                    "epoch": int(m.group(3)),
                    "split": int(m.group(1)),
                    "elapsed_s": round(elapsed, 1),
                    "valid_ppl": round(float(m.group(6)), 4),
                    "lr": float(m.group(7)),
                }
            )
    return curve


def _start_worker(threads: int) -> tuple[dict, float]:
    start = time.perf_counter()
    import torch

    torch.set_num_threads(threads)
    import textkg.encoders as encoders  # noqa: F401

    return {"torch_threads": torch.get_num_threads(), "torch": torch.__version__}, time.perf_counter() - start


def worker_charlm(direction: str, texts: list[str], args: argparse.Namespace) -> dict:
    info, import_s = _start_worker(args.threads)
    from textkg.encoders.charlm import read_char_lm_metrics, train_char_lm

    out_dir = args._workdir / f"charlm-{direction}"
    path = train_char_lm(
        texts,
        direction=direction,
        out_dir=out_dir,
        hidden_size=args.charlm_hidden_size,
        epochs=args.charlm_epochs,
        max_seconds=args.charlm_seconds,
        seed=0,
    )
    m = read_char_lm_metrics(path)
    keep = (
        "seconds",
        "max_seconds",
        "hidden_size",
        "nlayers",
        "mini_batch_size",
        "sequence_length",
        "valid_perplexity",
        "test_perplexity",
        "stopped_at_deadline",
        "kept_final_model",
        "chars",
    )
    return {
        "direction": direction,
        "model": str(path),
        **info,
        "import_seconds": round(import_s, 2),
        **{k: m.get(k) for k in keep},
        "curve": charlm_curve(out_dir / "loss.txt"),
        "peak_rss_mb": peak_rss_mb(),
    }


def worker_encode(name: str, phase: str, texts: list[str], args: argparse.Namespace) -> dict:
    info, import_s = _start_worker(args.threads)
    import numpy as np
    import torch

    from textkg.encoders import cached_encode, get_encoder

    kwargs = dict(KWARGS.get(name, {}), **json.loads(args._kwargs or "{}"))
    cache = args._workdir / "cache"
    rows_file = args._workdir / "cold_rows.npy"
    start = time.perf_counter()
    encoder = get_encoder(name, **kwargs)
    load_s = time.perf_counter() - start
    result: dict = {"phase": phase, **info, "import_seconds": round(import_s, 2), "load_seconds": round(load_s, 2)}
    start = time.perf_counter()
    rows = cached_encode(encoder, texts, cache_dir=cache, batch_size=args.batch_size)
    first_s = time.perf_counter() - start
    if phase == "cold":
        start = time.perf_counter()
        again = cached_encode(encoder, texts, cache_dir=cache)
        read_s = time.perf_counter() - start
        assert torch.equal(rows, again)
        np.save(rows_file, rows.numpy())
        result.update(
            dim=encoder.dim,
            identity=encoder.identity,
            encode_seconds=round(first_s, 2),
            cold_seconds=round(load_s + first_s, 2),
            cached_read_seconds=round(read_s, 3),
        )
    else:
        assert torch.equal(rows, torch.from_numpy(np.load(rows_file))), "cached rows differ from the cold ones"
        result.update(read_seconds=round(first_s, 3), cached_reload_seconds=round(load_s + first_s, 2))
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def run_worker(cmd_args: list[str], out: Path, env: dict) -> dict:
    """Run one worker process; its JSON result plus wall time and load averages (or the error)."""
    before = loadavg()
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--out", str(out), *cmd_args], env=env, capture_output=True, text=True
    )
    wall = round(time.perf_counter() - start, 1)
    if proc.returncode != 0:
        return {
            "error": proc.stderr[-3000:],
            "wall_seconds": wall,
            "loadavg_before": before,
            "loadavg_after": loadavg(),
        }
    result = json.loads(out.read_text(encoding="utf-8"))
    result.update(wall_seconds=wall, loadavg_before=before, loadavg_after=loadavg())
    return result


def summarize(name: str, n: int, cold: dict, cached: dict | None) -> dict:
    """One row per encoder: the headline numbers first, the per-process details after."""
    row: dict = {"encoder": name, "n_texts": n}
    if "error" in cold:
        row["error"] = cold["error"]
        return row
    row.update(
        dim=cold["dim"],
        identity=cold["identity"],
        torch_threads=cold["torch_threads"],
        cold_seconds=cold["cold_seconds"],
        load_seconds=cold["load_seconds"],
        encode_seconds=cold["encode_seconds"],
        texts_per_s=round(n / cold["encode_seconds"], 1),
        texts_per_s_incl_load=round(n / cold["cold_seconds"], 1),
        cached_read_seconds=cold["cached_read_seconds"],
        cached_reload_seconds=None if cached is None or "error" in cached else cached["cached_reload_seconds"],
        peak_rss_mb=cold["peak_rss_mb"],
        peak_rss_mb_cached=None if cached is None or "error" in cached else cached["peak_rss_mb"],
        loadavg_before=cold["loadavg_before"],
        loadavg_after=(cached or cold)["loadavg_after"],
        processes={"cold": cold, "cached": cached},
    )
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--texts-from", default="hpo", help="'hpo' or a file with one description per line")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--encoders", default=DEFAULT_ENCODERS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128, help="descriptions per forward pass (cold)")
    parser.add_argument("--charlm-seconds", type=float, default=120.0, help="training budget per direction")
    parser.add_argument("--charlm-hidden-size", type=int, default=128)
    parser.add_argument("--charlm-epochs", type=int, default=50)
    parser.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_phase", default="cold", help=argparse.SUPPRESS)
    parser.add_argument("--_kwargs", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_texts", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_workdir", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._worker:
        texts = args._texts.read_text(encoding="utf-8").split("\n")
        if args._worker.startswith("charlm-"):
            result = worker_charlm(args._worker[len("charlm-") :], texts, args)
        else:
            result = worker_encode(args._worker, args._phase, texts, args)
        _harness.write_results(args.out, result, indent=2)  # read back by the parent process
        return 0

    texts = load_texts(args.texts_from, args.limit)
    names = [n.strip() for n in args.encoders.split(",") if n.strip()]
    summary: dict = _harness.result(  # the top-level keys this file had before the harness, kept
        "encode_speed",
        command=_harness.command_line(argv, "encode_speed.py"),
        texts_from=args.texts_from,
        n_texts=len(texts),
        n_unique_texts=len(set(texts)),
        threads=args.threads,
        batch_size=args.batch_size,
        cpu_count=os.cpu_count(),
        charlm_seconds=args.charlm_seconds,
        charlm_hidden_size=args.charlm_hidden_size,
        python=platform.python_version(),
        started=time.strftime("%Y-%m-%d %H:%M:%S"),
        loadavg_start=loadavg(),
        results=[],
    )
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="encode-speed-") as tmp:
        tmp_path = Path(tmp)
        texts_file = tmp_path / "texts.txt"
        texts_file.write_text("\n".join(texts), encoding="utf-8")
        threads = str(args.threads)
        env = {
            **os.environ,
            "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
            "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "FLAIR_CACHE_ROOT": os.environ.get("FLAIR_CACHE_ROOT", str(tmp_path / "flair")),
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        common = [
            "--_texts",
            str(texts_file),
            "--threads",
            threads,
            "--batch-size",
            str(args.batch_size),
            "--charlm-seconds",
            str(args.charlm_seconds),
            "--charlm-hidden-size",
            str(args.charlm_hidden_size),
            "--charlm-epochs",
            str(args.charlm_epochs),
        ]
        for name in names:
            workdir = tmp_path / name
            workdir.mkdir()
            base = [*common, "--_workdir", str(workdir)]
            kwargs: dict = {}
            charlm: dict = {}
            if name == "flair":
                for direction in ("forward", "backward"):
                    res = run_worker(
                        [*base, "--_worker", f"charlm-{direction}"], workdir / f"charlm-{direction}.json", env
                    )
                    charlm[direction] = res
                    print(
                        json.dumps(
                            {"encoder": name, "charlm": direction, **{k: v for k, v in res.items() if k != "curve"}}
                        ),
                        flush=True,
                    )
                    if "error" not in res:
                        kwargs[f"{direction}_model"] = res.pop("model")
            if name == "flair" and len(kwargs) < 2:
                row = {"encoder": name, "n_texts": len(texts), "error": "character-LM training failed"}
            else:
                extra = ["--_kwargs", json.dumps(kwargs)] if kwargs else []
                cold = run_worker([*base, "--_worker", name, "--_phase", "cold", *extra], workdir / "cold.json", env)
                cached = None
                if "error" not in cold:
                    cached = run_worker(
                        [*base, "--_worker", name, "--_phase", "cached", *extra], workdir / "cached.json", env
                    )
                row = summarize(name, len(texts), cold, cached)
            if charlm:
                row["charlm"] = charlm
            summary["results"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in ("processes", "charlm")}), flush=True)
            _harness.write_results(args.out, summary, indent=2)  # partial results survive
    summary.update(loadavg_end=loadavg(), total_seconds=round(time.perf_counter() - t0, 1))
    summary.update(machine=_harness.machine(), date=_harness.utc_now())  # as the measurement ends
    _harness.write_results(args.out, summary, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
