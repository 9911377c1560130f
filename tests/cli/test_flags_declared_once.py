"""Each config field's flag is declared once (``textkg.cli.flags.TRAIN_FLAGS``) and fills its field
(issue 40, item 3): the flag → field map, the flag's type and its documented default all come from that
one declaration and the dataclass."""

from __future__ import annotations

import dataclasses

import pytest

from textkg.cli.config_loading import FLAG_FIELDS, MODEL_FLAGS, build_run_config
from textkg.cli.flags import SECTIONS, TRAIN_FLAGS
from textkg.cli.main import build_parser
from textkg.cli.reference import leaf_commands

KEYED = [f for f in TRAIN_FLAGS if f.key is not None]
#: a value each text field accepts (numbers and choices are drawn from the declaration)
TEXT = {
    "dataset": "hpo-small",
    "inductive_dir": "ind",
    "description": "short",
    "public_entities": "ids.txt",
    "init_from": "some-run",
    "device": "cpu",
    "orders": "2-64",
    "confidential_relations": "has_phenotype",
    "encoder": "glove-bow",
    "fusion": "concat",
    "unit_entities": "patients.txt",
    "unit_targets": "diagnosed_with",
    "unit_candidates": "diseases.txt",
}

#: the flags a value needs beside it to make a valid config
COMPANIONS = {
    "negatives": ["--loss", "softmax"],
    "pool_size": ["--negatives", "all", "--loss", "softmax"],
    "mode": ["--confidential-fraction", "0.5"],
    "noise_multiplier": ["--privacy", "full"],
    "target_epsilon": ["--privacy", "full"],
    "private_updates": ["--privacy", "confidential", "--confidential-relations", "r", "--target-epsilon", "1"],
    "unit": ["--unit-entities", "patients.txt"],
    "unit_entities": ["--privacy-unit", "entity"],
    "max_statements_per_unit": ["--privacy-unit", "entity", "--unit-entities", "patients.txt"],
    "unit_targets": ["--privacy-unit", "entity", "--unit-entities", "patients.txt"],
    "unit_candidates": ["--privacy-unit", "entity", "--unit-entities", "patients.txt"],
}


def test_every_key_names_a_field_and_every_field_is_mapped_once():
    for flag in KEYED:
        section, name = flag.section_field
        assert name in {f.name for f in dataclasses.fields(SECTIONS[section])}, flag.key
    assert len({f.key for f in KEYED}) == len(KEYED)
    assert len(FLAG_FIELDS) + len(MODEL_FLAGS) == len(KEYED)


def _value(flag, parser):
    action = next(a for a in parser._actions if a.dest == flag.dest)
    if action.choices:
        return [flag.option, list(action.choices)[-1]], list(action.choices)[-1]
    if action.nargs == 0:
        return [flag.option], True
    kind = getattr(action.type, "kind", action.type)  # a NumberFlag (textkg.cli.flags) parses its kind, in range
    if kind is int:
        return [flag.option, "3"], 3
    if kind is float:
        return [flag.option, "0.5"], 0.5
    text = TEXT[flag.section_field[1]]
    return [flag.option, text], text


@pytest.mark.parametrize("flag", KEYED, ids=lambda f: f.option)
def test_the_flag_fills_its_field(flag):
    """``textkg train FLAG VALUE`` puts VALUE at the flag's config key, parsed to the field's type."""
    parser = build_parser()
    train = next(sub for name, sub, _ in leaf_commands(parser) if name == "textkg train")
    argv, expected = _value(flag, train)
    section, name = flag.section_field
    args = parser.parse_args(["train", *argv, *COMPANIONS.get(name, [])])
    if section == "model":
        assert getattr(args, flag.dest) == expected
        return
    cfg = build_run_config(args)
    got = getattr(getattr(cfg, section), name)
    if name in ("confidential_relations", "unit_targets"):
        expected = (expected,)
    assert got == expected and type(got) is type(expected), (flag.option, got)
