"""Private set intersection of two parties' entity sets by commutative Diffie-Hellman blinding.

The DH-based PSI (Meadows 1986, "A more efficient cryptographic matchmaking protocol", IEEE S&P;
Huberman, Franklin & Hogg 1999, ACM EC; surveyed as "DH-based PSI" by Pinkas, Schneider & Zohner
2014, USENIX Security, §3.2), on Curve25519's x-only ladder (RFC 7748, §5), which commutes:
``X25519(a, X25519(b, u)) == X25519(b, X25519(a, u))`` for clamped scalars a, b. Semi-honest
parties; security under the decisional Diffie-Hellman assumption with the hash as a random oracle.

Protocol between a *requester* A (items X) and a *responder* B (items Y), each with a secret
scalar drawn by the OS (``X25519PrivateKey.generate``):

1. A → B: ``{H(x)^a}`` for x in X, in a random order (A keeps the order);
2. B → A: ``{(H(x)^a)^b}`` in the order received, and ``{H(y)^b}`` for y in Y in a random order;
3. A computes ``{(H(y)^b)^a}`` and keeps the x whose ``H(x)^ab`` is among them: X ∩ Y;
4. A → B: X ∩ Y (the items), which B checks against Y.

A learns X ∩ Y and |Y|; B learns X ∩ Y and |X|. Nothing else crosses: no item, no hash of an
item, no shared salt (``H`` is SHA-256 with a public domain string). ``H(z)^a`` for a guessed z is
useless to A against B's ``H(y)^b`` without b, so a party cannot test membership of an item
outside the intersection (``tests/federated/cross_graph/test_psi.py``).

``openmined-psi`` (2.0.6) was the first choice; its wheel pins ``protobuf==6.30.2`` and Flower 1.42's
gRPC stack needs ``protobuf>=6.33.5``, so it cannot be installed beside ``textkg[federated]``.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from textkg.errors import ConfigError

#: domain-separation prefix of the item hash (public; it is not a salt and protects nothing)
DOMAIN = b"textkg/cross-graph/psi/v1|"


def hash_to_point(item: str, *, session: str = "") -> bytes:
    """``H(item)``: 32 bytes read as a Curve25519 u-coordinate (RFC 7748 masks the top bit)."""
    return hashlib.sha256(DOMAIN + session.encode() + b"|" + item.encode("utf-8")).digest()


def _mul(key: X25519PrivateKey, point: bytes) -> bytes:
    """``point^key``: the X25519 function of the secret scalar and a u-coordinate."""
    return key.exchange(X25519PublicKey.from_public_bytes(point))


class PSIParty:
    """One side of the DH-PSI: a set of items and a secret scalar.

    Args:
        items: The party's items (entity identifiers); duplicates are dropped.
        session: A public string both sides use (e.g. the pair's names): hashes of different
            sessions do not match.
        key: 32 secret bytes (tests only); ``None`` draws a fresh scalar from the OS CSPRNG.
    """

    def __init__(self, items: Iterable[str], *, session: str = "", key: bytes | None = None) -> None:
        self.items = sorted(set(items))
        if not all(isinstance(x, str) for x in self.items):
            raise ConfigError("PSI items must be strings", field="items")
        self.session = session
        self._key = X25519PrivateKey.generate() if key is None else X25519PrivateKey.from_private_bytes(key)
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
        """Step 2: raise each of the other party's points to this party's scalar, order kept."""
        return [_mul(self._key, p) for p in blinded]

    def intersect(self, double_mine: Sequence[bytes], blinded_theirs: Sequence[bytes]) -> list[str]:
        """Step 3: the items of this party whose doubly blinded point the other party also holds.

        Args:
            double_mine: ``H(x)^ab`` in the order of this party's last :meth:`blind`.
            blinded_theirs: ``H(y)^b`` for the other party's items.
        """
        if len(double_mine) != len(self._order):
            raise ConfigError("PSI reply does not match the request", field="psi")
        theirs = set(self.reblind(blinded_theirs))
        return sorted(self.items[i] for i, p in zip(self._order, double_mine, strict=True) if p in theirs)

    def confirm(self, intersection: Sequence[str]) -> list[str]:
        """Step 4 at the responder: keep only claimed items that are its own."""
        mine = set(self.items)
        return sorted(x for x in intersection if x in mine)

    def key_bytes(self) -> bytes:
        """The secret scalar (for a test's transcript check only; never written anywhere)."""
        return self._key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


def keep_fraction(items: Sequence[str], fraction: float, *, session: str) -> list[str]:
    """The items whose public hash falls below ``fraction``: the same subset at both ends of a pair."""
    if fraction >= 1.0:
        return list(items)
    limit = int(fraction * 2**64)
    return [x for x in items if int.from_bytes(hash_to_point(x, session="keep|" + session)[:8], "big") < limit]


@dataclass(frozen=True)
class PSITranscript:
    """What crossed the wire in one PSI run (what each side saw of the other).

    Attributes:
        request: A → B, ``H(x)^a`` (B's view of A's set).
        reply: B → A, ``H(x)^ab`` in A's order.
        offer: B → A, ``H(y)^b`` (A's view of B's set).
        intersection: A → B, the items in both sets, sorted.
    """

    request: tuple[bytes, ...]
    reply: tuple[bytes, ...]
    offer: tuple[bytes, ...]
    intersection: tuple[str, ...]


def private_intersection(requester: PSIParty, responder: PSIParty) -> PSITranscript:
    """Run steps 1-4 between two in-process parties; both learn the sorted intersection."""
    if requester.session != responder.session:
        raise ConfigError("the two PSI parties use different sessions", field="psi")
    request = requester.blind()
    reply = responder.reblind(request)
    offer = responder.blind()
    found = requester.intersect(reply, offer)
    confirmed = responder.confirm(found)
    return PSITranscript(tuple(request), tuple(reply), tuple(offer), tuple(confirmed))
