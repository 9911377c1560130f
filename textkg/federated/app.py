"""``textkg federate`` on Flower's deployment engine: a ServerApp and a ClientApp for a SuperLink and SuperNodes.

The in-process runner (:func:`textkg.federated.engines.federate`) calls every
holder's ClientApp in one process. Here the same federation runs as separate
processes, the way Flower deploys one: a ``flower-superlink``, one
``flower-supernode`` per data holder (``--node-config "partition-id=k settings=... state-dir=..."``), and
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
  round number, nothing else (:mod:`textkg.federated.node`: a data holder is
  its own authority), and stops the run if a holder's report names other
  settings than its own.
* The **ClientApp** (started by a SuperNode, once per message: Flower 1.42
  runs every message in a fresh ``flwr-clientapp`` process) builds only holder
  ``partition-id`` from the node's OWN settings file (``--node-config
  settings=...``; the runner's partition rule and seed, so the holder gets the
  statements it gets in-process), refuses a message that asks for anything
  but the parameters and its next round, trains its ``local_epochs`` and
  returns its parameters, metrics and report. The holder's private state
  (optimizer, sampler, epoch counter, privacy ledger and the secret key of its
  noise) is written after every round, before the reply, to the node's own
  ``state-dir``; a restarted node continues from it. A process that serves
  several rounds reuses its holder (:data:`_HOLDERS`).

The server keeps no ``checkpoint.pt`` and has no ``--resume`` here: the
holders' states live on their nodes, not on the server. On the simulation engine the server
writes ``checkpoint.pt`` and every holder its own state file
(:mod:`textkg.federated.checkpointing`), so ``--resume`` works there.

The same two apps run on Flower's simulation engine, holders in Ray actors
(``textkg federate --engine simulation``, :mod:`textkg.federated.simulation`).
"""

from __future__ import annotations

import json
import logging
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from textkg.errors import ConfigError
from textkg.federated.checkpointing import latest_holder_round, load_holder_state, save_holder_state
from textkg.federated.client_dp import holder_entry
from textkg.federated.grid import NUM_PARTITIONS, PARTITION_ID, REPORT_KEY
from textkg.federated.node import (  # noqa: F401  (settings_from_dict, read_settings: re-exported)
    ARRAYS_RECORD,
    CONFIG_RECORD,
    ROUND_KEY,
    NodeSettings,
    arrays_digest,
    check_arrays,
    check_train_message,
    decode_state,
    encode_state,
    node_settings,
    read_settings,
    settings_dict,
    settings_digest,
    settings_from_dict,
)
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
#: The key of the node's settings digest in its report (the server compares it with its own).
DIGEST_KEY = "settings_sha256"
#: Run-config keys of the Flower App, with their defaults.
RUN_CONFIG_DEFAULTS: dict[str, Any] = {"settings": SETTINGS_FILE, "out": "", "round-timeout": 3600.0}

log = logging.getLogger("flwr")


