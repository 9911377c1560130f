"""Execute every notebook and publish the executed copy, outputs and plots included, under docs/notebooks/.

    python notebooks/publish.py [NAME ...]     # default: every notebooks/*.ipynb

The scripts (``notebooks/*.py``, jupytext percent format) are the reviewed
source; ``jupytext --sync notebooks/*.py`` rebuilds the paired ``.ipynb``
(committed without outputs), and this executes them in a temporary directory
with nbclient, as ``tests/notebooks`` does, so a reader sees the plots without
running anything.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "docs" / "notebooks"
#: Per cell: 02's sweep cells train two runs each, which takes more than 15 minutes on busy cores.
CELL_TIMEOUT_S = 3600


def publish(path: Path) -> Path:
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as tmp:
        NotebookClient(
            nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": tmp}}
        ).execute(env={**os.environ, "MPLBACKEND": "Agg"})
    OUT.mkdir(parents=True, exist_ok=True)
    target = OUT / path.name
    nbformat.write(nb, target)
    return target


def main(argv: list[str]) -> int:
    paths = [HERE / f"{name.removesuffix('.ipynb')}.ipynb" for name in argv] or sorted(HERE.glob("*.ipynb"))
    for path in paths:
        print(f"wrote {publish(path)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
