"""A crafted run's adapted text encoder (``RUN/encoder``, issue 54 item 1; docs/security.md).

``textkg train --adapt-encoder`` keeps the ontology-adapted MiniLM in the run folder and ``config.json`` names it
``encoder`` (``encoder-N`` for a ``concat`` part); every command that opens a run checks it
(:func:`textkg.pipeline.run_files.resolve_run_files`,
:func:`textkg.encoders.cross_encoder.check_encoder_folder`). Here the adversary hands a curator such a run (or its
release bundle) with the name, the folder or one of its files crafted: each must make the command exit 2 with a
message naming the file or field, print no traceback, write no output, and run no pickle. On eda3b01 a
``tokenizer_file`` or ``vocab_file`` in ``tokenizer_config.json`` made the tokenizer read a file outside the run
(a Regex pre-tokenizer the check had refused came back that way); a second ``tokenizer.N.json``, a subfolder or a
pickle sat beside the checked files unread by the check; a ``sentence-transformers`` encoder read ``encoder``; a
``config.json`` asking for 100,000 layers allocated until memory ran out; a ``post_processor``'s own token ids, a
config's ``hidden_act``, ``pad_token_id`` or ``return_dict``, a ``max_tokens`` over the model's positions, or a
``device`` the machine lacks stopped ``place`` with a traceback; a NaN ``layer_norm_eps`` placed terms on NaN scores.
"""

from __future__ import annotations

import importlib
import json
import pickle
import shutil
import sys
from pathlib import Path

import pytest
from run_copies import copy_run, edit_json, link_or_copy, rewrite

from textkg.cli.main import main
from textkg.encoders import cross_encoder
from textkg.pipeline.run_files import ENCODER_FILES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))  # the toy ontology of tests/cli/test_place.py
_toy_ontology = importlib.import_module("test_place")._toy_ontology

TRAIN = ["train", "--split", "inductive", "--model", "fused-transe", "--dim", "16", "--epochs", "2"]
TRAIN += ["--batch-size", "8", "--seed", "0", "--no-progress"]
_REGEX = {"type": "Split", "pattern": {"Regex": "(.*a){25}"}, "behavior": "Isolated", "invert": False}


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    return _toy_ontology(tmp_path_factory.mktemp("crafted-encoder") / "toy")


