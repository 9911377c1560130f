"""Descriptions per second and peak RSS of each frozen encoder, cold and cached.

Usage::

    python benchmarks/encode_speed.py --out encode_speed.json [--texts-from hpo|FILE] [--limit N]
        [--encoders bert,sentence-transformers,glove-bow,flair] [--charlm-seconds 120]

Each encoder runs in its own subprocess (so peak RSS is its own) with 2 torch
threads and a fresh cache directory: ``cold`` = build the encoder + encode
every text through :func:`encoders.cached_encode` (cache empty); ``cached`` =
the same call again (rows read back from disk). For ``flair`` two character
LMs are first trained on the texts for ``--charlm-seconds`` each (perplexity
reported). ``FILE`` holds one description per line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ENCODERS = "bert,sentence-transformers,glove-bow,flair"
KWARGS = {"bert": {"max_tokens": 32}, "sentence-transformers": {"max_tokens": 32}, "glove-bow": {}}


def load_texts(source: str, limit: int | None) -> list[str]:
    if source == "hpo":
        try:
            from textkg.data import load_dataset
        except ImportError:
            from textkg.data.registry import load_dataset
        texts = [t for t in load_dataset("hpo").entity_descriptions if t.strip()]
    else:
        texts = [line.strip() for line in Path(source).read_text(encoding="utf-8").splitlines() if line.strip()]
    return texts[:limit] if limit else texts


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(name: str, texts_file: Path, charlm_seconds: float, workdir: Path) -> dict:
    import torch

    torch.set_num_threads(2)
    from encoders import cached_encode, get_encoder

    texts = texts_file.read_text(encoding="utf-8").split("\n")
    result: dict = {"encoder": name, "n_texts": len(texts)}
    kwargs = dict(KWARGS.get(name, {}))
    if name == "flair":
        from encoders.charlm import read_char_lm_metrics, train_char_lm

        for direction in ("forward", "backward"):
            path = train_char_lm(texts, direction=direction, out_dir=workdir / f"charlm-{direction}",
                                 hidden_size=128, epochs=50, max_seconds=charlm_seconds, seed=0)
            m = read_char_lm_metrics(path)
            result[f"charlm_{direction}"] = {k: m[k] for k in ("seconds", "hidden_size", "valid_perplexity",
                                                               "test_perplexity", "chars")}
            kwargs[f"{direction}_model"] = str(path)
    start = time.perf_counter()
    encoder = get_encoder(name, **kwargs)
    load_s = time.perf_counter() - start
    cache = workdir / "cache"
    start = time.perf_counter()
    cold = cached_encode(encoder, texts, cache_dir=cache, batch_size=128)
    cold_s = time.perf_counter() - start
    start = time.perf_counter()
    warm = cached_encode(encoder, texts, cache_dir=cache)
    warm_s = time.perf_counter() - start
    assert torch.equal(cold, warm)
    result.update(
        dim=encoder.dim,
        identity=encoder.identity,
        load_seconds=round(load_s, 2),
        cold_seconds=round(cold_s, 2),
        cold_texts_per_s=round(len(texts) / cold_s, 1),
        cached_seconds=round(warm_s, 3),
        cached_texts_per_s=round(len(texts) / warm_s, 1),
        peak_rss_mb=round(peak_rss_mb(), 1),
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--texts-from", default="hpo", help="'hpo' or a file with one description per line")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--encoders", default=DEFAULT_ENCODERS)
    parser.add_argument("--charlm-seconds", type=float, default=120.0)
    parser.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_texts", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_workdir", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._worker:
        result = worker(args._worker, args._texts, args.charlm_seconds, args._workdir)
        args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
        return 0
    texts = load_texts(args.texts_from, args.limit)
    results = []
    with tempfile.TemporaryDirectory(prefix="encode-speed-") as tmp:
        tmp_path = Path(tmp)
        texts_file = tmp_path / "texts.txt"
        texts_file.write_text("\n".join(" ".join(t.split()) for t in texts), encoding="utf-8")
        env = {**os.environ, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "false",
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "FLAIR_CACHE_ROOT": os.environ.get("FLAIR_CACHE_ROOT", str(tmp_path / "flair")),
               "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        for name in args.encoders.split(","):
            workdir = tmp_path / name
            workdir.mkdir()
            out = workdir / "result.json"
            cmd = [sys.executable, __file__, "--out", str(out), "--_worker", name, "--_texts", str(texts_file),
                   "--_workdir", str(workdir), "--charlm-seconds", str(args.charlm_seconds)]
            start = time.perf_counter()
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                results.append({"encoder": name, "error": proc.stderr[-2000:]})
            else:
                results.append(json.loads(out.read_text(encoding="utf-8")))
            results[-1]["wall_seconds"] = round(time.perf_counter() - start, 1)
            print(json.dumps(results[-1]), flush=True)
    summary = {"texts_from": args.texts_from, "n_texts": len(texts), "threads": 2, "results": results}
    args.out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
