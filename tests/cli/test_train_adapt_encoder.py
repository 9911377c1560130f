"""``textkg train --adapt-encoder`` and its automatic default (issue 54, item 1: :mod:`textkg.pipeline.adaptation`).

The toy ontology of ``test_place.py`` (24 training ``is_a`` pairs) is trained once with a two-step adaptation of the
packaged MiniLM: ``config.json`` names the adapted folder (in the tests' temporary textkg cache) and the resolved
steps, ``metrics.json`` says what ran, ``textkg place`` reads the same encoder, and a resumed run fine-tunes
nothing. The resolution's rules are checked with a stand-in for the fine-tuning: the automatic default adapts
only a non-private inductive run of the packaged MiniLM with enough ``is_a`` pairs, a number asked for where it
cannot apply is an error, and no other command silently skips one.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from test_place import _place, _toy_ontology

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.models.presets import get_preset
from textkg.pipeline import adaptation
from textkg.training.config import DataConfig, PrivacyConfig, RunConfig, TrainConfig

TRAIN = ["train", "--split", "inductive", "--model", "fused-transe", "--dim", "16", "--epochs", "2"]
TRAIN += ["--batch-size", "8", "--seed", "0", "--no-progress"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    return _toy_ontology(tmp_path_factory.mktemp("adapt") / "toy")


@pytest.fixture(scope="module")
def adapted_run(toy, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("adapt-run") / "run"
    assert main([*TRAIN, "--dataset", str(toy), "--adapt-encoder", "2", "--out", str(out)]) == 0
    return out


def _cfg(toy: Path, *, steps: int | None = None, split: str = "inductive", **privacy) -> RunConfig:
    return RunConfig(
        data=DataConfig(dataset=str(toy), split=split),
        model=get_preset("fused-transe"),
        train=TrainConfig(adapt_encoder_steps=steps),
        privacy=PrivacyConfig(**privacy),
    )


class _FakeAdapt:
    """Stands in for :func:`textkg.training.adapt_encoder.adapt_encoder`: records its call, writes a folder."""

    def __init__(self, root: Path) -> None:
        self.calls: list[dict] = []
        self.root = root

    def __call__(self, kg, split, **kwargs) -> dict:
        self.calls.append({"kg": kg, "split": split, **kwargs})
        out = self.root / f"adapted-{len(self.calls)}"
        out.mkdir(parents=True)
        (out / "textkg_adapt.json").write_text("{}")
        frozen = {"frozen_layers": kwargs["frozen_layers"]} if kwargs.get("frozen_layers") else {}  # as the real one
        return {"out": str(out), "steps": kwargs["max_steps"], "cached": False, **frozen}


@pytest.fixture()
def fake(monkeypatch, tmp_path) -> _FakeAdapt:
    stand_in = _FakeAdapt(tmp_path / "cache")
    monkeypatch.setattr("textkg.training.adapt_encoder.adapt_encoder", stand_in)
    return stand_in


def test_the_run_keeps_its_adapted_encoder_and_place_reads_it(adapted_run, tmp_path):
    config = json.loads((adapted_run / "config.json").read_text())
    assert config["model"]["encoder_kwargs"]["model_name_or_path"] == "encoder"  # inside the run: it travels
    assert config["train"]["adapt_encoder_steps"] == 2
    block = json.loads((adapted_run / "metrics.json").read_text())["encoder_adaptation"]
    assert block["steps"] == 2 and block["why"].startswith("asked")
    cached = Path(block["folder"])
    from textkg.training.features import default_cache_dir

    # in the textkg cache, though the dataset was given as an absolute path (it once landed beside the data)
    assert cached.parent == Path(default_cache_dir()) / "adapted" and cached.name.startswith("toy-inductive-")
    assert json.loads((cached / "textkg_adapt.json").read_text())["sources"] == ["is_a"]
    kept = sorted(p.name for p in (adapted_run / "encoder").iterdir())
    assert "model.safetensors" in kept and "modules.json" not in kept and "textkg_adapt.json" not in kept
    assert (adapted_run / "encoder" / "model.safetensors").read_bytes() == (cached / "model.safetensors").read_bytes()
    moved = tmp_path / "elsewhere"  # another machine: the cache folder is gone, the run still opens
    shutil.copytree(adapted_run, moved)
    saved = tmp_path / "cached"
    shutil.move(cached, saved)
    try:
        terms = tmp_path / "new.tsv"
        terms.write_text("NEW:1\tdachshund\ta domestic dog breed, a loyal dog that barks\n")
        code, rows = _place(moved, tmp_path, "--terms", str(terms), "--top-k", "3")
        assert code == 0 and [r["term"] for r in rows] == ["NEW:1"] * 3
    finally:
        shutil.move(saved, cached)


def test_place_reads_the_descriptions_training_encoded(adapted_run, tmp_path, monkeypatch):
    """The run's ``encoder/`` copy has the adapted folder's content, so its features come from the cache the
    training filled: only the new term's texts are encoded (before, every existing term's again)."""
    from textkg.encoders.bert import BertEncoder

    encode = BertEncoder._encode_batch
    seen: list[str] = []

    def spy(self, texts):
        if self._explicit_path is not None:  # the adapted MiniLM, not the packaged one of the word vectors
            seen.extend(texts)
        return encode(self, texts)

    monkeypatch.setattr(BertEncoder, "_encode_batch", spy)
    terms = tmp_path / "new.tsv"
    terms.write_text("NEW:9\tbasset\ta short-legged hound with long ears that bays\n")  # in no other test
    code, rows = _place(adapted_run, tmp_path, "--terms", str(terms), "--top-k", "3")
    assert code == 0 and len(rows) == 3
    assert seen and all("basset" in t or "long ears" in t for t in seen), seen


def test_an_opened_run_reads_its_own_encoder_and_fine_tunes_nothing(adapted_run, monkeypatch):
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.run_dir import open_run

    monkeypatch.setattr("textkg.training.adapt_encoder.adapt_encoder", lambda *a, **k: pytest.fail("fine-tuned again"))
    cfg = open_run(adapted_run).config
    assert cfg.model.encoder_kwargs["model_name_or_path"] == str((adapted_run / "encoder").resolve())
    assert prepare(cfg).model is not None


def test_automatic_needs_enough_is_a_pairs(toy, fake, monkeypatch):
    cfg, loaded, record = adaptation.resolve_adaptation(_cfg(toy))
    assert fake.calls == [] and cfg.train.adapt_encoder_steps == 0 and "24 training is_a pairs" in record["why"]
    assert loaded is not None  # the graph read to decide is handed to prepare
    assert "model_name_or_path" not in (cfg.model.encoder_kwargs or {})
    monkeypatch.setattr(adaptation, "AUTO_MIN_PAIRS", 24)
    cfg, _, record = adaptation.resolve_adaptation(_cfg(toy))
    (call,) = fake.calls
    assert call["max_steps"] == adaptation.AUTO_STEPS and call["sources"] == ("is_a",) and call["seed"] == 0
    # the measured recipe: a learning rate above sentence-transformers' 2e-5, the lower layers as packaged
    assert call["lr"] == adaptation.AUTO_LR == 2.4e-4 and call["frozen_layers"] == adaptation.AUTO_FROZEN_LAYERS == 3
    assert call["batch_size"] == adaptation.AUTO_BATCH_SIZE == 64  # 128 lowered real additions (UBERON)
    assert record["frozen_layers"] == 3 and record["lr"] is None  # the fake's summary has no lr
    assert cfg.train.adapt_encoder_steps == adaptation.AUTO_STEPS and record["why"] == "automatic"
    assert cfg.model.encoder_kwargs["model_name_or_path"] == record["folder"] == str(fake.root / "adapted-1")
    # the fine-tuning reads the training partition only: every held-out entity is outside its training terms
    held = set(range(call["kg"].num_entities)) - set(call["split"].train_entities.tolist())
    assert held and not held & set(call["split"].train[:, [0, 2]].flatten().tolist())


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"split": "transductive"}, "transductive split"),
        ({"encoder": "glove-bow"}, "text encoder is 'glove-bow'"),
        ({"encoder_model": "elsewhere"}, "the encoder is already"),
    ],
)
def test_where_it_cannot_apply_automatic_is_off_and_a_number_is_an_error(toy, fake, tmp_path, change, reason):
    def cfg(steps):
        base = _cfg(toy, steps=steps, split=change.get("split", "inductive"))
        model = base.model
        if "encoder" in change:
            model = type(model).from_dict({**model.to_dict(), "encoder": change["encoder"], "encoder_kwargs": {}})
        if "encoder_model" in change:
            other = tmp_path / change["encoder_model"]
            other.mkdir(exist_ok=True)
            kwargs = {**model.encoder_kwargs, "model_name_or_path": str(other)}
            model = type(model).from_dict({**model.to_dict(), "encoder_kwargs": kwargs})
        return dataclasses.replace(base, model=model)

    resolved, _, record = adaptation.resolve_adaptation(cfg(None))
    assert resolved.train.adapt_encoder_steps == 0 and reason in record["why"]
    with pytest.raises(ConfigError, match=reason) as err:
        adaptation.resolve_adaptation(cfg(5))
    assert err.value.field == "train.adapt_encoder_steps"
    assert fake.calls == []


def test_a_private_run_refuses_a_number_and_never_adapts(toy, fake):
    with pytest.raises(ConfigError, match="not offered under --privacy full") as err:
        _cfg(toy, steps=5, mode="full", target_epsilon=1.0, private_size=100)
    assert err.value.field == "train.adapt_encoder_steps"
    cfg, _, record = adaptation.resolve_adaptation(_cfg(toy, mode="public-only", confidential_fraction=0.5))
    assert cfg.train.adapt_encoder_steps == 0 and "private run" in record["why"] and fake.calls == []


def test_off_means_off(toy, fake):
    cfg = _cfg(toy, steps=0)
    assert adaptation.resolve_adaptation(cfg)[0] == cfg and fake.calls == []


@pytest.mark.parametrize("bad", [-1, True, 1.5, "100", adaptation_max := 20_001])
def test_steps_are_checked(bad):
    with pytest.raises(ConfigError) as err:
        TrainConfig(adapt_encoder_steps=bad)
    assert err.value.field == "train.adapt_encoder_steps"
    assert adaptation_max == 20_001


def test_no_other_command_skips_an_asked_adaptation(toy):
    """``prepare`` (tune, federate, a cross-graph party) refuses steps no ``textkg train`` resolved."""
    from textkg.pipeline.prepared import prepare

    with pytest.raises(ConfigError, match="only textkg train adapts") as err:
        prepare(_cfg(toy, steps=5))
    assert err.value.field == "train.adapt_encoder_steps"


def test_cli_error_is_exit_2_without_traceback(toy, tmp_path, capsys):
    out = tmp_path / "run"
    argv = [*TRAIN, "--dataset", str(toy), "--split", "transductive", "--adapt-encoder", "3", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "adapt_encoder_steps" in err and "transductive" in err and "Traceback" not in err
    assert not out.exists()


def test_the_printed_summary_says_which_encoder_placed_the_terms(adapted_run, toy, tmp_path, capsys):
    capsys.readouterr()
    for steps, reading in (
        ("0", "not adapted to this ontology: off (--adapt-encoder 0)"),
        ("2", "MiniLM adapted to this ontology's is_a pairs (2 steps; --adapt-encoder 0: off)"),  # the cached one
    ):
        out = tmp_path / f"steps-{steps}"
        assert main([*TRAIN, "--dataset", str(toy), "--adapt-encoder", steps, "--out", str(out)]) == 0
        assert json.loads(capsys.readouterr().out)["placement"]["encoder"] == reading


def test_a_relative_cache_folder_is_read_once_so_the_run_keeps_its_adapted_encoder(monkeypatch, tmp_path):
    """``TEXTKG_CACHE_DIR=cache textkg train ...`` once wrote the relative ``cache/adapted/...`` into the run's
    config.json without copying the encoder into ``RUN/encoder``, and the run could not be opened again (a run
    names only absolute, trusted folders): the cache root is made absolute where it is read."""
    from textkg.pipeline.run_files import adapted_folder
    from textkg.training.adapt_encoder import SUMMARY_FILE, cache_folder
    from textkg.training.features import default_cache_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TEXTKG_CACHE_DIR", "cache")
    assert default_cache_dir() == tmp_path / "cache"
    folder = cache_folder(default_cache_dir(), "adapted", "hpo", "inductive", "0123456789abcdef")  # as adapt writes
    folder.mkdir(parents=True)
    (folder / SUMMARY_FILE).write_text("{}")
    assert folder.is_absolute() and adapted_folder(str(folder))  # so the run copies it and names RUN/encoder
    monkeypatch.setenv("TEXTKG_CACHE_DIR", "")  # set but empty: the default, as before
    assert default_cache_dir() == Path.home() / ".cache" / "textkg"
