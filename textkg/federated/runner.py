"""Federated training on Flower: data holders train locally, a Flower strategy averages.

The runner sits beside :func:`textkg.pipeline.job.run`, not inside it. It
prepares the graph, the public vocabulary and the model once (the same
:func:`~textkg.pipeline.job.prepare` as ``textkg train``), partitions the
training statements among K data holders (:mod:`textkg.federated.partition`),
and hands the rounds to Flower's own ``FedAvg`` strategy (McMahan et al. 2017,
arXiv:1602.05629): each round every holder receives the global trained
parameters, trains ``local_epochs`` epochs on its own statements (plus the
shared, public ones) with textkg's :class:`~textkg.training.trainer.Trainer`,
and returns its parameters with its number of own statements as the FedAvg
weight (the shared statements, which every holder trains, do not count).

Privacy (record level): with ``--privacy full|confidential`` each holder runs
textkg's DP-SGD on its own statements (Poisson sampling at q = B / N_k,
whole-gradient clipping, secret noise on every entry of every trained
parameter), and its ledger composes over all its steps in all rounds. The
global model is a function of the holders' DP outputs, so each holder's
(ε_k, δ_k) holds for the global model and everything released from it
(post-processing; holders' data are disjoint). Reported: every holder's
privacy block and the maximum ε. Client-level DP-FedAvg: :mod:`textkg.federated.client_dp`.

Transport (``FederatedConfig.engine``): ``inprocess`` (default),
:class:`textkg.federated.grid.InProcessGrid`, runs the ClientApp in this
process. ``simulation`` (:mod:`textkg.federated.simulation`) runs the
deployment engine's ServerApp and ClientApp on Flower's simulation engine (Ray
actors). :mod:`textkg.federated.app` runs the same federation on Flower's
deployment engine (a SuperLink and one SuperNode per holder, as separate
processes), with the helpers below (:class:`Federation`, :func:`make_strategy`,
:func:`write_outputs`).

Outputs in ``out_dir``: ``config.json`` (the run config; ``textkg.load``,
``evaluate`` and ``predict`` work on the directory), ``federated.json`` (the
partition and round settings), ``graph.json``, ``best_model.pt`` (the final
global model: the last round, no selection), ``metrics.json``, and the PRIVATE
``checkpoint.pt`` written after every round (``--resume DIR`` continues from it;
it holds the noise keys and is never released).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from textkg._version import __version__
from textkg.errors import ConfigError
from textkg.federated.checkpointing import check_resumable, load_checkpoint
from textkg.federated.client_dp import UNIT_WEIGHT_KEY, holder_entry
from textkg.federated.config import AGGREGATIONS, FederatedConfig
from textkg.federated.grid import PARTITION_ID, InProcessGrid
from textkg.federated.holder import DataHolder, trained_state
from textkg.federated.partition import FILES, Partition, assign_statements, make_partition, read_holder_file
from textkg.privacy.claims import get_claim
from textkg.training.config import PRIVATE_STEP_MODES
from textkg.training.mechanisms import get_mechanism
from textkg.training.privacy_engine import PrivacyEngine

__all__ = ["AGGREGATIONS", "DataHolder", "FederatedConfig", "Federation", "federate_inprocess", "trained_state"]

#: What a record-level guarantee is about.
RECORD_UNIT = "one training statement of one data holder (record level)"


@dataclass
class Federation:
    """What every process of a federation derives from the settings alone.

    The in-process runner builds it once; on Flower's deployment engine
    (:mod:`textkg.federated.app`) the server and every SuperNode build it from
    the same settings, so holder ``k`` gets the same statements everywhere.

    Attributes:
        cfg: The run config, with ``train.epochs`` = R × E.
        fed: The federation settings.
        prep: The prepared run (graph, split, public vocabulary, initial model).
        part: Who holds which training statement.
        shared: ``(s, 3)`` the public statements every holder trains on.
    """

    cfg: Any
    fed: FederatedConfig
    prep: Any
    part: Partition
    shared: torch.Tensor

    @functools.cached_property
    def engine(self) -> PrivacyEngine:
        """The one :class:`~textkg.training.privacy_engine.PrivacyEngine` every holder's private step comes from."""
        return PrivacyEngine(self.cfg, extra_reasons=self.prep.split.extra.get("not_dp_because", ()))

    @property
    def sizes(self) -> dict | None:
        """Statements per holder, or ``None`` when a holder's count is private: under client-level DP
        (it is about the holder's data) and under record-level DP with a declared size ``N̄`` (it is
        private under add/remove adjacency; every holder's FedAvg weight is then ``N̄``)."""
        if self.fed.client_dp or self.declared_size is not None or self.part.scheme == FILES:
            return None  # under ``files`` the server never sees a holder's statements
        return self.part.sizes()

    @property
    def declared_size(self) -> float | None:
        """``N̄``, each holder's declared private size under record-level DP (``--private-size``, or
        ``B / --sample-rate``); ``None`` without record-level DP or without a declared size."""
        privacy = self.cfg.privacy
        if privacy.mode not in PRIVATE_STEP_MODES:
            return None
        if privacy.sample_rate is not None:
            return self.cfg.train.batch_size / privacy.sample_rate
        return None if privacy.private_size is None else float(privacy.private_size)

    def holder(self, k: int, out_dir: Path, *, data_file: str | Path | None = None) -> DataHolder:
        """Build holder ``k`` (its own statements, the shared ones, its trainer and ledger).

        ``data_file``: the ``files`` partition's holder file (on holder ``k``'s node only); the other
        schemes take holder ``k``'s statements from the dataset and must not be given one."""
        if (self.part.scheme == FILES) != (data_file is not None):
            needs = "takes no data-file" if data_file is not None else "reads a holder's file from its data-file"
            raise ConfigError(f"the {self.part.scheme} partition {needs}", field="data-file")
        if data_file is not None:
            own = read_holder_file(self.prep.kg, self.prep.split, data_file)
        else:
            own = self.part.client_triples(self.prep.split.train, k, include_shared=False)
        decay = None if self.fed.noise_decay is None else (self.fed.noise_decay, self.fed.local_epochs)
        return DataHolder(
            self.part.clients[k],
            self.prep,
            self.cfg,
            own,
            self.shared,
            out_dir,
            upload_top_k=self.fed.upload_top_k,
            noise_decay=decay,
            engine=self.engine,
        )


