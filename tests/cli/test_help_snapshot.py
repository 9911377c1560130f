"""``textkg COMMAND --help`` and every flag's parsing are unchanged since b54adb0 (issue 40, item 3).

The command modules were regrouped by topic and the config flags are now derived from one
declaration each; the snapshot (tests/cli/snapshots/help.json, written by
tests/cli/help_snapshot.py from b54adb0's parser) pins what a user sees and what each flag parses:
help text, option strings, dest, type, default, choices, nargs, required.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from help_snapshot import snapshot

SNAPSHOT = json.loads((Path(__file__).parent / "snapshots" / "help.json").read_text(encoding="utf-8"))
TODAY = snapshot()


def test_the_same_commands_exist():
    assert sorted(TODAY) == sorted(SNAPSHOT["parsers"])


@pytest.mark.parametrize("path", sorted(SNAPSHOT["parsers"]))
def test_flags_parse_as_before(path):
    assert TODAY[path]["flags"] == SNAPSHOT["parsers"][path]["flags"]


@pytest.mark.skipif(
    f"{sys.version_info[0]}.{sys.version_info[1]}" != SNAPSHOT["python"],
    reason="argparse's layout differs between Python versions; the snapshot was written on " + SNAPSHOT["python"],
)
@pytest.mark.parametrize("path", sorted(SNAPSHOT["parsers"]))
def test_help_text_is_unchanged(path):
    assert TODAY[path]["help"] == SNAPSHOT["parsers"][path]["help"]
