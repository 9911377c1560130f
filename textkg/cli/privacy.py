"""Privacy commands: ``release`` what the guarantee covers, ``audit`` a run, and the accountant alone.

* ``textkg release RUN --out DIR [--allow-simulation]``
* ``textkg audit RUN [--attack score|loss|rank] [--out FILE]``
* ``textkg account --from PATH`` recomputes every ε a bundle, ``privacy.json`` or ``metrics.json``
  claims from its own ledger (:func:`textkg.release.account_from`), prints each beside the claim,
  and exits 1 when one disagrees (2: bad input).
* ``textkg account --sample-rate Q --noise-multiplier S --steps T --delta D [--accountant rdp|pld] [--orders SPEC]``
  prints ``{"epsilon": ε, "alpha": best order, ...}`` — ε of T runs of the
  Sampled Gaussian Mechanism (RDP, Mironov, Talwar & Zhang 2019, converted
  with Canonne, Kamath & Steinke 2020, arXiv 2004.00010, Prop. 12; or PLD).
* ``textkg calibrate --target-epsilon E --delta D --sample-rate Q --steps T [--orders SPEC]``
  prints ``{"noise_multiplier": σ, "epsilon": ε(σ)}``, the smallest σ (bisection)
  whose ε does not exceed E.

``account`` and ``calibrate`` are thin wrappers over :mod:`textkg.privacy`; invalid numbers are user errors
(exit 2, no traceback).
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

from textkg.cli.flags import number_flag, rdp_orders
from textkg.errors import ConfigError


def add_audit(sub) -> None:
    """``textkg audit``."""
    from textkg.audit.attacks import list_attacks

    au = sub.add_parser("audit", help="membership-inference audit of a run trained with --audit-candidates")
    au.add_argument("run_dir", help="a finished run trained with --audit-candidates")
    au.add_argument("--attack", default="score", choices=list_attacks(), help="attack statistic (default: score)")
    au.add_argument(
        "--alpha",
        type=number_flag("alpha"),
        default=0.05,
        help="1 - confidence of the Clopper-Pearson intervals (default: 0.05)",
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


#: ``--sample-rate`` of ``account`` and ``calibrate``: the rate a run declares, never the exact count's
_SAMPLE_RATE_HELP = (
    "Poisson sampling rate q = B / N̄: the batch size over the DECLARED size N̄ of the private set "
    "(--private-size; the exact count N is private and never enters q)"
)


def add_account(sub) -> None:
    """``textkg account``."""
    ac = sub.add_parser(
        "account",
        help="epsilon of a ledger: recompute every epsilon a privacy.json, metrics.json or bundle claims "
        "(--from; exit 1 when a claim disagrees), or of T steps at (q, sigma)",
    )
    ac.add_argument(
        "--from",
        dest="from_path",
        metavar="PATH",
        help="a release bundle folder, a run folder, a privacy.json, a metrics.json, or any JSON file of privacy "
        "blocks: recompute each claimed epsilon from its own ledger and accountant, print it beside the claim, "
        "exit 1 if any differs by more than 1e-6 (relative)",
    )
    ac.add_argument("--sample-rate", type=number_flag("sample_rate"), help=_SAMPLE_RATE_HELP)
    ac.add_argument("--noise-multiplier", type=number_flag("sigma"), help="sigma")
    ac.add_argument("--steps", type=number_flag("steps"), help="T, the number of noisy steps")
    ac.add_argument("--delta", type=number_flag("delta"), help="delta of the (epsilon, delta) guarantee")
    ac.add_argument(
        "--accountant",
        choices=_accountants(),
        default="rdp",
        help="which accountant gives epsilon with the flags (default: rdp; --from uses each block's own)",
    )
    ac.add_argument("--orders", type=rdp_orders, help=_ORDERS_HELP)


def _accountants() -> list[str]:
    from textkg.privacy.claims import registered_claims

    return registered_claims()


def add_calibrate(sub) -> None:
    """``textkg calibrate``."""
    ca = sub.add_parser("calibrate", help="smallest sigma reaching a target epsilon for planned steps")
    ca.add_argument(
        "--target-epsilon", type=number_flag("epsilon"), required=True, help="the budget epsilon to stay under"
    )
    ca.add_argument("--delta", type=number_flag("delta"), required=True, help="delta of the (epsilon, delta) guarantee")
    ca.add_argument("--sample-rate", type=number_flag("sample_rate"), required=True, help=_SAMPLE_RATE_HELP)
    ca.add_argument("--steps", type=number_flag("steps"), required=True, help="T, the planned number of noisy steps")
    ca.add_argument("--orders", type=rdp_orders, help=_ORDERS_HELP)


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
        "files": sorted([*manifest["files"], "RELEASE.json"]),  # the manifest lists every file but itself
    }


def _check(args) -> None:
    # a subnormal rate (1e-320) overflows the accountant's logarithms and stalls calibration
    if not sys.float_info.min <= args.sample_rate <= 1:
        raise ConfigError(f"must be in [{sys.float_info.min:.3g}, 1], got {args.sample_rate}", field="sample-rate")
    if args.steps < 1:
        raise ConfigError(f"must be >= 1, got {args.steps}", field="steps")
    if not 0 < args.delta < 1:
        raise ConfigError(f"must be in (0, 1), got {args.delta}", field="delta")


_FLAGS = ("sample_rate", "noise_multiplier", "steps", "delta")


#: wall-clock bound of ``account --from`` on one file (a PLD ledger of 1e9 steps at q = 1e-6 ran for minutes)
ACCOUNT_FROM_SECONDS = 120


@contextlib.contextmanager
def _time_limit(seconds: int, path: str) -> Iterator[None]:
    """Stop the recomputation of a file after ``seconds`` (``SIGALRM``: the main thread of a POSIX process;
    elsewhere unbounded) with a :class:`ConfigError` naming the file."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise ConfigError(f"recomputing its ledgers took over {seconds} s: refused", file=path)

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def account(args) -> dict | tuple[dict, int]:
    """``textkg account``: ``--from PATH`` (exit 1 when a claim disagrees) or the flag form."""
    if args.from_path is not None:
        from textkg.release import account_from

        given = [f"--{f.replace('_', '-')}" for f in _FLAGS if getattr(args, f) is not None]
        if given or args.orders is not None:
            raise ConfigError(
                "--from recomputes from the file's own ledgers; it takes no " + ", ".join(given or ["--orders"]),
                field="from",
            )
        with _time_limit(ACCOUNT_FROM_SECONDS, args.from_path):
            out = account_from(args.from_path)
        for block in out["blocks"]:
            for c in block["checks"]:
                mark = "agrees" if c["agrees"] else "DISAGREES"
                print(
                    f"{block['where']} {c['field']}: claimed {c['claimed']:.10g}, recomputed {c['recomputed']:.10g} "
                    f"({c['accountant']}) {mark}",
                    file=sys.stderr,
                )
        if not out["agree"]:
            print(
                f"error: {out['from']}: {out['disagreements']} claimed epsilon(s) differ from their ledger's by more "
                f"than {out['tolerance']['relative']:g} (relative)",
                file=sys.stderr,
            )
        return out, 0 if out["agree"] else 1
    missing = [f"--{f.replace('_', '-')}" for f in _FLAGS if getattr(args, f) is None]
    if missing:
        raise ConfigError(f"give --from PATH, or all of {', '.join(missing)}", field=missing[0][2:])
    return _account_flags(args)


