"""k-shot evaluation: a new entity with ``k`` known links, the rest of its statements ranked.

The protocol of the semi-inductive benchmark of Kochsiek & Gemulla 2023 ("A Benchmark for
Semi-Inductive Link Prediction in Knowledge Graphs", Findings of EMNLP, arXiv:2310.11917v1),
on an inductive split's held-out entities (those of the evaluated statements that are not
training entities):

* each held-out entity with more than ``k`` statements in the evaluated split has ``k`` of them
  *revealed* (its known links); which ones is drawn once, from ``seed``: one random order per
  entity, and the first ``k`` of it are revealed, so the links revealed at ``k = 1`` are among
  those revealed at ``k = 3``. Every method is given the same links, so rows compare.
* every statement revealed for any entity is taken out of the ranked statements (it is known);
  of the others, the tail query ``(e, r, ?)`` counts when ``e`` is such an entity and the head
  query ``(?, r, e)`` when ``e`` is, ranked with the usual filtered protocol (revealed statements
  stay in the filter: they are true).
* entities with ``k`` or fewer statements are counted (``too_few_statements``), not ranked.

:func:`evaluate_k_shot` ranks the queries for each way of using the links of
:mod:`textkg.models.known_links` (a method and a prior weight; ``none``: the links unused, the
zero-shot model; ``mix:0``: ERAvg, the links alone), chooses one on validation and reports it
on test beside those two baselines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from textkg.data.known_links import NEW_IS_HEAD, NEW_IS_TAIL
from textkg.errors import ConfigError
from textkg.evaluation.filtering import FilterIndex
from textkg.evaluation.link_vote import DEFAULT_LINK_VOTE_WEIGHTS, LinkVote, LinkVoteScorer, rank_link_vote
from textkg.evaluation.neighbour_vote import choose_weight
from textkg.evaluation.ranking import compute_ranks
from textkg.models.known_links import NO_LINKS, PRIOR_WEIGHTS, LinkMethod, with_known_links_many

#: the numbers of known links of the benchmark (Kochsiek & Gemulla 2023)
DEFAULT_KS = (0, 1, 3, 5, 10)
#: what ``metrics.json`` says the protocol is
PROTOCOL = (
    "per held-out entity with more than k statements in the split, k are revealed (seeded random order "
    "per entity, nested over k) and the rest ranked, filtered; revealed statements are never ranked"
)


@dataclass(frozen=True)
class KShotDraw:
    """The known links and the ranked queries at one ``k``.

    Attributes:
        k: links revealed per eligible entity.
        links: ``(m, 4)`` long ``(entity, relation, other, role)`` (:mod:`textkg.models.known_links`).
        queries: ``(q, 3)`` the statements with at least one counted query.
        head: ``(q,)`` bool, the head query ``(?, r, t)`` counts (``t`` eligible).
        tail: ``(q,)`` bool, the tail query ``(h, r, ?)`` counts (``h`` eligible).
        num_entities: eligible held-out entities (more than ``k`` statements).
        too_few_statements: held-out entities with ``k`` or fewer statements (left out).
    """

    k: int
    links: torch.Tensor
    queries: torch.Tensor
    head: torch.Tensor
    tail: torch.Tensor
    num_entities: int
    too_few_statements: int

    @property
    def num_queries(self) -> int:
        return int(self.head.sum() + self.tail.sum())

    @property
    def query_entities(self) -> torch.Tensor:
        """``(num_queries,)`` the held-out entity each counted query is about, in the order of
        :func:`k_shot_ranks` (head queries first: their tail; then tail queries: their head)."""
        return torch.cat([self.queries[self.head, 2], self.queries[self.tail, 0]])

    @property
    def eligible(self) -> torch.Tensor:
        """``(u,)`` sorted ids of the entities with links revealed (more than ``k`` statements; ``k >= 1``)."""
        return torch.unique(self.links[:, 0])


def parse_ks(text: str, *, field: str = "k_shot") -> tuple[int, ...]:
    """``"0,1,3"`` → ``(0, 1, 3)``: distinct non-negative integers, sorted."""
    try:
        ks = sorted({int(part) for part in str(text).split(",") if part.strip()})
    except ValueError:
        raise ConfigError(f"expected comma-separated integers such as 0,1,3,5,10, got {text!r}", field=field) from None
    if not ks or ks[0] < 0:
        raise ConfigError(f"expected non-negative integers such as 0,1,3,5,10, got {text!r}", field=field)
    return tuple(ks)


def draw_k_shot(triples: torch.Tensor, seen: torch.Tensor, k: int, *, num_entities: int, seed: int = 0) -> KShotDraw:
    """Reveal ``k`` statements of each held-out entity of ``triples`` ``(n, 3)`` (module docstring).

    ``seen``: ids of the training entities. The draw depends only on ``triples``, ``seen`` and ``seed``.
    """
    if k < 0:
        raise ConfigError(f"k must be >= 0, got {k}", field="k_shot")
    triples = triples.long().cpu()
    n = len(triples)
    is_seen = torch.zeros(num_entities, dtype=torch.bool)
    is_seen[torch.as_tensor(seen, dtype=torch.long).cpu()] = True
    ent = triples[:, [0, 2]].reshape(-1)  # (2n,) incidences: entity, its statement
    idx = torch.arange(n).repeat_interleave(2)
    second_of_loop = (torch.arange(2 * n) % 2 == 1) & (triples[idx, 0] == triples[idx, 2])
    keep = ~is_seen[ent] & ~second_of_loop
    ent, idx = ent[keep], idx[keep]
    key = torch.rand(len(ent), generator=torch.Generator().manual_seed(seed))
    order = torch.argsort(key)
    order = order[torch.argsort(ent[order], stable=True)]  # by entity, random within an entity
    ent, idx = ent[order], idx[order]
    counts = torch.bincount(ent, minlength=num_entities)
    start = torch.cumsum(counts, 0) - counts
    position = torch.arange(len(ent)) - start[ent]
    eligible = counts > k
    revealed = (position < k) & eligible[ent]
    owner, statement = ent[revealed], idx[revealed]
    h, r, t = triples[statement].unbind(1)
    role = torch.where(h == owner, NEW_IS_HEAD, NEW_IS_TAIL)
    links = torch.stack([owner, r, torch.where(role == NEW_IS_HEAD, t, h), role], dim=1)
    hidden = torch.zeros(n, dtype=torch.bool)
    hidden[statement] = True
    head_q, tail_q = eligible[triples[:, 2]] & ~hidden, eligible[triples[:, 0]] & ~hidden
    ranked = head_q | tail_q
    held_out = torch.unique(ent)
    return KShotDraw(
        k=k,
        links=links,
        queries=triples[ranked],
        head=head_q[ranked],
        tail=tail_q[ranked],
        num_entities=int(eligible[held_out].sum()),
        too_few_statements=int((~eligible[held_out]).sum()),
    )


def summarise(ranks: torch.Tensor) -> dict:
    """MRR and Hits@1/3/10 of ``(q,)`` ranks; ``None`` values when there are none (strict JSON)."""
    if not len(ranks):
        return {"mrr": None, "hits@1": None, "hits@3": None, "hits@10": None}
    ranks = ranks.double()
    return {
        "mrr": float(ranks.reciprocal().mean()),
        **{f"hits@{h}": float((ranks <= h).double().mean()) for h in (1, 3, 10)},
    }


def k_shot_ranks(
    model,
    draw: KShotDraw,
    methods: Sequence[LinkMethod],
    *,
    filter_index: FilterIndex,
    candidates: torch.Tensor,
    num_entities: int,
    batch_size: int = 256,
    exclude_query: bool = False,
    seed: int = 0,
    matrix: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """``{method key: (num_queries,) ranks}`` of ``draw``'s counted queries with the known links used by
    each of ``methods`` (one ranking for all of them when ``k = 0``: no links, the model alone).
    ``matrix``: the model's entity matrix, computed once here when not given."""
    out: dict[str, torch.Tensor] = {}
    if not len(draw.queries):
        return {method.key: torch.empty(0, dtype=torch.float64) for method in methods}
    scorers = with_known_links_many(model, draw.links, methods, seed=seed, matrix=matrix)
    for method in methods:
        if not len(draw.links) and out:  # no links: every method is the model alone
            out[method.key] = next(iter(out.values()))
            continue
        result = compute_ranks(
            scorers[method.key],
            draw.queries,
            filter_index=filter_index,
            candidates=candidates,
            num_entities=num_entities,
            batch_size=batch_size,
            exclude_query=exclude_query,
        )
        assert result.head_ranks is not None and result.tail_ranks is not None
        out[method.key] = torch.cat([result.head_ranks[draw.head], result.tail_ranks[draw.tail]])
    return out


