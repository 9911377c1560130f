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

import functools
from dataclasses import dataclass
from pathlib import Path

from textkg.data.io import max_file_bytes
from textkg.errors import ConfigError
from textkg.pipeline.run_files import resolve_run_files
from textkg.schema import MAX_DEPTH, AnyJSON, Bool, Num, Obj, Spec, Str, load_json, validate
from textkg.training import checkpoint as ckpt
from textkg.training.config import RunConfig
from textkg.versioning import check_run_version

CONFIG = "config.json"
METRICS = "metrics.json"
#: a release bundle's manifest (``textkg release``): a folder holding it is a bundle
BUNDLE_MANIFEST = "RELEASE.json"


#: the largest JSON file of a run read (the bound :func:`textkg.schema.load_json` applies after reading)
RUN_JSON_MAX_BYTES = 64 * 1024 * 1024


def _read_regular(path: Path) -> bytes:
    """The bytes of a run's regular file, opened without following a link (``O_NOFOLLOW``: checked and read
    through one descriptor, so a link swapped in after a check is never followed) and without blocking on a FIFO,
    at most :data:`RUN_JSON_MAX_BYTES` read. A received run's link to a file outside it (a credentials file) is
    never read, so never copied into the run by a command that writes the file back (``evaluate --placement``);
    textkg writes no links."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise ConfigError("file not found", file=path) from None
    except OSError:  # ELOOP: the name is a symbolic link
        if path.is_symlink():
            refused = "a symbolic link is refused: a run's files are regular files inside it"
            raise ConfigError(refused, file=path) from None
        raise ConfigError("cannot be opened", file=path) from None
    limit = min(RUN_JSON_MAX_BYTES, max_file_bytes())  # and within the data-file limit ($TEXTKG_MAX_FILE_BYTES)
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError("not a regular file", file=path)
        if info.st_size > limit:  # refused before it is read (textkg writes tens of kilobytes)
            raise ConfigError(f"{info.st_size:,} bytes, over the {limit:,} a run's JSON file may hold", file=path)
        raw = fh.read(limit + 1)
    if len(raw) > limit:  # grew since fstat
        raise ConfigError(f"over the {limit:,} bytes a run's JSON file may hold", file=path)
    return raw


def read_run_json(path: Path) -> dict:
    """A JSON object file of a run (``config.json``, ``metrics.json``, ``federated.json``, ...).

    Raises:
        ConfigError: not a regular file within the data-file size limit, not UTF-8 JSON (``NaN`` is
            not JSON), nested deeper than :data:`textkg.schema.MAX_DEPTH`, not an object, or a symbolic link
            (naming the file).
    """
    raw = _read_regular(Path(path))
    return load_json(raw, Obj(extra=AnyJSON(max_str=len(raw), max_len=len(raw)), max_keys=len(raw)), file=path)


#: a weight a run chose on validation (finite: ``1e308`` or ``inf`` would turn every score into NaN)
_WEIGHT = Num(low=0, high=1e6)
#: a block of a run's ``test`` whose other keys only describe (reported, never acted on)
_REPORT = AnyJSON(max_str=1 << 20, max_len=1 << 20)


@functools.cache
def run_choices_schema() -> Spec:
    """What the ``test`` block of a run's ``metrics.json`` may say about the choices commands act on:
    ``placement_selection`` (``place``; its names-only twin too), ``neighbour_vote`` and
    ``k_shot_selection`` (``predict``); each choice one of the registered values, each weight finite.
    ``link_rerank`` and ``placement_rerank`` are checked by their own ``from_dict``."""
    from textkg.evaluation.placement.methods import COMBINED_COMPONENTS, SELECTABLE_METHODS
    from textkg.models.known_links import NO_LINKS, PRIOR_WEIGHTS, LinkMethod

    vote = Obj(
        {
            "k": Num(low=1, high=1e6, integer=True),
            "temperature": Num(low=0, high=1e6, low_open=True, nullable=True),
            "ancestor_decay": Num(low=0, high=1),
            "per_parent": Bool(),
        },
        required=("k", "temperature", "ancestor_decay", "per_parent"),
        nullable=True,
    )
    combined = Obj(
        {
            "weights": Obj({c: _WEIGHT for c in COMBINED_COMPONENTS}),
            "vote": vote,
            "valid_mrr": Num(low=0, high=1, nullable=True),
            "tried_valid_mrr": Obj(extra=Num(low=0, high=1, nullable=True), max_keys=100_000),
            # a candidate's best parent's score added (textkg.evaluation.placement.parent_support)
            "parent_support": Obj(
                {
                    # training writes at most 0.3 and -2 (parent_support.WEIGHTS, ROOT): a crafted 100 is refused
                    "weight": Num(low=0, high=10),
                    "root": Num(low=-10, high=10),
                    "tried_valid_mrr": Obj(extra=Num(low=0, high=1, nullable=True), max_keys=1000),
                },
                required=("weight", "root"),
                nullable=True,
            ),
            # the placement cross-encoder over each term's top_k (textkg.evaluation.placement.shortlist)
            "cross_encoder": Obj(
                {
                    "top_k": Num(low=2, high=1000, integer=True),
                    "weight": _WEIGHT,
                    "tried_valid_mrr": Obj(extra=Num(low=0, high=1, nullable=True), max_keys=1000),
                    "pairs_scored": Num(low=0, integer=True),
                    "seconds": Num(low=0),
                },
                required=("top_k", "weight"),
                nullable=True,
            ),
        },
        required=("weights",),
    )
    # each method's validation metrics: the printed reading quotes the chosen one's MRR
    valid = Obj(extra=Obj({"mrr": Num(low=0, high=1, nullable=True)}, extra=_REPORT, required=("mrr",)), max_keys=100)
    selection = Obj(
        {
            "chosen": Str(choices=SELECTABLE_METHODS),
            "criterion": Str(),
            "valid": valid,
            "valid_reported_only": _REPORT,
            "combined": combined,
        },
        required=("chosen", "valid", "combined"),
        nullable=True,
    )
    link_methods = (NO_LINKS.key, *(LinkMethod(m, p).key for m, ps in PRIOR_WEIGHTS.items() for p in ps))
    k_shot = Obj(
        {
            "chosen": Str(choices=link_methods, nullable=True),
            "made_by": Str(max_len=200),
            "link_vote": Obj({"weight": _WEIGHT}, extra=_REPORT, nullable=True),
        },
        extra=_REPORT,
        nullable=True,
    )
    return Obj(
        {
            "placement_selection": selection,
            "placement_names_only": Obj({"placement_selection": selection}, extra=_REPORT, nullable=True),
            "neighbour_vote": Obj({"weight": _WEIGHT, "spread_weight": _WEIGHT}, extra=_REPORT, nullable=True),
            "k_shot_selection": k_shot,
        },
        extra=_REPORT,
        max_keys=10_000,
        nullable=True,
    )


def check_run_choices(metrics: dict, *, file: str | Path) -> dict:
    """``metrics`` (a run's ``metrics.json``) with its ``test`` block's choices checked against
    :func:`run_choices_schema`; returned unchanged.

    Raises:
        SchemaError: a choice that is not registered, a weight that is not a finite number in [0, 1e6], a
            key a choice does not take; naming the file and the JSON path (``test.placement_selection.chosen``).
    """
    validate(metrics.get("test"), run_choices_schema(), file=file, path="test", max_depth=MAX_DEPTH)
    return metrics


@dataclass(frozen=True)
class RunDir:
    """A finished (or started) run directory, its stored config checked and parsed.

    Attributes:
        path: the directory.
        stored: ``config.json`` as written (a release adds ``release_label``).
        parsed: the parsed :class:`RunConfig`, the files it names checked and made absolute; read it as
            :attr:`config`.
        dataset_missing: why :attr:`config` cannot be used: a release bundle whose dataset is not a
            registered name, opened without the dataset (:func:`open_run`'s ``dataset``); ``None``: it can.
    """

    path: Path
    stored: dict
    parsed: RunConfig
    dataset_missing: str | None = None

    @property
    def config(self) -> RunConfig:
        """The parsed config.

        Raises:
            ConfigError: a release bundle opened without the dataset it needs (:attr:`dataset_missing`).
        """
        if self.dataset_missing is not None:
            raise ConfigError(self.dataset_missing, file=self.path / CONFIG, field="data.dataset")
        return self.parsed

    def metrics(self) -> dict | None:
        """``metrics.json``, its choices checked (:func:`check_run_choices`), or ``None`` when the run has
        not finished."""
        metrics = self.read(METRICS)
        return None if metrics is None else check_run_choices(metrics, file=self.path / METRICS)

    def read(self, name: str) -> dict | None:
        """The run's JSON file ``name`` (:func:`read_run_json`), or ``None`` when it has none."""
        path = self.path / name
        return read_run_json(path) if path.is_file() or path.is_symlink() else None

    def weights(self) -> dict:
        """The selected model's state dict, read without running code (:func:`ckpt.load_weights`)."""
        return ckpt.load_weights(self.path)

    def check_vocabulary(self, entities: list[str], relations: list[str], train_entities: list[int]) -> None:
        """Refuse a dataset whose vocabulary is not the run's public one (``graph.json``: its entity and
        relation ids, in order, and the entities with a structural row), e.g. another graph given as
        ``dataset`` to :func:`open_run`.

        Raises:
            ConfigError: no ``graph.json``, or a vocabulary that differs from it (naming the field).
        """
        graph = self.read("graph.json")
        if graph is None:
            raise ConfigError(
                "the run has no graph.json (its public vocabulary) to check the dataset by", file=self.path
            )
        given: dict[str, list] = {
            "entities": list(entities),
            "relations": list(relations),
            "train_entities": list(train_entities),
        }
        for key, value in given.items():
            saved = graph.get(key)
            if saved != value:
                count = len(saved) if isinstance(saved, list) else 0
                raise ConfigError(
                    f"the dataset's {key} are not the run's ({len(value)} against {count} in "
                    "graph.json, or in another order): give the dataset the run was trained on",
                    file=self.path / "graph.json",
                    field=key,
                )


def open_record(run_dir: str | Path, name: str = CONFIG, *, what: str = "a textkg run directory") -> dict:
    """The run's JSON file ``name``, which must exist, parse and record this major version.

    :func:`open_run` reads ``config.json`` through it; a run whose settings are another file
    (a federation across graphs: ``cross_graph.json``) is opened with its own ``name``.

    Raises:
        ConfigError: no such file, bad JSON, or another (or no) major version, naming the file.
    """
    path = Path(run_dir) / name
    if not path.is_file() and not path.is_symlink():
        raise ConfigError(f"not {what} (no {name})", file=run_dir)
    stored = read_run_json(path)
    check_run_version(stored, path)
    return stored


def is_bundle(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` is a release bundle (it holds :data:`BUNDLE_MANIFEST`, as ``textkg release`` writes)."""
    path = Path(run_dir) / BUNDLE_MANIFEST
    return path.exists() or path.is_symlink()


def _bundle_data(stored: dict, dataset: str | None) -> tuple[dict, str | None]:
    """A bundle's stored config with its ``data`` paths as the recipient gives them, and why it cannot be used.

    A bundle names its dataset by its registered name or its last part only (``textkg release``), and textkg
    never opens a path a bundle names: a registered name is loaded from the registry; anything else only
    from ``dataset``, the recipient's own path. ``inductive_dir``, ``public_entities`` and ``privacy.unit_entities``
    are then read by their last part, inside that dataset folder.
    """
    from textkg.data import list_datasets

    if not all(isinstance(stored.get(k) or {}, dict) for k in ("data", "privacy")):
        return stored, None  # RunConfig.from_dict refuses it, naming the file and the field; nothing is opened
    data = dict(stored.get("data") or {})
    named = data.get("dataset")
    if dataset is None and named in list_datasets():
        dataset = named
    if dataset is None:
        return stored, (
            f"a release bundle names its dataset ({named!r}) but never where it lies, and textkg never opens a "
            "path a bundle names: give your copy of the dataset (textkg predict BUNDLE --dataset PATH; Python: "
            "textkg.load(BUNDLE, dataset=PATH))"
        )
    data["dataset"] = dataset
    for key in ("inductive_dir", "public_entities"):
        if data.get(key) is not None:
            name = str(data[key]).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
            if name in ("", ".", "..") or not Path(dataset).is_dir():
                return stored, (
                    f"the bundle's data.{key} ({data[key]!r}) is read only inside the dataset folder you give "
                    "(textkg predict BUNDLE --dataset FOLDER)"
                )
            data[key] = str(Path(dataset) / name)
    privacy = dict(stored.get("privacy") or {})
    if isinstance(privacy.get("unit_entities"), str):  # --unit-entities: by its last part, inside the dataset folder
        name = str(privacy["unit_entities"]).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        if name in ("", ".", "..") or not Path(dataset).is_dir():
            return stored, (
                f"the bundle's privacy.unit_entities ({privacy['unit_entities']!r}) is read only inside the dataset "
                "folder you give (textkg predict BUNDLE --dataset FOLDER)"
            )
        privacy["unit_entities"] = str(Path(dataset) / name)
        return {**stored, "data": data, "privacy": privacy}, None
    return {**stored, "data": data}, None


def open_run(run_dir: str | Path, *, what: str = "a textkg run directory", dataset: str | None = None) -> RunDir:
    """Open ``run_dir``: its ``config.json`` must exist, parse, and come from this major version.

    ``dataset``: the dataset to use instead of the one ``config.json`` names (a path of the caller's). A
    release bundle (:func:`is_bundle`) never resolves a path it names: its dataset is a registered name or
    ``dataset`` (else :attr:`RunDir.config` raises, naming the flag); an ordinary run folder (the user's own
    ``textkg train --out``) loads the dataset its config names, as trained.

    Raises:
        ConfigError: no such directory or ``config.json``, bad JSON, another major version, a
            config that does not parse, or one that names a file or folder a run may not name
            (each naming the file).
    """
    path = Path(run_dir)
    cfg_path = path / CONFIG
    stored = open_record(path, CONFIG, what=what)
    given, missing = stored, None
    if is_bundle(path):
        given, missing = _bundle_data(stored, dataset)
    elif dataset is not None:
        given = {**stored, "data": {**(stored.get("data") or {}), "dataset": dataset}}
    resolved = resolve_run_files(given, path, cfg_path)
    config = RunConfig.from_dict(resolved, source=str(cfg_path))
    return RunDir(path=path, stored=stored, parsed=config, dataset_missing=missing)
