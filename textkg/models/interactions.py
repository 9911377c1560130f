"""Interactions: how a (head, relation, tail) triple of vectors is scored.

An interaction is stateless: it holds only its hyper-parameters (e.g. the
norm of TransE) and maps vectors to scores, higher = more plausible. Each
interaction offers

* ``score(h, r, t) -> (...)``: ``h, t`` are ``(..., d)`` and ``r`` is
  ``(..., relation_dim(d))``; leading dimensions broadcast. Used in
  training and must stay ``torch.func.vmap``-compatible (no data-dependent
  Python control flow, no in-place writes, no ``.item()``).
* ``score_tails(h (b, d), r (b, dr), candidates (c, d)) -> (b, c)`` and
  ``score_heads(r (b, dr), t (b, d), candidates (c, d)) -> (b, c)``:
  vectorised scoring of every candidate for evaluation.
* ``relation_dim(entity_dim)``: width of a relation vector.
* ``tail_from(h, r)`` / ``head_from(r, t) -> (..., d)``: the vector a query points at (``h + r``,
  ``t − r`` for TransE), with which a new entity's known links estimate its vector
  (:mod:`textkg.models.known_links`).

Registry (house style: one registry per family)::

    get_interaction("transe", p=2)   # name + kwargs
    get_interaction(TransE, p=1)     # class + kwargs
    get_interaction(TransE(p=1))     # instance, returned as is
    list_interactions()              # ['complex', 'distmult', 'rotate', 'transe', 'transe-typed']
"""

from __future__ import annotations

import math
from typing import Any

import torch

from textkg.errors import ConfigError
from textkg.registry import Registry

#: Elements of the ``(b, chunk, d)`` difference tensor materialised at once by
#: the broadcast-based candidate scorers (RotatE).
_CHUNK_ELEMENTS = 1 << 22


