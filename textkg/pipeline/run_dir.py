"""One way to open a run directory (or a release bundle): every command that reads one goes here.

``evaluate``, ``predict``, ``place``, ``export``, ``release``, ``audit``, ``train --resume``,
``train --init-from``, ``federate --resume``, a sweep's finished points and ``plot`` all call
:func:`open_run` (a federation across graphs, whose settings are not a ``config.json``:
:func:`open_record`), so every one of them checks that the run was made by this major version
(:func:`textkg.versioning.check_run_version`) before it reads anything else, and reads every JSON
file of the run the same way (:func:`read_run_json`: bounded in size, strict, errors that name the
file; tests/cli/test_run_version_every_command.py). The files and folders the config
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


def read_run_json(path: Path) -> dict:
    """A JSON object file of a run (``config.json``, ``metrics.json``, ``federated.json``, ...).

    Raises:
        ConfigError: not a regular file within the data-file size limit, not UTF-8 JSON, or not an
            object (naming the file).
    """
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
        return self.read(METRICS)

    def read(self, name: str) -> dict | None:
        """The run's JSON file ``name`` (:func:`read_run_json`), or ``None`` when it has none."""
        path = self.path / name
        return read_run_json(path) if path.is_file() else None

    def weights(self) -> dict:
        """The selected model's state dict, read without running code (:func:`ckpt.load_weights`)."""
        return ckpt.load_weights(self.path)


def open_record(run_dir: str | Path, name: str = CONFIG, *, what: str = "a textkg run directory") -> dict:
    """The run's JSON file ``name``, which must exist, parse and record this major version.

    :func:`open_run` reads ``config.json`` through it; a run whose settings are another file
    (a federation across graphs: ``cross_graph.json``) is opened with its own ``name``.

    Raises:
        ConfigError: no such file, bad JSON, or another (or no) major version, naming the file.
    """
    path = Path(run_dir) / name
    if not path.is_file():
        raise ConfigError(f"not {what} (no {name})", file=run_dir)
    stored = read_run_json(path)
    check_run_version(stored, path)
    return stored


def open_run(run_dir: str | Path, *, what: str = "a textkg run directory") -> RunDir:
    """Open ``run_dir``: its ``config.json`` must exist, parse, and come from this major version.

    Raises:
        ConfigError: no such directory or ``config.json``, bad JSON, another major version, a
            config that does not parse, or one that names a file or folder a run may not name
            (each naming the file).
    """
    path = Path(run_dir)
    cfg_path = path / CONFIG
    stored = open_record(path, CONFIG, what=what)
    resolved = resolve_run_files(stored, path, cfg_path)
    return RunDir(path=path, stored=stored, config=RunConfig.from_dict(resolved, source=str(cfg_path)))
