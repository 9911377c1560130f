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

Line-based syntaxes (N-Triples, Turtle, N3) are bounded per line by
:func:`textkg.data.io.read_text`.
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

    parser = _Parser(forbid_dtd=False, forbid_entities=True, forbid_external=True)
    parser.setContentHandler(ContentHandler())
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
