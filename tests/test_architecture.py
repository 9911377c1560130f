"""The house's shape, checked (issue 30): namespaced packages, one-way imports, no circles."""

from __future__ import annotations


def test_no_generic_top_level_packages():
    """`encoders` and `privacy` live inside textkg: a name that generic would clash with PyPI's `encoders`."""
    import importlib.metadata

    import textkg.encoders
    import textkg.privacy

    assert textkg.privacy.__name__ == "textkg.privacy" and textkg.encoders.__name__ == "textkg.encoders"
    # what the installed distribution puts on the path (tests/encoders, a folder of tests, is not it)
    installed = {name for name, dists in importlib.metadata.packages_distributions().items() if "textkg" in dists}
    assert installed == {"textkg"}, installed
    for name in ("encoders", "privacy"):
        spec = importlib.util.find_spec(name)
        assert spec is None or all("/tests/" in str(p) for p in (spec.submodule_search_locations or [])), spec


# ------------------------------------------------------------------------------------------------
# The import graph: data → encoders → models → training / privacy → evaluation → pipeline → cli.

import ast  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: (module prefix, layer); the longest matching prefix wins. Runners (release, federated, distributed,
#: audit, sweep, tune) and the run-level tools (predict, place, export, report) sit beside the pipeline.
LAYERS = [
    ("textkg._version", -1),
    ("textkg.errors", -1),
    ("textkg.versioning", -1),
    ("textkg.devices", -1),
    ("textkg.cache_root", -1),
    ("textkg.progress", -1),
    ("textkg.schema", -1),
    ("textkg.registry", -1),
    ("textkg.data", 0),
    ("textkg.encoders", 1),
    ("textkg.models", 2),
    ("textkg.training", 3),
    ("textkg.privacy", 3),
    ("textkg.evaluation", 4),
    ("textkg.pipeline", 5),
    ("textkg.release", 5),
    ("textkg.federated", 5),
    ("textkg.distributed", 5),
    ("textkg.audit", 5),
    ("textkg.sweep", 5),
    ("textkg.tune", 5),
    ("textkg.predict", 5),
    ("textkg.place", 5),
    ("textkg.place.outputs", 5),
    ("textkg.export", 5),
    ("textkg.report", 5),
    ("textkg.cli", 6),
    ("textkg.__main__", 6),
    ("textkg", 7),
]
#: packages that may import nothing of textkg but themselves and the base layer (-1)
SELF_CONTAINED = ("textkg.privacy", "textkg.encoders")


def _modules() -> dict[str, Path]:
    out = {}
    for path in (ROOT / "textkg").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _import_graph() -> dict[str, set[str]]:
    """Module → the textkg modules it imports, lazy (function-level) imports included."""
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rsplit(".", 1)[0] if "." in name else ""
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                if target.startswith("textkg"):
                    found = resolve(target)
                    if found and found != module:
                        graph[module].add(found)
    return graph


def _layer(module: str) -> int:
    best = max((p for p, _ in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return dict(LAYERS)[best]


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return [
        f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)})"
        for m, targets in sorted(graph.items())
        for t in sorted(targets)
        if _layer(t) > _layer(m)
    ]


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_module_imports_from_a_layer_above_it():
    assert not _upward(_import_graph()), "\n".join(_upward(_import_graph()))


def test_no_import_circles():
    assert not _circles(_import_graph())


def test_privacy_and_encoders_know_nothing_of_graphs():
    leaks = [
        f"{m} imports {t}"
        for m, targets in _import_graph().items()
        for package in SELF_CONTAINED
        if m == package or m.startswith(package + ".")
        for t in targets
        if not (t == package or t.startswith(package + ".")) and _layer(t) >= 0
    ]
    assert not leaks, "\n".join(leaks)


def test_the_checks_catch_a_planted_upward_import_and_circle():
    """The checks can fail: on the graph before issue 30 they found three circles and an upward import."""
    graph = {m: set(ts) for m, ts in _import_graph().items()}
    graph["textkg.data.graph"].add("textkg.cli.main")  # data importing the CLI: upward, and a circle
    assert any("textkg.data.graph" in line for line in _upward(graph))
    assert any("textkg.data.graph" in c for c in _circles(graph))


def _private_imports(source: str, module: str, package: str, modules: dict[str, Path]) -> list[str]:
    """``from M import _name`` / ``M._name`` where ``M`` is another textkg module: a private name leaves home."""
    found = []
    aliases: dict[str, str] = {}  # local name -> textkg module it is bound to
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            if not base.startswith("textkg"):
                continue
            for a in node.names:
                if f"{base}.{a.name}" in modules:
                    aliases[a.asname or a.name] = f"{base}.{a.name}"
                elif a.name.startswith("_") and not a.name.startswith("__") and base != module:
                    found.append(f"{module}:{node.lineno} imports {base}.{a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("textkg") and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and aliases[node.value.id] != module
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{module}:{node.lineno} reads {aliases[node.value.id]}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_name():
    """Issue 40: a ``_name`` is its module's own; another module that needs it gets a public name."""
    modules = _modules()
    found = []
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        found += _private_imports(path.read_text(encoding="utf-8"), module, package, modules)
    assert not found, "\n".join(found)


def test_the_private_name_check_catches_a_planted_import():
    modules = _modules()
    planted = (
        "from textkg.pipeline.report import _x\n"
        "from . import _y\n"
        "from textkg.pipeline import report as r\n"
        "r._z()\n"
        "from textkg.evaluation.scoring import standardise\n"
    )
    found = _private_imports(planted, "textkg.evaluation.ranking", "textkg.evaluation", modules)
    assert len(found) == 3, found
    assert (
        _private_imports("from textkg.evaluation.ranking import _own\n", "textkg.evaluation.ranking", "x", modules)
        == []
    )
