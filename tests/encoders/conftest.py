"""Shared fixtures for the encoder tests: tiny char LMs and a built-encoder cache."""

from __future__ import annotations

import pytest

TINY_CORPUS = [
    "Abnormal enlargement of the kidney.",
    "A head circumference below the third percentile.",
    "Recurrent seizures in infancy, often with fever.",
    "Short stature due to growth hormone deficiency.",
    "Naïve café ☃ and other odd text 日本語 😀.",
    "Increased muscle tone with stiffness.",
]


@pytest.fixture(scope="session")
def char_lms(tmp_path_factory):
    """(forward_path, backward_path) of two tiny character LMs (seconds to train)."""
    from textkg.encoders.charlm import train_char_lm

    root = tmp_path_factory.mktemp("charlm")
    texts = TINY_CORPUS * 3
    paths = tuple(
        train_char_lm(texts, direction=d, out_dir=root / d, hidden_size=16, embedding_size=8, epochs=1, seed=0)
        for d in ("forward", "backward")
    )
    return paths


@pytest.fixture(scope="session")
def built_encoders():
    """Session-wide cache name -> encoder, so each model loads once."""
    return {}


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tiny LSTMs/LMs are far faster single-threaded on a shared 2-core box; restored after."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)
