"""CI guard (issue 36): no code a user runs may unpickle, run code, or use an RPC that does.

Scanned: ``textkg/``, ``benchmarks/``, ``scripts/`` and ``notebooks/``.

An AST walk over every module of the package. It fails on:

* ``torch.load`` without ``weights_only=True``, and ``weights_only=False`` anywhere;
* ``pickle.load``/``pickle.loads`` (and ``cPickle``, ``dill``, ``joblib``, ``shelve`` loaders),
  ``np.load(..., allow_pickle=True)``;
* any use of ``torch.distributed.rpc`` (it unpickles and runs callables a peer sends);
* ``yaml.load`` without a safe loader, ``yaml.unsafe_load``/``full_load``;
* the builtins ``eval``, ``exec``, ``compile``, ``__import__``;
* ``FlairEmbeddings(path_or_name)`` (flair unpickles it; pass a rebuilt model instead);
* third-party loaders known to unpickle: flair's ``LanguageModel.load_language_model`` /
  ``load_checkpoint``, ``SequenceTagger.load``/``TextClassifier.load``/``Model.load``
  (flair's ``Model.load``), gensim's ``KeyedVectors.load``/``Word2Vec.load``, ``joblib.load``,
  ``pandas.read_pickle``.

Known, reviewed exceptions live in :data:`ALLOWED`, one entry per (file, rule), each with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the code a user runs: the package, the benchmarks and scripts the docs tell them to run
SCANNED = ("textkg", "benchmarks", "scripts", "notebooks")

#: (path relative to the repository root, rule) -> why it is allowed. Keep it short and reviewed.
ALLOWED: dict[tuple[str, str], str] = {}

_PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}
#: attribute calls ``X.<name>(...)`` on these receivers are third-party loaders that unpickle
_UNPICKLING_LOADERS = {
    "load_language_model": None,  # flair LanguageModel: torch.load(weights_only=False)
    "load_checkpoint": {"LanguageModel"},
    "load": {
        "SequenceTagger",
        "TextClassifier",
        "Model",
        "LanguageModel",
        "FlairEmbeddings",
        "KeyedVectors",
        "Word2Vec",
        "FastText",
        "Doc2Vec",
        "joblib",
    },
    "read_pickle": None,
}


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain, else ``""``."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def violations(source: str) -> list[tuple[int, str]]:
    """``(line, rule)`` for every unsafe call or import in a module's source."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names]
            module = node.module if isinstance(node, ast.ImportFrom) else None
            full = [f"{module}.{n}" if module else n for n in names]
            if any(n == "torch.distributed.rpc" or n.startswith("torch.distributed.rpc.") for n in full):
                found.append((node.lineno, "torch.distributed.rpc"))
            if module and module.startswith("torch.distributed.rpc"):
                found.append((node.lineno, "torch.distributed.rpc"))
        if isinstance(node, ast.Attribute) and _dotted(node).startswith("torch.distributed.rpc"):
            found.append((node.lineno, "torch.distributed.rpc"))
        if isinstance(node, ast.keyword) and node.arg == "weights_only" and not _is_true(node.value):
            found.append((node.value.lineno, "weights_only is not True"))
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        receiver = name.rsplit(".", 2)[-2] if name.count(".") >= 1 else ""
        if name in ("eval", "exec", "compile", "__import__", "builtins.eval", "builtins.exec"):
            found.append((node.lineno, f"builtin {name}"))
        elif name == "torch.load" and not _is_true(_keyword(node, "weights_only")):
            found.append((node.lineno, "torch.load without weights_only=True"))
        elif receiver in _PICKLE_MODULES and last in ("load", "loads", "Unpickler", "open"):
            found.append((node.lineno, f"{receiver}.{last}"))
        elif name in ("np.load", "numpy.load") and _is_true(_keyword(node, "allow_pickle")):
            found.append((node.lineno, "np.load(allow_pickle=True)"))
        elif last in ("unsafe_load", "full_load", "unsafe_load_all", "full_load_all") and receiver == "yaml":
            found.append((node.lineno, f"yaml.{last}"))
        elif (
            name == "yaml.load"
            and "Safe" not in ast.unparse(_keyword(node, "Loader") or ast.Constant(None))
            and (len(node.args) < 2 or "Safe" not in ast.unparse(node.args[1]))
        ):
            found.append((node.lineno, "yaml.load without a safe loader"))
        elif last == "FlairEmbeddings" and not (node.args and isinstance(node.args[0], ast.Call)):
            # flair's constructor unpickles a path or a named model; textkg passes a model rebuilt
            # by textkg.encoders.charlm_files.load_char_lm (a call) instead
            found.append((node.lineno, "FlairEmbeddings from a path or name"))
        elif last in _UNPICKLING_LOADERS:
            receivers = _UNPICKLING_LOADERS[last]
            if receivers is None or receiver in receivers:
                found.append((node.lineno, "unpickling loader ." + last))
    return found


def _modules() -> list[Path]:
    return sorted(path for top in SCANNED for path in (ROOT / top).rglob("*.py"))


def test_the_guard_catches_each_rule():
    """The guard itself, on code that does each forbidden thing (and on code that is fine)."""
    bad = """
import pickle, yaml, torch, numpy as np, joblib
from torch.distributed import rpc
import torch.distributed.rpc as rpc2
from flair.models import LanguageModel, SequenceTagger
from gensim.models import KeyedVectors
torch.load(p)
torch.load(p, weights_only=False)
torch.load(p, map_location="cpu")
pickle.loads(b)
pickle.load(f)
yaml.load(s)
yaml.load(s, Loader=yaml.Loader)
yaml.unsafe_load(s)
eval("1")
exec("x = 1")
np.load(p, allow_pickle=True)
LanguageModel.load_language_model(p)
SequenceTagger.load(p)
KeyedVectors.load(p)
joblib.load(p)
torch.distributed.rpc.rpc_sync("w", f)
FlairEmbeddings("news-forward")
"""
    rules = [rule for _, rule in violations(bad)]
    expected = {
        "torch.distributed.rpc",
        "torch.load without weights_only=True",
        "weights_only is not True",
        "pickle.loads",
        "pickle.load",
        "yaml.load without a safe loader",
        "yaml.unsafe_load",
        "builtin eval",
        "builtin exec",
        "np.load(allow_pickle=True)",
        "unpickling loader .load_language_model",
        "unpickling loader .load",
        "joblib.load",
        "FlairEmbeddings from a path or name",
    }
    assert expected <= set(rules), expected - set(rules)
    fine = """
import torch, yaml, numpy as np
torch.load(p, weights_only=True, map_location="cpu")
yaml.safe_load(s)
yaml.load(s, Loader=yaml.SafeLoader)
np.load(p, allow_pickle=False)
model.eval()
json.load(f)
FlairEmbeddings(load_char_lm(p))
"""
    assert violations(fine) == []


def test_the_package_makes_no_unsafe_call():
    problems = []
    used = set()
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        for line, rule in violations(path.read_text(encoding="utf-8")):
            if (rel, rule) in ALLOWED:
                used.add((rel, rule))
                continue
            problems.append(f"{rel}:{line}: {rule}")
    assert not problems, "unsafe calls (docs/security.md):\n" + "\n".join(problems)
    stale = set(ALLOWED) - used
    assert not stale, f"allowlist entries that no longer match anything; delete them: {sorted(stale)}"
