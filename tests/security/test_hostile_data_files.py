"""Issue 36, items 7 and 8: hostile RDF and data files exit 2 within seconds, fetching nothing.

On 7add106 a JSON-LD ``@context`` naming a URL or a local file was fetched/opened (exit 0), a
1 KB billion-laughs RDF/XML file ran for minutes, an RDF/XML external entity was dropped silently
(exit 0), and an N-Triples file with one 64 MB literal was parsed for over ten minutes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from textkg.cli.main import main

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"


def _stats(path: Path, capsys) -> tuple[int, str, float]:
    """Exit status, stderr and the CPU seconds of ``textkg data stats PATH`` (the parse is CPU-bound: CPU time,
    unlike wall time, does not grow with the machine's load or the other test worker)."""
    start = time.process_time()
    code = main(["data", "stats", str(path)])
    return code, capsys.readouterr().err, time.process_time() - start


def _xml(body: str, doctype: str = "") -> str:
    return f'<?xml version="1.0"?>\n{doctype}\n<rdf:RDF xmlns:rdf="{RDF}" xmlns:rdfs="{RDFS}">\n{body}\n</rdf:RDF>\n'


CLASS = '<rdf:Description rdf:about="http://x.org/a"><rdfs:label>{label}</rdfs:label>'
CLASS += '<rdfs:subClassOf rdf:resource="http://x.org/b"/></rdf:Description>'


def test_billion_laughs_rdf_xml_exits_2_in_seconds(tmp_path, capsys):
    entities = ['<!ENTITY lol0 "lollollollollollollollollollol">']
    entities += [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    path = tmp_path / "laughs.owl"
    path.write_text(_xml(CLASS.format(label="&lol9;"), "<!DOCTYPE rdf:RDF [\n" + "\n".join(entities) + "\n]>"))
    assert path.stat().st_size < 1300
    code, err, seconds = _stats(path, capsys)
    assert code == 2 and "billion laughs" in err and "Traceback" not in err
    assert seconds < 10


def test_an_external_entity_exits_2_and_is_never_read(tmp_path, capsys):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    path = tmp_path / "xxe.owl"
    doctype = f'<!DOCTYPE rdf:RDF [ <!ENTITY xxe SYSTEM "{secret.as_uri()}"> ]>'
    path.write_text(_xml(CLASS.format(label="&xxe;"), doctype))
    code, err, _ = _stats(path, capsys)
    assert code == 2 and "external entity 'xxe'" in err and "TOP-SECRET" not in err


def test_plain_prefix_entities_of_owl_editors_still_parse(tmp_path, capsys):
    doctype = f'<!DOCTYPE rdf:RDF [ <!ENTITY x "http://x.org/"> <!ENTITY rdfs "{RDFS}"> ]>'
    body = '<rdf:Description rdf:about="&x;a"><rdfs:label>A</rdfs:label>'
    body += '<rdfs:subClassOf rdf:resource="&x;b"/></rdf:Description>'
    path = tmp_path / "prefixes.owl"
    path.write_text(_xml(body, doctype))
    code, err, _ = _stats(path, capsys)
    assert code == 0, err


def test_a_64_mb_n_triples_literal_exits_2_in_seconds(tmp_path, capsys):
    path = tmp_path / "big.nt"
    with path.open("w") as fh:
        fh.write(f'<http://x.org/a> <{RDFS}label> "' + "a" * (64 << 20) + '" .\n')
        fh.write("<http://x.org/a> <http://x.org/p> <http://x.org/b> .\n")
    code, err, seconds = _stats(path, capsys)
    assert code == 2 and "big.nt:1" in err and "TEXTKG_MAX_LINE_BYTES" in err
    assert seconds < 10


def test_a_file_over_the_size_limit_exits_2(tmp_path, capsys, monkeypatch):
    path = tmp_path / "train.nt"
    path.write_text("<http://x.org/a> <http://x.org/p> <http://x.org/b> .\n" * 100)
    monkeypatch.setenv("TEXTKG_MAX_FILE_BYTES", "1000")
    code, err, _ = _stats(path, capsys)
    assert code == 2 and "over the limit of 1,000" in err


@pytest.fixture
def context_server():
    """A local HTTP server serving a JSON-LD context; it records every request it gets."""
    import http.server
    import threading

    requests: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
            body = json.dumps({"@context": {"label": RDFS + "label"}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/ld+json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/context.jsonld", requests
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    "context",
    [
        "{remote}",  # a server on this machine, which records whether it was asked
        "{local}",  # a local file beside it
        ["{local}"],
        {"@import": "{local}"},
        {"p": {"@id": "http://x.org/p", "@context": "{local}"}},  # a scoped context
    ],
    ids=["remote", "local-file", "list", "import", "scoped"],
)
def test_a_json_ld_context_that_is_not_inline_exits_2(tmp_path, capsys, context, context_server):
    url, requests = context_server
    local = tmp_path / "context.jsonld"
    local.write_text(json.dumps({"@context": {"label": RDFS + "label"}}))
    context = json.loads(json.dumps(context).replace("{local}", str(local)).replace("{remote}", url))
    doc = {
        "@context": context,
        "@graph": [{"@id": "http://x.org/a", "http://x.org/p": {"@id": "http://x.org/b"}, "label": "A"}],
    }
    path = tmp_path / "graph.jsonld"
    path.write_text(json.dumps(doc))
    code, err, _ = _stats(path, capsys)
    assert requests == [], "the context was fetched"
    assert code == 2 and "inline" in err and "Traceback" not in err


def test_an_inline_json_ld_context_still_parses(tmp_path, capsys):
    doc = {
        "@context": {"label": RDFS + "label"},
        "@graph": [{"@id": "http://x.org/a", "http://x.org/p": {"@id": "http://x.org/b"}, "label": "A"}],
    }
    path = tmp_path / "graph.jsonld"
    path.write_text(json.dumps(doc))
    code, err, _ = _stats(path, capsys)
    assert code == 0, err


def test_a_tsv_line_over_the_limit_exits_2(tmp_path, capsys, monkeypatch):
    from textkg.data.io import read_triples
    from textkg.errors import DataError

    path = tmp_path / "train.tsv"
    path.write_text("a\tr\tb\n" + "c\tr\t" + "d" * 5000 + "\n")
    monkeypatch.setenv("TEXTKG_MAX_LINE_BYTES", "4096")
    with pytest.raises(DataError, match="train.tsv:2"):
        read_triples(path)
