"""``benchmarks/federated.py``'s control row (issue 39): the shared, public statements alone.

Every private row of the federated benchmark trains the shared statements too, so the question
"does the private data pay?" needs the model trained on the shared statements alone, for the same
epochs and on the same split. On a tiny graph whose ``/r/likes`` statements belong to two holders
and whose other statements are shared.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest
import torch
from bench_module import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tiny_blp"


def _module():
    return load_benchmark("federated.py", "federated_bench")


def _cfg(data: Path, *privacy: str):
    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser

    argv = ["train", "--dataset", str(data), "--description", "short", "--split", "inductive", "--model", "transe"]
    argv += ["--dim", "8", "--epochs", "1", "--batch-size", "32", "--seed", "0", *privacy]
    return build_run_config(build_parser().parse_args(argv))


def _likes_by_two_holders(kg, train, scheme, **_):
    from textkg.federated.partition import SHARED, Partition

    likes = train[:, 1] == kg.relations.index("/r/likes")
    assignment = torch.full((len(train),), SHARED, dtype=torch.long)
    assignment[likes] = torch.arange(int(likes.sum())) % 2
    return Partition(scheme="column", clients=("a", "b"), assignment=assignment)


@pytest.mark.parametrize("privacy", [(), ("--privacy", "full", "--noise-multiplier", "1", "--private-size", "256")])
def test_the_public_only_row_trains_the_shared_statements_alone_on_the_same_split(tmp_path, monkeypatch, privacy):
    import textkg.federated.partition

    monkeypatch.setattr(textkg.federated.partition, "make_partition", _likes_by_two_holders)
    data = tmp_path / "d"
    shutil.copytree(FIXTURE, data)
    args = argparse.Namespace(partition="column", clients=None, rounds=1, local_epochs=1)
    rows: list[dict] = []
    module = _module()
    module._alone(args, _cfg(data, *privacy), "label", tmp_path, rows.append, holders=True, public=True)
    assert [r["method"] for r in rows] == ["alone:a", "alone:b", "public-only"]
    control = rows[-1]
    assert control["num_statements"] == 0 and control["epsilon"] == 0.0 and control["privacy_block"] is None
    assert control["test"]["num_triples"] == rows[0]["test"]["num_triples"]  # the same test statements
    if privacy:  # the holders are private, the control reads nothing private
        assert all(r["privacy_block"]["mode"] == "full" for r in rows[:2])
    rows.clear()
    module._alone(args, _cfg(data, *privacy), "label", tmp_path, rows.append, holders=False, public=True)
    assert [r["method"] for r in rows] == ["public-only"]  # --methods public-only: the control alone
