"""A term's description is its own text: it never names its parents (issue 54).

Until 2026-12-06 a term without a definition was described as ``"name. Synonyms: …. A kind of: parent1;
parent2."``. In an inductive split that text goes with the held-out term, so placing it read the answer
(on the README's split, 270 of the 1,769 held-out test terms). Played as the check a reviewer of a placement
number would make: for every term of the real ``hpo`` graph, a parent's name appears in the term's
description only where the term's own name, definition or synonyms already contain it.
"""

from __future__ import annotations

import pytest

from textkg.data import hpo as hpo_module
from textkg.data import load_dataset


@pytest.fixture(scope="module")
def hpo_terms():
    return hpo_module.parse_obo(hpo_module.source_paths()["hp.obo"])


def test_no_hpo_term_description_names_a_parent_it_does_not_itself_name(hpo_terms, tmp_path_factory):
    kg = load_dataset("hpo-small", cache_dir=tmp_path_factory.mktemp("cache"))
    description = dict(zip(kg.entities, kg.entity_descriptions, strict=True))
    checked = leaks = 0
    for tid, text in description.items():
        term = hpo_terms.get(tid)
        if term is None:  # a disease or a gene
            continue
        own = " ".join([term.name, term.definition, *term.synonyms]).lower()
        for parent in term.parents:
            if parent not in hpo_terms:
                continue
            name = hpo_terms[parent].name.lower()
            checked += 1
            if name in text.lower() and name not in own:
                leaks += 1
    assert checked > 100, "the fixture should reach terms with parents"
    assert leaks == 0, f"{leaks} descriptions name a parent the term's own text does not"


def test_a_term_without_a_definition_is_its_name_and_synonyms(hpo_terms):
    bare = [t for t in hpo_terms.values() if not t.definition and t.parents and not t.obsolete]
    assert bare, "hp.obo has terms without a definition"
    for term in bare[:200]:
        text = hpo_module.term_description(term)
        assert text == term.name or text.startswith(term.name + ". Synonyms: ")
