"""``description="first-sentence"`` reads entity2text_firstsentence_StAR.txt (and never falls back)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from textkg.data import load_dataset
from textkg.errors import DataError

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"


def test_first_sentence_description(tmp_path):
    d = tmp_path / "tiny"
    shutil.copytree(TINY, d)
    rows = [line.split("\t", 1) for line in (d / "entity2text.txt").read_text().splitlines() if line]
    (d / "entity2text_firstsentence_StAR.txt").write_text(
        "".join(f"{e}\t{name.strip()} -- first sentence of {e}.\n" for e, name in rows)
    )
    kg = load_dataset(d, description="first-sentence")
    assert all(desc.endswith(".") and " -- first sentence of " in desc for desc in kg.entity_descriptions)
    assert kg.info["description_file"].endswith("entity2text_firstsentence_StAR.txt")


def test_first_sentence_without_the_file_is_an_error(tmp_path):
    d = tmp_path / "tiny"
    shutil.copytree(TINY, d)
    with pytest.raises(DataError) as info:
        load_dataset(d, description="first-sentence")
    assert info.value.field == "description"
