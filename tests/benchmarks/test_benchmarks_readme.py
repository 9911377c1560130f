"""benchmarks/ stays readable and portable (issue 30): every script in the README's index, no machine paths."""

from __future__ import annotations

import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_every_script_has_a_line_in_the_readme_index():
    readme = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([a-z0-9_]+\.py)` \|", readme, flags=re.MULTILINE))
    scripts = {p.name for p in BENCHMARKS.glob("*.py")}
    assert scripts == listed, {"not listed": sorted(scripts - listed), "listed, not there": sorted(listed - scripts)}


def test_every_investigation_has_a_purpose_line():
    readme = (BENCHMARKS / "investigations" / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([a-z0-9_]+\.py)` \| \S", readme, flags=re.MULTILINE))
    scripts = {p.name for p in (BENCHMARKS / "investigations").glob("*.py")}
    assert scripts == listed, {"not listed": sorted(scripts - listed), "listed, not there": sorted(listed - scripts)}


def test_no_machine_specific_paths_in_benchmarks():
    pattern = re.compile(r"/work/|/tmp/|/home/|/Users/|venv")
    found = [
        f"{path.relative_to(BENCHMARKS)}:{i}"
        for path in sorted(BENCHMARKS.rglob("*"))
        if path.is_file() and path.suffix in {".py", ".md", ".json", ".yaml", ".txt", ".tsv"}
        for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, found[:20]
