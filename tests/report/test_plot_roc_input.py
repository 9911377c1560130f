"""plot_roc on malformed audits: a ROC with false- but no true-positive rates is a clear error."""

import pytest

from textkg.report import plots


def test_roc_with_fpr_but_no_tpr_names_the_audit(tmp_path):
    audit = {"roc_auc": 0.5, "roc": {"fpr": [0.0, 0.5, 1.0]}}
    with pytest.raises(ValueError, match=r"audit 'broken': 'roc' has 'fpr' but no 'tpr'"):
        plots.plot_roc({"broken": audit}, tmp_path / "roc.png")
    assert not (tmp_path / "roc.png").exists()


def test_roc_without_fpr_is_skipped(tmp_path):
    assert plots.plot_roc({"empty": {"roc": {"tpr": [0.0, 1.0]}}}, tmp_path / "roc.png") is None
