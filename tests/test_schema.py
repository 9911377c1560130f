"""The one validator of JSON from outside the process (:mod:`textkg.schema`, issue 51): each rule, and errors that
name the file and the JSON path."""

from __future__ import annotations

import math

import pytest

from textkg.schema import AnyJSON, Bool, List, Num, Obj, OneOf, SchemaError, Str, load_json, validate

SPEC = Obj(
    {
        "name": Str(max_len=8, choices=("a", "b")),
        "weight": Num(low=0, high=1, low_open=True),
        "steps": Num(low=0, high=10, integer=True, nullable=True),
        "flags": List(Bool(), max_len=2),
        "notes": AnyJSON(max_str=10, max_len=3),
        "either": OneOf((Num(), Str())),
    },
    required=("name", "weight"),
    max_bytes=200,
)
GOOD = {"name": "a", "weight": 0.5, "steps": None, "flags": [True], "notes": {"x": [1, "y"]}, "either": "z"}


def test_a_value_that_fits_is_returned_unchanged():
    assert validate(GOOD, SPEC) is GOOD
    assert load_json('{"name": "b", "weight": 1}', SPEC) == {"name": "b", "weight": 1}


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"name": "c"}, "root.name", "one of a, b"),
        ({"weight": 0}, "root.weight", "in (0, 1]"),
        ({"weight": math.inf}, "root.weight", "finite"),
        ({"weight": True}, "root.weight", "finite number"),
        ({"weight": 10**400}, "root.weight", "401 digits"),
        ({"steps": 1.5}, "root.steps", "an integer"),
        ({"flags": [True, False, True]}, "root.flags", "at most 2 items"),
        ({"flags": [1]}, "root.flags[0]", "true or false"),
        ({"notes": "x" * 11}, "root.notes", "at most 10 characters"),
        ({"notes": [[[[1]]]] * 4}, "root.notes", "at most 3 items"),
        ({"either": [1]}, "root.either", "a finite number or a string"),
        ({"extra": 1}, "root.extra", "unknown key"),
        ({"notes": ["y" * 10] * 3, "either": "w" * 150}, "root.either", "larger than 200 bytes"),
    ],
)
def test_each_rule_names_the_file_and_field(change, field, message):
    with pytest.raises(SchemaError) as err:
        validate({**GOOD, **change}, SPEC, file="f.json", path="root")
    assert message in err.value.message and err.value.file == "f.json" and err.value.field == field


def test_a_missing_required_key_and_depth():
    with pytest.raises(SchemaError, match="missing") as err:
        validate({"name": "a"}, SPEC)
    assert err.value.field == "weight"
    deep: list = []
    for _ in range(40):
        deep = [deep]
    with pytest.raises(SchemaError, match="nested more than 32"):
        validate(deep, AnyJSON())


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": NaN}', "NaN is not JSON"),
        ("{", "not valid JSON"),
        (b"\xff", "UTF-8"),
        ("[" + "1," * 100 + "1]", "larger than 64 bytes"),
    ],
)
def test_load_json_refuses_before_anything_recursive_reads_it(text, message):
    with pytest.raises(SchemaError, match=message):
        load_json(text, file="x.json", max_bytes=64 if "1," in str(text) else 1 << 20)
