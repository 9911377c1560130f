"""One data holder of a cross-graph federation: its own graph, model, trainer and embedding space."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import torch

from textkg.errors import ConfigError
from textkg.federated.cross_graph.config import HolderSpec

#: The structural entity table whose aligned rows the exchange moves.
ENTITY_TABLE = "entity"


def _unique_entities(*triples: torch.Tensor) -> torch.Tensor:
    both = [t[:, [0, 2]].reshape(-1) for t in triples if len(t)]
    return torch.unique(torch.cat(both)) if both else torch.zeros(0, dtype=torch.long)


class Party:
    """A holder's graph (its statements only), its model and trainer; nothing here leaves the party.

    With ``spec.source`` (``hpo`` only) the party's graph is that annotation source's statements plus
    the shared ontology (:func:`textkg.federated.partition.make_partition`, ``source``); its valid and
    test statements follow the same rule. Its candidates and filter are its own graph's entities and
    statements, as if no other party existed.

    With ``spec.privacy`` (a statement-level exchange) the party trains with DP-SGD on its own
    training statements (:class:`~textkg.training.private_training.PrivateTraining`), and nothing it
    may release is a function of them except through that mechanism (docs/privacy.md, "Threat
    model"): its entity set (PSI side, negative pool, candidates) is its public vocabulary (every
    entity of the public split, of its own source or shared), and the validation that decides keep
    or roll back filters with its validation and test statements only (public inputs). Its test
    metrics keep the standard filter, which reads its training statements: they are the owner's.

    Args:
        spec: The holder's settings.
        out_dir: The party's own folder.
        planned_epochs: Under privacy: every DP-SGD epoch the party will take (pre-training and
            fine-tuning); σ is calibrated so that they meet ``privacy.target_epsilon``.
    """

    def __init__(self, spec: HolderSpec, out_dir: Path, *, planned_epochs: int | None = None) -> None:
        from textkg.evaluation.filtering import FilterIndex
        from textkg.pipeline.job import prepare
        from textkg.training.losses import make_loss
        from textkg.training.trainer import Trainer

        self.spec = spec
        self.out_dir = Path(out_dir)
        self.cfg = spec.run_config()
        if self.cfg.privacy.unit == "entity":  # a party's private step trains statements
            raise ConfigError("--privacy-unit entity is not supported by a cross-graph party", field="privacy.unit")
        if self.cfg.model.irreflexive == "auto":  # "auto" would read statements of every source
            self.cfg = dataclasses.replace(self.cfg, model=dataclasses.replace(self.cfg.model, irreflexive="none"))
        self.prep = prepare(self.cfg, device=torch.device("cpu"))
        split = self.prep.split
        self.train, self.valid, self.test = self._own(split.train), self._own(split.valid), self._own(split.test)
        if not len(self.train):
            raise ConfigError(f"holder {spec.name!r} has no training statement", field=f"holders.{spec.name}")
        kg = self.prep.kg
        own_triples = torch.cat([self.train, self.valid, self.test])
        self.filter_index = FilterIndex.from_triples(own_triples, kg.num_entities, kg.num_relations)
        self.private_mask = None
        if spec.private:
            self.trained_entities = self._public_vocabulary()
            self.candidates = torch.unique(torch.cat([self.trained_entities, _unique_entities(self.valid, self.test)]))
            self.private_mask = self._private_mask()
            public = torch.cat([self.valid, self.test, self.train[~self.private_mask]])
            self.decision_filter = FilterIndex.from_triples(public, kg.num_entities, kg.num_relations)
        else:
            self.trained_entities = _unique_entities(self.train)
            self.candidates = _unique_entities(self.train, self.valid, self.test)
            self.decision_filter = self.filter_index
        tables = self.prep.model.tables()
        if ENTITY_TABLE not in tables:
            raise ConfigError(
                f"cross-graph moves rows of a structural entity table; model {spec.model!r} has {sorted(tables)}",
                field=f"holders.{spec.name}.model",
            )
        self.model = self.prep.model
        loss_fn = make_loss(self.cfg.train)
        self.private = None if self.private_mask is None else self._private_training(loss_fn, planned_epochs)
        public_train = self.train if self.private_mask is None else self.train[~self.private_mask]
        self.trainer = Trainer(
            self.model,
            config=self.cfg,
            public_triples=public_train,
            entity_pool=self.trained_entities,
            validate=lambda model: self.valid_mrr(),
            out_dir=self.out_dir,
            private=self.private,
            loss_fn=loss_fn,
        )
        self._index = {e: i for i, e in enumerate(kg.entities)}

    def _public_vocabulary(self) -> torch.Tensor:
        """``(n,)`` the party's entities from public inputs only: the split's public vocabulary, restricted
        (``source``) to the terms and genes and this source's diseases, by id prefix and type."""
        vocab = self.prep.split.train_entities
        if self.spec.source is None:
            return vocab
        from textkg.federated.partition import HPO_SOURCES, SHARED, entity_sources

        source = entity_sources(self.prep.kg)[vocab]
        return vocab[(source == SHARED) | (source == HPO_SOURCES.index(self.spec.source))]

    def _private_mask(self) -> torch.Tensor:
        """``(N,)`` which of the party's training statements are private (all of them in ``full`` mode)."""
        from textkg.training.private_training import select_confidential

        kg = self.prep.kg
        return select_confidential(
            self.train, kg.relations, self.cfg.privacy, seed=self.cfg.train.seed, entities=kg.entities
        )

    def _private_training(self, loss_fn, planned_epochs: int | None):
        """The party's private step, from its own :class:`~textkg.training.privacy_engine.PrivacyEngine`
        (each party has its own run config)."""
        from textkg.training.privacy_engine import PrivacyEngine

        assert self.private_mask is not None
        engine = PrivacyEngine(self.cfg, extra_reasons=self.prep.split.extra.get("not_dp_because", ()))
        return engine.make_private(
            self.model,
            private_triples=self.train[self.private_mask],
            entity_pool=self.trained_entities,
            loss_fn=loss_fn,
            planned_epochs=planned_epochs,
        )

    @property
    def name(self) -> str:
        return self.spec.name

    def _own(self, triples: torch.Tensor) -> torch.Tensor:
        if self.spec.source is None:
            return triples
        from textkg.federated.partition import HPO_SOURCES, SHARED, by_source

        if self.spec.source not in HPO_SOURCES:
            raise ConfigError(
                f"source must be one of {', '.join(HPO_SOURCES)}, got {self.spec.source!r}",
                field=f"holders.{self.spec.name}.source",
            )
        owner = by_source(self.prep.kg, triples)[1] if len(triples) else torch.zeros(0, dtype=torch.long)
        return triples[(owner == HPO_SOURCES.index(self.spec.source)) | (owner == SHARED)]

    # -- what the PSI and the exchange read --------------------------------------------
    def items(self) -> list[str]:
        """External ids of the entities the party's statements train: its side of the PSI."""
        return [self.prep.kg.entities[i] for i in self.trained_entities.tolist()]

    def _ids(self, names: list[str]) -> torch.Tensor:
        """The entity table's rows of ``names`` (the table has a row per seen entity, not per id)."""
        ids = torch.tensor([self._index[n] for n in names], dtype=torch.long)
        structural = self.model.structural
        assert structural is not None  # checked at construction: the model has an entity table
        rows = structural.rows(ids, generator=None, training=False)
        if len(torch.unique(rows)) != len(rows):  # an unseen entity reads the shared unseen row
            raise ConfigError(f"holder {self.name!r}: an aligned entity has no row of its own", field="aligned")
        return rows

    def rows(self, names: list[str]) -> torch.Tensor:
        """``(n, d)`` the entity table's rows of ``names`` (a copy)."""
        return self.model.tables()[ENTITY_TABLE].detach()[self._ids(names)].clone()

    def set_rows(self, names: list[str], rows: torch.Tensor) -> None:
        """Overwrite the entity table's rows of ``names``."""
        table = self.model.tables()[ENTITY_TABLE]
        with torch.no_grad():
            table[self._ids(names)] = rows.to(table.dtype)

    # -- local training and evaluation ---------------------------------------------------
    def train_epochs(self, epochs: int) -> None:
        if epochs:
            self.trainer.train_epochs(epochs)

    def _evaluate(self, triples: torch.Tensor, max_triples: int = 0, *, filter_index=None):
        from textkg.evaluation.metrics import evaluate
        from textkg.pipeline.prepared import seeded_subset

        triples = seeded_subset(triples, max_triples, self.cfg.train.seed)
        self.model.eval()
        with torch.no_grad():
            return evaluate(
                self.model,
                triples,
                filter_index=self.filter_index if filter_index is None else filter_index,
                candidates=self.candidates,
                num_entities=self.prep.kg.num_entities,
                batch_size=self.cfg.train.eval_batch_size,
            ).to_dict()

    def valid_mrr(self, max_triples: int = 0) -> float:
        """MRR on the party's own validation statements (what keep / roll back decides on); under privacy
        filtered with public statements only."""
        if not len(self.valid):
            return 0.0
        return float(self._evaluate(self.valid, max_triples, filter_index=self.decision_filter)["mrr"])

    def test_metrics(self) -> dict | None:
        """Filtered metrics on the party's own test statements, among its own entities."""
        if not len(self.test):
            return None
        out = self._evaluate(self.test)
        return {k: out[k] for k in ("mrr", "hits@1", "hits@3", "hits@10", "num_triples") if k in out}

    # -- backtracking and checkpoints -------------------------------------------------------
    def snapshot(self) -> dict:
        """Everything training changes (model, optimizer, sampler, counters), copied."""
        return copy.deepcopy(
            {
                "model": self.model.state_dict(),
                "optimizer": self.trainer.optimizer.state_dict(),
                "generator": self.trainer.generator.get_state(),
                "state": dataclasses.asdict(self.trainer.state),
            }
        )

    def privacy_state(self) -> dict | None:
        """The DP-SGD ledger and secret key (PRIVATE); not part of a :meth:`snapshot`: a rolled-back
        step has been spent."""
        return None if self.private is None else copy.deepcopy(self.private.state_dict())

    def load_privacy_state(self, state: dict | None) -> None:
        if self.private is not None and state is not None:
            self.private.load_state_dict(copy.deepcopy(state))

    def restore(self, snap: dict) -> None:
        """Go back to a :meth:`snapshot` (FKGE's roll-back)."""
        from textkg.training.trainer import TrainState

        snap = copy.deepcopy(snap)
        self.model.load_state_dict(snap["model"])
        self.trainer.optimizer.load_state_dict(snap["optimizer"])
        self.trainer.generator.set_state(snap["generator"])
        self.trainer.state = TrainState(**snap["state"])
