"""PNG plots of runs, sweeps and audits (matplotlib, Agg canvas, no pyplot state).

Each ``plot_*`` function takes plain dicts (the contents of ``metrics.json``,
``sweep.json`` rows, ``audit.json``), writes one PNG and returns its path; it
never touches the global pyplot state, so it is safe in scripts, tests and
notebooks alike. :func:`write_run_plots` draws everything a run directory
supports into ``DIR/plots/``.

A run folder may come from anyone (docs/security.md): before drawing, every folder and file name a
command would write is checked with ``lstat`` (a ``plots`` link, or a ``plots/valid_mrr.png`` link, is
refused, exit 2), and each PNG is written to a temporary file renamed into place, so nothing is
written through a link (:func:`textkg.training.checkpoint.folder_in_run`).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

PLOTS_DIR = "plots"
#: every file a run folder's plots may be written as (checked before anything is drawn)
PLOT_FILES = (
    "epsilon.png",
    "valid_mrr.png",
    "audit_roc.png",
    "frontier.png",
    "compare_epsilon.png",
    "compare_valid_mrr.png",
    "compare_audit_roc.png",
)
#: one colour per privacy mode, so that every plot reads the same way
MODE_COLORS = {"none": "black", "full": "tab:red", "confidential": "tab:blue"}


def _figure(title: str, xlabel: str, ylabel: str) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(5.5, 3.8), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _save(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as a PNG to ``path`` atomically (a link at ``path`` is replaced, never written through)."""
    from textkg.training.checkpoint import atomic_write_bytes

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png")
    atomic_write_bytes(path, png.getvalue())
    return path


def _history(metrics: Mapping) -> list[dict]:
    return list(((metrics.get("train") or {}).get("history")) or [])


def _label(name: str, metrics: Mapping) -> str:
    privacy = metrics.get("privacy")
    if not privacy:
        return f"{name} (non-private)"
    eps = privacy.get("epsilon")
    tag = "DP" if privacy.get("guarantee") == "dp" else "simulation"
    return f"{name} ({tag}, ε={eps:.2f})" if isinstance(eps, (int, float)) else f"{name} ({tag})"


def plot_epsilon_vs_step(runs: Mapping[str, Mapping], path: str | Path) -> Path | None:
    """ε spent vs optimisation step, one line per run; ``None`` if no run is private.

    Args:
        runs: ``{label: metrics}`` with ``metrics["train"]["history"]`` records
            holding ``"step"`` and ``"epsilon"``.
        path: the PNG to write.
    """
    fig, ax = _figure("Privacy budget spent", "step", "ε (RDP accountant)")
    drawn = False
    for name, metrics in runs.items():
        points = [(0, 0.0)] + [
            (r["step"], r["epsilon"])
            for r in _history(metrics)
            if r.get("epsilon") is not None and r.get("step") is not None
        ]
        if len(points) < 2:
            continue
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, marker="o", ms=3, label=_label(name, metrics))
        target = (metrics.get("privacy") or {}).get("target_epsilon")
        if target:
            ax.axhline(target, ls=":", color="grey", lw=1)
        drawn = True
    if not drawn:
        return None
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_valid_mrr(runs: Mapping[str, Mapping], path: str | Path) -> Path | None:
    """Validation MRR vs epoch, DP and non-DP runs overlaid; ``None`` if no run validated."""
    fig, ax = _figure("Validation MRR", "epoch", "MRR (filtered)")
    drawn = False
    for name, metrics in runs.items():
        points = [
            (r["epoch"], r["valid_mrr"])
            for r in _history(metrics)
            if r.get("valid_mrr") is not None and r.get("epoch") is not None
        ]
        if not points:
            continue
        xs, ys = zip(*points, strict=True)
        mode = (metrics.get("privacy") or {}).get("mode", "none")
        ax.plot(xs, ys, marker="o", ms=3, label=_label(name, metrics), ls="-" if mode != "none" else "--")
        drawn = True
    if not drawn:
        return None
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_frontier(rows: Iterable[Mapping], path: str | Path, *, metric: str = "mrr") -> Path | None:
    """Privacy–utility frontier: test ``metric`` vs achieved ε, one line per privacy mode.

    Non-private runs (no ε) are drawn as horizontal lines. Runs whose
    guarantee is ``simulation`` (not DP) are drawn hollow and labelled so.

    Args:
        rows: ``sweep.json`` rows with ``mode``, ``epsilon``, ``guarantee`` and ``metric``.
        path: the PNG to write.
        metric: ``mrr`` or ``hits@10``.
    """
    rows = [r for r in rows if r.get(metric) is not None]
    if not rows:
        return None
    fig, ax = _figure("Privacy–utility frontier", "ε (δ fixed)", f"test {metric.upper()}")
    private = [r for r in rows if r.get("epsilon") is not None and r.get("mode") != "none"]
    by_line: dict[tuple[str, str], list] = {}
    for r in private:
        by_line.setdefault((r["mode"], r.get("guarantee") or "dp"), []).append(r)
    for (mode, guarantee), pts in sorted(by_line.items()):
        pts.sort(key=lambda r: r["epsilon"])
        sim = guarantee != "dp"
        ax.plot(
            [r["epsilon"] for r in pts],
            [r[metric] for r in pts],
            marker="o",
            color=MODE_COLORS.get(mode),
            mfc="none" if sim else None,
            ls=":" if sim else "-",
            label=f"{mode}" + (" (simulation, not DP)" if sim else ""),
        )
    for r in rows:
        if r.get("mode") == "none":
            ax.axhline(r[metric], color=MODE_COLORS["none"], ls="--", lw=1, label="non-private")
    eps = [r["epsilon"] for r in private if r["epsilon"] and r["epsilon"] > 0]
    if eps and max(eps) / min(eps) > 20:
        ax.set_xscale("log")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), fontsize=8)
    return _save(fig, path)


