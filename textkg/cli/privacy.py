"""Privacy commands: ``release`` what the guarantee covers, ``audit`` a run, and the accountant alone.

* ``textkg release RUN --out DIR [--allow-simulation]``
* ``textkg audit RUN [--attack score|loss|rank] [--out FILE]``
* ``textkg account --sample-rate Q --noise-multiplier S --steps T --delta D [--orders SPEC]``
  prints ``{"epsilon": ε, "alpha": best order, ...}`` — ε of T runs of the
  Sampled Gaussian Mechanism (RDP, Mironov, Talwar & Zhang 2019) converted
  with Canonne, Kamath & Steinke 2020 (arXiv 2004.00010, Prop. 12).
* ``textkg calibrate --target-epsilon E --delta D --sample-rate Q --steps T [--orders SPEC]``
  prints ``{"noise_multiplier": σ, "epsilon": ε(σ)}``, the smallest σ (bisection)
  whose ε does not exceed E.

``account`` and ``calibrate`` are thin wrappers over :mod:`textkg.privacy`; invalid numbers are user errors
(exit 2, no traceback).
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

from textkg.errors import ConfigError


def add_audit(sub) -> None:
    """``textkg audit``."""
    from textkg.audit.attacks import list_attacks

    au = sub.add_parser("audit", help="membership-inference audit of a run trained with --audit-candidates")
    au.add_argument("run_dir", help="a finished run trained with --audit-candidates")
    au.add_argument("--attack", default="score", choices=list_attacks(), help="attack statistic (default: score)")
    au.add_argument(
        "--alpha", type=float, default=0.05, help="1 - confidence of the Clopper-Pearson intervals (default: 0.05)"
    )
    au.add_argument("--out", help="write the result here instead of RUN_DIR/audit.json")


def add_release(sub) -> None:
    """``textkg release``."""
    rel = sub.add_parser(
        "release",
        help="write only what the DP guarantee covers: weights, public config, "
        "privacy block, model card (docs/privacy.md)",
    )
    rel.add_argument("run_dir", help="a finished run directory")
    rel.add_argument("--out", required=True, help="new or empty directory for the bundle")
    rel.add_argument(
        "--allow-simulation",
        action="store_true",
        help="also release a run not labelled 'dp'; every file then says NOT DIFFERENTIALLY PRIVATE",
    )


#: ``--orders`` of ``account`` and ``calibrate``
_ORDERS_HELP = "RDP orders, e.g. 2-64 (the seed's integer grid) or 1.5,2,4 (default: 1.1..10.9, 11..63, 128..1024)"


def add_account(sub) -> None:
    """``textkg account``."""
    ac = sub.add_parser("account", help="epsilon of T steps of the Sampled Gaussian Mechanism")
    ac.add_argument("--sample-rate", type=float, required=True, help="Poisson sampling rate q = B/N")
    ac.add_argument("--noise-multiplier", type=float, required=True, help="sigma")
    ac.add_argument("--steps", type=int, required=True, help="T, the number of noisy steps")
    ac.add_argument("--delta", type=float, required=True, help="delta of the (epsilon, delta) guarantee")
    ac.add_argument("--orders", help=_ORDERS_HELP)


def add_calibrate(sub) -> None:
    """``textkg calibrate``."""
    ca = sub.add_parser("calibrate", help="smallest sigma reaching a target epsilon for planned steps")
    ca.add_argument("--target-epsilon", type=float, required=True, help="the budget epsilon to stay under")
    ca.add_argument("--delta", type=float, required=True, help="delta of the (epsilon, delta) guarantee")
    ca.add_argument("--sample-rate", type=float, required=True, help="Poisson sampling rate q = B/N")
    ca.add_argument("--steps", type=int, required=True, help="T, the planned number of noisy steps")
    ca.add_argument("--orders", help=_ORDERS_HELP)


def audit(args) -> dict:
    from textkg.audit import AUDIT_RESULT, run_audit, write_audit

    if not 0 < args.alpha < 1:
        raise ConfigError("must be in (0, 1)", field="alpha")
    from textkg.pipeline.run_dir import open_run

    run_dir = Path(args.run_dir)
    open_run(run_dir)
    result = run_audit(run_dir, attack=args.attack, alpha=args.alpha)
    out = write_audit(result, Path(args.out) if args.out else run_dir / AUDIT_RESULT)
    print(f"wrote {out}", file=sys.stderr)
    return {"out": str(out), **result.summary()}


def release(args) -> dict:
    from textkg.release import release as write_release

    manifest = write_release(args.run_dir, args.out, allow_simulation=args.allow_simulation)
    print(f"wrote {args.out}", file=sys.stderr)
    return {
        "out": str(args.out),
        "label": manifest.get("label", manifest["guarantee"]),
        "epsilon": manifest["epsilon"],
        "delta": manifest["delta"],
        "files": sorted(manifest["files"]),
    }


def _check(args) -> None:
    # a subnormal rate (1e-320) overflows the accountant's logarithms and stalls calibration
    if not sys.float_info.min <= args.sample_rate <= 1:
        raise ConfigError(f"must be in [{sys.float_info.min:.3g}, 1], got {args.sample_rate}", field="sample-rate")
    if args.steps < 1:
        raise ConfigError(f"must be >= 1, got {args.steps}", field="steps")
    if not 0 < args.delta < 1:
        raise ConfigError(f"must be in (0, 1), got {args.delta}", field="delta")


def account(args) -> dict:
    from textkg.privacy.accountant import RDPAccountant
    from textkg.privacy.conversion import PrivacyWarning
    from textkg.privacy.events import SampledGaussianEvent

    _check(args)
    if not args.noise_multiplier > 0:
        raise ConfigError(f"must be > 0, got {args.noise_multiplier}", field="noise-multiplier")
    acc = RDPAccountant(orders=args.orders)
    acc.step(
        SampledGaussianEvent(sample_rate=args.sample_rate, noise_multiplier=args.noise_multiplier, steps=args.steps)
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PrivacyWarning)
        epsilon, alpha = acc.get_privacy_spent(delta=args.delta)
    out = {
        "epsilon": epsilon,
        "alpha": None if math.isnan(alpha) else alpha,
        "delta": args.delta,
        "sample_rate": args.sample_rate,
        "noise_multiplier": args.noise_multiplier,
        "steps": args.steps,
        "accountant": "rdp",
        "conversion": "canonne-kamath-steinke-2020",
        "orders": {"min": min(acc.orders), "max": max(acc.orders), "count": len(acc.orders)},
    }
    notes = [str(w.message) for w in caught if issubclass(w.category, PrivacyWarning)]
    if notes:
        out["warnings"] = notes
    return out


def calibrate(args) -> dict:
    from textkg.privacy.accountant import epsilon_of
    from textkg.privacy.calibration import calibrate_noise_multiplier

    _check(args)
    if not args.target_epsilon > 0 or math.isinf(args.target_epsilon):
        raise ConfigError(f"must be finite and > 0, got {args.target_epsilon}", field="target-epsilon")
    sigma = calibrate_noise_multiplier(
        target_epsilon=args.target_epsilon,
        delta=args.delta,
        sample_rate=args.sample_rate,
        steps=args.steps,
        orders=args.orders,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eps = epsilon_of(
            sample_rate=args.sample_rate, noise_multiplier=sigma, steps=args.steps, delta=args.delta, orders=args.orders
        )
    return {
        "noise_multiplier": sigma,
        "epsilon": eps,
        "target_epsilon": args.target_epsilon,
        "delta": args.delta,
        "sample_rate": args.sample_rate,
        "steps": args.steps,
    }


PARSERS = {"audit": add_audit, "release": add_release, "account": add_account, "calibrate": add_calibrate}
HANDLERS: dict = {
    ("audit", None): audit,
    ("release", None): release,
    ("account", None): account,
    ("calibrate", None): calibrate,
}
