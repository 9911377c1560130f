"""OWL and RDF files (RDF/XML, Turtle, N-Triples, N3, JSON-LD) as ontologies, through ``rdflib``.

An OWL ontology is an RDF graph, so one reader serves OWL releases
(``.owl``, RDF/XML) and RDF in any syntax. Two readings:

* **ontology** (the file declares ``owl:Class`` or ``rdfs:subClassOf``): the
  terms are the named classes (IRIs, not blank nodes); names from
  ``rdfs:label`` (else ``skos:prefLabel``, ``schema:name``, ``foaf:name``);
  definitions from ``IAO:0000115`` or ``skos:definition``; synonyms from
  ``oboInOwl:has{Exact,Related,Broad,Narrow}Synonym`` and ``skos:altLabel``
  (sorted: RDF has no order); ``owl:deprecated true`` marks a term obsolete;
  ``rdfs:subClassOf`` a named class is ``is_a``, ``rdfs:subClassOf`` an
  ``owl:Restriction`` with ``owl:onProperty P`` and ``owl:someValuesFrom X``
  (named) is the statement ``(term, P, X)`` with P's label as its text.
* **plain RDF** (no classes): every IRI that is a subject or an object of an
  IRI-to-IRI statement is an entity, named by its label or, without one, by
  the last segment of its IRI; its description adds ``rdfs:comment``,
  ``schema:description`` or ``dcterms:description`` to the sources above.
  Every IRI-to-IRI statement is a triple (``rdf:type`` included).

Ids: an OBO PURL (``http://purl.obolibrary.org/obo/HP_0000118``) becomes its
CURIE (``HP:0000118``), as in OBO files, so an ontology gives the same graph
in OBO and OWL; other IRIs stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from pathlib import Path

from textkg.data.io import read_text
from textkg.data.ontology import Ontology, OntologyTerm
from textkg.data.untrusted_rdf import check_json_ld, check_rdf_xml, check_turtle
from textkg.errors import DataError

#: rdflib parser per file suffix.
RDF_FORMATS = {
    ".owl": "xml",
    ".rdf": "xml",
    ".xml": "xml",
    ".ttl": "turtle",
    ".nt": "nt",
    ".n3": "n3",
    ".jsonld": "json-ld",
}
_SYNTAX_NAMES = {"xml": "RDF/XML", "turtle": "Turtle", "nt": "N-Triples", "n3": "N3", "json-ld": "JSON-LD"}
#: checks run on a file's text before rdflib parses it (textkg.data.untrusted_rdf)
_GUARDS: dict[str, Callable[[str, str | Path], None]] = {
    "xml": check_rdf_xml,
    "json-ld": check_json_ld,
    "turtle": check_turtle,
    "n3": partial(check_turtle, n3=True),
}
#: syntaxes whose documents may be one line (no per-line limit)
_ONE_LINE = frozenset({"xml", "json-ld"})

_OBO = "http://purl.obolibrary.org/obo/"
_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_RDFS = "http://www.w3.org/2000/01/rdf-schema#"
_OWL = "http://www.w3.org/2002/07/owl#"
_SKOS = "http://www.w3.org/2004/02/skos/core#"
_OIO = "http://www.geneontology.org/formats/oboInOwl#"
_SCHEMA = ("http://schema.org/", "https://schema.org/")

LABELS = (_RDFS + "label", _SKOS + "prefLabel", *(s + "name" for s in _SCHEMA), "http://xmlns.com/foaf/0.1/name")
DEFINITIONS = (_OBO + "IAO_0000115", _SKOS + "definition")
PLAIN_DESCRIPTIONS = (
    _RDFS + "comment",
    *(s + "description" for s in _SCHEMA),
    "http://purl.org/dc/terms/description",
)
SYNONYMS = (
    *(_OIO + f"has{kind}Synonym" for kind in ("Exact", "Related", "Broad", "Narrow")),
    _SKOS + "altLabel",
)
#: predicates that carry text or structure, never plain-RDF statements
_NOT_STATEMENTS = frozenset(
    {*LABELS, *DEFINITIONS, *PLAIN_DESCRIPTIONS, *SYNONYMS, _OWL + "deprecated", _OWL + "onProperty"}
)
_OBO_ID = re.compile(r"^([A-Za-z][A-Za-z0-9.]*)_([A-Za-z0-9_]+)$")


def rdf_format(path: str | Path) -> str | None:
    """The rdflib parser for a file name, or ``None`` when its suffix names none."""
    return RDF_FORMATS.get(Path(path).suffix.lower())


def curie(iri: str) -> str:
    """``http://purl.obolibrary.org/obo/HP_0000118`` → ``HP:0000118``; ``…/obo/ro#part_of`` → ``part_of``."""
    if iri.startswith(_OBO):
        local = iri[len(_OBO) :]
        if "#" in local:
            return local.rsplit("#", 1)[1]
        match = _OBO_ID.match(local)
        if match:
            return f"{match.group(1)}:{match.group(2)}"
    return iri


