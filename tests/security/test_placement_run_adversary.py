"""An adversary's pass over parent support and ``textkg evaluate RUN --placement`` (issue 54, 2026-12-07).

A received run folder is crafted: each test plays one attack found on a118628 and checks the trust rule (exit 2
naming the file and field, no traceback, nothing written, nothing read or written outside the run):

- ``metrics.json`` a link to a JSON file outside the run: ``evaluate --placement`` read it and wrote its whole
  content (a credentials file) into the run's own ``metrics.json``;
- a failing ``--placement`` after ``--link-rerank``: the link re-ranker was already saved (half-written);
- a crafted ``placement_selection.valid`` (missing, a list, a string MRR): a traceback after ``place`` had
  written its outputs;
- ``train.seed`` beyond 64 bits: an overflow traceback in every command that opened the run;
- a ``cross_encoder`` link in the run, or a release bundle: ``evaluate --placement`` wrote through the one
  and replaced the bundle's folder;
- a names-only combination weighing a vote it does not give: an error naming neither the file nor the field;
- a key given twice (``{"weight": 0.3, "weight": 0}``), a key with terminal escapes, an oversized file.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from test_place import _toy_ontology, toy_run  # noqa: F401  (the module fixture)

from textkg.cli.main import main


def _copy(run: Path, tmp_path: Path, name: str = "run") -> Path:
    out = tmp_path / name
    shutil.copytree(run, out)
    return out


def _edit(path: Path, fn) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def _terms(tmp_path: Path) -> Path:
    path = tmp_path / "new.tsv"
    path.write_text("NEW:1\tdachshund\ta domestic dog breed, a loyal dog that barks\n", encoding="utf-8")
    return path


def _place(run: Path, tmp_path: Path, capsys) -> tuple[int, str, Path]:
    out = tmp_path / "placed.tsv"
    code = main(["place", str(run), "--terms", str(_terms(tmp_path)), "--out", str(out)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err, out


def test_evaluate_placement_never_copies_a_linked_metrics_json_into_the_run(toy_run, tmp_path, capsys):  # noqa: F811
    run = _copy(toy_run, tmp_path)
    secret = tmp_path / "credentials.json"
    secret.write_text(json.dumps({"auths": {"registry.example": {"auth": "TOP-SECRET-TOKEN"}}}))
    (run / "metrics.json").unlink()
    (run / "metrics.json").symlink_to(secret)
    assert main(["evaluate", str(run), "--placement", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and "metrics.json" in err and "Traceback" not in err
    assert (run / "metrics.json").is_symlink() and "TOP-SECRET-TOKEN" in secret.read_text()
    # place and predict read the run's files the same way: a linked file is refused, never read
    code, err, out = _place(run, tmp_path, capsys)
    assert code == 2 and "symbolic link" in err and not out.exists()


def test_a_linked_config_json_is_refused_not_read(toy_run, tmp_path, capsys):  # noqa: F811
    run = _copy(toy_run, tmp_path)
    outside = tmp_path / "outside-config.json"
    shutil.move(run / "config.json", outside)
    (run / "config.json").symlink_to(outside)
    code, err, out = _place(run, tmp_path, capsys)
    assert code == 2 and "symbolic link" in err and "config.json" in err and not out.exists()


def test_a_failing_placement_leaves_metrics_json_as_it_was(tmp_path, capsys):
    data = _toy_ontology(tmp_path / "toy")
    for f in data.iterdir():  # no is_a: the run has no placement task
        f.write_text(f.read_text().replace("\tis_a\t", "\tmember_of\t"))
    run = tmp_path / "run"
    argv = [
        "train",
        "--dataset",
        str(data),
        "--split",
        "inductive",
        "--model",
        "fused-transe",
        "--encoder",
        "glove-bow",
    ]
    argv += ["--dim", "16", "--epochs", "2", "--batch-size", "8", "--seed", "0", "--no-progress", "--out", str(run)]
    assert main(argv) == 0
    before = (run / "metrics.json").read_bytes()
    capsys.readouterr()
    assert main(["evaluate", str(run), "--link-rerank", "--placement", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "--placement needs" in err and "Traceback" not in err
    assert (run / "metrics.json").read_bytes() == before


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda s: s.pop("valid"), "valid"),
        (lambda s: s.__setitem__("valid", [1, 2]), "valid"),
        (lambda s: s["valid"].__setitem__("combined", {"mrr": "high"}), "valid.combined.mrr"),
        (lambda s: s["valid"].__setitem__("combined", [0.5]), "valid.combined"),
    ],
    ids=["missing", "list", "string_mrr", "list_entry"],
)
def test_a_crafted_selection_valid_exits_2_and_writes_nothing(toy_run, tmp_path, capsys, mutate, field):  # noqa: F811
    run = _copy(toy_run, tmp_path)

    def edit(metrics):
        selection = metrics["test"]["placement_selection"]
        selection["chosen"] = "combined"
        mutate(selection)

    _edit(run / "metrics.json", edit)
    code, err, out = _place(run, tmp_path, capsys)
    assert code == 2 and "metrics.json" in err and f"test.placement_selection.{field}" in err, err
    assert not out.exists()


def test_a_null_validation_mrr_reads_as_not_recorded(toy_run, tmp_path, capsys):  # noqa: F811
    """``null`` is what strict JSON writes for a NaN MRR: the reading says so instead of failing."""
    run = _copy(toy_run, tmp_path)

    def edit(metrics):
        selection = metrics["test"]["placement_selection"]
        selection["chosen"] = "combined"
        selection["valid"]["combined"]["mrr"] = None

    _edit(run / "metrics.json", edit)
    code, err, out = _place(run, tmp_path, capsys)
    assert code == 0, err
    assert "not recorded" in json.loads(capsys.readouterr().out or "{}").get("method_reading", "not recorded")
    assert out.is_file()


def test_the_reading_names_the_parent_support_it_applies(toy_run, tmp_path, capsys):  # noqa: F811
    run = _copy(toy_run, tmp_path)

    def edit(metrics):
        selection = metrics["test"]["placement_selection"]
        selection["chosen"] = "combined"
        selection["combined"]["parent_support"] = {"weight": 0.2, "root": -2.0}

    _edit(run / "metrics.json", edit)
    from textkg.place import Placer

    assert "lifted by 0.2 x its best parent's score" in Placer(run).method_reading()


@pytest.mark.parametrize("key, value", [("weight", 100), ("root", 100), ("root", -11)])
def test_a_parent_support_far_beyond_what_training_writes_is_refused(toy_run, tmp_path, capsys, key, value):  # noqa: F811
    run = _copy(toy_run, tmp_path)

    def edit(metrics):
        selection = metrics["test"]["placement_selection"]
        selection["chosen"] = "combined"
        selection["combined"]["parent_support"] = {"weight": 0.1, "root": -2.0, key: value}

    _edit(run / "metrics.json", edit)
    code, err, out = _place(run, tmp_path, capsys)
    assert code == 2 and f"parent_support.{key}" in err and not out.exists()


def test_a_key_given_twice_is_refused(toy_run, tmp_path, capsys):  # noqa: F811
    """The parser keeps the last of two equal keys: ``{"weight": 0.3, "weight": 0}`` would read as no support."""
    run = _copy(toy_run, tmp_path)
    text = (run / "metrics.json").read_text()
    assert '"placement_selection": {' in text  # the first one is the test block's (the names-only twin follows)
    (run / "metrics.json").write_text(
        text.replace('"placement_selection": {', '"placement_selection": {"chosen": "model", ', 1)
    )
    code, err, out = _place(run, tmp_path, capsys)
    assert code == 2 and "'chosen' is given twice" in err and "metrics.json" in err and not out.exists()


def test_an_unknown_key_with_terminal_escapes_is_printed_escaped(toy_run, tmp_path, capsys):  # noqa: F811
    run = _copy(toy_run, tmp_path)
    _edit(run / "metrics.json", lambda m: m["test"]["placement_selection"].__setitem__("\x1b]0;pwned\x07x", 1))
    code, err, out = _place(run, tmp_path, capsys)
    assert code == 2 and "\x1b" not in err and "\\x1b" in err and not out.exists()


def test_an_oversized_run_json_is_refused_before_it_is_read(toy_run, tmp_path, capsys, monkeypatch):  # noqa: F811
    import textkg.pipeline.run_dir as run_dir

    run = _copy(toy_run, tmp_path)
    monkeypatch.setattr(run_dir, "RUN_JSON_MAX_BYTES", (run / "metrics.json").stat().st_size - 1)
    code, err, out = _place(run, tmp_path, capsys)
    assert code == 2 and "metrics.json" in err and "a run's JSON file may hold" in err and not out.exists()


@pytest.mark.parametrize(
    "where, key, value",
    [
        ("train", "seed", 10**30),
        ("train", "seed", 2**64),
        ("train", "seed", -1),
        ("data", "split_seed", 2**64),
        ("train", "valid_max_triples", -1),  # was accepted silently
        ("train", "eval_batch_size", 0),  # was refused as field 'batch_size', no file, deep in the evaluation
    ],
)
def test_a_crafted_seed_or_count_exits_2(toy_run, tmp_path, capsys, where, key, value):  # noqa: F811
    run = _copy(toy_run, tmp_path)
    _edit(run / "config.json", lambda c: c[where].__setitem__(key, value))
    code, err, out = _place(run, tmp_path, capsys)
    assert code == 2 and f"{where}.{key}" in err and "config.json" in err and not out.exists(), err


def test_evaluate_placement_never_writes_through_a_cross_encoder_link(toy_run, tmp_path, capsys):  # noqa: F811
    run = _copy(toy_run, tmp_path)
    _edit(run / "config.json", lambda c: c["train"].__setitem__("placement_cross_encoder", 1))
    outside = tmp_path / "outside"
    outside.mkdir()
    (run / "cross_encoder").symlink_to(outside, target_is_directory=True)
    before = (run / "metrics.json").read_bytes()
    assert main(["evaluate", str(run), "--placement", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and "cross_encoder" in err and "Traceback" not in err
    assert list(outside.iterdir()) == [] and not [p for p in run.iterdir() if p.name.startswith(".cross_encoder")]
    assert (run / "metrics.json").read_bytes() == before


def test_evaluate_placement_never_rewrites_a_bundle(toy_run, tmp_path, capsys, monkeypatch):  # noqa: F811
    """A bundle's files are listed with their hashes in RELEASE.json: its cross_encoder/ and metrics.json stay.
    The registry is patched so that the toy dataset counts as a registered name, as ``hpo`` is for a real bundle."""
    import textkg.data

    real = textkg.data.list_datasets
    data = json.loads((toy_run / "config.json").read_text())["data"]["dataset"]
    monkeypatch.setattr(textkg.data, "list_datasets", lambda: (*real(), data))
    bundle = _copy(toy_run, tmp_path, "bundle")
    _edit(bundle / "config.json", lambda c: c["train"].__setitem__("placement_cross_encoder", 1))
    (bundle / "cross_encoder").mkdir()
    (bundle / "cross_encoder" / "RELEASED").write_text("a file of the released bundle")
    (bundle / "RELEASE.json").mkdir()  # a folder counts as the manifest for reading: so too for writing
    before = (bundle / "metrics.json").read_bytes()
    assert main(["evaluate", str(bundle), "--placement", "--device", "cpu"]) == 0, capsys.readouterr().err
    assert (bundle / "cross_encoder" / "RELEASED").exists()
    assert sorted(p.name for p in bundle.iterdir() if p.name.startswith("cross_encoder")) == ["cross_encoder"]
    assert (bundle / "metrics.json").read_bytes() == before


def test_a_names_only_vote_weight_without_its_vote_names_the_file_and_field(toy_run, tmp_path, capsys):  # noqa: F811
    run = _copy(toy_run, tmp_path)
    _edit(
        run / "metrics.json",
        lambda m: m["test"].__setitem__(
            "placement_names_only",
            {
                "placement_selection": {
                    "chosen": "combined",
                    "valid": {"combined": {"mrr": 0.5}},
                    "combined": {"weights": {"vote": 1.0}},
                }
            },
        ),
    )
    terms = tmp_path / "bare.tsv"
    terms.write_text("NEW:3\tsunflower\n", encoding="utf-8")
    out = tmp_path / "p.tsv"
    assert main(["place", str(run), "--terms", str(terms), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "metrics.json" in err and "test.placement_names_only.placement_selection.combined.weights" in err, err
    assert not out.exists() and "Traceback" not in err


# ---- a second pass over the fixes (the adversary again, 2026-12-07): the config's own values ----------------------

ESCAPES = "x\x1b]0;PWNED\x07\x1b[2J\u202eevil\u2028y"


def _evaluate(run: Path, capsys) -> tuple[int, str]:
    code = main(["evaluate", str(run), "--device", "cpu"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("where", ["train", "data", "privacy", "model", "encoder_kwargs", "value"])
def test_terminal_escapes_in_a_crafted_config_never_reach_the_terminal(toy_run, tmp_path, capsys, where):  # noqa: F811
    """An unknown key (or a path value) with escape sequences was printed raw in the error: a crafted run could
    retitle or clear the user's terminal, or reverse its text (U+202E)."""
    run = _copy(toy_run, tmp_path)

    def edit(config):
        if where == "value":
            config["data"]["inductive_dir"] = ESCAPES
        elif where == "encoder_kwargs":
            config["model"]["encoder_kwargs"][ESCAPES] = 1
        else:
            config[where][ESCAPES] = 1

    _edit(run / "config.json", edit)
    code, err = _evaluate(run, capsys)
    assert code == 2 and "\x1b" not in err and "\u202e" not in err and "\u2028" not in err, ascii(err)
    assert "\\x1b" in err


