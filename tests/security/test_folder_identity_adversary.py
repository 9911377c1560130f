"""Adversary review of the content identity of a local model folder (docs/security.md).

``BertEncoder.identity`` names a local folder by what it loaded (``loaded_content_identity``), so that two folders
that encode alike share feature rows in the user's cache. The folder-level attacks (sharded weights, a file no
loader reads, weights rewritten after the load) are in ``tests/encoders/test_folder_identity.py``; here, a run: a
file of its ``encoder/`` that cannot be read must not stop ``place`` with a traceback.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from run_copies import copy_run, rewrite

from textkg.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))  # the toy ontology of tests/cli/test_place.py
_toy_ontology = importlib.import_module("test_place")._toy_ontology


@pytest.fixture(scope="module")
def adapted_run(tmp_path_factory) -> Path:
    toy = _toy_ontology(tmp_path_factory.mktemp("identity-adversary") / "toy")
    out = tmp_path_factory.mktemp("identity-adversary-run") / "run"
    argv = ["train", "--split", "inductive", "--model", "fused-transe", "--dim", "16", "--epochs", "2"]
    argv += ["--batch-size", "8", "--seed", "0", "--no-progress", "--adapt-encoder", "2"]
    assert main([*argv, "--dataset", str(toy), "--out", str(out)]) == 0
    return out


def _unprivileged() -> list[str] | None:
    """A command prefix that runs as a user whom file modes bind (root ignores them), or None."""
    if os.geteuid() != 0:
        return []
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe = subprocess.run([unshare, "-U", "--map-user=1000", "--map-group=1000", "true"], capture_output=True)
    return [unshare, "-U", "--map-user=1000", "--map-group=1000"] if probe.returncode == 0 else None


def test_an_unreadable_file_in_the_run_encoder_is_exit_2(adapted_run, tmp_path):
    """A run bundle extracted by a user keeps a file's mode 000: ``RUN/encoder/vocab.txt`` unreadable. The fast
    tokenizer never reads it; on 23e5cde the content hash did, and ``place`` stopped with a PermissionError
    traceback (exit 1) where it had placed the terms before."""
    prefix = _unprivileged()
    if prefix is None:
        pytest.skip("needs a user whom file modes bind (not root, or unshare -U)")
    run = copy_run(adapted_run, tmp_path)
    vocab = run / "encoder" / "vocab.txt"
    rewrite(vocab, vocab.read_bytes())  # its own inode: the shared run keeps its mode
    vocab.chmod(0)
    terms = tmp_path / "new.tsv"
    terms.write_text("NEW:1\tdachshund\ta domestic dog breed, a loyal dog that barks\n", encoding="utf-8")
    out = tmp_path / "placed.tsv"
    code = "import sys; from textkg.cli.main import main; sys.exit(main(sys.argv[1:]))"
    argv = [*prefix, sys.executable, "-c", code, "place", str(run), "--terms", str(terms), "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode in (0, 2), done.stderr[-2000:]