def candidate_methods(*, temperature: float = 1.0) -> list[LinkMethod]:
    """What validation chooses from: no links first, then each method from its largest prior down (ties go
    to the earlier one: the model alone, then the weaker pull); fold-in at softmax ``temperature``."""
    out = [NO_LINKS]
    for name, priors in PRIOR_WEIGHTS.items():
        out += [LinkMethod(name, c, temperature) for c in sorted(priors, reverse=True)]
    return out


#: the ``eravg_no_text`` baseline: the links' mean alone, the entity's own text unused
ERAVG = LinkMethod("mix", 0.0)


def choose(valid_mrr: dict[str, float]) -> str:
    """The key with the best validation MRR; ties go to the first (dicts keep order)."""
    best = max(valid_mrr.values())
    return next(k for k, v in valid_mrr.items() if v == best)


def k_shot_block(
    draw: KShotDraw,
    ranks: dict[str, torch.Tensor],
    chosen: str,
    *,
    seed: int,
    vote: dict | None = None,
    fixed: KShotDraw | None = None,
) -> dict:
    """One ``test.k_shot[k]`` entry: the chosen method, and the baselines on the same queries.

    ``vote``: ``{"final", "without_link_vote", "link_vote_only"}`` ranks when the link vote was chosen
    (:mod:`textkg.evaluation.link_vote`): the entry is then the chosen method plus the vote, and the
    two parts are baselines. ``fixed``: the draw at the largest ``k``; the entry then also has
    ``fixed_entities``, the same metrics on the queries of the entities eligible there, so that every
    ``k`` is compared on one set of entities (the headline rows compare a shrinking set)."""
    if vote is not None:
        block = k_shot_block(draw, {**ranks, "final": vote["final"]}, "final", seed=seed, fixed=fixed)
        block["baselines"]["without_link_vote"] = summarise(vote["without_link_vote"])
        block["baselines"]["link_vote_only"] = summarise(vote["link_vote_only"])
        return block
    out = {
        **summarise(ranks[chosen]),
        "num_queries": draw.num_queries,
        "num_entities": draw.num_entities,
        "too_few_statements": draw.too_few_statements,
        "seed": seed,
        "baselines": {
            "no_links": summarise(ranks[NO_LINKS.key]),
            "eravg_no_text": summarise(ranks[ERAVG.key]) if draw.k else None,
        },
    }
    if fixed is not None and fixed.k:
        mask = torch.isin(draw.query_entities, fixed.eligible)
        out["fixed_entities"] = {
            **summarise(ranks[chosen][mask]),
            "num_queries": int(mask.sum()),
            "num_entities": int(len(fixed.eligible)),
            "eligible_at_k": fixed.k,
            "no_links": summarise(ranks[NO_LINKS.key][mask]),
        }
    return out


