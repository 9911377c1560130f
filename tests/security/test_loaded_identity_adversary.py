"""Adversary review of ae22bbe: a local model folder's cache identity is computed from what it loaded
(:func:`textkg.encoders.bert.loaded_content_identity`), and the features cache trusts that equal identities give
equal rows ("two folders share it exactly when they encode alike").

Each test builds a folder from the packaged MiniLM that differs in one thing the hash does not cover, or that
makes a row depend on more than (identity, text); a folder either is refused, or it keeps the invariant. The tests
are written so that any of the fixes (refuse the folder, fix the setting at load, or hash it) makes them pass.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from textkg.encoders.bert import BertEncoder, default_minilm_path
from textkg.encoders.cross_encoder import ENCODER_FILES, check_encoder_folder
from textkg.encoders.model_folder import check_model_folder
from textkg.errors import ConfigError

TEXTS = ["Abnormal enlargement of the kidney.", "Seizures.", "a domestic dog breed, a loyal dog that barks"]


def _copy(to: Path) -> Path:
    src = Path(default_minilm_path())
    to.mkdir(parents=True)
    for name in ENCODER_FILES:
        shutil.copyfile(src / name, to / name)
    return to


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def _encoder(folder: Path, pooling: str = "mean") -> BertEncoder:
    return BertEncoder(str(folder), pooling=pooling)


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> tuple[Path, BertEncoder, torch.Tensor]:
    folder = _copy(tmp_path_factory.mktemp("loaded-identity") / "plain")
    enc = _encoder(folder)
    return folder, enc, enc.encode(TEXTS)


@pytest.mark.parametrize("key", ["_attn_implementation", "_attn_implementation_internal"])
def test_the_attention_implementation_is_in_the_identity_or_fixed(plain, tmp_path, key):
    """config.json ``"_attn_implementation": "eager"`` passes the run checks and changes the features (sdpa vs
    eager, ~7e-7 on MiniLM; a crafted model can amplify it), but ``PretrainedConfig.to_dict`` drops
    ``_attn_implementation_internal``, so on ae22bbe both folders had one identity."""
    _, a, features = plain
    folder = _copy(tmp_path / "eager")
    _edit(folder / "config.json", lambda d: d.update({key: "eager"}))
    try:
        check_encoder_folder(folder)
    except ConfigError:
        return
    b = _encoder(folder)
    assert a.identity != b.identity or torch.equal(features, b.encode(TEXTS))


def test_an_attention_kernel_under_the_internal_key_is_refused(tmp_path):
    """check_model_folder allows only eager/sdpa under ``attn_implementation``/``_attn_implementation``;
    ``_attn_implementation_internal`` reaches the config unchecked (setattr of an unknown key), so a folder could
    name a hub kernel (``kernels`` fetches and runs code), and without ``kernels`` BertEncoder stopped with an
    ImportError traceback (load_pretrained turns only OSError/ValueError into a ConfigError)."""
    folder = _copy(tmp_path / "kernel")
    _edit(folder / "config.json", lambda d: d.update(_attn_implementation_internal="kernels-community/flash-attn"))
    try:
        enc = _encoder(folder)
    except ConfigError:
        return
    assert enc.module.config._attn_implementation in ("eager", "sdpa")


def _type_id_1(data: dict) -> None:
    for part in data["post_processor"]["single"]:
        for value in part.values():
            value["type_id"] = 1


def test_the_tokenizer_class_is_in_the_identity(tmp_path):
    """A folder outside a run (``$TEXTKG_MODEL_DIRS``, a hub snapshot a run names, the user's own) may name any
    ``tokenizer_class``; transformers keeps it out of ``init_kwargs``. DistilBertTokenizerFast passes no
    ``token_type_ids`` (its ``model_input_names``), BertTokenizerFast does: with a post-processor that gives type
    id 1, two folders had one identity and features 0.1 apart."""
    a_dir, b_dir = _copy(tmp_path / "bert"), _copy(tmp_path / "distil")
    for folder in (a_dir, b_dir):
        _edit(folder / "tokenizer.json", _type_id_1)
    _edit(b_dir / "tokenizer_config.json", lambda d: d.update(tokenizer_class="DistilBertTokenizer"))
    try:
        for folder in (a_dir, b_dir):
            check_model_folder(str(folder))
        a, b = _encoder(a_dir), _encoder(b_dir)
    except ConfigError:
        return
    assert a.identity != b.identity or torch.equal(a.encode(TEXTS), b.encode(TEXTS))


def test_a_tokenizer_without_an_attention_mask_is_refused_or_encodes(tmp_path):
    """tokenizer_config ``"model_input_names": ["input_ids"]`` passes check_encoder_folder (its probe needs no
    mask), then ``BertEncoder._hidden`` stops with ``KeyError: 'attention_mask'`` (a traceback in ``place``)."""
    folder = _copy(tmp_path / "no-mask")
    _edit(folder / "tokenizer_config.json", lambda d: d.update(model_input_names=["input_ids"]))
    try:
        check_encoder_folder(folder)
        enc = _encoder(folder)
    except ConfigError:
        return
    assert enc.encode(TEXTS).shape == (len(TEXTS), enc.dim)


def _alone_and_together(enc: BertEncoder) -> tuple[torch.Tensor, torch.Tensor]:
    alone = torch.cat([enc.encode([t]) for t in TEXTS])
    return alone, enc.encode(TEXTS)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_a_row_does_not_depend_on_its_batch_neighbours_left_padding(tmp_path, pooling):
    """tokenizer_config ``"padding_side": "left"`` passes check_encoder_folder; a left-padded text's positions
    shift with its batch's longest text, so a cached row depends on which texts were encoded with it (0.38 apart
    with CLS, 0.71 with mean pooling): one (identity, text), several rows."""
    folder = _copy(tmp_path / "left")
    _edit(folder / "tokenizer_config.json", lambda d: d.update(padding_side="left"))
    try:
        check_encoder_folder(folder)
        enc = _encoder(folder, pooling)
    except ConfigError:
        return
    alone, together = _alone_and_together(enc)
    torch.testing.assert_close(alone, together, atol=1e-5, rtol=1e-4)


def _bpe_with_dropout(data: dict) -> None:
    vocab = data["model"]["vocab"]
    merges = [[w[0], w[1]] for w in vocab if len(w) == 2 and w.isalpha() and w[0] in vocab and w[1] in vocab]
    data["model"] = {
        "type": "BPE",
        "dropout": 0.9,
        "unk_token": "[UNK]",
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "ignore_merges": False,
        "vocab": vocab,
        "merges": merges,
    }


def test_a_tokenizer_with_bpe_dropout_is_refused_or_deterministic(tmp_path):
    """A ``BPE`` model (allowed by check_tokenizer) with ``dropout`` tokenizes at random on every call: the same
    identity and text gave rows 0.86 apart from one call to the next."""
    folder = _copy(tmp_path / "bpe-dropout")
    _edit(folder / "tokenizer.json", _bpe_with_dropout)
    try:
        check_encoder_folder(folder)
        enc = _encoder(folder)
    except ConfigError:
        return
    assert torch.equal(enc.encode(TEXTS), enc.encode(TEXTS))


def test_the_identity_does_not_depend_on_the_random_state(tmp_path):
    """A folder without the (unused) pooler weights, as many hub exports are: transformers draws them at random,
    and the identity hashes them, so it changed with the torch seed at construction (another cache folder, every
    text encoded again) while the features did not."""
    from safetensors.torch import load_file, save_file

    folder = _copy(tmp_path / "no-pooler")
    weights = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in weights.items() if not k.startswith("pooler.")}, str(folder / "model.safetensors"))
    identities = set()
    for seed in (0, 1):
        torch.manual_seed(seed)
        try:
            identities.add(_encoder(folder).identity)
        except ConfigError:
            return
    assert len(identities) == 1
