"""Data holders' own node configurations for textkg's Flower apps in tests (issue 51: a node is its own authority).

Each node gets its own settings file (a copy of the federation's settings, in a folder of its own) and
its own state folder, as ``textkg federate-app`` prints them for ``flower-supernode --node-config``.
"""

from __future__ import annotations

import json
from pathlib import Path


def node_configs(root: Path, cfg, fed, num: int, extra: list[dict] | None = None) -> list[dict]:
    """``node_config`` entries (beyond ``partition-id``) of ``num`` nodes, each with files under ``root/node-k``."""
    from textkg.federated.app import settings_dict

    # textkg.federated.node's SETTINGS and STATE_DIR, spelled out: these tests also run on 1a0007a (no node.py)
    SETTINGS, STATE_DIR = "settings", "state-dir"

    out = []
    for k in range(num):
        folder = Path(root) / f"node-{k}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "textkg-settings.json").write_text(json.dumps(settings_dict(cfg, fed), indent=2) + "\n")
        entry = {SETTINGS: str(folder / "textkg-settings.json"), STATE_DIR: str(folder / "state")}
        out.append({**entry, **(extra[k] if extra else {})})
    return out