@pytest.fixture(scope="module")
def adapted_run(toy, tmp_path_factory) -> Path:
    """The toy run with a two-step adapted MiniLM in ``RUN/encoder`` (the tests' conftest points TEXTKG_CACHE_DIR
    at a temporary folder). Copy it before tampering (:func:`run_copies.copy_run`)."""
    out = tmp_path_factory.mktemp("crafted-encoder-run") / "run"
    assert main([*TRAIN, "--dataset", str(toy), "--adapt-encoder", "2", "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["model"]["encoder_kwargs"]["model_name_or_path"] == "encoder"
    return out


class _Marker:
    """Unpickling this creates ``path``: proof that a loader ran the folder's code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def _terms(tmp_path: Path, description: str = "a domestic dog breed, a loyal dog that barks") -> Path:
    path = tmp_path / "new.tsv"
    path.write_text(f"NEW:1\tdachshund\t{description}\n", encoding="utf-8")
    return path


def _refused(run: Path, tmp_path: Path, capsys, *names: str, terms: Path | None = None) -> str:
    """``place`` exits 2 naming each of ``names``, prints no traceback, writes no output and runs no pickle."""
    out = tmp_path / "placed.tsv"
    capsys.readouterr()
    code = main(["place", str(run), "--terms", str(terms or _terms(tmp_path)), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and all(name in err for name in names), err
    assert not out.exists() and not list(tmp_path.glob(".placed.tsv*"))
    assert not (tmp_path / "pickle-ran").exists(), "a pickle in the crafted run ran"
    return err


# --- the crafts: run -> None, each applied to a fresh copy


def _run_config(edit):
    return lambda run: edit_json(run / "config.json", lambda c: edit(c["model"]))


def _name(value: str):
    return _run_config(lambda m: m["encoder_kwargs"].update(model_name_or_path=value))


def _file(name: str, edit):
    return lambda run: edit_json(run / "encoder" / name, edit)


def _config(**changes):
    return _file("config.json", lambda c: c.update(changes))


def _tokenizer(edit):
    return _file("tokenizer.json", edit)


def _tokenizer_config(**changes):
    return _file("tokenizer_config.json", lambda c: c.update(changes))


def _weights(edit):
    def tamper(run: Path) -> None:
        from safetensors.torch import load_file, save_file

        path = run / "encoder" / "model.safetensors"
        state = load_file(str(path))
        path.unlink()
        edit(state)
        save_file(state, str(path))

    return tamper


def _rename_encoder(new: str):
    def tamper(run: Path) -> None:
        shutil.move(run / "encoder", run / new)
        _name(new)(run)

    return tamper


def _encoder_is_a_file(run: Path) -> None:
    shutil.rmtree(run / "encoder")
    (run / "encoder").write_text("{}")


def _symlinked_folder(run: Path) -> None:
    outside = run.parent / "elsewhere"
    shutil.move(run / "encoder", outside)
    (run / "encoder").symlink_to(outside, target_is_directory=True)


def _symlinked_tokenizer(run: Path) -> None:
    outside = run.parent / "outside.json"
    shutil.copy(run / "encoder" / "tokenizer.json", outside)
    (run / "encoder" / "tokenizer.json").unlink()
    (run / "encoder" / "tokenizer.json").symlink_to(outside)


def _outside_tokenizer(run: Path) -> None:
    """``tokenizer_file`` names a copy outside the run holding a Regex pre-tokenizer (which the check refuses in the
    run's own tokenizer.json): eda3b01 loaded the outside one."""
    outside = run.parent / "outside-tokenizer.json"
    data = json.loads((run / "encoder" / "tokenizer.json").read_text(encoding="utf-8"))
    outside.write_text(json.dumps({**data, "pre_tokenizer": _REGEX}), encoding="utf-8")
    _tokenizer_config(tokenizer_file=str(outside))(run)


def _outside_vocab(run: Path) -> None:
    (run / "encoder" / "tokenizer.json").unlink()  # the slow tokenizer reads vocab_file
    _tokenizer_config(vocab_file="/etc/passwd")(run)


def _second_tokenizer(run: Path) -> None:
    """A ``tokenizer.1.0.json`` the check never read, chosen by ``fast_tokenizer_files``."""
    data = json.loads((run / "encoder" / "tokenizer.json").read_text(encoding="utf-8"))
    (run / "encoder" / "tokenizer.1.0.json").write_text(json.dumps({**data, "pre_tokenizer": _REGEX}))
    _tokenizer_config(fast_tokenizer_files=["tokenizer.1.0.json"])(run)


def _pickle_beside(run: Path) -> None:
    (run / "encoder" / "pytorch_model.bin").write_bytes(pickle.dumps(_Marker(run.parent / "pickle-ran")))


def _pickle_instead(run: Path) -> None:
    (run / "encoder" / "model.safetensors").unlink()
    _pickle_beside(run)


def _template_folder(run: Path) -> None:
    (run / "encoder" / "additional_chat_templates").mkdir()
    (run / "encoder" / "additional_chat_templates" / "big.jinja").write_text("{{ x }}" * 1000)


def _modules_json(run: Path) -> None:
    (run / "encoder" / "modules.json").write_text(
        json.dumps([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}])
    )


def _special_ids(ids):
    def edit(t: dict) -> None:
        t["post_processor"]["special_tokens"]["[CLS]"]["ids"] = ids

    return _tokenizer(edit)


def _type_id(t: dict) -> None:
    t["post_processor"]["single"][1]["Sequence"]["type_id"] = 7


def _many_specials(t: dict) -> None:
    t["post_processor"]["single"] = [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}] * 600 + [
        {"Sequence": {"id": "A", "type_id": 0}}
    ]


def _replace_normalizer(t: dict) -> None:
    replace = {"type": "Replace", "pattern": {"String": "a"}, "content": "dog " * 100_000}
    t["normalizer"] = {"type": "Sequence", "normalizers": [t["normalizer"], replace]}


def _new_pad_token(run: Path) -> None:
    """A padding token the vocabulary lacks: the tokenizer adds it, with an id past the model's embeddings."""
    _file("special_tokens_map.json", lambda s: s.update(pad_token="[NEWPAD]"))(run)
    _tokenizer_config(pad_token="[NEWPAD]")(run)


def _sentence_transformers(model: dict) -> None:
    model["encoder"] = "sentence-transformers"


def _concat_part(run: Path) -> None:
    shutil.copytree(run / "encoder", run / "encoder-1", copy_function=link_or_copy)
    parts = [{"name": "sentence-transformers", "model_name_or_path": "encoder-1"}, {"name": "glove-bow"}]
    _run_config(lambda m: m.update(encoder="concat", encoder_kwargs={"parts": parts}))(run)


def _nan(state: dict) -> None:
    state["encoder.layer.0.output.dense.weight"][0, 0] = float("nan")


def _resized(state: dict) -> None:
    import torch

    state["encoder.layer.0.output.dense.weight"] = torch.zeros(384, 10)


CRAFTED = {
    # what config.json names
    "folder-missing": (lambda run: shutil.rmtree(run / "encoder"), ("config.json", "model_name_or_path")),
    "folder-is-a-file": (_encoder_is_a_file, ("config.json", "model_name_or_path")),
    "folder-symlinked-out-of-the-run": (_symlinked_folder, ("model_name_or_path", "symlink")),
    "name-climbs-out": (_name("encoder/../.."), ("model_name_or_path",)),
    "name-dot-slash": (_name("./encoder"), ("model_name_or_path",)),
    "name-trailing-slash": (_name("encoder/"), ("model_name_or_path",)),
    "name-trailing-newline": (_rename_encoder("encoder\n"), ("model_name_or_path",)),
    "name-encoder-0": (_rename_encoder("encoder-0"), ("model_name_or_path",)),
    "name-encoder-999-missing": (_name("encoder-999"), ("model_name_or_path",)),
    "read-by-sentence-transformers": (_run_config(_sentence_transformers), ("model_name_or_path", "sentence-trans")),
    "concat-part-read-by-sentence-transformers": (_concat_part, ("parts[0].model_name_or_path",)),
    "device-this-machine-lacks": (
        _run_config(lambda m: m["encoder_kwargs"].update(device="cuda:99")),
        ("config.json", "model.encoder_kwargs.device"),
    ),
    "device-meta": (_run_config(lambda m: m["encoder_kwargs"].update(device="meta")), ("encoder_kwargs.device",)),
    # what the folder holds
    "symlinked-tokenizer": (_symlinked_tokenizer, ("tokenizer.json", "symlink")),
    "pickle-beside-the-safetensors": (_pickle_beside, ("pytorch_model.bin",)),
    "pickle-instead-of-the-safetensors": (_pickle_instead, ("pytorch_model.bin",)),
    "subfolder-of-templates": (_template_folder, ("additional_chat_templates",)),
    "second-tokenizer-file": (_second_tokenizer, ("tokenizer.1.0.json",)),
    "modules-json": (_modules_json, ("modules.json",)),
    # config.json
    "auto-map": (_config(auto_map={"AutoModel": "evil.Model"}), ("config.json", "auto_map")),
    "trust-remote-code": (_config(trust_remote_code=True), ("config.json", "trust_remote_code")),
    "other-model-type": (_config(model_type="gpt2"), ("config.json", "model_type")),
    "other-architecture": (_config(architectures=["BertForMaskedLM"]), ("config.json", "architectures")),
    "vocab-size-bomb": (_config(vocab_size=2 * 10**9), ("model.safetensors", "embeddings.word_embeddings.weight")),
    "intermediate-size-bomb": (
        _config(intermediate_size=10**9),
        ("model.safetensors", "encoder.layer.0.intermediate.dense.weight"),
    ),
    "layers-bomb": (_config(num_hidden_layers=100_000), ("config.json", "num_hidden_layers")),
    "fewer-positions": (_config(max_position_embeddings=4), ("model.safetensors", "position_embeddings")),
    "unknown-activation": (_config(hidden_act="evil"), ("config.json", "evil")),
    "pad-id-outside": (_config(pad_token_id=10**6), ("config.json", "BertModel")),
    "tuple-outputs": (_config(return_dict=False), ("config.json", "return_dict")),
    "nan-layer-norm": (_config(layer_norm_eps=float("nan")), ("config.json", "not finite")),
    # tokenizer_config.json
    "tokenizer-file-outside-the-run": (_outside_tokenizer, ("tokenizer_config.json", "tokenizer_file")),
    "vocab-file-outside-the-run": (_outside_vocab, ("tokenizer_config.json", "vocab_file")),
    "init-inputs": (_tokenizer_config(init_inputs=["/etc/passwd"]), ("tokenizer_config.json", "init_inputs")),
    "tokenizer-class-gpt2": (_tokenizer_config(tokenizer_class="GPT2TokenizerFast"), ("tokenizer_class",)),
    "config-tokenizer-class": (_config(tokenizer_class="TransfoXLTokenizer"), ("config.json", "tokenizer_class")),
    "tokenizer-auto-map": (_tokenizer_config(auto_map={"AutoTokenizer": ["evil.Tok", None]}), ("auto_map",)),
    # tokenizer.json
    "tokenizer-not-json": (lambda run: rewrite(run / "encoder" / "tokenizer.json", "{oops"), ("tokenizer.json",)),
    "regex-pre-tokenizer": (_tokenizer(lambda t: t.update(pre_tokenizer=_REGEX)), ("tokenizer.json", "Regex")),
    "replace-normalizer": (_tokenizer(_replace_normalizer), ("tokenizer.json", "normalizer", "Replace")),
    "unigram-model": (_tokenizer(lambda t: t["model"].update(type="Unigram")), ("tokenizer.json", "model")),
    "special-id-outside": (_special_ids([10**6]), ("tokenizer.json", "post_processor")),
    "token-type-outside": (_tokenizer(_type_id), ("tokenizer.json", "post_processor")),
    "600-special-tokens": (_tokenizer(_many_specials), ("tokenizer.json", "post_processor")),
    "unk-not-in-vocab": (_tokenizer(lambda t: t["model"].update(unk_token="[NOPE]")), ("model.unk_token",)),
    "endless-words": (
        _tokenizer(lambda t: t["model"].update(max_input_chars_per_word=10**9)),
        ("tokenizer.json", "max_input_chars_per_word"),
    ),
    "vocab-id-outside": (_tokenizer(lambda t: t["model"]["vocab"].update(dog=10**6)), ("tokenizer.json", "vocab")),
    "pad-token-not-in-vocab": (_new_pad_token, ("tokenizer.json", "vocab")),
    # model.safetensors
    "truncated-weights": (
        lambda run: rewrite(run / "encoder" / "model.safetensors", b"\x08" + bytes(64)),
        ("model.safetensors",),
    ),
    "nan-weight": (_weights(_nan), ("model.safetensors", "encoder.layer.0.output.dense.weight")),
    "weight-missing": (
        _weights(lambda s: s.pop("pooler.dense.weight")),
        ("model.safetensors", "not in the file", "pooler.dense.weight"),
    ),
    "weight-of-another-shape": (_weights(_resized), ("model.safetensors", "encoder.layer.0.output.dense.weight")),
}


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_run_encoder_exits_2(adapted_run, tmp_path, capsys, case):
    tamper, names = CRAFTED[case]
    run = copy_run(adapted_run, tmp_path)
    tamper(run)
    _refused(run, tmp_path, capsys, *names)


def test_the_untouched_run_places(adapted_run, tmp_path, capsys):
    """The control: a copy of the run as textkg wrote it places its term (every refusal above is the craft's)."""
    run = copy_run(adapted_run, tmp_path)
    assert sorted(p.name for p in (run / "encoder").iterdir()) == sorted(ENCODER_FILES)
    out = tmp_path / "placed.tsv"
    assert main(["place", str(run), "--terms", str(_terms(tmp_path)), "--out", str(out), "--top-k", "2"]) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == 3


def test_max_tokens_over_the_model_positions_exits_2(adapted_run, tmp_path, capsys):
    """``max_tokens`` 100,000 and a long description: eda3b01 stopped inside the model's position embeddings."""
    run = copy_run(adapted_run, tmp_path)
    _run_config(lambda m: m["encoder_kwargs"].update(max_tokens=100_000))(run)
    _refused(run, tmp_path, capsys, "max_tokens", "512", terms=_terms(tmp_path, "dog " * 2000))


def test_pickles_never_run_even_when_the_folder_asks(adapted_run, tmp_path, capsys, monkeypatch):
    """A ``TransfoXLTokenizer`` (it unpickles its vocabulary when ``TRUST_REMOTE_CODE`` is set, as here) whose
    pickled vocabulary lies beside the run, and a torch pickle as ``pytorch_model.bin``: refused, nothing ran."""
    from security_helpers import write_pickle_bomb

    marker = tmp_path / "pickle-ran"
    monkeypatch.setenv("TRUST_REMOTE_CODE", "True")
    run = copy_run(adapted_run, tmp_path)
    outside = tmp_path / "vocab.pkl"
    outside.write_bytes(pickle.dumps(_Marker(marker)))
    (run / "encoder" / "tokenizer.json").unlink()
    _tokenizer_config(tokenizer_class="TransfoXLTokenizer", pretrained_vocab_file=str(outside))(run)
    _refused(run, tmp_path, capsys, "tokenizer_config.json")
    shutil.rmtree(run)
    run = copy_run(adapted_run, tmp_path)
    write_pickle_bomb(run / "encoder" / "pytorch_model.bin", marker)
    _refused(run, tmp_path, capsys, "pytorch_model.bin")
    assert not marker.exists()


def test_oversized_files_are_refused_before_they_are_read(adapted_run, tmp_path, capsys, monkeypatch):
    run = copy_run(adapted_run, tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(cross_encoder, "MAX_WEIGHTS_BYTES", 1024)
        _refused(run, tmp_path, capsys, "model.safetensors", "MiB")
    monkeypatch.setattr(cross_encoder, "MAX_TOKENIZER_BYTES", (run / "encoder" / "vocab.txt").stat().st_size - 1)
    _refused(run, tmp_path, capsys, "MiB")


COMMANDS = {
    "predict": lambda run, tmp: ["predict", str(run), "--description", "a loyal dog that barks"],
    "evaluate": lambda run, tmp: ["evaluate", str(run)],
    "export": lambda run, tmp: ["export", str(run), "--out", str(tmp / "export")],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_that_opens_the_run_refuses_it(adapted_run, tmp_path, capsys, command):
    run = copy_run(adapted_run, tmp_path)
    _outside_tokenizer(run)
    capsys.readouterr()
    code = main(COMMANDS[command](run, tmp_path))
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "tokenizer_file" in err, err
    assert not (tmp_path / "export").exists()


def test_a_concat_part_names_its_own_adapted_folder(adapted_run, tmp_path):
    """The control of the concat craft: a ``bert`` part naming ``encoder-1`` resolves to that folder of the run."""
    from textkg.pipeline.run_files import resolve_run_files

    run = copy_run(adapted_run, tmp_path)
    shutil.copytree(run / "encoder", run / "encoder-1", copy_function=link_or_copy)
    parts = [{"name": "bert", "pooling": "mean", "model_name_or_path": "encoder-1"}, {"name": "glove-bow"}]
    stored = {"model": {"encoder": "concat", "encoder_kwargs": {"parts": parts}}}
    resolved = resolve_run_files(stored, run, run / "config.json")
    assert resolved["model"]["encoder_kwargs"]["parts"][0]["model_name_or_path"] == str((run / "encoder-1").resolve())


def test_a_release_bundle_carries_the_encoder_and_is_checked_again(adapted_run, toy, tmp_path, capsys):
    """``textkg release`` copies ``encoder/`` (its :data:`ENCODER_FILES`, byte for byte) and the bundle predicts;
    a crafted bundle's encoder is refused as a run's is, and a crafted run is not released."""
    run = copy_run(adapted_run, tmp_path)
    bundle = tmp_path / "bundle"
    assert main(["release", str(run), "--out", str(bundle), "--allow-simulation"]) == 0
    assert sorted(p.name for p in (bundle / "encoder").iterdir()) == sorted(ENCODER_FILES)
    for name in ENCODER_FILES:
        assert (bundle / "encoder" / name).read_bytes() == (run / "encoder" / name).read_bytes()
    predict = ["predict", str(bundle), "--dataset", str(toy), "--description", "a loyal dog that barks"]
    capsys.readouterr()
    assert main([*predict, "--top-k", "2"]) == 0, capsys.readouterr().err
    _outside_tokenizer(bundle)
    capsys.readouterr()
    assert main(predict) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "tokenizer_config.json" in err and "tokenizer_file" in err, err

    _pickle_beside(run)
    out = tmp_path / "bundle-2"
    assert main(["release", str(run), "--out", str(out), "--allow-simulation"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "pytorch_model.bin" in err, err
    assert not out.exists() or not list(out.iterdir())
    assert not (tmp_path / "pickle-ran").exists()


def test_the_cross_encoder_shares_the_tokenizer_checks(tmp_path):
    """The placement cross-encoder's folder goes through the same tokenizer checks: a ``tokenizer_file`` outside
    it, or a ``post_processor`` id outside the model, is refused when it is loaded (on eda3b01 the first read the
    outside file and the second stopped scoring with a traceback)."""
    from textkg.errors import ConfigError

    tokenizer, model = cross_encoder.initial_cross_model(0)
    folder = tmp_path / "cross"
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    assert cross_encoder.load_cross_encoder(folder) is not None
    outside = tmp_path / "outside.json"
    shutil.copy(folder / "tokenizer.json", outside)
    edit_json(folder / "tokenizer_config.json", lambda c: c.update(tokenizer_file=str(outside)))
    with pytest.raises(ConfigError, match="names a file") as err:
        cross_encoder.load_cross_encoder(folder)
    assert err.value.field == "tokenizer_file"
    edit_json(folder / "tokenizer_config.json", lambda c: c.pop("tokenizer_file"))
    edit_json(folder / "tokenizer.json", lambda t: t["post_processor"]["special_tokens"]["[SEP]"].update(ids=[10**6]))
    with pytest.raises(ConfigError, match="outside the model") as err:
        cross_encoder.load_cross_encoder(folder)
    assert err.value.field == "post_processor"


def test_an_empty_or_relative_cache_setting_never_trusts_the_working_folder(monkeypatch, tmp_path):
    """A run may name a folder in the user's textkg cache. ``TEXTKG_CACHE_DIR=""`` once made that cache ``Path("")``,
    the working folder, so a crafted run could name any adapted-looking folder beside it; now an empty setting is
    the default cache and a relative one is one absolute folder, fixed when read."""
    from textkg.errors import ConfigError
    from textkg.pipeline.run_files import _model_folder

    monkeypatch.chdir(tmp_path)
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "textkg_adapt.json").write_text("{}")
    for setting in ("", "."):
        monkeypatch.setenv("TEXTKG_CACHE_DIR", setting)
        if setting == ".":  # the user named this folder as the cache: trusted, as an absolute path only
            assert _model_folder(str(planted), cfg_file=None, field="f") == str(planted)
            continue
        with pytest.raises(ConfigError, match="names the model folder"):
            _model_folder(str(planted), cfg_file=None, field="f")


@pytest.mark.parametrize("bad", ["a/b--c", "a/b..c", "a/b.git", "a/.", "/x\x00", "encoder\x00"])
def test_a_model_name_the_hub_refuses_or_a_nul_is_a_clear_error_not_a_traceback(bad):
    """Found by the adversary review of 2026-12-07: hub-id-shaped names Hugging Face refuses raised
    ``HFValidationError`` from the cache lookup, and a NUL byte ``ValueError`` from ``realpath``, so ``predict``,
    ``place`` and ``evaluate`` stopped with a traceback (exit 1) instead of exit 2."""
    from textkg.errors import ConfigError
    from textkg.pipeline.run_files import _inside_run, _model_folder

    with pytest.raises(ConfigError):
        _model_folder(bad, cfg_file=None, field="f")
    with pytest.raises(ConfigError):
        _inside_run("lm\x00.safetensors", Path("."), suffix=".safetensors", cfg_file=None, field="f")


def test_model_dirs_expand_home_and_never_trust_a_relative_entry(monkeypatch, tmp_path):
    """``TEXTKG_MODEL_DIRS='~/models'`` trusted ``<working folder>/~/models`` and ``' '`` the folder ``' '`` beside
    whatever folder a run was opened from; ``~`` is now expanded and a relative entry ignored, with a warning."""
    from textkg.errors import ConfigError
    from textkg.pipeline.run_files import _model_folder

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    trusted = tmp_path / "home" / "models" / "m"
    trusted.mkdir(parents=True)
    monkeypatch.setenv("TEXTKG_MODEL_DIRS", "~/models")
    assert _model_folder(str(trusted), cfg_file=None, field="f") == str(trusted)
    planted = tmp_path / "rel" / "m"
    planted.mkdir(parents=True)
    monkeypatch.setenv("TEXTKG_MODEL_DIRS", "rel")
    with pytest.warns(UserWarning, match="relative entries ignored"), pytest.raises(ConfigError):
        _model_folder(str(planted), cfg_file=None, field="f")
