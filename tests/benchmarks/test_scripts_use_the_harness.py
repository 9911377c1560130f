"""Every benchmark script writes its JSON through benchmarks/_harness.py (issue 40).

The harness records the machine, the commit and the command, and writes strict JSON atomically;
a script that calls ``json.dump`` or writes ``json.dumps(...)`` text itself skips all of that. The
check reads each script's syntax tree: ``json.dump`` is never called, and ``json.dumps`` only
feeds ``print`` (a worker's answer to its parent on stdout, a summary on the terminal) or stands
in a list (a command-line argument of a child process).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(
    p for p in [*BENCHMARKS.glob("*.py"), *BENCHMARKS.glob("investigations/*.py")] if p.name != "_harness.py"
)

#: The scripts issue 40 found writing JSON around the harness that are still here (issue 55 retired the
#: rest); each now imports it.
MOVED = "distributed dp_step optimizer_step throughput_vs_pykeen investigations/wordnet_proxy".split()


def _json_call(node: ast.AST, name: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "json"
    )


def json_writes(source: str) -> list[int]:
    """Line numbers of JSON that ``source`` makes for a file without the harness."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    lines = []
    for node in ast.walk(tree):
        if _json_call(node, "dump"):
            lines.append(node.lineno)
        elif _json_call(node, "dumps"):
            parent = parents.get(node)
            printed = isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "print"
            if not (printed or isinstance(parent, ast.List | ast.Tuple)):
                lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.relative_to(BENCHMARKS).as_posix())
def test_no_script_writes_json_without_the_harness(script):
    lines = json_writes(script.read_text(encoding="utf-8"))
    assert not lines, f"{script.name} makes JSON for a file at lines {lines}: write it with _harness.write_results"


@pytest.mark.parametrize("name", MOVED)
def test_the_scripts_issue_40_named_import_the_harness(name):
    tree = ast.parse((BENCHMARKS / f"{name}.py").read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "_harness" in imported


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ("import json\nopen('r.json', 'w').write(json.dumps({}))", [2]),
        ("import json\nwith open('r.json', 'w') as f:\n    json.dump({}, f)", [3]),
        ("import json\ntext = json.dumps({})\nPath('r.json').write_text(text)", [2]),
        ("import json\nprint(json.dumps({}), flush=True)", []),
        ("import json\ncmd = ['--kwargs', json.dumps({})]", []),
        ("import _harness\n_harness.write_results('r.json', {})", []),
    ],
)
def test_the_check_flags_json_made_for_a_file(source, flagged):
    assert json_writes(source) == flagged
