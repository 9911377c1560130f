"""Private set intersection of two parties' entity sets by commutative Diffie-Hellman blinding.

The DH-based PSI (Meadows 1986, "A more efficient cryptographic matchmaking protocol", IEEE S&P;
Huberman, Franklin & Hogg 1999, ACM EC; surveyed as "DH-based PSI" by Pinkas, Schneider & Zohner
2014, USENIX Security, §3.2) in a group of prime order: the order-ℓ subgroup of edwards25519
(ℓ = 2^252 + 27742317777372353535851937790883648493, RFC 7748 §4.1; RFC 8032 §5.1), through
libsodium's ``crypto_core_ed25519_*`` and ``crypto_scalarmult_ed25519_noclamp`` (PyNaCl). Scalar
multiplication commutes, ``(H(x)^a)^b == (H(x)^b)^a``, and every point that crosses is a canonical
encoding of an element of that subgroup. Semi-honest parties; security under the decisional
Diffie-Hellman assumption in that group with ``H`` as a random oracle.

**The hash to the group** (:func:`hash_to_point`): SHA-512 of the item gives 64 bytes; each half is
mapped to the curve by Elligator 2 with the cofactor cleared (``crypto_core_ed25519_from_uniform``),
and the two points are added. This is the random-oracle construction of RFC 9380 (§3, ``hash_to_curve``:
two ``map_to_curve`` calls, added), and the one ristretto255's ``from_hash`` uses (RFC 9496 §4.3.4,
64 bytes, two Elligator maps, added). ristretto255 itself was the first choice: PyNaCl 1.6.2 does not
bind ``crypto_core_ristretto255_*``, and the prime-order subgroup above gives the property that is
needed here (no point outside a group of prime order, so no bit such as "on the twist" survives the
blinding). A received point that this party multiplies must lie in that group (:func:`_mul`); one it
only compares with its own products is checked for type and length.

**Why not the old x-only ladder.** Reading ``SHA-256(item)`` as a Curve25519 u-coordinate puts about
half of the items on the quadratic twist, and X25519 keeps that bit through every blinding. A
responder could then count the twist points of a request and tell apart two requester sets that
differ in one item it does not hold (tests/federated/cross_graph/test_cross_graph_psi.py replays it).

Protocol between a *requester* A (items X) and a *responder* B (items Y), each with a secret
scalar in [1, ℓ) drawn from the OS CSPRNG:

0. each side keeps the sample of its own items whose public hash falls below ``fraction``
   (:func:`keep_fraction`; the same rule at both ends), before anything is sent;
1. A → B: ``{H(x)^a}`` for x in A's sample, in a random order (A keeps the order);
2. B → A: ``{(H(x)^a)^b}`` in the order received, and ``{H(y)^b}`` for y in B's sample, shuffled;
3. A computes ``{(H(y)^b)^a}`` and keeps the x whose ``H(x)^ab`` is among them;
4. A → B: ``{(H(y)^b)^a}`` in B's order; B keeps the y whose ``H(y)^ba`` is among the ``H(x)^ab`` it
   sent. So B learns the intersection from the points, not from a list A could pad with guesses.

**The size a party accepts** (:func:`peer_limit`): each side raises the other's points to its scalar, and
that is what lets the other test membership: a peer that offered a list of guessed ids (20,000 of them
on 1a0007a) learned which of them this party holds, the whole entity set when the guesses covered it,
and 100,000 offered points cost 8.5 s of CPU. A party therefore multiplies at most
:data:`PEER_RATIO` times its own sample's size (at least :data:`MIN_PEER_POINTS`, at most
:data:`MAX_PEER_POINTS`) of a peer's points and refuses a longer list before multiplying any. A partner
still learns, for up to that many ids of its choosing, whether this party holds them: that is what a
PSI discloses; the bound keeps it to a few times the size of the party's own set.

A learns the intersection of the samples and the size of B's sample, B the same of A. Nothing else
crosses: no item, no hash of an item, no shared salt. ``aligned_fraction < 1`` therefore discloses
less than the whole intersection: a partner never sees a blinded point of an item outside the sample.

``openmined-psi`` (2.0.6) was considered; its wheel pins ``protobuf==6.30.2`` and Flower 1.42's gRPC
stack needs ``protobuf>=6.33.5``, so it cannot be installed beside ``textkg[federated]``.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nacl import bindings as sodium
from nacl.exceptions import RuntimeError as SodiumError

from textkg.errors import ConfigError

#: domain-separation prefix of the item hash (public; it is not a salt and protects nothing)
DOMAIN = b"textkg/cross-graph/psi/v2|"
#: ℓ, the prime order of the group (RFC 7748 §4.1)
GROUP_ORDER = 2**252 + 27742317777372353535851937790883648493
#: bytes of one encoded group element
POINT_BYTES = 32
#: the prefix of :func:`keep_fraction`'s public hash (unchanged from the first PSI: the same subsets)
DOMAIN_KEEP = b"textkg/cross-graph/psi/v1|"
#: a party multiplies at most PEER_RATIO × its own sample's size of a peer's points (:func:`peer_limit`) ...
PEER_RATIO = 4
#: ... at least this many (small graphs) ...
MIN_PEER_POINTS = 1_000
#: ... and at most this many (about 8 s of CPU)
MAX_PEER_POINTS = 100_000


def peer_limit(own_size: int) -> int:
    """How many of a peer's points a party of ``own_size`` items (its sample) raises to its scalar."""
    return min(MAX_PEER_POINTS, max(PEER_RATIO * own_size, MIN_PEER_POINTS))


