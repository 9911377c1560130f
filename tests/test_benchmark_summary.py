"""docs/benchmarks.md opens with a summary a reader takes in at a glance (issue 55), and it is true.

At most 20 rows, one per question; each gives one number (bold, with its unit), the simplest alternative's
number beside it, the experiment that reproduces both (a config under ``benchmarks/experiments/``), the
results file and the JSON pointers (RFC 6901) of the two numbers, and the date. Every number must equal its
file's value as rounded in the text (a number printed with d decimals may differ by half a unit of the
last place; ``%`` is a fraction in the file), and the file must be one the experiment says it reproduces.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = ROOT / "docs" / "benchmarks.md"
RESULTS = ROOT / "benchmarks" / "results"
MAX_ROWS = 20
HEADER = "| question | answer | simplest alternative | experiment | source | date |"
NUMBER = re.compile(r"[+\-−]?\d[\d,]*(?:\.\d+)?")
EXPERIMENT = re.compile(r"^\[`([a-z0-9_]+)`\]\(\.\./benchmarks/experiments/\1\.yaml\)$")


@dataclass(frozen=True)
class Printed:
    """A number as the text prints it: its value, its decimals and whether it is a percentage."""

    value: float
    decimals: int
    percent: bool

    def equals(self, stored: float) -> bool:
        shown = 100 * stored if self.percent else stored
        return abs(self.value - shown) <= 0.5 * 10.0**-self.decimals + 1e-9


def printed(match: re.Match, text: str) -> Printed:
    raw = match.group(0).replace(",", "").replace("−", "-")
    decimals = len(raw.split(".")[1]) if "." in raw else 0
    return Printed(float(raw), decimals, text[match.end() :].lstrip().startswith("%"))


def summary_rows(text: str) -> list[list[str]]:
    """The cells of the table under ``## Summary``, one list per row."""
    lines = text.splitlines()
    start = lines.index("## Summary")
    header = next(i for i in range(start, len(lines)) if lines[i].startswith("| question |"))
    assert lines[header] == HEADER, lines[header]
    rows = []
    for line in lines[header + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def pointer(data, path: str):
    """The value at a JSON pointer (RFC 6901: ``~1`` is ``/``, ``~0`` is ``~``; a list takes an index)."""
    assert path.startswith("/"), path
    for token in path[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        data = data[int(token)] if isinstance(data, list) else data[token]
    return data


def check_row(cells: list[str]) -> None:
    """Every claim of one summary row (raises AssertionError naming what is wrong)."""
    question, answer, alternative, experiment, source, date = cells
    numbers = list(NUMBER.finditer(answer))
    assert len(numbers) == 1, f"{question}: one number in the answer, not {answer!r}"
    assert re.search(r"\*\*[^*]*\d[^*]*\*\*", answer), f"{question}: the answer's number is bold"
    first = NUMBER.match(alternative)
    assert first, f"{question}: the alternative starts with its number: {alternative!r}"
    spans = re.findall(r"`([^`]+)`", source)
    assert spans and spans[0].endswith(".json"), f"{question}: the source starts with a results file: {source!r}"
    paths = spans[1:]
    assert len(paths) == 2 and all(p.startswith("/") for p in paths), f"{question}: two JSON pointers: {source!r}"
    data = json.loads((RESULTS / spans[0]).read_text(encoding="utf-8"))
    for shown, path in ((printed(numbers[0], answer), paths[0]), (printed(first, alternative), paths[1])):
        stored = pointer(data, path)
        assert isinstance(stored, int | float), f"{question}: {spans[0]} {path} is {stored!r}"
        assert shown.equals(stored), f"{question}: {shown.value} printed, {stored} in {spans[0]} {path}"
    name = EXPERIMENT.match(experiment)
    assert name, f"{question}: the experiment is a link to its config: {experiment!r}"
    config = ROOT / "benchmarks" / "experiments" / f"{name[1]}.yaml"
    assert config.is_file(), f"{question}: no {config.relative_to(ROOT)}"
    results = yaml.safe_load(config.read_text(encoding="utf-8"))["results"]
    assert f"benchmarks/results/{spans[0]}" in results, f"{question}: {name[1]} does not reproduce {spans[0]}"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", date), f"{question}: a date, not {date!r}"


ROWS = summary_rows(SUMMARY.read_text(encoding="utf-8"))


def check_table(rows: list[list[str]]) -> None:
    """At most 20 rows of six cells, each question once."""
    assert 0 < len(rows) <= MAX_ROWS, f"{len(rows)} rows: the summary holds at most {MAX_ROWS}"
    assert all(len(row) == 6 for row in rows), [row[0] for row in rows if len(row) != 6]
    questions = [row[0] for row in rows]
    assert len(set(questions)) == len(questions)


def test_the_summary_has_at_most_twenty_rows_one_per_question():
    check_table(ROWS)


@pytest.mark.parametrize("cells", ROWS, ids=[row[0][:60] for row in ROWS])
def test_each_row_equals_its_results_file_and_names_its_experiment(cells):
    check_row(cells)


def test_the_check_catches_a_wrong_number_a_second_number_and_a_missing_experiment():
    record = json.loads((ROOT / "benchmarks" / "results" / "main_command_hpo.json").read_text(encoding="utf-8"))
    answer = record["placement_test"]["combined"]["mrr"]  # the recorded run's, whatever the run of the day
    good = [
        "q",
        f"**{answer:.3f}** MRR",
        "0.275 MRR: TF-IDF",
        "[`main_command`](../benchmarks/experiments/main_command.yaml)",
        "`main_command_hpo.json` `/placement_test/combined/mrr` `/placement_test/tfidf-nn/mrr`",
        "2026-11-28",
    ]
    check_row(good)
    for index, bad in [
        (1, f"**{answer + 0.003:.3f}** MRR"),  # not the file's number
        (1, f"**{answer:.3f}** MRR (0.536 without the re-ranker)"),  # a second number: history is on the topic page
        (2, "0.300 MRR: TF-IDF"),
        (3, "[`no_such`](../benchmarks/experiments/no_such.yaml)"),
        (3, "[`readme_place`](../benchmarks/experiments/readme_place.yaml)"),  # does not reproduce the file
        (4, "`main_command_hpo.json` `/placement_test/combined/mrr`"),
    ]:
        with pytest.raises(AssertionError):
            check_row([*good[:index], bad, *good[index + 1 :]])


def test_more_than_twenty_rows_fail(tmp_path):
    row = "| q | **1** s | 2 s | e | `f.json` `/a` `/b` | 2026-01-01 |"
    rows = [row.replace("| q |", f"| q{i} |") for i in range(21)]
    text = "\n".join(["## Summary", "", HEADER, "|---|---|---|---|---|---|", *rows, ""])
    check_table(summary_rows(text)[:20])
    with pytest.raises(AssertionError, match="21 rows"):
        check_table(summary_rows(text))


def test_a_percentage_is_a_fraction_in_the_file():
    text = "**+16.2 %** over"
    assert printed(NUMBER.search(text), text).equals(0.16219572700395135)
    text = "−0.2 %: control"
    assert printed(NUMBER.match(text), text).equals(-0.0019106382118396783)
