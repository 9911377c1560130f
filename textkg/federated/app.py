"""``textkg federate`` on Flower's deployment engine: a ServerApp and a ClientApp for a SuperLink and SuperNodes.

The in-process runner (:func:`textkg.federated.engines.federate`) calls every
holder's ClientApp in one process. Here the same federation runs as separate
processes, the way Flower deploys one: a ``flower-superlink``, one
``flower-supernode`` per data holder (``--node-config "partition-id=k"``), and
``flwr run APP`` to submit this module's :data:`serverapp` and
:data:`clientapp` (the Flower App written by ``textkg federate-app``).

What each process does:

* The **ServerApp** (started by the SuperLink) reads textkg's settings
  (:func:`read_settings`; the run-config key ``settings``, a JSON file shipped
  in the app), prepares the public side of the run (vocabulary, validation and
  test statements, the initial model), and runs the runner's strategy
  (:func:`~textkg.federated.runner.make_strategy`: Flower's ``FedAvg`` weighted
  by each holder's own statements, or client-level DP-FedAvg) over the Grid
  Flower gives it. It evaluates the global model on the public validation
  statements after every round and writes the runner's outputs
  (:func:`~textkg.federated.runner.write_outputs`) to the run-config key
  ``out``, with ``"engine": "flower-deployment"`` in ``federated.json``.
* Each round it sends every SuperNode the global trained parameters and the
  settings (public: dataset name, model, hyper-parameters, privacy mode).
* The **ClientApp** (started by a SuperNode, once per message: Flower 1.42
  runs every message in a fresh ``flwr-clientapp`` process) builds only holder
  ``partition-id`` from the settings (the runner's partition rule and seed, so
  the holder gets the statements it gets in-process), trains
  ``local-epochs`` epochs and returns its parameters and metrics. The
  holder's private state (optimizer, sampler, epoch counter, privacy ledger
  and the secret key of its noise) is kept between rounds in Flower's
  node-local ``Context.state``, which stays in the SuperNode; a process that
  serves several rounds reuses its holder instead (:data:`_HOLDERS`).

There is no ``checkpoint.pt`` and no ``--resume`` here: the holders' states
live on their nodes, not on the server. On the simulation engine the server
writes ``checkpoint.pt`` and every holder its own state file
(:mod:`textkg.federated.checkpointing`), so ``--resume`` works there.

The same two apps run on Flower's simulation engine, holders in Ray actors
(``textkg federate --engine simulation``, :mod:`textkg.federated.simulation`).
"""

from __future__ import annotations

import io
import json
import logging
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from textkg.errors import ConfigError
from textkg.federated.checkpointing import DONE_KEY, HOLDER_DIR_KEY, load_holder_state, save_holder_state
from textkg.federated.client_dp import holder_entry
from textkg.federated.grid import DATA_FILE, NUM_PARTITIONS, PARTITION_ID, REPORT_KEY
from textkg.federated.runner import (
    DataHolder,
    FederatedConfig,
    Federation,
    check_settings,
    make_strategy,
    prepare_federation,
    round_line,
    trained_state,
    validation_mrr,
    write_outputs,
    write_start_files,
)

#: ``federated.json``'s ``engine``.
ENGINE = "flower-deployment"
#: The settings file ``textkg federate-app`` writes into the app.
SETTINGS_FILE = "textkg-settings.json"
#: Keys of the train message's ConfigRecord.
SETTINGS_KEY, EPOCHS_KEY = "textkg-settings", "local-epochs"
#: Key of a holder's state in its node's ``Context.state`` (its report's key in a reply: ``grid.REPORT_KEY``).
STATE_KEY = "textkg-holder"
#: Run-config keys of the Flower App, with their defaults.
RUN_CONFIG_DEFAULTS: dict[str, Any] = {"settings": SETTINGS_FILE, "out": "", "round-timeout": 3600.0}

log = logging.getLogger("flwr")


