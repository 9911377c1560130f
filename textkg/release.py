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
from textkg.privacy.group import group_guarantee
from textkg.training import checkpoint as ckpt
from textkg.training.checkpoint import atomic_write_bytes, atomic_write_json
from textkg.training.features import AUTOENCODER_FILE
from textkg.training.unit_privacy import model_card_line

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
#: what a bundle holds, one line per file, in the order every page lists it: README.md, docs/privacy.md
#: (twice), docs/usage.md, the model card and ``textkg release``'s output quote :func:`bundle_contents`
#: (tests/release/test_bundle_contents.py compares them)
BUNDLE_CONTENTS = (
    (WEIGHTS, "the weights, tensors only"),
    ("graph.json", "the public vocabulary"),
    ("config.json", "the public configuration"),
    ("metrics.json", "public-statement metrics, no wall times"),
    ("privacy.json", "ε, δ and the ledger to recompute ε from"),
    ("MODEL_CARD.md", "the guarantee in plain words"),
    ("RELEASE.json", "SHA-256 of each file"),
    ("lstm_ae.pt", "LSTM-autoencoder models only"),
    ("char_lms/*.safetensors", "Flair-stack models only: the character LMs' tensors"),
    ("char_lms/*.json", "Flair-stack models only: their checked configs"),
)
#: what a bundle never holds (the run keeps them)
NEVER_RELEASED = ("checkpoint.pt", "audit_split.json", "private_metrics.json")


def bundle_contents() -> str:
    """The one sentence listing what a bundle holds, quoted word for word by every page that lists it."""
    return ", ".join(f"`{name}` ({what})" for name, what in BUNDLE_CONTENTS)


def recompute_epsilon(privacy: dict, *, file: str | Path | None = None) -> float:
    """ε of a privacy block from its own ledger, by its own accountant (``rdp`` or ``pld``): the one
    recomputation, :func:`textkg.privacy.verify.recompute_epsilon`, which ``textkg account --from``
    also runs. Opacus's ``compute_rdp`` and ``get_privacy_spent`` compute the same two formulas; the
    tests hold it to them as a reference (tests/release/test_recompute_epsilon.py).

    Raises:
        ConfigError: no ledger, or a malformed field (naming ``file`` and the field).
    """
    from textkg.privacy.verify import recompute_epsilon as recompute

    return recompute(privacy, file=file)


def needed_files(config: dict) -> list[str]:
    """The files of a run, besides the weights, that its bundle needs, by the run's config.

    ``graph.json`` always; ``lstm_ae.pt`` for a ``text_module: lstm-ae`` model; each char LM
    (``.safetensors`` + ``.json``) the config names, and the files of the run's adapted encoder folder
    (``encoder/``; all checked to lie inside the run by :func:`textkg.pipeline.run_files.resolve_run_files`).
    """
    from textkg.pipeline.run_files import CHAR_LM_KEYS, ENCODER_FILES, encoder_kwargs, run_encoder_name

    model = config.get("model") or {}
    names = ["graph.json"]
    if model.get("text_module") == "lstm-ae":
        names.append(AUTOENCODER_FILE)
    for _, kwargs in encoder_kwargs(model):
        for key in CHAR_LM_KEYS:
            if kwargs.get(key) is not None:
                names += [kwargs[key], str(Path(kwargs[key]).with_suffix(".json"))]
        if run_encoder_name(kwargs.get("model_name_or_path")):
            names += [f"{kwargs['model_name_or_path']}/{file}" for file in ENCODER_FILES]
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
        from textkg.privacy.verify import ABS_TOL, REL_TOL

        eps = recompute_epsilon(privacy, file=run_dir / "metrics.json")
        claimed = privacy["epsilon"]
        if not (claimed is not None and math.isclose(eps, claimed, rel_tol=REL_TOL, abs_tol=ABS_TOL)):
            raise ConfigError(
                f"the privacy block claims epsilon={claimed} but its ledger gives {eps}",
                file=run_dir / "metrics.json",
                field="privacy.epsilon",
            )
    return metrics, config, label


#: ``config.json``'s ``data`` fields that name a file or folder of the trainer's machine
DATA_PATHS = ("dataset", "inductive_dir", "public_entities")
#: ``config.json``'s ``privacy`` fields that name a file of the trainer's machine (``--unit-entities``: a bundle
#: names the list by its last part and never carries it)
PRIVACY_PATHS = ("unit_entities", "unit_candidates")