def evaluate_k_shot(
    model,
    *,
    valid: torch.Tensor,
    test: torch.Tensor,
    seen: torch.Tensor,
    filter_index: FilterIndex,
    valid_candidates: torch.Tensor,
    test_candidates: torch.Tensor,
    num_entities: int,
    ks: Sequence[int] = DEFAULT_KS,
    seed: int = 0,
    methods: Sequence[LinkMethod] | None = None,
    batch_size: int = 256,
    exclude_query: bool = False,
    temperature: float = 1.0,
    link_vote: LinkVote | None = None,
    link_vote_weights: Sequence[float] = DEFAULT_LINK_VOTE_WEIGHTS,
    link_vote_skipped: str | None = None,
) -> dict:
    """``{"k_shot": {"0": {...}, "1": {...}, ...}, "k_shot_selection": {...}}`` for ``metrics.json``.

    The way of using the links (:func:`candidate_methods`, or ``methods``) is chosen on ``valid``
    (mean MRR over the ``ks`` above 0, the same protocol and seed); the test statements are then
    ranked once per ``k`` for the chosen one and the two baselines (``no_links``, ``eravg_no_text``).
    ``temperature``: fold-in's softmax temperature (the run's ``train.temperature``).

    ``link_vote``: the training entities sharing a new entity's known links vote for their answers
    (:mod:`textkg.evaluation.link_vote`); its weight is chosen on ``valid`` after the method (from
    ``link_vote_weights``, mean MRR over ``k >= 1``; 0, the chosen method alone, wins a tie), and a
    test entry at ``k >= 1`` is then the method plus the vote, with both parts as baselines
    (``without_link_vote``, ``link_vote_only``). ``link_vote_skipped`` says why there is none.
    """
    methods = list(candidate_methods(temperature=temperature) if methods is None else methods)
    model.eval()
    with torch.no_grad():
        matrix = model.entity_matrix()

    def ranks_of(draw: KShotDraw, which: Sequence[LinkMethod], candidates: torch.Tensor) -> dict[str, torch.Tensor]:
        return k_shot_ranks(
            model,
            draw,
            which,
            filter_index=filter_index,
            candidates=candidates,
            num_entities=num_entities,
            batch_size=batch_size,
            exclude_query=exclude_query,
            seed=seed,
            matrix=matrix,
        )

    by_method: dict[str, list[float]] = {m.key: [] for m in methods}
    for k in (k for k in ks if k > 0):
        draw = draw_k_shot(valid, seen, k, num_entities=num_entities, seed=seed)
        if not draw.num_queries:
            continue
        for key, valid_ranks in ranks_of(draw, methods, valid_candidates).items():
            by_method[key].append(float(valid_ranks.double().reciprocal().mean()))
    valid_mrr = {key: sum(v) / len(v) for key, v in by_method.items() if v}
    chosen = choose(valid_mrr) if valid_mrr else NO_LINKS.key
    chosen_method = LinkMethod.from_key(chosen, temperature=temperature)

    def vote_ranks(draw: KShotDraw, candidates: torch.Tensor, weights: Sequence[float]) -> dict[str, torch.Tensor]:
        assert link_vote is not None
        base = with_known_links_many(model, draw.links, [chosen_method], seed=seed, matrix=matrix)[chosen]
        return rank_link_vote(
            LinkVoteScorer(base, link_vote, draw.links, 0.0),
            draw.queries,
            draw.head,
            draw.tail,
            filter_index=filter_index,
            candidates=candidates,
            weights=weights,
            batch_size=batch_size,
            exclude_query=exclude_query,
        )

    vote_weight, vote_valid = 0.0, {}
    if link_vote is not None:
        by_weight: dict[float, list[float]] = {float(w): [] for w in link_vote_weights}
        for k in (k for k in ks if k > 0):
            draw = draw_k_shot(valid, seen, k, num_entities=num_entities, seed=seed)
            if not draw.num_queries:
                continue
            ranked = vote_ranks(draw, valid_candidates, list(by_weight))
            for w in by_weight:
                by_weight[w].append(float(ranked[f"{w:g}"].double().reciprocal().mean()))
        vote_valid = {w: sum(v) / len(v) for w, v in by_weight.items() if v}
        vote_weight = choose_weight(vote_valid) if vote_valid else 0.0
    blocks = {}
    fixed = draw_k_shot(test, seen, max(ks), num_entities=num_entities, seed=seed)  # its entities: every k's
    for k in ks:
        draw = draw_k_shot(test, seen, k, num_entities=num_entities, seed=seed)
        test_ranks = ranks_of(draw, [NO_LINKS, ERAVG, chosen_method], test_candidates)
        vote = None
        if vote_weight and k and draw.num_queries:
            ranked = vote_ranks(draw, test_candidates, [0.0, vote_weight])
            vote = {
                "final": ranked[f"{vote_weight:g}"],
                "without_link_vote": ranked["0"],
                "link_vote_only": ranked["vote_only"],
            }
        blocks[str(k)] = k_shot_block(draw, test_ranks, chosen, seed=seed, vote=vote, fixed=fixed)
    if link_vote is None:
        vote_report: dict = {"weight": 0.0, "skipped": link_vote_skipped or "not asked"}
    else:
        vote_report = {
            "weight": vote_weight,
            "voters": link_vote.k,
            "statements_read": link_vote.num_statements,
            "valid_mrr": {f"{w:g}": m for w, m in vote_valid.items()},
            "chosen_on": "validation MRR averaged over k >= 1, after the method (0: the method alone)",
        }
    return {
        "k_shot": blocks,
        "k_shot_selection": {
            "protocol": PROTOCOL,
            "seed": seed,
            "methods": "none: the zero-shot vector; mix:c: it + k/(k+c) x (mean of the known links' relation-aware "
            "estimates - it), mix:0 = ERAvg without text; fold-in:c: Adam steps on the new vector only, softmax "
            "loss of the known links + c x squared distance to the zero-shot vector (docs/k_shot.md)",
            "chosen": chosen,
            "fold_in_temperature": temperature,
            "chosen_on": "validation MRR averaged over k >= 1 (same protocol and seed)",
            "fixed_entities": f"test.k_shot[k].fixed_entities: each k on the entities eligible at k = {max(ks)} "
            "(more statements than that), so that the rows compare one set of entities",
            "valid_mrr": valid_mrr,
            "link_vote": vote_report,
        },
    }
