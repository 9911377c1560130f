"""benchmarks/ stays readable and portable (issue 30): every script in the README's index, no machine paths."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

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


ROOT = BENCHMARKS.parent
#: ``benchmarks/NAME.py`` or ``benchmarks/investigations/NAME.py`` as a path of its own (not ``tests/benchmarks/...``)
SCRIPT = re.compile(r"(?<![\w/.-])benchmarks/((?:investigations/)?[A-Za-z0-9_]+)\.py")
#: how a topic page records a retired script and the commit that holds it (issue 55)
RETIRED = (
    re.compile(r"`benchmarks/(?P<name>[a-z0-9_]+)\.py` \(`(?P<commit>[0-9a-f]{7,40})`\)"),
    re.compile(r"git show (?P<commit>[0-9a-f]{7,40}):benchmarks/(?P<name>[a-z0-9_]+)\.py"),
)


def named_scripts(paths: list[Path]) -> list[tuple[str, str]]:
    """``(file:line, NAME)`` for every benchmark script the files name (``NAME`` in prose is a placeholder)."""
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in SCRIPT.finditer(line):
                if not match[1].endswith("NAME"):
                    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                    found.append((f"{where}:{number}", match[1]))
    return found


def retired_scripts() -> dict[str, set[str]]:
    """``NAME -> {commit}``: the retired scripts the docs record, with the commit where each can be read."""
    retired: dict[str, set[str]] = {}
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for pattern in RETIRED:
            for match in pattern.finditer(text):
                retired.setdefault(match["name"], set()).add(match["commit"])
    return retired


def test_code_and_readme_name_only_benchmark_scripts_that_exist():
    """A comment or docstring in textkg/, the README or a notebook points at a script that is there; a
    retired one's conclusion is on its topic page (docs/results/), which the comment names instead."""
    paths = [ROOT / "README.md", *sorted((ROOT / "textkg").rglob("*.py")), *sorted((ROOT / "notebooks").glob("*.py"))]
    missing = [(where, name) for where, name in named_scripts(paths) if not (BENCHMARKS / f"{name}.py").is_file()]
    assert not missing, missing


def test_docs_name_a_benchmark_script_that_exists_or_is_recorded_as_retired():
    """The topic pages keep the commands of retired scripts in their logs; each such script is recorded with
    the commit that holds it (``- `benchmarks/NAME.py` (`COMMIT`)`` or ``git show COMMIT:benchmarks/NAME.py``)."""
    retired = retired_scripts()
    named = named_scripts(sorted((ROOT / "docs").rglob("*.md")))
    missing = [(w, n) for w, n in named if not (BENCHMARKS / f"{n}.py").is_file() and n not in retired]
    assert not missing, missing
    assert not {n for n in retired if (BENCHMARKS / f"{n}.py").is_file()}, "recorded as retired, but still here"


def test_each_retired_script_is_at_its_recorded_commit():
    if not (ROOT / ".git").exists():
        pytest.skip("no git history here")
    for name, commits in sorted(retired_scripts().items()):
        for commit in sorted(commits):
            proc = subprocess.run(
                ["git", "cat-file", "-e", f"{commit}:benchmarks/{name}.py"], cwd=ROOT, capture_output=True
            )
            if (
                proc.returncode != 0
                and subprocess.run(
                    ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True
                ).returncode
                != 0
            ):
                pytest.skip(f"commit {commit} is not in this clone (shallow?)")
            assert proc.returncode == 0, f"benchmarks/{name}.py is not at {commit}"


def test_a_script_path_is_read_as_a_path_of_its_own(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        "# ``benchmarks/rerank_forms.py``; tests/benchmarks/test_x.py; benchmarks/NAME.py; "
        "(benchmarks/investigations/wordnet_proxy.py)\n",
        encoding="utf-8",
    )
    assert [name for _, name in named_scripts([module])] == ["rerank_forms", "investigations/wordnet_proxy"]
