"""Two small graphs that overlap on some entities: ``tiny_blp`` split by relation into two BLP directories."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "tiny_blp"


def write_two_graphs(root: Path) -> tuple[Path, Path]:
    """``root/a`` (statements of two relations) and ``root/b`` (the others); same texts, dev and test."""
    lines = (FIXTURE / "train.tsv").read_text().splitlines()
    relations = sorted({line.split("\t")[1] for line in lines})
    dirs = []
    for name, keep in (("a", set(relations[:2])), ("b", set(relations[2:]))):
        d = root / name
        d.mkdir(parents=True)
        for f in ("entity2text.txt", "relation2text.txt", "dev.tsv", "test.tsv"):
            shutil.copy(FIXTURE / f, d / f)
        (d / "train.tsv").write_text("\n".join(x for x in lines if x.split("\t")[1] in keep) + "\n")
        dirs.append(d)
    return dirs[0], dirs[1]


def holders_dict(a: Path, b: Path, **exchange) -> dict:
    train = {"epochs": 2, "batch_size": 32, "lr": 0.05, "valid_max_triples": 0}
    holder = {"model": "transe", "data": {"split": "transductive"}, "model_overrides": {"dim": 8}, "train": train}
    return {
        "exchange": {"rounds": 2, "fine_tune_epochs": 1, **exchange},
        "holders": [
            {"name": "alpha", "dataset": str(a), "seed": 1, **holder},
            {"name": "beta", "dataset": str(b), "seed": 2, **holder},
        ],
    }


@pytest.fixture(scope="session")
def holders():
    """:func:`holders_dict`: the two parties' settings with the exchange's keys given."""
    return holders_dict


@pytest.fixture
def two_graphs(tmp_path) -> tuple[Path, Path]:
    return write_two_graphs(tmp_path / "data")


@pytest.fixture(scope="module")
def module_graphs(tmp_path_factory) -> tuple[Path, Path]:
    """:func:`two_graphs` made once for a module whose tests only read them."""
    return write_two_graphs(tmp_path_factory.mktemp("graphs"))
