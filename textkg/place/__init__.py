"""``textkg place RUN --terms FILE.tsv | --obo NEW.obo --out OUT.tsv``: where do new terms go?

The curator's question for a new ontology term: which existing terms are its
parents? A trained run answers it for every term absent from its graph, with
the placement method the run chose on its *validation* terms
(``metrics.json`` → ``test.placement_selection.chosen``): the trained model,
a description baseline or the combined scorer with the weights tuned there
(:mod:`textkg.evaluation.placement.combination`). So ``place`` suggests exactly
what the run's placement table measured. A transductive run (trained on a whole
release) held out no terms to choose on: it uses :data:`UNTUNED_METHOD`, and its
summary says so; ``--method`` overrides either choice.

Inputs: an OBO file (``[Term]`` stanzas, read by
:func:`textkg.data.ontology.read_obo`; ids of the training graph and obsolete
terms are skipped; a file without a ``[Term]`` stanza is an error; a term's own
``is_a`` lines are never read for scoring, only reported in the ``listed``
column so a curator can check), or a TSV of ``id <TAB> name [<TAB> definition]``.
A term is encoded as the training terms were (``"name: definition"``; without a
definition, its name and synonyms, and the note column says so).

Output: a TSV, one row per (term, suggestion), ``top_k`` suggestions per term
(those scoring at least ``min_score``, when given), with the parent's name, the
score of the chosen method, and as evidence the existing terms whose
descriptions are nearest to the new one; optionally a ROBOT template and an OBO
fragment of the same suggestions (:mod:`textkg.place.outputs`). Written to
temporary files and renamed, so a failed run leaves nothing half-written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from textkg.data.ontology import term_description
from textkg.errors import ConfigError, DataError
from textkg.pipeline.parent_ranking import METHODS, UNTUNED_METHOD, ParentRanker  # noqa: F401  (the first two: re-exported)

#: columns of the output TSV
COLUMNS = (
    "term", "term_name", "rank", "parent", "parent_name", "score", "share", "method", "listed", "nearest_terms", "note",
)  # fmt: skip
NO_DEFINITION_NOTE = "no definition: placed from its name (and synonyms) only"


@dataclass
class NewTerm:
    """A term to place: its id, name, definition and (OBO only) the parents its file lists."""

    id: str
    name: str
    definition: str = ""
    synonyms: list[str] = field(default_factory=list)
    listed_parents: list[str] = field(default_factory=list)
    #: as the OBO file gives them (:class:`textkg.data.ontology.OntologyTerm`), written back to the fragment
    synonym_scopes: list[str] = field(default_factory=list)
    synonym_xrefs: list[list[str]] = field(default_factory=list)
    definition_xrefs: list[str] = field(default_factory=list)
    xrefs: list[str] = field(default_factory=list)

    @property
    def description(self) -> str:
        """The text it is encoded from: :func:`textkg.data.ontology.term_description`, as a training term's."""
        return term_description(self)


def read_terms_tsv(path: str | Path) -> list[NewTerm]:
    """``id <TAB> name [<TAB> definition]`` per line; blank lines and ``#`` comments skipped."""
    text = _read(path)
    terms: list[NewTerm] = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) not in (2, 3):
            raise DataError(
                f"expected 2 or 3 tab-separated columns (id, name[, definition]), got {len(parts)}", file=path, line=i
            )
        if not parts[0].strip():
            raise DataError("empty id", file=path, line=i, field="id")
        if not parts[1].strip():
            raise DataError("empty name", file=path, line=i, field="name")
        terms.append(NewTerm(parts[0].strip(), parts[1].strip(), parts[2].strip() if len(parts) == 3 else ""))
    return _unique(terms, path)


