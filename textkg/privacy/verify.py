"""Recompute the ε a privacy block claims from its own fields: what ``textkg account --from`` and
``textkg release`` check.

A privacy block is untrusted data (a bundle someone sent, a results file): every field the
recomputation reads is validated first, and a bad one is a :class:`~textkg.errors.ConfigError`
naming the file and the field (exit 2). The arithmetic is the project's own, chosen by name from
the one accountant registry (:mod:`textkg.privacy.claims`): the RDP of the Sampled Gaussian
Mechanism (Mironov, Talwar & Zhang 2019, arXiv:1908.10530) converted with Canonne, Kamath & Steinke
2020 (arXiv:2004.00010v3, Prop. 12), or dp-accounting's PLD (:mod:`textkg.privacy.pld`).

The block forms textkg writes, each recomputed from its own fields:

* a DP-SGD ledger (``ledger``: ``[{sample_rate, noise_multiplier, steps}, ...]``, ``orders``,
  ``delta``, ``accountant``): the claimed ``epsilon`` (or ``epsilon_if_secret`` of a ``simulation``
  block) by the block's ``accountant``, and ``epsilon_rdp`` / ``epsilon_pld`` by theirs. Entries may
  differ in (q, σ, steps); the unit (``statement``, ``confidential-statement``, a party's statement,
  ...) does not enter the arithmetic.
* a block from before the ledger was recorded: one entry (``sample_rate``, ``noise_multiplier``,
  ``steps``) at the default orders.
* ``releases`` Gaussian releases at ``noise_multiplier`` (q = 1; a cross-graph party's entity-level
  block, a client-level federation's ``epsilon_textkg``) at the default orders.

Other blocks (a summary holding ε and δ only) carry nothing to recompute from, and are reported as
unchecked.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from textkg.errors import ConfigError, PrivacyError
from textkg.schema import AnyJSON, List, Num, Obj, SchemaError, Spec, validate

Block = dict[str, Any]
#: (claimed field, the accountant it is by; ``None``: the block's own)
Claims = tuple[tuple[str, str | None], ...]

#: a claim agrees with its recomputation within this relative tolerance (and 1e-9 absolute, for ε = 0)
REL_TOL = 1e-6
ABS_TOL = 1e-9
#: bounds on what an untrusted block may ask the accountant to do
MAX_ENTRIES = 256  # distinct RDP entries cost about 22 ms each (1,000: 22 s, the adversary's review)
MAX_ORDERS = 10_000
MAX_STEPS = 10**9
#: the unit's old spellings (privacy blocks before the unit was named ``statement`` everywhere)
UNIT_ALIASES = {"triple": "statement", "confidential-triple": "confidential-statement"}


def unit_name(unit: object) -> object:
    """The unit as docs name it: an old block's ``triple`` reads as ``statement``."""
    return UNIT_ALIASES.get(unit, unit) if isinstance(unit, str) else unit


@dataclass(frozen=True)
class Check:
    """One claimed ε beside its recomputation."""

    field: str
    accountant: str
    claimed: float
    recomputed: float

    @property
    def agrees(self) -> bool:
        return math.isclose(self.claimed, self.recomputed, rel_tol=REL_TOL, abs_tol=ABS_TOL)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "agrees": self.agrees}


#: one ledger entry, as :meth:`textkg.training.private_training.PrivateTraining.report` writes it (a
#: subnormal rate overflows the accountant's logarithms, as ``textkg account --sample-rate`` refuses it)
_Q = Num(low=sys.float_info.min, high=1.0)
_SIGMA = Num(low=0.0, low_open=True, high=1e4)  # --noise-multiplier's range; 1e160 overflowed sigma**2
_STEPS = Num(low=0, high=MAX_STEPS, integer=True)
_ENTRY = Obj(
    {"sample_rate": _Q, "noise_multiplier": _SIGMA, "steps": _STEPS},
    required=("sample_rate", "noise_multiplier", "steps"),
)
_LEDGER = List(_ENTRY, max_len=MAX_ENTRIES)
_ORDERS = List(Num(low=1.0, low_open=True, high=1e4), max_len=MAX_ORDERS)
_EPSILON = Num(low=0.0, nullable=True)


