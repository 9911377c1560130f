"""The known links' vote for a new term's parents (textkg.evaluation.placement.known_links)."""

from __future__ import annotations

import torch

from textkg.data.known_links import NEW_IS_HEAD, NEW_IS_TAIL
from textkg.evaluation.placement.known_links import AnnotationVote, term_links, voted_scorer
from textkg.evaluation.placement.methods import PlacementQueries

# entities: 0 root, 1 A, 2 B, 3 a1, 4 b1, 5 disease D1, 6 disease D2, 7 new term; relations: 0 is_a, 1 has_phenotype
IS_A, HP = 0, 1
TRAIN = torch.tensor([[1, IS_A, 0], [2, IS_A, 0], [3, IS_A, 1], [4, IS_A, 2], [5, HP, 3], [6, HP, 4]])


def test_terms_sharing_a_disease_vote_for_themselves_and_their_parents():
    vote = AnnotationVote(TRAIN, IS_A, 8)
    bags = vote.bags(torch.tensor([0]), torch.tensor([5]), 1)  # the new term is annotated with D1
    v = vote(bags)[0]
    assert v[3] > 0 and v[1] > 0  # a1 (shares D1) and its parent A
    assert v[2] == 0 and v[4] == 0 and v[0] == 0  # B, b1, root: nothing in common


def test_term_links_skip_the_parent_relation_and_keep_both_roles():
    q = PlacementQueries(
        terms=torch.tensor([7]),
        parents=torch.tensor([1]),
        relation=IS_A,
        groups=(torch.arange(5),),
        group_of=torch.tensor([0]),
        true_parents={7: frozenset({1})},
        close={7: frozenset({1})},
    )
    statements = torch.tensor([[7, IS_A, 1], [5, HP, 7], [7, HP, 6], [5, HP, 3]])
    links = term_links(q, statements)
    assert sorted(map(tuple, links.tolist())) == [(7, HP, 5, NEW_IS_TAIL), (7, HP, 6, NEW_IS_HEAD)]


def test_voted_scorer_lifts_the_annotated_parent_and_weight_0_is_the_base_order():
    vote = AnnotationVote(TRAIN, IS_A, 8)
    links = torch.tensor([[7, HP, 5, NEW_IS_TAIL]])

    def base(terms, candidates):  # prefers B slightly
        return torch.tensor([[0.0, 0.0, 0.1, 0.0, 0.0]]).expand(len(terms), -1)[:, : len(candidates)]

    cands = torch.arange(5)
    plain = voted_scorer(base, vote, links, 0.0)(torch.tensor([7]), cands)
    voted = voted_scorer(base, vote, links, 4.0)(torch.tensor([7]), cands)
    assert int(plain.argmax()) == 2 and int(voted[0, [1, 2]].argmax()) == 0  # A beats B with the vote
