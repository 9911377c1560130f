"""What a unit-level run (``privacy.unit: entity``) says about itself: its privacy block's unit fields.

The mechanism is user-level DP-SGD (McMahan et al. 2018, arXiv:1710.06963v3; Charles et al. 2024,
arXiv:2407.07737v1; :mod:`textkg.training.unit_step`): the accountants are the statement-level ones
(RDP and PLD of the Sampled Gaussian Mechanism, :mod:`textkg.privacy.claims`) at the unit sampling
rate q = B_u / N̄_u, and the adjacency is "add or remove one unit entity with all of its statements".
The ``dp`` label rules of DEVELOPERS.md hold with "statement" read as "unit": nothing released counts
the units or their statements (the exact count appears only in a ``simulation`` block that used it).
"""

from __future__ import annotations

from textkg.training.config import PrivacyConfig

UNIT = "entity"
#: the rule that names each private statement's owner, as the privacy block states it
UNIT_RULE = (
    "every training statement that mentions an entity of the --unit-entities list belongs to that entity "
    "(a statement that mentions two is refused); the unit entities are not entities of the model"
)
ADJACENCY = "add or remove one unit entity (e.g. a patient) with all of its statements"

#: the public inputs of a unit-level run (docs/privacy.md, "The patient as the unit")
UNIT_PUBLIC_INPUTS = [
    "entity descriptions and names of the entities of the model (the unit entities are taken out of the "
    "graph: no row, no text, no name)",
    "relation names and texts",
    "pretrained encoder weights (and any encoder adapted or pre-trained on descriptions)",
    "the entity vocabulary without the unit entities, and its train/valid/test partition",
    "every statement that mentions no unit entity (the public graph), and the statements of the validation "
    "and test units (held-out patients: model selection and reported metrics)",
    "the unit list rule (--unit-entities: which entities are units; the list itself is not in the release)",
    "the most statements of one unit a step uses, m (--max-statements-per-unit)",
    "the declared number of units N̄_u (--private-size) or the unit sampling rate q (--sample-rate): "
    "q = B_u/N̄_u, round(N̄_u/B_u) steps per epoch, the default delta = 1/(10 N̄_u) and the sum's normaliser "
    "B_u; the exact number of units and of their statements is private and nothing released depends on it",
    "the configuration, including --seed (model initialisation and public-step randomness)",
    "the code",
]

#: why a unit-level run without a declared number of units is not ``dp``
UNDECLARED_UNITS = (
    "q = B_u/N_u, the steps per epoch and the default delta use the exact number of units N_u, which is "
    "private under add/remove adjacency of a unit (the release would reveal it); declare a public number of "
    "units with --private-size or a unit sampling rate with --sample-rate"
)


def objective_fields(cfg: PrivacyConfig) -> dict:
    """``unit_targets``, ``unit_candidates`` and the ``public_inputs`` naming them: the unit-level loss's target
    relations (``[]``: every relation) and candidate list shape what the release depends on, so the privacy
    block names them as public inputs (a rule, like the unit list: the candidate file itself is not released)."""
    inputs = list(UNIT_PUBLIC_INPUTS)
    targets = ", ".join(cfg.unit_targets) if cfg.unit_targets else "every relation"
    inputs.insert(-2, f"the relations a unit's statements are trained to predict (--unit-targets: {targets})")
    if cfg.unit_candidates is not None:
        inputs.insert(
            -2,
            "the candidate list a unit target's other end is ranked against (--unit-candidates: entities of the "
            "model; the list itself is not in the release)",
        )
    return {
        "unit_targets": list(cfg.unit_targets),
        "unit_candidates": "listed" if cfg.unit_candidates is not None else "the public vocabulary",
        "public_inputs": inputs,
    }


def unit_fields(cfg: PrivacyConfig, *, num_units: int | None) -> dict:
    """The unit fields of a ``confidential`` unit-level run's privacy block (they replace the statement ones).

    ``num_units``: the exact count, given only where the run is labelled simulation for using it.
    """
    return {
        "unit": UNIT,
        "adjacency": ADJACENCY,
        "unit_entities_rule": UNIT_RULE,
        "max_statements_per_unit": cfg.max_statements_per_unit,
        "clipping": "per unit: the whole gradient of the sum of its sampled statements' losses"
        if cfg.private_updates == "all"
        else "per unit: the gradient of the sum of its sampled statements' losses with respect to every row the "
        "private steps update (--private-updates private-rows: the rows no public statement reads); the other "
        "parameters are not changed by a private step",
        "sampling": "poisson over units; at most m statements per unit, chosen with the secret randomness",
        "num_private_triples": None,
        "num_private_units": num_units,
        **objective_fields(cfg),
    }


def public_only_unit_fields(cfg: PrivacyConfig) -> dict:
    """The unit fields of a ``public-only`` unit-level run: the units were dropped and never read (ε = 0)."""
    return {
        "unit": UNIT,
        "adjacency": ADJACENCY,
        "unit_entities_rule": UNIT_RULE,
        "max_statements_per_unit": cfg.max_statements_per_unit,
        **objective_fields(cfg),
        "note": "the unit entities' statements were left out and never read",
    }


def model_card_line(privacy: dict) -> str:
    """The model card's one line on the unit (``""`` for a statement-level block)."""
    if privacy.get("unit") != UNIT:
        return ""
    m = privacy.get("max_statements_per_unit")
    if privacy.get("private_updates") == "centroids":
        return (
            "The unit is one entity of the unit list (a patient) with ALL of their statements: ε and δ hold per "
            f"patient; each patient's whole contribution to the release (at most {m} target links) is clipped; "
            "patients are not rows of this model (a new patient is folded in from their own statements)."
        )
    return (
        "The unit is one entity of the unit list (a patient) with ALL of their statements: ε and δ hold per "
        f"patient, at most {m} of a patient's statements enter one step and the whole gradient of the patient is "
        "clipped; patients are not rows of this model (a new patient is folded in from their own statements)."
    )
