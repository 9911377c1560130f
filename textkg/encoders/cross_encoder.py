"""A cross-encoder: one transformer reads a (new term, candidate parent) pair together and gives one logit.

A bi-encoder embeds each text alone and compares the vectors; a cross-encoder attends across the two texts,
which is slower (one forward pass per pair) but sharper, so it re-scores a short list (Nogueira & Cho 2019,
"Passage Re-ranking with BERT", arXiv:1901.04085). The model is a ``transformers`` BERT-family
``...ForSequenceClassification`` with ``num_labels=1``; its input is ``[CLS] a [SEP] b [SEP]`` cut to
:data:`MAX_PAIR_TOKENS` word pieces (``longest_first``). :func:`initial_cross_model` starts one from the
packaged MiniLM (a fresh, seeded head); ``textkg encoders cross-encoder``
(:mod:`textkg.training.adapt_cross`) fine-tunes it on the ontology's own ``is_a`` pairs and
:func:`load_cross_encoder` reads the folder it writes.

A model folder is a trust boundary (docs/security.md): :func:`load_cross_encoder` first screens the folder's
entries (:func:`_screen_files`: no symlink, so nothing is read beyond it; weights at most :data:`MAX_WEIGHTS_BYTES`,
every other file at most :data:`MAX_TOKENIZER_BYTES`), then its settings with
:func:`~textkg.encoders.model_folder.check_model_folder` (no code, no pickle), refuses a folder without
``model.safetensors`` and a config that is not a sequence classifier of :data:`ARCHITECTURES` with one label, and
checks the tokenizer's settings and the config against the weights' shapes (:mod:`textkg.encoders.folder_checks`);
it then loads with :data:`~textkg.encoders.model_folder.SAFE_WEIGHTS_KWARGS` (through
:func:`~textkg.encoders.bert.load_pretrained`, the one home of ``from_pretrained``) and checks what it loaded, on
probe texts too. Nothing is downloaded. :func:`check_encoder_folder` does the same for a run's adapted text encoder
(``RUN/encoder``, a body of :data:`ENCODER_ARCHITECTURES`), which may hold only :data:`ENCODER_FILES`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from textkg.errors import ConfigError

from .base import file_fingerprint
from .folder_checks import check_loaded, check_shapes, check_tokenizer, check_tokenizer_class, probe
from .model_folder import check_model_folder

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = [
    "ARCHITECTURES",
    "ENCODER_ARCHITECTURES",
    "ENCODER_FILES",
    "MAX_PAIR_TOKENS",
    "CrossScorer",
    "check_encoder_folder",
    "initial_cross_model",
    "load_cross_encoder",
]

#: word pieces of a pair, special tokens included; the longer text is cut first (``longest_first``)
MAX_PAIR_TOKENS = 64
#: the weights file a cross-encoder folder must hold (safetensors: never a pickle)
WEIGHTS_FILE = "model.safetensors"
#: a larger weights file is refused before it is opened (MiniLM-L6: 91 MB; BERT-large: 1.3 GB)
MAX_WEIGHTS_BYTES = 1 << 30
#: ``model_type`` -> the one architecture its ``config.json`` may name: BERT-family sequence classifiers
ARCHITECTURES: dict[str, str] = {
    "bert": "BertForSequenceClassification",
    "roberta": "RobertaForSequenceClassification",
    "xlm-roberta": "XLMRobertaForSequenceClassification",
    "distilbert": "DistilBertForSequenceClassification",
    "electra": "ElectraForSequenceClassification",
}
#: ``model_type`` -> the one architecture a (bi-)encoder folder's ``config.json`` may name: BERT-family bodies, the
#: ``bert`` encoder's ``AutoModel`` (:func:`check_encoder_folder`: a run's ontology-adapted MiniLM)
ENCODER_ARCHITECTURES: dict[str, str] = {
    "bert": "BertModel",
    "roberta": "RobertaModel",
    "xlm-roberta": "XLMRobertaModel",
    "distilbert": "DistilBertModel",
    "electra": "ElectraModel",
}
#: a larger tokenizer or settings file is refused before it is parsed (MiniLM's tokenizer.json: 0.7 MB)
MAX_TOKENIZER_BYTES = 32 << 20
#: the files of a run's adapted text encoder (``RUN/encoder``): what ``textkg train`` copies there, the files the
#: ``bert`` encoder's ``AutoModel`` and ``AutoTokenizer`` read; :func:`check_encoder_folder` refuses anything else
ENCODER_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)


class CrossScorer:
    """Scores ``(a, b)`` text pairs with a sequence classifier of one label.

    Args:
        tokenizer: The model's ``transformers`` tokenizer.
        model: A ``...ForSequenceClassification`` with ``num_labels=1``, on the device it computes on.
        digest: Short sha256 of the weights file, recorded by callers to say which model scored.
    """

    def __init__(self, tokenizer: Any, model: torch.nn.Module, *, digest: str, source: Path | None = None) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.digest = digest
        self.source = source

    def tokenize(self, pairs: Sequence[tuple[str, str]]) -> dict[str, torch.Tensor]:
        """The model's inputs for ``pairs``: ``(n, L)`` tensors, ``L <= MAX_PAIR_TOKENS``, padded to the longest."""
        return self.tokenizer(
            [a for a, _ in pairs],
            [b for _, b in pairs],
            truncation="longest_first",
            max_length=MAX_PAIR_TOKENS,
            padding=True,
            return_tensors="pt",
        )

    def logits(self, pairs: Sequence[tuple[str, str]]) -> torch.Tensor:
        """``(n,)`` logits of one batch, with the graph (for training; the model's mode is the caller's)."""
        device = next(self.model.parameters()).device
        inputs = {k: v.to(device) for k, v in self.tokenize(pairs).items()}
        return self.model(**inputs).logits[:, 0].float()

    def __call__(self, pairs: Sequence[tuple[str, str]], *, batch_size: int = 128) -> torch.Tensor:
        """``(n,)`` float32 logits of ``pairs`` in their order (eval mode, no gradient).

        Pairs are scored in batches of similar length (sorted by character count, so little padding), then put
        back in input order. An empty input gives an empty tensor.

        Raises:
            ConfigError: a logit that is not finite (weights that overflow), naming the model's folder.
        """
        if batch_size < 1:
            raise ConfigError("must be >= 1", field="batch_size")
        pairs = [(str(a), str(b)) for a, b in pairs]
        out = torch.empty(len(pairs), dtype=torch.float32)
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                for lo in range(0, len(order), batch_size):
                    idx = order[lo : lo + batch_size]
                    out[idx] = self.logits([pairs[i] for i in idx]).cpu()
        finally:
            self.model.train(was_training)
        if not bool(torch.isfinite(out).all()):
            raise ConfigError("the cross-encoder gave scores that are not finite numbers", file=self.source)
        return out


