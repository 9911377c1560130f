"""The PSI gives both parties the intersection and nothing a party could test a guess against."""

from __future__ import annotations

import pytest

from textkg.errors import ConfigError
from textkg.federated.cross_graph.psi import PSIParty, hash_to_point, private_intersection

A = [f"HP:{i:07d}" for i in range(0, 30)] + ["OMIM:1", "OMIM:2"]
B = [f"HP:{i:07d}" for i in range(20, 50)] + ["ORPHA:7"]


def test_both_parties_learn_exactly_the_intersection():
    t = private_intersection(PSIParty(A, session="s"), PSIParty(B, session="s"))
    assert list(t.intersection) == sorted(set(A) & set(B))


def test_the_transcript_reveals_only_the_intersection():
    a, b = PSIParty(A, session="s"), PSIParty(B, session="s")
    t = private_intersection(a, b)
    raw = {hash_to_point(x, session="s") for x in A + B}
    # no item and no hash of an item crosses in the clear
    assert not raw & set(t.request + t.reply + t.offer)
    assert not {x.encode() for x in A + B} & set(t.request + t.reply + t.offer)
    # B's view of A: |A| points; A's view of B: |B| points, nothing more
    assert len(t.request) == len(set(A)) and len(t.offer) == len(set(B))
    # the only points A can match are the intersection's: B's other items stay hidden from A,
    # and a guess z that A blinds with its own key never matches B's offer (it needs b)
    matched = set(a.reblind(t.offer)) & set(t.reply)
    assert len(matched) == len(t.intersection)
    guesses = set(B) - set(A)
    assert not set(a.reblind([hash_to_point(z, session="s") for z in guesses])) & set(t.offer)
    # B cannot tell which of its items A holds beyond the intersection: A's request carries
    # no point B can compute from its own items without a
    assert not set(b.reblind([hash_to_point(y, session="s") for y in B])) & set(t.request)


def test_fresh_keys_every_run_and_sessions_do_not_mix():
    t1 = private_intersection(PSIParty(A, session="s"), PSIParty(B, session="s"))
    t2 = private_intersection(PSIParty(A, session="s"), PSIParty(B, session="s"))
    assert set(t1.request).isdisjoint(t2.request)
    with pytest.raises(ConfigError):
        private_intersection(PSIParty(A, session="s"), PSIParty(B, session="t"))
    empty = private_intersection(PSIParty(["x"], session="s"), PSIParty(["y"], session="s"))
    assert empty.intersection == ()


def test_an_aligned_fraction_is_the_same_subset_at_both_ends():
    from textkg.federated.cross_graph.psi import keep_fraction

    items = [f"HP:{i}" for i in range(2000)]
    kept = keep_fraction(items, 0.3, session="a|b")
    assert kept == keep_fraction(list(reversed(items))[::-1], 0.3, session="a|b")
    assert 500 < len(kept) < 700 and set(kept) <= set(items)
    assert keep_fraction(items, 1.0, session="a|b") == items
    assert kept != keep_fraction(items, 0.3, session="a|c")
