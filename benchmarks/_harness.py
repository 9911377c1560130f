"""What every benchmark shares: the machine record, the results file, the common flags, a watched child.

A script imports it after putting its own folder on ``sys.path`` (the folder is not a package; a script
runs as ``python benchmarks/NAME.py``): ``sys.path.insert(0, str(Path(__file__).resolve().parent))``, then
``import _harness``. The results schema: one JSON object with ``benchmark`` (the script's name), ``command``
(the command line that made it, repo-relative), ``machine`` (:func:`machine`), ``date`` (UTC, ISO 8601) and
the payload (``rows`` for most scripts; a script keeps the keys it had before the harness, so the files
already in ``benchmarks/results/`` stay readable), written as strict JSON, atomically (:func:`write_results`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_KEYS = ("benchmark", "command", "machine", "date")
#: a stage line ``textkg`` writes to stderr: ``[textkg +mm:ss] what it does``
STAGE = re.compile(r"^\[textkg \+(\d+):(\d\d)\] (.*)$")


def file_mode() -> int:
    """``0o666`` less the process umask: the mode ``open()`` gives a new file (``os.umask`` is the only way
    to read the mask; it is set back at once)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def utc_now() -> str:
    """The current time, UTC, ISO 8601 to the second (``2026-11-26T15:04:05Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def cpu_model() -> str | None:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, :func:`platform.processor` elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def git_commit(root: Path = ROOT) -> str | None:
    """The commit of the checkout the benchmark ran from, ``+dirty`` when it had changes; None outside git."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, timeout=10).stdout

    try:
        commit, status = git("rev-parse", "HEAD").strip(), git("status", "--porcelain", "--untracked-files=no").strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}+dirty" if status else commit


