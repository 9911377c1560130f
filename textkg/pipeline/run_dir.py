"""One way to open a run directory (or a release bundle): every command that reads one goes here.

``evaluate``, ``predict``, ``place``, ``export``, ``release``, ``audit``, ``train --resume`` and
``train --init-from`` all call :func:`open_run`, so every one of them checks that the run was
made by this major version (:func:`textkg.versioning.check_run_version`) and reads
``config.json`` the same way, with errors that name the file. The files and folders the config
names are checked first (:mod:`textkg.pipeline.run_files`): only registered names, or files
inside the run that textkg wrote, so that a crafted run folder never makes textkg load a pickle
or read beyond the run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from textkg.data.io import read_bytes
from textkg.errors import ConfigError
from textkg.pipeline.run_files import resolve_run_files
from textkg.training import checkpoint as ckpt
from textkg.training.config import RunConfig
from textkg.versioning import check_run_version

CONFIG = "config.json"
METRICS = "metrics.json"


def _read_json(path: Path) -> dict:
    raw = read_bytes(path, line_limit=False)  # a regular file within the data-file size limit
    try:
        data = json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON ({exc.msg})", file=path, line=exc.lineno) from None
    except UnicodeDecodeError:
        raise ConfigError("not valid UTF-8", file=path) from None
    except RecursionError:  # a crafted file of deeply nested brackets
        raise ConfigError("JSON nested too deeply", file=path) from None
    if not isinstance(data, dict):
        raise ConfigError("expected a JSON object", file=path)
    return data


@dataclass(frozen=True)
class RunDir:
    """A finished (or started) run directory, its stored config checked and parsed.

    Attributes:
        path: the directory.
        stored: ``config.json`` as written (a release adds ``release_label``).
        config: the parsed :class:`RunConfig`, the files it names checked and made absolute.
    """

    path: Path
    stored: dict
    config: RunConfig

    def metrics(self) -> dict | None:
        """``metrics.json``, or ``None`` when the run has not finished."""
        path = self.path / METRICS
        return _read_json(path) if path.is_file() else None

    def weights(self) -> dict:
        """The selected model's state dict, read without running code (:func:`ckpt.load_weights`)."""
        return ckpt.load_weights(self.path)

    def require(self, *names: str, why: str = "") -> None:
        """Refuse (exit 2) when a file the caller needs is missing."""
        for name in names:
            if not (self.path / name).is_file():
                raise ConfigError(f"no {name}{': ' + why if why else ''}", file=self.path)


def open_run(run_dir: str | Path, *, what: str = "a textkg run directory") -> RunDir:
    """Open ``run_dir``: its ``config.json`` must exist, parse, and come from this major version.

    Raises:
        ConfigError: no such directory or ``config.json``, bad JSON, another major version, a
            config that does not parse, or one that names a file or folder a run may not name
            (each naming the file).
    """
    path = Path(run_dir)
    cfg_path = path / CONFIG
    if not cfg_path.is_file():
        raise ConfigError(f"not {what} (no {CONFIG})", file=path)
    stored = _read_json(cfg_path)
    check_run_version(stored, cfg_path)
    resolved = resolve_run_files(stored, path, cfg_path)
    return RunDir(path=path, stored=stored, config=RunConfig.from_dict(resolved, source=str(cfg_path)))
