"""docs/privacy.md opens with the data officer's summary, and what it states agrees with the code
(issue 41: the bundle was `best_model.safetensors` on one page and `best_model.pt` on another, and no
page said that a patient with k statements is protected only at k·ε)."""

from __future__ import annotations

import math
import re
from pathlib import Path

from textkg.release import WHITELIST

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "privacy.md"


def _summary() -> str:
    text = PAGE.read_text(encoding="utf-8")
    return text.split("## In five minutes", 1)[1].split("\n## ", 1)[0]


def test_the_page_opens_with_the_summary():
    headings = [line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("## ")]
    assert headings[0].startswith("## In five minutes")


def test_the_summary_names_every_file_a_bundle_may_hold_and_no_other():
    summary = _summary()
    bundle = summary.split("**What a release bundle contains**", 1)[1].split("\n- **", 1)[0]
    named = set(re.findall(r"`([\w.*/]+\.(?:safetensors|json|md|pt))`", bundle))
    never = {"checkpoint.pt", "audit_split.json", "private_metrics.json"}
    assert named - never == set(WHITELIST)
    assert never <= named  # and it says what never leaves


def test_the_group_privacy_example_follows_the_formula():
    """Dwork & Roth 2014, §2.3: (ε, δ)-DP gives (kε, k·e^{(k−1)ε}·δ) for a group of k."""
    summary = _summary()
    assert "k·e^{(k−1)ε}·δ" in summary
    eps, delta, k = 1.0, 1e-5, 5
    assert f"ε = {k * eps:g}" in summary
    assert f"{k * math.exp((k - 1) * eps) * delta:.1e}".replace("e-03", "·10⁻³") in summary.replace("≈ ", "")
    assert f"(≈ {10 * math.exp(9 * eps) * delta:.2f})" in summary  # k = 10: delta ~ 0.81, no protection


def test_the_readme_privacy_paragraph_states_group_privacy():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Privacy: what is and is not claimed", 1)[1].split("\n## ", 1)[0]
    assert "group privacy" in section and "k·ε" in section