@pytest.mark.parametrize(
    "model",
    [
        {"fusion_kwargs": {"init": 10**30}},
        {"fusion_kwargs": {"init": [10**400, 0]}},
        {"fusion_kwargs": {"init": []}},
        {"fusion_kwargs": {"init": "ab"}},
        {"encoder": "char-ngrams", "encoder_kwargs": {"dim": 10**30}},
        {"encoder": "char-ngrams", "encoder_kwargs": {"dim": 10**12}},
        {"text_module": "lstm-ae", "text_module_kwargs": {"code_dim": 10**30}},
        {"text_module": "lstm-ae", "text_module_kwargs": {"epochs": 10**12}},  # pre-trained on opening: ran for ever
        {"text_module": "lstm-ae", "text_module_kwargs": {"num_layers": 10**30}},
        {"encoder": "char-ngrams", "encoder_kwargs": {"ns": [3]}},  # weights that do not fit the model it builds
    ],
    ids=[
        "init_int",
        "init_huge",
        "init_empty",
        "init_str",
        "ngrams_overflow",
        "ngrams_148TB",
        "ae_code_dim",
        "ae_epochs",
        "ae_layers",
        "weights_misfit",
    ],
)
def test_a_crafted_model_config_exits_2_promptly(toy_run, tmp_path, capsys, model):  # noqa: F811
    run = _copy(toy_run, tmp_path)
    _edit(run / "config.json", lambda c: c["model"].update(model))
    code, err = _evaluate(run, capsys)
    assert code == 2 and any(where in err for where in ("config.json", "model.", "encoder_kwargs", "best_model")), err
