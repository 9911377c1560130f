"""Train flair character language models on the descriptions themselves.

:func:`train_char_lm` writes the corpus folder flair's ``TextCorpus`` expects::

    <out_dir>/corpus/train/train_split_<k>   one description per line
    <out_dir>/corpus/valid.txt
    <out_dir>/corpus/test.txt

builds the character dictionary from the texts (plus upper/lower variants,
because flair flips the case of ~2 % of lines during training), trains a
``flair.models.LanguageModel`` with ``flair.trainers.LanguageModelTrainer``,
and returns ``<out_dir>/best-lm.safetensors`` — the model with the lowest
validation loss, stored as tensors plus ``best-lm.json`` (never a pickle:
:mod:`textkg.encoders.charlm_files`). Perplexities are written to
``<out_dir>/metrics.json``. Everything is local: pass the returned path to the
``flair`` encoder (``forward_model``/``backward_model``).

CLI wiring (for the lead): ``textkg charlm train --dataset NAME --direction
forward --out DIR`` = ``train_char_lm(list(kg.entity_descriptions),
direction=..., out_dir=DIR)``.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from textkg.errors import ConfigError

from .base import validate_texts
from .charlm_files import SUFFIX, load_char_lm, save_char_lm

DIRECTIONS = ("forward", "backward")


def _char_dictionary(texts: Sequence[str]) -> Any:
    from flair.data import Dictionary

    chars = set("\n ")
    for text in texts:
        chars.update(text)
        chars.update(text.lower())
        chars.update(text.upper())
    dictionary = Dictionary(add_unk=True)
    for ch in sorted(chars):
        dictionary.add_item(ch)
    return dictionary


def write_corpus(
    texts: Sequence[str], corpus_dir: Path, *, valid_fraction: float, seed: int, split_chars: int = 1_000_000
) -> dict[str, int]:
    """Shuffle descriptions into flair's train/valid/test layout.

    Returns:
        Character counts per part: ``{"train": ..., "valid": ..., "test": ...}``.
    """
    lines = [" ".join(t.split()) for t in texts]  # newlines delimit documents
    random.Random(seed).shuffle(lines)
    n_held = max(1, int(len(lines) * valid_fraction))
    if len(lines) < 3:
        lines = lines * 3  # tiny input: reuse it so every part is non-empty
        n_held = 1
    valid, test, train = lines[:n_held], lines[n_held : 2 * n_held], lines[2 * n_held :]
    if not train:
        train = valid + test
    (corpus_dir / "train").mkdir(parents=True, exist_ok=True)
    chunk: list[str] = []
    size, k = 0, 0
    for line in train:
        chunk.append(line)
        size += len(line) + 1
        if size >= split_chars:
            (corpus_dir / "train" / f"train_split_{k}").write_text("\n".join(chunk) + "\n", encoding="utf-8")
            chunk, size, k = [], 0, k + 1
    if chunk:
        (corpus_dir / "train" / f"train_split_{k}").write_text("\n".join(chunk) + "\n", encoding="utf-8")
    (corpus_dir / "valid.txt").write_text("\n".join(valid) + "\n", encoding="utf-8")
    (corpus_dir / "test.txt").write_text("\n".join(test) + "\n", encoding="utf-8")
    return {
        "train": sum(len(x) + 1 for x in train),
        "valid": sum(len(x) + 1 for x in valid),
        "test": sum(len(x) + 1 for x in test),
    }


def _deadline_trainer(base: type, deadline: float | None) -> type:
    """A LanguageModelTrainer that stops cleanly (as on Ctrl-C) after ``deadline``."""

    class _Trainer(base):  # type: ignore[misc, valid-type]
        stopped_at_deadline = False

        def _get_batch(self, source, i, sequence_length):
            if deadline is not None and self.model.training and time.monotonic() > deadline:
                self.stopped_at_deadline = True
                raise KeyboardInterrupt  # flair's trainer catches it and finishes up
            return base._get_batch(source, i, sequence_length)

    return _Trainer


def train_char_lm(
    texts: Sequence[str],
    *,
    direction: str,
    out_dir: str | Path,
    hidden_size: int = 256,
    nlayers: int = 1,
    embedding_size: int = 100,
    sequence_length: int = 250,
    mini_batch_size: int = 64,
    learning_rate: float = 20.0,
    epochs: int = 10,
    max_seconds: float | None = None,
    valid_fraction: float = 0.05,
    seed: int = 0,
    verbose: bool = False,
) -> Path:
    """Train a character LM on ``texts`` and return the path of the best model.

    Args:
        texts: The descriptions (blank ones raise DataError).
        direction: ``"forward"`` or ``"backward"``.
        out_dir: Output folder (corpus, ``best-lm.safetensors`` + ``best-lm.json``, ``loss.txt``,
            ``metrics.json``).
        hidden_size: LSTM hidden size (flair's published models use 2048; 256 is
            a CPU-friendly default; use 32 for tests).
        nlayers: LSTM layers.
        embedding_size: Character embedding size.
        sequence_length: Truncated-BPTT length in characters.
        mini_batch_size: Parallel streams (reduced automatically for tiny corpora).
        learning_rate: SGD learning rate (flair's default 20, annealed on plateau).
        epochs: Maximum passes over the training split files.
        max_seconds: Wall-clock training budget; training stops cleanly after it
            and whichever validates better is kept: the best end-of-split
            checkpoint so far or the model as trained up to the deadline
            (``metrics.json``: ``stopped_at_deadline``, ``kept_final_model``).
        valid_fraction: Share of descriptions held out for validation (and again for test).
        seed: Seeds Python, NumPy and torch (``flair.set_seed``).
        verbose: Keep flair's INFO logging.

    Returns:
        Path to ``<out_dir>/best-lm.safetensors``. ``<out_dir>/metrics.json`` holds
        ``valid_perplexity``, ``test_perplexity``, ``seconds`` and the settings.

    Raises:
        ConfigError: Bad direction or sizes.
        DataError: A blank description.
    """
    if direction not in DIRECTIONS:
        raise ConfigError(f"direction must be one of {', '.join(DIRECTIONS)}, got '{direction}'", field="direction")
    for field, value in (
        ("hidden_size", hidden_size),
        ("epochs", epochs),
        ("sequence_length", sequence_length),
        ("mini_batch_size", mini_batch_size),
    ):
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"{field} must be a positive integer, got {value!r}", field=field)
    texts = validate_texts(texts)
    if not texts:
        raise ConfigError("no descriptions to train a character LM on", field="texts")

    import flair
    from flair.models import LanguageModel
    from flair.trainers.language_model_trainer import LanguageModelTrainer, TextCorpus

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger("flair")  # flair logs INFO to stdout, where the CLI writes its JSON
    level = logger.level
    if not verbose:
        logger.setLevel(logging.WARNING)
    try:
        flair.set_seed(seed)
        counts = write_corpus(texts, out / "corpus", valid_fraction=valid_fraction, seed=seed)
        dictionary = _char_dictionary(texts)
        is_forward = direction == "forward"
        corpus = TextCorpus(out / "corpus", dictionary, forward=is_forward, character_level=True)
        batch = max(1, min(mini_batch_size, counts["valid"] // 4, counts["test"] // 4))
        seq_len = max(2, min(sequence_length, counts["train"] // (2 * batch)))
        model = LanguageModel(
            dictionary, is_forward, hidden_size=hidden_size, nlayers=nlayers, embedding_size=embedding_size
        )
        start = time.monotonic()
        deadline = None if max_seconds is None else start + float(max_seconds)
        trainer = _deadline_trainer(LanguageModelTrainer, deadline)(model, corpus)
        if not verbose:
            # skip 1000-char samples per split (an instance patch of a method, on purpose)
            model.generate_text = lambda *a, **k: ("", 0.0)  # type: ignore[method-assign]
        # flair's trainer saves with torch.save (a pickle): store tensors + JSON instead, and keep
        # no per-epoch pickled checkpoints (instance patches, on purpose; issue 36 item 1)
        model.save = lambda file: save_char_lm(model, file)  # type: ignore[method-assign]
        model.save_checkpoint = lambda *a, **k: None  # type: ignore[method-assign]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning)  # flair's GradScaler call
            trainer.train(
                out,
                sequence_length=seq_len,
                learning_rate=learning_rate,
                mini_batch_size=batch,
                max_epochs=epochs,
                num_workers=0,
                patience=max(1, epochs // 4),
            )
        seconds = time.monotonic() - start
        best = (out / "best-lm").with_suffix(SUFFIX)
        # flair validates (and saves the best model) only at the end of each training split
        # (~1M characters): a deadline mid-split would throw away everything trained since.
        # Keep the in-memory model when it validates better than the saved one.
        kept_final = False
        if trainer.stopped_at_deadline or not best.exists():
            kept_final = _keep_final_if_better(model, best, corpus, mini_batch_size=batch, sequence_length=seq_len)
        metrics = {
            "direction": direction,
            "model": str(best),
            "seconds": round(seconds, 2),
            "hidden_size": hidden_size,
            "nlayers": nlayers,
            "epochs": epochs,
            "max_seconds": max_seconds,
            "mini_batch_size": batch,
            "sequence_length": seq_len,
            "n_texts": len(texts),
            "chars": counts,
            "seed": seed,
            "stopped_at_deadline": bool(trainer.stopped_at_deadline),
            "kept_final_model": kept_final,
            **char_lm_perplexity(best, corpus, mini_batch_size=batch, sequence_length=seq_len),
        }
    finally:
        logger.setLevel(level)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return best


def _validation_loss(model: Any, corpus: Any, *, mini_batch_size: int, sequence_length: int) -> float:
    from flair.trainers.language_model_trainer import LanguageModelTrainer

    trainer = LanguageModelTrainer(model, corpus)
    data = trainer._batchify(corpus.valid, mini_batch_size)
    with torch.no_grad():
        return float(trainer.evaluate(data, mini_batch_size, sequence_length))


def _keep_final_if_better(model: Any, best: Path, corpus: Any, *, mini_batch_size: int, sequence_length: int) -> bool:
    """Save ``model`` as ``best`` if there is none yet or it has the lower validation loss."""
    if best.exists():
        saved = load_char_lm(best, has_decoder=True)
        kw = {"mini_batch_size": mini_batch_size, "sequence_length": sequence_length}
        if _validation_loss(model, corpus, **kw) >= _validation_loss(saved, corpus, **kw):
            return False
    save_char_lm(model, best)
    return True


def char_lm_perplexity(
    model_path: Path, corpus: Any, *, mini_batch_size: int, sequence_length: int
) -> dict[str, float]:
    """Validation and test perplexity (``exp`` of mean per-character cross-entropy)."""
    from flair.trainers.language_model_trainer import LanguageModelTrainer

    model = load_char_lm(model_path, has_decoder=True)
    trainer = LanguageModelTrainer(model, corpus)
    result = {}
    for part in ("valid", "test"):
        data = trainer._batchify(getattr(corpus, part), mini_batch_size)
        with torch.no_grad():
            loss = trainer.evaluate(data, mini_batch_size, sequence_length)
        result[f"{part}_perplexity"] = round(math.exp(loss), 4)
    return result


def read_char_lm_metrics(model_path: str | Path) -> dict[str, Any]:
    """The ``metrics.json`` written next to a model by :func:`train_char_lm`."""
    return json.loads((Path(model_path).parent / "metrics.json").read_text(encoding="utf-8"))