def read_terms_obo(path: str | Path) -> list[NewTerm]:
    """Non-obsolete ``[Term]`` stanzas of an OBO file, read as a dataset's are
    (:func:`textkg.data.ontology.read_obo`: a malformed stanza, a term id given twice
    or a file without any ``[Term]`` stanza, such as a TSV passed by mistake, is a
    :class:`DataError` naming the file and, where it can, the line)."""
    from textkg.data.ontology import read_obo

    terms = []
    for t in read_obo(Path(path)).terms.values():
        if t.obsolete:
            continue
        if not t.name:
            raise DataError(f"term {t.id} has no name", file=path, field="name")
        terms.append(
            NewTerm(
                t.id,
                t.name,
                t.definition,
                list(t.synonyms),
                list(t.parents),
                list(t.synonym_scopes),
                [list(x) for x in t.synonym_xrefs],
                list(t.definition_xrefs),
                list(t.xrefs),
            )
        )
    return _unique(terms, path)


def _read(path: str | Path) -> str:
    """The file's text, bounded in size and line length like every data file (docs/security.md)."""
    from textkg.data.io import read_text

    if Path(path).is_dir():
        raise DataError("is a directory, not a file", file=path)
    return read_text(path, ("id", "name", "definition"))


def _unique(terms: list[NewTerm], path: str | Path) -> list[NewTerm]:
    seen: set[str] = set()
    for t in terms:
        if t.id in seen:
            raise DataError(f"term id {t.id} appears twice", file=path, field="id")
        seen.add(t.id)
    return terms


