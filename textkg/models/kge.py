"""The KG embedding model: representations + fusion + interaction.

A :class:`KGEModel` is a pure function of the table rows it touches (see
docs/architecture.md). Training asks it which rows a batch reads
(:meth:`KGEModel.lookup_plan`), gathers them, and scores from the gathered
rows (:meth:`KGEModel.score_rows`); the DP trainer does the same per example
under ``torch.func.vmap(grad(...))``, so per-example gradients of the tables
are gradients of the gathered copies. Evaluation uses the Scorer protocol
(:meth:`KGEModel.score_tails`, :meth:`KGEModel.score_heads`) on a cached
matrix of all entity vectors.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from textkg.errors import ConfigError
from textkg.models.fusion import Fusion
from textkg.models.interactions import Interaction, init_relation_table
from textkg.models.representations import StructuralRepresentation, TextRepresentation, check_seen_entities


class KGEModel(nn.Module):
    """Scores triples from fused structural + description entity vectors.

    Args:
        interaction: How triples of vectors are scored.
        fusion: How structural and description vectors combine (its
            ``uses_structure`` / ``uses_text`` decide which parts exist).
        num_entities: Size of the global entity id space.
        num_relations: Number of relations ``R``.
        dim: Entity width ``d``; relations have ``interaction.relation_dim(d)``.
        seen_entities: ``(n_seen,)`` ids of the training entities: the only
            ones with their own structural row.
        text: Description representation (required iff ``fusion.uses_text``).
        structural_dropout: Probability that a seen entity reads the unseen
            row in a training lookup (see :meth:`lookup_plan`).
        normalize_entities: L2-normalise each fused entity vector (BLP does
            for TransE).
        structural_buckets: ``0``, or ``K`` hashed structural rows shared by
            the seen entities (:class:`StructuralRepresentation`).

    Tables (:meth:`tables`): ``"entity"`` ``(n_seen + 1, d)`` when the fusion
    uses structure (the last row is the unseen row) and ``"relation"``
    ``(R, dr)``.
    """

    #: ``(n_seen,)`` sorted ids of the training entities (a buffer, registered in ``__init__``).
    seen_entities: torch.Tensor
    #: ``(R,)`` bool: relations whose ``(e, r, e)`` scores lowest (:meth:`set_irreflexive`; a buffer).
    irreflexive: torch.Tensor
    #: ``irreflexive.any()``, kept on the host by :meth:`set_irreflexive`.
    any_irreflexive: bool
    #: buffers of :meth:`set_unseen_neighbours`, and whether any entity is mapped (host-side)
    unseen_neighbour_rows: torch.Tensor
    unseen_neighbour_weights: torch.Tensor
    has_unseen_neighbours: torch.Tensor
    any_unseen_neighbours: bool

    def __init__(
        self,
        *,
        interaction: Interaction,
        fusion: Fusion,
        num_entities: int,
        num_relations: int,
        dim: int,
        seen_entities: torch.Tensor,
        text: TextRepresentation | None = None,
        structural_dropout: float = 0.0,
        normalize_entities: bool = False,
        structural_buckets: int = 0,
    ) -> None:
        super().__init__()
        interaction.check_dim(dim)
        if fusion.dim != dim:
            raise ConfigError(f"fusion was built for dim {fusion.dim}, model dim is {dim}", field="model.dim")
        if fusion.uses_text and text is None:
            raise ConfigError(f"fusion '{fusion.name}' needs text features; set model.encoder", field="model.encoder")
        if text is not None and text.num_entities != num_entities:
            raise ConfigError(
                f"text inputs cover {text.num_entities} entities, the graph has {num_entities}", field="text_features"
            )
        if isinstance(num_relations, bool) or not isinstance(num_relations, int) or num_relations < 1:
            raise ConfigError(f"num_relations must be a positive integer, got {num_relations!r}", field="num_relations")
        self.interaction = interaction
        self.fusion = fusion
        self.dim = dim
        self.num_entities = num_entities
        self.num_relations = num_relations
        self.normalize_entities = bool(normalize_entities)
        self.register_buffer("seen_entities", check_seen_entities(seen_entities, num_entities))
        self.structural = (
            StructuralRepresentation(
                num_entities, self.seen_entities, dim, dropout=structural_dropout, buckets=structural_buckets
            )
            if fusion.uses_structure
            else None
        )
        if not fusion.uses_structure and structural_buckets:
            raise ConfigError(
                f"structural_buckets has no effect with fusion '{fusion.name}'", field="model.structural_buckets"
            )
        if not fusion.uses_structure and structural_dropout:
            raise ConfigError(
                f"structural_dropout has no effect with fusion '{fusion.name}'", field="model.structural_dropout"
            )
        self.text = text if fusion.uses_text else None
        self.relation_embeddings = nn.Parameter(torch.empty(num_relations, interaction.relation_dim(dim)))
        init_relation_table(interaction, self.relation_embeddings)
        # relations whose (e, r, e) scores are the lowest possible (set_irreflexive); not saved
        # with the weights: the pipeline derives it again from the config and the training graph
        self.register_buffer("irreflexive", torch.zeros(num_relations, dtype=torch.bool), persistent=False)
        self.any_irreflexive = False
        # unseen entities' structural part from seen neighbours' rows (set_unseen_neighbours); not saved
        self.register_buffer("unseen_neighbour_rows", torch.zeros(0, 0, dtype=torch.long), persistent=False)
        self.register_buffer("unseen_neighbour_weights", torch.zeros(0, 0), persistent=False)
        self.register_buffer("has_unseen_neighbours", torch.zeros(0, dtype=torch.bool), persistent=False)
        self.any_unseen_neighbours = False
        self._cache: tuple[tuple, torch.Tensor] | None = None
        self._force_cache = False
        #: set by ``train.optimizer: lazy-adam``: the entity table's gradient from :meth:`gather` is row-sparse
        self.sparse_entity_rows = False

    # -- the gathered-row contract -------------------------------------------------------
    def tables(self) -> dict[str, nn.Parameter]:
        """Trainable row-indexed tables: ``"entity"`` (if structural) and ``"relation"``."""
        out = {}
        if self.structural is not None:
            out["entity"] = self.structural.weight
        out["relation"] = self.relation_embeddings
        return out

    def dense_parameters(self) -> dict[str, nn.Parameter]:
        """Every trainable parameter that is not a table, by its ``named_parameters`` name."""
        table_ids = {id(p) for p in self.tables().values()}
        return {name: p for name, p in self.named_parameters() if p.requires_grad and id(p) not in table_ids}

    def lookup_plan(self, triples: torch.Tensor, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """Rows of each table that each triple reads.

        Args:
            triples: ``(..., 3)`` long ``(head, relation, tail)`` ids.
            generator: Randomness for structural dropout, which applies only
                in training mode and only when a generator is given.

        Returns:
            ``{"entity": (..., 2) [head row, tail row], "relation": (..., 1)}``;
            no ``"entity"`` key for text-only models.
        """
        triples = self._here(triples)
        plan = {}
        if self.structural is not None:
            ends = torch.stack([triples[..., 0], triples[..., 2]], dim=-1)
            plan["entity"] = self.structural.rows(ends, generator=generator, training=self.training)
        plan["relation"] = triples[..., 1:2]
        return plan

    def gather(self, plan: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``{table: (..., m, d)}``: the rows named by ``plan`` (differentiable).

        ``index_select`` rather than ``table[idx]``: the same rows and, in backward, the same
        sums in the same order (``index_add_`` over ``idx`` in order, as ``index_put_`` with
        ``accumulate``), at a third of the time on CPU.
        """
        tables = self.tables()
        out = {}
        for name, idx in plan.items():
            if name == "entity" and self.sparse_entity_rows:  # lazy Adam (textkg.training.optim): row-sparse grad
                out[name] = F.embedding(idx, tables[name], sparse=True)
            else:
                out[name] = tables[name].index_select(0, idx.reshape(-1)).view(*idx.shape, tables[name].shape[-1])
        return out

    def score_rows(self, triples: torch.Tensor, rows: dict[str, torch.Tensor]) -> torch.Tensor:
        """Scores from gathered rows, dense parameters and public buffers only.

        ``torch.func.vmap``-compatible: no data-dependent control flow, no
        in-place writes to inputs. Row-wise: the score of ``triples[i]``
        depends only on ``triples[i]``, its own gathered rows, the dense
        parameters and the buffers (the DP step's batched per-example row
        gradients rely on this).

        Args:
            triples: ``(..., 3)`` long ids (text inputs are looked up by id).
            rows: ``{"entity": (..., 2, d), "relation": (..., 1, dr)}`` as
                gathered from :meth:`lookup_plan`.

        Returns:
            ``(...)`` float scores, higher = more plausible.
        """
        ends = torch.stack([triples[..., 0], triples[..., 2]], dim=-1)  # (..., 2)
        if self.structural is None and self.text is not None and ends.numel() > self.num_entities:
            # Text-only model, batch reading more rows than there are entities
            # (many negatives): fuse and normalise every entity once, then
            # gather. Same function, far fewer elementwise ops per step.
            ent = self._finish(self.fusion(None, self.text(torch.arange(self.num_entities, device=ends.device))))[ends]
        else:
            structural = rows["entity"] if self.structural is not None else None
            text = self.text(ends) if self.text is not None else None
            ent = self._finish(self.fusion(structural, text))  # (..., 2, d)
        # unbind / squeeze, not ent[..., 0, :]: the same values, but their backward stacks
        # the two gradients into one tensor instead of filling a zero tensor per selected slice
        head, tail = ent.unbind(dim=-2)
        return self.interaction.score(head, rows["relation"].squeeze(-2), tail)

    def forward(self, triples: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """``(...)`` scores of ``(..., 3)`` triples: ``score_rows(triples, gather(lookup_plan(triples)))``."""
        triples = self._here(triples)
        plan = self.lookup_plan(triples, generator)
        if self.structural is not None and self.text is not None and self.text.module is None:
            return self._score_distinct(self.text, triples, plan)
        return self.score_rows(triples, self.gather(plan))

    def _score_distinct(
        self, text: TextRepresentation, triples: torch.Tensor, plan: dict[str, torch.Tensor]
    ) -> torch.Tensor:
        """:meth:`score_rows` of a whole batch, with each distinct (table row, entity) end fused once.

        A batch of ``B`` statements with ``k`` negatives has ``2 B (k + 1)`` ends, but the uncorrupted
        end repeats ``k + 1`` times: the README's job (``B = 512``, ``k = 32``) has about 14k distinct
        ends among 33,792, and projecting, fusing and differentiating every copy was most of a step's
        time (issue 38). The fusion and the normalisation are per entity, so the scores are the same
        function; in backward, a row's gradients are summed before the projection instead of after.
        The number of distinct ends depends on the ids, so this serves whole-batch forwards only,
        never ``vmap`` (the DP step's per-example gradients call :meth:`score_rows`). Pooled text
        features only (a text module reads its own rows).

        Args:
            text: :attr:`text`, with pooled features.
            triples: ``(..., 3)`` long ids on the model's device.
            plan: :meth:`lookup_plan` of ``triples``.

        Returns:
            ``(...)`` float scores, as :meth:`score_rows`.
        """
        ends = torch.stack([triples[..., 0], triples[..., 2]], dim=-1)  # (..., 2)
        key = plan["entity"] * self.num_entities + ends  # (table row, entity): one id per distinct end
        distinct, inverse = torch.unique(key.reshape(-1), return_inverse=True)
        rows = self.gather({"entity": distinct // self.num_entities, "relation": plan["relation"]})
        fused = self._finish(self.fusion(rows["entity"], text(distinct % self.num_entities)))  # (u, d)
        head, tail = fused[inverse].view(*ends.shape, fused.shape[-1]).unbind(dim=-2)
        return self.interaction.score(head, rows["relation"].squeeze(-2), tail)

    def _here(self, ids: torch.Tensor) -> torch.Tensor:
        """``ids`` on the model's device (the same tensor when it is there already, as on the CPU).

        Id tensors (triples, batches, candidates) are built on the CPU from CPU generators, so that
        every device sees the same batches; the model moves them where its parameters are.
        """
        return ids.to(self.relation_embeddings.device)

    def _finish(self, ent: torch.Tensor) -> torch.Tensor:
        return F.normalize(ent, p=2.0, dim=-1) if self.normalize_entities else ent

    # -- seen / unseen ---------------------------------------------------------------------
    def is_seen(self, entities: torch.Tensor) -> torch.Tensor:
        """BoolTensor ``entities.shape``: True for entities seen in training."""
        return torch.isin(entities, self.seen_entities)

    # -- evaluation ------------------------------------------------------------------------
    def _entity_vectors(self, entities: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """``(n, d)`` vectors; unseen entities use the unseen row (dropout as in :meth:`lookup_plan`)."""
        structural = None
        if self.structural is not None:
            rows = self.structural.rows(entities, generator=generator, training=self.training)
            structural = self.structural.weight[rows]
            if self.any_unseen_neighbours and not self.training:  # training reads seen entities only
                structural = self._neighbour_structure(entities, structural)
        text = self.text(entities) if self.text is not None else None
        return self._finish(self.fusion(structural, text))

    def set_unseen_neighbours(self, entities: torch.Tensor, neighbours: torch.Tensor, weights: torch.Tensor) -> None:
        """Give each of ``entities`` (``(u,)``, not seen in training) the structural part
        ``Σ_j weights[i, j] · row(neighbours[i, j])``: the mean of seen entities' rows
        (``neighbours (u, k)``, seen ids; ``weights (u, k)``, rows summing to 1) instead of the
        unseen row, in every ranking by ids and in :meth:`entity_matrix`, in eval mode. Training
        (train mode, and triples scored by :meth:`forward`) keeps the unseen row, so a training step
        pays nothing for the map. ``u = 0`` turns it off."""
        if self.structural is None:
            raise ConfigError("the model has no structural table", field="model.unseen_structure")
        entities, neighbours = torch.as_tensor(entities).long(), torch.as_tensor(neighbours).long()
        if bool(self.is_seen(self._here(entities)).any()) or not bool(self.is_seen(self._here(neighbours)).all()):
            raise ConfigError(
                "the entities must be unseen in training and their neighbours seen", field="model.unseen_structure"
            )
        n, k = self.num_entities, neighbours.shape[1] if neighbours.ndim == 2 else 0
        dev = self.relation_embeddings.device
        rows = torch.zeros(n, k, dtype=torch.long)
        w = torch.zeros(n, k)
        mapped = torch.zeros(n, dtype=torch.bool)
        rows[entities] = self.structural.struct_index.cpu()[neighbours]
        w[entities] = torch.as_tensor(weights).float()
        mapped[entities] = True
        self.unseen_neighbour_rows, self.unseen_neighbour_weights = rows.to(dev), w.to(dev)
        self.has_unseen_neighbours = mapped.to(dev)
        self.any_unseen_neighbours = bool(len(entities)) and k > 0
        self.clear_cache()

    def _neighbour_structure(self, entities: torch.Tensor, structural: torch.Tensor) -> torch.Tensor:
        """``structural`` with the rows of mapped unseen entities replaced by their neighbours' mean."""
        at = self.has_unseen_neighbours[entities].nonzero().squeeze(1)
        if not len(at):
            return structural
        ids = entities[at]
        table = self.structural.weight  # type: ignore[union-attr]
        mix = (self.unseen_neighbour_weights[ids].unsqueeze(-1) * table[self.unseen_neighbour_rows[ids]]).sum(1)
        return structural.index_put((at,), mix)

    def neighbour_structure_of_new(self, neighbours: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """``(b, d)`` structural parts of new entities from their ``(b, k)`` seen neighbours and weights."""
        table = self.structural.weight  # type: ignore[union-attr]
        rows = self.structural.struct_index[self._here(neighbours)]  # type: ignore[union-attr]
        return (self._here(weights).float().unsqueeze(-1) * table[rows]).sum(1)

    def entity_matrix(
        self, entities: torch.Tensor | None = None, *, batch_size: int = 4096, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Entity vectors ``(n, d)`` of ``entities`` (all when ``None``).

        Computed in chunks of ``batch_size`` entities (text modules can be
        costly). Differentiable when grad mode is on. Structural dropout
        applies only in training mode with a ``generator`` (the 1-vs-all
        loss passes one, so each seen entity of the pool reads the unseen
        row with probability ``structural_dropout`` at each step); evaluation
        never passes one.
        """
        if entities is None:
            entities = torch.arange(self.num_entities, device=self.relation_embeddings.device)
        entities = self._here(entities)
        if batch_size < 1:
            raise ConfigError(f"batch_size must be positive, got {batch_size}", field="batch_size")
        parts = [
            self._entity_vectors(entities[i : i + batch_size], generator) for i in range(0, len(entities), batch_size)
        ]
        return torch.cat(parts) if parts else self.relation_embeddings.new_zeros(0, self.dim)

    def relation_matrix(self) -> torch.Tensor:
        """Relation vectors ``(R, dr)``."""
        return self.relation_embeddings

    def _state_key(self) -> tuple:
        # Every in-place update of a parameter or buffer (optimiser steps,
        # load_state_dict) bumps its version counter, so a changed model
        # never reuses a stale cache. (Writes through ``.data`` bypass the
        # counter: call clear_cache() after those.)
        return tuple((t._version, t.data_ptr()) for t in (*self.parameters(), *self.buffers()))

    def _all_entities_cached(self) -> torch.Tensor | None:
        """The cached ``(num_entities, d)`` matrix when caching applies, else ``None``."""
        if not (self._force_cache or (not self.training and not torch.is_grad_enabled())):
            return None
        key = (self.training, self._state_key())
        if self._cache is None or self._cache[0] != key:
            with torch.no_grad():
                self._cache = (key, self.entity_matrix())
        return self._cache[1]

    def clear_cache(self) -> None:
        """Drop the cached entity matrix."""
        self._cache = None

    @contextlib.contextmanager
    def eval_cache(self) -> Iterator[KGEModel]:
        """Within this block, scorers reuse one entity matrix (computed without grad).

        Outside it, the matrix is cached automatically in eval mode under
        ``torch.no_grad()`` and recomputed whenever a parameter changes.
        """
        previous = self._force_cache
        self._force_cache = True
        try:
            yield self
        finally:
            self._force_cache = previous
            self.clear_cache()

    def _vectors(self, entities: torch.Tensor) -> torch.Tensor:
        cached = self._all_entities_cached()
        return cached[entities] if cached is not None else self.entity_matrix(entities)

    def set_irreflexive(self, mask: torch.Tensor) -> None:
        """Make ``(e, r, e)`` score lowest for every relation ``r`` where ``mask[r]`` (``(R,)`` bool)."""
        mask = torch.as_tensor(mask, dtype=torch.bool)
        if tuple(mask.shape) != (self.num_relations,):
            raise ConfigError(
                f"expected one flag per relation ({self.num_relations}), got {tuple(mask.shape)}",
                field="model.irreflexive",
            )
        self.irreflexive.copy_(mask.to(self.irreflexive.device))
        self.any_irreflexive = bool(mask.any())  # read on the host: no device sync per scoring call

    def _mask_self(
        self, scores: torch.Tensor, queries: torch.Tensor, relations: torch.Tensor, candidates: torch.Tensor
    ) -> torch.Tensor:
        """``scores`` with ``(query, r, query)`` set to the lowest float where ``r`` is irreflexive.

        The lowest *finite* float, not ``-inf``: a mixture such as ``0 · score`` stays a number.
        """
        if not self.any_irreflexive:
            return scores
        own = (candidates.unsqueeze(0) == queries.unsqueeze(1)) & self.irreflexive[relations].unsqueeze(1)
        return scores.masked_fill(own, torch.finfo(scores.dtype).min)

    def score_tails(self, heads: torch.Tensor, relations: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(b, c)`` scores of ``(heads[i], relations[i], candidates[j])`` from ids ``(b,), (b,), (c,)``."""
        heads, relations, candidates = self._here(heads), self._here(relations), self._here(candidates)
        scores = self.interaction.score_tails(
            self._vectors(heads), self.relation_embeddings[relations], self._vectors(candidates)
        )
        return self._mask_self(scores, heads, relations, candidates)

    def score_heads(self, relations: torch.Tensor, tails: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(b, c)`` scores of ``(candidates[j], relations[i], tails[i])`` from ids ``(b,), (b,), (c,)``."""
        relations, tails, candidates = self._here(relations), self._here(tails), self._here(candidates)
        scores = self.interaction.score_heads(
            self.relation_embeddings[relations], self._vectors(tails), self._vectors(candidates)
        )
        return self._mask_self(scores, tails, relations, candidates)

    def train(self, mode: bool = True) -> KGEModel:
        self.clear_cache()
        return super().train(mode)

    # -- zero-shot: brand-new entities -------------------------------------------------------
    def embed_new_entities(
        self, *, structural_neighbours: tuple[torch.Tensor, torch.Tensor] | None = None, **text_inputs: torch.Tensor
    ) -> torch.Tensor:
        """Vectors ``(n, d)`` of entities outside the graph, from their text alone.

        Args:
            **text_inputs: The same kinds of public inputs the model was built
                with, for the ``n`` new entities: ``text_features=(n, D)``, or
                ``token_features=(n, L, d_tok), token_mask=(n, L)``, or
                ``input_ids=…, attention_mask=…``.

        The structural part (if any) is the learned unseen row, or with ``structural_neighbours``
        (``(ids (n, k), weights (n, k))`` of seen entities; ``model.unseen_structure: neighbours``)
        the weighted mean of their rows.

        Raises:
            ConfigError: The model has no text part, or the inputs are not the
                ones it was built with.
        """
        if self.text is None:
            raise ConfigError(
                "a structural-only model cannot embed new entities; use a text model", field="model.fusion"
            )
        if set(text_inputs) != set(self.text.keys):
            raise ConfigError(
                f"expected text inputs {', '.join(self.text.keys)}, got {', '.join(text_inputs) or 'none'}",
                field="text_features",
            )
        x = self.text.encode(*(self._here(text_inputs[k]) for k in self.text.keys))
        structural = None
        if self.structural is not None and structural_neighbours is not None:
            structural = self.neighbour_structure_of_new(*structural_neighbours)
        elif self.structural is not None:
            structural = self.structural.weight[self.structural.unseen_row].expand(x.shape[0], -1)
        return self._finish(self.fusion(structural, x))

    def fusion_weights(self) -> dict[str, float]:
        """Learned fusion weights for reports (empty for ``structural``/``text``)."""
        return self.fusion.weights()
