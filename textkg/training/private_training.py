"""KG-side scheduling of the privacy mechanism: what is private, at what rate,
under which budget, and what the run may honestly claim.

The mechanism comes from one registry (``privacy.mechanism``, :mod:`textkg.training.mechanisms`),
the accountant from another (``privacy.accountant``, :mod:`textkg.privacy.claims`); callers build a
:class:`PrivateTraining` through :class:`textkg.training.privacy_engine.PrivacyEngine`. This module
decides which statements are private (``full``: all training statements; ``confidential``: the
DPKGE setting of Han et al. 2022), plans the private steps and produces the ``privacy`` block of
``metrics.json``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import torch

from textkg.data.units import listed_entity_mask
from textkg.errors import ConfigError, PrivacyError
from textkg.privacy.claims import get_claim
from textkg.privacy.events import SampledGaussianEvent
from textkg.privacy.randomness import SecretRandomness
from textkg.privacy.rdp import DEFAULT_ORDERS, parse_orders
from textkg.privacy.schedule import GeometricNoiseSchedule
from textkg.training.config import PrivacyConfig
from textkg.training.mechanisms import get_mechanism
from textkg.training.private_step import Shard

#: Every input the adversary is assumed to know (docs/privacy.md, "Threat model").
PUBLIC_INPUTS = [
    "entity descriptions and names",
    "relation names and texts",
    "pretrained encoder weights (and any encoder adapted or pre-trained on descriptions)",
    "the entity vocabulary and its train/valid/test partition (the structural table has one row per "
    "entity of the public training partition, or of --public-entities)",
    "validation and test statements (model selection and reported metrics are filtered with public statements only)",
    "unrestricted (non-confidential) training statements, in confidential mode",
    "the declared size of the private set N̄ (--private-size) or the sampling rate q (--sample-rate): "
    "q = B/N̄, round(N̄/B) steps per epoch, the default delta = 1/(10 N̄) and the sum's normaliser B; the exact "
    "number of private statements is private (add/remove adjacency) and nothing released depends on it",
    "which relations are confidential, or the confidential fraction",
    "the configuration, including --seed (model initialisation and public-step randomness)",
    "the code",
]


def select_confidential(
    train: torch.Tensor,
    relations: tuple[str, ...],
    cfg: PrivacyConfig,
    *,
    seed: int,
    entities: Sequence[str] | None = None,
) -> torch.Tensor:
    """Boolean mask ``(N,)`` of confidential training statements.

    By relation name (``confidential_relations``), a seeded random fraction, or, under
    ``unit: statement``, the entities of ``unit_entities`` (every statement that mentions a listed
    entity, e.g. a patient, is confidential: :func:`textkg.data.units.listed_entity_mask`; ``entities``
    are then the graph's entity ids, in id order); a statement any rule marks is confidential.

    The fraction is drawn per statement, not per position: a statement is
    confidential iff a seeded hash of its own ``(head, relation, tail)`` ids
    falls below ``confidential_fraction`` (:func:`statement_uniforms`). So adding
    or removing one statement never relabels another, and two datasets that
    differ in one statement are neighbours under the confidential adjacency
    (a positional draw, ``rand(N) < f``, shifts every later label when a
    statement is inserted).
    """
    if cfg.mode == "full":
        return torch.ones(len(train), dtype=torch.bool)
    mask = torch.zeros(len(train), dtype=torch.bool)
    if cfg.confidential_relations:
        index = {r: i for i, r in enumerate(relations)}
        for name in cfg.confidential_relations:
            if name not in index:
                raise ConfigError(
                    f"unknown relation {name!r}; the graph has: {', '.join(relations[:20])}"
                    + (" …" if len(relations) > 20 else ""),
                    field="privacy.confidential_relations",
                )
            mask |= train[:, 1] == index[name]
    if cfg.confidential_fraction is not None:
        mask |= statement_uniforms(train, seed=seed + 7919) < cfg.confidential_fraction
    if cfg.unit_entities is not None and cfg.unit == "statement":
        if entities is None:
            raise ConfigError(
                "--unit-entities with --privacy-unit statement marks the statements of the listed entities "
                "confidential; this command does not support it",
                field="privacy.unit_entities",
            )
        listed = listed_entity_mask(cfg.unit_entities, entities)
        mask |= listed[train[:, 0]] | listed[train[:, 2]]
    if not mask.any():
        named = cfg.confidential_relations or cfg.confidential_fraction is not None
        raise PrivacyError(
            "no training statement is confidential",
            field="privacy.confidential_relations" if named or cfg.unit_entities is None else "privacy.unit_entities",
        )
    return mask


_MASK64 = (1 << 64) - 1


def statement_uniforms(triples: torch.Tensor, *, seed: int) -> torch.Tensor:
    """``(N,)`` float64 in [0, 1): a seeded hash of each ``(h, r, t)`` row, independent of its position.

    SplitMix64's finaliser (Steele, Lea & Flood 2014, "Fast splittable
    pseudorandom number generators", OOPSLA) applied to the ids packed with the
    seed; the top 53 bits give the uniform. Public randomness: it decides which
    statements a ``--confidential-fraction`` run treats as confidential, a
    property of the data, not of the mechanism.
    """
    import numpy as np

    t = triples.detach().cpu().numpy().astype(np.uint64)
    with np.errstate(over="ignore"):
        x = np.full(len(t), (seed * 0x9E3779B97F4A7C15) & _MASK64, dtype=np.uint64)
        for col in range(3):
            x = (x ^ t[:, col]) * np.uint64(0xBF58476D1CE4E5B9)
            x ^= x >> np.uint64(31)
            x = (x + np.uint64(0x9E3779B97F4A7C15)) * np.uint64(0x94D049BB133111EB)
            x ^= x >> np.uint64(29)
    return torch.from_numpy((x >> np.uint64(11)).astype(np.float64) * 2.0**-53)


#: why a run without a declared public size is not ``dp`` (docs/privacy.md, "Public inputs")
UNDECLARED_SIZE = (
    "q = B/N, the steps per epoch and the default delta use the exact number of private statements N, which "
    "is private under add/remove adjacency (the release would reveal it); declare a public size with "
    "--private-size or a sampling rate with --sample-rate"
)


def public_sampling(cfg: PrivacyConfig, *, batch_size: int, num_private: int) -> tuple[float, float, str | None]:
    """``(N̄, q, source)``: the public size, the Poisson rate and where they come from.

    Under add/remove adjacency (the unit of docs/privacy.md) two neighbouring datasets
    differ in their number of private statements, so DP-SGD's guarantee holds only if
    q, the step count and the normaliser of the noisy sum are public constants
    (Abadi et al. 2016, arXiv:1607.00133v2, Theorem 1, takes q as given; Ponomareva et
    al. 2023, arXiv:2303.00654v3, Sec. 5.3.2, on the dataset size). They come from
    ``--sample-rate`` (N̄ = B/q) or ``--private-size`` N̄ (q = B/N̄). With neither, the
    exact count N stands in and ``source`` is ``None``: the run is labelled
    ``simulation``.
    """
    if cfg.sample_rate is not None:
        return batch_size / cfg.sample_rate, float(cfg.sample_rate), "--sample-rate"
    if cfg.private_size is not None:
        return float(cfg.private_size), min(1.0, batch_size / cfg.private_size), "--private-size"
    return float(num_private), min(1.0, batch_size / num_private), None


def public_only_report(cfg: PrivacyConfig) -> dict:
    """The ``privacy`` block of a ``public-only`` run: ε = 0 for the confidential statements.

    The run never reads a confidential statement: it trains on the unrestricted
    ones, its vocabulary and filter are public (:func:`textkg.pipeline.prepared.public_view`),
    so its output has the same distribution with or without any one of them
    (0-DP, δ = 0). It is the "train on the public part only" baseline that a
    ``confidential`` run must beat (U-only in Han et al. 2022).
    """
    block = {
        "guarantee": "dp",
        "not_dp_because": [],
        "unit": "confidential-statement",
        "adjacency": "add or remove one confidential training statement",
        "epsilon": 0.0,
        "epsilon_if_secret": None,
        "epsilon_rdp": 0.0,
        "epsilon_pld": 0.0,
        "delta": 0.0,
        "alpha": None,
        "accountant": cfg.accountant,
        "conversion": None,
        "orders": [float(a) for a in DEFAULT_ORDERS],
        "ledger": [],
        "noise_multiplier": None,
        "noise_calibrated_to_target": False,
        "target_epsilon": None,
        "max_grad_norm": None,
        "sample_rate": None,
        "steps": 0,
        "planned_steps": 0,
        "num_private_triples": None,  # private under add/remove adjacency: never released
        "private_size": None,
        "private_size_source": None,
        "sampling": None,
        "clipping": None,
        "randomness": None,
        "covered_parameters": [],
        "public_inputs": PUBLIC_INPUTS,
        "mode": "public-only",
        "private_updates": cfg.private_updates,
        "note": "the confidential training statements were left out and never read",
    }
    if cfg.unit == "entity":  # the units' statements were dropped (textkg.training.unit_privacy)
        from textkg.training.unit_privacy import public_only_unit_fields

        block.update(public_only_unit_fields(cfg))
    block.update(listed_entities_fields(cfg))
    return block


#: what ``--unit-entities`` means under ``--privacy-unit statement``, as the privacy block states it
LISTED_ENTITIES_RULE = (
    "every training statement that mentions an entity of the --unit-entities list is confidential; the unit "
    "is still one statement, so a listed entity (a patient) with k statements is protected only as a group, at "
    "(k·ε, k·e^((k−1)ε)·δ) (textkg.privacy.group)"
)


def listed_entities_fields(cfg: PrivacyConfig) -> dict:
    """The fields a statement-level block gains from ``--unit-entities`` (none without it)."""
    if cfg.unit != "statement" or cfg.unit_entities is None:
        return {}
    listed = "the --unit-entities list (the entities whose statements are confidential; they are entities of the model)"
    return {"confidential_entities_rule": LISTED_ENTITIES_RULE, "public_inputs": [*PUBLIC_INPUTS, listed]}


class PrivateTraining:
    """The private steps of a run: the plan (q, steps, δ, σ, budget), the mechanism, the ledger and the report.

    Built by :meth:`textkg.training.privacy_engine.PrivacyEngine.make_private`; each step is its
    registered mechanism's (``dp-sgd``: DP-SGD; ``simulation``: the labelled seed-paper simulation).

    Args:
        cfg: privacy configuration.
        private_triples: ``(N_C, 3)``.
        batch_size: expected Poisson batch size B (q = B / N_C).
        planned_epochs: for σ calibration (planned steps = epochs · round(N_C/B)).
        entity_pool, loss_fn, num_negatives: as for public steps.
        trained_parameters: names of every trained parameter (for the report).
        one_vs_all_temperature: ``None`` for sampled negatives; τ to train the
            private statements with the 1-vs-all softmax over ``entity_pool``
            (:class:`textkg.training.private_step.OneVsAllPrivateStep`, exact
            per-example clipping without per-example gradients).
        noise_decay: ``None`` for a constant σ; else ``(γ, E)``: step ``t`` runs at
            σ_t = σ_0 · γ^⌊t / (E · steps_per_epoch)⌋ (σ shrinks every E epochs, one federated
            round; :class:`textkg.privacy.schedule.GeometricNoiseSchedule`). The schedule depends on
            public inputs only; the ledger records each step's σ_t, and a calibrated σ_0 makes
            the ledger of the planned steps meet ``target_epsilon``. RDP accounting only.
        units: ``privacy.unit: entity``: the private units' links (:class:`textkg.data.units.UnitLinks`);
            ``private_triples`` is then empty, a step samples units at q = B/N̄ (B and N̄ counting units)
            and the ``dp-sgd`` mechanism takes :class:`textkg.training.unit_step.UnitPrivateStep`.
    """

    def __init__(
        self,
        cfg: PrivacyConfig,
        *,
        private_triples,
        batch_size: int,
        planned_epochs: int,
        entity_pool,
        loss_fn,
        num_negatives: int,
        trained_parameters: list[str],
        randomness: SecretRandomness | None = None,
        one_vs_all_temperature: float | None = None,
        noise_decay: tuple[float, int] | None = None,
        extra_reasons: tuple[str, ...] = (),
        units=None,
    ) -> None:
        self.cfg = cfg
        # the secret source of the Poisson samples, the noise and the per-example randomness;
        # --reproducible-noise derives it from the public seed instead (labelled simulation)
        self.randomness = randomness if randomness is not None else SecretRandomness.for_run(cfg.reproducible_noise)
        #: what one step does (``privacy.mechanism``, :mod:`textkg.training.mechanisms`)
        self.mechanism = get_mechanism(cfg.mechanism)()
        self.private_triples = private_triples
        #: ``privacy.unit: entity``: the private units' links (textkg.data.units.UnitLinks); a step samples
        #: units, not statements (textkg.training.unit_step)
        self.units = units
        #: the exact count (of statements, or of units): private under add/remove adjacency. It drives the
        #: Poisson draw over the rows (whose realised size is never released) and nothing else of a
        #: declared-size run.
        self.num_private = len(private_triples) if units is None else units.num_units
        if units is not None and not self.num_private:
            from textkg.training.unit_step import check_unit_run

            check_unit_run(units)
        self.public_size, self.sample_rate, self.size_source = public_sampling(
            cfg, batch_size=batch_size, num_private=self.num_private
        )
        # every count below is a function of public inputs (the declared size, B, the epochs)
        self.steps_per_epoch = max(1, round(self.public_size / batch_size))
        self.planned_steps = planned_epochs * self.steps_per_epoch
        self.schedule = None
        self.orders = parse_orders(cfg.orders) if cfg.orders else None
        #: what claims ε from the ledger, calibrates σ and enforces the budget (textkg.privacy.claims)
        self.claim = get_claim(cfg.accountant, orders=self.orders)
        if noise_decay is not None:
            if not self.claim.supports_schedule:
                raise ConfigError(
                    "a decaying noise schedule is accounted with RDP only",
                    field="privacy.accountant",
                )
            decay, epochs_per_stage = noise_decay
            self.schedule = GeometricNoiseSchedule(decay=decay, stage_steps=epochs_per_stage * self.steps_per_epoch)
        self.delta = cfg.delta if cfg.delta is not None else 1.0 / (10 * self.public_size)
        if (
            self.num_private and self.delta >= 1.0 / self.num_private
        ):  # a warning to the data owner on stderr, never released
            warnings.warn(
                f"delta={self.delta:g} is not below 1/N = {1 / self.num_private:g}: the guarantee is weak", stacklevel=2
            )
        #: the ledger of events the mechanism composes (the claim's kind of ledger)
        self.accountant = self.claim.ledger()
        self._max_steps: int | None = None  # None: the claim checks before every step (RDP)
        self._max_steps_known = False
        if cfg.noise_multiplier is not None:
            self.noise_multiplier = cfg.noise_multiplier
            self.calibrated = False
        elif cfg.target_epsilon is None:  # PrivacyConfig refuses this in every mode but "none"
            raise PrivacyError("privacy needs --noise-multiplier or --target-epsilon", field="privacy.noise_multiplier")
        else:
            try:
                self.noise_multiplier = self.claim.calibrate(
                    target_epsilon=cfg.target_epsilon,
                    delta=self.delta,
                    sample_rate=self.sample_rate,
                    steps=self.planned_steps,
                    schedule=self.schedule,
                )
            except ValueError as exc:
                raise PrivacyError(str(exc), field="privacy.target_epsilon") from None
            self.calibrated = True
        # a claim that cannot account this σ (PLD at σ ≈ 0) says so before any step, not after training
        self.claim.one_step_cost(self.next_event(), delta=self.delta)
        if cfg.target_epsilon is not None and self.budget_exhausted():
            cost = self.claim.one_step_cost(self.next_event(), delta=self.delta)
            raise PrivacyError(
                f"the budget allows not a single step: one step at sigma={self.noise_multiplier:g}, "
                f"q={self.sample_rate:g} already costs epsilon={cost:.4g} ({cfg.accountant}) > "
                f"--target-epsilon {cfg.target_epsilon:g}; raise --noise-multiplier or the target, or give "
                "only --target-epsilon to calibrate sigma",
                field="privacy.target_epsilon",
            )
        #: further reasons the run is not ``dp`` (e.g. a split drawn from private statements)
        self.extra_reasons: list[str] = list(extra_reasons)
        self.entity_pool = entity_pool
        self.loss_fn = loss_fn
        self.num_negatives = num_negatives
        self.trained_parameters = trained_parameters
        self.batch_size = batch_size
        self.one_vs_all_temperature = one_vs_all_temperature
        #: this process's share of each step under data-parallel training (set by textkg.distributed)
        self.shard: Shard | None = None
        #: under --private-updates private-rows, the rows a unit step's gradient is restricted to before it is
        #: clipped (set by the trainer from its PrivateRowUpdates; textkg.training.unit_step.restrict_to_rows)
        self.trained_rows: dict | None = None

    # -- budget ---------------------------------------------------------------
    def next_event(self) -> SampledGaussianEvent:
        """The event of the next step (``t = accountant.steps``), at its scheduled σ_t."""
        return SampledGaussianEvent(sample_rate=self.sample_rate, noise_multiplier=self.step_noise_multiplier())

    def step_noise_multiplier(self, step: int | None = None) -> float:
        """σ_t of step ``t`` (default: the next step); σ_0 when there is no schedule."""
        if self.schedule is None:
            return self.noise_multiplier
        return self.schedule.noise_multiplier(self.noise_multiplier, self.accountant.steps if step is None else step)

    def budget_exhausted(self) -> bool:
        """True when the next step would exceed ``target_epsilon`` (never overshoot)."""
        if self.cfg.target_epsilon is None:
            return False
        if not self._max_steps_known:  # the claim's last allowed step, found once (PLD: too slow per step)
            self._max_steps = self.claim.max_steps(
                target_epsilon=self.cfg.target_epsilon,
                delta=self.delta,
                sample_rate=self.sample_rate,
                noise_multiplier=self.noise_multiplier,
                limit=max(self.planned_steps, 1),
            )
            self._max_steps_known = True
        if self._max_steps is not None:  # 0 is a real answer: not a single step allowed
            return self.accountant.steps >= self._max_steps
        return self.accountant.would_exceed(self.next_event(), target_epsilon=self.cfg.target_epsilon, delta=self.delta)

    def epsilon(self) -> float:
        if self.accountant.steps == 0:
            return 0.0
        return self.accountant.get_privacy_spent(delta=self.delta)[0]

    # -- one step -------------------------------------------------------------------
    def step(self, model, generator: torch.Generator | None = None) -> None:
        """Fill ``.grad`` of every trained parameter from one private step.

        Every random choice of the step (the Poisson sample, the noise, the
        corruptions, dropout masks, and torch's global generator for modules that
        use it) comes from the secret streams of step ``t = accountant.steps``:
        a resumed run replays a step exactly, and nothing it draws depends on a
        public seed or on what earlier private steps consumed. ``generator`` is
        ignored (kept for callers of the old signature).
        """
        del generator
        t = self.accountant.steps
        aux = self.randomness.torch_generator(step=t)
        device = model.relation_embeddings.device  # a CUDA model's global generator is forked and seeded too
        cuda = []
        if device.type == "cuda":
            cuda = [device.index if device.index is not None else torch.cuda.current_device()]
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(int(torch.randint(2**62, (1,), generator=aux)))
            self.mechanism.step(self, model, generator=aux, step=t)

    def close(self) -> None:
        self.mechanism.close()

    # -- ledger -------------------------------------------------------------------
    def state_dict(self) -> dict:
        """For the PRIVATE checkpoint only: it holds the secret key."""
        return {
            "accountant": self.accountant.state_dict(),
            "noise_multiplier": self.noise_multiplier,
            "randomness": self.randomness.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.accountant.load_state_dict(state["accountant"])
        self.noise_multiplier = state["noise_multiplier"]
        self._max_steps, self._max_steps_known = None, False
        if state.get("randomness") is not None:  # checkpoints from before secret randomness have none
            self.close()
            self.randomness = SecretRandomness.from_state_dict(state["randomness"])

    def label(self) -> tuple[str, list[str]]:
        """``("dp", [])`` or ``("simulation", reasons)``: ``dp`` needs every condition of docs/privacy.md."""
        reasons = []
        if self.mechanism.not_dp_because is not None:
            reasons.append(self.mechanism.not_dp_because)
        if not self.randomness.secure:
            reasons.append("noise and sampling reproducible from the public seed (--reproducible-noise)")
        if self.size_source is None:
            if self.units is not None:
                from textkg.training.unit_privacy import UNDECLARED_UNITS

                reasons.append(UNDECLARED_UNITS)
            else:
                reasons.append(UNDECLARED_SIZE)
        reasons.extend(self.extra_reasons)
        return ("dp" if not reasons else "simulation"), reasons

    def report(self) -> dict:
        """The ``privacy`` block of ``metrics.json``: only what the mechanism covers.

        It carries the whole ledger and the RDP orders, so ε can be recomputed
        from this block alone (``textkg account`` or Opacus). A ``simulation``
        run gets no ε (``null``); for a DP-SGD run whose only defect is public
        randomness, ``epsilon_if_secret`` says what the accountant would claim.
        """
        label, reasons = self.label()
        eps_rdp, alpha = (
            (0.0, None) if self.accountant.steps == 0 else self.accountant.get_privacy_spent(delta=self.delta)
        )
        alpha = None if alpha is None or not math.isfinite(alpha) else alpha
        # the claimed ε, by the registered accountant (textkg.privacy.claims); the other one beside it
        eps = self.claim.epsilon(self.accountant.history, delta=self.delta) if self.accountant.steps else 0.0
        dp = self.mechanism.accounted
        # the PLD claim of the same ledger beside the claimed one (dp-accounting's answer is cached)
        eps_pld = None
        if dp:
            history = self.accountant.history
            try:
                eps_pld = get_claim("pld").epsilon(history, delta=self.delta) if self.accountant.steps else 0.0
            except PrivacyError:  # a loss too wide for dp-accounting to discretise: no PLD figure beside it
                eps_pld = None
        orders = list(self.orders) if self.orders is not None else list(DEFAULT_ORDERS)
        block = {
            "guarantee": label,
            "not_dp_because": reasons,
            "unit": "statement" if self.cfg.mode == "full" else "confidential-statement",
            "adjacency": "add or remove one "
            + ("training statement" if self.cfg.mode == "full" else "confidential training statement"),
            "epsilon": eps if label == "dp" else None,
            "epsilon_if_secret": eps if (dp and label != "dp") else None,
            # the same ledger under both accountants; `accountant` says which one `epsilon` is
            "epsilon_rdp": eps_rdp if dp else None,
            "epsilon_pld": eps_pld,
            "delta": self.delta,
            "alpha": alpha,
            "accountant": self.cfg.accountant,
            "conversion": self.claim.conversion,
            "orders": [float(a) for a in orders],
            "ledger": [
                {"sample_rate": q, "noise_multiplier": sigma, "steps": n} for q, sigma, n in self.accountant.history
            ],
            "noise_multiplier": self.noise_multiplier,
            "noise_schedule": None if self.schedule is None else self.schedule.describe(),
            "noise_calibrated_to_target": self.calibrated,
            "target_epsilon": self.cfg.target_epsilon,
            "max_grad_norm": self.cfg.max_grad_norm,
            "sample_rate": self.sample_rate,
            "steps": self.accountant.steps,
            "planned_steps": self.planned_steps,
            # the exact count only where the run is labelled simulation for using it
            "num_private_triples": self.num_private if self.size_source is None else None,
            "private_size": int(self.public_size) if float(self.public_size).is_integer() else self.public_size,
            "private_size_source": self.size_source or "the exact count (simulation)",
            "sampling": self.mechanism.sampling,
            "clipping": self.mechanism.clipping,
            "randomness": self.randomness.describe(),
            "covered_parameters": list(self.trained_parameters),
            "public_inputs": PUBLIC_INPUTS,
            "mode": self.cfg.mode,
            # which entries a private step updates (post-processing: the same ε either way)
            "private_updates": self.cfg.private_updates,
        }
        if self.units is not None:  # one unit entity (a patient) with all of its statements
            from textkg.training.unit_privacy import unit_fields

            block.update(unit_fields(self.cfg, num_units=self.num_private if self.size_source is None else None))
        block.update(listed_entities_fields(self.cfg))
        return block
