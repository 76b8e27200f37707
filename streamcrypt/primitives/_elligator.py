"""Elligator 2 over Curve25519: Monocypher 4's ``crypto_elligator_*``, run by C Monocypher.

Theory of operation
-------------------
Elligator 2 maps a field element r (the *representative*, 254 bits on the wire) to a
curve point u, and back for about half of all points. Representatives of uniformly
random points are indistinguishable from random bytes, so an X25519 public key sent as
its representative hides that a key exchange is happening.

With the non-square 2, w = -A / (1 + 2 r^2) and u = w if w^3 + A w^2 + w is a square,
else u = -w - A. The reverse map of u exists when -2 u (u + A) is a square; the tweak's
bit 0 picks one of the two representatives and its two top bits become the
representative's padding. Which points can be represented depends on the point alone,
so key generation retries with fresh keys until one can.

Keys whose representatives look random must cover the whole curve, not only the
prime-order subgroup: :func:`elligator_key_pair` uses dirty public keys
(:func:`~streamcrypt.primitives.x25519_dirty_fast`) and Monocypher's seed schedule.

All three functions run in C Monocypher (pymonocypher's API, see :mod:`._curve25519`),
because the values they handle are secret until they are sent: the representative and
the tweak choose which of two roots is sent, and a key pair's secret key and seed never
leave C as integers.
"""

from __future__ import annotations

from ..abc import Buffer
from ..errors import InvalidParameterError
from ..keys import SecretKey, key_bytes, random_bytes
from ._curve25519 import monocypher, point_bytes


def elligator_map(hidden: Buffer) -> bytes:
    """The curve point (X25519 public key) a 32-byte representative stands for.

    The two top bits are padding and ignored (``crypto_elligator_map``). Raises
    :class:`~streamcrypt.errors.InvalidPublicKeyError` for a wrong length.
    """
    raw = point_bytes(hidden, "an Elligator representative")
    return bytes(monocypher().elligator_map(raw))


def elligator_rev(public_key: Buffer, tweak: int) -> bytes | None:
    """The representative of a curve point, or ``None`` if the point has none.

    ``tweak`` is a random byte: bit 0 chooses between the two representatives, bits 6-7
    become the padding (``crypto_elligator_rev``). About half of all points have no
    representative; that is an answer, not an error (whether a point has one depends on
    the public point alone). Raises :class:`~streamcrypt.errors.InvalidPublicKeyError` for
    a wrong length and :class:`~streamcrypt.errors.InvalidParameterError` for a tweak
    outside 0..255.
    """
    raw = point_bytes(public_key, "a curve point")
    if not isinstance(tweak, int) or isinstance(tweak, bool) or not 0 <= tweak <= 255:
        raise InvalidParameterError(f"an Elligator tweak is one byte (0..255), got {tweak!r}")
    try:
        return bytes(monocypher().elligator_rev(raw, tweak))
    except ValueError:  # pymonocypher: this point has no representative
        return None


def elligator_key_pair(seed: Buffer | SecretKey | None = None) -> tuple[bytes, SecretKey]:
    """(representative, X25519 secret key) whose public key hides as random bytes.

    ``seed`` is 32 secret bytes (random when omitted); the same seed always gives the same
    pair (``crypto_elligator_key_pair``). The public key is
    ``elligator_map(representative)``; X25519 with the secret key works as usual. Raises
    :class:`~streamcrypt.errors.InvalidKeySizeError` for a seed that is not 32 bytes.
    """
    key = random_bytes(32) if seed is None else key_bytes(seed, "an Elligator seed", 32)
    hidden, secret = monocypher().elligator_key_pair(key)
    return bytes(hidden), SecretKey(bytes(secret))
