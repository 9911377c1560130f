"""Guards run on an RDF file's text before rdflib parses it (issue 36, items 7 and 8).

An ontology file may come from anyone. rdflib would follow what it names and expand what it
declares, so each syntax is checked first, in time linear in the file:

* **RDF/XML** (``.owl``, ``.rdf``, ``.xml``) goes once through ``defusedxml``'s expat reader.
  External entities (``<!ENTITY x SYSTEM "file:///etc/passwd">``), parameter entities and
  entities whose text refers to other entities (the "billion laughs" bomb) are refused when
  declared. Plain internal entities, which OWL editors write for namespace prefixes
  (``<!ENTITY owl "http://www.w3.org/2002/07/owl#">``), are kept, up to
  :data:`MAX_ENTITIES` of at most :data:`MAX_ENTITY_CHARS` characters each, and their total
  expansion is bounded by :data:`MAX_EXPANSION_CHARS` (counted from the references in the text).
* **JSON-LD**: every ``@context`` must be inline (a JSON object); a context given as a string or
  list of strings would be fetched from the network or opened from a local path, and
  ``@import`` likewise, so both are refused.

* **RDF/XML** elements nest at most :data:`MAX_XML_DEPTH` deep (rdflib recurses per level: an
  ``rdf:XMLLiteral`` nested thousands deep printed ``RecursionError`` tracebacks, and 16 MB of nested
  elements took minutes).
* **Turtle and N3** (:func:`check_turtle`): rdflib reads a string literal in time quadratic in the
  pieces it is made of (each line break, escape or quote inside it is appended to a growing string:
  a 1 MB literal of two-character lines took 10 s, 4 MB 150 s). A linear pre-scan that reads
  comments, IRIs and strings as rdflib does refuses a literal of more than :data:`MAX_LITERAL_PIECES`
  line breaks, escapes and quotes, or longer than :func:`textkg.data.io.max_line_bytes` characters
  (a literal counts as one line), or one never closed.

Every line of a line-based syntax (N-Triples, Turtle, N3, OBO, TSV) is bounded by
:func:`textkg.data.io.read_text`; what passes these checks parses in time linear in the file
(docs/security.md gives the measured rate).
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any
from xml.sax import SAXParseException
from xml.sax.handler import ContentHandler

from textkg.errors import DataError

MAX_ENTITIES = 1000
MAX_ENTITY_CHARS = 1024
MAX_EXPANSION_CHARS = 64 << 20
#: how deep RDF/XML elements may nest
MAX_XML_DEPTH = 256
#: line breaks, escapes and quotes one Turtle/N3 string literal may hold
MAX_LITERAL_PIECES = 4096
#: prefix (and base) declarations of a Turtle/N3 document: rdflib's namespace binding is quadratic in their
#: number (5,000 distinct prefixes, 200 KB, parsed in 4.8 s; 500 KB in over 30 s); an ontology declares tens
MAX_PREFIXES = 1024
_PREFIX_LINE = re.compile(r"^[ \t]*(?:@prefix|@base|prefix|base)[ \t]", re.IGNORECASE | re.MULTILINE)
_REFERENCE = re.compile(r"&([A-Za-z_:][\w.:-]*);")


def check_rdf_xml(text: str, path: str | Path) -> None:
    """Refuse an RDF/XML document with external, parameter or nested entities (see the module docstring).

    Raises:
        DataError: naming the entity and, where expat gives one, the line.
    """
    from defusedxml import DefusedXmlException
    from defusedxml.expatreader import DefusedExpatParser

    entities: dict[str, str] = {}

    class _Parser(DefusedExpatParser):
        def defused_entity_decl(self, name, is_parameter_entity, value, base, sysid, pubid, notation_name):
            line = self._parser.CurrentLineNumber
            if value is None or sysid or pubid or notation_name:
                raise DataError(
                    f"external entity '{name}' ({sysid or pubid}) refused: textkg reads only the file named, "
                    "never what it points to",
                    file=path,
                    line=line,
                )
            if is_parameter_entity or "&" in value or "%" in value:
                raise DataError(
                    f"entity '{name}' refers to other entities (an entity-expansion bomb, 'billion laughs'); refused",
                    file=path,
                    line=line,
                )
            if len(value) > MAX_ENTITY_CHARS or len(entities) >= MAX_ENTITIES:
                raise DataError(
                    f"entity '{name}': at most {MAX_ENTITIES} entities of {MAX_ENTITY_CHARS} characters are read",
                    file=path,
                    line=line,
                )
            entities[name] = value

    class _Depth(ContentHandler):
        depth = 0

        def startElement(self, name, attrs):
            self.depth += 1
            if self.depth > MAX_XML_DEPTH:
                raise DataError(
                    f"elements nest more than {MAX_XML_DEPTH} deep", file=path, line=parser._parser.CurrentLineNumber
                )

        def endElement(self, name):
            self.depth -= 1

    parser = _Parser(forbid_dtd=False, forbid_entities=True, forbid_external=True)
    parser.setContentHandler(_Depth())
    try:
        parser.parse(io.BytesIO(text.encode("utf-8")))
    except SAXParseException as exc:
        raise DataError(f"unparsable RDF/XML ({exc.getMessage()})", file=path, line=exc.getLineNumber()) from None
    except DefusedXmlException as exc:
        raise DataError(f"refused XML construct ({exc})", file=path) from None
    if entities:
        counts = Counter(m.group(1) for m in _REFERENCE.finditer(text))
        expansion = sum(counts[name] * len(value) for name, value in entities.items())
        if expansion > MAX_EXPANSION_CHARS:
            raise DataError(
                f"entity references would expand to {expansion:,} characters (limit {MAX_EXPANSION_CHARS:,})",
                file=path,
            )


def check_json_ld(text: str, path: str | Path) -> None:
    """Refuse a JSON-LD document whose ``@context`` is not inline, or that uses ``@import``.

    Raises:
        DataError: naming the offending context.
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"unparsable JSON-LD ({exc.msg})", file=path, line=exc.lineno) from None
    except RecursionError:
        raise DataError("JSON-LD nested too deeply", file=path) from None
    _walk(document, path)


