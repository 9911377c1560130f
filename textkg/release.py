"""``textkg release RUN --out DIR``: write only what the privacy guarantee covers.

A run directory holds things that must never be published:
- ``checkpoint.pt`` holds the secret noise key and the optimiser;
- ``audit_split.json`` names the audit's member statements;
- ``private_metrics.json`` filters with private statements.

A release bundle is a WHITELIST of files. It holds the weights, the public
files a predictor needs, the privacy block, a model card and a manifest. It is
refused for a run whose privacy block is not labelled ``dp`` unless
``allow_simulation`` is set; every file then says so. ``textkg.load(BUNDLE)``
and ``textkg predict BUNDLE`` work on it as on the run.

The threat model is in ``docs/privacy.md``.
"""

from __future__ import annotations

import hashlib
import math
import shutil
from pathlib import Path

from textkg._version import __version__
from textkg.errors import ConfigError
from textkg.training import checkpoint as ckpt
from textkg.training.checkpoint import atomic_write_bytes, atomic_write_json
from textkg.training.features import AUTOENCODER_FILE

#: copied as they are when the run's config needs them (``lstm_ae.pt`` only for LSTM-autoencoder
#: runs, read with ``weights_only=True``; the char LMs of a flair run, tensors + JSON, under
#: ``char_lms/``): :func:`needed_files`. Only regular files are copied; a symlink is refused.
COPIED = ("graph.json", "lstm_ae.pt", "char_lms/*.safetensors", "char_lms/*.json")
#: the weights, converted from ``best_model.pt``: safetensors holds tensors only, so opening a bundle
#: someone else made can never run their code (a pickle can)
WEIGHTS = ckpt.BEST_MODEL_SAFETENSORS
#: written by the release itself
WRITTEN = ("config.json", "metrics.json", "privacy.json", "MODEL_CARD.md", "RELEASE.json")
#: everything a bundle may contain
WHITELIST = (WEIGHTS, *COPIED, *WRITTEN)
#: fields of the privacy block that ε is recomputed from
LEDGER_FIELDS = ("orders", "ledger", "delta", "epsilon")


def recompute_epsilon(privacy: dict) -> float:
    """ε of a privacy block from its own fields: the RDP of its ledger at its orders (or dp-accounting's
    PLD accounting when the block's ``accountant`` is ``pld``), so the claimed ε is the ledger's.

    The RDP of the Sampled Gaussian Mechanism (Mironov, Talwar & Zhang 2019, arXiv:1908.10530),
    :func:`textkg.privacy.rdp.compute_rdp`, summed over the ledger, converted with Canonne, Kamath &
    Steinke 2020 (arXiv:2004.00010v3, Prop. 12), :func:`textkg.privacy.conversion.rdp_to_epsilon`.
    Opacus's ``compute_rdp`` and ``get_privacy_spent`` compute the same two formulas; the tests hold
    this function to them as a reference (tests/release/test_recompute_epsilon.py).
    """
    import warnings

    import numpy as np

    from textkg.privacy.conversion import PrivacyWarning, rdp_to_epsilon
    from textkg.privacy.rdp import compute_rdp

    missing = [k for k in LEDGER_FIELDS if k not in privacy]
    if not missing and not privacy["ledger"]:  # no private step was taken (public-only runs)
        return 0.0
    if not missing and privacy.get("accountant") == "pld":  # dp-accounting's PLD, as the run computed it
        from textkg.privacy.pld import pld_epsilon

        return pld_epsilon(
            [(e["sample_rate"], e["noise_multiplier"], e["steps"]) for e in privacy["ledger"]], delta=privacy["delta"]
        )
    if missing:
        raise ConfigError(
            f"the privacy block lacks {', '.join(missing)}: epsilon cannot be recomputed from it "
            "(a run from before textkg recorded its ledger; retrain it)",
            field="privacy",
        )
    try:
        orders = [float(a) for a in privacy["orders"]]
        rdp = np.zeros(len(orders))
        for entry in privacy["ledger"]:
            rdp = rdp + compute_rdp(
                sample_rate=entry["sample_rate"],
                noise_multiplier=entry["noise_multiplier"],
                steps=entry["steps"],
                orders=orders,
            )
        with warnings.catch_warnings():  # the run's own accounting warned already about the grid's edge
            warnings.simplefilter("ignore", PrivacyWarning)
            return float(rdp_to_epsilon(orders=orders, rdp=rdp.tolist(), delta=privacy["delta"])[0])
    except (ValueError, TypeError, KeyError) as exc:  # a block someone edited: a user error, not a crash
        raise ConfigError(f"malformed ledger, epsilon cannot be recomputed from it ({exc})", field="privacy") from None


