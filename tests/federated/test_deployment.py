"""Flower's deployment engine, once, with real processes: a SuperLink, one SuperNode per holder, ``flwr run``.

examples/flower_app (hpo-small, 2 holders, 2 rounds, TransE of dimension 16) is submitted to a
``flower-superlink`` on a free localhost port, with two ``flower-supernode`` processes (partition-id 0
and 1), each with its own FLWR_HOME as if on its own machine. The ServerApp's outputs must load, and
equal ``textkg federate`` in-process with the same settings: the global model bit for bit. With two
holders FedAvg's weighted sum has two terms, and float addition is commutative, so the order in
which Flower's SuperLink hands over the replies cannot change a bit; the holders train one thread each
(OMP_NUM_THREADS=1) as the in-process run does. Every process started here is killed, with its process
group (the SuperExec and the ServerApp / ClientApp processes Flower starts under it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from fed_threads import one_thread
from flower_processes import deploy, missing_executables

pytest.importorskip("flwr")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flower_app"
#: seconds the federation may take, from `flwr run` to metrics.json
TIMEOUT = 180
_MISSING = missing_executables()
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"Flower's executables are missing: {', '.join(_MISSING)}")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to find leftover processes")
def test_a_superlink_and_two_supernodes_equal_the_in_process_federation(tmp_path):
    from textkg.federated.app import SETTINGS_FILE, read_settings
    from textkg.federated.engines import federate

    out = tmp_path / "out"
    example_files = sorted(p.name for p in EXAMPLE.iterdir())
    run = deploy(
        EXAMPLE,
        out,
        tmp_path,
        [  # each node's own settings file (the example's, on this machine) and its own state folder
            f'partition-id={k} num-partitions=2 settings="{(EXAMPLE / SETTINGS_FILE).resolve()}" '
            f'state-dir="{(tmp_path / "states" / f"client-{k}").resolve()}"'
            for k in range(2)
        ],
        timeout=TIMEOUT,
        env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},  # one thread per holder, as the in-process run below
    )
    assert not run.left, f"processes left running: {run.left}"
    if run.finished is not None:
        pytest.fail(f"{run.finished}\n{run.logs}")
    deployed_seconds = run.seconds
    assert sorted(p.name for p in EXAMPLE.iterdir()) == example_files  # flwr run wrote nothing into the app

    import textkg

    metrics = json.loads((out / "metrics.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    assert [r["round"] for r in metrics["rounds"]] == [0, 1, 2]
    assert json.loads((out / "federated.json").read_text())["engine"] == "flower-deployment"
    assert textkg.load(out) is not None

    # the same federation in this process, one thread, as the SuperNodes trained
    cfg, fed = read_settings(EXAMPLE / SETTINGS_FILE)
    expected = one_thread(lambda: federate(cfg, fed, tmp_path / "inprocess", progress=False))
    a, b = (torch.load(d / "best_model.pt", weights_only=True) for d in (tmp_path / "inprocess", out))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert metrics["rounds"] == expected["rounds"]
    assert metrics["clients"] == json.loads((tmp_path / "inprocess" / "metrics.json").read_text())["clients"]
    assert deployed_seconds < TIMEOUT
