"""Where ``textkg place`` writes its suggestions: a TSV, a ROBOT template and an OBO fragment.

* TSV: one row per (term, suggestion), the columns of :data:`textkg.place.COLUMNS`; the evidence
  (the nearest existing terms) is on each term's first row only.
* ROBOT template (``robot template --template FILE``; grammar: https://robot.obolibrary.org/template):
  a header row, then ROBOT's template-strings row (:data:`ROBOT_COLUMNS`), then ONE row per term:
  ``ID``, ``LABEL``, the definition (``A IAO:0000115``) with its xrefs as annotations of it
  (``>A oboInOwl:hasDbXref SPLIT=|``), and ``SC %`` asserting only the chosen parent (the first
  suggestion). That axiom is annotated (``>A rdfs:comment SPLIT=|``) with the evidence, written
  once, and each other candidate parent as a comment, so a curator sees them without their being
  asserted. The ``parent name``, ``share``, ``score`` and ``method`` columns have an empty template
  string, so ROBOT ignores them and a curator can sort on them.
* OBO fragment (OBO 1.4): a ``[Term]`` stanza per term with suggestions: ``name``, ``def`` with its
  xrefs, ``synonym`` lines with their own scopes (``EXACT`` stays ``EXACT``) and xrefs, ``xref``
  lines, ONE ``is_a`` (the chosen parent) whose trailing ``{comment="..."}`` qualifier carries the
  evidence, and the other candidates in a ``comment:`` line. Quoted strings escape ``\\`` and ``"``;
  unquoted values (``remark:``, ``comment:``) escape ``\\``, ``!``, ``{`` and ``}``.

All files are written to temporary files in their folders and renamed only when every one is
complete, so a failed run leaves none half-written; they follow the umask (as ``open()`` would).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from textkg.errors import ConfigError
from textkg.training.checkpoint import file_mode

#: ROBOT template: header row and template-strings row, column by column
ROBOT_COLUMNS = (
    ("ID", "ID"),
    ("label", "LABEL"),
    ("definition", "A IAO:0000115"),
    ("definition xrefs", ">A oboInOwl:hasDbXref SPLIT=|"),
    ("parent", "SC %"),
    ("evidence", ">A rdfs:comment SPLIT=|"),
    ("parent name", ""),
    ("share", ""),
    ("score", ""),
    ("method", ""),
)
#: what separates several values in one ROBOT cell (the ``SPLIT=|`` of :data:`ROBOT_COLUMNS`)
ROBOT_SPLIT = "|"


def _clean(value) -> str:
    return str(value).replace("\t", " ").replace("\n", " ")


def render_tsv(rows: Sequence[Mapping], columns: Sequence[str]) -> str:
    """The TSV text of ``rows`` with a header line."""
    lines = ["\t".join(columns)] + ["\t".join(_clean(row[c]) for c in columns) for row in rows]
    return "\n".join(lines) + "\n"


def evidence(row: Mapping) -> str:
    """The evidence for a term's chosen parent: rank, share, score, method and the nearest existing terms."""
    near = f"; nearest terms: {row['nearest_terms']}" if row.get("nearest_terms") else ""
    note = f"; {row['note']}" if row.get("note") else ""
    return (
        f"textkg place: rank {row['rank']}, share {row['share']:.3g}, score {row['score']:.4g} ({row['method']})"
        f"{near}{note}"
    )


def other_candidate(row: Mapping) -> str:
    """One line for a candidate parent that is not asserted."""
    return (
        f"textkg place: other candidate parent (rank {row['rank']}): {row['parent']} {row['parent_name']}, "
        f"share {row['share']:.3g}, score {row['score']:.4g}"
    )


def by_term(rows: Sequence[Mapping]) -> dict[str, list[Mapping]]:
    """``rows`` grouped by term, best first (their order)."""
    out: dict[str, list[Mapping]] = {}
    for row in rows:
        out.setdefault(row["term"], []).append(row)
    return out


def render_robot(rows: Sequence[Mapping], terms: Sequence) -> str:
    """A ROBOT template (see the module docstring); ``terms``: the placed :class:`textkg.place.NewTerm`
    objects, in the order to write them."""

    def cell(values: Sequence[str]) -> str:
        return ROBOT_SPLIT.join(_clean(v).replace(ROBOT_SPLIT, "/") for v in values)

    header = [name for name, _ in ROBOT_COLUMNS]
    template = [code for _, code in ROBOT_COLUMNS]
    lines = ["\t".join(header), "\t".join(template)]
    grouped = by_term(rows)
    for term in terms:
        suggestions = grouped.get(term.id)
        if not suggestions:
            continue
        chosen = suggestions[0]
        values = (
            term.id,
            term.name,
            term.definition,
            cell(term.definition_xrefs if term.definition else []),
            chosen["parent"],
            cell([evidence(chosen)] + [other_candidate(r) for r in suggestions[1:]]),
            chosen["parent_name"],
            chosen["share"],
            chosen["score"],
            chosen["method"],
        )
        lines.append("\t".join(_clean(v) for v in values))
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    """An OBO quoted string's content (OBO 1.4: backslash and double quote escaped; one line)."""
    return " ".join(str(text).split()).replace("\\", "\\\\").replace('"', '\\"')


def _unquoted(text: str) -> str:
    """An unquoted OBO value (``remark:``, ``comment:``): one line, with ``\\``, ``!`` (a trailing comment)
    and ``{``/``}`` (trailing qualifiers) escaped."""
    out = " ".join(str(text).split()).replace("\\", "\\\\")
    for char in "!{}":
        out = out.replace(char, "\\" + char)
    return out


def _xrefs(ids: Sequence[str]) -> str:
    return "[" + ", ".join(ids) + "]"


def render_obo(rows: Sequence[Mapping], terms: Sequence, *, remark: str) -> str:
    """An OBO 1.4 fragment (see the module docstring); ``terms``: the placed
    :class:`textkg.place.NewTerm` objects, in the order to write them."""
    grouped = by_term(rows)
    lines = ["format-version: 1.4", f"remark: {_unquoted(remark)}", ""]
    for term in terms:
        suggestions = grouped.get(term.id)
        if not suggestions:
            continue
        lines += ["[Term]", f"id: {term.id}", f"name: {_unquoted(term.name)}"]
        if term.definition:
            lines.append(f'def: "{_quote(term.definition)}" {_xrefs(term.definition_xrefs)}')
        if len(suggestions) > 1:
            lines.append("comment: " + _unquoted("; ".join(other_candidate(r) for r in suggestions[1:])))
        for i, synonym in enumerate(term.synonyms):
            if not synonym:
                continue
            scope = term.synonym_scopes[i] if i < len(term.synonym_scopes) else "RELATED"
            xrefs = term.synonym_xrefs[i] if i < len(term.synonym_xrefs) else []
            lines.append(f'synonym: "{_quote(synonym)}" {scope} {_xrefs(xrefs)}')
        lines += [f"xref: {x}" for x in term.xrefs]
        chosen = suggestions[0]
        name = " ".join(str(chosen["parent_name"]).split())
        lines.append(f'is_a: {chosen["parent"]} {{comment="{_quote(evidence(chosen))}"}} ! {name}')
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
            os.fchmod(fd, file_mode())  # mkstemp makes 0600: a curator's colleagues read these files
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        for tmp, out in temps:
            os.replace(tmp, out)
    except BaseException:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        raise
