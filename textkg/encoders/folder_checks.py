"""What a transformer model folder holds, checked before and after it is loaded (docs/security.md).

:mod:`textkg.encoders.model_folder` refuses a folder whose settings name code or pickles; the checks here read the
rest of what a BERT-family folder from someone else holds, for
:func:`~textkg.encoders.cross_encoder.load_cross_encoder` and
:func:`~textkg.encoders.cross_encoder.check_encoder_folder` (a run's cross-encoder and its adapted text encoder):

* the tokenizer's settings (:func:`check_tokenizer`): a ``tokenizer_class`` only of :data:`TOKENIZERS`
  (``AutoTokenizer`` would build any class a folder names, one of which unpickles its vocabulary); no setting
  that names a file (``tokenizer_file``, ``vocab_file``: transformers opens what they name, wherever it lies, in
  place of the folder's own); in ``tokenizer.json`` no ``Regex`` (a backtracking pattern stops scoring with a
  panic) and only the component types of :data:`TOKENIZER_COMPONENTS`, a WordPiece ``[UNK]`` in its vocabulary and
  words of at most :data:`MAX_WORDPIECE_CHARS`;
* the config against the weights (:func:`check_shapes`), before anything is allocated: the model it describes, built
  on the meta device, is at most :data:`MAX_LAYERS` deep and finds every weight in ``model.safetensors`` with the
  same shape, so memory is bounded by the weights file (a ``vocab_size`` of 10**9 once asked for terabytes);
* once loaded (:func:`check_loaded`, :func:`probe`): every token id inside the model's vocabulary, every weight in the
  file and finite, and the pair run on :data:`PROBE_TEXTS` as its caller runs it (ids a ``post_processor`` names,
  token type ids, special tokens, a finite output), so that what would stop a run later with a traceback is
  refused when the folder is opened.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from textkg.errors import ConfigError

#: ``model_type`` -> the tokenizer classes its folder may name (``tokenizer_class``; unnamed: the type's own)
TOKENIZERS: dict[str, tuple[str, ...]] = {
    t: (f"{name}Tokenizer", f"{name}TokenizerFast")
    for t, name in (
        ("bert", "Bert"),
        ("roberta", "Roberta"),
        ("xlm-roberta", "XLMRoberta"),
        ("distilbert", "DistilBert"),
        ("electra", "Electra"),
    )
}
#: a folder's ``config.json`` may build at most this many transformer layers (BERT-large: 24)
MAX_LAYERS = 64
#: ``tokenizer.json`` part -> the component types it may name (each of a ``Sequence``'s too): a BERT-family
#: tokenizer's pieces (WordPiece, or RoBERTa's byte-level BPE)
TOKENIZER_COMPONENTS: dict[str, tuple[str, ...]] = {
    "normalizer": ("BertNormalizer", "Lowercase", "NFC", "NFD", "NFKC", "NFKD", "StripAccents", "Strip", "Sequence"),
    "pre_tokenizer": (
        "BertPreTokenizer",
        "ByteLevel",
        "Whitespace",
        "WhitespaceSplit",
        "Punctuation",
        "Digits",
        "Sequence",
    ),
    "post_processor": ("TemplateProcessing", "BertProcessing", "RobertaProcessing", "ByteLevel", "Sequence"),
    "decoder": ("WordPiece", "ByteLevel", "Sequence"),
    "model": ("WordPiece", "BPE"),
}
_SEQUENCE_KEYS = ("normalizers", "pretokenizers", "processors", "decoders")
#: a WordPiece model's longest word (a longer one is ``[UNK]``): MiniLM's and BERT's 100
MAX_WORDPIECE_CHARS = 100
#: special tokens a tokenizer may add to (one text, a pair): BERT's ``[CLS] a [SEP]`` (a ``bert`` encoder's
#: ``max_tokens`` is at least 2) and RoBERTa's ``<s> a </s></s> b </s>``
MAX_SPECIAL_TOKENS = (2, 4)
#: texts :func:`probe` runs a loaded folder on: words, punctuation, digits, accents, CJK, a symbol and an
#: unassigned code point (both ``[UNK]`` to MiniLM), a single letter, and nothing
PROBE_TEXTS = (
    "A probe: the dog (Canis familiaris) barks; 12,345 na\u00efve caf\u00e9 \u2603 \u6f22\u5b57 \u0378",
    "x",
    "",
)


def check_tokenizer_class(data: dict, path: Path, model_type: str) -> None:
    """Refuse a ``tokenizer_class`` outside the model type's :data:`TOKENIZERS`."""
    named = data.get("tokenizer_class")
    if named is not None and named not in TOKENIZERS[model_type]:
        raise ConfigError(
            f"a {model_type} model's tokenizer is one of {', '.join(TOKENIZERS[model_type])}, not {named!r}",
            file=path,
            field="tokenizer_class",
        )