def initial_cross_model(seed: int = 0) -> tuple[Any, PreTrainedModel]:
    """``(tokenizer, model)``: the packaged MiniLM with a fresh one-logit head, drawn under ``seed``."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from .bert import default_minilm_path, load_pretrained

    folder = default_minilm_path()
    torch.manual_seed(seed)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "Some weights ... newly initialized": the head, on purpose
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = load_pretrained(AutoModelForSequenceClassification, folder, "the packaged MiniLM", num_labels=1)
    finally:
        hf_logging.set_verbosity(verbosity)
    tokenizer = load_pretrained(AutoTokenizer, folder, "the packaged MiniLM's tokenizer")
    return tokenizer, model


def _architecture(
    config_path: Path, architectures: dict[str, str] = ARCHITECTURES, what: str = "cross-encoder"
) -> tuple[str, str]:
    """``(model_type, architecture)`` of a folder's ``config.json``, checked: one of ``architectures``, one
    label (a cross-encoder's), no foreign tokenizer class."""
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))  # check_model_folder bounded its size
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the model config ({type(exc).__name__})", file=config_path) from exc
    if not isinstance(config, dict):
        raise ConfigError("expected a JSON object", file=config_path)
    model_type = config.get("model_type")
    if model_type not in architectures:
        raise ConfigError(
            f"a {what} must be a BERT-family model ({', '.join(architectures)}), not {model_type!r}",
            file=config_path,
            field="model_type",
        )
    expected = architectures[model_type]
    if config.get("architectures", [expected]) != [expected]:
        raise ConfigError(
            f"a {model_type} {what} must be a {expected}, not {config.get('architectures')!r}",
            file=config_path,
            field="architectures",
        )
    if architectures is not ARCHITECTURES:  # a bi-encoder's body has no classification head
        check_tokenizer_class(config, config_path, model_type)
        return model_type, expected
    labels = config.get("id2label")
    num_labels = len(labels) if isinstance(labels, dict) else config.get("num_labels", 2)  # transformers' default
    if num_labels != 1:
        raise ConfigError(
            f"a cross-encoder gives one logit per pair (num_labels 1), not {num_labels!r}",
            file=config_path,
            field="num_labels",
        )
    check_tokenizer_class(config, config_path, model_type)
    return model_type, expected


