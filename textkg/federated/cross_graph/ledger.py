"""A party's privacy ledger: every object it sent, with its privacy block, and its accountant.

Every release composes one ``SampledGaussianEvent(sample_rate=1.0, noise_multiplier=σ)`` (the
Gaussian mechanism, :mod:`textkg.federated.cross_graph.procrustes`) in the party's own
:class:`textkg.privacy.accountant.RDPAccountant` (Mironov 2017, arXiv:1702.07476v3, Prop. 1 for the
composition; Canonne, Kamath & Steinke 2020, arXiv:2004.00010, Prop. 12 for the conversion).
An entity aligned with several partners is in several releases, so the party's ε is the
composition over all its releases: a bound for every one of its aligned entities.
"""

from __future__ import annotations

import math
from pathlib import Path

from textkg.privacy.accountant import RDPAccountant
from textkg.privacy.events import SampledGaussianEvent
from textkg.schema import AnyJSON, Bool, List, Num, Obj, SchemaError, Str, validate

#: What a release protects.
UNIT = "one aligned entity's embedding (a row of the sender's entity table)"
#: The neighbouring relation of the guarantee.
ADJACENCY = "zero-out: that row replaced by zeros (L2 sensitivity C); replace-one holds at noise sigma/2"


_TEXT = Str(max_len=2000)
_EPSILON = Num(low=0, high=1e6, low_open=True, nullable=True)  # a claim of 0 after a release is impossible
_COUNT = Num(low=0, high=1e12, integer=True)
#: every privacy block a party's release may carry (:meth:`PartyLedger.block`, :meth:`PPATLedger.block`,
#: :meth:`StatementLedger.block`, whose keys are :meth:`~textkg.training.private_training.PrivateTraining.report`'s):
#: a peer's block is checked against it before the receiver records it (``received_privacy``)
PRIVACY_BLOCK = Obj(
    {
        "guarantee": Str(choices=("dp", "simulation", "none")),
        "not_dp_because": List(_TEXT, max_len=20),
        "unit": _TEXT,
        "exchange_unit": Str(choices=("entity", "statement")),
        "adjacency": _TEXT,
        "mechanism": _TEXT,
        "noise_multiplier": Num(low=0, high=1e6, nullable=True),
        "clip": Num(low=0, high=1e6, low_open=True, nullable=True),
        "epsilon": _EPSILON,
        "epsilon_if_secret": _EPSILON,
        "epsilon_rdp": Num(low=0, high=1e6, nullable=True),
        "epsilon_pld": Num(low=0, high=1e6, nullable=True),
        "delta": Num(low=0, high=1, low_open=True, high_open=True),
        "alpha": Num(low=1, high=1e6, low_open=True, nullable=True),
        "accountant": Str(max_len=64),
        "conversion": _TEXT,
        "orders": List(Num(low=1, high=1e6, low_open=True), max_len=10_000),
        "ledger": List(
            Obj(
                {"sample_rate": Num(low=0, high=1), "noise_multiplier": Num(low=0, high=1e6), "steps": _COUNT},
                required=("sample_rate", "noise_multiplier", "steps"),
            ),
            max_len=10_000,
        ),
        "noise_schedule": AnyJSON(max_str=200, max_len=10),
        "noise_calibrated_to_target": Bool(nullable=True),
        "target_epsilon": Num(low=0, high=1e6, low_open=True, nullable=True),
        "max_grad_norm": Num(low=0, high=1e6, low_open=True, nullable=True),
        "sample_rate": Num(low=0, high=1, nullable=True),
        "steps": _COUNT,
        "planned_steps": Num(low=0, high=1e12, integer=True, nullable=True),
        "num_private_triples": Num(low=0, high=1e12, integer=True, nullable=True),
        "private_size": Num(low=0, high=1e12, nullable=True),
        "private_size_source": _TEXT,
        "sampling": _TEXT,
        "clipping": _TEXT,
        "randomness": _TEXT,
        "covered_parameters": List(Str(max_len=200), max_len=1000),
        "public_inputs": List(_TEXT, max_len=50),
        "mode": Str(max_len=64),
        "private_updates": Str(max_len=64),
        "releases": _COUNT,
        "votes_guarantee": Str(choices=("dp", "simulation")),
        "votes_epsilon": Num(low=0, high=1e6),
        "votes_noise": Num(low=0, high=1e6),
        "answers": _COUNT,
        "data_dependent_analysis": Bool(),
    },
    required=("guarantee", "epsilon", "delta", "releases"),
    max_bytes=256 * 1024,
)