def _json_keys(data: Any) -> set[str]:
    """Every key of a JSON document, at any depth (iterative)."""
    keys: set[str] = set()
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            keys.update(str(k) for k in node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return keys


def _component_types(node: Any) -> Iterator[Any]:
    """The ``type`` of a ``tokenizer.json`` component and of every component of its ``Sequence`` (iterative)."""
    stack = [node]
    while stack:
        part = stack.pop()
        if part is None:
            continue
        if not isinstance(part, dict):
            yield part
            continue
        yield part.get("type")
        for key in _SEQUENCE_KEYS:
            if isinstance(part.get(key), list):
                stack.extend(part[key])


def _check_tokenizer_json(data: dict, path: Path) -> None:
    """Refuse a ``tokenizer.json`` outside a BERT-family tokenizer's pieces (:data:`TOKENIZER_COMPONENTS`): a
    ``Regex`` anywhere, another component type (a ``Replace`` normalizer can blow one letter up into megabytes),
    or a WordPiece model whose ``[UNK]`` is not in its vocabulary or whose longest word is over
    :data:`MAX_WORDPIECE_CHARS`."""
    if "Regex" in _json_keys(data):
        raise ConfigError(
            "a tokenizer that runs its own regular expression is refused (a backtracking pattern can stall "
            "or stop scoring; a BERT-family tokenizer needs none)",
            file=path,
            field="Regex",
        )
    for part, allowed in TOKENIZER_COMPONENTS.items():
        node = data.get(part)
        found = [node.get("type")] if part == "model" and isinstance(node, dict) else list(_component_types(node))
        for kind in found:
            if kind not in allowed:
                raise ConfigError(
                    f"a BERT-family tokenizer's {part} is one of {', '.join(allowed)}, not {kind!r}",
                    file=path,
                    field=part,
                )
    model = data["model"] if isinstance(data.get("model"), dict) else {}
    if model.get("type") == "BPE" and model.get("dropout") not in (None, 0, 0.0):
        raise ConfigError(
            "a BPE tokenizer with dropout splits a text at random on every call (one text, many feature rows); "
            "textkg reads a text one way",
            file=path,
            field="model.dropout",
        )
    if model.get("type") == "WordPiece":
        longest = model.get("max_input_chars_per_word", MAX_WORDPIECE_CHARS)
        if not (isinstance(longest, int) and 0 < longest <= MAX_WORDPIECE_CHARS):
            raise ConfigError(
                f"a WordPiece word is at most {MAX_WORDPIECE_CHARS} characters (its matching cost grows with the "
                f"cube of it), not {longest!r}",
                file=path,
                field="model.max_input_chars_per_word",
            )
        vocab = model.get("vocab")
        if not isinstance(vocab, dict) or model.get("unk_token") not in vocab:
            raise ConfigError(
                "a WordPiece tokenizer's unk_token must be in its vocabulary (else an unknown word stops the run)",
                file=path,
                field="model.unk_token",
            )


def check_tokenizer(folder: Path, model_type: str) -> None:
    """Screen the tokenizer's settings before the tokenizer reads them (module docstring)."""
    for name in ("tokenizer_config.json", "tokenizer.json"):
        path = folder / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            raise ConfigError(f"not valid JSON ({type(exc).__name__})", file=path) from exc
        if not isinstance(data, dict):
            raise ConfigError("expected a JSON object", file=path)
        if name == "tokenizer.json":
            _check_tokenizer_json(data, path)
            continue
        check_tokenizer_class(data, path, model_type)
        for key, value in data.items():  # transformers opens what these name instead of the folder's own files
            if key.endswith(("_file", "_files")) or (key == "init_inputs" and value):
                raise ConfigError(
                    "a tokenizer setting that names a file is refused (the tokenizer would read it in place of the "
                    "folder's own files, wherever it lies)",
                    file=path,
                    field=key,
                )


def check_shapes(architecture: Any, config_path: Path, weights: Path) -> None:
    """Before anything is allocated: the model ``config.json`` describes, built on the meta device (no memory), at
    most :data:`MAX_LAYERS` layers deep, returns its outputs by name, and finds each of its weights in ``weights``
    with the same shape, so a config cannot ask for more memory than the weights file holds (a ``vocab_size`` of
    10**9 once made loading allocate terabytes)."""
    from safetensors import safe_open

    try:
        config = architecture.config_class.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
        layers = config.num_hidden_layers
        if not (isinstance(layers, int) and 0 < layers <= MAX_LAYERS):
            raise ConfigError(
                f"a model of 1 to {MAX_LAYERS} layers, not {layers!r}", file=config_path, field="num_hidden_layers"
            )
        if not config.use_return_dict:
            raise ConfigError(
                "a model returns its outputs by name (return_dict)", file=config_path, field="return_dict"
            )
        with torch.device("meta"):
            skeleton = architecture(config)
    except ConfigError:
        raise
    except Exception as exc:  # a value the model cannot be built from: an unknown hidden_act, a pad id outside it
        raise ConfigError(
            f"does not describe a {architecture.__name__} ({type(exc).__name__}: {str(exc)[:200]})", file=config_path
        ) from exc
    try:
        with safe_open(str(weights), "pt") as f:
            shapes = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
    except Exception as exc:  # safetensors raises its own error, or an OSError, on a file that is not one
        raise ConfigError(f"not a safetensors file ({type(exc).__name__}: {str(exc)[:200]})", file=weights) from exc
    expected = {name: tuple(tensor.shape) for name, tensor in skeleton.state_dict().items()}
    missing = sorted(set(expected) - set(shapes))
    if missing:
        raise ConfigError(
            f"{len(missing)} of the model's weights are not in the file (e.g. {missing[0]}): they would be random",
            file=weights,
        )
    for name, shape in expected.items():
        if shapes[name] != shape:
            raise ConfigError(
                f"config.json makes this weight {list(shape)}, the file holds {list(shapes[name])}",
                file=weights,
                field=name,
            )


def check_loaded(model: Any, tokenizer: Any, folder: Path, weights: Path, model_type: str) -> None:
    """After loading: the tokenizer of the right class with ids inside the model's vocabulary, every weight read
    from ``weights`` (none left at a random start) and finite."""
    from safetensors import safe_open

    if type(tokenizer).__name__ not in TOKENIZERS[model_type]:  # pragma: no cover - the classes were checked
        raise ConfigError(f"unexpected tokenizer {type(tokenizer).__name__}", file=folder)
    vocab_size = model.get_input_embeddings().num_embeddings
    largest = max(tokenizer.get_vocab().values(), default=-1)
    if largest >= vocab_size:
        raise ConfigError(
            f"the tokenizer gives token id {largest}, outside the model's {vocab_size} embeddings",
            file=folder / "tokenizer.json",
            field="vocab",
        )
    with safe_open(str(weights), "pt") as f:
        saved = set(f.keys())
    missing = sorted(set(model.state_dict()) - saved)
    if missing:  # pragma: no cover - check_shapes refused it before loading
        raise ConfigError(
            f"{len(missing)} of the model's weights are not in the file (e.g. {missing[0]}): they would be random",
            file=weights,
        )
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ConfigError("a weight that is not a finite number", file=weights, field=name)


def probe(model: Any, tokenizer: Any, folder: Path, what: str, *, pair_tokens: int | None = None) -> None:
    """The loaded tokenizer and model on :data:`PROBE_TEXTS` as their caller runs them, padded and cut to
    ``pair_tokens`` word pieces for a pair (a cross-encoder's), else to the model's
    :func:`~textkg.encoders.bert.max_positions` for one text: at most :data:`MAX_SPECIAL_TOKENS` added, every id
    inside the model's embeddings (a ``post_processor`` names its own ids and token types), a finite output.

    Raises:
        ConfigError: what would otherwise stop a run later with a traceback, naming the file at fault.
    """
    from .bert import max_positions

    pair = pair_tokens is not None
    config, tokenizer_file = model.config, folder / "tokenizer.json"
    limit = max_positions(config)
    if pair_tokens is not None and limit < pair_tokens:
        raise ConfigError(
            f"a {what} reads {pair_tokens} word pieces, this model only {limit}",
            file=folder / "config.json",
            field="max_position_embeddings",
        )
    texts = list(PROBE_TEXTS)
    specials = tokenizer.num_special_tokens_to_add(pair=pair)
    if specials > MAX_SPECIAL_TOKENS[pair]:
        raise ConfigError(
            f"the tokenizer adds {specials} special tokens to a {'pair' if pair else 'text'}, at most "
            f"{MAX_SPECIAL_TOKENS[pair]} are allowed",
            file=tokenizer_file,
            field="post_processor",
        )
    try:
        batch = tokenizer(
            *((texts, texts[::-1]) if pair else (texts,)),
            padding=True,
            truncation="longest_first",
            max_length=pair_tokens or limit,
            return_tensors="pt",
        )
    except Exception as exc:  # tokenizers raises a bare Exception (a missing token, a template it cannot fill)
        raise ConfigError(
            f"the tokenizer fails on a probe text ({type(exc).__name__}: {str(exc)[:200]})", file=tokenizer_file
        ) from exc
    for key, size in (("input_ids", config.vocab_size), ("token_type_ids", getattr(config, "type_vocab_size", 0))):
        ids = batch.get(key)
        if ids is not None and ids.numel() and not (0 <= int(ids.min()) and int(ids.max()) < size):
            raise ConfigError(
                f"the tokenizer gives {key} up to {int(ids.max())}, outside the model's {size} embeddings",
                file=tokenizer_file,
                field="post_processor",
            )
    model.eval()
    try:
        with torch.inference_mode():
            out = model(**batch)
            values = out.logits if pair else out.last_hidden_state
    except Exception as exc:
        raise ConfigError(
            f"the {what} fails on a probe text ({type(exc).__name__}: {str(exc)[:200]})", file=folder
        ) from exc
    if not bool(torch.isfinite(values.float()).all()):
        raise ConfigError(f"the {what} gives numbers that are not finite on a probe text", file=folder / "config.json")