def needed_files(config: dict) -> list[str]:
    """The files of a run, besides the weights, that its bundle needs, by the run's config.

    ``graph.json`` always; ``lstm_ae.pt`` for a ``text_module: lstm-ae`` model; each char LM
    (``.safetensors`` + ``.json``) the config names (already checked to lie inside the run by
    :func:`textkg.pipeline.run_files.resolve_run_files`).
    """
    from textkg.pipeline.run_files import CHAR_LM_KEYS, encoder_kwargs

    model = config.get("model") or {}
    names = ["graph.json"]
    if model.get("text_module") == "lstm-ae":
        names.append(AUTOENCODER_FILE)
    for _, kwargs in encoder_kwargs(model):
        for key in CHAR_LM_KEYS:
            if kwargs.get(key) is not None:
                names += [kwargs[key], str(Path(kwargs[key]).with_suffix(".json"))]
    return list(dict.fromkeys(names))


def _regular_files(run_dir: Path, names: list[str]) -> None:
    """Refuse (exit 2) a file the release reads that is a symlink, or not a regular file."""
    for name in names:
        path = run_dir / name
        if path.is_symlink():
            raise ConfigError(
                "is a symlink: a release copies only the run's own regular files, never what a link points to",
                file=path,
            )
        if path.exists() and not path.is_file():
            raise ConfigError("is not a regular file", file=path)


def _label(privacy: dict | None) -> str:
    return "none" if privacy is None else str(privacy.get("guarantee"))