def _public_config(config: dict) -> dict:
    """The run's config minus anything that looks secret (it should hold none: the key lives in the
    checkpoint), its data paths named by :func:`public_dataset` (a recipient gives the dataset:
    :func:`textkg.pipeline.run_dir.open_run`)."""

    def clean(obj):
        if isinstance(obj, dict):
            return {
                k: clean(v) for k, v in obj.items() if not any(word in k.lower() for word in ("secret", "key", "token"))
            }
        return obj

    out = clean(config)
    if isinstance(out.get("data"), dict):
        out["data"] = {k: public_dataset(v) if k in DATA_PATHS else v for k, v in out["data"].items()}
    if isinstance(out.get("privacy"), dict):
        out["privacy"] = {k: public_dataset(v) if k in PRIVACY_PATHS else v for k, v in out["privacy"].items()}
    return out


def public_dataset(value: object) -> object:
    """A dataset as a bundle names it: a registry name as it is, a file or folder by its last part only
    (``obo:/home/me/data/hp.obo`` → ``obo:hp.obo``): a bundle never carries a local absolute path."""
    if not isinstance(value, str) or ("/" not in value and "\\" not in value):
        return value
    prefix, sep, rest = value.partition(":")
    if not sep or "/" in prefix or "\\" in prefix or len(prefix) == 1:  # no format prefix (or a drive letter)
        prefix, sep, rest = "", "", value
    name = rest.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return f"{prefix}{sep}{name}"


def _without_local_paths(name: str, doc: dict) -> dict:
    """``doc`` (a run's ``graph.json`` or ``metrics.json``) with its dataset named by :func:`public_dataset`
    (``config.json``'s: :func:`_public_config`)."""
    if name == "graph.json":
        return {**doc, "name": public_dataset(doc.get("name"))}
    return {**doc, **{k: public_dataset(doc[k]) for k in ("dataset", "descriptions") if k in doc}}


def mechanism_sentence(privacy: dict) -> str:
    """What the mechanism did, in one sentence of the model card (DP-SGD, or a unit-level centroid release)."""
    if privacy.get("private_updates") == "centroids":
        return (
            f"One Gaussian release (every unit takes part once, no sampling): each unit's contribution to the "
            f"per-candidate sums of its folded-in vectors clipped to C = {privacy['clip_norm']:.4g}, Gaussian noise "
            f"σ = {privacy['noise_multiplier']:.4g} on every entry of those sums, the private-only candidates' rows "
            "set to the noisy means; "
        )
    return (
        f"DP-SGD: Poisson sampling at q = {privacy['sample_rate']:.4g} (from "
        f"{privacy.get('private_size_source')}, a public input), {privacy['steps']} steps, "
        f"per-{'unit' if privacy.get('unit') == 'entity' else 'example'} clipping of the whole gradient at "
        f"C = {privacy['max_grad_norm']:g}, Gaussian "
        f"noise σ = {privacy['noise_multiplier']:.4g} on every entry of every trained parameter; "
    )


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
        _test_line(test),
        *_units_line(test),
        "",
    ]
    if label == "dp" and privacy.get("mode") == "public-only":
        left_out = (
            "unit entities' statements" if privacy.get("unit") == "entity" else "confidential training statements"
        )
        lines += [
            "## Privacy guarantee",
            "",
            f"(0, 0)-differential privacy with respect to {privacy['adjacency']}: the "
            f"{left_out} were left out and never read (training on the public statements only).",
            "",
        ]
    elif label == "dp":
        lines += [
            "## Privacy guarantee",
            "",
            f"({privacy['epsilon']:.4g}, {privacy['delta']:.3g})-differential privacy with respect to "
            f"{privacy.get('adjacency', 'adding or removing one private statement')}.",
            mechanism_sentence(privacy) + accounting_sentence(privacy),
            f"Randomness: {privacy.get('randomness')}.",
            "",
            *(
                [model_card_line(privacy), ""]
                if privacy.get("unit") == "entity"
                else group_privacy_lines(privacy["epsilon"], privacy["delta"])
            ),
        ]
    lines += [
        "## Threat model",
        "",
        "The adversary holds every file of this bundle, knows the textkg code and every public input "
        + (
            "below, and may know every unit entity (patient) but one with all their statements. The guarantee bounds "
            "how much the bundle can reveal about whether that one patient was used in training. "
            if privacy.get("unit") == "entity"
            else "below, and may know every private statement but one. The guarantee bounds how much the bundle "
            "can reveal about whether that one statement was used in training. "
        )
        + "Model selection and every metric here used public statements only. Details: docs/privacy.md in the "
        "textkg repository.",
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
        "logs. This bundle holds only: " + bundle_contents() + ".",
        "",
    ]
    return "\n".join(lines)