def check_privacy_block(block: object, *, file: str, path: str = "privacy") -> dict:
    """A peer's privacy block, checked against :data:`PRIVACY_BLOCK` (keys, types, finite ranges, at most
    256 KiB) and for a claim no release can make (``dp`` without ε); returns it.

    Raises:
        SchemaError: naming ``file`` (the message) and the block's field."""
    validate(block, PRIVACY_BLOCK, file=file, path=path)
    assert isinstance(block, dict)
    if block["guarantee"] == "dp" and block["epsilon"] is None:
        raise SchemaError("a dp release must state its epsilon", file=file, field=f"{path}.epsilon")
    return block


class PartyLedger:
    """The sent messages and the accountant of one party (JSON-serialisable).

    Args:
        party: The party's name.
        delta: δ of its guarantee.
        noise_multiplier: σ of its releases (0: none, labelled ``none``; a public seed: ``simulation``).
        clip: C.
        secret: Whether the noise comes from a secret key (``False``: a public seed, not DP).
    """

    def __init__(self, party: str, *, delta: float, noise_multiplier: float, clip: float, secret: bool) -> None:
        self.party = party
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.clip = clip
        self.secret = secret
        self.accountant = RDPAccountant()
        self.sent: list[dict] = []
        self.exchanges: list[dict] = []

    def epsilon(self) -> float | None:
        """ε of every release so far (``None`` without noise: no guarantee)."""
        if self.noise_multiplier == 0:
            return None
        if not self.accountant.steps:
            return 0.0
        eps = self.accountant.get_epsilon(delta=self.delta)
        return eps if math.isfinite(eps) else None

    def block(self) -> dict:
        """The privacy block every transmitted object carries (the ledger's state after it)."""
        # no noise: no guarantee at all; noise from a public seed: the house's "simulation" (never "dp")
        guarantee = "none" if self.noise_multiplier <= 0 else ("dp" if self.secret else "simulation")
        return {
            "guarantee": guarantee,
            "unit": UNIT,
            "adjacency": ADJACENCY,
            "mechanism": "Gaussian: each row clipped to C, N(0, sigma^2 C^2) on every entry",
            "noise_multiplier": self.noise_multiplier,
            "clip": self.clip,
            "epsilon": self.epsilon() if guarantee == "dp" else None,
            "epsilon_if_secret": self.epsilon() if guarantee == "simulation" else None,
            "delta": self.delta,
            "releases": self.accountant.steps,
            "accountant": "rdp",
        }

    def record_release(self, *, step: int, to: str, rows: int) -> dict:
        """Compose one release and log it; returns its privacy block."""
        self.accountant.step(SampledGaussianEvent(sample_rate=1.0, noise_multiplier=self.noise_multiplier))
        block = self.block()
        self.sent.append({"step": step, "to": to, "object": "aligned rows", "rows": rows, "privacy": block})
        return block

    def state_dict(self) -> dict:
        return {
            "party": self.party,
            "delta": self.delta,
            "noise_multiplier": self.noise_multiplier,
            "clip": self.clip,
            "secret": self.secret,
            "ledger": self.accountant.state_dict(),
            "epsilon": self.epsilon(),
            "sent": self.sent,
            "exchanges": self.exchanges,
        }

    def load_state_dict(self, state: dict) -> None:
        self.accountant.load_state_dict(state["ledger"])
        self.sent = list(state["sent"])
        self.exchanges = list(state["exchanges"])

    def save(self, path: Path) -> None:
        from textkg.training.checkpoint import atomic_write_json

        atomic_write_json(path, self.state_dict())


