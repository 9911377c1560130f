"""Short private runs whose final parameters and privacy block are pinned (test_privacy_engine_pin.py).

Each case is a ``textkg train`` command on the tiny fixture with ``--reproducible-noise``, so its
noise and Poisson samples come from the seed and the run is a pure function of the code.
"""

from __future__ import annotations

import hashlib
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


def _digest(obj) -> str:
    return hashlib.sha256(obj).hexdigest()[:16]


def fingerprint(run_dir: Path) -> dict:
    """``{"parameters": sha of the final checkpoint's model tensors, "privacy": sha of the privacy block,
    "epsilon": ..., "noise_multiplier": ..., "steps": ...}`` of a finished run."""
    state = torch.load(run_dir / "checkpoint.pt", map_location="cpu", weights_only=True)["model"]
    block = json.loads((run_dir / "metrics.json").read_text())["privacy"]
    return {
        "parameters": _tensors_digest(state),
        "privacy": _digest(json.dumps(_pinned_block(block), sort_keys=True).encode()),
        "epsilon": block["epsilon"] if block["epsilon"] is not None else block["epsilon_if_secret"],
        "noise_multiplier": block["noise_multiplier"],
        "steps": block["steps"],
    }


#: two federated holders under record-level DP-SGD (each builds its private step)
FEDERATE = ["federate", "--dataset", "hpo-small", "--split", "inductive", "--model", "transe", "--dim", "16",
            "--valid-max-triples", "50", "--no-progress", "--batch-size", "1024", "--partition", "random",
            "--clients", "2", "--rounds", "2", "--privacy", "full", "--private-size", "3000",
            "--noise-multiplier", "1.0", "--reproducible-noise", "7", "--seed", "5"]  # fmt: skip


#: keys the privacy block gained after b54adb0, with the value every pinned case has: left out of the digest,
#: so the pin still says the rest of the block is what b54adb0 wrote (a case with another value fails)
ADDED_SINCE_PIN = {"private_updates": "all"}


def _pinned_block(block: dict) -> dict:
    """``block`` without :data:`ADDED_SINCE_PIN`'s keys where they hold their pinned value."""
    return {k: v for k, v in block.items() if not (k in ADDED_SINCE_PIN and v == ADDED_SINCE_PIN[k])}


def _tensors_digest(state: dict) -> str:
    h = hashlib.sha256()
    for name in sorted(state):
        h.update(name.encode())
        h.update(state[name].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def run_case(name: str, out: Path) -> dict:
    from textkg.cli.main import main

    if name == "federate":
        assert main([*FEDERATE, "--out", str(out)]) == 0
        clients = json.loads((out / "metrics.json").read_text())["clients"]
        clients = [{**c, "privacy": _pinned_block(c["privacy"])} if c.get("privacy") else c for c in clients]
        return {
            "parameters": _tensors_digest(torch.load(out / "best_model.pt", map_location="cpu", weights_only=True)),
            "clients": _digest(json.dumps(clients, sort_keys=True).encode()),
            "epsilon": [c["privacy"]["epsilon_if_secret"] for c in clients],
        }
    assert main([*_BASE, *CASES[name], "--out", str(out)]) == 0
    return fingerprint(out)


if __name__ == "__main__":  # prints the reference values (run on the old code to pin them)
    import sys
    import tempfile

    for case in sys.argv[1:] or [*CASES, "federate"]:
        with tempfile.TemporaryDirectory() as tmp:
            print(repr(case), ":", run_case(case, Path(tmp) / "run"), ",")