def check_settings(cfg, fed: FederatedConfig) -> None:
    """Refuse the combinations ``federate`` does not support (before anything is loaded or written)."""
    if (
        cfg.privacy.unit == "entity"
    ):  # a holder's private step trains statements (textkg.training.unit_step: one process)
        raise ConfigError("--privacy-unit entity is not supported by federate", field="privacy.unit")
    if cfg.train.audit_candidates:
        raise ConfigError("--audit-candidates is not supported by federate yet", field="audit_candidates")
    if cfg.privacy.batch_size is not None:  # a holder's private step takes --batch-size: never ignore a flag
        raise ConfigError(
            "--private-batch-size is not supported by federate yet: its holders' private steps take --batch-size",
            field="privacy.batch_size",
        )
    if cfg.privacy.private_updates != "all":  # a holder's snapshot carries one optimizer: never ignore a flag
        raise ConfigError(
            f"--private-updates {cfg.privacy.private_updates} is not supported by federate yet",
            field="privacy.private_updates",
        )
    if cfg.train.device not in ("auto", "cpu"):
        raise ConfigError(
            f"federate simulates its data holders on the CPU; --device {cfg.train.device} is not supported "
            "(auto means the CPU here)",
            field="train.device",
        )
    if cfg.privacy.mode == "none" and (cfg.privacy.target_epsilon or cfg.privacy.noise_multiplier) is not None:
        raise ConfigError(
            "--target-epsilon and --noise-multiplier set record-level DP, which is off: add --privacy "
            "full|confidential, or use --client-target-epsilon / --client-noise-multiplier for client level",
            field="privacy.target_epsilon",
        )
    if fed.noise_decay is not None and cfg.privacy.mode not in ("full", "confidential"):
        raise ConfigError(
            "--noise-decay schedules record-level DP noise: add --privacy full|confidential", field="noise-decay"
        )
    if fed.noise_decay is not None and not get_claim(cfg.privacy.accountant).supports_schedule:
        raise ConfigError("--noise-decay is accounted with RDP only: use --accountant rdp", field="noise-decay")