def _walk(node: Any, path: str | Path) -> None:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            if "@import" in item:
                raise DataError(f"@import {item['@import']!r} refused: contexts must be inline", file=path)
            if "@context" in item:
                context = item["@context"]
                for part in context if isinstance(context, list) else [context]:
                    if part is not None and not isinstance(part, dict):
                        raise DataError(
                            f"@context {part!r} refused: textkg never fetches or opens a context a file "
                            "names; inline it as a JSON object",
                            file=path,
                            field="@context",
                        )
            stack.extend(item.values())


_TURTLE_NEXT = re.compile(r"[#<\"']")
#: inside a literal: what ends it or is read one piece at a time
_IN_LONG = {q: re.compile(r"[\\" + q + "]") for q in "\"'"}
_IN_SHORT = {q: re.compile(r"[\\\r\n" + q + "]") for q in "\"'"}


def check_turtle(text: str, path: str | Path, *, n3: bool = False) -> None:
    """Refuse a Turtle or N3 document with a string literal rdflib would read in quadratic time.

    One pass over the text, reading comments, IRIs and string literals as rdflib's parser does (an IRI
    runs to the next ``>``; in N3 ``<=`` is an operator). See the module docstring for the limits.

    Raises:
        DataError: naming the literal's first line.
    """
    from textkg.data.io import MAX_LINE_ENV, max_line_bytes

    for count, declaration in enumerate(_PREFIX_LINE.finditer(text), start=1):
        if count > MAX_PREFIXES:  # counted on any line (one inside a literal too): refusing errs on the safe side
            line = text.count("\n", 0, declaration.start()) + 1
            raise DataError(f"more than {MAX_PREFIXES:,} prefix or base declarations", file=str(path), line=line)
    max_chars = max_line_bytes()
    i, end = 0, len(text)
    while True:
        m = _TURTLE_NEXT.search(text, i)
        if m is None:
            return
        i, ch = m.start(), m.group()
        if ch == "#":
            i = text.find("\n", i)
        elif ch == "<":
            i = i + 1 if n3 and text.startswith("<=", i) else text.find(">", i + 1)
        else:
            i = _literal_end(text, i, path, max_chars=max_chars, env=MAX_LINE_ENV)
        if i < 0 or i >= end:  # a comment or IRI that runs to the end: rdflib reports what is wrong
            return
        i += 1


def _literal_end(text: str, start: int, path: str | Path, *, max_chars: int, env: str) -> int:
    """The index of the last character of the string literal opening at ``start``, or -1 when a
    one-line literal is not closed on its line (a syntax error rdflib reports at once)."""
    q = text[start]
    long = text.startswith(q * 3, start)
    pattern = (_IN_LONG if long else _IN_SHORT)[q]
    i, stop, pieces = start + (3 if long else 1), min(len(text), start + max_chars), 0
    while True:
        m = pattern.search(text, i, stop)
        if m is None:
            if stop < len(text):
                _refuse(
                    text, start, path, f"is longer than {max_chars:,} characters, the line limit (${env} raises it)"
                )
            if long:
                _refuse(text, start, path, "is never closed")
            return -1
        i, ch = m.start(), m.group()
        if ch == "\\":  # an escape: one piece, whatever it names
            i, pieces = i + 2, pieces + 1
        elif ch != q:  # a line break in a one-line literal
            return -1
        elif not long:
            break
        else:  # as rdflib reads quotes in a long literal: a run of 3 to 5 closes it, 1 or 2 are pieces
            run = 1
            while run < 5 and text.startswith(q, i + run):
                run += 1
            if run >= 3:
                i += run - 1
                break
            i, pieces = i + run, pieces + run
        if pieces > MAX_LITERAL_PIECES:
            _refuse(text, start, path, f"holds more than {MAX_LITERAL_PIECES:,} escapes and quotes")
    pieces = sum(text.count(c, start + 1, i) for c in "\r\n\\\"'")
    if pieces > MAX_LITERAL_PIECES:
        _refuse(text, start, path, f"holds more than {MAX_LITERAL_PIECES:,} line breaks, escapes and quotes")
    return i


def _refuse(text: str, start: int, path: str | Path, why: str) -> None:
    raise DataError(
        f"a string literal {why}: rdflib reads such a literal in time quadratic in its length",
        file=path,
        line=text.count("\n", 0, start) + 1,
    )
