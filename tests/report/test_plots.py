"""Plots write non-empty PNGs from synthetic metrics, sweep rows and audits."""

import json

import pytest

from textkg.report import plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _metrics(private: bool, epochs: int = 3) -> dict:
    history = []
    for e in range(1, epochs + 1):
        rec = {"epoch": e, "step": 10 * e, "seconds": 1.0 * e, "public_loss": 1.0 / e, "valid_mrr": 0.1 * e}
        if private:
            rec["epsilon"] = 0.5 * e
        history.append(rec)
    privacy = (
        {"guarantee": "dp", "epsilon": 0.5 * epochs, "delta": 1e-5, "mode": "full", "target_epsilon": 2.0}
        if private
        else None
    )
    return {"train": {"history": history, "epochs": epochs}, "privacy": privacy, "test": {"mrr": 0.3, "hits@10": 0.5}}


def _audit() -> dict:
    return {
        "roc_auc": 0.7,
        "num_non_members": 4,
        "epsilon_lower_bound": {"epsilon": 0.3},
        "roc": {"fpr": [0, 0.25, 0.5, 1.0], "tpr": [0, 0.5, 0.75, 1.0]},
    }


def _rows() -> list[dict]:
    return [
        {"mode": "none", "epsilon": None, "mrr": 0.4, "hits@10": 0.6, "guarantee": None},
        {"mode": "full", "epsilon": 1.0, "mrr": 0.1, "hits@10": 0.2, "guarantee": "dp"},
        {"mode": "full", "epsilon": 8.0, "mrr": 0.2, "hits@10": 0.3, "guarantee": "dp"},
        {"mode": "confidential", "epsilon": 1.0, "mrr": 0.3, "hits@10": 0.4, "guarantee": "dp"},
        {"mode": "confidential", "epsilon": 100.0, "mrr": 0.35, "hits@10": 0.5, "guarantee": "simulation"},
    ]


def _is_png(path) -> bool:
    data = path.read_bytes()
    return len(data) > 1000 and data.startswith(PNG_MAGIC)


def test_epsilon_vs_step(tmp_path):
    out = plots.plot_epsilon_vs_step({"dp": _metrics(True), "plain": _metrics(False)}, tmp_path / "eps.png")
    assert _is_png(out)


def test_epsilon_plot_skipped_without_private_run(tmp_path):
    assert plots.plot_epsilon_vs_step({"plain": _metrics(False)}, tmp_path / "eps.png") is None
    assert not (tmp_path / "eps.png").exists()


def test_valid_mrr_overlay(tmp_path):
    out = plots.plot_valid_mrr({"dp": _metrics(True), "plain": _metrics(False, 5)}, tmp_path / "a" / "mrr.png")
    assert _is_png(out)


@pytest.mark.parametrize("metric", ["mrr", "hits@10"])
def test_frontier(tmp_path, metric):
    assert _is_png(plots.plot_frontier(_rows(), tmp_path / "f.png", metric=metric))


def test_frontier_empty_is_none(tmp_path):
    assert plots.plot_frontier([], tmp_path / "f.png") is None


def test_roc(tmp_path):
    assert _is_png(plots.plot_roc({"run": _audit(), "other": _audit()}, tmp_path / "roc.png"))


def test_write_run_plots_and_comparison(tmp_path):
    run = tmp_path / "full-sigma1"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps(_metrics(True)))
    (run / "audit.json").write_text(json.dumps(_audit()))
    written = plots.write_run_plots(run)
    assert {p.name for p in written} == {"epsilon.png", "valid_mrr.png", "audit_roc.png"}
    assert all(p.parent == run / "plots" and _is_png(p) for p in written)

    plain = tmp_path / "none"
    plain.mkdir()
    (plain / "metrics.json").write_text(json.dumps(_metrics(False)))
    rows = _rows()[:2]
    rows[0]["run_dir"], rows[1]["run_dir"] = "none", "full-sigma1"
    (tmp_path / "sweep.json").write_text(json.dumps({"rows": rows}))
    names = {p.name for p in plots.write_run_plots(tmp_path)}
    assert {"frontier.png", "compare_epsilon.png", "compare_valid_mrr.png", "compare_audit_roc.png"} <= names


def test_plot_cli(tmp_path, capsys):
    from textkg.cli.main import main

    for name, private in (("dp", True), ("plain", False)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps(_metrics(private)))
    assert main(["plot", str(tmp_path / "dp"), str(tmp_path / "plain"), "--out", str(tmp_path / "cmp")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["plots"]["comparison"]) == 2
    assert (tmp_path / "dp" / "plots" / "epsilon.png").is_file()
    assert main(["plot", str(tmp_path / "missing")]) == 2
    assert "error:" in capsys.readouterr().err
