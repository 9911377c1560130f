"""Hyperparameter selection on validation statements only: ``textkg tune``.

One procedure for any dataset ``textkg train`` reads (``hpo``, a BLP-format
directory): every point of a grid is trained as ``train`` would train it (the
same :func:`~textkg.pipeline.job.prepare`, trainer and per-epoch model
selection), scored by its validation MRR on the run's validation subset
(``train.valid_max_triples``, seeded), and the best point wins. The test
statements are never ranked, so the chosen setting can be tested once,
afterwards, without selection bias. A runner beside the trainer, not inside it.

Procedure (docs/models.md, "Choosing hyperparameters"):

1. the base configuration is ``train``'s (preset, flags, ``--config``);
2. the grid is the Cartesian product of ``--grid SECTION.KEY=V1,V2,...``;
3. each point trains ``--tune-epochs`` epochs (default: the base's), within
   ``--tune-max-minutes`` (default: the base's ``max_minutes``);
4. the point with the highest validation MRR wins (ties: the first listed);
5. ``best_config.json`` is that point's full configuration with the base's
   epochs and time limit: ``textkg train --config OUT/best_config.json`` trains
   and tests it.

Refused under ``--privacy full|confidential``: every trial would read the
private statements, and choosing among trials spends privacy too (Papernot &
Steinke 2022, "Hyperparameter tuning with Rényi differential privacy",
arXiv:2110.03620). Tune on public data (``--privacy public-only``, or a
non-private proxy), then train privately with the chosen setting.

``OUT/tune.json`` is rewritten after every point, so an interrupted tune keeps
what it finished; running it again with the same ``--out`` and grid re-uses
finished points whose configuration matches.
"""

from __future__ import annotations

import copy
import itertools
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from textkg._version import __version__
from textkg.errors import ConfigError
from textkg.training.config import RunConfig

TUNE_FILE = "tune.json"
BEST_CONFIG = "best_config.json"
#: Sections a grid key may name.
GRID_SECTIONS = ("model", "train", "data")


def parse_grid(specs: list[str]) -> dict[str, list[Any]]:
    """``["train.lr=1e-3,5e-3", ...]`` → ``{"train.lr": [0.001, 0.005], ...}`` (values parsed as JSON when they parse).

    Raises:
        ConfigError: a malformed spec, an unknown section, a repeated key, or no values.
    """
    if not specs:
        raise ConfigError("give at least one --grid SECTION.KEY=V1,V2,...", field="grid")
    grid: dict[str, list[Any]] = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot or not name or not values:
            raise ConfigError(f"expected SECTION.KEY=V1,V2,..., got {spec!r}", field="grid")
        if section not in GRID_SECTIONS:
            raise ConfigError(
                f"unknown section {section!r} in {spec!r}; expected one of {', '.join(GRID_SECTIONS)}", field="grid"
            )
        if key in grid:
            raise ConfigError(f"{key} is given twice", field="grid")
        grid[key] = [_parse_value(v) for v in values.split(",")]
    return grid


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The Cartesian product, in the order the keys and values were given."""
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(grid[k] for k in keys))]


def apply_point(base: RunConfig, point: dict[str, Any]) -> RunConfig:
    """``base`` with the point's values; validated as any config is (ConfigError names the field)."""
    d = copy.deepcopy(base.to_dict())
    for key, value in point.items():
        section, name = key.split(".", 1)
        if d.get(section) is None or name not in d[section]:
            known = ", ".join(sorted(d.get(section) or {}))
            raise ConfigError(f"unknown key {key!r}; {section} takes {known}", field="grid")
        d[section][name] = value
    return RunConfig.from_dict(d, source="--grid")


def point_name(point: dict[str, Any]) -> str:
    """A directory name such as ``train.lr=0.005,model.dim=128``."""
    parts = [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in point.items()]
    return ",".join(parts).replace("/", "_").replace(" ", "")