# -- settings ------------------------------------------------------------------------


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
        checkpoint: Write ``checkpoint.pt`` after every round (the simulation engine; each holder keeps
            its own state where its node's configuration says: :mod:`textkg.federated.node`).
        saved: A checkpoint to continue from (:func:`textkg.federated.checkpointing.load_checkpoint`).

    The train messages carry the global parameters and the round number (counted from the
    federation's start, also after a resume) and nothing else: each holder trains by its own
    settings. Each reply's report names the digest of the holder's settings; one that differs
    from the server's stops the run (the holder runs another federation than the server).
    """
    from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords

    out_dir = Path(out_dir)
    if saved is None and out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(f"output directory {out_dir} is not empty; choose another 'out'", field="out")
    fedn = prepare_federation(cfg, fed) if prepared is None else prepared
    part = fedn.part
    k = part.num_clients
    digest = settings_digest(fedn.cfg, fed)
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
            if report.get(DIGEST_KEY) != digest:
                raise ConfigError(
                    f"holder {seen[-1]} ({report['name']}) trains by other settings than the server's: its own "
                    "settings file differs from the app's (each node reads its own; compare them)",
                    field="settings",
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
    if done:  # the holders count rounds from the federation's start: round 1 of this start is done + 1
        _offset_rounds(strategy, done)
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
                train_config=ConfigRecord({}),  # Flower adds the round number, and nothing else is sent
                evaluate_fn=evaluate_fn,
            )
            final = result.arrays.to_torch_state_dict()
    finally:
        random.setstate(py_random)
    clients: list[dict[str, Any]] = [
        holder_entry(
            {key: value for key, value in reports[i].items() if key not in ("partition", "epsilon", DIGEST_KEY)},
            client_dp=fed.client_dp,
        )
        for i in range(k)
    ]
    return write_outputs(out_dir, fedn, final, history, clients, strategy)


def _offset_rounds(strategy, done: int) -> None:
    """Make ``strategy``'s train messages carry round ``done + r`` in its round r (a resumed federation)."""
    configure = strategy.configure_train

    def configure_train(server_round, arrays, config, grid):
        messages = list(configure(server_round, arrays, config, grid))
        for message in messages:  # one RecordDict shared by every message: set, never add
            message.content[CONFIG_RECORD][ROUND_KEY] = server_round + done
        return messages

    strategy.configure_train = configure_train


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

#: Holders built in this process: ``(state-dir, partition) → (rounds trained, settings digest, holder)``.
#: Flower 1.42's deployment engine starts a fresh process for every message, so there a holder comes
#: back from its latest state file in its ``state-dir``; a process that serves several messages reuses
#: its holder while that file is still its latest.
_HOLDERS: dict[tuple[str, int], tuple[int, str, DataHolder]] = {}


#: The last federation this process prepared from a node's settings: ``(settings JSON, federation, digest)``.
_PREPARED: list[tuple[str, Federation, str]] = []


def _prepared(local: NodeSettings) -> tuple[Federation, str]:
    """``prepare_federation`` of the node's own settings (kept for the next message in this process)."""
    text = json.dumps(settings_dict(local.cfg, local.fed), sort_keys=True)
    if _PREPARED and _PREPARED[0][0] == text:
        return _PREPARED[0][1], _PREPARED[0][2]
    fedn = prepare_federation(local.cfg, local.fed)
    _PREPARED[:] = [(text, fedn, settings_digest(fedn.cfg, local.fed))]
    return fedn, _PREPARED[0][2]


def _holder(local: NodeSettings) -> tuple[int, str, DataHolder]:
    """``(rounds trained, settings digest, holder)`` of this node, by its own settings and state alone."""
    fedn, digest = _prepared(local)
    k, num = local.partition, fedn.part.num_clients
    if not 0 <= k < num:
        raise ConfigError(f"partition-id {k} out of range: this federation has {num} holders", field=PARTITION_ID)
    if local.num_partitions is not None and local.num_partitions != num:
        raise ConfigError(
            f"num-partitions is {local.num_partitions}, the federation has {num} holders", field=NUM_PARTITIONS
        )
    name = fedn.part.clients[k]
    fits = latest_holder_round(local.state_dir, name)
    key = (str(local.state_dir.resolve()), k)
    cached = _HOLDERS.get(key)
    if cached is not None and cached[:2] == (fits, digest):
        return fits, digest, cached[2]
    holder = fedn.holder(k, Path(tempfile.gettempdir()), data_file=local.data_file)  # train_epochs writes nothing
    if fits:
        saved = _saved_round(local, name, fits, digest)
        holder.load_state_dict(saved["holder"])
    return fits, digest, holder


def _saved_round(local: NodeSettings, name: str, rounds: int, digest: str) -> dict:
    from textkg.federated.checkpointing import holder_state_path

    blob = load_holder_state(local.state_dir, name, rounds)
    return decode_state(blob, digest, file=holder_state_path(local.state_dir, name, rounds))


def train_reply(msg: Message, local: NodeSettings) -> Message:
    """One round of this holder, by its own settings and state; the server sends parameters and a round.

    Raises:
        ConfigError: the message holds anything but the parameters and the round number, the
            parameters are not the model's trained tensors, the round is not the holder's next one
            (nor its last one with the very parameters of then), or the holder has trained every
            round its settings plan: the node does not train.
    """
    n = check_train_message(msg.content)
    fits, digest, holder = _holder(local)
    rounds = local.fed.rounds
    try:  # a dtype torch has no tensor for (unicode, big-endian) raises here: refused like any other
        arrays = msg.content.array_records[ARRAYS_RECORD].to_torch_state_dict()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"refused the server's parameters: not tensors ({exc})", field=ARRAYS_RECORD) from None
    check_arrays(arrays, trained_state(holder.model))
    sent = arrays_digest(arrays)
    if n == fits and fits:  # the round it trained last: the same reply again, for the very same parameters only
        reply = _saved_round(local, holder.name, fits, digest)["reply"]
        if reply["sent_sha256"] != sent:
            raise ConfigError(
                f"refused round {n}: this holder trained it already, from other parameters (a holder never "
                "trains a round twice)",
                field=ROUND_KEY,
            )
        return _reply_message(msg, reply)
    if fits >= rounds:
        raise ConfigError(
            f"refused round {n}: this holder has trained the {rounds} rounds its settings plan", field=ROUND_KEY
        )
    if n != fits + 1:
        raise ConfigError(
            f"refused round {n}: this holder's next round is {fits + 1} (its own count, in its state-dir)",
            field=ROUND_KEY,
        )
    try:
        new, metrics = holder.fit(arrays, local.fed.local_epochs)
    finally:
        holder.close()  # stops the noise prefetcher; the next private step starts it again
    report = {"partition": local.partition, "epsilon": metrics.get("epsilon"), **holder.report(), DIGEST_KEY: digest}
    reply = {"sent_sha256": sent, "arrays": new, "metrics": json.dumps(metrics), "report": json.dumps(report)}
    # PRIVATE (the noise key): written to the holder's own state-dir before anything leaves the node
    save_holder_state(local.state_dir, holder.name, fits + 1, encode_state(digest, holder.state_dict(), reply))
    _HOLDERS[(str(local.state_dir.resolve()), local.partition)] = (fits + 1, digest, holder)
    return _reply_message(msg, reply)


def _reply_message(msg: Message, reply: dict) -> Message:
    content = RecordDict(
        {
            "arrays": ArrayRecord(reply["arrays"]),
            "metrics": MetricRecord(json.loads(reply["metrics"])),
            REPORT_KEY: ConfigRecord({"json": reply["report"]}),
        }
    )
    return Message(content=content, reply_to=msg)


def make_clientapp(*, settings: tuple[Any, FederatedConfig] | None = None, state_dir: Path | None = None) -> ClientApp:
    """textkg's ClientApp: each node trains by its own configuration (:func:`textkg.federated.node.node_settings`).

    Args:
        settings: ``(cfg, fed)`` of an operator who runs every node in one process (the simulation
            engine); by default each node reads the ``settings`` file its ``--node-config`` names.
        state_dir: That operator's folder of the holders' states; by default the node's ``state-dir``.
    """
    app = ClientApp()

    @app.train()
    def _client_train(msg: Message, context: Context) -> Message:
        return train_reply(msg, node_settings(context.node_config, settings=settings, state_dir=state_dir))

    return app


#: The ClientApp of a SuperNode (``flower-supernode --node-config 'partition-id=k settings=... state-dir=...'``).
clientapp = make_clientapp()


def node_config_line(k: int, num: int, *, settings: Path | str, state_dir: Path | str, data_file: bool) -> str:
    """The ``--node-config`` of holder ``k``'s SuperNode, as ``textkg federate-app`` prints it."""
    line = f'partition-id={k} num-partitions={num} settings="{settings}" state-dir="{state_dir}"'
    return line + (' data-file="/path/to/this-holders-statements.tsv"' if data_file else "")
