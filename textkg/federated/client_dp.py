"""Client-level DP for ``textkg federate``: DP-FedAvg on Flower's own DP strategy wrapper.

DP-FedAvg (McMahan, Ramage, Talwar & Zhang 2018, "Learning Differentially
Private Recurrent Language Models", ICLR, arXiv:1710.06963, Algorithm 1 with
fixed clipping): each round the server clips every holder's model update
``Δ_k = θ_k − θ`` to L2 norm ``C`` over *all* uploaded parameters, averages the
clipped updates with equal weights, and adds ``N(0, (σC/K)²)`` to every entry
of the average. Adding or removing one holder changes the sum of clipped
updates by at most ``C``, so one round is the Gaussian mechanism with noise
multiplier ``σ``; ``R`` rounds without sampling of holders compose to the RDP
of ``R`` Gaussian mechanisms (Mironov 2017, arXiv:1702.07476v3, Prop. 7), then
(ε, δ) by Canonne, Kamath & Steinke (arXiv:2004.00387, Prop. 12 there as in
dp-accounting).

What is used from Flower (``flwr`` 1.42): the strategy wrapper
:class:`flwr.serverapp.strategy.DifferentialPrivacyServerSideFixedClipping`
(clipping, the equal-weights check, the release ledger) and its
``RdpAccountant`` (dp-accounting underneath). What is replaced: only the noise
source. Flower draws its noise with ``numpy.random.normal`` on the global
Mersenne Twister, which anyone who learns its state can regenerate; here the
noise comes from :class:`textkg.privacy.randomness.SecretRandomness` (AES-128-CTR,
a key from the OS that is never written to a released file), one stream per
round, as textkg's record-level noise does (docs/privacy.md).

The unit of the guarantee is one data holder: everything it uploads, so every
statement it holds. The trust model is central DP: the server sees the
unclipped updates and is trusted; the guarantee is about what leaves the
server (the global model and everything computed from it). Public inputs: the
number of holders ``K`` and their names, the shared statements, the entity
vocabulary and texts, ``C``, ``σ``, ``R`` and δ. A holder's statement count is
not released under client-level DP (it is about the holder's data).

With record-level DP as well (``--privacy full|confidential`` and a
client-level flag), both guarantees hold at once, each about its own unit.
The holders' DP-SGD runs before the server's mechanism, which clips and
noises whatever a holder uploads, so the client-level accounting is the same
as without it; the server's clipping and noise are post-processing of each
holder's DP output, so every holder's record-level ledger is the same as
without client-level DP (Dwork & Roth 2014, Prop. 2.1; the rounds compose
adaptively in the holder's ledger as they do without it). ``metrics.json``
then reports each holder's record-level ledger (``clients[*].privacy``): it is
a function of the size the holder samples with (sample rate ``B / N``, steps,
default δ: the declared ``N̄``, else its exact count ``N_k``), which becomes a
public input of the client-level guarantee, and is labelled so
(:func:`client_privacy_block`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from textkg.errors import ConfigError
from textkg.privacy.calibration import calibrate_noise_multiplier
from textkg.privacy.randomness import SecretRandomness
from textkg.privacy.rdp import DEFAULT_ORDERS

#: What a client-level guarantee is about.
CLIENT_UNIT = "one data holder: everything it uploads, so every statement it holds (client level)"
#: The metric each holder reports so that FedAvg weighs holders equally (DP-FedAvg needs equal weights).
UNIT_WEIGHT_KEY = "unit-weight"
#: Default δ of the client-level guarantee.
DEFAULT_CLIENT_DELTA = 1e-5
#: A public input of the client-level guarantee when the holders run record-level DP too.
RECORD_LEDGER_INPUT = (
    "each holder's declared private size N (--private-size / --sample-rate), or without one its number of "
    "(private) statements: its record-level ledger, released in clients[*].privacy, is a function of it "
    "(sample rate B/N, steps, delta)"
)


def holder_entry(report: dict, *, client_dp: bool) -> dict:
    """A holder's entry in ``metrics.json``'s ``clients``: its whole report, or under client-level DP
    its name and its record-level ledger (if it has one), nothing else about its data."""
    if not client_dp:
        return dict(report)
    entry = {"name": report["name"]}
    if report.get("privacy") is not None:
        entry["privacy"] = report["privacy"]
    return entry


def client_noise_multiplier(*, target_epsilon: float, rounds: int, delta: float) -> float:
    """σ such that ``rounds`` Gaussian releases (sensitivity C, noise σC) are (target_epsilon, delta)-DP.

    One round releases the clipped sum once, with every holder taking part
    (no amplification by sampling): the Sampled Gaussian Mechanism at ``q = 1``
    is the Gaussian mechanism, so textkg's RDP calibration applies as is.
    """
    return calibrate_noise_multiplier(
        target_epsilon=target_epsilon, delta=delta, sample_rate=1.0, steps=rounds, orders=DEFAULT_ORDERS
    )


def make_client_dp_strategy(
    strategy: Any,
    *,
    num_clients: int,
    noise_multiplier: float,
    clipping_norm: float,
    delta: float,
    randomness: SecretRandomness | None = None,
    state: dict | None = None,
) -> Any:
    """Wrap a FedAvg ``strategy`` in Flower's server-side fixed-clipping DP, with secret noise.

    Args:
        strategy: A :class:`flwr.serverapp.strategy.FedAvg` whose ``weighted_by_key``
            is :data:`UNIT_WEIGHT_KEY` (equal weights; Flower checks it).
        num_clients: K, every holder in every round.
        noise_multiplier: σ > 0.
        clipping_norm: C > 0, on the L2 norm of a holder's whole update.
        delta: δ of the guarantee, in (0, 1).
        randomness: The noise source; ``None`` draws a fresh secret key.
        state: :func:`client_dp_state` of a wrapper to continue (a resumed
            federation): its secret key, the releases made and Flower's ledger.

    Returns:
        The wrapped strategy; its ``accountant`` is Flower's ``RdpAccountant``.
    """
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping
    from flwr.supercore.privacy_accounting import NeighboringRelation, PrivacyConfig, SamplingMethod
    from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant

    if not noise_multiplier > 0:
        raise ConfigError(
            f"client noise multiplier must be > 0, got {noise_multiplier}", field="client_noise_multiplier"
        )
    if not clipping_norm > 0:
        raise ConfigError(f"client clipping norm must be > 0, got {clipping_norm}", field="client_clip")
    if not 0 < delta < 1:
        raise ConfigError(f"client delta must be in (0, 1), got {delta}", field="client_delta")
    accountant = RdpAccountant(
        PrivacyConfig(
            target_delta=delta,
            population_size=num_clients,
            neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
            sampling_method=SamplingMethod.NO_AMPLIFICATION,
        ),
        orders=tuple(float(a) for a in DEFAULT_ORDERS),
    )
    if state is not None:
        randomness = SecretRandomness.from_state_dict(state["randomness"])
        accountant.load_state_dict(state["accountant"])
    source = randomness if randomness is not None else SecretRandomness()

    class SecretNoiseServerSideFixedClipping(DifferentialPrivacyServerSideFixedClipping):  # type: ignore[misc]
        """Flower's wrapper, with every noise entry from a secret AES-CTR stream (one per release)."""

        releases = 0
        randomness = source  # the noise key: saved in the PRIVATE checkpoint so that a resumed run continues it

        def _add_noise_to_aggregated_arrays(self, aggregated_arrays):  # type: ignore[no-untyped-def]
            from flwr.app import Array, ArrayRecord

            std = self.noise_multiplier * self.clipping_norm / self.num_sampled_clients
            g = self.randomness.generator("noise", self.releases)
            self.releases += 1
            out = {}
            for key, value in aggregated_arrays.items():
                x = value.numpy()
                # float64 draw, rounded once (as textkg's record-level noise)
                out[key] = Array(np.ascontiguousarray((x + std * g.standard_normal(x.shape)).astype(x.dtype)))
            return ArrayRecord(out)

    wrapped = SecretNoiseServerSideFixedClipping(
        strategy,
        noise_multiplier=noise_multiplier,
        clipping_norm=clipping_norm,
        num_sampled_clients=num_clients,
        accountant=accountant,
    )
    if state is not None:
        wrapped.releases = int(state["releases"])
    return wrapped