def recompute_epsilon(state: dict) -> float:
    """ε from a saved ledger alone (its accountant history and δ): what a reader checks."""
    acc = RDPAccountant()
    acc.load_state_dict(state["ledger"])
    return acc.get_epsilon(delta=float(state["delta"]))


def planned_noise_multiplier(*, target_epsilon: float, delta: float, releases: int) -> float:
    """σ such that ``releases`` Gaussian releases meet ``target_epsilon`` (never above it)."""
    from textkg.privacy.calibration import calibrate_noise_multiplier

    return calibrate_noise_multiplier(target_epsilon=target_epsilon, delta=delta, sample_rate=1.0, steps=releases)


#: What a statement-level release protects (``exchange.unit: statement``).
STATEMENT_UNIT = "one training statement of the sending party"
#: What else a statement-level party's releases read, all public (docs/cross_graph.md, "Statement level").
STATEMENT_PUBLIC_INPUTS = [
    "the aligned entities (the PSI output): each side's entity set is its public vocabulary, not read "
    "from its statements",
    "the party's own validation and test statements (the keep / roll-back decision ranks validation "
    "statements with a filter of validation and test statements only)",
    "the partners' releases (functions of their data and of this party's earlier releases)",
]


class StatementLedger(PartyLedger):
    """The ledger of a party under the statement-level exchange: its DP-SGD accountant is the only one.

    The party trains with DP-SGD on its own statements (:class:`~textkg.training.private_training.
    PrivateTraining`); every row it releases is post-processing of that model (Dwork & Roth 2014,
    Prop. 2.1), so a release composes nothing. The block carries the DP-SGD ledger so far: pre-training
    and every fine-tuning step (kept or rolled back), the same events the party's ``privacy`` reports.

    Args:
        party: The party's name.
        private: The party's :class:`~textkg.training.private_training.PrivateTraining`.
    """

    def __init__(self, party: str, private) -> None:
        super().__init__(party, delta=private.delta, noise_multiplier=0.0, clip=float("nan"), secret=True)
        self.private = private
        self.accountant = private.accountant

    def epsilon(self) -> float | None:
        return self.block()["epsilon"]

    def block(self) -> dict:
        report = self.private.report()
        return {
            **report,
            "unit": STATEMENT_UNIT
            if report["mode"] == "full"
            else "one confidential training statement of the sending party",
            "exchange_unit": "statement",
            "mechanism": "DP-SGD on the sender's training statements; a release is post-processing (no noise added)",
            "releases": len(self.sent),
            "public_inputs": [*report["public_inputs"], *STATEMENT_PUBLIC_INPUTS],
        }

    def record_release(self, *, step: int, to: str, rows: int) -> dict:
        """Log one release; it composes nothing (post-processing). Returns its privacy block."""
        block = self.block()
        self.sent.append({"step": step, "to": to, "object": "aligned rows", "rows": rows, "privacy": block})
        block["releases"] = len(self.sent)
        return block

    def state_dict(self) -> dict:
        state = super().state_dict()
        state.update(unit="statement", noise_multiplier=None, clip=None, ledger=self.accountant.state_dict())
        return state

    def load_state_dict(self, state: dict) -> None:  # the accountant is the PrivateTraining's (its own state)
        self.sent = list(state["sent"])
        self.exchanges = list(state["exchanges"])


