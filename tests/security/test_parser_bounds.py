"""Issue 51, item 6 (and "every parser has a size and time bound"): a 16 MB hostile file in each syntax
textkg reads exits 2 within 5 s of CPU, without a traceback.

On 1a0007a a Turtle or N3 literal spread over many short lines was read in quadratic time (4 / 8 / 16 MB:
1.6 / 6.1 / 22.9 s; 64 MB over 300 s): rdflib appends each line to a growing string. N-Triples lines
under the 1 MiB line limit were read in time quadratic in their length too (sixteen 1 MiB lines: 37 s).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from textkg.cli.main import main

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
MB16 = 16 << 20
LABEL = f"<http://x.org/a> <{RDFS}label> "


def _xml(body: str, doctype: str = "") -> str:
    return f'<?xml version="1.0"?>\n{doctype}\n<rdf:RDF xmlns:rdf="{RDF}" xmlns:rdfs="{RDFS}">\n{body}\n</rdf:RDF>\n'


def _description(inner: str) -> str:
    return f'<rdf:Description rdf:about="http://x.org/a">{inner}</rdf:Description>'


#: ``(file name, dataset argument prefix, hostile text, words the error names)``
HOSTILE = {
    "turtle-literal-over-short-lines": ("a.ttl", "", LABEL + '"""' + "a\n" * (MB16 // 2) + '""" .\n', "literal"),
    "n3-literal-over-short-lines": ("a.n3", "", LABEL + '"""' + "a\n" * (MB16 // 2) + '""" .\n', "literal"),
    "turtle-unclosed-literal": ("u.ttl", "", LABEL + "'''" + "a\n" * (MB16 // 2), "literal"),
    "n-triples-one-line-literal": ("a.nt", "", LABEL + '"' + "a" * MB16 + '" .\n', "TEXTKG_MAX_LINE_BYTES"),
    "rdf-xml-entity-amplification": (
        "a.rdf",
        "",
        _xml(
            _description("<rdfs:label>" + "&e;" * (MB16 // 3) + "</rdfs:label>"),
            '<!DOCTYPE rdf:RDF [ <!ENTITY e "' + "x" * 1000 + '"> ]>',
        ),
        "RDF/XML",
    ),
    "owl-nested-elements": (
        "a.owl",
        "",
        _xml(_description("<rdfs:label>" + "<b>" * (MB16 // 7) + "</b>" * (MB16 // 7) + "</rdfs:label>")),
        "nest",
    ),
    "json-ld-nested-arrays": ("a.jsonld", "", "[" * (MB16 // 2) + "]" * (MB16 // 2), "nested"),
    "obo-one-line": ("a.obo", "", "format-version: 1.4\n\n[Term]\nid: X:1\nname: " + "a" * MB16 + "\n", "line"),
    "tsv-one-line": ("a.tsv", "pykeen:", "a\tr\t" + "b" * MB16 + "\n", "line"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_16_mb_hostile_file_exits_2_within_5_seconds(tmp_path, capsys, case):
    name, prefix, text, words = HOSTILE[case]
    path = tmp_path / name
    path.write_text(text)
    assert path.stat().st_size >= MB16
    start = time.process_time()  # the parse is CPU-bound: CPU time does not grow with the machine's load
    code = main(["data", "stats", prefix + str(path)])
    seconds = time.process_time() - start
    err = capsys.readouterr().err
    assert code == 2, err
    assert words in err and "Traceback" not in err and len(err) < 2000
    assert seconds < 5, f"{case}: {seconds:.1f} s"


def test_sixteen_one_mib_n_triples_lines_parse_in_linear_time(tmp_path, capsys):
    path = tmp_path / "long-lines.nt"
    line = LABEL + '"' + "a" * ((1 << 20) - 100) + '" .\n'
    path.write_text(line * 16 + "<http://x.org/a> <http://x.org/p> <http://x.org/b> .\n")
    start = time.process_time()
    code = main(["data", "stats", str(path)])
    seconds = time.process_time() - start
    assert code == 0, capsys.readouterr().err
    assert seconds < 5, f"{seconds:.1f} s"


def test_an_n_triples_syntax_error_names_its_line(tmp_path, capsys):
    path = tmp_path / "bad.nt"
    good = "<http://x.org/a> <http://x.org/p> <http://x.org/b> .\n"
    path.write_text(good * 3 + "<http://x.org/a> <http://x.org/p> c .\n" + good)
    assert main(["data", "stats", str(path)]) == 2
    assert "bad.nt:4" in capsys.readouterr().err


def test_honest_turtle_with_long_literals_quotes_and_comments_still_parses(tmp_path):
    from textkg.data.rdf import read_rdf

    definition = "A definition\nover " + "several lines, " * 200 + 'with "quotes" and \\"escapes\\"'
    path = Path(tmp_path / "honest.ttl")
    path.write_text(
        "@prefix ex: <http://x.org/it's#> . # a comment's \"quotes\"\n"
        f"@prefix rdfs: <{RDFS}> .\n"
        f'ex:a rdfs:label "A" ; rdfs:comment """{definition}""" ; rdfs:seeAlso ex:b .\n'
        "ex:b rdfs:label '''B''' ; ex:p ex:a .\n"
    )
    ontology = read_rdf(path)
    assert ontology.terms["http://x.org/it's#a"].definition.startswith("A definition over several lines")


@pytest.mark.parametrize("suffix", [".ttl", ".n3"])
def test_many_prefix_declarations_exit_2_at_once(tmp_path, capsys, suffix):
    """The adversary's review: distinct ``@prefix`` lines pass the literal pre-scan, and rdflib binds them in
    quadratic time (200 KB: 4.8 s; 500 KB: over 30 s). More than MAX_PREFIXES is refused before parsing."""
    from textkg.data.untrusted_rdf import MAX_PREFIXES

    path = tmp_path / f"prefixes{suffix}"
    body = "".join(f"@prefix p{i}: <http://e.org/{i}/> .\n" for i in range(4 * MAX_PREFIXES))
    path.write_text(body + "<http://x.org/a> <http://x.org/p> <http://x.org/b> .\n")
    start = time.process_time()
    code = main(["data", "stats", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "prefix or base declarations" in err and "Traceback" not in err
    assert time.process_time() - start < 5
    few = tmp_path / f"few{suffix}"
    few.write_text("@prefix a: <http://x.org/> .\na:a a:p a:b .\n")
    assert main(["data", "stats", str(few)]) == 0, capsys.readouterr().err