class Placer(ParentRanker):
    """A trained run loaded to place new terms under its existing ones.

    Args:
        run_dir: A finished ``textkg train`` run on an ontology with an ``is_a``
            relation: an inductive run (its metrics carry ``test.placement`` and the
            method chosen on its validation terms) or a transductive one (trained on a
            whole release; it held out no terms, so :data:`UNTUNED_METHOD` is used).
        device: where the model and encoder run (as for :class:`textkg.predict.Predictor`).
        method: ``"auto"`` (the run's choice, as above) or one of :data:`METHODS`.

    The ranking is :class:`textkg.pipeline.parent_ranking.ParentRanker`'s, which ``textkg predict`` uses too.
    """

    def __init__(self, run_dir: str | Path, *, device: str | torch.device = "auto", method: str = "auto") -> None:
        from textkg.pipeline.run_dir import open_run
        from textkg.predict import Predictor

        self.run_dir = Path(run_dir)
        opened = open_run(self.run_dir)  # this major version, before anything else is read
        metrics = opened.metrics()
        if metrics is None:
            raise ConfigError("the run has not finished (no metrics.json)", file=self.run_dir)
        self.metrics = metrics
        self._choose(metrics.get("test") or {}, opened.config.data.split, method)  # before the model is loaded
        self._attach(Predictor(self.run_dir, device=device))

    def place(
        self,
        terms: list[NewTerm],
        *,
        top_k: int = 5,
        evidence: int = 3,
        batch_size: int = 64,
        min_score: float | None = None,
        annotations: dict[str, list[int]] | None = None,
    ) -> list[dict]:
        """Rows of :data:`COLUMNS` (``top_k`` per term, best first, those whose ``share`` is at least
        ``min_score`` when given); terms already in the graph are left out. ``share``: the suggestion's
        softmax share of the term's scores over every candidate, in [0, 1] (the scale ``--min-score``
        reads; not a calibrated probability). The evidence (``nearest_terms``) is on each term's first row.

        ``annotations``: ``{term id: entity ids}`` known links of the new terms (their diseases); their
        vote is added to the chosen method's standardised scores (:meth:`annotation_weight`)."""
        if top_k < 1:
            raise ConfigError("must be >= 1", field="top_k")
        if evidence < 0:
            raise ConfigError("must be >= 0", field="evidence")
        kg = self.predictor.kg
        known = self.training_ids()
        terms = [t for t in terms if t.id not in known]
        if not terms:
            return []
        bare_terms = [not t.definition for t in terms]  # a name alone: the names-only choice
        scorer = self.term_scorer([t.description for t in terms], [t.name for t in terms], bare_terms)
        unit = torch.nn.functional.normalize(scorer.features, dim=1)
        n, cands = kg.num_entities, self.candidates
        rows = []
        for start in range(0, len(terms), batch_size):
            batch = terms[start : start + batch_size]
            ids = torch.arange(n + start, n + start + len(batch))
            s = scorer(ids, torch.tensor(bare_terms[start : start + batch_size]), cands)
            with torch.no_grad():
                if annotations:
                    s = self._with_annotations(s, batch, annotations, cands)
                sim = unit[ids] @ unit[cands].T
            top = s.topk(min(top_k, len(cands)), dim=1)
            shares = torch.softmax(s.double(), dim=1).gather(1, top.indices)
            near = sim.topk(min(evidence, len(cands)), dim=1) if evidence else None
            for b, term in enumerate(batch):
                nearest = (
                    "; ".join(
                        f"{kg.entities[e]} {kg.entity_names[e]} ({c:.2f})"
                        for c, e in zip(near.values[b].tolist(), cands[near.indices[b]].tolist(), strict=True)
                    )
                    if near is not None
                    else ""
                )
                for rank, (value, share, col) in enumerate(
                    zip(top.values[b].tolist(), shares[b].tolist(), top.indices[b].tolist(), strict=True), start=1
                ):
                    parent = int(cands[col])
                    if min_score is not None and share < min_score:
                        break
                    rows.append(
                        {
                            "term": term.id,
                            "term_name": term.name,
                            "rank": rank,
                            "parent": kg.entities[parent],
                            "parent_name": kg.entity_names[parent],
                            "score": round(float(value), 6),
                            "share": round(float(share), 6),
                            "method": self.method if term.definition else self.names_method,
                            "listed": ("yes" if kg.entities[parent] in term.listed_parents else "no")
                            if term.listed_parents
                            else "",
                            "nearest_terms": nearest if rank == 1 else "",  # once per term
                            "note": "" if term.definition else NO_DEFINITION_NOTE,
                        }
                    )
        return rows

    @property
    def annotation_weight(self) -> float:
        """The vote's weight the run chose on its validation terms (``test.placement_known_links.weight``),
        else 1 (:mod:`textkg.evaluation.placement.known_links`)."""
        block = (self.metrics.get("test") or {}).get("placement_known_links") or {}
        return float(block.get("weight", 1.0))

    def _with_annotations(
        self, scores: torch.Tensor, batch: list[NewTerm], annotations: dict[str, list[int]], cands: torch.Tensor
    ) -> torch.Tensor:
        """``(b, c)`` standardised ``scores`` + weight x the vote of the batch's annotations."""
        from textkg.evaluation.placement.known_links import AnnotationVote
        from textkg.evaluation.scoring import combine

        if not hasattr(self, "_vote"):
            train = self.predictor.prepared.split
            prep = self.predictor.prepared
            statements = train.train if prep.private_mask is None else train.train[~prep.private_mask]
            self._vote = AnnotationVote(statements, self.relation, self.predictor.kg.num_entities)
        vote = self._vote

        def votes() -> torch.Tensor:
            pairs = [(i, e) for i, t in enumerate(batch) for e in annotations.get(t.id, [])]
            rows = torch.tensor([p[0] for p in pairs], dtype=torch.long)
            others = torch.tensor([p[1] for p in pairs], dtype=torch.long)
            return vote(vote.bags(rows, others, len(batch)))[:, cands]

        return combine(scores.cpu(), [(self.annotation_weight, votes)])