class _Fields:
    """Reads a block's fields, each validated with :mod:`textkg.schema` before it is used; an error
    names ``file`` and the field's JSON path (``rows[1].privacy.ledger[0].steps``)."""

    def __init__(self, block: Block, *, file: str | Path | None, where: str) -> None:
        self.block, self.file, self.where = block, file, where

    def path(self, field: str) -> str:
        return f"{self.where}.{field}" if self.where else field

    def error(self, field: str, message: str) -> ConfigError:
        return ConfigError(f"malformed privacy block: {message}", file=self.file, field=self.path(field))

    def check(self, value: object, spec: Spec, field: str) -> Any:
        try:
            return validate(value, spec, file=self.file, path=self.path(field))
        except SchemaError as exc:
            raise SchemaError(f"malformed privacy block: {exc.message}", file=exc.file, field=exc.field) from None

    def number(self, value: object, field: str, *, lo: float, hi: float = math.inf, lo_open: bool = False) -> float:
        return float(self.check(value, Num(low=lo, high=hi, low_open=lo_open), field))

    def integer(self, value: object, field: str) -> int:
        return int(self.check(value, _STEPS, field))

    def claim(self, field: str) -> float | None:
        value = self.check(self.block.get(field), _EPSILON, field)
        return None if value is None else float(value)

    def entry(self, q: object, sigma: object, steps: object, field: str) -> tuple[float, float, int]:
        entry = self.check({"sample_rate": q, "noise_multiplier": sigma, "steps": steps}, _ENTRY, field)
        return float(entry["sample_rate"]), float(entry["noise_multiplier"]), int(entry["steps"])

    def ledger(self) -> list[tuple[float, float, int]]:
        entries = self.check(self.block["ledger"], _LEDGER, "ledger")
        return [(float(e["sample_rate"]), float(e["noise_multiplier"]), int(e["steps"])) for e in entries]

    def orders(self) -> list[float] | None:
        if "orders" not in self.block:
            return None  # the default grid, as the run used
        values = [float(a) for a in self.check(self.block["orders"], _ORDERS, "orders")]
        if not values or values != sorted(set(values)):
            raise self.error("orders", "RDP orders must be a non-empty list, sorted and distinct")
        return values

    def delta(self, *, empty: bool) -> float:
        if "delta" not in self.block:
            raise self.error("delta", "missing: epsilon is a bound at a delta")
        if empty and self.block["delta"] == 0:  # a run that took no private step (public-only): (0, 0)
            return 0.0
        return float(self.check(self.block["delta"], Num(low=0.0, high=1.0, low_open=True, high_open=True), "delta"))


def _epsilon(
    accountant: str, entries: list[tuple[float, float, int]], delta: float, orders: list[float] | None, fields: _Fields
) -> float:
    from textkg.privacy.claims import get_claim, registered_claims
    from textkg.privacy.conversion import PrivacyWarning

    if not any(steps for _, _, steps in entries):
        return 0.0
    if accountant not in registered_claims():
        raise fields.error("accountant", f"unknown accountant {accountant!r}; known: {', '.join(registered_claims())}")
    try:
        with warnings.catch_warnings():  # the run's own accounting warned already about the grid's edge
            warnings.simplefilter("ignore", PrivacyWarning)
            eps = get_claim(accountant, orders=orders).epsilon(entries, delta=delta)
    except PrivacyError as exc:
        raise fields.error("ledger", exc.message) from None
    except (ValueError, ConfigError) as exc:
        raise fields.error("ledger", f"epsilon cannot be recomputed from it ({exc})") from None
    return eps if math.isfinite(eps) else math.inf


def _gaussian_releases(fields: _Fields) -> list[tuple[float, float, int]]:
    """The events of ``releases`` Gaussian releases at ``noise_multiplier`` (no sampling: q = 1) and,
    for a PPAT party, its ``answers`` GNMax answers at count noise ``votes_noise``, each the Gaussian
    mechanism at σ_votes/√2 (Papernot et al. 2018, arXiv:1802.08908v1, Prop. 8;
    :func:`textkg.federated.cross_graph.ppat.gnmax_event`)."""
    block, entries = fields.block, []
    releases = fields.integer(block["releases"], "releases")
    sigma = fields.number(block["noise_multiplier"], "noise_multiplier", lo=0.0)
    if sigma > 0 and releases:  # σ = 0: rows in the clear, which compose nothing (and claim nothing)
        entries.append((1.0, sigma, releases))
    if "votes_noise" in block:
        votes = fields.number(block["votes_noise"], "votes_noise", lo=0.0)
        answers = fields.integer(block.get("answers", 0), "answers")
        if votes > 0 and answers:
            entries.append((1.0, votes / math.sqrt(2.0), answers))
    return entries


def _history(state: _Fields) -> list[list[Any]]:
    """``RDPAccountant.state_dict()``'s ``history``: ``[[q, σ, steps], ...]``, checked to be triples."""
    spec = List(List(AnyJSON(), max_len=3), max_len=MAX_ENTRIES)
    history: list[list[Any]] = state.check(state.block.get("history"), spec, "history")
    for i, entry in enumerate(history):
        if len(entry) != 3:
            raise state.error(f"history[{i}]", "expected [sample_rate, noise_multiplier, steps]")
    return history


