"""docs/federated.md states one truth (issue 53, item 6): its opening callout said separate holder
files were unsupported and that FedAvg used each holder's exact count, while the code (and the page's
later sections) support ``--partition files`` and weigh every holder by the declared N̄ under
record-level DP with a declared size."""

from __future__ import annotations

from pathlib import Path

from textkg.federated.partition import FILES, SCHEMES

PAGE = Path(__file__).resolve().parents[2] / "docs" / "federated.md"


def _callout() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("> **What holds today")
    lines = []
    for line in text[start:].splitlines():
        if not line.startswith(">"):
            break
        lines.append(line.lstrip("> "))
    return " ".join(" ".join(lines).split())


def test_the_callout_says_what_the_code_does():
    callout = _callout()
    assert FILES in SCHEMES and f"`--partition {FILES}`" in callout
    assert "not supported yet" not in callout and "#holders-that-keep-their-own-files" in callout
    assert "exact count" in callout and "FedAvg weight is N̄" in callout and "simulation" in callout
    assert "## Holders that keep their own files" in PAGE.read_text(encoding="utf-8").replace("### ", "## ")
