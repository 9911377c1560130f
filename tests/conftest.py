"""Test-wide setup: offline, temporary caches, no network; the order and threads of a parallel run.

``python -m pytest`` runs on pytest-xdist workers (pyproject.toml: ``-n auto --dist worksteal``, and ``auto``
is at most two, below; ``-n 0`` runs in one process). The workers of one run share one temporary cache folder
(every cache file is written under a temporary name and ``os.replace``-d, so a reader never sees half a
file, and a text encoded by one worker is not encoded again by the other); each worker trains on one
torch thread, as do the processes it starts (two workers of two threads each thrash on two cores).
"""

import os
import shutil
import tempfile

_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # the same in every worker of one run; unset without xdist
if _RUN:
    _TMP = os.path.join(tempfile.gettempdir(), f"textkg-tests-{_RUN[:16]}")
    os.makedirs(_TMP, exist_ok=True)
else:
    _TMP = tempfile.mkdtemp(prefix="textkg-tests-")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("FLAIR_CACHE_ROOT", os.path.join(_TMP, "flair"))
os.environ.setdefault("TEXTKG_CACHE_DIR", os.path.join(_TMP, "textkg-cache"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"  # before torch is imported, and for every process a test starts
    os.environ["MKL_NUM_THREADS"] = "1"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def pytest_collection_modifyitems(session, config, items):
    """Modules with a ``slow`` test first, each kept whole (its module fixtures are built once): the
    workers start on the long tests and finish on short ones, so neither waits long for the other at the
    end. The same order in every worker (xdist checks that the collections agree)."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: the rest keeps its order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per core this process may use, at most two (each worker holds up to ~1.5 GiB
    and trains on one thread); an explicit ``-n N`` is taken as given."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(2, cores))


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)  # in case a plugin imported torch before this file; a test may raise it


_WORKER_TMP: set[str] = set()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """The controller notes the workers' shared cache folder (named after their run id) to remove it."""
    _WORKER_TMP.add(os.path.join(tempfile.gettempdir(), f"textkg-tests-{node.workerinput['testrunuid'][:16]}"))


def pytest_unconfigure(config):
    """The controller (or a run without workers) removes the run's temporary caches (~170 MB)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        for path in {_TMP, *_WORKER_TMP}:
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_fb15k237():
    path = SHARED_DATA / "fb15k237"
    if not path.is_dir():
        pytest.skip("../shared/data/fb15k237 is absent")
    return path
