"""``python -m textkg`` is the command line (torchrun launches modules this way)."""

import subprocess
import sys

import textkg


def test_python_m_textkg_prints_the_version():
    proc = subprocess.run(
        [sys.executable, "-m", "textkg", "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == textkg.__version__