def _account_flags(args) -> dict:
    from textkg.privacy.accountant import RDPAccountant
    from textkg.privacy.claims import get_claim
    from textkg.privacy.conversion import PrivacyWarning
    from textkg.privacy.events import SampledGaussianEvent

    _check(args)
    if not args.noise_multiplier > 0:
        raise ConfigError(f"must be > 0, got {args.noise_multiplier}", field="noise-multiplier")
    event = SampledGaussianEvent(sample_rate=args.sample_rate, noise_multiplier=args.noise_multiplier, steps=args.steps)
    common = {
        "delta": args.delta,
        "sample_rate": args.sample_rate,
        "noise_multiplier": args.noise_multiplier,
        "steps": args.steps,
        "accountant": args.accountant,
    }
    if args.accountant != "rdp":
        if args.orders is not None:
            raise ConfigError(f"RDP orders mean nothing to the {args.accountant} accountant", field="orders")
        claim = get_claim(args.accountant)
        ledger = [(event.sample_rate, event.noise_multiplier, event.steps)]
        return {"epsilon": claim.epsilon(ledger, delta=args.delta), **common, "conversion": claim.conversion}
    acc = RDPAccountant(orders=args.orders)
    acc.step(event)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PrivacyWarning)
        epsilon, alpha = acc.get_privacy_spent(delta=args.delta)
    out = {
        "epsilon": epsilon,
        "alpha": None if math.isnan(alpha) else alpha,
        **common,
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
