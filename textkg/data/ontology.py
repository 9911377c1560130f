"""Ontologies as graphs: one term model for OBO, OWL and RDF files, and the OBO reader.

Every reader (:func:`read_obo` here, :func:`textkg.data.rdf.read_rdf` for OWL,
Turtle, N-Triples and RDF/XML) returns an :class:`Ontology`; one function,
:func:`build_graph`, turns it into a :class:`~textkg.data.graph.KnowledgeGraph`,
so the same ontology gives the same graph whatever its file format.

The graph:

* entities: every named, labelled, non-obsolete class (``[Term]`` with a
  ``name:``; ``owl:Class`` with an ``rdfs:label``). Obsolete terms
  (``is_obsolete: true``, ``owl:deprecated true``) are skipped and counted in
  ``info["obsolete_skipped"]``; so are unlabelled classes (often references to
  other ontologies' terms).
* name: ``name:`` / ``rdfs:label``; description: ``"name: definition"``
  (``def:``, ``IAO:0000115``, ``skos:definition``), or without a definition
  ``"name. Synonyms: s1; s2."`` (``"name"`` without synonyms), as the ``hpo``
  loader builds it. A description is the term's own text only: never its parents'
  names, which are what placing a held-out term predicts (they leaked into the
  inductive split's held-out terms until 2026-12-06, issue 54).
* statements: ``is_a`` / ``rdfs:subClassOf`` between two such classes (relation
  ``is_a``, text ``"is a"``), and the object-property relationships the file
  declares (``relationship: part_of X``; ``rdfs:subClassOf [owl:onProperty P;
  owl:someValuesFrom X]``), the relation named by its id (an OBO ``[Typedef]``
  with one CURIE ``xref`` takes that CURIE, as OWL conversions do) and its label
  as text. Statements naming an obsolete or absent term are dropped and counted
  in ``info["dropped_statements"]``. One triple set, ``"all"``.
* types (optional): ``type_roots={"phenotype": "HP:0000118", ...}`` gives each
  root's descendants (by ``is_a``) that type, the rest ``"other"``; inductive
  splits then hold out the named types only.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from textkg.data.graph import KnowledgeGraph
from textkg.data.io import read_text
from textkg.errors import DataError

#: The relation of a term to its parent class, and its text.
IS_A, IS_A_TEXT = "is_a", "is a"
#: The type of entities under none of the given roots.
OTHER_TYPE = "other"
#: Obsolete ids listed in ``info`` (the count covers all).
_LISTED = 20


@dataclass
class OntologyTerm:
    """A class of an ontology file, as read (before obsolete or unlabelled ones are skipped)."""

    id: str
    name: str = ""
    definition: str = ""
    synonyms: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    relationships: list[tuple[str, str]] = field(default_factory=list)  # (relation id, target id)
    obsolete: bool = False
    alt_ids: list[str] = field(default_factory=list)
    #: per synonym (same order as ``synonyms``): its OBO scope (``EXACT``, ``RELATED``, ...; ``RELATED``
    #: when the file gives none, as OBO 1.4 reads it) and its xrefs; the definition's xrefs; the term's xrefs
    synonym_scopes: list[str] = field(default_factory=list)
    synonym_xrefs: list[list[str]] = field(default_factory=list)
    definition_xrefs: list[str] = field(default_factory=list)
    xrefs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Ontology:
    """The terms and relation labels a reader found in one file.

    Attributes:
        terms: Terms by id, obsolete ones included (flagged).
        relation_names: Label per relation id (relations without one are named by their id).
        source: The file read.
        format: ``"obo"``, ``"owl"`` or ``"rdf"``.
    """

    terms: Mapping[str, OntologyTerm]
    relation_names: Mapping[str, str]
    source: str
    format: str


class _Describable(Protocol):
    name: str
    definition: str
    synonyms: list[str]


def term_description(term: _Describable) -> str:
    """The text a term is encoded from (see the module docstring): its name with its definition, or with its
    synonyms when it has no definition. Nothing of the graph (a parent's name) is part of it: a held-out term's
    text would give away the answer, and a new term given to ``textkg place`` has none either."""
    if term.definition:
        return f"{term.name}: {term.definition}"
    synonyms = term_synonyms(term)
    return term.name + (". Synonyms: " + "; ".join(synonyms) + "." if synonyms else "")


def term_synonyms(term: _Describable) -> tuple[str, ...]:
    """A term's distinct synonyms, in file order, without its name or empty ones."""
    return tuple(s for s in dict.fromkeys(term.synonyms) if s and s != term.name)


def build_graph(
    onto: Ontology, *, name: str | None = None, type_roots: Mapping[str, str] | None = None
) -> KnowledgeGraph:
    """The graph of an ontology (see the module docstring).

    Args:
        onto: What a reader returned.
        name: The graph's name (default: the file).
        type_roots: ``{type: root term id}``; a term under several roots takes the first listed.

    Raises:
        DataError: no labelled, non-obsolete class; a type root that is not such a class.
    """
    live = {tid: t for tid, t in onto.terms.items() if t.name and not t.obsolete}
    obsolete = sorted(tid for tid, t in onto.terms.items() if t.obsolete)
    if not live:
        raise DataError(
            f"no labelled, non-obsolete classes (found {len(onto.terms)} classes, {len(obsolete)} obsolete): "
            "each term needs a name (OBO name:, rdfs:label)",
            file=onto.source,
        )
    gone = set(obsolete)
    dropped: Counter[str] = Counter()
    triples: set[tuple[str, str, str]] = set()
    for t in live.values():
        edges = [(IS_A, p) for p in t.parents] + list(t.relationships)
        for rel, target in edges:
            if target in live:
                triples.add((t.id, rel, target))
            else:
                why = "an obsolete term" if target in gone else "a term not defined (or unlabelled) in the file"
                dropped[f"{rel} to {why}"] += 1
    used = {r for _, r, _ in triples}
    relations = tuple(([IS_A] if IS_A in used else []) + sorted(used - {IS_A}))
    entities = tuple(sorted(live))
    names = {tid: t.name for tid, t in live.items()}
    eid = {e: i for i, e in enumerate(entities)}
    rid = {r: i for i, r in enumerate(relations)}
    ids = sorted((eid[h], rid[r], eid[t]) for h, r, t in triples)
    types = _types(live, type_roots, onto.source) if type_roots else None
    info = {
        "format": onto.format,
        "obsolete_skipped": len(obsolete),
        "obsolete_terms": obsolete[:_LISTED],
        "unlabelled_skipped": sum(1 for t in onto.terms.values() if not t.name and not t.obsolete),
        "dropped_statements": dict(sorted(dropped.items())),
        # a new release adds terms in sibling batches: validate on such (textkg.data.addition_holdout)
        "valid_holdout": "sibling-batches",
    }
    if type_roots:
        info["type_roots"] = dict(type_roots)
        info["holdout_types"] = list(type_roots)
    return KnowledgeGraph(
        name=name or onto.source,
        entities=entities,
        relations=relations,
        entity_names=tuple(names[e] for e in entities),
        entity_descriptions=tuple(term_description(live[e]) for e in entities),
        relation_texts=tuple(IS_A_TEXT if r == IS_A else onto.relation_names.get(r) or _readable(r) for r in relations),
        triples={"all": torch.tensor(ids, dtype=torch.long).reshape(-1, 3)},
        entity_types=None if types is None else tuple(types[e] for e in entities),
        source=onto.source,
        info=info,
        entity_synonyms=tuple(term_synonyms(live[e]) for e in entities),
    )


def _readable(relation: str) -> str:
    """``part_of`` → ``part of``; a full IRI → its last segment."""
    tail = re.split(r"[#/]", relation.rstrip("/#"))[-1]
    return tail.replace("_", " ")


def _types(live: Mapping[str, OntologyTerm], roots: Mapping[str, str], source: str) -> dict[str, str]:
    children: dict[str, list[str]] = defaultdict(list)
    for t in live.values():
        for p in t.parents:
            children[p].append(t.id)
    types: dict[str, str] = {}
    for kind, root in roots.items():
        if root not in live:
            raise DataError(
                f"type root {root} (type {kind!r}) is not a labelled, non-obsolete class of the file",
                file=source,
                field="types",
            )
        stack = [root]
        while stack:
            term = stack.pop()
            if term not in types:
                types[term] = kind
                stack.extend(children[term])
    return {tid: types.get(tid, OTHER_TYPE) for tid in live}


# --- OBO, through fastobo -------------------------------------------------------------------


def read_obo(path: str | Path) -> Ontology:
    """The ``[Term]`` and ``[Typedef]`` stanzas of an OBO 1.4 file, parsed by ``fastobo``.

    Raises:
        DataError: missing or non-UTF-8 file, a malformed stanza (the line and
            the parser's reason), a term id defined twice, or no ``[Term]`` stanza.
    """
    import fastobo

    text = read_text(path)
    try:
        doc = fastobo.loads(text)
    except SyntaxError as exc:
        line = exc.lineno if exc.lineno is not None else None
        shown = f": {exc.text.strip()!r}" if exc.text else ""
        raise DataError(f"malformed OBO ({exc.msg}){shown}", file=path, line=line) from None
    except Exception as exc:  # fastobo's other errors are about the file too (e.g. a bad header value)
        raise DataError(f"malformed OBO: {exc}", file=path) from None
    typedefs = {str(f.id): f for f in doc if type(f).__name__ == "TypedefFrame"}
    relation_ids = {tid: _typedef_id(frame) for tid, frame in typedefs.items()}
    relation_names = {relation_ids[tid]: _typedef_name(frame) for tid, frame in typedefs.items()}
    terms: dict[str, OntologyTerm] = {}
    for frame in doc:
        if type(frame).__name__ != "TermFrame":
            continue
        term = _obo_term(frame, relation_ids)
        if term.id in terms:
            raise DataError(f"term {term.id} is defined twice", file=path, line=_line_of(text, term.id, 2))
        terms[term.id] = term
    if not terms:
        raise DataError("no [Term] stanza: not an OBO ontology (a TSV or another format?)", file=path)
    return Ontology(
        terms=terms, relation_names={k: v for k, v in relation_names.items() if v}, source=str(path), format="obo"
    )


#: what each fastobo clause type adds to a term: ``(term, clause, relation ids)``
_CLAUSES: dict[str, Callable[[OntologyTerm, Any, Mapping[str, str]], None]] = {
    "NameClause": lambda t, c, _: setattr(t, "name", _one_line(c.name)),
    "DefClause": lambda t, c, _: _set_definition(t, c),
    "SynonymClause": lambda t, c, _: _add_synonym(t, c.synonym),
    "XrefClause": lambda t, c, _: t.xrefs.append(str(c.xref.id)),
    "AltIdClause": lambda t, c, _: t.alt_ids.append(str(c.alt_id)),
    "IsAClause": lambda t, c, _: t.parents.append(str(c.term)),
    "RelationshipClause": lambda t, c, r: t.relationships.append((r.get(str(c.typedef), str(c.typedef)), str(c.term))),
    "IsObsoleteClause": lambda t, c, _: setattr(t, "obsolete", bool(c.obsolete)),
}


def _set_definition(term: OntologyTerm, clause) -> None:
    term.definition = _one_line(clause.definition)
    term.definition_xrefs = [str(x.id) for x in clause.xrefs]


def _add_synonym(term: OntologyTerm, synonym) -> None:
    term.synonyms.append(_one_line(synonym.desc))
    term.synonym_scopes.append(str(synonym.scope or "RELATED"))
    term.synonym_xrefs.append([str(x.id) for x in synonym.xrefs])


def _obo_term(frame, relation_ids: Mapping[str, str]) -> OntologyTerm:
    term = OntologyTerm(str(frame.id))
    for clause in frame:
        add = _CLAUSES.get(type(clause).__name__)
        if add is not None:
            add(term, clause, relation_ids)
    return term


def _one_line(text: str) -> str:
    """Text with every run of whitespace (an escaped ``\\n`` included) as one space."""
    return " ".join(text.split())


def _typedef_id(frame) -> str:
    """A ``[Typedef]``'s relation id: its one CURIE ``xref`` (``part_of`` → ``BFO:0000050``), else its id."""
    xrefs = [str(c.xref.id) for c in frame if type(c).__name__ == "XrefClause"]
    curies = [x for x in xrefs if ":" in x and not x.startswith("http")]
    return curies[0] if len(curies) == 1 else str(frame.id)


def _typedef_name(frame) -> str:
    return next((c.name.strip() for c in frame if type(c).__name__ == "NameClause"), "")


def _line_of(text: str, term_id: str, occurrence: int = 1) -> int | None:
    """1-based line of the ``occurrence``-th ``id: term_id`` line of ``text``."""
    start = -1
    for _ in range(occurrence):
        start = text.find(f"\nid: {term_id}", start + 1)
        if start < 0:
            return None
    return text.count("\n", 0, start + 1) + 1


def parse_type_roots(spec: str, *, source: str | None = None) -> dict[str, str]:
    """``"phenotype=HP:0000118,disease=MONDO:0000001"`` → ``{"phenotype": "HP:0000118", ...}``."""
    roots: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        kind, sep, root = part.partition("=")
        if not sep or not kind.strip() or not root.strip():
            raise DataError(f"expected TYPE=ROOT_TERM, got {part!r}", file=source, field="types")
        if kind.strip() in roots:
            raise DataError(f"type {kind.strip()!r} is given twice", file=source, field="types")
        roots[kind.strip()] = root.strip()
    if not roots:
        raise DataError("no TYPE=ROOT_TERM given after types=", file=source, field="types")
    return roots
