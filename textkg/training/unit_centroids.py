"""``privacy.private_updates: centroids``: patient-level DP by one Gaussian release of each candidate's mean patient.

For a unit-level run (``privacy.unit: entity``) that names one target relation and a candidate list
(``--unit-targets diagnosed_with --unit-candidates diseases.txt``): the public steps train the model on the
public graph alone, then every candidate that no public statement reaches (a *private-only* row: a disease
known only from the hospital's patients) gets, once, the row its patients' vectors point to:

* a unit ``u`` (a patient) is folded in from its non-target links by the public model, as ``textkg diagnose``
  folds a new patient in (ERAvg, :class:`textkg.models.known_links.LinkMethod` ``mix:0``), and
  ``q_u = fold_in(u) + r_target`` is where TransE puts the tail of its target link;
* the **centre** ``μ`` is the same for the public candidates (each folded in from the public statements it heads
  of the non-target relations, plus ``r_target``, averaged): a public point near the patients;
* the unit's vector ``v_u = clip(q_u − μ, C)`` (norm at most ``C``) goes, with a count coordinate, to the sum of
  each candidate its target links name: ``(√(1−s)·v_u, √s·C) / √k_u`` to each of its ``k_u ≤ m`` targets
  (``m`` = ``--max-statements-per-unit``; a unit with more has ``m`` drawn with the secret randomness). Adding
  or removing one unit moves the ``(candidates, D + 1)`` matrix of sums by at most ``C`` (L2);
* **the Gaussian mechanism**: ``N(0, σ²C²)`` on every entry of that matrix, the candidate list's shape (public),
  σ calibrated by the run's accountant to ``--target-epsilon`` at δ for one step of sampling rate 1 (every
  unit takes part: no subsampling is claimed). Dwork & Roth 2014, *The Algorithmic Foundations of Differential
  Privacy*, Thm A.1 and Def. 2.4 for the add/remove neighbour; the accountants of :mod:`textkg.privacy.claims`
  compose it (``textkg account`` recomputes ε from the block's ledger);
* post-processing (Dwork & Roth Prop. 2.1): a private-only candidate's mean is its noisy sum over its noisy
  count (at least 1), shrunk toward 0 by the positive-part James–Stein factor with the known noise variance
  (James & Stein 1961), and its row is set so that the model's vector of it is ``μ + mean``. Public
  candidates keep the rows the public steps gave them; their noisy sums are drawn and discarded.

Why a release and not DP-SGD (docs/diagnosis.md): with about 8 patients per withheld disease, DP-SGD's
noise over 18 steps left the rows near where they started (withheld MRR 0.036 at ε = 1 against 0.406
without DP); a disease's mean patient is the row that fits its patients best under squared distance, and
one release of the sums spends the whole budget on it.

``C`` is a public function of public inputs: the median distance of the public candidates' vectors from
``μ`` (:data:`CLIP_RULE`). Nothing released depends on the number of units or of their links: the shapes are
the candidate list's and the model's, σ and δ come from the declared ``N̄_u`` (``--private-size``); without it
the run is a ``simulation``.
"""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path

import torch

from textkg.data.known_links import NEW_IS_HEAD
from textkg.errors import ConfigError, PrivacyError
from textkg.models.known_links import LinkMethod, move_by_links
from textkg.privacy.claims import get_claim
from textkg.privacy.randomness import SecretRandomness
from textkg.training.checkpoint import atomic_write_json
from textkg.training.private_rows import private_only_masks