def hash_to_point(item: str, *, session: str = "") -> bytes:
    """``H(item)``: SHA-512 to 64 bytes, two Elligator 2 maps with the cofactor cleared, added (RFC 9380 §3)."""
    digest = hashlib.sha512(DOMAIN + session.encode() + b"|" + item.encode("utf-8")).digest()
    return sodium.crypto_core_ed25519_add(
        sodium.crypto_core_ed25519_from_uniform(digest[:32]), sodium.crypto_core_ed25519_from_uniform(digest[32:])
    )


def _check_bytes(point: object) -> bytes:
    if not isinstance(point, bytes) or len(point) != POINT_BYTES:
        raise ConfigError("a PSI message holds a value that is not an element of the prime-order group", field="psi")
    return point


def random_scalar() -> bytes:
    """A secret scalar, uniform in [1, ℓ): 64 bytes from the OS CSPRNG reduced mod ℓ (bias < 2^-250)."""
    while True:
        scalar = sodium.crypto_core_ed25519_scalar_reduce(secrets.token_bytes(64))
        if any(scalar):
            return scalar


def _mul(scalar: bytes, point: object) -> bytes:
    """``point^scalar`` in the order-ℓ group (no clamping: the scalar is already in [1, ℓ)).

    libsodium's ``crypto_scalarmult_ed25519_noclamp`` refuses a non-canonical encoding, a point of
    small order, a point outside the prime-order subgroup, and an identity result: a peer cannot send
    a value that leaks or cancels bits of the scalar. Refused: ConfigError."""
    try:
        return sodium.crypto_scalarmult_ed25519_noclamp(scalar, _check_bytes(point))
    except SodiumError:
        raise ConfigError(
            "a PSI message holds a value that is not an element of the prime-order group", field="psi"
        ) from None


