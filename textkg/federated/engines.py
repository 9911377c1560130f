"""Which engine runs a federation: every holder in this process, or Flower's simulation engine (``ray``).

The one dispatcher above :mod:`textkg.federated.runner` (the in-process engine and the toolkit both
engines share) and :mod:`textkg.federated.simulation` (Ray actors), so neither imports the other's
caller (issue 30: no import circles).
"""

from __future__ import annotations

from pathlib import Path

from textkg.errors import ConfigError
from textkg.federated.config import FederatedConfig
from textkg.federated.partition import FILES


def federate(
    cfg, fed: FederatedConfig, out_dir: Path, *, resume: bool = False, progress: bool = True, on_upload=None
) -> dict:
    """Run a federation on ``fed.engine`` and write its outputs; returns the metrics written to ``metrics.json``.

    ``on_upload(holder, sent, upload)`` sees every upload; only the in-process engine can call it.
    See :func:`textkg.federated.runner.federate_inprocess` for what is written and how ``resume`` works.
    """
    if fed.partition == FILES:
        raise ConfigError(
            "the files partition keeps each holder's statements on its own node: run it on Flower's deployment "
            "engine (textkg federate-app, one SuperNode per holder with --node-config data-file=...), or use "
            "--partition column in one process",
            field="partition",
        )
    if fed.engine == "ray":
        from textkg.federated.simulation import simulate

        if on_upload is not None:
            raise ConfigError("on_upload sees the uploads in this process: use --engine inprocess", field="engine")
        return simulate(cfg, fed, Path(out_dir), progress=progress, resume=resume)
    from textkg.federated.runner import federate_inprocess

    return federate_inprocess(cfg, fed, out_dir, resume=resume, progress=progress, on_upload=on_upload)