#: share ``s`` of the clipped contribution's squared norm given to the count coordinate
COUNT_SHARE = 0.2
#: how ``C`` is chosen (public inputs only)
CLIP_RULE = "the median distance of the public candidates' folded-in vectors from the centre"
#: the fold-in of a unit and of a public candidate: ERAvg, as textkg diagnose folds a new patient in
FOLD_IN = LinkMethod("mix", 0.0)
#: the public inputs of a centroid release (docs/privacy.md, "The patient as the unit")
CENTROID_PUBLIC_INPUTS = [
    "everything the public steps read: the public graph (every statement that mentions no unit), entity names "
    "and descriptions, relation names and texts, pretrained encoder weights, the vocabulary without the units, "
    "the statements of the validation and test units (model selection and reported metrics)",
    "the unit list rule (--unit-entities), the target relation (--unit-targets) and the candidate list "
    "(--unit-candidates; the list itself is not in the release)",
    "which candidates are private-only: those no public statement reaches",
    "the centre and the clipping bound C: the public model's fold-in of the public candidates from their own "
    "public statements",
    "the most target links of one unit, m (--max-statements-per-unit)",
    "the declared number of units N-bar_u (--private-size): the default delta = 1/(10 N-bar_u); the exact "
    "number of units and of their statements is private and nothing released depends on it",
    "the configuration, including --seed (model initialisation and public-step randomness)",
    "the code",
]
#: the run folder's record of the releases drawn so far (written before each draw; a resumed run composes)
CENTROID_RECORD = "centroid_release.json"
MECHANISM = "gaussian release of per-candidate sums of clipped unit vectors (one step, every unit)"


#: the most entries a record may hold (a run draws once; each resume that must redraw adds one)
MAX_RECORD_ENTRIES = 100
#: the accepted noise multipliers, as the ``--noise-multiplier`` flag bounds them
SIGMA_RANGE = (1e-9, 1e4)


def read_record(path: Path, sigma: float) -> dict:
    """What :data:`CENTROID_RECORD` holds: ``{"ledger": [(1.0, σ, 1), ...], "applied": sha256 | None, "clip",
    "rows_set"}`` (an empty ledger when the file is absent). Every entry must be this run's σ: the only value
    the run writes.

    Raises:
        ConfigError: the file is not a record this run wrote (naming the file and the field).
    """
    from textkg.errors import DataError
    from textkg.schema import load_json

    empty: dict = {"ledger": [], "applied": None, "clip": None, "rows_set": 0}
    if path.is_symlink() or (path.exists() and not path.is_file()):  # a dangling link too: never [] for it
        raise ConfigError("not a centroid release record (a link, or not a file)", file=path, field="ledger")
    if not path.exists():
        return empty
    if path.stat().st_size > 1 << 16:
        raise ConfigError("not a centroid release record (over 64 KiB)", file=path, field="ledger")
    try:
        doc = load_json(path.read_bytes(), file=path, max_bytes=1 << 16, max_depth=8)
    except (DataError, ConfigError) as exc:
        raise ConfigError(f"not a centroid release record: {exc}", file=path, field="ledger") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("ledger"), list):
        raise ConfigError("not a centroid release record (no ledger list)", file=path, field="ledger")
    entries = doc["ledger"]
    if len(entries) > MAX_RECORD_ENTRIES:
        raise ConfigError(f"more than {MAX_RECORD_ENTRIES} entries", file=path, field="ledger")
    out = []
    for i, e in enumerate(entries):
        if not (
            isinstance(e, list)
            and len(e) == 3
            and all(isinstance(x, float | int) and not isinstance(x, bool) and abs(x) < 1e300 for x in e)
            and e[0] == 1
            and e[2] == 1
            and abs(float(e[1]) - sigma) <= 1e-9 * sigma
        ):
            raise ConfigError(
                f"entry {i} is not [1.0, {sigma!r}, 1], this run's release", file=path, field=f"ledger[{i}]"
            )
        out.append((1.0, sigma, 1))
    applied = doc.get("applied")
    if applied is not None and not (isinstance(applied, str) and re.fullmatch(r"[0-9a-f]{64}", applied)):
        raise ConfigError("applied must be a SHA-256 hex digest or null", file=path, field="applied")
    clip = doc.get("clip")
    if clip is not None and not (isinstance(clip, float | int) and not isinstance(clip, bool) and 0 < clip < 1e300):
        raise ConfigError("clip must be a positive number", file=path, field="clip")
    rows = doc.get("rows_set", 0)
    if not (isinstance(rows, int) and not isinstance(rows, bool) and 0 <= rows < 1 << 40):
        raise ConfigError("rows_set must be a count", file=path, field="rows_set")
    return {"ledger": out, "applied": applied, "clip": None if clip is None else float(clip), "rows_set": rows}


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fold(model, links: torch.Tensor, count: int, matrix: torch.Tensor) -> torch.Tensor:
    base = matrix.new_zeros(count, matrix.shape[1])
    return move_by_links(model, base, links.reshape(-1, 4), matrix, method=FOLD_IN)