def prepare_federation(cfg, fed: FederatedConfig) -> Federation:
    """Validate the settings, set ``train.epochs`` to R × E, prepare the run and partition it."""
    from textkg.pipeline.job import prepare

    check_settings(cfg, fed)
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, epochs=fed.rounds * fed.local_epochs))
    if cfg.model.irreflexive == "auto":  # "auto" reads every statement; the server never reads the holders'
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, irreflexive="none"))
    if cfg.model.unseen_structure != "row":  # each holder sees other entities: every party keeps the unseen row
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, unseen_structure="row"))
    if fed.partition == FILES:  # the vocabulary must cover what the holders' own files name: every text
        cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, vocabulary="texts"))
    prep = prepare(cfg, device=torch.device("cpu"))  # validates every input before anything is written
    if fed.upload_top_k is not None:
        from textkg.federated.topk import STRUCTURAL_TABLE

        table = trained_state(prep.model).get(STRUCTURAL_TABLE)
        if table is None or not fed.upload_top_k <= table.shape[0]:
            rows = "no structural table" if table is None else f"{table.shape[0]} structural rows"
            raise ConfigError(f"{fed.upload_top_k} rows to upload, but the model has {rows}", field="upload-top-k")
    part = make_partition(
        prep.kg,
        prep.split.train,
        fed.partition,
        num_clients=fed.clients,
        seed=cfg.train.seed,
        column_file=fed.partition_file,
        public_only=cfg.privacy.mode != "none" or fed.client_dp,  # under DP, no partition reads statement counts
    )
    return Federation(cfg, fed, prep, part, prep.split.train[part.assignment == -1])


def make_strategy(fed: FederatedConfig, num_clients: int, *, client_dp_state=None, train_metrics_aggr_fn=None):
    """The server's strategy: Flower's FedAvg (or RowAwareFedAvg) over every holder, weighted by own
    statements; under client-level DP, equal weights in Flower's fixed-clipping DP wrapper (secret noise)."""
    from flwr.serverapp.strategy import FedAvg

    from textkg.federated.client_dp import client_noise_multiplier, make_client_dp_strategy
    from textkg.federated.strategy import RowAwareFedAvg

    # no federated evaluation: the server evaluates the global model on the public validation statements
    from textkg.federated.topk import STRUCTURAL_TABLE

    rows: dict[str, Any] = {}
    if fed.aggregation == "row" or fed.upload_top_k is not None:
        top_k = None if fed.upload_top_k is None else STRUCTURAL_TABLE
        rows = {"top_k_table": top_k, "rows_changed": fed.aggregation == "row"}
    strategy = (RowAwareFedAvg if rows else FedAvg)(
        **rows,
        fraction_train=1.0,
        fraction_evaluate=0.0,
        min_train_nodes=num_clients,
        min_available_nodes=num_clients,
        weighted_by_key=UNIT_WEIGHT_KEY if fed.client_dp else "num-examples",
        train_metrics_aggr_fn=train_metrics_aggr_fn,
    )
    if not fed.client_dp:
        return strategy
    if fed.client_noise_multiplier is not None:
        sigma = fed.client_noise_multiplier
    else:
        assert fed.client_target_epsilon is not None  # client_dp: σ or a target ε is set
        sigma = client_noise_multiplier(
            target_epsilon=fed.client_target_epsilon, rounds=fed.rounds, delta=fed.client_delta
        )
    return make_client_dp_strategy(
        strategy,
        num_clients=num_clients,
        noise_multiplier=sigma,
        clipping_norm=fed.client_clip,
        delta=fed.client_delta,
        state=client_dp_state,
    )