#: What the PPAT exchange's noisy votes protect (the host's side; the release side keeps :data:`UNIT`).
VOTES_MECHANISM = (
    "GNMax (Papernot et al. 2018, arXiv:1802.08908v1, Prop. 8): T teachers on disjoint parts of the host's "
    "aligned rows vote real/fake on each query; N(0, sigma_votes^2) on each of the two counts; only the noisy "
    "argmax leaves. One aligned row changes one teacher: each count moves by at most 1 (L2 sensitivity sqrt 2); "
    "(alpha, alpha / sigma_votes^2)-RDP per answer, data-independent; the data-dependent analysis is not used"
)


class PPATLedger(PartyLedger):
    """The ledger of a party under ``exchange.method: ppat`` (:mod:`textkg.federated.cross_graph.ppat`).

    A party is the client (sender) of some exchanges and the host (receiver) of others. As client it
    releases its aligned rows once per exchange under the Gaussian mechanism (σ_rows, as the
    ``procrustes`` method does; everything it sends afterwards, the generated samples and the
    translated rows, is post-processing of that release). As host it answers ``iterations ·
    queries`` GNMax queries per exchange (σ_votes on each count), one
    ``SampledGaussianEvent(1.0, σ_votes/√2)`` per answer (:func:`~textkg.federated.cross_graph.ppat.
    gnmax_event`). Both compose in the party's one RDP accountant: the unit is the same (one aligned
    entity's embedding), and the zero-out adjacency of the releases is one of the changes the votes'
    bound covers (any change of one row).
    """

    def __init__(
        self, party: str, *, delta: float, noise_multiplier: float, votes_noise: float, clip: float, secret: bool
    ) -> None:
        super().__init__(party, delta=delta, noise_multiplier=noise_multiplier, clip=clip, secret=secret)
        self.votes_noise = votes_noise

    @property
    def rows_in_clear(self) -> bool:
        """``ppat.client_release: clear`` (FKGE as published): the party's rows cross without noise."""
        return self.noise_multiplier == 0 and self.votes_noise > 0

    def block(self) -> dict:
        block = super().block()
        if self.rows_in_clear:  # no guarantee for the party; its votes alone are DP, reported beside
            votes = self.accountant.get_epsilon(delta=self.delta) if self.accountant.steps else 0.0
            block.update(
                unit=UNIT + " (the noisy votes only; the party's rows cross in the clear as FKGE publishes)",
                votes_guarantee="dp" if self.secret else "simulation",
                votes_epsilon=votes,
            )
        block.update(
            mechanism="ppat: Gaussian release of the client's rows (each clipped to C, N(0, sigma^2 C^2) on every "
            "entry); " + VOTES_MECHANISM,
            votes_noise=self.votes_noise,
            releases=sum(m["object"] == "aligned rows" for m in self.sent),
            answers=sum(m.get("labels", 0) for m in self.sent),
            data_dependent_analysis=False,
        )
        return block

    def record_release(self, *, step: int, to: str, rows: int) -> dict:
        """Compose one Gaussian release of the party's aligned rows and log it; returns its block.
        Rows in the clear compose nothing: they have no guarantee, and the block says ``none``."""
        if not self.rows_in_clear:
            self.accountant.step(SampledGaussianEvent(sample_rate=1.0, noise_multiplier=self.noise_multiplier))
        self.sent.append({"step": step, "to": to, "object": "aligned rows", "rows": rows, "privacy": None})
        block = self.block()
        self.sent[-1]["privacy"] = block
        return block

    def record_votes(self, *, step: int, to: str, answers: int) -> dict:
        """Compose ``answers`` GNMax answers and log them; returns the labels' privacy block."""
        from textkg.federated.cross_graph.ppat import gnmax_event

        self.accountant.step(gnmax_event(sigma=self.votes_noise, queries=answers))
        self.sent.append({"step": step, "to": to, "object": "noisy teacher labels", "labels": answers, "privacy": None})
        block = self.block()
        self.sent[-1]["privacy"] = block
        return block

    def state_dict(self) -> dict:
        return {**super().state_dict(), "method": "ppat", "votes_noise": self.votes_noise}
