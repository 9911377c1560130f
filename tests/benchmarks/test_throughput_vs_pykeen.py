"""benchmarks/throughput_vs_pykeen.py: one tiny textkg-only round writes the JSON the docs read."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "throughput_vs_pykeen.py"
TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"


def test_a_textkg_round_records_epochs_evaluation_and_load(tmp_path):
    spec = importlib.util.spec_from_file_location("throughput_vs_pykeen", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "throughput.json"
    module.main(
        ["--data", str(TINY), "--repeats", "1", "--epochs", "2", "--dim", "8", "--batch-size", "64"]
        + ["--num-negatives", "4", "--textkg-validate", "--out", str(out)]
    )
    record = json.loads(out.read_text())
    (run,) = record["runs"]
    assert run["tool"] == "textkg" and run["threads"] == 1
    assert len(run["epoch_seconds"]) == len(run["epoch_cpu_seconds"]) == len(run["valid_seconds"]) == 2
    assert len(run["loadavg_before"]) == 3 and run["eval_seconds"] > 0
    assert 0 < run["test_mrr"] <= 1 and 0 <= run["test_hits10"] <= 1
    summary = record["summary"]["textkg"]
    assert summary["runs"] == 1 and summary["test_mrr"] == run["test_mrr"]
    assert record["settings"]["num_negatives"] == 4
