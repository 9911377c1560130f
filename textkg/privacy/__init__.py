"""Differential privacy on tensors and events (knows nothing about graphs).

Accounting (RDP of the Sampled Gaussian Mechanism, CKS-2020 conversion),
calibration, events, group privacy, Poisson sampling, per-example clipping of dense and
row-sparse gradients, Gaussian noise and a DP-SGD step. See docs/privacy.md.
"""

from textkg.privacy.accountant import RDPAccountant
from textkg.privacy.calibration import calibrate_noise_multiplier
from textkg.privacy.claims import Claim, get_claim, register_claim, registered_claims
from textkg.privacy.clipping import aggregate_clipped, clip_coefficients, coalesce_rows, per_example_norms
from textkg.privacy.conversion import PrivacyWarning, rdp_to_epsilon
from textkg.privacy.dp_sgd import DPSGDStep, as_row_grads, per_example_grads, per_example_input_grads
from textkg.privacy.events import SampledGaussianEvent
from textkg.privacy.group import group_guarantee, record_budget_for_group
from textkg.privacy.noise import add_noise, gaussian_noise
from textkg.privacy.rdp import DEFAULT_ORDERS, compute_rdp, parse_orders
from textkg.privacy.sampling import PoissonBatches, poisson_sample

__all__ = [
    "DEFAULT_ORDERS",
    "Claim",
    "DPSGDStep",
    "PoissonBatches",
    "PrivacyWarning",
    "RDPAccountant",
    "SampledGaussianEvent",
    "add_noise",
    "aggregate_clipped",
    "as_row_grads",
    "calibrate_noise_multiplier",
    "clip_coefficients",
    "coalesce_rows",
    "compute_rdp",
    "gaussian_noise",
    "get_claim",
    "group_guarantee",
    "parse_orders",
    "per_example_grads",
    "per_example_input_grads",
    "per_example_norms",
    "poisson_sample",
    "rdp_to_epsilon",
    "record_budget_for_group",
    "register_claim",
    "registered_claims",
]
