"""Short private runs whose final parameters and privacy block are pinned (test_privacy_engine_pin.py).

Each case is a ``textkg train`` command on the tiny fixture with ``--reproducible-noise``, so its
noise and Poisson samples come from the seed and the run is a function of the code, up to the
rounding of the CPU it runs on (its vector instructions and thread count): the pin compares
parameters through float64 summaries within a tolerance, never bit for bit.
``python tests/training/privacy_pin_cases.py`` rewrites ``tests/fixtures/privacy_pin_reference.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"

_BASE = ["train", "--dataset", str(FIXTURE), "--split", "transductive", "--dim", "8", "--seed", "3",
         "--no-progress", "--reproducible-noise", "11"]  # fmt: skip

#: the model and schedule the sampled-negative cases share
_TRANSE = ["--model", "transe", "--epochs", "2", "--batch-size", "16"]

CASES: dict[str, list[str]] = {
    # DP-SGD on sampled negatives, a fixed sigma, RDP
    "dp-sgd": [
        *_TRANSE,
        "--privacy",
        "full",
        "--private-size",
        "200",
        "--noise-multiplier",
        "1.1",
        "--max-grad-norm",
        "1.0",
    ],  # fmt: skip
    # sigma calibrated to a target by the PLD accountant, confidential statements
    "pld-calibrated": [
        *_TRANSE,
        "--privacy",
        "confidential",
        "--confidential-fraction",
        "0.5",
        "--private-size",
        "100",
        "--target-epsilon",
        "4",
        "--accountant",
        "pld",
    ],  # fmt: skip
    # the seed paper's batch-level simulation
    "simulation": [
        *_TRANSE,
        "--privacy",
        "full",
        "--mechanism",
        "simulation",
        "--noise-multiplier",
        "1.1",
    ],  # fmt: skip
    # exact per-example clipping of the 1-vs-all softmax (the private recipe's step)
    "one-vs-all": [
        "--model",
        "cpu-fused",
        "--encoder",
        "glove-bow",
        "--epochs",
        "2",
        "--batch-size",
        "32",
        "--privacy",
        "full",
        "--private-size",
        "1000",
        "--noise-multiplier",
        "1.0",
        "--negatives",
        "all",
    ],  # fmt: skip
}


def fingerprint(run_dir: Path) -> dict:
    """``{"parameters": {name: summary(tensor)}, "privacy": the privacy block}`` of a finished run."""
    state = torch.load(run_dir / "checkpoint.pt", map_location="cpu", weights_only=True)["model"]
    block = json.loads((run_dir / "metrics.json").read_text())["privacy"]
    return {"parameters": summaries(state), "privacy": _pinned_block(block)}


#: two federated holders under record-level DP-SGD (each builds its private step)
FEDERATE = ["federate", "--dataset", "hpo-small", "--split", "inductive", "--model", "transe", "--dim", "16",
            "--valid-max-triples", "50", "--no-progress", "--batch-size", "1024", "--partition", "random",
            "--clients", "2", "--rounds", "2", "--privacy", "full", "--private-size", "3000",
            "--noise-multiplier", "1.0", "--reproducible-noise", "7", "--seed", "5"]  # fmt: skip


#: keys the privacy block gained after b54adb0, with the value every pinned case has: left out of the pin,
#: so the pin still says the rest of the block is what b54adb0 wrote (a case with another value fails)
ADDED_SINCE_PIN = {"private_updates": "all"}
#: values renamed after b54adb0 (issue 51: the unit of privacy is a "statement"), mapped back to b54adb0's words
RENAMED_SINCE_PIN = {"unit": {"statement": "triple", "confidential-statement": "confidential-triple"}}


def _pinned_block(block: dict) -> dict:
    """``block`` without :data:`ADDED_SINCE_PIN`'s keys where they hold their pinned value, and with
    :data:`RENAMED_SINCE_PIN`'s values in b54adb0's words."""
    kept = {k: v for k, v in block.items() if not (k in ADDED_SINCE_PIN and v == ADDED_SINCE_PIN[k])}
    return {k: RENAMED_SINCE_PIN.get(k, {}).get(v, v) if isinstance(v, str) else v for k, v in kept.items()}


#: integer weights of :func:`summary`'s weighted sum (exact in float64; they tell a permutation apart)
WEIGHT_PERIOD, WEIGHT_MAX = 13, 6


def summary(t: torch.Tensor) -> dict:
    """A tensor as a few float64 (or, for an integer tensor, exact integer) sums that a change of
    behaviour moves and CPU rounding barely does: ``max_abs``, ``sum``, ``l1``, ``sumsq`` and
    ``wsum`` (weights ``i mod 13 - 6`` by flat position)."""
    w = torch.arange(t.numel()) % WEIGHT_PERIOD - WEIGHT_MAX
    out: dict = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}
    if not t.is_floating_point():
        v = t.detach().cpu().flatten().long()
        return {**out, "sum": int(v.sum()), "wsum": int((v * w).sum())}
    x = t.detach().cpu().flatten().double()
    sums = {"max_abs": x.abs().max(), "sum": x.sum(), "l1": x.abs().sum(), "sumsq": (x * x).sum()}
    return {**out, **{k: float(v) for k, v in sums.items()}, "wsum": float((x * w).sum())}


def summaries(state: dict) -> dict:
    return {name: summary(state[name]) for name in sorted(state)}


#: client report keys left out of the pin: evaluation metrics rank thousands of near-tied candidates, so
#: CPU rounding can swap two ranks; the parameters they come from are pinned directly
CLIENT_METRICS = ("test", "valid")


def run_case(name: str, out: Path) -> dict:
    from textkg.cli.main import main

    if name == "federate":
        assert main([*FEDERATE, "--out", str(out)]) == 0
        clients = json.loads((out / "metrics.json").read_text())["clients"]
        clients = [{k: v for k, v in c.items() if k not in CLIENT_METRICS} for c in clients]
        clients = [{**c, "privacy": _pinned_block(c["privacy"])} if c.get("privacy") else c for c in clients]
        state = torch.load(out / "best_model.pt", map_location="cpu", weights_only=True)
        return {"parameters": summaries(state), "clients": clients}
    assert main([*_BASE, *CASES[name], "--out", str(out)]) == 0
    return fingerprint(out)


REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "privacy_pin_reference.json"


if __name__ == "__main__":  # rewrites the reference (on a commit whose runs are the reference only)
    import platform
    import sys
    import tempfile

    cases = {}
    for case in [*CASES, "federate"]:
        with tempfile.TemporaryDirectory() as tmp:
            cases[case] = run_case(case, Path(tmp) / "run")
    machine = f"{platform.machine()}, torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}"
    record = {"commit": sys.argv[1] if len(sys.argv) > 1 else None, "machine": machine, "cases": cases}
    REFERENCE.write_text(json.dumps(record, indent=0, allow_nan=False) + "\n")
