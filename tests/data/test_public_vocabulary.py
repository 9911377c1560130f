"""The public vocabulary of a private run (textkg/data/vocabulary.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from textkg.data import load_dataset, make_split
from textkg.data.vocabulary import public_training_entities
from textkg.errors import DataError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_texts_vocabulary_holds_entities_no_statement_mentions():
    by_statements = load_dataset(FIXTURES / "tiny_blp")
    by_texts = load_dataset(FIXTURES / "tiny_blp", vocabulary="texts")
    assert "/e/unused" not in by_statements.entities and "/e/unused" in by_texts.entities
    assert set(by_statements.relations) <= set(by_texts.relations)


def test_texts_vocabulary_needs_relation_texts():
    with pytest.raises(DataError, match="relation vocabulary"):
        load_dataset(FIXTURES / "tiny_blp_ind", vocabulary="texts")


def test_default_public_entities_are_all_but_the_held_out():
    kg = load_dataset(FIXTURES / "tiny_blp_ind")
    split = make_split(kg, "inductive")
    rows = public_training_entities(kg, split)
    held = set(split.valid_entities.tolist()) | set(split.test_entities.tolist())
    assert set(rows.tolist()) == set(range(kg.num_entities)) - held
    assert set(split.train_entities.tolist()) <= set(rows.tolist())


def test_a_user_list_is_read_and_checked_with_file_line_and_field(tmp_path):
    kg = load_dataset(FIXTURES / "tiny_blp_ind")
    split = make_split(kg, "inductive")
    train_names = [kg.entities[i] for i in split.train_entities.tolist()]
    good = tmp_path / "ents.txt"
    good.write_text("\n".join(train_names[:5]) + "\n")
    assert torch.equal(public_training_entities(kg, split, good), split.train_entities[:5].sort().values)
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{train_names[0]}\n/e/nope\n")
    with pytest.raises(DataError) as err:
        public_training_entities(kg, split, bad)
    assert f"{bad}:2" in str(err.value) and "field 'id'" in str(err.value)
    held = tmp_path / "held.txt"
    held.write_text(kg.entities[int(split.test_entities[0])] + "\n")
    with pytest.raises(DataError, match="held out"):
        public_training_entities(kg, split, held)
    dup = tmp_path / "dup.txt"
    dup.write_text(f"{train_names[0]}\n{train_names[0]}\n")
    with pytest.raises(DataError, match="twice"):
        public_training_entities(kg, split, dup)