def write_start_files(out_dir: Path, fedn: Federation, *, engine: str) -> None:
    """``config.json``, ``federated.json`` and ``graph.json``: after every setting is validated."""
    from textkg.pipeline.job import graph_record
    from textkg.pipeline.run_files import store_run_files
    from textkg.training import checkpoint as ckpt

    fed = fedn.fed
    out_dir.mkdir(parents=True, exist_ok=True)
    stored = store_run_files(fedn.cfg.to_dict(), out_dir, autoencoder_file=None)  # a run names only its own files
    ckpt.atomic_write_json(out_dir / "config.json", {"textkg_version": __version__, **stored})
    ckpt.atomic_write_json(
        out_dir / "federated.json",
        {
            **fed.to_dict(),
            "clients": list(fedn.part.clients),
            "sizes": fedn.sizes,
            "engine": engine,
            "strategy": _strategy_name(fed),
            "settings": fed.to_dict(),  # what --resume rebuilds the FederatedConfig from
        },
    )
    ckpt.atomic_write_json(out_dir / "graph.json", graph_record(fedn.prep.kg, fedn.prep.split))


def validation_mrr(fedn: Federation, state: dict[str, torch.Tensor]) -> float:
    """The global model's MRR on the public validation statements (``valid_max_triples`` of them)."""
    from textkg.pipeline.job import evaluate_split

    prep, cfg = fedn.prep, fedn.cfg
    prep.model.load_state_dict(state, strict=False)
    if not len(prep.split.valid):
        return 0.0
    return evaluate_split(prep, cfg, "valid", max_triples=cfg.train.valid_max_triples).to_dict()["mrr"]


def write_outputs(
    out_dir: Path, fedn: Federation, final: dict[str, torch.Tensor], history: list[dict], clients: list[dict], strategy
) -> dict:
    """``best_model.pt`` (the final global model) and ``metrics.json``; returns the metrics.

    ``clients``: each holder's report (names only under client-level DP), in partition order."""
    from textkg.pipeline.job import evaluate_split
    from textkg.training import checkpoint as ckpt

    prep, cfg, fed, part = fedn.prep, fedn.cfg, fedn.fed, fedn.part
    prep.model.load_state_dict(final, strict=False)
    ckpt.atomic_torch_save(out_dir / ckpt.BEST_MODEL, prep.model.state_dict())
    test_owner = assign_statements(part, prep.kg, prep.split.train, prep.split.test, seed=cfg.train.seed)
    for k, client in enumerate(clients):  # the global model on each holder's share of the (public) test statements
        mine = None if test_owner is None else prep.split.test[test_owner == k]
        client["test"] = (
            None if mine is None or not len(mine) else evaluate_split(prep, cfg, "test", triples=mine).to_dict()
        )
    metrics = {
        "textkg_version": __version__,
        "dataset": cfg.data.dataset,
        "split": cfg.data.split,
        "model": {"name": cfg.model_name, **cfg.model.to_dict()},
        "federated": {
            "partition": fed.partition,
            "clients": list(part.clients),
            "sizes": fedn.sizes,
            "rounds": fed.rounds,
            "local_epochs": fed.local_epochs,
            "aggregation": fed.aggregation,
            "weights": _weights_rule(fedn),
            "selection": "none: the last round's global model",
            "upload": _upload_block(fed, cfg),
        },
        "rounds": history,
        "valid": history[-1]["valid_mrr"] if history else None,
        "test": evaluate_split(prep, cfg, "test").to_dict(),
        "privacy": _privacy_block(clients, strategy if fed.client_dp else None, rounds=fed.rounds),
        "clients": clients,
    }
    ckpt.atomic_write_json(out_dir / "metrics.json", metrics)
    return metrics


def make_client_app(holders: list[DataHolder], on_upload=None):
    """A Flower ClientApp whose ``train`` handler runs holder ``partition-id``'s local epochs.

    ``on_upload(holder, sent, upload)``, if given, sees what the server sent and what the
    holder sends back: the curious server's view (:mod:`textkg.federated.attacks`)."""
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    app = ClientApp()

    @app.train()
    def train(msg, context):
        holder = holders[int(context.node_config[PARTITION_ID])]
        arrays = msg.content["arrays"].to_torch_state_dict()
        epochs = int(msg.content["config"]["local-epochs"])
        new, metrics = holder.fit(arrays, epochs)
        if on_upload is not None:
            on_upload(holder, arrays, new)
        return Message(content=RecordDict({"arrays": ArrayRecord(new), "metrics": MetricRecord(metrics)}), reply_to=msg)

    return app


