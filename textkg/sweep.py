"""Privacy–utility sweeps: one run per (privacy mode, σ or target ε) point.

Every point is the base :class:`~textkg.training.config.RunConfig` with its
``privacy`` block replaced (``dataclasses.replace``), trained by
:func:`textkg.pipeline.job.run` into ``out_dir/<point name>/``. The sweep
writes ``out_dir/sweep.json`` (one row per run, rewritten after every run so
that an interrupted sweep keeps what it finished) and ``out_dir/frontier.png``.
Re-running a sweep into the same directory reuses finished runs whose
``config.json`` matches and resumes unfinished ones from their checkpoint.

Example::

    from textkg.sweep import make_grid, run_sweep
    grid = make_grid(["none", "full"], noise_multipliers=[0.5, 1, 2])
    rows = run_sweep(base_cfg, grid, "runs/sweep")
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from textkg.errors import ConfigError
from textkg.pipeline.run_files import stored_config
from textkg.training.config import PRIVACY_MODES, RunConfig
from textkg.training.features import AUTOENCODER_FILE

SWEEP_FILE = "sweep.json"
FRONTIER_FILE = "frontier.png"


@dataclass(frozen=True)
class SweepPoint:
    """One point of the grid.

    Attributes:
        mode: privacy mode (``none``, ``full``, ``confidential``).
        noise_multiplier: σ (private modes; exclusive with ``target_epsilon``).
        target_epsilon: ε budget, σ calibrated to it (private modes).
    """

    mode: str
    noise_multiplier: float | None = None
    target_epsilon: float | None = None

    @property
    def name(self) -> str:
        """Sub-directory name, e.g. ``none``, ``full-sigma1``, ``confidential-eps4``."""
        if self.noise_multiplier is not None:
            return f"{self.mode}-sigma{self.noise_multiplier:g}"
        if self.target_epsilon is not None:
            return f"{self.mode}-eps{self.target_epsilon:g}"
        return self.mode


def make_grid(
    modes: Iterable[str], *, noise_multipliers: Iterable[float] = (), target_epsilons: Iterable[float] = ()
) -> list[SweepPoint]:
    """The grid: ``none`` and ``public-only`` once; each private mode once per σ and once per target ε.

    Raises:
        ConfigError: an unknown mode, or a private mode with neither σ nor ε values.
    """
    modes = list(dict.fromkeys(modes))
    sigmas, targets = list(noise_multipliers), list(target_epsilons)
    for mode in modes:
        if mode not in PRIVACY_MODES:
            raise ConfigError(f"{mode!r} is not one of {', '.join(PRIVACY_MODES)}", field="privacy_modes")
    if not modes:
        raise ConfigError("give at least one privacy mode", field="privacy_modes")
    if any(m not in ("none", "public-only") for m in modes) and not sigmas and not targets:
        raise ConfigError("private modes need --noise-multipliers or --target-epsilons", field="noise_multipliers")
    grid: list[SweepPoint] = []
    for mode in modes:
        if mode in ("none", "public-only"):
            grid.append(SweepPoint(mode))
            continue
        grid += [SweepPoint(mode, noise_multiplier=float(s)) for s in sigmas]
        grid += [SweepPoint(mode, target_epsilon=float(e)) for e in targets]
    return grid


def point_config(base: RunConfig, point: SweepPoint) -> RunConfig:
    """``base`` with the point's privacy settings (validated by ``PrivacyConfig``).

    The named confidential relations / fraction of ``base`` are kept in every
    mode, so that audits of all points draw candidates from the same pool.
    """
    privacy = dataclasses.replace(
        base.privacy, mode=point.mode, noise_multiplier=point.noise_multiplier, target_epsilon=point.target_epsilon
    )
    if point.mode not in ("full", "confidential"):  # no sampling, so no declared size or delta
        privacy = dataclasses.replace(privacy, private_size=None, sample_rate=None, delta=None)
    return dataclasses.replace(base, privacy=privacy)


def _row(point: SweepPoint, cfg: RunConfig, metrics: dict, run_dir: Path) -> dict:
    privacy = metrics.get("privacy") or {}
    test = metrics.get("test") or {}
    train = metrics.get("train") or {}
    return {
        "name": point.name,
        "run_dir": run_dir.name,
        "mode": point.mode,
        "mechanism": cfg.privacy.mechanism if point.mode != "none" else None,
        "noise_multiplier": privacy.get("noise_multiplier", point.noise_multiplier),
        "target_epsilon": point.target_epsilon,
        "epsilon": privacy.get("epsilon"),
        "delta": privacy.get("delta"),
        "guarantee": privacy.get("guarantee"),
        "mrr": test.get("mrr"),
        "hits@10": test.get("hits@10"),
        "seconds": train.get("seconds"),
        "steps": train.get("steps"),
        "stopped": train.get("stopped"),
    }


def _same_config(run_dir: Path, cfg: RunConfig) -> bool:
    from textkg.pipeline.run_dir import CONFIG, open_record

    if not (run_dir / CONFIG).is_file():
        return False
    stored = open_record(run_dir)  # a point made by another major version is refused, not re-used
    stored.pop("textkg_version", None)
    config = cfg.to_dict()
    ae_file = AUTOENCODER_FILE if (config.get("model") or {}).get("text_module") == "lstm-ae" else None
    recorded, _ = stored_config(config, autoencoder_file=ae_file)  # char LMs: the run's own copies
    return json.loads(json.dumps(recorded)) == stored


def _run_point(cfg: RunConfig, run_dir: Path, *, progress: bool) -> dict:
    """Train one point, reusing a finished run or resuming an interrupted one."""
    from textkg.pipeline.job import run

    if run_dir.exists() and any(run_dir.iterdir()):
        if not _same_config(run_dir, cfg):
            raise ConfigError("holds a run with a different configuration; choose another --out", file=run_dir)
        from textkg.pipeline.run_dir import METRICS, read_run_json

        if (run_dir / METRICS).is_file():
            return read_run_json(run_dir / METRICS)
        if (run_dir / "checkpoint.pt").is_file():
            return run(cfg, run_dir, resume=True, progress=progress)
        raise ConfigError("holds an unfinished run without a checkpoint; remove it", file=run_dir)
    return run(cfg, run_dir, progress=progress)


def run_sweep(
    base_cfg: RunConfig,
    grid: Sequence[SweepPoint],
    out_dir: str | Path,
    *,
    audit_attack: str | None = None,
    progress: bool = False,
) -> list[dict]:
    """Train every grid point; write ``sweep.json`` and ``frontier.png``.

    Args:
        base_cfg: the configuration shared by all points.
        grid: points (:func:`make_grid`).
        out_dir: sweep directory; one sub-directory per point.
        audit_attack: if given (and ``base_cfg.train.audit_candidates > 0``),
            audit every run with this attack (``audit.json`` in the run
            directory) and add ``audit_auc`` / ``audit_epsilon_lb`` to its row.
        progress: show progress bars.

    Returns:
        The rows of ``sweep.json`` (see :func:`_row`).
    """
    from textkg.report import require_plots
    from textkg.training.checkpoint import atomic_write_json

    require_plots("a sweep (frontier.png)")  # before any training
    from textkg.report.plots import plot_frontier

    out_dir = Path(out_dir)
    names = [p.name for p in grid]
    if len(set(names)) != len(names):
        raise ConfigError("the grid repeats a point", field="grid")
    if audit_attack is not None:
        from textkg.audit.attacks import get_attack

        get_attack(audit_attack)
        if not base_cfg.train.audit_candidates:
            raise ConfigError("auditing a sweep needs --audit-candidates N", field="train.audit_candidates")
    configs = [point_config(base_cfg, p) for p in grid]  # validate every point before training any
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for point, cfg in zip(grid, configs, strict=True):
        run_dir = out_dir / point.name
        metrics = _run_point(cfg, run_dir, progress=progress)
        row = _row(point, cfg, metrics, run_dir)
        if audit_attack is not None:
            row.update(_audit_point(run_dir, audit_attack))
        rows.append(row)
        atomic_write_json(out_dir / SWEEP_FILE, {"base_config": base_cfg.to_dict(), "rows": rows})
    plot_frontier(rows, out_dir / FRONTIER_FILE)
    return rows


def _audit_point(run_dir: Path, attack: str) -> dict:
    from textkg.audit import AUDIT_RESULT, run_audit, write_audit

    result = run_audit(run_dir, attack=attack)
    write_audit(result, run_dir / AUDIT_RESULT)
    return {
        "audit_attack": attack,
        "audit_auc": result.roc_auc,
        "audit_epsilon_lb": result.epsilon_lower_bound["epsilon"],
    }
