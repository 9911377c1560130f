"""Issue 51, item 1: no pickle from any model folder, whatever its config says.

On 1a0007a a sentence-transformers folder whose ``sentence_bert_config.json`` held
``{"model_args": {"weights_only": false}}`` beside a pickled ``pytorch_model.bin`` made
``textkg predict RUN`` run the pickle: sentence-transformers forwards ``model_args`` to
``AutoModel.from_pretrained``. The folder sat in the local Hugging Face cache under a hub id or under
``$TEXTKG_MODEL_DIRS``, both places a run may name. Here the adversary plays those folders (and
variants: other forwarded keys, pickled-only weights, a ``Dense`` module with a pickle): textkg must
refuse each with exit 2 / a ConfigError naming the file and field, and the marker file the pickle
would create must not exist.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from security_helpers import copy_run, write_pickle_bomb

from textkg.cli.main import main
from textkg.encoders.bert import default_minilm_path
from textkg.errors import ConfigError

HUB_ID = "evil-org/evil-minilm"
SNAPSHOT = "0123456789abcdef0123456789abcdef01234567"


def _bomb_bin(path: Path, marker: Path) -> None:
    """A ``pytorch_model.bin`` that creates ``marker`` when unpickled (``weights_only=False``)."""
    write_pickle_bomb(path, marker)


def _plant(folder: Path, marker: Path, variant: str) -> None:
    """Turn a copy of the packaged MiniLM into the adversary's folder ``variant``."""
    outside = folder.parent / "outside"
    if variant == "weights_only_false":  # the reported attack: only a pickle, and weights_only off
        (folder / "model.safetensors").unlink()
        _bomb_bin(folder / "pytorch_model.bin", marker)
        (folder / "sentence_bert_config.json").write_text(json.dumps({"model_args": {"weights_only": False}}))
    elif variant == "use_safetensors_false":  # safetensors present, but the config asks for the pickle
        _bomb_bin(folder / "pytorch_model.bin", marker)
        args = {"weights_only": False, "use_safetensors": False}
        (folder / "sentence_bert_config.json").write_text(json.dumps({"model_args": args}))
    elif variant == "legacy_config_name":  # the same, in a file name sentence-transformers also reads
        (folder / "model.safetensors").unlink()
        _bomb_bin(folder / "pytorch_model.bin", marker)
        (folder / "sentence_bert_config.json").unlink()
        (folder / "sentence_roberta_config.json").write_text(json.dumps({"model_args": {"weights_only": False}}))
    elif variant == "only_pickle":  # no config trick: a pickled-only folder is refused outright
        (folder / "model.safetensors").unlink()
        _bomb_bin(folder / "pytorch_model.bin", marker)
    elif variant == "tokenizer_args":  # a forwarded key that reads a file beyond the folder
        outside.mkdir()
        shutil.copy(folder / "tokenizer.json", outside / "tokenizer.json")
        args = {"tokenizer_file": str(outside / "tokenizer.json")}
        (folder / "sentence_bert_config.json").write_text(json.dumps({"tokenizer_args": args}))
    elif variant == "config_args":  # a forwarded key that picks code to run (a hub kernel)
        args = {"attn_implementation": "kernels-community/evil"}
        (folder / "sentence_bert_config.json").write_text(json.dumps({"config_args": args}))
    elif variant == "dense_pickle":  # a Dense module whose weights are a pickle
        modules = json.loads((folder / "modules.json").read_text())
        modules.append({"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"})
        (folder / "modules.json").write_text(json.dumps(modules))
        (folder / "3_Dense").mkdir()
        dense = {"in_features": 384, "out_features": 4, "bias": True}
        (folder / "3_Dense" / "config.json").write_text(json.dumps(dense))
        _bomb_bin(folder / "3_Dense" / "pytorch_model.bin", marker)
    else:  # pragma: no cover
        raise AssertionError(variant)