def federate_inprocess(
    cfg, fed: FederatedConfig, out_dir: Path, *, resume: bool = False, progress: bool = True, on_upload=None
) -> dict:
    """Run a federation with every holder in this process (``--engine inprocess``) and write its outputs;
    returns the metrics dict written to ``metrics.json``. :func:`textkg.federated.engines.federate`
    dispatches here or to Flower's simulation engine.

    ``cfg`` is ``textkg train``'s config; its ``train.epochs`` is replaced by
    ``fed.rounds × fed.local_epochs`` (each holder's total local epochs).

    After every round the server writes ``checkpoint.pt`` (PRIVATE, never
    released: it holds every holder's optimizer, sampler and ledger, and the
    secret keys of the noise). ``resume=True`` continues ``out_dir`` from its
    last finished round with the same settings; the rounds after it are the
    ones an uninterrupted run would have taken (same batches, same ledgers).
    """
    from flwr.app import ArrayRecord, ConfigRecord, MetricRecord

    from textkg.federated.client_dp import client_dp_state
    from textkg.training import checkpoint as ckpt

    out_dir = Path(out_dir)
    if resume:
        check_resumable(out_dir)
    elif out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(
            f"output directory {out_dir} is not empty; pass --resume {out_dir} to continue it or choose another --out",
            field="out",
        )
    fedn = prepare_federation(cfg, fed)
    cfg, part = fedn.cfg, fedn.part
    holders = [fedn.holder(k, out_dir / "clients" / name) for k, name in enumerate(part.clients)]
    history: list[dict] = []
    saved = None
    if resume:
        saved = load_checkpoint(out_dir, cfg, fed)
        for holder, state in zip(holders, saved["holders"], strict=True):
            holder.load_state_dict(state)
        history.extend(saved["history"])
    done = 0 if saved is None else int(saved["round"])
    strategy = None

    def save_round(server_round: int, arrays: dict[str, torch.Tensor]) -> None:
        payload = {
            "round": server_round,
            "config": cfg.to_dict(),
            "federated": fed.to_dict(),
            "arrays": arrays,
            "holders": [h.state_dict() for h in holders],
            "history": history,
            "python_random": random.getstate(),  # Flower orders the sampled nodes with `random`
            "client_dp": None if not fed.client_dp else client_dp_state(strategy),
        }
        ckpt.atomic_torch_save(out_dir / ckpt.CHECKPOINT, payload, private=True)

    def evaluate_fn(server_round: int, arrays) -> MetricRecord:
        if saved is not None and server_round == 0:  # the checkpoint's round, evaluated before the crash
            return MetricRecord({"valid_mrr": float(history[-1]["valid_mrr"])})
        server_round += done
        state = arrays.to_torch_state_dict()
        mrr = validation_mrr(fedn, state)
        record = {"round": server_round, "valid_mrr": mrr}
        if server_round and holders[0].private is not None:
            # every holder is private when the first is (one privacy config for all)
            record["epsilon_max"] = max(h.private.epsilon() for h in holders if h.private is not None)
        history.append(record)
        if progress:
            print(round_line(record, fed.rounds), file=sys.stderr)
        if server_round:
            save_round(server_round, state)
        return MetricRecord({"valid_mrr": float(mrr)})

    k = part.num_clients
    flwr_logger = logging.getLogger("flwr")
    level = flwr_logger.level
    flwr_logger.setLevel(logging.ERROR)  # Flower logs every round at INFO; the runner prints its own line
    py_random = random.getstate()
    random.seed(cfg.train.seed)  # Flower orders the sampled nodes with `random`: fixed, so runs repeat
    if saved is not None:
        random.setstate(saved["python_random"])
    try:
        strategy = make_strategy(fed, k, client_dp_state=None if saved is None else saved["client_dp"])
        if saved is None:
            write_start_files(out_dir, fedn, engine="flower-inprocess")
        final = saved["arrays"] if saved is not None else trained_state(fedn.prep.model)
        if done < fed.rounds:
            result = strategy.start(
                grid=InProcessGrid(make_client_app(holders, on_upload), k),
                initial_arrays=ArrayRecord(final),
                num_rounds=fed.rounds - done,
                train_config=ConfigRecord({"local-epochs": fed.local_epochs}),
                evaluate_fn=evaluate_fn,
            )
            final = result.arrays.to_torch_state_dict()
    finally:
        random.setstate(py_random)
        flwr_logger.setLevel(level)
        for h in holders:
            h.close()
    clients = [holder_entry(h.report(), client_dp=fed.client_dp) for h in holders]
    return write_outputs(out_dir, fedn, final, history, clients, strategy)


