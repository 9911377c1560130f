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
    assert not raw & set(t.request + t.reply + t.offer + t.double_offer)
    assert not {x.encode() for x in A + B} & set(t.request + t.reply + t.offer + t.double_offer)
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


def _legendre_twist_bit(point: bytes) -> int:
    """1 if ``point``, read as a Curve25519 u-coordinate (RFC 7748), lies on the quadratic twist."""
    p = 2**255 - 19
    u = int.from_bytes(point, "little") & ((1 << 255) - 1)
    rhs = (u * u * u + 486662 * u * u + u) % p
    return int(rhs != 0 and pow(rhs, (p - 1) // 2, p) == p - 1)


def test_the_responder_cannot_tell_two_requests_apart_by_one_item_it_lacks():
    """Issue 36, item 6: the attack played as the responder. The requester holds S + {z0} or S + {z1},
    z0 and z1 outside the responder's set. The responder knows S, z0 and z1, and counts the twist
    points of the request: with the hash read as a u-coordinate, the count is the requester's
    twist-count, which blinding keeps (40 of 40 on 7add106). In a prime-order group the count says
    nothing: the responder is right about half the time."""
    import secrets

    from textkg.federated.cross_graph.psi import PSIParty, hash_to_point

    session, shared = "attack", [f"HP:{i:07d}" for i in range(30)]
    candidates = [f"OMIM:{i}" for i in range(200)]
    bits = {z: _legendre_twist_bit(hash_to_point(z, session=session)) for z in candidates}
    z0 = next(z for z in candidates if bits[z] == 0)
    z1 = next(z for z in candidates if bits[z] == 1)
    responder = PSIParty(shared + ["ORPHA:1"], session=session)
    predicted = [sum(_legendre_twist_bit(hash_to_point(x, session=session)) for x in shared + [z]) for z in (z0, z1)]
    runs, right = 60, 0
    for _ in range(runs):
        secret = secrets.randbelow(2)
        request = PSIParty(shared + [(z0, z1)[secret]], session=session).blind()
        responder.reblind(request)  # the responder's honest step (validates every point)
        count = sum(_legendre_twist_bit(p) for p in request)
        matches = [g for g in (0, 1) if predicted[g] == count]
        guess = matches[0] if len(matches) == 1 else secrets.randbelow(2)
        right += guess == secret
    assert right <= 45, f"the responder told the two sets apart in {right} of {runs} runs"


def test_received_values_outside_the_group_are_refused():
    """A point of small order, a non-canonical encoding, a wrong length or a non-point: ConfigError."""
    from nacl.bindings import crypto_core_ed25519_add

    from textkg.federated.cross_graph.psi import PSIParty

    party = PSIParty(A, session="s")
    small_order = bytes([1] + [0] * 31)  # the identity
    not_canonical = bytes([0xED] + [0xFF] * 30 + [0x7F])  # p itself, reduced would be 0
    # on the curve, outside the prime-order subgroup: H(x) plus the point of order 4 (y = 0)
    with_torsion = crypto_core_ed25519_add(hash_to_point("HP:1", session="s"), bytes(32))
    for bad in (small_order, not_canonical, with_torsion, b"\x00" * 31, "HP:1", b"\x09" + bytes(31)):
        with pytest.raises(ConfigError, match="prime-order group"):
            party.reblind([bad])


def test_the_intersection_is_right_against_plain_sets_and_an_aligned_fraction_samples_first():
    from textkg.federated.cross_graph.psi import PSIParty, keep_fraction

    a = [f"HP:{i}" for i in range(0, 600)]
    b = [f"HP:{i}" for i in range(400, 1000)]
    t = private_intersection(PSIParty(a, session="p"), PSIParty(b, session="p"))
    assert list(t.intersection) == sorted(set(a) & set(b))
    pa, pb = PSIParty(a, session="p", fraction=0.3), PSIParty(b, session="p", fraction=0.3)
    t = private_intersection(pa, pb)
    assert list(t.intersection) == keep_fraction(sorted(set(a) & set(b)), 0.3, session="p")
    # only the sample was blinded and sent: B sees |A's sample| points, not |A|
    assert len(t.request) == len(keep_fraction(sorted(a), 0.3, session="p")) < 0.4 * len(a)
    assert len(t.offer) == len(pb.items) < 0.4 * len(b)