#: variant -> what the refusal names (the file, or the field)
VARIANTS = {
    "weights_only_false": "model_args.weights_only",
    "use_safetensors_false": "model_args.weights_only",
    "legacy_config_name": "model_args.weights_only",
    "only_pickle": "only pickled weights",
    "tokenizer_args": "tokenizer_args.tokenizer_file",
    "config_args": "config_args.attn_implementation",
    "dense_pickle": "only pickled weights",
}


def _trusted_folder(tmp_path: Path, monkeypatch, variant: str) -> tuple[Path, Path]:
    """The adversary's folder under ``$TEXTKG_MODEL_DIRS`` (a place a run may name), and the marker."""
    trusted = tmp_path / "trusted"
    folder = trusted / "model"
    shutil.copytree(default_minilm_path(), folder)
    marker = tmp_path / "PWNED"
    _plant(folder, marker, variant)
    monkeypatch.setenv("TEXTKG_MODEL_DIRS", str(trusted))
    return folder, marker


def _cached_hub_model(tmp_path: Path, monkeypatch, variant: str) -> Path:
    """The adversary's folder as ``HUB_ID``'s snapshot in a Hugging Face cache of this test's own."""
    import huggingface_hub.constants

    cache = tmp_path / "hf" / "hub"
    repo = cache / ("models--" + HUB_ID.replace("/", "--"))
    shutil.copytree(default_minilm_path(), repo / "snapshots" / SNAPSHOT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(SNAPSHOT)
    marker = tmp_path / "PWNED"
    _plant(repo / "snapshots" / SNAPSHOT, marker, variant)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return marker


def _run_naming(tiny_run: Path, tmp_path: Path, model_name_or_path: str) -> Path:
    run = copy_run(tiny_run, tmp_path / "run")
    cfg = json.loads((run / "config.json").read_text())
    kwargs = {"model_name_or_path": model_name_or_path}
    cfg["model"].update({"encoder": "sentence-transformers", "fusion": "text", "encoder_kwargs": kwargs})
    (run / "config.json").write_text(json.dumps(cfg))
    return run


def _predict(run: Path, capsys) -> tuple[object, str]:
    try:
        code: object = main(["predict", str(run), "--description", "a new phenotype"])
    except Exception as exc:  # on 1a0007a the loader fails after the pickle ran
        code = repr(exc)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_sentence_transformers_encoder_refuses_the_folder(tmp_path, monkeypatch, variant):
    from textkg.encoders.sbert import SentenceTransformerEncoder

    folder, marker = _trusted_folder(tmp_path, monkeypatch, variant)
    try:
        with pytest.raises(ConfigError, match=VARIANTS[variant].replace(".", r"\.")):
            SentenceTransformerEncoder(model_name_or_path=str(folder)).encode(["a kidney"])
    finally:
        assert not marker.exists(), "the planted pickle ran"


@pytest.mark.parametrize("variant", ["weights_only_false", "only_pickle"])
def test_the_bert_encoder_refuses_the_folder(tmp_path, monkeypatch, variant):
    """transformers' ``AutoModel`` path (``bert``, ``finetune``, ``top_layers``) reads the same folder."""
    from textkg.encoders.bert import BertEncoder

    folder, marker = _trusted_folder(tmp_path, monkeypatch, variant)
    try:
        with pytest.raises(ConfigError, match=VARIANTS[variant].replace(".", r"\.")):
            BertEncoder(model_name_or_path=str(folder)).encode(["a kidney"])
    finally:
        assert not marker.exists(), "the planted pickle ran"


@pytest.mark.parametrize("variant", ["weights_only_false", "dense_pickle"])
def test_predict_on_a_run_naming_a_folder_under_textkg_model_dirs(tiny_run, tmp_path, monkeypatch, capsys, variant):
    folder, marker = _trusted_folder(tmp_path, monkeypatch, variant)
    code, err = _predict(_run_naming(tiny_run, tmp_path, str(folder)), capsys)
    assert not marker.exists(), "the planted pickle ran"
    assert code == 2, err
    assert VARIANTS[variant] in err and "Traceback" not in err


@pytest.mark.parametrize("variant", ["weights_only_false", "use_safetensors_false", "only_pickle"])
def test_predict_on_a_run_naming_a_cached_hub_id(tiny_run, tmp_path, monkeypatch, capsys, variant):
    marker = _cached_hub_model(tmp_path, monkeypatch, variant)
    code, err = _predict(_run_naming(tiny_run, tmp_path, HUB_ID), capsys)
    assert not marker.exists(), "the planted pickle ran"
    assert code == 2, err
    assert VARIANTS[variant] in err and SNAPSHOT in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("where", "document", "match"),
    [
        # another model type switches sentence-transformers to a converting loader
        ("config_sentence_transformers.json", {"model_type": "CrossEncoder"}, "model_type"),
        # a module folder outside the model folder: read beyond it
        (
            "modules.json",
            [{"idx": 0, "name": "0", "path": "../elsewhere", "type": "sentence_transformers.models.Pooling"}],
            "path",
        ),
        # loading steered by the model config
        (
            "config.json",
            {"model_type": "bert", "quantization_config": {"quant_method": "bitsandbytes"}},
            "quantization_config",
        ),
        ("config.json", {"model_type": "bert", "attn_implementation": "kernels-community/evil"}, "attn_implementation"),
        # PEFT: a base model named elsewhere
        ("adapter_config.json", {"base_model_name_or_path": "/elsewhere"}, "PEFT"),
        # a module config key outside the module's own
        (
            "1_Pooling/config.json",
            {"embedding_dimension": 384, "tokenizer_name_or_path": "/elsewhere"},
            "tokenizer_name_or_path",
        ),
        # a Transformer setting that reads another folder's tokenizer
        ("sentence_bert_config.json", {"tokenizer_name_or_path": "/elsewhere"}, "tokenizer_name_or_path"),
    ],
)
def test_settings_outside_the_allow_lists_are_refused(tmp_path, where, document, match):
    from textkg.encoders.bert import check_model_folder

    folder = tmp_path / "model"
    shutil.copytree(default_minilm_path(), folder)
    (folder / where).write_text(json.dumps(document))
    with pytest.raises(ConfigError, match=match):
        check_model_folder(str(folder))


