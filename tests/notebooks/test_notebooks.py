"""Every example notebook runs end to end, and the committed copies are clean.

Executed with nbclient in the ``python3`` kernel, in a temporary working
directory. The only reason to skip is a missing kernel.
"""

import importlib.util
import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
CELL_TIMEOUT_S = 600


def _kernel_available(name: str = "python3") -> bool:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        return False
    return True


def _builder():
    spec = importlib.util.spec_from_file_location("build_notebooks", NOTEBOOKS / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_all_notebooks_present():
    assert {p.name for p in PATHS} == {"01_zero_shot_hpo.ipynb", "02_privacy_utility.ipynb",
                                       "03_biomedical_encoders.ipynb"}


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_committed_without_outputs_and_up_to_date(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has outputs"
    built = _builder().build(path.name)
    assert json.loads(nbformat.writes(built)) == json.loads(path.read_text()), \
        f"{path.name} differs from notebooks/build_notebooks.py: re-run it"


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_notebook_executes(path, tmp_path, monkeypatch):
    if not _kernel_available():
        pytest.skip("the python3 Jupyter kernel is not installed")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=dict(os.environ))
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
