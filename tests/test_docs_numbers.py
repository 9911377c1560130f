"""The measured numbers README.md and docs/ state in prose equal the results files they come from (issue 53).

``tests/test_readme_numbers.py`` keeps the README's placement table equal to the recorded run of the main
job; this module does the same for the rest a reader acts on: the ``textkg place`` example table, the
run-to-run ranges, the job's time and memory, the test suite's size and time, and the placement MRRs that
docs/usage.md and docs/limitations.md quote. Each check finds its sentence by a pattern, so a reworded
sentence fails here too: change the pattern with the words, and a number only with its record.

Tolerances are the rounding of the text: an MRR to three decimals (0.0005), a time to the second (0.5 s,
1 s for a stage whose length is a difference of two rounded stage marks), memory to 0.1 GiB.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
MAIN = RESULTS / "main_command_hpo.json"  # the recorded run of the README's main job (its placement table)
TIMING = RESULTS / "main_command.json"  # every timed run of the main job, stage by stage
PLACE = RESULTS / "readme_place.json"  # the README's `textkg place` example (benchmarks/readme_place.py)
PLACE_MANY = RESULTS / "place_1000_terms.json"  # `textkg place` on 1,000 held-out terms (readme_place.py --terms)
SUITE = RESULTS / "test_suite.json"  # the last full run of the test suite on two idle cores
#: The rows of main_command.json the README's time sentence quotes: the idle run of the recorded code, and
#: the same job in a slower hour of the same machine.
TIMED_RUN = "adapted encoder, 2.4e-4, 3 layers frozen, 150 steps, empty caches, 2026-12-06"
MRR = 0.0005 + 1e-9
ORDINALS = {1: "1st", 2: "2nd", 3: "3rd"}


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def prose(name: str) -> str:
    """The file's text with every run of whitespace as one space (a sentence may break across lines)."""
    return re.sub(r"\s+", " ", (ROOT / name).read_text(encoding="utf-8"))


def find(pattern: str, name: str) -> re.Match:
    match = re.search(pattern, prose(name))
    assert match, f"{name}: no sentence matches {pattern!r} (reworded? update the pattern with the words)"
    return match


def seconds(minutes: str, secs: str) -> int:
    return 60 * int(minutes) + int(secs)


def mrr(text: str) -> float:
    return float(text)


# ---- the `textkg place` example ------------------------------------------------------------------------