def _test_line(test: dict) -> str:
    def number(key: str) -> str:
        value = test.get(key)
        return f"{value:.4f}" if isinstance(value, (int, float)) else "n/a"

    return f"- test MRR {number('mrr')}, Hits@10 {number('hits@10')} ({test.get('num_triples')} test statements)"


def _units_line(test: dict) -> list[str]:
    """A unit-level run's held-out units (``test.units``): their own statements ranked, each hidden in turn."""
    units = test.get("units")
    if not isinstance(units, dict) or not isinstance(units.get("mrr"), (int, float)):
        return []
    return [
        f"- held-out units (new patients), each statement hidden in turn and the unit folded in from the others: "
        f"MRR {units['mrr']:.4f}, Hits@10 {units.get('hits@10', float('nan')):.4f}"
    ]


#: the model card's words for each accountant's ε, and the other figure of the same ledger beside it
_ACCOUNTING = {
    "rdp": (
        "ε by RDP accounting (Mironov, Talwar & Zhang 2019) converted with Canonne–Kamath–Steinke 2020",
        ("epsilon_pld", "PLD accounting"),
    ),
    "pld": (
        "ε by PLD accounting (dp-accounting's privacy-loss distributions, pessimistic discretisation)",
        ("epsilon_rdp", "RDP accounting (converted with Canonne–Kamath–Steinke 2020)"),
    ),
}


def accounting_sentence(privacy: dict) -> str:
    """Which accountant gave the card's ε (the block's ``accountant``), with the other one's figure of the
    same ledger beside it; ``textkg account --from`` recomputes both."""
    name = privacy.get("accountant", "rdp")
    if name not in _ACCOUNTING:
        return f"ε by the {name!r} accountant."
    words, (other_field, other_words) = _ACCOUNTING[name]
    other = privacy.get(other_field)
    beside = f"; {other_words} of the same ledger gives ε = {other:.4g}" if other is not None else ""
    return f"{words}{beside}. Check it with `textkg account --from privacy.json`."


def group_privacy_lines(epsilon: float, delta: float, sizes: tuple[int, ...] = (2, 5, 10)) -> list[str]:
    """The model card's group-privacy paragraph: what a person with k statements gets.

    An (ε, δ)-DP mechanism is (kε, k·e^{(k−1)ε}·δ)-DP for groups of k (Dwork & Roth 2014, *The
    Algorithmic Foundations of Differential Privacy*, §2.3, Theorem 2.2 and the remark after it).
    """
    groups = {k: group_guarantee(epsilon=epsilon, delta=delta, group_size=k) for k in sizes}
    cases = "; ".join(f"k = {k}: ({eps:.3g}, {d:.2g})" for k, (eps, d) in groups.items())
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
        from textkg.pipeline.run_dir import read_run_json

        graph = read_run_json(out / "graph.json")  # the copy: its dataset name without a local path
        atomic_write_json(out / "graph.json", _without_local_paths("graph.json", graph))
        metrics = _without_local_paths("metrics.json", without_timings(metrics))
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


#: the largest file ``textkg account --from`` reads (a results file of many runs is a few MB)
MAX_ACCOUNT_BYTES = 64 << 20


def _read_untrusted_json(path: Path) -> object:
    """A JSON file someone else made: a regular file, at most :data:`MAX_ACCOUNT_BYTES` (read no further),
    strict JSON of bounded depth (:func:`textkg.schema.load_json`)."""
    from textkg.schema import load_json

    if path.is_symlink() or not path.is_file():
        raise ConfigError("expected a regular file (not a link, not a folder)", file=path)
    with path.open("rb") as handle:
        raw = handle.read(MAX_ACCOUNT_BYTES + 1)
    if len(raw) > MAX_ACCOUNT_BYTES:
        raise ConfigError(f"larger than {MAX_ACCOUNT_BYTES >> 20} MiB, the most textkg account reads", file=path)
    return load_json(raw, file=path, max_bytes=MAX_ACCOUNT_BYTES)