def _screen_files(folder: Path, what: str, allowed: tuple[str, ...] | None = None) -> None:
    """Before anything in ``folder`` is read: no symlink (nothing is read beyond it), only regular files named in
    ``allowed`` when given (a subfolder, a pickle, a second tokenizer or template file: refused), the weights at most
    :data:`MAX_WEIGHTS_BYTES` and every other file at most :data:`MAX_TOKENIZER_BYTES`."""
    for entry in folder.iterdir():
        if entry.is_symlink():
            raise ConfigError(f"a {what} folder may hold no symlink (nothing is read beyond it)", file=entry)
        if allowed is not None and (entry.name not in allowed or not entry.is_file()):
            raise ConfigError(
                f"a {what} folder holds only the regular files {', '.join(allowed)} (what textkg train copies there); "
                "anything else is refused",
                file=entry,
            )
        if entry.is_file():
            limit = MAX_WEIGHTS_BYTES if entry.name == WEIGHTS_FILE else MAX_TOKENIZER_BYTES
            if entry.stat().st_size > limit:
                raise ConfigError(f"a file over {limit >> 20} MiB is refused", file=entry)


def _checked_folder(path: Path, what: str, architectures: dict[str, str], allowed: tuple[str, ...] | None) -> tuple:
    """``(folder, weights file, model_type, architecture class)`` of a model folder checked before any loader reads
    it: :func:`_screen_files`, :func:`check_model_folder`, :func:`_architecture`, then
    :mod:`~textkg.encoders.folder_checks`' ``check_tokenizer`` and ``check_shapes``."""
    _screen_files(path, what, allowed)
    checked = check_model_folder(str(path))
    if checked is None:  # pragma: no cover - a folder is always checked locally
        raise ConfigError("not a folder", file=path)
    weights = checked / WEIGHTS_FILE
    if not weights.is_file():
        raise ConfigError(f"a {what} folder needs {WEIGHTS_FILE}", file=checked)
    config_path = checked / "config.json"
    if not config_path.is_file():
        raise ConfigError(f"a {what} folder needs config.json", file=checked)
    model_type, architecture = _architecture(config_path, architectures, what)
    check_tokenizer(checked, model_type)
    import transformers

    cls = getattr(transformers, architecture)
    check_shapes(cls, config_path, weights)
    return checked, weights, model_type, cls