def readme_place_table() -> list[list[str]]:
    """The cells of the README's `place` example table, one list per term (bold kept)."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| new term | 1st suggestion |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def real_parent_cell(term: dict) -> str:
    """``NAME (Nth)`` for each listed parent among the suggestions, ``NAME (not in the top K)`` otherwise."""
    ranks = {s["parent"]: s["rank"] for s in term["suggestions"]}
    k = len(term["suggestions"])
    cells = []
    for parent in term["listed_parents"]:
        where = ORDINALS.get(ranks[parent["id"]], f"{ranks[parent['id']]}th") if parent["id"] in ranks else None
        cells.append(f"{parent['name']} ({where or f'not in the top {k}'})")
    return "; ".join(cells)


def test_readme_place_example_equals_the_recorded_place_run():
    record = load(PLACE)
    table = readme_place_table()
    assert [row[0] for row in table] == [t["name"] for t in record["terms"]]
    for row, term in zip(table, record["terms"], strict=True):
        shown = [s["name"] if s["listed"] != "yes" else f"**{s['name']}**" for s in term["suggestions"]]
        assert row[1:-1] == shown, (term["name"], row, shown)  # a listed parent is bold
        assert row[-1] == real_parent_cell(term), (term["name"], row[-1])
    summary = record["summary"]
    placeable = summary["placeable_terms"]
    firsts = round(summary["first_suggestion_is_a_listed_parent"] * placeable)
    match = find(r"how often the first suggestion is a listed parent \(here (\d+) of (\d+)\)", "README.md")
    assert (int(match[1]), int(match[2])) == (firsts, placeable)
    match = find(r"recorded in \[?`?benchmarks/results/readme_place\.json`?\]?[^;)]*?; (\d+) s\b", "README.md")
    assert abs(int(match[1]) - record["seconds"]) <= 0.5 + 1e-9, (match[1], record["seconds"])


def test_the_place_record_is_a_run_of_the_readme_job_and_command():
    record = load(PLACE)
    main = load(MAIN)
    assert record["train_command"].removesuffix(" RUN") == main["command"].removesuffix(" runs/quickstart")
    assert "textkg place RUN --obo examples/new_hpo_terms.obo --out placed.tsv --top-k 3" == record["place_command"]
    assert "textkg place runs/quickstart --obo examples/new_hpo_terms.obo --out placed.tsv --top-k 3" in prose(
        "README.md"
    )
    # the run placed its terms with the method the README's table says validation chooses
    assert record["run_placement_test_mrr"]["chosen"] == record["summary"]["method"] == "combined"


def test_place_on_1000_terms_equals_its_record():
    """docs/results/placement.md's cost and quality tables for 1,000 terms, and the index's line quoting them."""
    record, page = load(PLACE_MANY), "docs/results/placement.md"
    assert record["command"].startswith("python benchmarks/readme_place.py --run-dir RUN --terms 1000")
    cost = find(r"\| 1,000 \| \*\*(\d+) s\*\* \| (\d+) CPU-s \| \*\*([\d.]+) GiB\*\* \| (\d+) s \|", page)
    keys = ("seconds", "cpu_seconds", "peak_rss_gib", "seconds_per_1000_terms")
    for shown, key in zip(cost.groups(), keys, strict=True):
        assert abs(float(shown) - record[key]) <= (0.005 if "." in shown else 0.5) + 1e-9, key
    placement = record["placement"]
    rows = {"all 1,000": placement, "846 with a definition": placement["with_definition"]}
    rows[r"154 without \(name only\)"] = placement["without_definition"]
    for label, block in rows.items():
        row = find(rf"\| {label} \| ([\d,]+) \| (?:\*\*)?([\d.]+)(?:\*\*)? \| ([\d.]+) % \| ([\d.]+) % \|", page)
        assert int(row[1].replace(",", "")) == block["num_pairs"], label
        assert abs(mrr(row[2]) - block["mrr"]) <= MRR, label
        assert abs(float(row[3]) - 100 * block["hits@1"]) <= 0.05 + 1e-9, label
        assert abs(float(row[4]) - 100 * block["hits@10"]) <= 0.05 + 1e-9, label
    line = find(
        r"1,000 new terms in one `textkg place` call [^*]*\*\*(\d+) s\*\* wall, ([\d.]+) GiB peak RSS, MRR@10 ([\d.]+)",
        "docs/benchmarks.md",
    )
    assert abs(int(line[1]) - record["seconds"]) <= 0.5 + 1e-9 and abs(float(line[2]) - record["peak_rss_gib"]) <= 0.005
    assert abs(mrr(line[3]) - placement["mrr"]) <= MRR


# ---- the main job: time, memory, run-to-run ranges ------------------------------------------------------


def timing_rows() -> dict[str, dict]:
    return {row["label"]: row for row in load(TIMING)["rows"]}


def stage_at(row: dict, prefix: str) -> int:
    return next(s["at_s"] for s in row["stages"] if s["stage"].startswith(prefix))


def test_readme_job_time_and_memory_equal_the_timed_runs():
    timed = timing_rows()[TIMED_RUN]
    # the timed run: the idle, empty-cache run of the README's command; main_command_hpo.json keeps its placement
    # and commit under `timed_run`
    record = load(MAIN)["timed_run"]
    assert abs(timed["placement_mrr"]["combined"] - record["combined_mrr"]) <= MRR
    assert record["commit"].startswith(timed["commit"][:7])
    pattern = (
        r"It took (\d+) min (\d+) s on two idle CPU cores with empty caches \((\d+) min (\d+) s of it adapting "
        r"MiniLM to the ontology and (\d+) min (\d+) s encoding every description, both cached for the next run; "
        r"three epochs (\d+) min (\d+) s; evaluation (\d+) min (\d+) s\), about twice as long on busy cores, and "
        r"([\d.]+) GiB of memory"
    )
    m = find(pattern, "README.md")
    adapted = stage_at(timed, "reading")  # the adaptation's stage lines come first, then reading and encoding
    encoded = stage_at(timed, "graph ready")
    evaluating = stage_at(timed, "evaluating")
    assert abs(seconds(m[1], m[2]) - timed["wall_s"]) <= 0.5 + 1e-9, (m[0][:40], timed["wall_s"])
    assert abs(seconds(m[3], m[4]) - adapted) <= 1, adapted
    assert abs(seconds(m[5], m[6]) - (encoded - adapted)) <= 1, encoded - adapted
    assert abs(seconds(m[7], m[8]) - (evaluating - stage_at(timed, "training"))) <= 1
    assert abs(seconds(m[9], m[10]) - (timed["wall_s"] - evaluating)) <= 1
    assert abs(float(m[11]) - timed["peak_rss_gib"]) <= 0.05 + 1e-9


def model_alone_runs() -> list[float]:
    """The trained model's placement MRR in every recorded run of the README's command."""
    main = load(MAIN)
    values = [row["placement_mrr"]["model"] for row in load(TIMING)["rows"] if "placement_mrr" in row]
    values += main["run_to_run"]["model_mrr"]  # the range of the five runs before the results files
    values += main["seeds"]["model_mrr"].values()
    values.append(load(PLACE)["run_placement_test_mrr"]["model"])
    return values


def test_readme_run_to_run_ranges_equal_the_recorded_runs():
    main = load(MAIN)
    seeds = main["seeds"]
    m = find(
        r"three seeds of this command before the candidates' synonyms joined the re-ranker \(`--seed 0`, `1`, `2`; "
        r"the seed also orders the adaptation's batches\) gave "
        r"([\d.]+) / ([\d.]+) / ([\d.]+) for the combination with the re-ranker .*? and ([\d.]+) / ([\d.]+) / "
        r"([\d.]+) from names only; the model alone gave ([\d.]+) / ([\d.]+) / ([\d.]+)",
        "README.md",
    )
    for i, seed in enumerate("012"):
        assert abs(mrr(m[1 + i]) - seeds["combined_mrr"][seed]) <= MRR, seed
        assert abs(mrr(m[4 + i]) - seeds["names_only_combined_mrr"][seed]) <= MRR, seed
        assert abs(mrr(m[7 + i]) - seeds["model_mrr"][seed]) <= MRR, seed
    # seed 0 is the recorded run (synonym_seeds); its row "batches of 128" is batch_seeds' seed 0, the option not taken
    assert main["synonym_seeds"]["combined_mrr"]["0"] == main["placement_test"]["combined"]["mrr"]
    assert seeds["model_mrr"]["0"] == main["placement_test"]["model"]["mrr"]
    assert main["batch_seeds"]["combined_mrr"]["0"] == main["placement_test"]["combined-batches-of-128"]["mrr"]


# ---- the test suite -------------------------------------------------------------------------------------


def test_readme_test_suite_sentence_equals_the_recorded_suite_run():
    record = load(SUITE)
    assert record["tests"] == record["passed"] + record["skipped"]
    m = find(
        r"([\d,]+) tests in (\d+) min (\d+) s on two idle cores( \((\d+) min (\d+) s in a slower hour\))?", "README.md"
    )
    assert int(m[1].replace(",", "")) == record["tests"], (m[1], record["tests"])
    assert abs(seconds(m[2], m[3]) - record["seconds"]) <= 0.5 + 1e-9, (m[0], record["seconds"])
    if m[4]:
        assert abs(seconds(m[5], m[6]) - record["slower_hour"]["seconds"]) <= 0.5 + 1e-9


# ---- docs/ quoting the recorded run ---------------------------------------------------------------------


def test_usage_and_limitations_quote_the_recorded_run():
    placement = load(MAIN)["placement_test"]
    m = find(r"on the README's run .*?placement MRR ([\d.]+) \(the model alone: ([\d.]+)[;)]", "docs/usage.md")
    assert abs(mrr(m[1]) - placement["combined"]["mrr"]) <= MRR, m[1]
    assert abs(mrr(m[2]) - placement["model"]["mrr"]) <= MRR, m[2]
    m = find(
        r"the trained model alone beats description nearest neighbour but not the parents of the nearest terms "
        r"\(([\d.]+) on the README's run against ([\d.]+) and ([\d.]+) MRR",
        "docs/limitations.md",
    )
    assert abs(mrr(m[1]) - placement["model"]["mrr"]) <= MRR, m[1]
    assert abs(mrr(m[2]) - placement["description-nn"]["mrr"]) <= MRR, m[2]
    assert abs(mrr(m[3]) - placement["parent-of-nearest"]["mrr"]) <= MRR, m[3]
    for name in ("README.md", "docs/usage.md", "docs/limitations.md"):  # issue 53: the stale pair
        assert not re.search(r"\b0\.355\b.*\b0\.547\b", prose(name)), name
