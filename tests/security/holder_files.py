"""A federation whose holders each keep their statements in their own file (``--partition files``).

The public side (vocabulary, texts, 60 shared training statements, validation and test) is a copy of
tests/fixtures/tiny_blp; the other 140 training statements go to two holder files, 70 each, and each
holder file also holds one statement with a marker entity of its own (``/e/marker-k``), which no public
file's statement names (its name and text are public, as every entity's are).
"""

from __future__ import annotations

import shutil
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
SHARED_LINES = 60
#: the settings every test here federates with (``textkg federate`` flags, without --dataset / --out)
FLAGS = ("--split", "transductive", "--description", "short", "--model", "transe", "--dim", "8",
         "--batch-size", "16", "--partition", "files", "--clients", "2", "--rounds", "1",
         "--valid-max-triples", "10", "--no-progress")  # fmt: skip
PRIVATE = ("--privacy", "full", "--noise-multiplier", "1.0", "--max-grad-norm", "1.0", "--private-size", "64")


def marker_statement(k: int) -> str:
    return f"/e/marker-{k}\t/r/likes\t/e/0{k}"


def make_holder_files(root: Path, *, extra: str | None = None) -> tuple[Path, list[Path]]:
    """``(public dataset directory, [holder-0 file, holder-1 file])`` under ``root``; ``extra``: one more
    statement in holder 0's file (its neighbouring dataset)."""
    public = root / "public"
    shutil.copytree(FIXTURE, public)
    lines = (FIXTURE / "train.tsv").read_text().splitlines()
    (public / "train.tsv").write_text("\n".join(lines[:SHARED_LINES]) + "\n")
    for name in ("entity2text.txt", "entity2textlong.txt"):
        with open(public / name, "a", encoding="utf-8") as fh:
            fh.writelines(f"/e/marker-{k}\tmarker entity {k}\n" for k in range(2))
    holders = []
    rest = lines[SHARED_LINES:]
    half = len(rest) // 2
    for k, own in enumerate((rest[:half], rest[half:])):
        folder = root / f"holder-{k}"
        folder.mkdir()
        path = folder / "statements.tsv"
        own = [*own, marker_statement(k)] + ([extra.rstrip("\n")] if extra and k == 0 else [])
        path.write_text("\n".join(own) + "\n")
        holders.append(path)
    return public, holders
