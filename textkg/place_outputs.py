"""Where ``textkg place`` writes its suggestions: a TSV, a ROBOT template and an OBO fragment.

* TSV: one row per (term, suggestion), the columns of :data:`textkg.place.COLUMNS`.
* ROBOT template (``robot template --template FILE``): a header row, then
  ROBOT's template row (``ID``, ``LABEL``, ``A IAO:0000115``, ``SC %`` with the
  evidence as an ``rdfs:comment`` annotation of that ``SubClassOf`` axiom),
  then one row per suggestion; the ``score``, ``rank`` and ``method`` columns
  have no template string, so ROBOT ignores them and a curator can sort on them.
  Rows of one term give one class with several ``SubClassOf`` axioms.
* OBO fragment: a ``[Term]`` stanza per term with suggestions, its ``name``,
  ``def`` and ``synonym`` lines and one ``is_a`` line per suggestion whose
  trailing ``{comment="..."}`` qualifier carries the evidence (rank, score,
  method, the nearest existing terms), ready to review and paste.

All files are written to temporary files in their folders and renamed only
when every one is complete, so a failed run leaves none half-written.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from textkg.errors import ConfigError

#: ROBOT template: header row and template row, column by column
ROBOT_COLUMNS = (
    ("ID", "ID"),
    ("label", "LABEL"),
    ("definition", "A IAO:0000115"),
    ("parent", "SC %"),
    ("evidence", ">A rdfs:comment"),
    ("parent name", ""),
    ("rank", ""),
    ("score", ""),
    ("method", ""),
)


def _clean(value) -> str:
    return str(value).replace("\t", " ").replace("\n", " ")


def render_tsv(rows: Sequence[Mapping], columns: Sequence[str]) -> str:
    """The TSV text of ``rows`` with a header line."""
    lines = ["\t".join(columns)] + ["\t".join(_clean(row[c]) for c in columns) for row in rows]
    return "\n".join(lines) + "\n"


def evidence(row: Mapping) -> str:
    """One line of evidence for a suggestion: rank, score, method and the nearest existing terms."""
    near = f"; nearest terms: {row['nearest_terms']}" if row.get("nearest_terms") else ""
    note = f"; {row['note']}" if row.get("note") else ""
    return f"textkg place: rank {row['rank']}, score {row['score']:.4g} ({row['method']}){near}{note}"


def render_robot(rows: Sequence[Mapping], definitions: Mapping[str, str]) -> str:
    """A ROBOT template (see the module docstring); ``definitions``: definition per new term id."""
    header = [name for name, _ in ROBOT_COLUMNS]
    template = [code for _, code in ROBOT_COLUMNS]
    lines = ["\t".join(header), "\t".join(template)]
    for row in rows:
        values = (
            row["term"],
            row["term_name"],
            definitions.get(row["term"], ""),
            row["parent"],
            evidence(row),
            row["parent_name"],
            row["rank"],
            row["score"],
            row["method"],
        )
        lines.append("\t".join(_clean(v) for v in values))
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    """An OBO quoted string's content (backslash and double quote escaped, one line)."""
    return " ".join(text.split()).replace("\\", "\\\\").replace('"', '\\"')


def render_obo(rows: Sequence[Mapping], terms: Sequence, *, remark: str) -> str:
    """An OBO 1.4 fragment (see the module docstring); ``terms``: the placed
    :class:`textkg.place.NewTerm` objects, in the order to write them."""
    by_term: dict[str, list[Mapping]] = {}
    for row in rows:
        by_term.setdefault(row["term"], []).append(row)
    lines = ["format-version: 1.4", f'remark: "{_quote(remark)}"', ""]
    for term in terms:
        suggestions = by_term.get(term.id)
        if not suggestions:
            continue
        lines += ["[Term]", f"id: {term.id}", f"name: {' '.join(term.name.split())}"]
        if term.definition:
            lines.append(f'def: "{_quote(term.definition)}" []')
        lines += [f'synonym: "{_quote(s)}" RELATED []' for s in term.synonyms if s]
        for row in suggestions:
            name = " ".join(str(row["parent_name"]).split())
            lines.append(f'is_a: {row["parent"]} {{comment="{_quote(evidence(row))}"}} ! {name}')
        lines.append("")
    return "\n".join(lines)


def check_output_path(out: str | Path, field: str) -> Path:
    """``out`` as a path whose folder exists and that is not a folder itself."""
    out = Path(out)
    if out.is_dir():
        raise ConfigError("is a directory; give a file name", file=out, field=field)
    if not out.parent.is_dir():
        raise ConfigError("the output's folder does not exist", file=out.parent, field=field)
    return out


def write_all(texts: Mapping[Path, str]) -> None:
    """Write every file, renaming them into place only when all are written."""
    temps: list[tuple[str, Path]] = []
    try:
        for out, text in texts.items():
            fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
            temps.append((tmp, out))
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        for tmp, out in temps:
            os.replace(tmp, out)
    except BaseException:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        raise