def _check(run_dir: Path, out: Path, allow_simulation: bool) -> tuple[dict, dict, str]:
    from textkg.pipeline.run_dir import open_run

    opened = open_run(run_dir)  # config.json present, parsed, and from this major version
    if not (run_dir / "metrics.json").is_file():
        raise ConfigError("the run has not finished (no metrics.json); finish or resume it first", file=run_dir)
    _regular_files(run_dir, ["config.json", "metrics.json", ckpt.BEST_MODEL, *needed_files(opened.stored)])
    if not (run_dir / ckpt.BEST_MODEL).is_file():
        raise ConfigError("the run has no best_model.pt", file=run_dir)
    missing = [n for n in needed_files(opened.stored) if not (run_dir / n).is_file()]
    if missing:
        raise ConfigError(f"the run lacks {', '.join(missing)}, which its config needs", file=run_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError("the release directory exists and is not empty; choose another --out", file=out, field="out")
    metrics = opened.metrics() or {}
    config = opened.stored
    if "federated" in metrics:  # one guarantee per data holder (clients[*].privacy), no single ledger
        raise ConfigError(
            "releasing a federated run is not supported yet: its guarantees are per data holder "
            "(metrics.json clients[*].privacy; docs/federated.md)",
            file=run_dir,
            field="federated",
        )
    privacy = metrics.get("privacy")
    label = _label(privacy)
    if label != "dp" and not allow_simulation:
        why = (
            "it was trained without privacy"
            if privacy is None
            else f"its guarantee is {label!r}: " + "; ".join(privacy.get("not_dp_because") or [])
        )
        raise ConfigError(
            f"refusing to release a run that is not differentially private ({why}); pass "
            "--allow-simulation to release it labelled NOT DIFFERENTIALLY PRIVATE",
            file=run_dir,
            field="privacy.guarantee",
        )
    if label == "dp" and privacy is not None:
        eps = recompute_epsilon(privacy)
        claimed = privacy["epsilon"]
        if not (claimed is not None and math.isclose(eps, claimed, rel_tol=1e-6, abs_tol=1e-9)):
            raise ConfigError(
                f"the privacy block claims epsilon={claimed} but its ledger gives {eps}",
                file=run_dir / "metrics.json",
                field="privacy.epsilon",
            )
    return metrics, config, label


def _public_config(config: dict) -> dict:
    """The run's config minus anything that looks secret (it should hold none: the key lives in the
    checkpoint)."""

    def clean(obj):
        if isinstance(obj, dict):
            return {
                k: clean(v) for k, v in obj.items() if not any(word in k.lower() for word in ("secret", "key", "token"))
            }
        return obj

    return clean(config)


def model_card(metrics: dict, config: dict, label: str) -> str:
    """MODEL_CARD.md: the model, the guarantee in plain words, the threat model, the public inputs."""
    privacy = metrics.get("privacy") or {}
    test = metrics.get("test") or {}
    lines = []
    if label != "dp":
        lines += [f"**NOT DIFFERENTIALLY PRIVATE ({label}).** This bundle carries no privacy guarantee.", ""]
    lines += [
        f"# textkg model: {config.get('model_name')} on {Path(str(metrics.get('dataset'))).name}",
        "",
        f"- textkg {metrics.get('textkg_version')}, split `{metrics.get('split')}`",
        f"- test MRR {test.get('mrr', float('nan')):.4f}, Hits@10 {test.get('hits@10', float('nan')):.4f} "
        f"({test.get('num_triples')} test statements)",
        "",
    ]
    if label == "dp" and privacy.get("mode") == "public-only":
        lines += [
            "## Privacy guarantee",
            "",
            f"(0, 0)-differential privacy with respect to {privacy['adjacency']}: the "
            "confidential training statements were left out and never read (training on the "
            "unrestricted statements only).",
            "",
        ]
    elif label == "dp":
        lines += [
            "## Privacy guarantee",
            "",
            f"({privacy['epsilon']:.4g}, {privacy['delta']:.3g})-differential privacy with respect to "
            f"{privacy.get('adjacency', 'adding or removing one private statement')}.",
            f"DP-SGD: Poisson sampling at q = {privacy['sample_rate']:.4g} (from "
            f"{privacy.get('private_size_source')}, a public input), {privacy['steps']} steps, "
            f"per-example clipping of the whole gradient at C = {privacy['max_grad_norm']:g}, Gaussian "
            f"noise σ = {privacy['noise_multiplier']:.4g} on every entry of every trained parameter; "
            f"RDP accounting converted with Canonne–Kamath–Steinke 2020"
            + (
                f" (PLD accounting of the same ledger: ε = {privacy['epsilon_pld']:.4g})"
                if privacy.get("epsilon_pld") is not None
                else ""
            )
            + ".",
            f"Randomness: {privacy.get('randomness')}.",
            "",
            *group_privacy_lines(privacy["epsilon"], privacy["delta"]),
        ]
    lines += [
        "## Threat model",
        "",
        "The adversary holds every file of this bundle, knows the textkg code and every public input "
        "below, and may know every private statement but one. The guarantee bounds how much the bundle "
        "can reveal about whether that one statement was used in training. Model selection and every "
        "metric here used public statements only. Details: docs/privacy.md in the textkg repository.",
        "",
        "## Public inputs (not protected)",
        "",
    ]
    lines += [f"- {item}" for item in privacy.get("public_inputs") or ["(a non-private run: nothing is protected)"]]
    lines += [
        "",
        "## Never released",
        "",
        "checkpoint.pt (holds the secret noise key), audit_split.json, private_metrics.json, training "
        "logs. This bundle holds only: " + ", ".join(WHITELIST) + ".",
        "",
    ]
    return "\n".join(lines)


def group_privacy_lines(epsilon: float, delta: float, sizes: tuple[int, ...] = (2, 5, 10)) -> list[str]:
    """The model card's group-privacy paragraph: what a person with k statements gets.

    An (ε, δ)-DP mechanism is (kε, k·e^{(k−1)ε}·δ)-DP for groups of k (Dwork & Roth 2014, *The
    Algorithmic Foundations of Differential Privacy*, §2.3, Theorem 2.2 and the remark after it).
    """
    cases = "; ".join(
        f"k = {k}: ({k * epsilon:.3g}, {min(1.0, k * math.exp((k - 1) * epsilon) * delta):.2g})" for k in sizes
    )
    return [
        "The unit is one statement. A person with k statements in the private set is protected only "
        f"as a group, at (k·ε, k·e^((k−1)ε)·δ) (group privacy, Dwork & Roth 2014, §2.3): {cases}.",
        "",
    ]


def without_timings(obj):
    """``obj`` without wall-clock fields (``seconds``, ``*_seconds``), all the way down.

    A private step's time grows with its realised Poisson batch, whose size is
    Binomial(N, q): the run's wall times are a noisy readout of the private count N
    (and, over many runs, of who was in it). They are not covered by the mechanism,
    so a bundle carries none (docs/privacy.md, "What a release holds").
    """
    if isinstance(obj, dict):
        return {k: without_timings(v) for k, v in obj.items() if not (k == "seconds" or str(k).endswith("_seconds"))}
    if isinstance(obj, list):
        return [without_timings(v) for v in obj]
    return obj


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def release(run_dir: str | Path, out: str | Path, *, allow_simulation: bool = False) -> dict:
    """Write the release bundle of ``run_dir`` into ``out``; returns the manifest.

    Raises:
        ConfigError: an unfinished run, a non-empty ``out``, a run not labelled
            ``dp`` without ``allow_simulation``, or a privacy block whose ledger
            does not give its ε. Nothing is written then.
    """
    run_dir, out = Path(run_dir), Path(out)
    metrics, config, label = _check(run_dir, out, allow_simulation)
    warning = None if label == "dp" else f"NOT DIFFERENTIALLY PRIVATE ({label})"
    stamp = {} if warning is None else {"label": warning}
    out.mkdir(parents=True, exist_ok=True)
    try:
        ckpt.save_safetensors(out / WEIGHTS, ckpt.load(run_dir / ckpt.BEST_MODEL))
        for name in needed_files(config):
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run_dir / name, out / name, follow_symlinks=False)
        metrics = without_timings(metrics)
        public_config = _public_config(config)
        if warning is not None:
            public_config["release_label"] = warning
        atomic_write_json(out / "config.json", public_config)
        atomic_write_json(out / "metrics.json", {**stamp, **metrics})
        atomic_write_json(out / "privacy.json", {**stamp, "privacy": metrics.get("privacy")})
        atomic_write_bytes(out / "MODEL_CARD.md", model_card(metrics, config, label).encode())
        privacy = metrics.get("privacy") or {}
        manifest = {
            **stamp,
            "textkg_version": __version__,
            "guarantee": label,
            "epsilon": privacy.get("epsilon"),
            "delta": privacy.get("delta"),
            "files": {p.relative_to(out).as_posix(): _sha256(p) for p in sorted(out.rglob("*")) if p.is_file()},
        }
        atomic_write_json(out / "RELEASE.json", manifest)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return manifest
