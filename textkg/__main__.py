"""``python -m textkg ...`` runs the command line (as ``torchrun -m textkg`` needs)."""

import sys

from textkg.cli.main import main

sys.exit(main())
