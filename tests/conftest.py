"""Test-wide setup: offline, temporary caches, no network."""

import os
import tempfile

_TMP = tempfile.mkdtemp(prefix="textkg-tests-")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("FLAIR_CACHE_ROOT", os.path.join(_TMP, "flair"))
os.environ.setdefault("TEXTKG_CACHE_DIR", os.path.join(_TMP, "textkg-cache"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_fb15k237():
    path = SHARED_DATA / "fb15k237"
    if not path.is_dir():
        pytest.skip("../shared/data/fb15k237 is absent")
    return path