class PSIParty:
    """One side of the DH-PSI: a sample of a set of items and a secret scalar.

    Args:
        items: The party's items (entity identifiers); duplicates are dropped.
        session: A public string both sides use (e.g. the pair's names): hashes of different
            sessions do not match.
        fraction: Keep only the items whose public hash falls below it (:func:`keep_fraction`),
            before anything is blinded or sent.
        key: 32 secret bytes, a little-endian scalar in [1, ℓ) (tests only); ``None`` draws one.
    """

    def __init__(
        self, items: Iterable[str], *, session: str = "", fraction: float = 1.0, key: bytes | None = None
    ) -> None:
        items = sorted(set(items))
        if not all(isinstance(x, str) for x in items):
            raise ConfigError("PSI items must be strings", field="items")
        self.session = session
        self.items = keep_fraction(items, fraction, session=session)
        if key is not None and not (len(key) == 32 and 0 < int.from_bytes(key, "little") < GROUP_ORDER):
            raise ConfigError("a PSI key is a 32-byte little-endian scalar in [1, ℓ)", field="key")
        self._key = random_scalar() if key is None else bytes(key)
        self._order: list[int] = []

    @property
    def size(self) -> int:
        return len(self.items)

    def blind(self) -> list[bytes]:
        """Step 1 (or B's half of step 2): ``H(x)^k`` for every item, in a secret random order."""
        order = list(range(len(self.items)))
        secrets.SystemRandom().shuffle(order)
        self._order = order
        return [_mul(self._key, hash_to_point(self.items[i], session=self.session)) for i in order]

    def reblind(self, blinded: Sequence[bytes]) -> list[bytes]:
        """Step 2: raise each of the other party's points to this party's scalar, order kept.

        Raises:
            ConfigError: More points than :func:`peer_limit` allows (before any is multiplied), or a
                value that is not an element of the group (:func:`_mul`)."""
        limit = peer_limit(self.size)
        if len(blinded) > limit:
            raise ConfigError(
                f"the peer sent {len(blinded):,} points; a party with {self.size:,} ids accepts at most {limit:,} "
                f"({PEER_RATIO} times its own, at least {MIN_PEER_POINTS:,}, at most {MAX_PEER_POINTS:,}): "
                "a longer list would test ids of the peer's choosing against this party's set",
                field="psi",
            )
        return [_mul(self._key, p) for p in blinded]

    def intersect(self, double_mine: Sequence[bytes], blinded_theirs: Sequence[bytes]) -> list[str]:
        """Step 3 (the requester): the items of this party whose doubly blinded point the other also holds.

        Args:
            double_mine: ``H(x)^ab`` in the order of this party's last :meth:`blind`.
            blinded_theirs: ``H(y)^b`` for the other party's items.
        """
        return self.match(double_mine, self.reblind(blinded_theirs))

    def match(self, double_mine: Sequence[bytes], double_theirs: Sequence[bytes]) -> list[str]:
        """The items of this party whose ``H(x)^ab`` (in its last :meth:`blind`'s order) is in ``double_theirs``.

        The responder's step 4: ``double_mine`` is ``(H(y)^b)^a`` from the requester, ``double_theirs``
        the reply it sent."""
        if len(double_mine) != len(self._order):
            raise ConfigError("a PSI message does not match the points this party sent", field="psi")
        theirs = set(double_theirs)  # this party's own products
        mine = [_check_bytes(p) for p in double_mine]  # the peer's: only compared, never multiplied
        return sorted(self.items[i] for i, p in zip(self._order, mine, strict=True) if p in theirs)


def keep_fraction(items: Sequence[str], fraction: float, *, session: str) -> list[str]:
    """The items whose public hash falls below ``fraction``: the same subset at both ends of a pair.

    Each party applies it to its OWN items before the PSI (:class:`PSIParty`), so the sample of the
    intersection is the intersection of the samples, and nothing outside them is blinded or sent."""
    if fraction >= 1.0:
        return list(items)
    limit = int(fraction * 2**64)
    prefix = DOMAIN_KEEP + b"keep|" + session.encode() + b"|"
    return [x for x in items if int.from_bytes(hashlib.sha256(prefix + x.encode("utf-8")).digest()[:8], "big") < limit]


@dataclass(frozen=True)
class PSITranscript:
    """What crossed the wire in one PSI run (what each side saw of the other).

    Attributes:
        request: A → B, ``H(x)^a`` (B's view of A's sample).
        reply: B → A, ``H(x)^ab`` in A's order.
        offer: B → A, ``H(y)^b`` (A's view of B's sample).
        double_offer: A → B, ``H(y)^ba`` in B's order.
        intersection: the items in both samples, sorted (what each side found).
    """

    request: tuple[bytes, ...]
    reply: tuple[bytes, ...]
    offer: tuple[bytes, ...]
    double_offer: tuple[bytes, ...]
    intersection: tuple[str, ...]


def private_intersection(requester: PSIParty, responder: PSIParty) -> PSITranscript:
    """Run steps 1-4 between two in-process parties; both learn the sorted intersection."""
    if requester.session != responder.session:
        raise ConfigError("the two PSI parties use different sessions", field="psi")
    request = requester.blind()
    reply = responder.reblind(request)
    offer = responder.blind()
    double_offer = requester.reblind(offer)
    found = requester.match(reply, double_offer)
    confirmed = responder.match(double_offer, reply)
    if found != confirmed:  # cannot happen between honest parties
        raise ConfigError("the two PSI parties found different intersections", field="psi")
    return PSITranscript(tuple(request), tuple(reply), tuple(offer), tuple(double_offer), tuple(confirmed))