#: which accountant each claimed field is by (``None``: the block's own ``accountant``)
_LEDGER_CLAIMS: Claims = (
    ("epsilon", None),
    ("epsilon_if_secret", None),
    ("epsilon_rdp", "rdp"),
    ("epsilon_pld", "pld"),
)


def recompute_block(block: Block, *, file: str | Path | None = None, where: str = "privacy") -> list[Check] | str:
    """Every ε ``block`` claims beside its recomputation, or why nothing can be recomputed (a string).

    Raises:
        ConfigError: a field the recomputation reads is malformed (naming ``file`` and ``where.field``).
    """
    fields = _Fields(block, file=file, where=where)
    own = block.get("accountant", "rdp")
    claims: Claims
    if isinstance(block.get("ledger"), dict) and block.get("unit") == "statement":
        return (
            "a statement-level party's saved ledger does not name the accountant of its claim: its privacy block does"
        )
    if isinstance(block.get("ledger"), dict):  # an entity-level party's saved ledger: its RDP accountant's state
        state = _Fields(block["ledger"], file=file, where=fields.path("ledger"))
        entries = [state.entry(q, sigma, n, f"history[{i}]") for i, (q, sigma, n) in enumerate(_history(state))]
        orders, claims = state.orders(), (("epsilon", None),)
        own = block["ledger"].get("accountant", "rdp")
    elif "ledger" in block:
        entries, orders, claims = fields.ledger(), fields.orders(), _LEDGER_CLAIMS
    elif "releases" in block and "noise_multiplier" in block:
        entries, orders = _gaussian_releases(fields), fields.orders()
        if isinstance(own, str) and own.startswith("flwr"):  # Flower's ε; textkg's own is epsilon_textkg
            own, claims = "rdp", (("epsilon_textkg", "rdp"),)
        else:
            claims = (("epsilon", None), ("epsilon_if_secret", None), ("votes_epsilon", None))
    elif {"sample_rate", "noise_multiplier", "steps"} <= block.keys() and block.get("noise_schedule") is None:
        if block["steps"] == 0 and block["sample_rate"] is None:
            entries = []
        else:
            entries = [fields.entry(block["sample_rate"], block["noise_multiplier"], block["steps"], "ledger")]
        orders, claims = fields.orders(), (("epsilon", None), ("epsilon_if_secret", None))
    else:
        return "no ledger: the block holds no (q, sigma, steps) to recompute epsilon from"
    if not isinstance(own, str):
        raise fields.error("accountant", f"expected a name, got {own!r:.80}")
    delta = fields.delta(empty=not any(steps for _, _, steps in entries))
    checks = []
    for field, accountant in claims:
        claimed = fields.claim(field)
        if claimed is not None:
            eps = _epsilon(accountant or own, entries, delta, orders, fields)
            checks.append(Check(field=field, accountant=accountant or own, claimed=claimed, recomputed=eps))
    return checks or "the block claims no epsilon (a simulation without one, or no guarantee)"


def recompute_epsilon(block: Block, *, file: str | Path | None = None) -> float:
    """The ε a privacy block's own ledger gives, by the block's accountant: what ``textkg release``
    holds its claimed ``epsilon`` to.

    Raises:
        ConfigError: the block lacks a ledger, or a field is malformed.
    """
    fields = _Fields(block, file=file, where="privacy")
    missing = [k for k in ("orders", "ledger", "delta") if k not in block]
    if missing:
        raise fields.error(
            missing[0],
            f"the privacy block lacks {', '.join(missing)}: epsilon cannot be recomputed from it "
            "(a run from before textkg recorded its ledger; retrain it)",
        )
    entries, orders = fields.ledger(), fields.orders()
    delta = fields.delta(empty=not any(steps for _, _, steps in entries))
    own = block.get("accountant", "rdp")
    return _epsilon(own if isinstance(own, str) else repr(own), entries, delta, orders, fields)


def is_block(obj: object) -> bool:
    """Whether ``obj`` looks like a privacy block (``guarantee`` and ``epsilon``, or a ledger), or a
    cross-graph party's saved ledger (``epsilon`` beside its accountant's state)."""
    if not isinstance(obj, dict):
        return False
    ledger = obj.get("ledger")
    saved = isinstance(ledger, dict) and "history" in ledger and "epsilon" in obj  # a party's saved ledger
    return ("guarantee" in obj and "epsilon" in obj) or isinstance(ledger, list) or saved


def find_blocks(doc: object, where: str = "") -> Iterator[tuple[str, Block]]:
    """Every privacy block in a JSON document, with its path (``rows[1].privacy``), depth first."""
    stack: list[tuple[str, object]] = [(where, doc)]
    while stack:
        path, obj = stack.pop()
        if isinstance(obj, dict):
            if is_block(obj):
                yield path, obj
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in reversed(list(obj.items())))
        elif isinstance(obj, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(obj))))