def _aggregate_checks(doc: object, found: dict[str, list]) -> list[tuple[str, list]]:
    """A federation's record-level block (``per_client``) claims the largest holder's ε: held to the
    maximum of the holders' recomputed ``epsilon`` (their blocks under the sibling ``clients`` list)."""
    from textkg.privacy.verify import Check, find_blocks

    out: list[tuple[str, list]] = []
    for where, block in find_blocks(doc):
        if "per_client" not in block or block.get("epsilon") is None:
            continue
        parent = where.rsplit(".", 1)[0] if "." in where else ""
        prefix = f"{parent}.clients[" if parent else "clients["
        holders = [
            c.recomputed
            for path, checks in found.items()
            if path.startswith(prefix)
            for c in checks
            if c.field == "epsilon"
        ]
        if holders:
            out.append((where, [Check("epsilon", "max over holders", float(block["epsilon"]), max(holders))]))
    return out


def account_from(path: str | Path) -> dict:
    """``textkg account --from PATH``: every ε that PATH claims beside its recomputation.

    PATH is a bundle folder (its ``privacy.json``, and ``RELEASE.json``'s and ``metrics.json``'s copies
    of ε), a run folder (its ``metrics.json``), or a JSON file: a ``privacy.json``, a ``metrics.json``, or
    any file holding privacy blocks (a benchmark's results). Every block with a ledger is recomputed
    (:func:`textkg.privacy.verify.recompute_block`); ``agree`` is whether every claim is within
    :data:`textkg.privacy.verify.REL_TOL` of its recomputation.

    Raises:
        ConfigError: a missing or unreadable file, a malformed field (naming the file and the field), or
            nothing to recompute.
    """
    from textkg.privacy.verify import ABS_TOL, REL_TOL, Check, find_blocks, recompute_block, unit_name

    path = Path(path)
    if path.is_dir():
        names = ("privacy.json", "metrics.json")
        found_name = next((n for n in names if (path / n).exists() or (path / n).is_symlink()), None)
        if found_name is None:
            raise ConfigError("neither a release bundle (privacy.json) nor a run (metrics.json)", file=path)
        file = path / found_name
    elif path.exists():
        file = path
    else:
        raise ConfigError("no such file or folder", file=path)
    doc = _read_untrusted_json(file)
    blocks: list[tuple[str, dict, list[Check]]] = []
    unchecked: list[dict] = []
    found: dict[str, list[Check]] = {}
    for where, block in find_blocks(doc):
        result = recompute_block(block, file=file, where=where)
        if isinstance(result, str):
            if "per_client" not in block:
                unchecked.append({"where": where or "(top level)", "why": result})
            continue
        found[where] = result
        blocks.append((where, block, result))
    for where, aggregate in _aggregate_checks(doc, found):
        blocks.append((where, {}, aggregate))
    if file.name == "privacy.json" and file.parent == path and isinstance(doc, dict):
        blocks += _bundle_copies(path, doc.get("privacy"))
    if not blocks:
        raise ConfigError(
            "holds no privacy block with a ledger to recompute epsilon from"
            + (f" ({unchecked[0]['where']}: {unchecked[0]['why']})" if unchecked else ""),
            file=file,
        )
    checks = [c for _, _, result in blocks for c in result]
    return {
        "from": str(file),
        "agree": all(c.agrees for c in checks),
        "checked": len(checks),
        "disagreements": sum(not c.agrees for c in checks),
        "tolerance": {"relative": REL_TOL, "absolute": ABS_TOL},
        "blocks": [
            {
                "where": where or "(top level)",
                **({"unit": unit_name(block["unit"])} if "unit" in block else {}),
                **({"guarantee": block["guarantee"]} if "guarantee" in block else {}),
                "checks": [c.to_dict() for c in result],
            }
            for where, block, result in blocks
        ],
        "unchecked": unchecked,
    }


def _bundle_copies(bundle: Path, privacy: object) -> list[tuple[str, dict, list]]:
    """A bundle states ε three times (``privacy.json``, ``metrics.json``, ``RELEASE.json``): each copy
    is held to the privacy block's recomputed claim."""
    from textkg.privacy.verify import Check

    if not isinstance(privacy, dict) or privacy.get("epsilon") is None:
        return []
    claimed = privacy["epsilon"]
    out: list[tuple[str, dict, list]] = []
    for name, key in (("RELEASE.json", ("epsilon",)), ("metrics.json", ("privacy", "epsilon"))):
        if not (bundle / name).exists():
            continue
        value: object = _read_untrusted_json(bundle / name)
        for k in key:
            value = value.get(k) if isinstance(value, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError("expected a number, as privacy.json states", file=bundle / name, field=".".join(key))
        out.append((f"{name}:{'.'.join(key)}", {}, [Check(".".join(key), "copy of privacy.json", value, claimed)]))
    return out
