"""Zero-shot link prediction for brand-new entities (text only).

A new entity (say, a phenotype term added by a new ontology release) has no
structural vector: the model embeds it from its description alone, through
the same encoder and projection as training entities, with the learned
"unseen" structural row. It is then scored against every known entity.
A fine-tuned run (``text_module: finetune``) tokenises the new description
with the transformer's own tokenizer and encodes it with the fine-tuned
weights saved in ``best_model.pt``; an LSTM-autoencoder run (``torchcoder-aec``)
codes it with the autoencoder saved as ``lstm_ae.pt``.

``direction="tail"``: the new entity is the head; predict tails ``(new, r, ?)``.
``direction="head"``: the new entity is the tail; predict heads ``(?, r, new)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from textkg.errors import ConfigError
from textkg.evaluation.link_rerank import LinkFeatures
from textkg.evaluation.neighbour_vote import NeighbourVote
from textkg.evaluation.ranking import default_candidate_chunk, topk_in_chunks
from textkg.training import checkpoint as ckpt
from textkg.training.features import AUTOENCODER_FILE


class Predictor:
    """A trained run loaded for prediction.

    Args:
        run_dir: a directory written by ``textkg train``, or a release bundle.
        dataset: the dataset to load instead of the one the run's ``config.json`` names (your own path; checked
            against the run's ``graph.json``). A release bundle needs it unless its dataset is a registered
            name: textkg never opens a path a bundle names (:func:`textkg.pipeline.run_dir.open_run`).
        device: where the model and its encoder run: a name as for ``--device`` (``auto``,
            ``cpu``, ``cuda``, ``cuda:N``, ``mps``) or a :class:`torch.device`. Not the run's
            ``train.device`` (the run may come from a machine with other devices); the
            checkpoint loads on any device.
    """

    def __init__(
        self, run_dir: str | Path, *, device: str | torch.device = "auto", dataset: str | Path | None = None
    ) -> None:
        from textkg.devices import resolve_device
        from textkg.pipeline.prepared import prepare
        from textkg.pipeline.run_dir import is_bundle, open_run

        self.device = device if isinstance(device, torch.device) else resolve_device(device, field="device")
        self.run_dir = Path(run_dir)
        opened = open_run(self.run_dir, dataset=None if dataset is None else str(dataset))
        if ckpt.weights_file(self.run_dir) is None:
            raise ConfigError(
                "run has no best_model.pt or best_model.safetensors (training did not finish an epoch)",
                file=self.run_dir,
            )
        self.config = opened.config
        #: ``metrics.json``'s ``test`` block: the choices the run made on validation (``textkg train``, or
        #: ``textkg evaluate --k-shot``, which saves its k-shot choice there)
        self.choices: dict = (opened.metrics() or {}).get("test") or {}
        self.prepared = prepare(self.config, self.run_dir, device=self.device)
        if dataset is not None or is_bundle(self.run_dir):  # a dataset the run did not name: its own vocabulary?
            kg, split = self.prepared.kg, self.prepared.split
            opened.check_vocabulary(list(kg.entities), list(kg.relations), split.train_entities.tolist())
        self.model = self.prepared.model
        ckpt.load_run_weights(self.model, self.run_dir)
        self.model.eval()
        self.kg = self.prepared.kg
        self._tokenizer = None  # loaded on first use (fine-tuned runs only)
        self.vote_weight, self.spread_weight = _chosen_vote_weights(self.choices)
        self._vote: NeighbourVote | None = None  # built on first use (runs whose evaluation chose the neighbour vote)
        from textkg.pipeline.link_rerank import saved_reranker

        #: the link re-ranker the run's evaluation chose on validation (``test.link_rerank``), or ``None``
        self.reranker = saved_reranker(self.choices, file=str(opened.path / "metrics.json"))
        self._link_features: LinkFeatures | None = None  # built on first use
        self._rankers: dict = {}  # the placement choice's parent ranker, by method (built on first use)
        self._names: dict[tuple[str, str], list[int]] | None = None  # by id and by name (built on first use)

    def text_inputs(self, descriptions: list[str]) -> dict[str, torch.Tensor]:
        """The model's text inputs for ``descriptions``, by name (as in :meth:`KGEModel.embed_new_entities`)."""
        cfg = self.config.model
        if cfg.encoder is None:
            raise ConfigError(
                f"model {self.config.model_name!r} has no text encoder: zero-shot prediction "
                "needs a text model (e.g. --model fused-transe or blp-transe)",
                field="model",
            )
        if cfg.text_module == "lstm-ae" and not (self.run_dir / AUTOENCODER_FILE).is_file():
            raise ConfigError(
                f"this LSTM-autoencoder run has no {AUTOENCODER_FILE} (runs from before "
                "the autoencoder was saved have none), so a new description cannot be coded with "
                "the run's autoencoder; retrain it",
                file=self.run_dir,
                field="model",
            )
        if cfg.text_module == "finetune":  # same tokenizer and length as the training entities
            from textkg.training.features import finetune_token_ids, finetune_tokenizer

            if self._tokenizer is None:
                self._tokenizer = finetune_tokenizer(cfg)
            return finetune_token_ids(cfg, descriptions, tokenizer=self._tokenizer)
        from textkg.training.features import text_inputs

        inputs = text_inputs(
            cfg, descriptions, seed=self.config.train.seed, autoencoder=self.prepared.autoencoder, device=self.device
        )
        inputs.pop("autoencoder", None)
        inputs.pop("text_module", None)  # top-layers: the run's own fine-tuned layers are in the model
        return inputs

    def embed(self, descriptions: list[str]) -> torch.Tensor:
        """Embeddings ``(n, d)`` of brand-new entities from their descriptions."""
        return self._embed(descriptions)[0]

    def _embed(self, descriptions: list[str]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        for i, d in enumerate(descriptions):
            if not d or not d.strip():
                raise ConfigError("empty description", field=f"description[{i}]")
        inputs = self.text_inputs(descriptions)
        neighbours = None
        if self.model.any_unseen_neighbours and "text_features" in inputs:  # model.unseen_structure: neighbours
            from textkg.training.unseen_structure import nearest_seen, pooled_features

            existing = pooled_features(self.model)
            assert existing is not None  # the map is only set for models with pooled features
            neighbours = nearest_seen(existing, self.prepared.split.train_entities, inputs["text_features"].cpu())
        with torch.no_grad():
            return self.model.embed_new_entities(structural_neighbours=neighbours, **inputs), inputs

    def _vote_features(self, descriptions: list[str], inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(n, D)`` the new descriptions in the vote's feature space
        (:func:`textkg.pipeline.report.neighbour_vote_of`): the model's own pooled features,
        else the default ``bert`` encoder's."""
        text = self.model.text
        if "text_features" in inputs and getattr(text, "module", None) is None:
            return inputs["text_features"].float().cpu()
        from textkg.encoders import get_encoder

        return get_encoder("bert").encode(descriptions).float()

    def predict(
        self,
        *,
        description: str,
        name: str | None = None,
        relation: str | None = None,
        direction: str | None = None,
        top_k: int = 10,
        vote: bool = True,
        known_links: torch.Tensor | str | Path | None = None,
        include_held_out: bool = False,
    ) -> dict:
        """Top-``k`` links of one new entity for each (relation, direction) asked.

        Candidates: the training graph's entities, never the run's held-out (validation/test) ones nor one
        named like the new entity (``name``, as an id or a name); ``include_held_out``: every entity of the
        graph, ranked by the link scorer, as the link-prediction evaluation ranks them. ``candidates`` in the
        output says which.

        On a run that places ontology terms (:func:`textkg.pipeline.parent_ranking.is_placement_run`), ``is_a`` tails
        (the new term's parents) are ranked by the run's placement choice, exactly as ``textkg place`` ranks
        them (:class:`textkg.pipeline.parent_ranking.ParentRanker`; ``vote=False``: the model alone), from the text
        ``place`` encodes (``"name: description"``); ``scoring.placement`` says so. ``is_a`` heads (the new
        term's children) are not ranked there: asked for alone, a :class:`ConfigError`; asked for with others,
        left out and ``scoring.placement`` says why.

        ``known_links``: links the user already knows, a TSV file (:mod:`textkg.data.known_links`)
        or ``(m, 3)`` ``(relation id, entity id, role)``; the new entity's vector moves towards
        where they put it (:mod:`textkg.models.known_links`, by the method the run chose on
        validation, ``test.k_shot_selection``, else the default, and ``scoring.known_links`` says
        which), the link vote is added at the weight chosen there, and the known links themselves
        are not proposed again. The scores are then what the k-shot evaluation measured
        (:mod:`textkg.evaluation.k_shot`): the description neighbour vote, which it did not use,
        is left out, and so is the placement choice.

        Without ``relation``/``direction`` every relation and both directions
        are scored; all predictions are sorted by score. When the run's own
        evaluation chose the neighbour vote or its spread (``test.neighbour_vote.weight`` or
        ``spread_weight`` > 0 in ``metrics.json``: the combination beat the model on validation) the scores
        are that combination, unless ``vote=False``; ``scoring`` says which.

        Returns:
            ``{"entity": {...}, "scoring": {...}, "candidates": {...},
            "predictions": [{"relation", "direction", "entity", "name", "score"}, ...]}``
        """
        links = None if known_links is None else {0: known_links}
        return self.predict_batch(
            [(name, description)], relation=relation, direction=direction, top_k=top_k, vote=vote,
            known_links=links, include_held_out=include_held_out,
        )[0]  # fmt: skip

    def predict_batch(
        self,
        entities: Sequence[tuple[str | None, str]],
        *,
        relation: str | None = None,
        direction: str | None = None,
        top_k: int = 10,
        vote: bool = True,
        known_links: dict[int, torch.Tensor | str | Path] | None = None,
        include_held_out: bool = False,
    ) -> list[dict]:
        """:meth:`predict` for each ``(name, description)`` of ``entities`` (``known_links``: by row index), the
        run loaded once and the placement choice's scorer built once for every row it ranks."""
        from textkg.pipeline.parent_ranking import placement_pairs, rank_new_parents

        if top_k < 1:
            raise ConfigError("must be >= 1", field="top_k")
        for i, (_, description) in enumerate(entities):
            if not description or not description.strip():
                raise ConfigError("empty description", field=f"description[{i}]")

        pairs = [(r, d) for r in self._relations(relation) for d in ([direction] if direction else ["tail", "head"])]
        pairs, placement = placement_pairs(self, pairs, include_held_out=include_held_out)
        known_links = known_links or {}
        placed = [i for i in range(len(entities)) if known_links.get(i) is None] if placement.get("used") else []
        parents: dict[int, dict] = {}
        if placed:
            ranker = self._parent_ranker(vote)
            drop = [self._query_ids(entities[i][0]) for i in placed]
            ranked = rank_new_parents(ranker, [entities[i] for i in placed], top_k, drop=drop)
            parents = dict(zip(placed, ranked, strict=True))
        return [
            self._predict_one(
                *row,
                pairs,
                top_k=top_k,
                vote=vote,
                known_links=known_links.get(i),
                parents=parents.get(i),
                placement=placement,
                include_held_out=include_held_out,
            )
            for i, row in enumerate(entities)
        ]

    def _parent_ranker(self, vote: bool):
        """The run's placement choice (:class:`textkg.pipeline.parent_ranking.ParentRanker`; ``vote=False``: the model
        alone), built once per method."""
        from textkg.pipeline.parent_ranking import ParentRanker

        method = "auto" if vote else "model"
        if method not in self._rankers:
            self._rankers[method] = ParentRanker(self, method=method)
        return self._rankers[method]

    def _query_ids(self, name: str | None) -> torch.Tensor:
        """Ids of the entities the new entity names: its ``name`` as an entity id, or as a name (any case)."""
        if not name or not name.strip():
            return torch.zeros(0, dtype=torch.long)
        if self._names is None:  # ("id", entity id) and ("name", case-folded name) -> entity ids
            self._names = {}
            for i, (e, n) in enumerate(zip(self.kg.entities, self.kg.entity_names, strict=True)):
                self._names.setdefault(("id", e), []).append(i)
                self._names.setdefault(("name", n.strip().casefold()), []).append(i)
        key = name.strip()
        ids = set(self._names.get(("id", key), [])) | set(self._names.get(("name", key.casefold()), []))
        return torch.tensor(sorted(ids), dtype=torch.long)

    def _left_out(self, name: str | None, include_held_out: bool) -> tuple[torch.Tensor | None, dict]:
        """``(bool (n,) of entities never proposed, or None; what the output's candidates says)``."""
        n = self.kg.num_entities
        if include_held_out:
            return None, {"entities": n, "held_out_left_out": 0, "query_left_out": [], "include_held_out": True}
        mask = torch.ones(n, dtype=torch.bool)
        mask[self.prepared.split.train_entities.long()] = False
        held_out = int(mask.sum())
        query = self._query_ids(name)
        mask[query] = True
        report = {
            "entities": n - int(mask.sum()),
            "held_out_left_out": held_out,
            "query_left_out": [self.kg.entities[i] for i in query.tolist()],
            "include_held_out": False,
        }
        return (mask if bool(mask.any()) else None), report

    def _predict_one(
        self,
        name: str | None,
        description: str,
        pairs: list[tuple[int, str]],
        *,
        top_k: int,
        vote: bool,
        known_links: torch.Tensor | str | Path | None,
        parents: dict | None,
        placement: dict,
        include_held_out: bool,
    ) -> dict:
        """One entity's :meth:`predict` (``parents``: its ``is_a`` parents ranked by the placement choice,
        :func:`textkg.pipeline.parent_ranking.rank_new_parents`; ``placement``: what ``scoring.placement`` says)."""
        placed = (parents["relation"], "tail") if parents is not None else None
        link_pairs = [pair for pair in pairs if pair != placed]
        left_out, candidates = self._left_out(name, include_held_out)
        preds = [self._row(parents["relation"], "tail", e, v) for v, e in parents["ranked"]] if parents else []
        scoring: dict[str, object] = {"method": "model", "neighbour_vote_weight": 0.0, "spread_weight": 0.0}
        if link_pairs:
            link_preds, scoring = self._link_predictions(
                description, link_pairs, top_k=top_k, vote=vote, known_links=known_links, left_out=left_out
            )
            preds += link_preds
        elif parents is not None:  # the placement choice ranked every answer
            scoring["method"] = parents["note"]["reading"]
        preds.sort(key=lambda p: -p["score"])
        if placement:
            from textkg.pipeline.parent_ranking import KNOWN_LINKS_NOTE

            note = {**placement, **(parents["note"] if parents else {})}
            scoring["placement"] = note if parents or not note["used"] else {**note, **KNOWN_LINKS_NOTE}
        return {
            "entity": {"name": name, "description": description},
            "scoring": scoring,
            "candidates": candidates,
            "predictions": preds,
        }

    def _row(self, r: int, d: str, e: int, score: float) -> dict:
        return {
            "relation": self.kg.relations[r],
            "direction": d,
            "entity": self.kg.entities[e],
            "name": self.kg.entity_names[e],
            "score": float(score),
        }

    def _link_predictions(
        self,
        description: str,
        pairs: list[tuple[int, str]],
        *,
        top_k: int,
        vote: bool,
        known_links: torch.Tensor | str | Path | None,
        left_out: torch.Tensor | None,
    ) -> tuple[list[dict], dict]:
        """``(predictions, scoring)`` of the link scorer the run chose (model, votes, re-ranker, known links) for
        each ``(relation id, direction)`` of ``pairs``; entities in ``left_out`` are never proposed."""
        new, inputs = self._embed([description])
        links, links_report = self._known_links(known_links)
        if links is not None:
            new = self._with_known_links(new, links)
            top_k += len(links)  # room for the known links, dropped below
        k_shot = links is not None  # score as the k-shot evaluation did: no description neighbour vote
        reranker = self.reranker if (vote and not k_shot) else None
        weight = self.vote_weight if (vote and not k_shot) else 0.0
        spread_weight = self.spread_weight if (vote and not k_shot) else 0.0
        link_weight = self.link_vote_weight if (vote and links is not None and len(links)) else 0.0
        if link_weight:
            from textkg.pipeline.k_shot import link_vote_of

            link_vote, _ = link_vote_of(self.prepared)
            if link_vote is None:  # nothing public to vote from (the run chose no vote then either)
                link_weight = 0.0
            else:
                assert links is not None
                rows = torch.cat([torch.zeros(len(links), 1, dtype=torch.long), links], dim=1)
                _, voter_ids, voter_weights = link_vote.voters(rows)
        if weight or spread_weight or link_weight or reranker:
            from textkg.evaluation.scoring import Part, standardise, weighted_sum

        if weight or spread_weight or reranker:
            from textkg.pipeline.report import neighbour_vote_of

            if self._vote is None:
                self._vote = neighbour_vote_of(self.prepared)
            neighbours = self._vote
            features = self._vote_features([description], inputs)
        if reranker is not None:
            from textkg.evaluation.link_rerank import rerank_top
            from textkg.pipeline.link_rerank import link_features

            if self._link_features is None:
                self._link_features = link_features(self.prepared, neighbours)
            link_feats = self._link_features
            query_rows = link_feats.query_rows([description], features)
        with torch.no_grad():
            ents = self.model.entity_matrix()
            rels = self.model.relation_matrix()
            interaction = self.model.interaction
            preds = []
            for r, d in pairs:
                r_vec = rels[r : r + 1]

                def score(lo: int, hi: int, d: str = d, r_vec: torch.Tensor = r_vec) -> torch.Tensor:
                    part = ents[lo:hi]
                    s = (
                        interaction.score_tails(new, r_vec, part)
                        if d == "tail"
                        else interaction.score_heads(r_vec, new, part)
                    )
                    if left_out is not None:  # never proposed: below every candidate
                        s = s.masked_fill(left_out[lo:hi].to(s.device), float("-inf"))
                    return s

                if weight or spread_weight or link_weight or reranker:  # standardised model scores + the votes
                    rel = torch.tensor([r])
                    model_row = (
                        interaction.score_tails(new, r_vec, ents)
                        if d == "tail"
                        else interaction.score_heads(r_vec, new, ents)
                    )
                    parts: list[Part] = [(1.0, standardise(model_row).cpu())]  # over every entity, as evaluated
                    if link_weight:  # training entities that share the known links vote
                        parts.append((link_weight, link_vote.votes(voter_ids, voter_weights, rel, d)))
                    if weight:
                        parts.append((weight, neighbours.votes_for_new(features, rel, d)))
                    if spread_weight:
                        parts.append((spread_weight, neighbours.spread_for_new(features, rel, d)))
                    row = weighted_sum(parts)
                    if reranker is not None:  # the first stage's top answers re-ranked (test.link_rerank)
                        if left_out is not None and not bool(left_out.all()):  # below every candidate, finite
                            row = row.masked_fill(left_out, float(row[:, ~left_out].min()) - 1.0)
                        votes = neighbours.votes_for_new(features, rel, d)
                        room = top_k + (0 if left_out is None else int(left_out.sum()))  # a left-out one may stay
                        args = (query_rows, rel, d, row, votes, room)  # in a top list longer than the candidates
                        values, indices = rerank_top(reranker, link_feats, *args)
                    else:
                        if left_out is not None:
                            row = row.masked_fill(left_out, float("-inf"))
                        values, indices = row.topk(min(top_k, len(ents)), dim=1)
                else:  # the scores of every entity are never held at once: per-chunk top-k, merged
                    values, indices = topk_in_chunks(score, len(ents), top_k, chunk=default_candidate_chunk(1))
                kept = [
                    self._row(r, d, i, s)
                    for s, i in zip(values[0].tolist(), indices[0].tolist(), strict=True)
                    if s != float("-inf") and (left_out is None or not bool(left_out[i]))
                ]
                preds += kept[:top_k]
        preds.sort(key=lambda p: -p["score"])
        if links is not None:
            preds = self._drop_known(preds, links, top_k - len(links))
        scoring: dict[str, object] = (
            {
                "method": "model + neighbour vote: standardised model score + weight x the vote of the "
                f"{neighbours.k} training entities with the nearest descriptions + spread_weight x that vote "
                f"spread to each entity from its {neighbours.spread_k} nearest training entities",
                "neighbour_vote_weight": weight,
                "spread_weight": spread_weight,
            }
            if weight or spread_weight
            else {"method": "model", "neighbour_vote_weight": 0.0, "spread_weight": 0.0}
        )
        if "link_rerank" in self.choices:  # runs evaluated since the re-ranker: whether it re-ranked
            scoring["link_rerank"] = _rerank_note(self.reranker, used=reranker is not None)
        if reranker is not None:
            scoring["method"] = str(scoring["method"]) + " + the link re-ranker over its top answers"
        if links_report is not None:
            links_report["link_vote_weight"] = link_weight
            if link_weight:
                scoring["method"] = str(scoring["method"]) + (
                    f" + link_vote_weight x the vote of the {link_vote.k} training entities whose links are "
                    "most like the known links"
                )
            scoring["known_links"] = links_report
        return preds, scoring

    def _known_links(self, known_links: torch.Tensor | str | Path | None) -> tuple[torch.Tensor | None, dict | None]:
        """``(links (m, 3) or None, what the output says about them)``."""
        if known_links is None:
            return None, None
        from textkg.data.known_links import read_known_links

        if isinstance(known_links, (str, Path)):
            links = read_known_links(known_links, entities=self.kg.entities, relations=self.kg.relations)
        else:
            links = torch.as_tensor(known_links, dtype=torch.long).reshape(-1, 3)
        method = self.known_links_method
        if self.k_shot_chosen_on_validation:
            made_by = (self.choices.get("k_shot_selection") or {}).get("made_by", "textkg train")
            reading = (
                f"the description's vector moved by the known links with {method.key}, the method this run chose "
                f"on validation ({made_by}; none: not at all; mix:c / fold-in:c, docs/k_shot.md); the description "
                "neighbour vote is left out, as the k-shot evaluation measured"
            )
        else:
            reading = (
                f"the description's vector moved by the known links with {method.key}, the DEFAULT: this run made "
                "no k-shot choice on validation (its graph has a placement task, or it predates the choice); "
                "`textkg evaluate RUN --k-shot 0,1,3,5,10` makes one and saves it in the run's metrics.json"
            )
        return links, {
            "count": len(links),
            "method": method.key,
            "chosen_on_validation": self.k_shot_chosen_on_validation,
            "reading": reading,
        }

    @property
    def k_shot_chosen_on_validation(self) -> bool:
        """Whether the run's ``metrics.json`` holds a k-shot choice (``test.k_shot_selection.chosen``)."""
        return bool((self.choices.get("k_shot_selection") or {}).get("chosen"))

    @property
    def link_vote_weight(self) -> float:
        """The link-vote weight the run chose on validation (``metrics.json`` →
        ``test.k_shot_selection.link_vote.weight``; 0: none, or a run from before the vote)."""
        value = ((self.choices.get("k_shot_selection") or {}).get("link_vote") or {}).get("weight")
        return float(value) if isinstance(value, (int, float)) and value > 0 else 0.0

    @property
    def known_links_method(self):
        """The :class:`textkg.models.known_links.LinkMethod` the run chose on validation
        (``metrics.json`` → ``test.k_shot_selection.chosen``), else the default."""
        from textkg.models.known_links import LinkMethod

        chosen = (self.choices.get("k_shot_selection") or {}).get("chosen")
        temperature = self.config.train.temperature  # fold-in's softmax, as the run's evaluation used it
        return LinkMethod.from_key(chosen or LinkMethod().key, temperature=temperature)

    def _with_known_links(self, new: torch.Tensor, links: torch.Tensor) -> torch.Tensor:
        """``new (1, d)`` moved by ``links (m, 3)`` (:func:`textkg.models.known_links.embed_with_known_links`)."""
        from textkg.models.known_links import embed_with_known_links

        rows = torch.cat([torch.zeros(len(links), 1, dtype=torch.long), links], dim=1)
        # the run's seed: fold-in samples its negatives as the k-shot evaluation did (same generator, same draws)
        method, seed = self.known_links_method, self.config.train.seed
        return embed_with_known_links(self.model, new, rows, method=method, seed=seed)

    def _drop_known(self, preds: list[dict], links: torch.Tensor, top_k: int) -> list[dict]:
        """``preds`` without the known links, at most ``top_k`` per (relation, direction)."""
        from textkg.data.known_links import DIRECTIONS

        role_word = {role: word for word, role in DIRECTIONS.items()}
        known = {(self.kg.relations[r], role_word[d], self.kg.entities[e]) for r, e, d in links.tolist()}
        kept: list[dict] = []
        count: dict[tuple[str, str], int] = {}
        for p in preds:
            key = (p["relation"], p["direction"])
            if (p["relation"], p["direction"], p["entity"]) in known or count.get(key, 0) >= top_k:
                continue
            count[key] = count.get(key, 0) + 1
            kept.append(p)
        return kept

    def _relations(self, relation: str | None) -> list[int]:
        if relation is None:
            return list(range(self.kg.num_relations))
        try:
            return [self.kg.relations.index(relation)]
        except ValueError:
            raise ConfigError(
                f"unknown relation {relation!r}; known: {', '.join(self.kg.relations)}", field="relation"
            ) from None


def _rerank_note(reranker, *, used: bool) -> dict:
    """What ``scoring.link_rerank`` says: whether the re-ranker the run chose on validation re-ranked the answers."""
    if reranker is None:
        return {"used": False, "reason": "the run's validation did not choose the link re-ranker (or predates it)"}
    if not used:
        return {"used": False, "reason": "not with vote=False or known links (the k-shot evaluation did not use it)"}
    return {"used": True, "weight": reranker.weight, "top_k": reranker.top_k, "chosen_on": "validation"}


def _chosen_vote_weights(test: dict) -> tuple[float, float]:
    """The neighbour-vote and spread weights the run chose on validation (``test`` of ``metrics.json``; 0: the
    model alone, or no vote; a run from before the spread has no ``spread_weight``: 0)."""
    block = test.get("neighbour_vote") or {}

    def positive(key: str) -> float:
        value = block.get(key)
        return float(value) if isinstance(value, (int, float)) and value > 0 else 0.0

    return positive("weight"), positive("spread_weight")


def load_predictor(
    run_dir: str | Path, *, device: str | torch.device = "auto", dataset: str | Path | None = None
) -> Predictor:
    """Load a run directory or a release bundle for zero-shot prediction (``textkg.load(DIR)``) on ``device``,
    from ``dataset`` if given (see :class:`Predictor`)."""
    return Predictor(run_dir, device=device, dataset=dataset)