def _trial(cfg: RunConfig, run_dir: Path, progress: bool) -> dict:
    """Train one point as ``textkg train`` does; rank validation statements only."""
    from textkg.pipeline import job as pipeline

    prep = pipeline.prepare(cfg)
    trainer, _, _ = pipeline.build_trainer(prep, cfg, run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    state = trainer.fit(progress=progress)
    valid = pipeline.evaluate_split(prep, cfg, "valid", max_triples=cfg.train.valid_max_triples).to_dict()
    return {
        "valid": {k: valid[k] for k in ("mrr", "hits@1", "hits@3", "hits@10", "num_triples") if k in valid},
        "epochs": state.epoch,
        "best_epoch": state.best_epoch,
        "seconds": state.seconds,
        "stopped": state.stopped,
    }


def run_tune(
    base: RunConfig,
    grid: dict[str, list[Any]],
    out_dir: str | Path,
    *,
    tune_epochs: int | None = None,
    tune_max_minutes: float | None = None,
    progress: bool = True,
) -> dict:
    """Train every grid point, choose on validation MRR, write ``tune.json`` and ``best_config.json``.

    Returns the ``tune.json`` record.
    """
    if base.privacy.mode in ("full", "confidential"):
        raise ConfigError(
            "tuning reads the training statements in every trial, and choosing among trials spends privacy "
            "(Papernot & Steinke 2022); tune with --privacy public-only or none, then train privately with "
            "the chosen setting",
            field="privacy.mode",
        )
    points = grid_points(grid)
    trial_train = replace(
        base.train,
        epochs=base.train.epochs if tune_epochs is None else tune_epochs,
        max_minutes=base.train.max_minutes if tune_max_minutes is None else tune_max_minutes,
    )
    trial_base = replace(base, train=trial_train)
    configs = [apply_point(trial_base, p) for p in points]  # every point validated before any training
    out_dir = Path(out_dir)
    path = out_dir / TUNE_FILE
    done: dict[str, dict] = {}
    if path.is_file():
        from textkg.pipeline.run_dir import open_record

        stored = open_record(out_dir, TUNE_FILE)  # read as every run file is: bounded, this major version
        try:
            for row in stored.get("rows", []):
                done[row["name"]] = row
        except (KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"cannot re-use a malformed {TUNE_FILE} ({exc})", file=path) from None
    from textkg.training.checkpoint import folder_in_run

    for point in points:  # a link in a re-used tune folder would make rmtree and training act on another folder
        folder_in_run(out_dir, "trials", point_name(point))
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    record: dict[str, Any] = {}
    for i, (point, cfg) in enumerate(zip(points, configs, strict=True)):
        name = point_name(point)
        previous = done.get(name)
        if previous is not None and previous.get("config") == cfg.to_dict():
            rows.append(previous)
        else:
            if progress:
                print(f"tune: point {i + 1}/{len(points)}: {name}", file=sys.stderr)
            trial_dir = out_dir / "trials" / name
            if trial_dir.exists():  # a half-finished trial: start it again from scratch
                import shutil

                shutil.rmtree(trial_dir)
            rows.append({"name": name, "point": point, "config": cfg.to_dict(), **_trial(cfg, trial_dir, progress)})
        record = _record(base, grid, rows, trial_train)
        _write_json(path, record)
    best = record["best"]
    chosen = apply_point(base, best["point"])  # the base's own epochs and time limit
    _write_json(out_dir / BEST_CONFIG, {"textkg_version": __version__, **chosen.to_dict()})
    return record


def _record(base: RunConfig, grid: dict, rows: list[dict], trial_train) -> dict:
    best = max(rows, key=lambda r: (r["valid"]["mrr"], -rows.index(r)))
    return {
        "textkg_version": __version__,
        "procedure": "each grid point trained as `textkg train` trains it; chosen by validation MRR on "
        f"{base.train.valid_max_triples or 'all'} validation statements (seed {base.train.seed}); "
        "test statements never ranked",
        "dataset": base.data.dataset,
        "split": base.data.split,
        "model": base.model_name,
        "grid": grid,
        "trial_epochs": trial_train.epochs,
        "trial_max_minutes": trial_train.max_minutes,
        "rows": rows,
        "best": {"name": best["name"], "point": best["point"], "valid_mrr": best["valid"]["mrr"]},
        "next": f"textkg train --config {BEST_CONFIG} --out RUN  (trains the chosen setting and tests it once)",
    }


def _write_json(path: Path, obj: Any) -> None:
    from textkg.training.checkpoint import atomic_write_json

    atomic_write_json(path, obj)
