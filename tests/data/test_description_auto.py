"""``description="auto"`` (the run default): the richest description file a directory has."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from textkg.data import load_dataset
from textkg.data.blp_format import resolve_description
from textkg.errors import DataError
from textkg.training.config import DataConfig

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"


def _copy(tmp_path, *, long: bool, star: bool) -> Path:
    d = tmp_path / f"tiny-{long}-{star}"
    shutil.copytree(TINY, d)
    if not long:
        (d / "entity2textlong.txt").unlink()
    if star:
        rows = [line.split("\t", 1) for line in (d / "entity2text.txt").read_text().splitlines() if line]
        (d / "entity2text_firstsentence_StAR.txt").write_text(
            "".join(f"{e}\t{name.strip()} -- first sentence of {e}.\n" for e, name in rows)
        )
    return d


@pytest.mark.parametrize(
    ("long", "star", "expected", "file"),
    [
        (True, True, "long", "entity2textlong.txt"),
        (True, False, "long", "entity2textlong.txt"),
        (False, True, "first-sentence", "entity2text_firstsentence_StAR.txt"),
        (False, False, "short", "entity2text.txt"),
    ],
)
def test_auto_takes_the_richest_file_present(tmp_path, long, star, expected, file):
    d = _copy(tmp_path, long=long, star=star)
    assert resolve_description(d, "auto") == expected
    kg = load_dataset(d, description="auto")
    assert kg.info["description"] == expected and kg.info["description_file"].endswith(file)
    assert kg.entity_descriptions == load_dataset(d, description=expected).entity_descriptions


def test_a_named_file_is_still_required(tmp_path):
    d = _copy(tmp_path, long=False, star=False)
    assert resolve_description(d, "short") == "short"
    with pytest.raises(DataError) as info:
        load_dataset(d, description="long")
    assert info.value.field == "description"


def test_runs_default_to_auto_and_the_library_loader_to_names():
    assert DataConfig().description == "auto"
    assert load_dataset(TINY).info["description"] == "short"
