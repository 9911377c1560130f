"""Fixtures for the data-layer tests."""

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="session")
def tiny_blp() -> Path:
    return FIXTURES / "tiny_blp"


@pytest.fixture(scope="session")
def tiny_blp_ind() -> Path:
    return FIXTURES / "tiny_blp_ind"


@pytest.fixture
def tiny_copy(tmp_path, tiny_blp) -> Path:
    """A writable copy of ``tiny_blp`` to corrupt."""
    dest = tmp_path / "tiny_blp"
    shutil.copytree(tiny_blp, dest)
    return dest


@pytest.fixture
def tiny_ind_copy(tmp_path, tiny_blp_ind) -> Path:
    dest = tmp_path / "tiny_blp_ind"
    shutil.copytree(tiny_blp_ind, dest)
    return dest


@pytest.fixture(scope="session")
def hpo_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hpo-cache")


@pytest.fixture(scope="session")
def hpo_small(hpo_cache):
    from textkg.data import load_dataset

    return load_dataset("hpo-small", cache_dir=hpo_cache)