# -- settings ------------------------------------------------------------------------


def settings_dict(cfg, fed: FederatedConfig) -> dict:
    """textkg's settings of a federation as one JSON-ready dict (``textkg train``'s config + the federation).

    The ``engine`` is left out: it is how the server runs the federation, nothing a holder needs."""
    federated = {key: value for key, value in fed.to_dict().items() if key != "engine"}
    return {"config": cfg.to_dict(), "federated": federated}


def settings_from_dict(data: Any, *, source: str = "settings") -> tuple[Any, FederatedConfig]:
    """``(RunConfig, FederatedConfig)`` from :func:`settings_dict`'s dict."""
    import dataclasses

    from textkg.training.config import RunConfig

    if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
        raise ConfigError("expected an object with 'config' and 'federated'", file=source)
    fed_data = data.get("federated")
    if not isinstance(fed_data, dict):
        raise ConfigError("expected an object with 'config' and 'federated'", file=source)
    names = {f.name for f in dataclasses.fields(FederatedConfig)}
    unknown = sorted(set(fed_data) - names)
    if unknown:
        raise ConfigError(f"unknown federated settings {', '.join(unknown)}", file=source, field="federated")
    cfg = RunConfig.from_dict(data["config"], source=source)
    fed = FederatedConfig(**fed_data)
    check_settings(cfg, fed)
    return cfg, fed


def read_settings(path: Path) -> tuple[Any, FederatedConfig]:
    """Read a settings file written by ``textkg federate-app``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("no such settings file", file=path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON ({exc.msg}, line {exc.lineno})", file=path) from None
    return settings_from_dict(data, source=str(path))


def write_app(app_dir: Path, cfg, fed: FederatedConfig, out: Path) -> dict:
    """Write a Flower App that runs this federation on the deployment engine; returns what was written.

    ``app_dir`` gets ``pyproject.toml`` (the components are this module's
    :data:`serverapp` and :data:`clientapp`; the run config names the
    settings file and the server's output directory) and
    :data:`SETTINGS_FILE`. ``flwr run`` ships both to the SuperLink (the FAB
    holds every ``*.toml`` and ``*.json`` of the directory).
    """
    check_settings(cfg, fed)
    app_dir = Path(app_dir)
    if app_dir.exists() and any(app_dir.iterdir()):
        raise ConfigError(f"app directory {app_dir} is not empty; choose a new one", field="app")
    app_dir.mkdir(parents=True, exist_ok=True)
    (app_dir / SETTINGS_FILE).write_text(json.dumps(settings_dict(cfg, fed), indent=2) + "\n")
    (app_dir / "pyproject.toml").write_text(pyproject_toml(out=Path(out).resolve()))
    return {"app": str(app_dir), "settings": str(app_dir / SETTINGS_FILE), "out": str(Path(out).resolve())}


def pyproject_toml(*, out: Path | str, settings: str = SETTINGS_FILE) -> str:
    """The Flower App's ``pyproject.toml`` (no ``dependencies``: the nodes run textkg's own environment)."""
    return f"""\
# A Flower App: `textkg federate` on Flower's deployment engine (docs/federated.md).
# Written by `textkg federate-app`. flwr run ships this file and {settings} to the SuperLink.
[project]
name = "textkg-federation"
version = "1.0.0"
description = "textkg federate on Flower's deployment engine: one SuperNode per data holder"
license = "MIT"

[tool.flwr.app]
publisher = "textkg"

[tool.flwr.app.components]
serverapp = "textkg.federated.app:serverapp"
clientapp = "textkg.federated.app:clientapp"