def plot_roc(audits: Mapping[str, Mapping], path: str | Path) -> Path | None:
    """Membership-inference ROC curves (log–log, as Carlini et al. 2022 advise), one per audit.

    Args:
        audits: ``{label: audit.json contents}`` (``roc`` with ``fpr``/``tpr`` lists).
        path: the PNG to write.
    """
    fig = Figure(figsize=(9, 3.8), dpi=110)
    FigureCanvasAgg(fig)
    lin, log = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    drawn = False
    for name, audit in audits.items():
        roc = audit.get("roc") or {}
        fpr, tpr = roc.get("fpr"), roc.get("tpr")
        if not fpr:
            continue
        if tpr is None:
            raise ValueError(f"audit {name!r}: 'roc' has 'fpr' but no 'tpr'")
        eps_lb = (audit.get("epsilon_lower_bound") or {}).get("epsilon")
        label = f"{name}: AUC={audit.get('roc_auc', float('nan')):.3f}"
        if eps_lb is not None:
            label += f", ε_lb={eps_lb:.2f}"
        lin.plot(fpr, tpr, label=label)
        floor = 0.5 / max(1, audit.get("num_non_members") or len(fpr))
        log.plot([max(f, floor) for f in fpr], [max(t, floor) for t in tpr], label=name)
        drawn = True
    if not drawn:
        return None
    for ax, scale in ((lin, "linear"), (log, "log")):
        ax.plot([0, 1], [0, 1], ls=":", color="grey", lw=1)
        ax.set_xscale(scale)
        ax.set_yscale(scale)
        ax.set_xlabel("false-positive rate")
        ax.set_ylabel("true-positive rate")
        ax.grid(True, alpha=0.3)
    lin.set_title("Membership inference ROC")
    log.set_title("log–log (low-FPR regime)")
    lin.legend(fontsize=7)
    return _save(fig, path)


def _read_json(path: Path) -> dict | None:
    """A run's (or sweep's) JSON file, or ``None``; a run folder is opened as every command opens one:
    another major version is refused before any file is read (:mod:`textkg.pipeline.run_dir`)."""
    from textkg.pipeline.run_dir import CONFIG, open_record, read_run_json

    if not path.is_file():
        return None
    if (path.parent / CONFIG).is_file():
        open_record(path.parent)
    return read_run_json(path)


def _sweep_run(sweep_dir: Path, name: object) -> Path | None:
    """A sweep row's run folder: a folder inside the sweep, never a path that leaves it."""
    if not isinstance(name, str) or not name or Path(name).name != name or name in (".", ".."):
        return None
    return sweep_dir / name


def write_run_plots(run_dir: str | Path) -> list[Path]:
    """Draw every plot ``run_dir`` supports into ``run_dir/plots/``.

    A training run (``metrics.json``) gets ``epsilon.png`` (private runs) and
    ``valid_mrr.png``; an audited run (``audit.json``) ``audit_roc.png``; a
    sweep directory (``sweep.json``) ``frontier.png``, plus the overlays of
    its runs. Returns the paths written.

    Raises:
        ConfigError: ``run_dir/plots`` or a plot file in it is a symbolic link (or not what it should be).
    """
    from textkg.training.checkpoint import folder_in_run

    run_dir = Path(run_dir)
    out = folder_in_run(run_dir, PLOTS_DIR, files=PLOT_FILES)  # before anything is read or drawn
    written: list[Path | None] = []
    metrics = _read_json(run_dir / "metrics.json")
    if metrics is not None:
        runs = {run_dir.name: metrics}
        written += [plot_epsilon_vs_step(runs, out / "epsilon.png"), plot_valid_mrr(runs, out / "valid_mrr.png")]
    audit = _read_json(run_dir / "audit.json")
    if audit is not None:
        written.append(plot_roc({run_dir.name: audit}, out / "audit_roc.png"))
    sweep = _read_json(run_dir / "sweep.json")
    if sweep is not None:
        rows = sweep.get("rows", [])
        written.append(plot_frontier(rows, out / "frontier.png"))
        points = [_sweep_run(run_dir, r.get("run_dir")) for r in rows if isinstance(r, dict)]
        written += write_comparison_plots([d for d in points if d is not None], out)
    return [p for p in written if p is not None]


def write_comparison_plots(run_dirs: Iterable[str | Path], out_dir: str | Path) -> list[Path]:
    """Overlay several runs: ``compare_epsilon.png``, ``compare_valid_mrr.png``, ``compare_audit_roc.png``.

    ``out_dir`` is the caller's (``--out``) or a run's ``plots`` folder (checked by :func:`write_run_plots`);
    a plot file in it that is a link is refused, never written through.
    """
    from textkg.training.checkpoint import folder_in_run

    folder_in_run(out_dir, files=PLOT_FILES)
    runs, audits = {}, {}
    for d in map(Path, run_dirs):
        m = _read_json(d / "metrics.json")
        if m is not None:
            runs[d.name] = m
        a = _read_json(d / "audit.json")
        if a is not None:
            audits[d.name] = a
    out_dir = Path(out_dir)
    written = [
        plot_epsilon_vs_step(runs, out_dir / "compare_epsilon.png"),
        plot_valid_mrr(runs, out_dir / "compare_valid_mrr.png"),
    ]
    if audits:
        written.append(plot_roc(audits, out_dir / "compare_audit_roc.png"))
    return [p for p in written if p is not None]
