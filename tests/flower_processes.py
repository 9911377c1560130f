"""Flower's deployment engine with real processes, for tests: a SuperLink, SuperNodes and ``flwr run``.

Shared by tests/federated/test_deployment.py and tests/security/test_flower_deployment_files.py.
Every process is started in its own process group (session) with its own FLWR_HOME, as if on its own
machine, on free localhost ports with ``--insecure``; :meth:`Processes.stop` ends every group (the
SuperExec and the ServerApp / ClientApp processes Flower starts under it) and returns what is left.
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
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent
EXECUTABLES = ("flower-superlink", "flower-supernode", "flower-superexec", "flwr", "flwr-serverapp", "flwr-clientapp")


def flower_path() -> str:
    return os.pathsep.join([str(BIN), os.environ.get("PATH", "")])


def missing_executables() -> list[str]:
    return [name for name in EXECUTABLES if shutil.which(name, path=flower_path()) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_members(pgid: int) -> list[int]:
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
        left: list[int] = []
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            for _, proc, _ in self.procs:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(group_members(p.pid) for _, p, _ in self.procs):
                time.sleep(0.2)
            for _, proc, _ in self.procs:
                try:
                    proc.wait(timeout=0.1)
                except subprocess.TimeoutExpired:
                    pass
            left = [pid for _, p, _ in self.procs for pid in group_members(p.pid)]
            if not left:
                break
        return left


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"the SuperLink did not listen on {port}")


@dataclass
class Deployment:
    """What :func:`deploy` ran: ``finished`` is ``None`` when ``metrics.json`` was written, else why not."""

    finished: str | None
    seconds: float
    left: list[int]
    logs: str


def deploy(
    app_dir: Path,
    out: Path,
    work: Path,
    node_configs: list[str],
    *,
    timeout: float = 180.0,
    env: dict | None = None,
    node_env: list[dict] | None = None,
    link_env: dict | None = None,
) -> Deployment:
    """Run the Flower App ``app_dir`` on a SuperLink and one SuperNode per ``node_configs`` entry.

    Args:
        app_dir: The Flower App (``textkg federate-app``'s folder).
        out: The ServerApp's output directory (run-config key ``out``).
        work: Where the processes run and log (``<name>.log``), and their FLWR_HOMEs.
        node_configs: Each SuperNode's ``--node-config`` string.
        timeout: Seconds from ``flwr run`` to ``metrics.json``.
        env: The environment of every process (default: this one's, with Flower on PATH).
        node_env: Extra environment of each SuperNode (and so of what it starts).
        link_env: Extra environment of the SuperLink (and so of the ServerApp it starts).
    """
    started = time.monotonic()
    env = {**os.environ, "PATH": flower_path(), "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
           "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.2", **(env or {})}  # fmt: skip
    port = free_port()
    procs = Processes(work, env)
    finished: str | None = "not started"
    try:
        link = procs.start(
            "superlink",
            ["flower-superlink", "--insecure", "--port", str(port), "--disable-runtime-dependency-installation"],
            FLWR_HOME=str(work / "home-superlink"),
            **(link_env or {}),
        )
        wait_for_port(port, link)
        for k, node_config in enumerate(node_configs):
            procs.start(
                f"supernode-{k}",
                ["flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{port}", "--port", str(free_port())]
                + ["--node-config", node_config],
                FLWR_HOME=str(work / f"home-supernode-{k}"),
                **((node_env or [{}] * len(node_configs))[k]),
            )
        cli_home = work / "home-cli"
        cli_home.mkdir()
        (cli_home / "config.toml").write_text(
            f'[superlink]\ndefault = "textkg"\n\n[superlink.textkg]\naddress = "127.0.0.1:{port}"\ninsecure = true\n'
        )
        cli_env = {**env, "FLWR_HOME": str(cli_home)}
        submitted = subprocess.run(
            ["flwr", "run", str(app_dir), "textkg", "--run-config", f"out='{out}'", "--format", "json"],
            cwd=work,
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if submitted.returncode != 0:
            raise AssertionError(submitted.stdout + submitted.stderr)
        reply = json.loads(submitted.stdout[submitted.stdout.index("{") :])
        if not reply["success"]:
            raise AssertionError(str(reply))
        deadline = time.monotonic() + timeout
        link_log = work / "superlink.log"
        finished = None
        while time.monotonic() < deadline and not (out / "metrics.json").exists():
            if "Finished task" in link_log.read_text(errors="replace") and not (out / "metrics.json").exists():
                break  # the ServerApp ended without writing its outputs
            dead = [name for name, p, _ in procs.procs if p.poll() is not None]
            if dead:
                raise AssertionError(f"{dead} exited\n{procs.logs()}")
            time.sleep(0.5)
        if not (out / "metrics.json").exists():
            flwr_log = subprocess.run(
                ["flwr", "log", str(reply["run-id"]), "textkg", "--show"],
                env=cli_env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            finished = f"the ServerApp ended, or {timeout} s passed, without metrics.json\n{flwr_log.stdout[-4000:]}"
        seconds = time.monotonic() - started
        logs = procs.logs()
    finally:
        left = procs.stop()
    return Deployment(finished=finished, seconds=seconds, left=left, logs=logs)
