"""Issue 36, item 1: a crafted run folder must never run code or read beyond the run.

On 7add106 ``config.json`` could name a pickled flair char LM (``encoder_kwargs.forward_model``);
``evaluate``/``predict``/``export``/``place`` reached flair's ``torch.load(weights_only=False)`` and
the pickle's ``__reduce__`` ran a shell command. Here the adversary plays the same run folder:
each command must exit 2 with a clear message, and the marker file the pickle would create must
not exist.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from security_helpers import copy_run, write_pickle_bomb

import textkg
from textkg.cli.main import main


def _craft(tiny_run: Path, tmp_path: Path, kwargs: dict, *, name: str = "crafted") -> tuple[Path, Path]:
    run = copy_run(tiny_run, tmp_path / name)
    marker = tmp_path / "PWNED"
    for stem in ("fwd", "bwd"):
        write_pickle_bomb(run / f"{stem}.pt", marker)
    cfg = json.loads((run / "config.json").read_text())
    cfg["model"].update({"encoder": "flair", "fusion": "text", "encoder_kwargs": kwargs})
    (run / "config.json").write_text(json.dumps(cfg))
    return run, marker


COMMANDS = {
    "evaluate": lambda run, tmp: ["evaluate", str(run)],
    "predict": lambda run, tmp: ["predict", str(run), "--description", "a new phenotype"],
    "export": lambda run, tmp: ["export", str(run), "--out", str(tmp / "export")],
    "place": lambda run, tmp: ["place", str(run), "--terms", str(_terms(tmp)), "--out", str(tmp / "placed.tsv")],
}


def _terms(tmp: Path) -> Path:
    path = tmp / "terms.tsv"
    path.write_text("NEW:1\tnew term\ta new phenotype\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    "kwargs",
    [
        {"forward_model": "fwd.pt", "backward_model": "bwd.pt"},  # inside the run, but a pickle
        {"forward_model": "{run}/fwd.pt", "backward_model": "{run}/bwd.pt"},  # absolute
        {"forward_model": "../crafted/fwd.pt", "backward_model": "bwd.pt"},  # climbs out
        {"forward_model": "news-forward", "backward_model": "news-backward"},  # flair's named pickles
    ],
    ids=["relative-pickle", "absolute", "dotdot", "flair-name"],
)
def test_a_pickled_char_lm_named_by_a_run_never_runs(tiny_run, tmp_path, capsys, command, kwargs):
    run, marker = _craft(tiny_run, tmp_path, {})
    kwargs = {k: v.replace("{run}", str(run)) for k, v in kwargs.items()}
    _craft_kwargs(run, kwargs)
    try:
        code = main(COMMANDS[command](run, tmp_path))
    except Exception as exc:
        code = repr(exc)
    err = capsys.readouterr().err
    assert not marker.exists(), "the crafted pickle ran"
    assert code == 2, err
    assert "Traceback" not in err and "config.json" in err and "forward_model" in err


def _craft_kwargs(run: Path, kwargs: dict) -> None:
    cfg = json.loads((run / "config.json").read_text())
    cfg["model"]["encoder_kwargs"] = kwargs
    (run / "config.json").write_text(json.dumps(cfg))


def test_a_symlink_out_of_the_run_is_refused(tiny_run, tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    run, marker = _craft(tiny_run, tmp_path, {})
    (outside / "lm.safetensors").write_bytes(b"x")
    (outside / "lm.json").write_text("{}")
    (run / "lm.safetensors").symlink_to(outside / "lm.safetensors")
    (run / "lm.json").symlink_to(outside / "lm.json")
    _craft_kwargs(run, {"forward_model": "lm.safetensors", "backward_model": "lm.safetensors"})
    assert main(["evaluate", str(run)]) == 2
    assert "symlink" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"word_embeddings": "{run}/evil.kv"}, "word_embeddings"),  # a gensim pickle
        ({"cache_dir": "{run}/cache"}, "cache_dir"),  # a cache folder holding a crafted .kv pickle
        ({"model_name_or_path": "{run}/bert"}, "model_name_or_path"),  # a folder beyond the run
        ({"model_name_or_path": "evil/not-cached"}, "model_name_or_path"),  # a hub id: never downloaded
    ],
)
def test_other_files_a_run_names_are_refused(tiny_run, tmp_path, capsys, kwargs, field):
    run, marker = _craft(tiny_run, tmp_path, {})
    _craft_kwargs(run, {k: v.replace("{run}", str(run)) for k, v in kwargs.items()})
    assert main(["evaluate", str(run)]) == 2
    err = capsys.readouterr().err
    assert field in err and "config.json" in err and "Traceback" not in err
    assert not marker.exists()


def test_an_autoencoder_path_outside_the_run_is_refused(tiny_run, tmp_path, capsys):
    run = copy_run(tiny_run, tmp_path / "run")
    cfg = json.loads((run / "config.json").read_text())
    cfg["model"]["text_module_kwargs"] = {"path": "/etc/passwd.pt"}
    (run / "config.json").write_text(json.dumps(cfg))
    assert main(["evaluate", str(run)]) == 2
    assert "text_module_kwargs.path" in capsys.readouterr().err


def test_a_crafted_autoencoder_cannot_allocate_gigabytes(tmp_path):
    import torch

    from textkg.encoders.lstm_ae import load_autoencoder
    from textkg.errors import ConfigError

    path = tmp_path / "lstm_ae.pt"
    torch.save({"config": {"token_dim": 10**9, "code_dim": 10**9, "num_layers": 1}, "state_dict": {}}, path)
    with pytest.raises(ConfigError, match="out of bounds"):
        load_autoencoder(path)


def test_federate_resume_checks_the_files_a_run_names(tmp_path, capsys):
    """``federate --resume`` opens the run through open_run (issue 40): the same rules hold."""
    run = tmp_path / "fed"
    run.mkdir()
    marker = tmp_path / "PWNED"
    write_pickle_bomb(run / "fwd.pt", marker)
    kwargs = {"forward_model": str(run / "fwd.pt"), "backward_model": str(run / "fwd.pt")}
    config = {"model": {"encoder": "flair", "fusion": "text", "encoder_kwargs": kwargs}}
    (run / "config.json").write_text(json.dumps({"textkg_version": textkg.__version__, **config}))
    (run / "federated.json").write_text(json.dumps({"settings": {}}))
    (run / "checkpoint.pt").write_bytes(b"")
    try:
        code = main(["federate", "--resume", str(run), "--no-progress"])
    except Exception as exc:  # on 7add106 the loader crashes after the pickle ran
        code = repr(exc)
    assert not marker.exists(), "the crafted pickle ran"
    assert code == 2 and "forward_model" in capsys.readouterr().err


def test_training_refuses_a_model_folder_its_run_could_not_name(tmp_path, capsys):
    """A local transformer folder outside the trusted places: refused before anything is written."""
    from security_helpers import TINY

    folder = tmp_path / "my-bert"
    folder.mkdir()
    out = tmp_path / "run"
    argv = ["train", "--dataset", str(TINY), "--model", "fused-transe", "--encoder-model", str(folder)]
    assert main([*argv, "--epochs", "1", "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "TEXTKG_MODEL_DIRS" in err and "model_name_or_path" in err
    assert not out.exists()


def test_a_deeply_nested_config_json_exits_2(tiny_run, tmp_path, capsys):
    run = copy_run(tiny_run, tmp_path / "run")
    (run / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    assert main(["evaluate", str(run)]) == 2
    err = capsys.readouterr().err
    assert "nested too deeply" in err and "Traceback" not in err
