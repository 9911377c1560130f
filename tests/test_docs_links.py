"""Every relative link in the repository's Markdown points at a file that exists, and every
``#anchor`` at a heading of that file (issue 30: docs/benchmarks.md became an index of topic
pages, and a link that pointed into a moved section must follow it).

Anchors follow GitHub's rules for heading ids: the heading's rendered text, lower-cased, with
every character that is not a letter, a digit, a space, ``-`` or ``_`` dropped, spaces turned
into ``-``, and ``-1``, ``-2``, ... appended to repeats within one file. CHANGELOG.md is a
historic log (it names sections as they were on the day) and is not checked.
"""

from __future__ import annotations

import re
import subprocess
import unicodedata
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXCLUDED = {"CHANGELOG.md"}

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]"  # [text], one level of nested brackets allowed
    r"\(\s*<?([^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*)>?"  # (target, balanced parentheses allowed
    r"(?:\s+\"[^\"]*\")?\s*\)"  # "optional title")
)
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


def markdown_files() -> list[Path]:
    """The tracked ``*.md`` files (the work tree's when git is not there), CHANGELOG.md left out."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "*.md"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        files = [ROOT / name for name in out]
    except (OSError, subprocess.CalledProcessError):
        files = [p for p in ROOT.rglob("*.md") if not any(part.startswith(".") for part in p.parts)]
    return sorted(p for p in files if p.is_file() and p.relative_to(ROOT).as_posix() not in EXCLUDED)


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def heading_text(raw: str) -> str:
    """A heading's rendered text: code spans kept as text, link targets, emphasis and HTML dropped."""
    text = _INLINE_CODE.sub(lambda m: m.group(2).strip(), raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"(\*+)(\S.*?)\1", r"\2", text)
    return text


def slug(text: str) -> str:
    """GitHub's id for a heading whose rendered text is ``text`` (before the repeat suffix)."""
    kept = [
        c
        for c in text.strip().lower()
        if c in " -_" or c.isalnum() or unicodedata.category(c).startswith(("L", "M", "N"))
    ]
    return "".join(kept).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every heading id of a Markdown file (repeats numbered as GitHub numbers them), plus HTML anchors."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        found.update(_HTML_ANCHOR.findall(line))
        m = _HEADING.match(line)
        if not m:
            continue
        base = slug(heading_text(m.group(2)))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return frozenset(found)


def links(path: Path) -> list[tuple[int, str]]:
    """``(line, target)`` of every link in prose (inline and reference-style), code spans left out."""
    out = []
    for number, line in _prose_lines(path.read_text(encoding="utf-8")):
        prose = _INLINE_CODE.sub("", line)
        out.extend((number, m.group(1)) for m in _LINK.finditer(prose))
        ref = _REFERENCE.match(prose)
        if ref:
            out.append((number, ref.group(1)))
    return out


def broken_links(path: Path) -> list[str]:
    """What is wrong with ``path``'s relative links, one line each (empty when nothing is)."""
    problems = []
    for number, target in links(path):
        if not target or _EXTERNAL.match(target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        dest = path if not file_part else (path.parent / unquote(file_part)).resolve()
        where = f"{path.relative_to(ROOT)}:{number}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and unquote(anchor) not in anchors(dest):
            problems.append(f"{where}: no heading with that anchor in {dest.relative_to(ROOT)}")
    return problems


def test_there_are_markdown_files_to_check():
    names = {p.relative_to(ROOT).as_posix() for p in markdown_files()}
    assert {"README.md", "docs/benchmarks.md", "benchmarks/README.md"} <= names
    assert "CHANGELOG.md" not in names


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(path: Path):
    assert broken_links(path) == []


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("## 1. The README's main command (`hpo`, inductive, `fused-transe`, 3 epochs)",
         "1-the-readmes-main-command-hpo-inductive-fused-transe-3-epochs"),
        ("## Privacy–utility on inductive FB15k-237 (2026-11-25)", "privacyutility-on-inductive-fb15k-237-2026-11-25"),
        ("## Top-layer fine-tuning (`text_module: top-layers`, issue 15, 2026-11-25)",
         "top-layer-fine-tuning-text_module-top-layers-issue-15-2026-11-25"),
        ("### Statement level on `hpo-small` (each party DP-SGD, ε per party)",
         "statement-level-on-hpo-small-each-party-dp-sgd-ε-per-party"),
        ("## See [the index](../benchmarks.md) **first**", "see-the-index-first"),
    ],
)  # fmt: skip
def test_slug_follows_github(heading: str, anchor: str):
    m = _HEADING.match(heading)
    assert m is not None
    assert slug(heading_text(m.group(2))) == anchor


def test_repeated_headings_are_numbered(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A\n\n## Verdict\n\n```bash\n# Verdict\n```\n\n## Verdict\n", encoding="utf-8")
    assert anchors(page) == {"a", "verdict", "verdict-1"}


def test_a_broken_link_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "other.md").write_text("# Other page\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#other-page) [self](#page) [gone](missing.md) [moved](other.md#old)\n"
        "`[code](not-a-link.md)` [web](https://example.org/x.md)\n\n```\n[fenced](nowhere.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "page.md:3: missing.md: no such file",
        "page.md:3: other.md#old: no heading with that anchor in other.md",
    ]
