"""``textkg federate --engine ray``: the deployment engine's apps on Flower's simulation engine (Ray).

Flower's simulation engine (``flwr.simulation.run_simulation``) runs a
ServerApp in a thread of this process and every ClientApp message in a pool of
Ray actors, one virtual SuperNode per data holder. Here the apps are those of
the deployment engine (:mod:`textkg.federated.app`), so no training logic is
repeated:

* the server is :func:`textkg.federated.app.serve` (the runner's strategy, the
  validation after every round, the runner's outputs), in a ServerApp that
  closes over the settings (``run_simulation`` passes no run config);
* every holder is textkg's ClientApp (:func:`textkg.federated.app.make_clientapp`):
  holder ``partition-id`` (as the simulation engine numbers its nodes,
  ``0..K-1``) is built from the settings this operator gives every node (the
  server's message carries only the parameters and the round number), trains
  and returns. Its state between rounds (optimizer, sampler, ledger, noise
  key) is its own file in ``clients/<name>/`` (:mod:`textkg.federated.node`),
  read by whichever actor runs the node's next message.

The actors reply in the order they finish, and Ray's and Flower's threads draw
from the ``random`` that orders the sampled nodes, so FedAvg's float sum would
see the holders in another order than in process.
:class:`~textkg.federated.grid.PartitionOrderGrid` hands the server the
replies in the in-process order, so both engines give the same global model
bit for bit.

Ray starts for the run and stops after it: ``num_cpus`` CPUs (default
``min(K, cores)``), one per actor, no dashboard, its logs off, a small object
store, and a temporary directory that is removed afterwards.

After every round the server writes ``checkpoint.pt`` and each holder its own
state file; ``--resume`` starts a new simulation from them
(:mod:`textkg.federated.checkpointing`: Flower's simulation engine cannot
continue a run).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from textkg.errors import ConfigError

#: Engines of ``textkg federate`` by name (:class:`~textkg.federated.runner.FederatedConfig`'s ``engine``):
from textkg.federated.config import ENGINES  # noqa: F401  (re-exported: where the engines are run)

#: ``federated.json``'s ``engine``.
ENGINE = "flower-simulation"
#: The extra that installs Ray.
EXTRA = "ray"
#: Ray's object store (bytes): the messages of a few holders at a time; Ray spills to its directory beyond.
OBJECT_STORE_BYTES = 200 * 1024**2


def require_ray() -> None:
    """Raise :class:`ConfigError` naming the extra to install when Ray is missing."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError(
            f"--engine ray runs on Flower's simulation engine, which needs Ray: pip install 'textkg[{EXTRA}]'",
            field="engine",
        ) from None


def backend_config(*, num_cpus: int, temp_dir: str) -> dict:
    """``run_simulation``'s backend config: ``num_cpus`` CPUs for Ray, one per actor (holder), no GPU, quiet."""
    return {
        "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
        "init_args": {
            "num_cpus": num_cpus,
            "num_gpus": 0,
            "include_dashboard": False,
            "logging_level": logging.ERROR,
            "log_to_driver": False,
            "object_store_memory": OBJECT_STORE_BYTES,
            "_temp_dir": temp_dir,
        },
    }


def simulate(
    cfg, fed, out_dir: Path, *, progress: bool = True, num_cpus: int | None = None, resume: bool = False
) -> dict:
    """Run a federation on Flower's simulation engine and write its outputs; returns the metrics.

    The outputs are those of the in-process runner (``config.json``,
    ``federated.json`` with ``"engine": "flower-simulation"``, ``graph.json``,
    ``best_model.pt``, ``metrics.json``, the PRIVATE ``checkpoint.pt``), and
    each holder's PRIVATE state files in ``clients/<name>/``.

    Args:
        cfg: ``textkg train``'s config (``train.epochs`` becomes R × E).
        fed: The federation settings.
        out_dir: A new or empty directory; with ``resume``, a federation's directory to continue.
        progress: Print each round's line to stderr.
        num_cpus: CPUs Ray may use, one actor each (default: ``min(K, cores)``).
        resume: Continue ``out_dir`` from its last finished round, with the same settings.
    """
    require_ray()
    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    from textkg.federated.app import make_clientapp, serve
    from textkg.federated.checkpointing import check_resumable, load_checkpoint
    from textkg.federated.grid import PartitionOrderGrid
    from textkg.federated.runner import prepare_federation

    out_dir = Path(out_dir)
    if resume:
        check_resumable(out_dir)
    elif out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(f"output directory {out_dir} is not empty; choose another --out", field="out")
    fedn = prepare_federation(cfg, fed)  # validates every input before Ray starts
    saved = load_checkpoint(out_dir, fedn.cfg, fed) if resume else None
    k = fedn.part.num_clients
    cpus = num_cpus if num_cpus is not None else max(1, min(k, os.cpu_count() or 1))
    results: list[dict] = []

    def echo(line: str) -> None:
        if progress:
            print(line, file=sys.stderr)

    server = ServerApp()

    @server.main()
    def _main(grid, context) -> None:
        ordered = PartitionOrderGrid(grid, seed=fedn.cfg.train.seed)
        ordered.skip(0 if saved is None else int(saved["round"]), k)  # the rounds taken before the checkpoint
        metrics = serve(
            ordered, fedn.cfg, fed, out_dir, engine=ENGINE, prepared=fedn, echo=echo, checkpoint=True, saved=saved
        )
        results.append(metrics)

    temp_dir = tempfile.mkdtemp(prefix="textkg-ray-")  # short: Ray's socket paths must fit 107 bytes
    flwr_logger = logging.getLogger("flwr")
    level = flwr_logger.level
    flwr_logger.setLevel(logging.ERROR)  # run_simulation's deprecation notice and Flower's INFO lines
    pythonpath = os.environ.get("PYTHONPATH")  # Flower's Ray backend overwrites it with sys.path
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # Ray's notice about accelerator variables
            run_simulation(
                server_app=server,
                client_app=make_clientapp(settings=(cfg, fed), state_dir=(out_dir / "clients").resolve()),
                num_supernodes=k,
                backend_config=backend_config(num_cpus=cpus, temp_dir=temp_dir),
            )
    finally:
        _stop_ray()
        flwr_logger.setLevel(level)
        if pythonpath is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = pythonpath
        shutil.rmtree(temp_dir, ignore_errors=True)
    if not results:
        raise RuntimeError("Flower's simulation engine ended without the server's results (see the log above)")
    return results[0]


def _stop_ray() -> None:
    """Flower's backend shuts Ray down after the run; this makes sure of it when the run failed early."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