def unit_targets(links: torch.Tensor, position: torch.Tensor, target: int) -> torch.Tensor:
    """``(k, 4)``: the units' target links whose other end is a candidate, each ``(unit, candidate)`` once.

    Args:
        links: ``(m, 4)`` long :attr:`textkg.data.units.UnitLinks.links` (sorted by unit row).
        position: ``(N,)`` long, each entity's position in the candidate list, ``-1`` for the others.
        target: the target relation id (a link ``(unit, target, other)`` with the unit as head).

    A repeated link would add a unit's share to one candidate twice (sensitivity ``√2·C``); the data loaders
    refuse a repeated statement, and this keeps one all the same (on sorted links it keeps the order).
    """
    is_target = (links[:, 1] == target) & (links[:, 3] == NEW_IS_HEAD)
    picked = links[is_target & (position[links[:, 2].clamp(min=0)] >= 0)]
    return torch.unique(picked, dim=0) if len(picked) else picked


def bound_targets(targets: torch.Tensor, m: int | None, uniform: torch.Tensor | None) -> torch.Tensor:
    """At most ``m`` of each unit's target links: a unit with more keeps the ``m`` of smallest ``uniform``.

    Args:
        targets: ``(k, 4)`` long target links (:func:`unit_targets`).
        m: ``--max-statements-per-unit`` (``None``: no bound).
        uniform: ``(k,)`` uniforms in ``[0, 1)``, one per link (the secret ``bounding`` stream).

    Returns:
        ``(k', 4)`` the kept links, grouped by unit.
    """
    if m is None or not len(targets):
        return targets
    assert uniform is not None
    order = torch.argsort(targets[:, 0].double() * 2 + uniform)  # by unit, then at random within it
    ordered = targets[order]
    index = torch.arange(len(ordered))
    new_unit = torch.ones(len(ordered), dtype=torch.bool)
    new_unit[1:] = ordered[1:, 0] != ordered[:-1, 0]
    start = torch.cummax(torch.where(new_unit, index, torch.zeros_like(index)), dim=0).values
    return ordered[index - start < m]


def candidate_sums(
    q: torch.Tensor,
    *,
    centre: torch.Tensor,
    clip: float,
    targets: torch.Tensor,
    position: torch.Tensor,
    candidates: int,
) -> torch.Tensor:
    """``(candidates, D + 1)`` float64: the pre-noise sums of the units' clipped contributions (module docstring).

    Args:
        q: ``(U, D)`` each unit's ``fold_in(u) + r_target``.
        centre: ``(D,)`` ``μ``; clip: ``C``.
        targets: ``(k, 4)`` the bounded target links (:func:`bound_targets`), column 0 the unit row and
            column 2 the candidate entity, each ``(unit, candidate)`` at most once.
        position: ``(N,)`` each entity's position in the candidate list.
        candidates: ``K``, the length of the candidate list.

    Row ``j`` is ``Σ_u (√(1−s)·v_u, √s·C) / √k_u`` over the units whose kept targets name candidate ``j``,
    ``v_u = clip(q_u − μ, C)``: a unit's whole contribution has L2 norm at most ``C``.
    """
    q = q.double()
    per_unit = torch.bincount(targets[:, 0], minlength=len(q)).clamp(min=1).double()
    v = q - centre
    v = torch.where(torch.isfinite(v).all(dim=1, keepdim=True), v, torch.zeros((), dtype=v.dtype))  # its own row only
    v = v * torch.clamp(clip / v.norm(dim=1, keepdim=True).clamp(min=1e-300), max=1.0)
    scale = 1.0 / per_unit.sqrt()
    contribution = (
        torch.cat(
            [
                math.sqrt(1 - COUNT_SHARE) * v,
                torch.full((len(v), 1), math.sqrt(COUNT_SHARE) * clip, dtype=torch.float64),
            ],
            dim=1,
        )
        * scale[:, None]
    )
    sums = torch.zeros(candidates, v.shape[1] + 1, dtype=torch.float64)
    sums.index_add_(0, position[targets[:, 2]], contribution[targets[:, 0]])
    return sums