def test_the_packaged_model_and_a_folder_sentence_transformers_5_saved_pass(tmp_path):
    """The allow-lists admit what textkg ships and what ``textkg encoders adapt`` writes."""
    import torch

    from textkg.encoders.model_folder import check_model_folder
    from textkg.encoders.sbert import SentenceTransformerEncoder, load_sentence_transformer

    assert check_model_folder(default_minilm_path()) is not None
    load_sentence_transformer(default_minilm_path()).save(str(tmp_path / "saved"))
    texts = ["a kidney", "an enlarged heart"]
    saved = SentenceTransformerEncoder(model_name_or_path=str(tmp_path / "saved")).encode(texts)
    packaged = SentenceTransformerEncoder().encode(texts)
    assert torch.allclose(saved, packaged, atol=1e-5)


def test_every_model_loader_call_goes_through_the_checked_one():
    """One home per loader call (STYLE.md 12): ``from_pretrained``, ``SentenceTransformer(...)`` and the hub
    download are called only where the folder is checked and the safe keyword arguments are passed
    (``load_pretrained`` and its sentence-transformers adapter). On 1a0007a ``textkg encoders adapt`` built
    its own ``SentenceTransformer``."""
    import ast

    root = Path(__file__).resolve().parents[2]
    homes = {
        "textkg/encoders/bert.py": {"from_pretrained", "snapshot_download"},
        "textkg/encoders/sbert.py": {"SentenceTransformer"},
        "textkg/encoders/model_folder.py": {"snapshot_download"},  # local_files_only=True: the cache only
    }
    loaders = {"from_pretrained", "SentenceTransformer", "CrossEncoder", "SparseEncoder", "snapshot_download"}
    found = []
    for path in sorted((root / "textkg").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func).rsplit(".", 1)[-1]
                if name in loaders and name not in homes.get(rel, set()):
                    found.append(f"{rel}:{node.lineno}: {name}")
    assert not found, "load model folders through textkg.encoders.bert.load_pretrained:\n" + "\n".join(found)
