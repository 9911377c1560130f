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
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from fed_threads import one_thread

pytest.importorskip("flwr")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flower_app"
BIN = Path(sys.executable).parent
EXECUTABLES = ("flower-superlink", "flower-supernode", "flower-superexec", "flwr", "flwr-serverapp", "flwr-clientapp")
#: seconds the federation may take, from `flwr run` to metrics.json
TIMEOUT = 180


def _path() -> str:
    return os.pathsep.join([str(BIN), os.environ.get("PATH", "")])


_MISSING = [name for name in EXECUTABLES if shutil.which(name, path=_path()) is None]
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"Flower's executables are missing: {', '.join(_MISSING)}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


class Processes:
    """Processes started in their own process group (session); ``stop()`` ends every group."""

    def __init__(self, cwd: Path, env: dict) -> None:
        self.cwd, self.env = cwd, env
        self.procs: list[tuple[str, subprocess.Popen, Path]] = []

    def start(self, name: str, args: list[str], **env) -> subprocess.Popen:
        log = self.cwd / f"{name}.log"
        with open(log, "wb") as fh:
            proc = subprocess.Popen(
                args,
                cwd=self.cwd,
                env={**self.env, **env},
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: what Flower starts under it goes with it
            )
        self.procs.append((name, proc, log))
        return proc

    def logs(self, lines: int = 25) -> str:
        out = []
        for name, _, log in self.procs:
            tail = [line for line in log.read_text(errors="replace").splitlines() if "HTTP/1.1" not in line]
            out.append(f"--- {name} ---\n" + "\n".join(tail[-lines:]))
        return "\n".join(out)

    def stop(self) -> list[int]:
        """SIGTERM every group, SIGKILL what is left after 10 s; returns the pids still alive (none)."""
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            for _, proc, _ in self.procs:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(_group_members(p.pid) for _, p, _ in self.procs):
                time.sleep(0.2)
            for _, proc, _ in self.procs:
                try:
                    proc.wait(timeout=0.1)
                except subprocess.TimeoutExpired:
                    pass
            left = [pid for _, p, _ in self.procs for pid in _group_members(p.pid)]
            if not left:
                break
        return left


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"the SuperLink did not listen on {port}")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to find leftover processes")
def test_a_superlink_and_two_supernodes_equal_the_in_process_federation(tmp_path):
    from textkg.federated.app import SETTINGS_FILE, read_settings
    from textkg.federated.engines import federate

    started = time.monotonic()
    out = tmp_path / "out"
    example_files = sorted(p.name for p in EXAMPLE.iterdir())
    env = {
        **os.environ,
        "PATH": _path(),
        "FLWR_TELEMETRY_ENABLED": "0",
        "FLWR_DISABLE_UPDATE_CHECK": "1",
        "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.2",
        "OMP_NUM_THREADS": "1",  # one thread per holder, as the in-process run below
        "MKL_NUM_THREADS": "1",
    }
    port = _free_port()
    procs = Processes(tmp_path, env)
    try:
        link = procs.start(
            "superlink",
            ["flower-superlink", "--insecure", "--port", str(port), "--disable-runtime-dependency-installation"],
            FLWR_HOME=str(tmp_path / "home-superlink"),
        )
        _wait_for_port(port, link)
        for k in range(2):
            procs.start(
                f"supernode-{k}",
                ["flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{port}", "--port", str(_free_port())]
                + ["--node-config", f"partition-id={k} num-partitions=2"],
                FLWR_HOME=str(tmp_path / f"home-supernode-{k}"),
            )
        cli_home = tmp_path / "home-cli"
        cli_home.mkdir()
        (cli_home / "config.toml").write_text(
            f'[superlink]\ndefault = "textkg"\n\n[superlink.textkg]\naddress = "127.0.0.1:{port}"\ninsecure = true\n'
        )
        cli_env = {**env, "FLWR_HOME": str(cli_home)}
        submitted = subprocess.run(
            ["flwr", "run", str(EXAMPLE), "textkg", "--run-config", f"out='{out}'", "--format", "json"],
            cwd=tmp_path,
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        reply = json.loads(submitted.stdout[submitted.stdout.index("{") :])
        assert reply["success"], reply
        run_id = reply["run-id"]
        deadline = time.monotonic() + TIMEOUT
        link_log = tmp_path / "superlink.log"
        while time.monotonic() < deadline and not (out / "metrics.json").exists():
            if "Finished task" in link_log.read_text(errors="replace") and not (out / "metrics.json").exists():
                break  # the ServerApp ended without writing its outputs
            dead = [name for name, p, _ in procs.procs if p.poll() is not None]
            assert not dead, f"{dead} exited\n{procs.logs()}"
            time.sleep(0.5)
        if not (out / "metrics.json").exists():
            flwr_log = subprocess.run(
                ["flwr", "log", str(run_id), "textkg", "--show"],
                env=cli_env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            ended = f"the ServerApp ended, or {TIMEOUT} s passed, without metrics.json"
            pytest.fail(f"{ended}\n{flwr_log.stdout[-4000:]}\n{procs.logs()}")
        deployed_seconds = time.monotonic() - started
    finally:
        left = procs.stop()
    assert not left, f"processes left running: {left}"
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
