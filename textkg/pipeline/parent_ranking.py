"""The one home of the placement choice's scorer: how a run ranks the parents of new ontology terms.

A run on an ontology chose, on its validation terms, how to rank a new term's ``is_a`` parents
(``metrics.json`` → ``test.placement_selection``): the trained model, a description baseline or the
combined scorer with its weights (:mod:`textkg.evaluation.placement.combination`). :class:`ParentRanker`
builds that scorer over the run's candidates (training terms of the parents' types). ``textkg place``
(:class:`textkg.place.Placer`, a :class:`ParentRanker`) and ``textkg predict --relation is_a --direction
tail`` (:class:`textkg.predict.Predictor`) both rank with it, so they give the same parents.

It works on a loaded run (a :class:`textkg.predict.Predictor`, passed in: this module does not import
:mod:`textkg.predict`, which uses it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from textkg.errors import ConfigError

#: placement methods ``place`` can use, and the one it uses when the run chose none
METHODS = ("model", "description-nn", "parent-of-nearest", "combined")
#: the strongest method that needs no tuning on held-out terms (hpo: 0.457 to 0.538 test MRR
#: against 0.278 to 0.359 for the model alone; docs/results/placement.md)
UNTUNED_METHOD = "parent-of-nearest"

Scorer = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def is_placement_run(test: dict, split: str) -> bool:
    """Whether a run can place new terms: it evaluated placement on held-out terms (``test.placement`` of
    ``metrics.json``) or it is transductive (trained on a whole release; :data:`UNTUNED_METHOD` then)."""
    return bool(test.get("placement")) or split == "transductive"


@dataclass(frozen=True)
class TermScorer:
    """Scores of new terms ``N + i`` (``N`` existing entities) against candidates, by the chosen method.

    ``score`` is the method chosen for terms with a definition, ``names_score`` the one chosen for terms
    read from their names alone (the same object when no such term is scored); ``features`` ``(N + m, D)``
    are every id's description features (the evidence columns read them)."""

    score: Scorer
    names_score: Scorer
    features: torch.Tensor

    def __call__(self, ids: torch.Tensor, bare: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(b, c)`` scores of new-term ids ``(b,)``; ``bare (b,)`` bool: the term has no definition."""
        with torch.no_grad():
            s = self.score(ids, candidates)
            if self.names_score is not self.score and bare.any():
                s = s.double()
                s[bare] = self.names_score(ids[bare], candidates).double()
        return s


class ParentRanker:
    """The run's placement choice over a loaded run.

    Args:
        predictor: the run, loaded (a :class:`textkg.predict.Predictor`).
        method: ``"auto"`` (the method the run chose on its validation terms; :data:`UNTUNED_METHOD` for a
            transductive run) or one of :data:`METHODS`.
    """

    run_dir: Path
    predictor: Any  # textkg.predict.Predictor (not imported: predict ranks is_a parents with this class)

    def __init__(self, predictor: Any, *, method: str = "auto") -> None:
        self.run_dir = Path(predictor.run_dir)
        self._choose(predictor.choices, predictor.config.data.split, method)
        self._attach(predictor)

    def _choose(self, test: dict, split: str, method: str) -> None:
        """The method, from ``metrics.json``'s ``test`` block, before the run's model is loaded."""
        from textkg.evaluation.placement.methods import DEFAULT_PARENT_RELATION
        from textkg.pipeline.run_dir import METRICS

        self.selection = test.get("placement_selection")
        # what validation chose for terms read from their names alone (test.placement_names_only), and the re-ranker
        self.names_only = test.get("placement_names_only") or {}
        self.reranker = test.get("placement_rerank")
        self.held_out_terms = bool(test.get("placement"))
        if not is_placement_run(test, split):
            raise ConfigError(
                "this run has no placement evaluation: place needs a run on an ontology with an "
                f"{DEFAULT_PARENT_RELATION!r} relation (e.g. textkg train --dataset hpo, or --dataset FILE.obo)",
                file=self.run_dir / METRICS,
                field="test.placement",
            )
        self.asked = method != "auto"
        self.method = self._method(method)
        names_selection = self.names_only.get("placement_selection")
        self.names_method = names_selection["chosen"] if names_selection and not self.asked else self.method

    def _attach(self, predictor: Any) -> None:
        """The relation, hierarchy and candidates, from the loaded run."""
        from textkg.evaluation.placement.methods import DEFAULT_PARENT_RELATION

        self.predictor = predictor
        prep, kg = predictor.prepared, predictor.kg
        if DEFAULT_PARENT_RELATION not in kg.relations:
            raise ConfigError(
                f"the run's graph has no {DEFAULT_PARENT_RELATION!r} relation to place terms with "
                f"(its relations: {', '.join(kg.relations)})",
                file=self.run_dir,
                field="dataset",
            )
        self.relation = kg.relations.index(DEFAULT_PARENT_RELATION)
        # the hierarchy a vote reads: what the run's placement read (public training statements under privacy)
        train = prep.split.train if prep.private_mask is None else prep.split.train[~prep.private_mask]
        self.parent_edges = train[train[:, 1] == self.relation][:, [0, 2]]
        self.candidates = self._candidates()

    def _method(self, method: str) -> str:
        if method == "auto":
            if self.selection:
                return self.selection["chosen"]
            return "model" if self.held_out_terms else UNTUNED_METHOD
        if method not in METHODS:
            raise ConfigError(f"unknown method {method!r}; choose auto or one of {', '.join(METHODS)}", field="method")
        if method == "combined" and not self.selection:
            raise ConfigError("this run tuned no combination (it needs held-out terms)", field="method")
        return method

    def training_ids(self) -> set[str]:
        """Ids of the training graph's entities: the terms that need no placing. Held-out
        (validation/test) terms of the run's own split are placed like any new term."""
        kg = self.predictor.kg
        return {kg.entities[e] for e in self.predictor.prepared.split.train_entities.tolist()}

    def _candidates(self) -> torch.Tensor:
        """Training entities of the types that training ``is_a`` parents have (all training entities
        when the graph declares no types): as the placement evaluation's candidates."""
        kg, split = self.predictor.kg, self.predictor.prepared.split
        ids = split.train_entities.long()
        if kg.entity_types is None or not len(self.parent_edges):
            return ids
        types = {kg.entity_types[p] for p in self.parent_edges[:, 1].tolist()}
        return ids[torch.tensor([kg.entity_types[e] in types for e in ids.tolist()], dtype=torch.bool)]

    def term_scorer(self, texts: list[str], names: list[str], bare: list[bool]) -> TermScorer:
        """The chosen method's scorer for new terms ``N + i`` encoded from ``texts`` (``names``: their names,
        for the re-ranker; ``bare``: which have no definition, scored with the names-only choice)."""
        kg = self.predictor.kg
        methods = {self.method} | ({self.names_method} if any(bare) else set())
        new_emb = self.predictor.embed(texts) if methods & {"model", "combined"} else None
        existing, new = self._description_features(texts)
        features = torch.cat([existing, new])
        words = (list(kg.entity_descriptions) + texts, list(kg.entity_names) + names)
        score = self._scorer(new_emb, features, words)
        names_score = self._scorer(new_emb, features, words, names_only=True) if len(methods) > 1 else score
        return TermScorer(score, names_score, features)

    def top_parents(
        self, texts: list[str], names: list[str], top_k: int, *, drop: list[torch.Tensor], batch_size: int = 64
    ) -> list[tuple[list[float], list[int]]]:
        """``(scores, entity ids)`` of each new term's ``top_k`` parents, best first, as
        :meth:`textkg.place.Placer.place` ranks them (the same batches); ``drop[i]``: entity ids never proposed
        for term ``i`` (scored as candidates, then left out, so the others' scores and order are place's)."""
        n, cands = self.predictor.kg.num_entities, self.candidates
        scorer = self.term_scorer(texts, names, [False] * len(texts))
        out = []
        for start in range(0, len(texts), batch_size):
            ids = torch.arange(n + start, n + min(start + batch_size, len(texts)))
            s = scorer(ids, torch.zeros(len(ids), dtype=torch.bool), cands).clone()
            for b in range(len(ids)):
                s[b, torch.isin(cands, drop[start + b])] = float("-inf")
            top = s.topk(min(top_k, len(cands)), dim=1)
            for values, cols in zip(top.values.tolist(), top.indices.tolist(), strict=True):
                kept = [(v, int(cands[c])) for v, c in zip(values, cols, strict=True) if v != float("-inf")]
                out.append(([v for v, _ in kept], [e for _, e in kept]))
        return out

    def method_reading(self, asked: str = "as asked") -> str:
        """Which method ranks, and why (``asked``: how a method that was not the run's choice was asked for)."""
        selection = self.selection
        if self.asked:
            chose = f" (the run chose {selection['chosen']} on its validation terms)" if selection else ""
            return f"{self.method}: {asked}{chose}"
        if not self.held_out_terms:
            return (
                f"{self.method}: this run held out no terms to choose a method on (a transductive run); "
                f"{UNTUNED_METHOD} is the strongest method that needs no such choice"
            )
        if not selection:
            return f"{self.method}: the trained model (this run tuned no combination)"
        mrr = (selection["valid"].get(self.method) or {}).get("mrr")  # schema-checked: a number in [0, 1] or null
        support = (selection["combined"].get("parent_support") or {}).get("weight") if self.method == "combined" else 0
        lifted = f"; each candidate lifted by {support:g} x its best parent's score" if support else ""
        return (
            f"{self.method}: the best of {', '.join(selection['valid'])} on this run's validation terms "
            f"(placement MRR {'not recorded' if mrr is None else format(mrr, '.3f')}){lifted}"
        )

    def _description_features(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(existing (N, D), new (m, D))`` description features from the same encoder as the run's placement."""
        from textkg.pipeline import report

        prep = self.predictor.prepared
        existing = report.description_features(prep)
        text = getattr(prep.model, "text", None)
        if text is not None and getattr(text, "module", None) is None and hasattr(text, "text_text_features"):
            new = self.predictor.text_inputs(texts)["text_features"]
        else:
            from textkg.encoders import cached_encode, get_encoder
            from textkg.training.features import default_cache_dir

            new = cached_encode(get_encoder("bert"), texts, cache_dir=default_cache_dir())
        return existing.float(), new.float()

    def _scorer(
        self, new_emb: torch.Tensor | None, features: torch.Tensor, words: tuple[list[str], list[str]], names_only=False
    ) -> Scorer:
        """The chosen method's ``score(terms, candidates)`` over ids where new term ``i`` is ``N + i``
        (``names_only``: the method and weights chosen for terms read from their names alone; ``words``: every
        id's text and name, for the re-ranker)."""
        from textkg.evaluation.placement.combination import VoteConfig, combined_scorer, neighbour_vote_scorer
        from textkg.evaluation.placement.methods import cosine_scorer, parent_of_nearest_scorer

        model = self.predictor.model
        n = self.predictor.kg.num_entities
        with torch.no_grad():
            ents = model.entity_matrix()
            rel = model.relation_matrix()[self.relation : self.relation + 1]

        def model_score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
            assert new_emb is not None
            with torch.no_grad():
                return (
                    model.interaction.score_tails(new_emb[terms - n], rel.expand(len(terms), -1), ents[candidates])
                    .float()
                    .cpu()  # combined with the description scores, which live on the CPU
                )

        components = {"model": model_score, "description": cosine_scorer(features)}
        if names_only:
            method, selection = self.names_method, self.names_only.get("placement_selection")
        else:
            method, selection = self.method, self.selection
        if method == "model":
            return model_score
        if method == "description-nn":
            return components["description"]
        if method == "parent-of-nearest":
            return parent_of_nearest_scorer(features, self.parent_edges)
        assert selection is not None and method == "combined"
        combo = selection["combined"]
        if combo.get("vote") is not None:
            components["vote"] = neighbour_vote_scorer(features, self.parent_edges, vote=VoteConfig(**combo["vote"]))
        weights = {c: w for c, w in combo["weights"].items() if w > 0}
        if "rerank" in weights:  # validation gave the re-ranker a weight: its fitted form is test.placement_rerank
            if not self.reranker:
                raise ConfigError(
                    "the run's combination weighs the re-ranker, but metrics.json has no fitted one",
                    file=self.run_dir / "metrics.json",
                    field="test.placement_rerank",
                )
            components["rerank"] = self._rerank(features, *words)
        try:
            scorer = combined_scorer(components, weights)
        except ConfigError as exc:  # weights the schema allows but no scorer takes (a vote weight without its vote)
            block = "test.placement_names_only.placement_selection" if names_only else "test.placement_selection"
            raise ConfigError(
                exc.message, file=self.run_dir / "metrics.json", field=f"{block}.combined.weights"
            ) from None
        support = combo.get("parent_support") or {}
        if support.get("weight"):  # validation chose parent support (checked with metrics.json's schema)
            from textkg.evaluation.placement.parent_support import parent_support_scorer

            scorer = parent_support_scorer(
                scorer, self.parent_edges, float(support["weight"]), root=float(support["root"])
            )
        cross = combo.get("cross_encoder") or {}
        if cross.get("weight"):  # validation chose the cross-encoder over the shortlist: the run folder keeps it
            scorer = self._shortlist(scorer, cross, words[0])
        return scorer

    def _shortlist(self, scorer: Scorer, cross: dict, texts: list[str]) -> Scorer:
        """``scorer`` with the run's cross-encoder over each term's top candidates
        (:mod:`textkg.evaluation.placement.shortlist`; ``cross``: ``placement_selection.combined.cross_encoder``,
        checked here: it comes from the run folder)."""
        import math

        from textkg.encoders.cross_encoder import load_cross_encoder
        from textkg.evaluation.placement.shortlist import PairScores, Shortlist, shortlist_scorer
        from textkg.pipeline.report import CROSS_ENCODER_DIR

        weight, top_k = cross.get("weight"), cross.get("top_k")
        field = "test.placement_selection.combined.cross_encoder"
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not math.isfinite(weight)
            or not 0 < weight <= 1e6
            or isinstance(top_k, bool)
            or not isinstance(top_k, int)
            or not 2 <= top_k <= 1000
        ):
            raise ConfigError(
                "expected a finite weight in (0, 1e6] and a top_k from 2 to 1000",
                file=self.run_dir / "metrics.json",
                field=field,
            )
        folder = self.run_dir / CROSS_ENCODER_DIR
        if folder.is_symlink() or not folder.is_dir():
            raise ConfigError(
                f"the run's combination weighs a cross-encoder, but the run folder has no {CROSS_ENCODER_DIR}/ folder",
                file=self.run_dir,
                field=field,
            )
        shortlist = Shortlist(PairScores(load_cross_encoder(folder), texts), top_k=top_k)
        return shortlist_scorer(scorer, shortlist, float(weight))

    def _rerank(self, features: torch.Tensor, texts: list[str], names: list[str]):
        """The run's fitted re-ranker (:mod:`textkg.evaluation.placement.rerank`) over existing + new terms."""
        from textkg.evaluation.placement.evaluate import saved_reranker

        assert self.reranker is not None
        train = self.predictor.prepared.split.train_entities
        return saved_reranker(
            self.reranker,
            features=features,
            parent_edges=self.parent_edges,
            texts=texts,
            names=names,
            fit_on=train,
            file=str(self.run_dir / "metrics.json"),
            synonyms=self.predictor.kg.entity_synonyms,
        )  # the packaged MiniLM's word vectors, read only when the saved re-ranker weighs maxsim


# ------------------------------------------------------------------------------------------------
# textkg predict on a run that places terms: is_a tails are the new term's parents, ranked as above.

#: what ``scoring.placement`` says when known links are given (the k-shot path ranks ``is_a`` too)
KNOWN_LINKS_NOTE = {
    "used": False,
    "reason": "with known links every relation, is_a included, is ranked as the k-shot evaluation measured; "
    "textkg place --annotations adds a new term's known diseases to the placement choice",
}


def placement_relation(predictor: Any) -> int | None:
    """The run's placement relation (``is_a``) where the run places terms as ``textkg place`` does, else ``None``."""
    from textkg.evaluation.placement.methods import DEFAULT_PARENT_RELATION

    relations = predictor.kg.relations
    if DEFAULT_PARENT_RELATION not in relations or not is_placement_run(predictor.choices, predictor.config.data.split):
        return None
    return relations.index(DEFAULT_PARENT_RELATION)


def placement_pairs(
    predictor: Any, pairs: list[tuple[int, str]], *, include_held_out: bool
) -> tuple[list[tuple[int, str]], dict]:
    """``(the (relation id, direction) pairs predict ranks, what its scoring.placement says)``.

    On a run that places terms, ``is_a`` heads (the new term's children) are not ranked: no method was chosen
    for them on validation. Asked for alone they are refused (:class:`ConfigError`); asked for with others they
    are left out, and the note says so. ``is_a`` tails are ranked by the placement choice (``used``) unless
    ``include_held_out`` asks for every entity by the link scorer, as the link-prediction evaluation ranks them.
    """
    parent = placement_relation(predictor)
    if parent is None or all(r != parent for r, _ in pairs):
        return pairs, {}
    name = predictor.kg.relations[parent]
    children = (
        f"a new term's children ({name} heads) are not ranked: no method for them was chosen on validation; "
        f"for its parents: --relation {name} --direction tail (the ranking of textkg place)"
    )
    if pairs == [(parent, "head")]:
        raise ConfigError(children, field="direction")
    note: dict[str, object] = {"relation": name, "direction": "tail", "used": False}
    if (parent, "head") in pairs:
        note["children"] = children
    pairs = [pair for pair in pairs if pair != (parent, "head")]
    if (parent, "tail") in pairs:
        if include_held_out:
            note["reason"] = (
                "include_held_out (--include-held-out) ranks every entity with the link scorer, as the "
                "link-prediction evaluation does; without it, parents are ranked by the run's placement choice"
            )
        else:
            note["used"] = True
    return pairs, note


def placement_text(description: str, name: str | None) -> str:
    """The text a new term is placed from, as ``textkg place`` builds it from a name and a definition
    (:attr:`textkg.place.NewTerm.description`): ``"name: description"``, or the description alone where there
    is no name or it already starts with ``"name:"``."""
    if not name or not name.strip() or description.strip().casefold().startswith(name.strip().casefold() + ":"):
        return description
    return f"{name.strip()}: {description}"


def rank_new_parents(
    ranker: ParentRanker,
    entities: Sequence[tuple[str | None, str]],
    top_k: int,
    *,
    drop: list[torch.Tensor],
) -> list[dict]:
    """For each ``(name, description)``: ``{"relation", "ranked": [(score, entity id), ...], "note"}``, its
    ``top_k`` parents as ``textkg place`` ranks them (``drop[i]``: entity ids never proposed for row ``i``)."""
    texts = [placement_text(d, n) for n, d in entities]
    names = [n or d for n, d in entities]
    reading = "parents ranked by the run's placement choice, as textkg place ranks them: " + ranker.method_reading(
        asked="the model alone, as vote=False (--no-vote) asks"
    )
    out = []
    for text, (values, ids) in zip(texts, ranker.top_parents(texts, names, top_k, drop=drop), strict=True):
        note = {"method": ranker.method, "reading": reading, "candidates": int(len(ranker.candidates)), "text": text}
        out.append({"relation": ranker.relation, "ranked": list(zip(values, ids, strict=True)), "note": note})
    return out
