"""Every published private command yields the label its result claims (issue 41).

Since a run needs a PUBLIC declared size of the private set for a `dp` label (`--private-size N` or
`--sample-rate q`; the exact count is private under add/remove adjacency), a command without one gets
`simulation`. The published commands of docs/results/privacy_utility.md and docs/audit.md lacked it, so
a reader re-running them got another label than the page showed. This test reads every command in
README.md and docs/ (```bash blocks, backslash continuations joined, and inline `textkg ...` spans)
that trains privately (`--privacy full|confidential`, or `--privacy-modes` naming one) and requires the
declared size, unless the command itself asks for `simulation` (`--reproducible-noise`,
`--mechanism simulation`) or its line says `# simulation`.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^\s*(```|~~~)\s*(\w*)")
_INLINE = re.compile(r"`(textkg [^`]*)`")
_PRIVATE = re.compile(r"--privacy[ =](full|confidential)\b|--privacy-modes[ =]\S*\b(full|confidential)\b")
_DECLARED = re.compile(r"--private-size\b|--sample-rate\b")
_ASKS_FOR_SIMULATION = re.compile(r"--reproducible-noise\b|--mechanism[ =]simulation\b|#.*\bsimulation\b")


def published_pages() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True)
        names = out.stdout.split()
    except (OSError, subprocess.CalledProcessError):
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.md")]
    return sorted(ROOT / n for n in names if n == "README.md" or n.startswith("docs/"))


def commands(text: str) -> list[tuple[int, str]]:
    """``(line, command)`` of every ``textkg`` command on a Markdown page."""
    lines = text.splitlines()
    found: list[tuple[int, str]] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        match = _FENCE.match(line)
        if match:
            fence = None if fence is not None else match.group(2)
        elif fence is not None:
            if fence in ("bash", "sh", "shell", "console", ""):
                start, command = i, line
                while command.rstrip().endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command.rstrip()[:-1] + " " + lines[i].strip()
                if "textkg " in command:
                    found.append((start + 1, command.strip()))
        else:
            found += [(i + 1, m.group(1)) for m in _INLINE.finditer(line)]
        i += 1
    return found


def missing_declared_size() -> list[str]:
    bad = []
    for page in published_pages():
        for line, command in commands(page.read_text(encoding="utf-8")):
            if _PRIVATE.search(command) and not _DECLARED.search(command) and not _ASKS_FOR_SIMULATION.search(command):
                bad.append(f"{page.relative_to(ROOT)}:{line}: {command[:160]}")
    return bad


def test_every_published_private_command_declares_the_private_size():
    bad = missing_declared_size()
    assert not bad, "private commands that now get `simulation` (add --private-size N or --sample-rate q):\n" + (
        "\n".join(bad)
    )


def test_the_reader_finds_the_commands_it_checks():
    """The scanner sees continuation lines and inline spans (else the test above proves nothing)."""
    text = (
        "```bash\ntextkg sweep --dataset hpo-small \\\n  --privacy-modes none,full --out runs/s\n```\n"
        "Or `textkg train --privacy confidential --out r`; `textkg train --privacy full --private-size 9`.\n"
        "```bash\ntextkg train --privacy full --reproducible-noise 3\n```\n"
    )
    found = commands(text)
    assert [line for line, _ in found] == [2, 5, 5, 7]
    flagged = [c for _, c in found if _PRIVATE.search(c) and not _DECLARED.search(c)]
    flagged = [c for c in flagged if not _ASKS_FOR_SIMULATION.search(c)]
    assert flagged == [found[0][1], found[1][1]]