def machine(*, load_at_end_key: bool = False) -> dict[str, Any]:
    """Where and when a benchmark ran: CPU, cores, load, Python, torch and its threads, commit, date.

    The load average is read when this is called: call it when the measurement ends, so that the
    record says how busy the machine was while it ran. ``load_at_end_key`` repeats it as
    ``load_average_at_end``, the key the results of ``health_setting`` and ``reproduce_fb15k237`` had
    before the harness.
    """
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        affinity = None
    record: dict[str, Any] = {
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "affinity_cpus": affinity,
        "load_average": load_average(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }
    try:
        import torch
    except ImportError:  # pragma: no cover - every textkg install has torch
        record.update(torch=None, torch_threads=None, torch_interop_threads=None, cpu_capability=None)
    else:
        record.update(
            torch=torch.__version__,
            torch_threads=torch.get_num_threads(),
            torch_interop_threads=torch.get_num_interop_threads(),
            # the vector instructions torch's CPU kernels use ("AVX2", "AVX512", ...): two machines both named
            # "AMD EPYC" ran the README job in 507 s and 942 s (AVX2, no AVX-512), 2026-12-06/07
            cpu_capability=torch.backends.cpu.get_cpu_capability(),
        )
    record.update(git_commit=git_commit(), date=utc_now())
    if load_at_end_key:
        record["load_average_at_end"] = record["load_average"]
    return record


def command_line(argv: Sequence[str] | None = None, script: str | None = None) -> str:
    """``python benchmarks/NAME.py ARGS`` as the user typed it (``argv`` default: ``sys.argv[1:]``)."""
    if script is None:
        script = Path(sys.argv[0]).name
    args = sys.argv[1:] if argv is None else list(argv)
    return shlex.join(["python", f"benchmarks/{Path(script).name}", *args])


def result(
    benchmark: str, *, command: str | None = None, machine_extra: dict[str, Any] | None = None, **payload: Any
) -> dict[str, Any]:
    """A results record: ``benchmark``, ``command``, ``machine``, ``date``, then ``payload``'s keys.

    Args:
        benchmark: The script's name without ``.py`` (``"eval_speed"``).
        command: The command line (default: :func:`command_line` of this process).
        machine_extra: Keys added to :func:`machine`'s record (a script's own, e.g. the load
            average before it ran, or names its results had before the harness, kept for readers).
        payload: The measurements, usually ``rows=[...]``; a key of the schema is refused.

    Raises:
        ValueError: ``payload`` names one of the schema's keys.
    """
    clash = sorted(set(payload) & set(SCHEMA_KEYS))
    if clash:
        raise ValueError(f"payload keys {clash} are the schema's own")
    return {
        "benchmark": benchmark,
        "command": command_line(script=f"{benchmark}.py") if command is None else command,
        "machine": {**machine(), **(machine_extra or {})},
        "date": utc_now(),
        **payload,
    }


def dumps(obj: Any, *, indent: int = 1) -> str:
    """Strict JSON text with a final newline.

    Raises:
        ValueError: ``obj`` holds a NaN or an infinity (strict JSON has neither).
    """
    return json.dumps(obj, indent=indent, allow_nan=False) + "\n"


def write_results(path: str | os.PathLike[str], obj: Any, *, indent: int = 1) -> Path:
    """Write ``obj`` as strict JSON to ``path`` atomically and return the path.

    The text is made first (a NaN raises before anything is written), then written to a
    temporary file beside ``path`` and moved over it, so a reader never sees half a file.

    Raises:
        ValueError: ``obj`` holds a NaN or an infinity.
    """
    text = dumps(obj, indent=indent)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        os.fchmod(fd, file_mode())  # mkstemp makes 0o600: a results file follows the umask, as open() would
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def merge_row(path: str | os.PathLike[str], benchmark: str, row: dict[str, Any], *, key: str = "label") -> Path:
    """Write ``row`` into the results file ``path`` (its ``rows``), replacing the row with the same ``key``, in a
    fresh :func:`result` record (this command, machine and date): a long series stopped midway keeps its rows."""
    old = json.loads(Path(path).read_text(encoding="utf-8")) if Path(path).is_file() else {}
    rows = [r for r in old.get("rows", []) if r.get(key) != row[key]] + [row]
    record = result(benchmark, rows=rows)
    if "runs" in old:  # a file that keeps each row's own command and machine: keep them, add this one's
        record["runs"] = {**old["runs"], row[key]: {"machine": record["machine"], "command": record["command"]}}
    return write_results(path, record)


def _proc(pid: int, name: str) -> str:
    try:
        return Path(f"/proc/{pid}/{name}").read_text()
    except OSError:
        return ""


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process, all its threads (``/proc/PID/stat``), or ``None``."""
    fields = _proc(pid, "stat").rsplit(")", 1)[-1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if len(fields) > 12 else None


def rss_bytes(pid: int) -> int | None:
    """``VmRSS`` of a live process in bytes, or ``None``."""
    lines = [line for line in _proc(pid, "status").splitlines() if line.startswith("VmRSS:")]
    return int(lines[0].split()[1]) * 1024 if lines else None


def watch_child(command: Sequence[str], env: dict[str, str] | None = None, *, sample_rss: bool = False) -> dict:
    """Run ``command`` (its stdout discarded) and watch it to its end.

    Returns:
        ``returncode``; ``wall_s``; ``stderr`` (its text); ``cpu_at``: the child's CPU seconds (user + system)
        when each line of ``stderr``, by line number, was read, and ``cpu_end`` when it closed stderr (the end
        of the run, before its interpreter's exit); ``usage``: its ``os.wait4`` rusage (``ru_maxrss``: the peak
        RSS in KiB on Linux); ``rss_by_stage``: with ``sample_rss``, stage -> the largest ``VmRSS`` in bytes
        seen (every 50 ms) while that :data:`STAGE` line, without its counts (``576/6,180``), was the last.
    """
    start = time.monotonic()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    assert child.stderr is not None
    stage, rss_by_stage, done = "(start: imports)", {}, threading.Event()

    def sample() -> None:
        while not done.is_set():
            now = rss_bytes(child.pid)
            if now is not None:
                rss_by_stage[stage] = max(rss_by_stage.get(stage, 0), now)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    if sample_rss:
        sampler.start()
    lines, cpu_at, cpu_end = [], {}, None
    for line in child.stderr:
        now = cpu_seconds(child.pid)
        if now is not None:
            cpu_at[len(lines)] = cpu_end = now
        lines.append(line)
        match = STAGE.match(line)
        if match:
            stage = re.sub(r"\s*[\d,]+/[\d,]+$", "", match.group(3)).strip()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    done.set()
    if sample_rss:
        sampler.join()
    return {
        "returncode": child.returncode,
        "wall_s": wall,
        "stderr": "".join(lines),
        "cpu_at": cpu_at,
        "cpu_end": cpu_end,
        "usage": usage,
        "rss_by_stage": rss_by_stage,
    }


def add_common_flags(
    parser: argparse.ArgumentParser,
    *,
    out: str | os.PathLike[str] | None = None,
    seed: int | None = None,
    threads: int | None = None,
) -> argparse.ArgumentParser:
    """Add ``--out PATH``, ``--seed N`` and ``--threads N`` with the given defaults.

    A flag whose default is None is not added (a script without a seed has no ``--seed``).
    ``--out`` gives a :class:`~pathlib.Path`; ``--threads`` must be a positive integer.
    """
    if out is not None:
        parser.add_argument("--out", type=Path, default=Path(out), help=f"results JSON (default: {out})")
    if seed is not None:
        parser.add_argument("--seed", type=int, default=seed, help=f"random seed (default: {seed})")
    if threads is not None:
        parser.add_argument(
            "--threads", type=_positive_int, default=threads, help=f"torch threads (default: {threads})"
        )
    return parser


def train_config(flags: Sequence[str]) -> Any:
    """The :class:`~textkg.training.config.RunConfig` that ``textkg train FLAGS`` runs: the command's own
    parser and config loading (its defaults, presets and checks), so that a benchmark never rebuilds them."""
    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser

    return build_run_config(build_parser().parse_args(["train", *flags]))


def set_threads(threads: int | None) -> None:
    """Use ``threads`` torch threads (and as many for OpenMP in child processes); None leaves torch's."""
    if threads is None:
        return
    import torch

    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value