def client_dp_state(wrapped: Any) -> dict:
    """What a resumed federation needs of the DP wrapper (PRIVATE: holds the noise key)."""
    return {
        "randomness": wrapped.randomness.state_dict(),
        "releases": int(wrapped.releases),
        "accountant": wrapped.accountant.state_dict(),
    }


def client_privacy_block(
    wrapped: Any, *, rounds: int, randomness_secure: bool = True, record_level: bool = False
) -> dict:
    """The ``privacy`` block of a client-level DP federation, from the wrapper's ledger.

    ``epsilon`` is Flower's accountant's; ``epsilon_textkg`` recomputes it with
    textkg's own RDP accountant from σ and the number of releases alone.
    ``record_level``: the holders also ran record-level DP, whose released
    ledgers make their statement counts public inputs.
    """
    from textkg.privacy.accountant import RDPAccountant
    from textkg.privacy.events import SampledGaussianEvent

    spent = wrapped.privacy_spent()
    ours = RDPAccountant(orders=DEFAULT_ORDERS)
    if spent.num_releases:
        ours.step(
            SampledGaussianEvent(sample_rate=1.0, noise_multiplier=wrapped.noise_multiplier, steps=spent.num_releases)
        )
    delta = float(spent.delta)
    eps = float(spent.epsilon)
    return {
        "guarantee": "dp" if randomness_secure and spent.num_releases == rounds else "simulation",
        "unit": CLIENT_UNIT,
        "mechanism": "DP-FedAvg (McMahan et al. 2018): server-side fixed clipping of each holder's whole "
        "update, equal weights, Gaussian noise sigma*C/K on the average "
        "(flwr DifferentialPrivacyServerSideFixedClipping, noise from AES-128-CTR)",
        "epsilon": eps if np.isfinite(eps) else None,
        "epsilon_textkg": ours.get_epsilon(delta=delta) if spent.num_releases else 0.0,
        "delta": delta,
        "noise_multiplier": float(wrapped.noise_multiplier),
        "clipping_norm": float(wrapped.clipping_norm),
        "num_clients": int(wrapped.num_sampled_clients),
        "releases": int(spent.num_releases),
        "accountant": "flwr RdpAccountant (dp-accounting RDP), Gaussian without amplification, "
        "add or remove one holder",
        "adjacency": "add or remove one data holder",
        "trust": "central: the server sees each holder's unclipped update and is trusted",
        "public_inputs": [
            "the number of holders K and their names",
            "the shared statements",
            "entity vocabulary, descriptions and relation texts",
            "C, sigma, rounds, delta",
            "validation and test statements",
        ]
        + [RECORD_LEDGER_INPUT] * record_level,
        "randomness": "AES-128-CTR keyed from the OS, never written to a released file",
    }