[tool.flwr.app.config]
# textkg's settings (train config + federation), relative to this directory or absolute
settings = {json.dumps(settings)}
# where the ServerApp writes config.json, federated.json, graph.json, best_model.pt, metrics.json
# (on the SuperLink's machine; a relative path is relative to the SuperLink's working directory)
out = {json.dumps(str(out))}
# seconds the server waits for every holder's reply in one round
round-timeout = 3600.0
"""


# -- the server ----------------------------------------------------------------------


def serve(
    grid: Grid,
    cfg,
    fed: FederatedConfig,
    out_dir: Path,
    *,
    round_timeout: float = 3600.0,
    engine: str = ENGINE,
    prepared: Federation | None = None,
    echo: Callable[[str], None] | None = None,
    checkpoint: bool = False,
    saved: dict | None = None,
) -> dict:
    """Run the federation over ``grid`` (one node per holder) and write its outputs; returns the metrics.

    Every round must get exactly one reply from each holder ``0..K-1`` (told by
    the ``partition-id`` of its SuperNode); anything else stops the run with an
    error rather than averaging fewer holders.

    Args:
        engine: ``federated.json``'s ``engine``.
        prepared: ``prepare_federation(cfg, fed)``, if the caller has it already.
        echo: Where each round's progress line goes (default: Flower's logger, at INFO).
        checkpoint: Write ``checkpoint.pt`` after every round, and have every holder keep its state in
            ``out_dir/clients/<name>/`` (the ClientApp must see that directory: the simulation engine).
        saved: A checkpoint to continue from (:func:`textkg.federated.checkpointing.load_checkpoint`).
    """
    from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords

    out_dir = Path(out_dir)
    if saved is None and out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(f"output directory {out_dir} is not empty; choose another 'out'", field="out")
    fedn = prepare_federation(cfg, fed) if prepared is None else prepared
    part = fedn.part
    k = part.num_clients
    settings = json.dumps(settings_dict(fedn.cfg, fed), sort_keys=True)
    done = 0 if saved is None else int(saved["round"])
    reports: dict[int, dict] = {} if saved is None else dict(saved["reports"])
    aggregated = [0]  # rounds of this start whose replies were all there
    history: list[dict] = [] if saved is None else list(saved["history"])

    def collect(replies: list[RecordDict], weighted_by_key: str) -> MetricRecord:
        """FedAvg's metrics aggregation, after checking that each holder replied once."""
        seen = []
        for content in replies:
            if REPORT_KEY not in content:
                raise ConfigError("a node replied without a textkg report: is it running textkg's ClientApp?")
            report = json.loads(str(content[REPORT_KEY]["json"]))
            seen.append(int(report["partition"]))
            if report["name"] != part.clients[seen[-1]]:
                raise ConfigError(
                    f"holder {seen[-1]} calls itself {report['name']!r}, the server {part.clients[seen[-1]]!r}: "
                    "the nodes partitioned another dataset or with other settings",
                    field="partition-id",
                )
            reports[seen[-1]] = report
        if sorted(seen) != list(range(k)):
            missing = sorted(set(range(k)) - set(seen))
            raise ConfigError(
                f"round replies came from partition-ids {sorted(seen)}; expected each of 0..{k - 1} once"
                + (f" (no reply from {', '.join(part.clients[i] for i in missing)}: see its SuperNode's log)")
                * bool(missing)
                + ". Start one SuperNode per holder with --node-config 'partition-id=k num-partitions="
                + f"{k}'",
                field="partition-id",
            )
        aggregated[0] += 1
        return aggregate_metricrecords(replies, weighted_by_key)

    def evaluate_fn(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        if saved is not None and server_round == 0:  # the checkpoint's round, evaluated before the crash
            return MetricRecord({"valid_mrr": float(history[-1]["valid_mrr"])})
        if server_round and aggregated[0] != server_round:
            raise RuntimeError(f"round {server_round} was not aggregated: a holder did not reply (see the SuperNodes)")
        server_round += done
        state = arrays.to_torch_state_dict()
        mrr = validation_mrr(fedn, state)
        record: dict[str, Any] = {"round": server_round, "valid_mrr": mrr}
        if server_round and fedn.cfg.privacy.mode != "none":
            record["epsilon_max"] = max(float(r["epsilon"]) for r in reports.values())
        history.append(record)
        (log.info if echo is None else echo)(round_line(record, fed.rounds))
        if checkpoint and server_round:
            save_server_round(out_dir, fedn, server_round, state, history, reports, strategy)
        return MetricRecord({"valid_mrr": float(mrr)})

    strategy = make_strategy(
        fed, k, client_dp_state=None if saved is None else saved["client_dp"], train_metrics_aggr_fn=collect
    )
    if saved is None:
        write_start_files(out_dir, fedn, engine=engine)
    train_config: dict[str, Any] = {EPOCHS_KEY: fed.local_epochs, SETTINGS_KEY: settings}
    if checkpoint:
        train_config.update({HOLDER_DIR_KEY: str((out_dir / "clients").resolve()), DONE_KEY: done})
    final = trained_state(fedn.prep.model) if saved is None else saved["arrays"]
    py_random = random.getstate()
    random.seed(fedn.cfg.train.seed)  # Flower orders the sampled nodes with `random`, as in-process
    try:
        if done < fed.rounds:
            result = strategy.start(
                grid=grid,
                initial_arrays=ArrayRecord(final),
                num_rounds=fed.rounds - done,
                timeout=round_timeout,
                train_config=ConfigRecord(train_config),
                evaluate_fn=evaluate_fn,
            )
            final = result.arrays.to_torch_state_dict()
    finally:
        random.setstate(py_random)
    clients: list[dict[str, Any]] = [
        holder_entry(
            {key: value for key, value in reports[i].items() if key not in ("partition", "epsilon")},
            client_dp=fed.client_dp,
        )
        for i in range(k)
    ]
    return write_outputs(out_dir, fedn, final, history, clients, strategy)


def save_server_round(
    out_dir: Path, fedn: Federation, server_round: int, arrays: dict, history: list, reports: dict, strategy
) -> None:
    """The server's PRIVATE ``checkpoint.pt`` after ``server_round``: no holder state (each keeps its own)."""
    from textkg.federated.client_dp import client_dp_state
    from textkg.training import checkpoint as ckpt

    payload = {
        "round": server_round,
        "config": fedn.cfg.to_dict(),
        "federated": fedn.fed.to_dict(),
        "arrays": arrays,
        "history": history,
        "reports": reports,  # what each holder reported publicly in its last reply
        "holders": None,  # in clients/<name>/holder-round-<r>.pt (textkg.federated.checkpointing)
        "client_dp": client_dp_state(strategy) if fedn.fed.client_dp else None,
    }
    ckpt.atomic_torch_save(out_dir / ckpt.CHECKPOINT, payload, private=True)


def _settings_path(value: str, grid: Grid) -> Path:
    """The settings file: absolute, or relative to the installed app (the FAB's directory on this machine)."""
    path = Path(value)
    if path.is_absolute():
        return path
    run = grid.run
    if run.fab_id:
        from flwr.common.config import get_project_dir

        return get_project_dir(run.fab_id, run.fab_version, run.fab_hash) / path
    return path


serverapp = ServerApp()


@serverapp.main()
def _server_main(grid: Grid, context: Context) -> None:
    run_config = {**RUN_CONFIG_DEFAULTS, **context.run_config}
    if not str(run_config["out"]):
        raise ConfigError("set the run config's 'out' (the server's output directory)", field="out")
    cfg, fed = read_settings(_settings_path(str(run_config["settings"]), grid))
    serve(grid, cfg, fed, Path(str(run_config["out"])), round_timeout=float(run_config["round-timeout"]))


# -- a data holder -------------------------------------------------------------------

#: Holders built in this process: ``(run, node, partition) → (rounds trained, settings, holder)``. Flower
#: 1.42's deployment engine starts a fresh process for every message, so there a holder comes back from
#: its node's ``Context.state`` instead; a process that serves several messages reuses its holder.
_HOLDERS: dict[tuple[int, int, int], tuple[int, str, DataHolder]] = {}


def _holder(context: Context, settings: str, restore: tuple[Path, int] | None = None) -> tuple[int, DataHolder]:
    """``(rounds trained, holder)`` of this node: cached, or built and restored from ``context.state``.

    ``restore``: ``(holder_dir, r)``: a new node of a resumed simulation (empty ``context.state``) restores
    its state after round ``r`` from its file (:mod:`textkg.federated.checkpointing`)."""
    k = int(context.node_config[PARTITION_ID])
    key = (context.run_id, context.node_id, k)
    saved = context.state.config_records.get(STATE_KEY)
    fits = 0 if saved is None else int(cast(int, saved["fits"]))
    if saved is None and restore is not None:
        fits = restore[1]
    if saved is not None and str(saved["settings"]) != settings:
        raise ConfigError("the server's settings changed between rounds", field="settings")
    cached = _HOLDERS.get(key)
    if cached is not None and cached[:2] == (fits, settings):
        return fits, cached[2]
    cfg, fed = settings_from_dict(json.loads(settings))
    fedn = prepare_federation(cfg, fed)
    num = fedn.part.num_clients
    if not 0 <= k < num:
        raise ConfigError(f"partition-id {k} out of range: this federation has {num} holders", field=PARTITION_ID)
    if NUM_PARTITIONS in context.node_config and int(context.node_config[NUM_PARTITIONS]) != num:
        raise ConfigError(
            f"num-partitions is {context.node_config[NUM_PARTITIONS]}, the federation has {num} holders",
            field=NUM_PARTITIONS,
        )
    data_file = context.node_config.get(DATA_FILE)  # the files partition: this node's own file, read here only
    holder = fedn.holder(  # the trainer writes nothing in train_epochs
        k, Path(tempfile.gettempdir()), data_file=None if data_file is None else str(data_file)
    )
    blob = None if saved is None else cast(bytes, saved["state"])
    if saved is None and restore is not None and fits:
        blob = load_holder_state(restore[0], holder.name, fits)
    if blob is not None:
        holder.load_state_dict(torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True))
    return fits, holder