def round_line(record: dict, rounds: int) -> str:
    """The progress line of one round: ``round r/R: valid MRR m[, max epsilon e]``."""
    return f"round {record['round']}/{rounds}: valid MRR {record['valid_mrr']:.4f}" + (
        f", max epsilon {record['epsilon_max']:.3f}" if "epsilon_max" in record else ""
    )


def _upload_block(fed: FederatedConfig, cfg) -> dict:
    """``metrics.json``'s ``federated.upload``: what each holder sends, and what its choice of rows costs."""
    if fed.upload_top_k is None:
        return {"rows": "all", "privacy": "every trained tensor, whole"}
    dp = cfg.privacy.mode in PRIVATE_STEP_MODES and get_mechanism(cfg.privacy.mechanism).not_dp_because is None
    return {
        "rows": fed.upload_top_k,
        "table": "structural.weight",
        "rule": "the K rows with the largest L2 change from the global model sent; every other tensor whole",
        "privacy": "post-processing of each holder's DP output: no extra epsilon (Dwork & Roth 2014, Prop. 2.1)"
        if dp
        else "none claimed: the rows and their choice are functions of the clear parameters",
    }


def _weights_rule(fedn: Federation) -> str:
    """``metrics.json``'s ``federated.weights``: what FedAvg weighs each holder by."""
    if fedn.fed.client_dp:
        return "equal (DP-FedAvg)"
    if fedn.declared_size is not None:
        size = f"{fedn.declared_size:g}"
        return f"equal: each holder's declared private size N = {size} (public; the exact count is private)"
    return "each holder's number of own statements"


def _strategy_name(fed: FederatedConfig) -> str:
    if fed.client_dp:
        return "FedAvg with equal weights in DifferentialPrivacyServerSideFixedClipping (flwr), secret noise"
    if fed.upload_top_k is not None:
        return "RowAwareFedAvg over top-k uploads (textkg.federated.strategy)"
    if fed.aggregation == "row":
        return "RowAwareFedAvg (textkg.federated.strategy)"
    return "FedAvg (flwr.serverapp.strategy)"


def _privacy_block(clients: list[dict], client_dp_strategy=None, *, rounds: int) -> dict | None:
    """``metrics.json``'s ``privacy``: the record-level block with client level's in ``client_level``
    (both: each about its own unit), or client level's alone, or ``None``."""
    from textkg.federated.client_dp import client_privacy_block

    blocks: list[Any] = [c.get("privacy") for c in clients]
    record = any(b is not None for b in blocks)
    client_level = (
        None
        if client_dp_strategy is None
        else client_privacy_block(client_dp_strategy, rounds=rounds, record_level=record)
    )
    if not record:
        return client_level
    dp = all(b is not None and b.get("guarantee") == "dp" for b in blocks)
    eps = [b.get("epsilon") for b in blocks]  # one privacy config: every holder has a block
    return {
        "guarantee": "dp" if dp else "simulation",
        "unit": RECORD_UNIT,
        "epsilon": max(eps) if dp and all(e is not None for e in eps) else None,
        "delta": max(b["delta"] for b in blocks),
        "per_client": "each holder's (epsilon, delta) covers its own statements; see clients[*].privacy",
        "client_level": client_level,
    }