def place_command(
    run_dir: str,
    *,
    terms_tsv: str | None,
    obo: str | None,
    out: str,
    top_k: int = 5,
    device: str = "auto",
    min_score: float | None = None,
    method: str = "auto",
    robot_template: str | None = None,
    obo_fragment: str | None = None,
    annotations: str | None = None,
) -> dict:
    """What ``textkg place`` does; returns a JSON summary (the TSV is at ``out``, and the ROBOT
    template and OBO fragment where asked: :mod:`textkg.place.outputs`)."""
    from textkg.devices import resolve_device
    from textkg.place.outputs import check_output_path, render_obo, render_robot, render_tsv, write_all

    if (terms_tsv is None) == (obo is None):
        raise ConfigError("give exactly one of --terms FILE.tsv or --obo FILE.obo", field="terms")
    if min_score is not None and not 0.0 <= min_score <= 1.0:
        raise ConfigError(
            f"is a share of the term's scores in [0, 1] (the TSV's share column), got {min_score}", field="min_score"
        )
    outputs = {"out": out, "robot_template": robot_template, "obo_fragment": obo_fragment}
    paths = {k: check_output_path(v, k) for k, v in outputs.items() if v is not None}
    if len(set(paths.values())) < len(paths):
        raise ConfigError("two outputs name the same file", field="out")
    resolved = resolve_device(device, field="device")  # before the terms are read or the run is loaded
    source = terms_tsv if terms_tsv is not None else obo
    terms = read_terms_tsv(terms_tsv) if terms_tsv is not None else read_terms_obo(obo)  # type: ignore[arg-type]
    if not terms:
        raise DataError("no (non-obsolete) terms to place", file=source)
    if annotations is not None:  # the file's own errors before the run is loaded
        from textkg.data.known_links import read_annotations

        read_annotations(annotations, entities=())
    placer = Placer(run_dir, device=resolved, method=method)
    known = placer.training_ids()
    annotated, unknown = ({}, 0) if annotations is None else _read_annotations(annotations, placer)
    rows = placer.place(terms, top_k=top_k, min_score=min_score, annotations=annotated)
    new = [t for t in terms if t.id not in known]
    texts = {paths["out"]: render_tsv(rows, COLUMNS)}
    if "robot_template" in paths:
        texts[paths["robot_template"]] = render_robot(rows, new)
    if "obo_fragment" in paths:
        remark = f"textkg place suggestions from {run_dir} ({placer.method}); review before merging"
        texts[paths["obo_fragment"]] = render_obo(rows, new, remark=remark)
    reading = placer.method_reading()  # before anything is written: it reads the run's choices
    write_all(texts)
    # placeable: a term whose file lists a parent in the training graph (a new parent cannot be suggested)
    placeable = {t.id for t in new if any(p in known for p in t.listed_parents)}
    listed = [r for r in rows if r["term"] in placeable]
    summary: dict[str, object] = {
        "out": str(out),
        **{k: str(v) for k, v in paths.items() if k != "out"},
        "method": placer.method,
        "method_reading": reading,
        "terms_read": len(terms),
        "terms_placed": len(new),
        "terms_in_training_graph": len(terms) - len(new),
        "terms_without_definition": sum(1 for t in new if not t.definition),
        "top_k": top_k,
        "min_score": min_score,
        "suggestions": len(rows),
        "terms_without_a_suggestion": len({t.id for t in new} - {r["term"] for r in rows}),
        "candidates": int(len(placer.candidates)),
    }
    if annotations is not None:  # textkg place --annotations (docs/k_shot.md)
        summary["annotations"] = {
            "terms_with_annotations": sum(1 for t in new if annotated.get(t.id)),
            "annotations_used": sum(len(annotated.get(t.id, [])) for t in new),
            "rows_naming_an_entity_outside_the_graph": unknown,
            "vote_weight": placer.annotation_weight,
        }
    held_out = set(placer.predictor.kg.entities) - known  # the run's own held-out terms: never proposed
    only_held = [t for t in new if t.listed_parents and set(t.listed_parents) <= held_out]
    if held_out and any(t.listed_parents for t in new):
        summary["terms_whose_listed_parents_are_all_held_out"] = len(only_held)
    if any(t.listed_parents for t in new):
        summary["placeable_terms"] = len(placeable)
    if listed:  # the file lists parents in the graph: how often the first suggestion is one of them
        firsts = [r for r in listed if r["rank"] == 1]
        if firsts:
            summary["first_suggestion_is_a_listed_parent"] = sum(r["listed"] == "yes" for r in firsts) / len(firsts)
    return summary


def _read_annotations(path: str, placer: Placer) -> tuple[dict[str, list[int]], int]:
    from textkg.data.known_links import read_annotations

    return read_annotations(path, entities=placer.predictor.kg.entities)
