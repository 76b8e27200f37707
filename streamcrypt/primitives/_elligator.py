"""Elligator 2 over Curve25519, as Monocypher 4's ``crypto_elligator_*``, byte for byte.

Theory of operation
-------------------
Elligator 2 maps a field element r (the *representative*, 254 bits on the wire) to a
curve point u, and back for about half of all points. Representatives of uniformly
random points are indistinguishable from random bytes, so an X25519 public key sent as
its representative hides that a key exchange is happening.

With the non-square 2, w = -A / (1 + 2 r^2) and u = w if w^3 + A w^2 + w is a square,
else u = -w - A. The direct map needs one inverse square root (no inversion): with
r1 = 2 r^2, r2 = 1 + r1 and t3 = (A^2 r1 - r2^2) A, isr = invsqrt(t3 r2^3) gives
u = -A t3 r2^2 isr^2 (times -2 sqrt(-1) r^2 when t3 r2^3 is not a square).

The reverse map of u exists when -2 u (u + A) is a square; then the representative is
isr * u (tweak bit 0 clear) or isr * (u + A) (bit 0 set) with isr = invsqrt(-2 u (u + A)),
negated if needed to be at most (p - 1) / 2, and the tweak's two top bits become the
representative's two padding bits. Which points can be represented depends on the point
alone, so key generation retries with fresh keys until one can.

Keys whose representatives look random must cover the whole curve, not only the
prime-order subgroup: :func:`elligator_key_pair` uses dirty public keys
(:func:`~streamcrypt.primitives.x25519_dirty_fast`) and Monocypher's seed schedule (each
try draws 64 bytes of ChaCha20 keystream from the seed: a candidate secret key and the next
seed, whose first byte is the tweak).
"""

from __future__ import annotations

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from ..abc import Buffer
from ..errors import InvalidParameterError
from ..keys import SecretKey, random_bytes
from ._field25519 import SQRTM1, A, P, fe, fe_bytes, invsqrt, key_bytes, point_bytes
from ._x25519_extras import x25519_dirty_fast

__all__ = ["elligator_key_pair", "elligator_map", "elligator_rev"]

_MASK254 = (1 << 254) - 1
_UFACTOR = -2 * SQRTM1 % P  # -non_square * sqrt(-1)
_A2 = A * A % P


def elligator_map(hidden: Buffer) -> bytes:
    """The curve point (X25519 public key) a 32-byte representative stands for.

    The two top bits are padding and ignored (``crypto_elligator_map``). Raises
    :class:`~streamcrypt.errors.InvalidPublicKeyError` for a wrong length.
    """
    raw = point_bytes(hidden, "an Elligator representative")
    r = (int.from_bytes(raw, "little") & _MASK254) % P
    r = r * r % P
    r1 = 2 * r % P
    r2 = (1 + r1) % P
    r2sq = r2 * r2 % P
    t3 = (_A2 * r1 - r2sq) * A % P
    isr, square = invsqrt(t3 * r2sq % P * r2 % P)
    u = 1 if square else r * _UFACTOR % P
    u = -u * A % P * t3 % P * r2sq % P * (isr * isr % P) % P
    return fe_bytes(u)


def elligator_rev(public_key: Buffer, tweak: int) -> bytes | None:
    """The representative of a curve point, or ``None`` if the point has none.

    ``tweak`` is a random byte: bit 0 chooses between the two representatives, bits 6-7
    become the padding (``crypto_elligator_rev``). About half of all points have no
    representative; that is an answer, not an error. Raises
    :class:`~streamcrypt.errors.InvalidPublicKeyError` for a wrong length and
    :class:`~streamcrypt.errors.InvalidParameterError` for a tweak outside 0..255.
    """
    raw = point_bytes(public_key, "a curve point")
    if not isinstance(tweak, int) or isinstance(tweak, bool) or not 0 <= tweak <= 255:
        raise InvalidParameterError(f"an Elligator tweak is one byte (0..255), got {tweak!r}")
    u = fe(raw)
    u_plus_a = (u + A) % P
    isr, square = invsqrt(-2 * u * u_plus_a)
    if not square:
        return None
    r = (u_plus_a if tweak & 1 else u) * isr % P
    if r > (P - 1) // 2:
        r = P - r
    out = bytearray(fe_bytes(r))
    out[31] |= tweak & 0xC0
    return bytes(out)


def elligator_key_pair(seed: Buffer | SecretKey | None = None) -> tuple[bytes, SecretKey]:
    """(representative, X25519 secret key) whose public key hides as random bytes.

    ``seed`` is 32 secret bytes (random when omitted); the same seed always gives the same
    pair (``crypto_elligator_key_pair``). The public key is
    ``elligator_map(representative)``; X25519 with the secret key works as usual. Raises
    :class:`~streamcrypt.errors.InvalidKeySizeError` for a seed that is not 32 bytes.
    """
    key = random_bytes(32) if seed is None else key_bytes(seed, "an Elligator seed")
    while True:
        block = Cipher(algorithms.ChaCha20(key, bytes(16)), None).encryptor().update(bytes(64))
        secret, key = block[:32], block[32:]
        hidden = elligator_rev(x25519_dirty_fast(secret), key[0])
        if hidden is not None:
            return hidden, SecretKey(secret)