def read_rdf(path: str | Path, *, rdf_syntax: str | None = None) -> Ontology:
    """Read an OWL or RDF file (see the module docstring).

    Args:
        path: The file.
        rdf_syntax: rdflib parser name (default: from the suffix, else RDF/XML).

    Raises:
        DataError: missing or non-UTF-8 file, a file over the size limits, an entity bomb or
            external entity (RDF/XML), a context that is not inline (JSON-LD), or a syntax error
            (with its line where the parser gives one).
    """
    syntax = rdf_syntax or rdf_format(path) or "xml"
    if syntax not in _SYNTAX_NAMES:  # another rdflib parser (TriX, RDFa, ...) would bypass the guards
        raise DataError(f"RDF syntax must be one of {', '.join(_SYNTAX_NAMES)}, got {syntax!r}", file=path)
    graph = _parse(path, syntax)
    from rdflib import URIRef

    classes = {str(s) for s in graph.subjects(URIRef(_RDF + "type"), URIRef(_OWL + "Class")) if isinstance(s, URIRef)}
    classes |= {
        str(n) for s, o in graph.subject_objects(URIRef(_RDFS + "subClassOf")) for n in (s, o) if isinstance(n, URIRef)
    }
    reader = _ontology_terms if classes else _plain_terms
    terms, relations = reader(graph, classes)
    names = {curie(r): _first(graph, URIRef(r), LABELS) for r in relations}
    return Ontology(
        terms=terms,
        relation_names={k: v for k, v in names.items() if v},
        source=str(path),
        format="owl" if classes else "rdf",
    )


def _parse(path: str | Path, syntax: str):
    import rdflib

    # missing file, bad UTF-8, over the size limits: our errors (one-line documents are fine in XML, JSON)
    text = read_text(path, line_limit=syntax not in _ONE_LINE)
    if syntax in _GUARDS:
        _GUARDS[syntax](text, path)  # no entity bombs, nothing fetched, no quadratic literal (untrusted_rdf)
    if syntax == "nt":
        return _parse_nt(text, path)
    try:
        return rdflib.Graph().parse(data=text, format=syntax, publicID=Path(path).resolve().as_uri())
    except Exception as exc:  # rdflib's parsers raise their own types (BadSyntax, ParserError, SAXParseException)
        line, problem = _error_location(exc)
        raise DataError(f"unparsable {_SYNTAX_NAMES.get(syntax, syntax)} ({problem})", file=path, line=line) from None


class _WholeLines:
    """``text`` handed to rdflib's N-Triples parser one whole line per ``read``. The parser asks for
    2,048 characters at a time and searches its whole buffer for a line end after each, which is
    quadratic in a line's length (one 1 MiB line took 2.3 s; sixteen, 37 s); given whole lines it
    searches each once. ``lines`` counts the lines handed out: the one a parse error is on."""

    encoding = "utf-8"  # read as text: the parser wraps a stream without it in a UTF-8 decoder

    def __init__(self, text: str) -> None:
        self._text, self._at, self.lines = text, 0, 0

    def read(self, _size: int = -1) -> str:
        end = self._text.find("\n", self._at)
        end = len(self._text) if end < 0 else end + 1
        line, self._at = self._text[self._at : end], end
        self.lines += bool(line)
        return line


