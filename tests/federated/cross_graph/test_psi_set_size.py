"""Issue 51, item 9: a PSI peer may not test an unbounded list of guessed ids against a party's set.

On 1a0007a a responder that offered 20,000 guessed ids (step 2's ``offer``) got every one raised to the
requester's scalar and sent back (step 4), so it learned which of its guesses the requester holds: the
requester's whole entity set when the guesses covered it; 100,000 offered points cost 8.5 s of CPU.
"""

from __future__ import annotations

import time

import pytest

from textkg.errors import ConfigError
from textkg.federated.cross_graph.psi import MAX_PEER_POINTS, PSIParty, hash_to_point, peer_limit

VICTIM = [f"HP:{i:07d}" for i in range(0, 500)]


def test_a_responder_offering_20000_guesses_learns_nothing_of_the_requesters_set():
    session = "victim|attacker"
    requester = PSIParty(VICTIM, session=session)
    attacker = PSIParty([f"HP:{i:07d}" for i in range(20_000)], session=session)  # guesses covering the set
    requester.reblind(attacker.blind()[:1])  # a few points are answered as before
    requester.blind()
    offer = attacker.blind()
    start = time.process_time()
    with pytest.raises(ConfigError, match="accepts at most 2,000"):
        requester.reblind(offer)  # step 3: the requester would raise the guesses to its scalar
    assert time.process_time() - start < 1  # refused before a point is multiplied


def test_the_limit_is_a_few_times_the_partys_own_sample_within_fixed_bounds():
    assert peer_limit(10) == 1_000 and peer_limit(500) == 2_000 and peer_limit(10**6) == MAX_PEER_POINTS


def test_honest_parties_of_different_sizes_still_align():
    from textkg.federated.cross_graph.psi import private_intersection

    small, large = VICTIM[:300], [f"HP:{i:07d}" for i in range(100, 1_100)]
    t = private_intersection(PSIParty(small, session="s"), PSIParty(large, session="s"))
    assert list(t.intersection) == sorted(set(small) & set(large))
    assert hash_to_point("x", session="s") not in t.offer