clientapp = ClientApp()


@clientapp.train()
def _client_train(msg: Message, context: Context) -> Message:
    config = msg.content.config_records["config"]
    settings = str(config[SETTINGS_KEY])
    holder_dir = Path(str(config[HOLDER_DIR_KEY])) if HOLDER_DIR_KEY in config else None
    restore = None if holder_dir is None else (holder_dir, int(cast(int, config[DONE_KEY])))
    fits, holder = _holder(context, settings, restore)
    arrays = msg.content.array_records["arrays"].to_torch_state_dict()
    try:
        new, metrics = holder.fit(arrays, int(cast(int, config[EPOCHS_KEY])))
    finally:
        holder.close()  # stops the noise prefetcher; the next private step starts it again
    buffer = io.BytesIO()
    torch.save(holder.state_dict(), buffer)  # PRIVATE (the noise key): it stays in this node's Context
    context.state[STATE_KEY] = ConfigRecord({"fits": fits + 1, "settings": settings, "state": buffer.getvalue()})
    if holder_dir is not None:  # and in the holder's own file, for a resumed simulation
        save_holder_state(holder_dir, holder.name, fits + 1, buffer.getvalue())
    k = int(context.node_config[PARTITION_ID])
    _HOLDERS[(context.run_id, context.node_id, k)] = (fits + 1, settings, holder)
    report = {"partition": k, "epsilon": metrics.get("epsilon"), **holder.report()}
    content = RecordDict(
        {
            "arrays": ArrayRecord(new),
            "metrics": MetricRecord(metrics),
            REPORT_KEY: ConfigRecord({"json": json.dumps(report)}),
        }
    )
    return Message(content=content, reply_to=msg)