def _load(cls: type, folder: Path, weights: Path, what: str) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a checked folder (:func:`_checked_folder`); whatever fails names the file."""
    import transformers

    from .bert import load_pretrained

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = load_pretrained(cls, str(folder), f"the {what}")
    except Exception as exc:  # a malformed or mismatched weights file
        raise _unloadable(f"the {what}", exc, weights) from exc
    try:
        tokenizer = load_pretrained(transformers.AutoTokenizer, str(folder), f"the {what}'s tokenizer")
    except Exception as exc:  # tokenizers raises a bare Exception on a malformed tokenizer.json
        raise _unloadable(f"the {what}'s tokenizer", exc, folder) from exc
    return model, tokenizer


def _unloadable(what: str, exc: Exception, file: Path) -> ConfigError:
    """The error of a checked folder whose file does not load (``load_pretrained`` says "cannot load ... not in
    the cache" for any ``OSError``/``ValueError``: here the folder is there, so its content is at fault)."""
    cause = exc.__cause__ if isinstance(exc, ConfigError) and exc.__cause__ is not None else exc
    return ConfigError(f"cannot load {what} ({type(cause).__name__}: {cause})", file=file)


def load_cross_encoder(folder: str | Path, *, device: str | torch.device = "cpu") -> CrossScorer:
    """The cross-encoder saved in ``folder`` (``save_pretrained`` with safetensors, plus its tokenizer).

    Raises:
        ConfigError: Not a folder; a folder :func:`check_model_folder` refuses (code, pickled weights); no
            ``model.safetensors`` or one over :data:`MAX_WEIGHTS_BYTES`; a config that is not a one-label
            sequence classifier of :data:`ARCHITECTURES`, or that does not match the weights' shapes; a
            tokenizer :func:`~textkg.encoders.folder_checks.check_tokenizer` refuses; a weights or tokenizer file
            that does not load, or loads into something :func:`~textkg.encoders.folder_checks.check_loaded` or
            :func:`~textkg.encoders.folder_checks.probe` refuses.
    """
    path = Path(folder)
    if not path.is_dir():
        raise ConfigError("not a folder", file=path)
    checked, weights, model_type, cls = _checked_folder(path, "cross-encoder", ARCHITECTURES, None)
    model, tokenizer = _load(cls, checked, weights, "cross-encoder")
    check_loaded(model, tokenizer, checked, weights, model_type)
    probe(model, tokenizer, checked, "cross-encoder", pair_tokens=MAX_PAIR_TOKENS)
    model.eval()
    return CrossScorer(tokenizer, model.to(device), digest=file_fingerprint(weights), source=checked)


def check_encoder_folder(folder: str | Path) -> Path:
    """A text encoder's model folder from a run (its ontology-adapted MiniLM, ``RUN/encoder``), checked as
    :func:`load_cross_encoder` checks a cross-encoder's, holding only :data:`ENCODER_FILES`, and loaded once to
    check what it holds; the folder's real path, for :class:`~textkg.encoders.bert.BertEncoder` to load (which
    reads the files again: a folder changed in between is not checked twice).

    Raises:
        ConfigError: Not a folder, or a symlink; any other file than :data:`ENCODER_FILES`; a folder
            :func:`check_model_folder` refuses; no ``model.safetensors`` or one over :data:`MAX_WEIGHTS_BYTES`; a
            config that is not one of :data:`ENCODER_ARCHITECTURES`, or that does not match the weights' shapes; a
            tokenizer :func:`~textkg.encoders.folder_checks.check_tokenizer` refuses; files that do not load, or
            load into something :func:`~textkg.encoders.folder_checks.check_loaded` or
            :func:`~textkg.encoders.folder_checks.probe` refuses.
    """
    what = "text encoder"
    path = Path(folder)
    if path.is_symlink() or not path.is_dir():
        raise ConfigError("not a folder (a symlink is refused: nothing is read beyond the run)", file=path)
    checked, weights, model_type, cls = _checked_folder(path, what, ENCODER_ARCHITECTURES, ENCODER_FILES)
    model, tokenizer = _load(cls, checked, weights, what)
    check_loaded(model, tokenizer, checked, weights, model_type)
    probe(model, tokenizer, checked, what)
    return checked