def _parse_nt(text: str, path: str | Path):
    """Parse N-Triples in time linear in the file (:class:`_WholeLines`)."""
    import rdflib
    from rdflib.plugins.parsers.ntriples import NTGraphSink, W3CNTriplesParser

    graph = rdflib.Graph()
    lines = _WholeLines(text)
    try:
        W3CNTriplesParser(NTGraphSink(graph)).parse(lines)  # type: ignore[arg-type]
    except Exception as exc:  # rdflib's ParserError, or a term it cannot build
        problem = str(exc) if len(str(exc)) <= 200 else str(exc)[:200] + "..."  # it quotes the whole line
        raise DataError(f"unparsable N-Triples ({problem})", file=path, line=lines.lines or None) from None
    return graph


def _error_location(exc: Exception) -> tuple[int | None, str]:
    """``(1-based line or None, problem)`` of an rdflib parse error."""
    message = str(exc)
    if hasattr(exc, "getLineNumber"):  # RDF/XML: xml.sax.SAXParseException
        return exc.getLineNumber(), exc.getMessage()  # type: ignore[attr-defined]
    if hasattr(exc, "lines"):  # Turtle, N3: notation3.BadSyntax, 0-based line
        why = re.search(r"Bad syntax \((.*?)\) at \^", message)
        return int(exc.lines) + 1, why.group(1) if why else message.splitlines()[-1]
    return None, message or type(exc).__name__


def _ontology_terms(graph, classes: set[str]) -> tuple[dict[str, OntologyTerm], set[str]]:
    from rdflib import URIRef

    sub_class_of = URIRef(_RDFS + "subClassOf")
    on_property, some = URIRef(_OWL + "onProperty"), URIRef(_OWL + "someValuesFrom")
    terms, relations = {}, set()
    for iri in sorted(classes):
        node = URIRef(iri)
        term = _term(graph, node, DEFINITIONS)
        for parent in graph.objects(node, sub_class_of):
            if isinstance(parent, URIRef):
                term.parents.append(curie(str(parent)))
                continue
            prop, target = graph.value(parent, on_property), graph.value(parent, some)
            if isinstance(prop, URIRef) and isinstance(target, URIRef):
                term.relationships.append((curie(str(prop)), curie(str(target))))
                relations.add(str(prop))
        term.parents.sort()
        term.relationships.sort()
        terms[term.id] = term
    return terms, relations


def _plain_terms(graph, _classes: set[str]) -> tuple[dict[str, OntologyTerm], set[str]]:
    from rdflib import URIRef

    edges = [
        (s, p, o)
        for s, p, o in graph
        if isinstance(s, URIRef) and isinstance(o, URIRef) and str(p) not in _NOT_STATEMENTS
    ]
    nodes = sorted({n for s, _, o in edges for n in (s, o)}, key=str)
    terms = {}
    for node in nodes:
        term = _term(graph, node, DEFINITIONS + PLAIN_DESCRIPTIONS)
        term.name = term.name or _last_segment(str(node))
        terms[term.id] = term
    for s, p, o in sorted(edges):
        terms[curie(str(s))].relationships.append((curie(str(p)), curie(str(o))))
    return terms, {str(p) for _, p, _ in edges}


def _term(graph, node, definitions: tuple[str, ...]) -> OntologyTerm:
    from rdflib import Literal, URIRef

    deprecated = graph.value(node, URIRef(_OWL + "deprecated"))
    return OntologyTerm(
        id=curie(str(node)),
        name=_first(graph, node, LABELS),
        definition=_first(graph, node, definitions),
        synonyms=sorted({_one_line(o) for p in SYNONYMS for o in graph.objects(node, URIRef(p)) if str(o).strip()}),
        obsolete=isinstance(deprecated, Literal) and str(deprecated).strip().lower() in ("true", "1"),
        alt_ids=sorted(str(o).strip() for o in graph.objects(node, URIRef(_OIO + "hasAlternativeId"))),
    )


def _one_line(text) -> str:
    return " ".join(str(text).split())


def _first(graph, node, predicates: tuple[str, ...]) -> str:
    """The first predicate's text (English or untagged preferred; the smallest, for determinism)."""
    from rdflib import Literal, URIRef

    for p in predicates:
        values = [o for o in graph.objects(node, URIRef(p)) if isinstance(o, Literal) and str(o).strip()]
        if values:
            preferred = [o for o in values if o.language in (None, "en")] or values
            return min(_one_line(o) for o in preferred)
    return ""


def _last_segment(iri: str) -> str:
    return re.split(r"[#/:]", iri.rstrip("/#"))[-1] or iri