def noisy_means(noisy: torch.Tensor, *, clip: float, sigma: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(mean (P, D), count (P,), shrink (P,))`` of noisy sums ``(P, D + 1)`` (post-processing, module docstring).

    ``count`` is the noisy count coordinate over ``√s·C``, at least 1; ``mean`` is the noisy sum over
    ``√(1−s)·count`` times ``shrink``, the positive-part James–Stein factor (James & Stein 1961) with the known
    per-entry variance ``(σC / √(1−s))² / count²``. The candidate's vector is ``μ + mean``.
    """
    count = (noisy[:, -1] / (math.sqrt(COUNT_SHARE) * clip)).clamp(min=1.0)
    mean = noisy[:, :-1] / math.sqrt(1 - COUNT_SHARE) / count[:, None]
    variance = (sigma * clip / math.sqrt(1 - COUNT_SHARE)) ** 2 / count**2  # per entry of the mean
    dims = mean.shape[1]
    shrink = (1 - max(dims - 2, 0) * variance / mean.pow(2).sum(1).clamp(min=1e-300)).clamp(min=0.0, max=1.0)
    return shrink[:, None] * mean, count, shrink


def unusable_candidates(model, candidates: torch.Tensor, public_triples: torch.Tensor, target: int) -> str | None:
    """Why a candidate list cannot carry a centroid release, or ``None`` (public inputs only): no private-only
    candidate (nothing to release), or fewer than two public candidates heading a public statement of another
    relation (the centre and C come from them)."""
    candidates = candidates.to(torch.long).cpu()
    public_triples = public_triples.to(torch.long).cpu()
    mask = private_only_masks(model, public_triples).get("entity")
    rows = model.structural.struct_index.cpu()[candidates]
    private = mask.cpu()[rows] if mask is not None else torch.zeros(len(candidates), dtype=torch.bool)
    if not bool(private.any()):
        return "every candidate has public statements, so no row is private-only and there is nothing to release"
    heads = public_triples[public_triples[:, 1] != target, 0]
    if int(torch.isin(candidates[~private], heads).sum()) < 2:
        return (
            "it needs at least two public candidates with public statements to fold them in from (the centre and "
            "the clipping bound come from them)"
        )
    return None


def check_centroid_model(model) -> float:
    """``w``: the model's vector of an entity moves by ``w·δ`` when its structural row moves by ``δ``.

    Raises:
        ConfigError: the model is not TransE, normalises its entity vectors, hashes its rows, or fuses in a way
            that is not linear in the structural row with one weight.
    """
    if getattr(model.interaction, "name", None) != "transe":
        raise ConfigError(
            "--private-updates centroids needs the transe interaction (a unit's target is fold_in + r)",
            field="model.interaction",
        )
    if model.normalize_entities:
        raise ConfigError("--private-updates centroids needs model.normalize_entities off", field="model")
    if model.structural is None or model.structural.weight.shape[0] != model.num_entities + 1:
        raise ConfigError(
            "--private-updates centroids needs one structural row per entity (no structural_buckets)",
            field="model.structural_buckets",
        )
    name = model.fusion.name
    if name == "structural":
        return 1.0
    if name == "weighted":
        weight = float(model.fusion.w_structural.detach())
        if abs(weight) < 1e-6:
            raise ConfigError("the weighted fusion's structural weight is 0: a row cannot be set", field="model")
        return weight
    raise ConfigError(
        f"--private-updates centroids needs the weighted or structural fusion, not {name!r}", field="model.fusion"
    )


class CentroidRelease:
    """The release and its privacy block (module docstring).

    Args:
        cfg: the run's ``privacy`` config (``mode: confidential``, ``unit: entity``).
        units: the training units' links (:class:`textkg.data.units.UnitLinks`, ``targets`` set).
        candidates: ``(K,)`` long, the candidate entities (``--unit-candidates``).
        public_triples: ``(N, 3)`` the public steps' statements (they decide the private-only rows).
        declared_units: ``N̄_u`` (``--private-size``) or ``None`` (the exact count: ``simulation``).
        randomness: the secret source (``None``: a fresh key, or the public seed under ``--reproducible-noise``).
    """

    def __init__(self, cfg, *, units, candidates, public_triples, declared_units, randomness=None) -> None:
        if units.targets is None or len(units.targets) != 1:
            raise ConfigError(
                "--private-updates centroids needs exactly one --unit-targets relation", field="privacy.unit_targets"
            )
        self.cfg = cfg
        self.units = units
        self.target = int(units.targets[0])
        self.candidates = candidates.to(torch.long).cpu()
        self.public_triples = public_triples.to(torch.long).cpu()
        self.declared = declared_units
        self.randomness = randomness if randomness is not None else SecretRandomness.for_run(cfg.reproducible_noise)
        size = declared_units if declared_units is not None else units.num_units
        self.delta = cfg.delta if cfg.delta is not None else 1.0 / (10 * max(1, size))
        self.claim = get_claim(cfg.accountant, orders=None)
        if cfg.noise_multiplier is not None:
            self.sigma, self.calibrated = float(cfg.noise_multiplier), False
        else:
            if cfg.target_epsilon is None:
                raise ConfigError(
                    "--private-updates centroids needs --target-epsilon or --noise-multiplier",
                    field="privacy.target_epsilon",
                )
            try:
                self.sigma = self.claim.calibrate(
                    target_epsilon=cfg.target_epsilon, delta=self.delta, sample_rate=1.0, steps=1
                )
            except (ValueError, PrivacyError) as exc:
                raise ConfigError(
                    f"--private-updates centroids: no noise multiplier reaches this target ({exc})",
                    field="privacy.target_epsilon",
                ) from None
            self.calibrated = True
        if not SIGMA_RANGE[0] <= self.sigma <= SIGMA_RANGE[1]:
            raise ConfigError(
                f"the noise multiplier must be in [{SIGMA_RANGE[0]:g}, {SIGMA_RANGE[1]:g}], got {self.sigma:g}",
                field="privacy.noise_multiplier",
            )
        try:  # the claim of one release, before anything is trained or drawn
            self.claim.epsilon([(1.0, self.sigma, 1)], delta=self.delta)
        except (ValueError, PrivacyError, OverflowError) as exc:
            raise ConfigError(
                f"the {cfg.accountant} accountant cannot account one release at sigma {self.sigma:g} ({exc})",
                field="privacy.noise_multiplier",
            ) from None
        self.applied: str | None = None
        self.ledger: list[tuple[float, float, int]] = []
        self.clip: float | None = None
        self.rows_set = 0

    # -- the release ---------------------------------------------------------------------------
    def _centre(self, model, matrix: torch.Tensor, public: torch.Tensor, relation: torch.Tensor) -> tuple:
        """``μ`` and ``C`` from the public candidates (module docstring)."""
        cand = self.candidates[public]
        triples = self.public_triples
        keep = torch.isin(triples[:, 0], cand) & (triples[:, 1] != self.target)
        rows = {int(c): i for i, c in enumerate(cand.tolist())}
        picked = triples[keep]
        if not len(picked):
            raise ConfigError(
                "--private-updates centroids: no public candidate has a public statement to fold it in from "
                "(the centre and the clipping bound come from them)",
                field="privacy.unit_candidates",
            )
        links = torch.stack(
            [
                torch.tensor([rows[int(h)] for h in picked[:, 0].tolist()], dtype=torch.long),
                picked[:, 1],
                picked[:, 2],
                torch.full((len(picked),), NEW_IS_HEAD, dtype=torch.long),
            ],
            dim=1,
        )
        folded = _fold(model, links.to(matrix.device), len(cand), matrix).double().cpu() + relation
        reached = torch.zeros(len(cand), dtype=torch.bool)
        reached[links[:, 0]] = True
        folded = folded[reached]
        centre = folded.mean(0)
        clip = float((folded - centre).norm(dim=1).median())
        if not math.isfinite(clip) or clip <= 0:
            raise ConfigError(
                "--private-updates centroids: the public candidates give no spread to clip at", field="model"
            )
        return centre, clip

    @torch.no_grad()
    def apply(self, model, *, record: Path | None = None) -> None:
        """Draw the release and set the private-only candidates' rows (the model is changed in place).

        ``record``: the run folder's :data:`CENTROID_RECORD`. The ledger entry is written there before the noise
        is drawn, after the entries of any earlier draw of the same run (a run that crashed after drawing and
        was resumed draws again: both count).
        """
        weight = check_centroid_model(model)
        table = model.tables()["entity"]
        mask = private_only_masks(model, self.public_triples).get("entity")
        struct_rows = model.structural.struct_index.cpu()[self.candidates]
        private = mask.cpu()[struct_rows] if mask is not None else torch.zeros(len(self.candidates), dtype=torch.bool)
        if not bool((~private).any()):
            raise ConfigError(
                "--private-updates centroids: every candidate is private-only; the centre needs public ones",
                field="privacy.unit_candidates",
            )
        was_training = model.training
        model.eval()
        model.clear_cache()
        matrix = model.entity_matrix().detach()
        relation = model.relation_matrix().detach()[self.target].double().cpu()
        centre, clip = self._centre(model, matrix, ~private, relation)
        self.clip = clip
        # the units: fold-in from the non-target links, the target links to candidates
        links = self.units.links.to(torch.long).cpu()
        position = torch.full((int(matrix.shape[0]),), -1, dtype=torch.long)
        position[self.candidates] = torch.arange(len(self.candidates))
        is_target = (links[:, 1] == self.target) & (links[:, 3] == NEW_IS_HEAD)
        folded = _fold(model, links[~is_target].to(matrix.device), self.units.num_units, matrix).double().cpu()
        q = folded + relation
        targets = self._bound(unit_targets(links, position, self.target))
        sums = candidate_sums(
            q, centre=centre, clip=clip, targets=targets, position=position, candidates=len(self.candidates)
        )
        if record is not None:
            self.ledger = read_record(record, self.sigma)["ledger"]
        self.ledger.append((1.0, self.sigma, 1))
        if record is not None:  # spent before the noise is drawn
            atomic_write_json(record, self._record(applied=None))
        noise = self.randomness.normal({"sums": tuple(sums.shape)}, step=0, purpose="noise")["sums"]
        noisy = sums + self.sigma * clip * noise
        picked = torch.nonzero(private).flatten()
        mean, _, _ = noisy_means(noisy[picked], clip=clip, sigma=self.sigma)
        vectors = centre + mean
        ids = self.candidates[picked].to(matrix.device)
        now = matrix[ids].double().cpu()
        move = ((vectors - now) / weight).to(table.dtype).to(table.device)
        table[model.structural.struct_index[ids]] += move
        model.clear_cache()
        self.rows_set = len(picked)
        model.train(was_training)

    def _record(self, *, applied: str | None) -> dict:
        return {
            "ledger": [list(e) for e in self.ledger],
            "applied": applied,
            "clip": self.clip,
            "rows_set": self.rows_set,
        }

    def mark_applied(self, record: Path, weights: Path) -> None:
        """Record that ``weights`` (the saved ``best_model.pt``) holds this release: a resume then keeps it."""
        self.applied = file_sha256(weights)
        atomic_write_json(record, self._record(applied=self.applied))

    def restore(self, record: Path, weights: Path) -> bool:
        """On resume: whether ``weights`` already hold a recorded release (then its ledger is this one's and
        nothing is drawn again). Reads (and checks) the record either way.

        Raises:
            ConfigError: the record is not one this run wrote.
        """
        state = read_record(record, self.sigma)
        if state["applied"] is None or not weights.is_file() or file_sha256(weights) != state["applied"]:
            return False
        self.ledger, self.applied = state["ledger"], state["applied"]
        self.clip, self.rows_set = state["clip"], state["rows_set"]
        return bool(self.ledger)

    def check_candidates(self, model) -> None:
        """Refuse, before training, a candidate list the release cannot use (:func:`unusable_candidates`).

        Raises:
            ConfigError: naming ``privacy.unit_candidates``.
        """
        reason = unusable_candidates(model, self.candidates, self.public_triples, self.target)
        if reason is not None:
            raise ConfigError(f"--private-updates centroids: {reason}", field="privacy.unit_candidates")

    def _bound(self, targets: torch.Tensor) -> torch.Tensor:
        """At most ``m`` target links per unit, drawn with the secret randomness where a unit has more."""
        m = self.cfg.max_statements_per_unit
        if m is None or not len(targets):
            return targets
        return bound_targets(targets, m, self.randomness.uniform(len(targets), step=0, purpose="bounding"))

    # -- what it says about itself ----------------------------------------------------------------
    def label(self) -> tuple[str, list[str]]:
        reasons = []
        if not self.randomness.secure:
            reasons.append("noise reproducible from the public seed (--reproducible-noise)")
        if self.declared is None:
            from textkg.training.unit_privacy import UNDECLARED_UNITS

            reasons.append(UNDECLARED_UNITS)
        return ("dp" if not reasons else "simulation"), reasons

    def epsilon(self) -> float:
        return self.claim.epsilon(self.ledger, delta=self.delta) if self.ledger else 0.0

    def report(self) -> dict:
        """The ``privacy`` block of ``metrics.json`` (``textkg account`` recomputes ε from its ledger)."""
        from textkg.privacy.rdp import DEFAULT_ORDERS
        from textkg.training.unit_privacy import ADJACENCY, unit_fields

        label, reasons = self.label()
        eps = self.epsilon()
        rdp = get_claim("rdp").epsilon(self.ledger, delta=self.delta) if self.ledger else 0.0
        try:
            pld: float | None = get_claim("pld").epsilon(self.ledger, delta=self.delta) if self.ledger else 0.0
        except PrivacyError:  # a loss too wide for dp-accounting to discretise: no PLD figure beside it
            pld = None
        block = {
            "guarantee": label,
            "not_dp_because": reasons,
            "adjacency": ADJACENCY,
            "epsilon": eps if label == "dp" else None,
            "epsilon_if_secret": eps if label != "dp" else None,
            "epsilon_rdp": rdp,
            "epsilon_pld": pld,
            "delta": self.delta,
            "accountant": self.cfg.accountant,
            "orders": [float(a) for a in DEFAULT_ORDERS],
            "ledger": [{"sample_rate": q, "noise_multiplier": s, "steps": n} for q, s, n in self.ledger],
            "noise_multiplier": self.sigma,
            "noise_calibrated_to_target": self.calibrated,
            "target_epsilon": self.cfg.target_epsilon,
            "mechanism": MECHANISM,
            "clip_norm": self.clip,
            "clip_rule": CLIP_RULE,
            "count_share": COUNT_SHARE,
            "sample_rate": 1.0,
            "steps": len(self.ledger),
            "private_size": self.declared,
            "private_size_source": "--private-size (declared)"
            if self.declared is not None
            else "the exact count (simulation)",
            "randomness": self.randomness.describe(),
            "covered_parameters": ["the structural rows of the private-only candidates"],
            "rows_set": self.rows_set,
            "mode": self.cfg.mode,
            "private_updates": self.cfg.private_updates,
        }
        block.update(unit_fields(self.cfg, num_units=None if self.declared is not None else self.units.num_units))
        block["clipping"] = (
            "per unit: its whole contribution to the sums (every candidate its target links name, with the count "
            "coordinate) has L2 norm at most C"
        )
        block["sampling"] = (
            "none: every unit takes part once (sample rate 1); at most m target links per unit, chosen with "
            "the secret randomness"
        )
        block["public_inputs"] = CENTROID_PUBLIC_INPUTS
        return block