class Interaction:
    """Base class: scores triples of vectors. Subclasses set ``name``.

    Args:
        **kwargs: None for the base class; subclasses document theirs.
    """

    name: str = ""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}

    def relation_dim(self, entity_dim: int) -> int:
        """Width of a relation vector for entity vectors of width ``entity_dim``."""
        self.check_dim(entity_dim)
        return entity_dim

    def check_dim(self, entity_dim: int) -> None:
        """Raise :class:`ConfigError` if ``entity_dim`` is not usable."""
        if isinstance(entity_dim, bool) or not isinstance(entity_dim, int) or entity_dim < 1:
            raise ConfigError(f"dim must be a positive integer, got {entity_dim!r}", field="model.dim")

    def score(self, h: torch.Tensor, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Scores ``(...)`` of ``h (..., d)``, ``r (..., dr)``, ``t (..., d)`` (broadcasting)."""
        raise NotImplementedError

    def score_tails(self, h: torch.Tensor, r: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(b, c)`` scores of ``(h[i], r[i], candidates[j])``.

        The default broadcasts :meth:`score`; subclasses override it with a
        faster equivalent.
        """
        return self.score(h[:, None, :], r[:, None, :], candidates[None, :, :])

    def score_heads(self, r: torch.Tensor, t: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(b, c)`` scores of ``(candidates[j], r[i], t[i])``."""
        return self.score(candidates[None, :, :], r[:, None, :], t[:, None, :])

    def tail_from(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """``(..., d)``: the tail vector that ``(h, r, ·)`` points at, from ``h (..., d)``, ``r (..., dr)``.

        For a distance interaction, the tail that scores best (``h + r`` for TransE); for a
        bilinear one, the query vector whose dot product with a tail is its score (``h ∘ r`` for
        DistMult). A new entity's vector estimated from a known link ``(other, r, new)`` is this
        (the relation-aware neighbour estimate of ERAvg, Albooyeh et al. 2020, "Out-of-Sample
        Representation Learning for Knowledge Graphs", Findings of EMNLP, arXiv:2004.13230v2).
        """
        raise NotImplementedError(f"{type(self).__name__} has no tail estimate")

    def head_from(self, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """``(..., d)``: the head vector that ``(·, r, t)`` points at (``t − r`` for TransE);
        see :meth:`tail_from`."""
        raise NotImplementedError(f"{type(self).__name__} has no head estimate")

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return f"{type(self).__name__}({args})"


def _check_even(name: str, entity_dim: int) -> None:
    if entity_dim % 2:
        raise ConfigError(
            f"{name} splits entity vectors into real and imaginary halves; dim must be even, got {entity_dim}",
            field="model.dim",
        )


def _split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Real and imaginary halves of ``(..., d)`` → two ``(..., d/2)``."""
    half = x.shape[-1] // 2
    return x[..., :half], x[..., half:]


class TransE(Interaction):
    """Translation: ``score = −‖h + r − t‖_p``.

    Bordes et al., "Translating Embeddings for Modeling Multi-relational
    Data", NeurIPS 2013.

    Args:
        p: The norm, 1 (L1, the default of the seed paper and BLP) or 2.

    Shapes: ``h, r, t`` are ``(..., d)``; ``relation_dim(d) = d``.
    """

    name = "transe"

    def __init__(self, p: int = 1) -> None:
        super().__init__()
        if p not in (1, 2) or isinstance(p, bool):
            raise ConfigError(f"TransE norm p must be 1 or 2, got {p!r}", field="model.interaction_kwargs.p")
        self.p = int(p)
        self.config = {"p": self.p}

    def score(self, h, r, t):
        if self.p == 1:
            # the L1 norm as abs().sum(): ~3x faster than vector_norm(ord=1) on CPU (the same sum,
            # in another order: scores agree to float rounding); abs's gradient at 0 is 0, no NaN
            return -(h + r - t).abs().sum(dim=-1)
        # vector_norm's gradient at 0 is 0 for p = 2 (no NaN), also under vmap.
        return -torch.linalg.vector_norm(h + r - t, ord=self.p, dim=-1)

    def score_tails(self, h, r, candidates):
        return -torch.cdist(h + r, candidates, p=self.p)

    def score_heads(self, r, t, candidates):
        # ‖c + r − t‖ = ‖c − (t − r)‖
        return -torch.cdist(t - r, candidates, p=self.p)

    def tail_from(self, h, r):
        return h + r

    def head_from(self, r, t):
        return t - r


class TypedTransE(TransE):
    """TransE plus relation-specific soft type terms: ``−‖h + r − t‖_p + ⟨a_r, h⟩ + ⟨b_r, t⟩``.

    Each relation stores ``[r; a_r; b_r]`` (width ``3d``): the translation
    and one "type" direction for its heads and one for its tails. The two
    linear terms score how well an entity fits the relation's domain and
    range, independently of the other end: the soft, learned type
    compatibility of Jain et al., "Type-Sensitive Knowledge Base Inference
    Without Explicit Type Supervision", ACL 2018 (arXiv:1805.00158v1), there
    multiplied in as sigmoids, here added as logits (the model is trained
    with a softmax, where adding logits multiplies probabilities).
    On FB15k-237 most relations constrain the type of the answer (a film,
    a country, a gender), which TransE alone must encode in the translation.

    Args:
        p: The TransE norm, 1 or 2.

    Shapes: ``h, t`` are ``(..., d)``; ``relation_dim(d) = 3d``.
    """

    name = "transe-typed"

    def relation_dim(self, entity_dim: int) -> int:
        self.check_dim(entity_dim)
        return 3 * entity_dim

    @staticmethod
    def _parts(r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        d = r.shape[-1] // 3
        return r[..., :d], r[..., d : 2 * d], r[..., 2 * d :]

    def score(self, h, r, t):
        r, a, b = self._parts(r)
        return super().score(h, r, t) + (a * h).sum(-1) + (b * t).sum(-1)

    def score_tails(self, h, r, candidates):
        r, a, b = self._parts(r)
        return super().score_tails(h, r, candidates) + (a * h).sum(-1, keepdim=True) + b @ candidates.transpose(0, 1)

    def score_heads(self, r, t, candidates):
        r, a, b = self._parts(r)
        return super().score_heads(r, t, candidates) + a @ candidates.transpose(0, 1) + (b * t).sum(-1, keepdim=True)

    def tail_from(self, h, r):
        """The translation's answer ``h + r`` (the type terms do not move it)."""
        return h + self._parts(r)[0]

    def head_from(self, r, t):
        return t - self._parts(r)[0]


class DistMult(Interaction):
    """Bilinear diagonal: ``score = ⟨h, r, t⟩ = Σ_k h_k r_k t_k``.

    Yang et al., "Embedding Entities and Relations for Learning and Inference
    in Knowledge Bases", ICLR 2015, arXiv:1412.6575v4.

    Shapes: ``h, r, t`` are ``(..., d)``; ``relation_dim(d) = d``.
    """

    name = "distmult"

    def score(self, h, r, t):
        return (h * r * t).sum(-1)

    def score_tails(self, h, r, candidates):
        return (h * r) @ candidates.T

    def score_heads(self, r, t, candidates):
        return (r * t) @ candidates.T

    def tail_from(self, h, r):
        return h * r

    def head_from(self, r, t):
        return r * t


class ComplEx(Interaction):
    """Complex bilinear: ``score = Re⟨h, r, conj(t)⟩``.

    Trouillon et al., "Complex Embeddings for Simple Link Prediction", ICML
    2016, arXiv:1606.06357v1, Eq. (11). Vectors are real tensors of even width
    ``d``: the first ``d/2`` entries are real parts, the last ``d/2`` imaginary.

    Shapes: ``h, r, t`` are ``(..., d)``; ``relation_dim(d) = d``; ``d`` even.
    """

    name = "complex"

    def check_dim(self, entity_dim):
        super().check_dim(entity_dim)
        _check_even("ComplEx", entity_dim)

    def score(self, h, r, t):
        hr, hi = _split(h)
        rr, ri = _split(r)
        tr, ti = _split(t)
        return (hr * rr * tr + hi * rr * ti + hr * ri * ti - hi * ri * tr).sum(-1)

    def score_tails(self, h, r, candidates):
        hr, hi = _split(h)
        rr, ri = _split(r)
        query = torch.cat([hr * rr - hi * ri, hr * ri + hi * rr], dim=-1)  # h ∘ r
        return query @ candidates.T

    def score_heads(self, r, t, candidates):
        rr, ri = _split(r)
        tr, ti = _split(t)
        query = torch.cat([rr * tr + ri * ti, rr * ti - ri * tr], dim=-1)  # r ∘ conj(t), conjugated
        return query @ candidates.T

    def tail_from(self, h, r):
        hr, hi = _split(h)
        rr, ri = _split(r)
        return torch.cat([hr * rr - hi * ri, hr * ri + hi * rr], dim=-1)  # h ∘ r

    def head_from(self, r, t):
        rr, ri = _split(r)
        tr, ti = _split(t)
        return torch.cat([rr * tr + ri * ti, rr * ti - ri * tr], dim=-1)  # conj(r ∘ conj(t))


class RotatE(Interaction):
    """Rotation in the complex plane: ``score = −Σ_k |h_k r_k − t_k|``, ``|r_k| = 1``.

    Sun et al., "RotatE: Knowledge Graph Embedding by Relational Rotation in
    Complex Space", ICLR 2019, arXiv:1902.10197v1, Eq. (2) (the distance
    ``‖h ∘ r − t‖`` is the L1 norm of the complex vector: the sum of moduli).
    Entities are real tensors of even width ``d`` (real halves, then imaginary
    halves); a relation is ``d/2`` phases ``θ`` with ``r = cos θ + i sin θ``.

    Shapes: ``h, t`` are ``(..., d)``; ``r`` is ``(..., d/2)``; ``d`` even.
    """

    name = "rotate"

    def check_dim(self, entity_dim):
        super().check_dim(entity_dim)
        _check_even("RotatE", entity_dim)

    def relation_dim(self, entity_dim):
        self.check_dim(entity_dim)
        return entity_dim // 2

    @staticmethod
    def _rotate(x: torch.Tensor, phase: torch.Tensor, sign: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        """``x ∘ e^{i·sign·θ}`` as real and imaginary parts ``(..., d/2)`` each."""
        xr, xi = _split(x)
        c, s = torch.cos(phase), sign * torch.sin(phase)
        return xr * c - xi * s, xr * s + xi * c

    @staticmethod
    def _modulus_sum(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
        # Sum of complex moduli; vector_norm has gradient 0 (not NaN) at a zero difference.
        return torch.linalg.vector_norm(torch.stack([re, im], dim=-1), ord=2, dim=-1).sum(-1)

    def score(self, h, r, t):
        qr, qi = self._rotate(h, r)
        tr, ti = _split(t)
        return -self._modulus_sum(qr - tr, qi - ti)

    def _distance_to_candidates(self, qr, qi, candidates):
        """``(b, c)`` of ``Σ_k |q_k − cand_k|`` in chunks of candidates."""
        cr, ci = _split(candidates)
        b, half = qr.shape
        chunk = max(1, _CHUNK_ELEMENTS // max(1, b * half))
        parts = []
        for start in range(0, candidates.shape[0], chunk):
            dr = qr[:, None, :] - cr[None, start : start + chunk, :]
            di = qi[:, None, :] - ci[None, start : start + chunk, :]
            parts.append(torch.sqrt(dr * dr + di * di).sum(-1))
        if not parts:
            return qr.new_zeros(b, 0)
        return torch.cat(parts, dim=1)

    def score_tails(self, h, r, candidates):
        qr, qi = self._rotate(h, r)
        return -self._distance_to_candidates(qr, qi, candidates)

    def score_heads(self, r, t, candidates):
        # |h ∘ r − t| = |h − t ∘ conj(r)| because |r_k| = 1.
        qr, qi = self._rotate(t, r, sign=-1.0)
        return -self._distance_to_candidates(qr, qi, candidates)

    def tail_from(self, h, r):
        return torch.cat(self._rotate(h, r), dim=-1)  # h ∘ r

    def head_from(self, r, t):
        return torch.cat(self._rotate(t, r, sign=-1.0), dim=-1)  # t ∘ conj(r)


_REGISTRY: Registry[type[Interaction]] = Registry("interaction", field="model.interaction")


def register_interaction(cls: type[Interaction], *, replace: bool = False) -> type[Interaction]:
    """Make an :class:`Interaction` subclass available by its ``name`` (usable as a decorator).

    A taken name raises (:class:`textkg.registry.DuplicateNameError`) unless ``replace=True``.
    """
    if not (isinstance(cls, type) and issubclass(cls, Interaction)) or not cls.name:
        raise ConfigError(f"expected an Interaction subclass with a name, got {cls!r}", field="interaction")
    return _REGISTRY.register(cls.name, cls, replace=replace)


for _cls in (TransE, TypedTransE, DistMult, ComplEx, RotatE):
    register_interaction(_cls)


def list_interactions() -> list[str]:
    """Names of the registered interactions, sorted."""
    return _REGISTRY.names()


def interaction_class(name: str) -> type[Interaction]:
    """The class registered as ``name``; unknown names list the registry."""
    return _REGISTRY.get(name)


def get_interaction(name_or_class_or_instance: str | type[Interaction] | Interaction, **kwargs: Any) -> Interaction:
    """Build an interaction.

    Args:
        name_or_class_or_instance: A registry name (see :func:`list_interactions`),
            an :class:`Interaction` subclass, or an instance (returned as is;
            then ``kwargs`` must be empty).
        **kwargs: Constructor arguments, e.g. ``p=2`` for TransE.

    Raises:
        ConfigError: Unknown name, bad kwargs, or kwargs given with an instance.
    """
    interaction: Interaction = _REGISTRY.make(
        name_or_class_or_instance, base=Interaction, kwargs_field="model.interaction_kwargs", **kwargs
    )
    return interaction


def init_relation_table(interaction: Interaction, table: torch.Tensor) -> None:
    """Initialise a ``(R, dr)`` relation table in place for ``interaction``.

    RotatE stores phases, drawn uniformly from ``[−π, π)``; the others use
    Xavier-uniform rows.
    """
    with torch.no_grad():
        if isinstance(interaction, RotatE):
            table.uniform_(-math.pi, math.pi)
        else:
            torch.nn.init.xavier_uniform_(table)
