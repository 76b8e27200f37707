"""X25519 beyond key exchange: dirty public keys, the scalar inverse, EdDSA <-> X25519.

These are Monocypher 4's ``crypto_x25519_dirty_small`` / ``_dirty_fast``,
``crypto_x25519_inverse``, ``crypto_eddsa_to_x25519`` and ``crypto_x25519_to_eddsa``, run
by C Monocypher itself (see :mod:`._curve25519`): constant time, byte for byte.

Theory of operation
-------------------
- A *dirty* public key is [trim(sk)]B + [sk mod 8]T, where T is a fixed point of order 8:
  the low three bits of the secret, which clamping throws away, pick a low-order
  component. Such keys cover the whole curve (not only the prime-order subgroup), which
  Elligator needs for its representatives to look random, and X25519 with any clamped
  scalar gives the same shared secret as with the clean key.
- The scalar inverse (for OPRFs): c = 1/trim(sk) mod L, moved to a multiple of 8 with the
  same residue mod L, then u([c]P) with a raw 256-bit ladder, on the curve or its twist.
- The conversions are the birational maps u = (1 + y) / (1 - y) and y = (u - 1) / (u + 1)
  (the sign of x is dropped, and taken positive on the way back).

An all-zero result from a low-order point is refused with
:class:`~streamcrypt.errors.InvalidPublicKeyError` (Monocypher returns the zeros).
"""

from __future__ import annotations

import hashlib

from ..abc import Buffer
from ..errors import InvalidPublicKeyError
from ..keys import SecretKey, key_bytes
from ._curve25519 import native, point_bytes


def x25519_dirty_fast(secret_key: Buffer | SecretKey) -> bytes:
    """The dirty public key of ``secret_key`` (Monocypher's ``crypto_x25519_dirty_fast``).

    Compatible with X25519 (any peer's shared secret is the same as with the clean key),
    but it reveals the secret's three low bits: use it only for ephemeral keys that
    Elligator hides. The secret is touched only in C; the result is public. Raises
    :class:`InvalidKeySizeError`.
    """
    return native("crypto_x25519_dirty_fast", 32, key_bytes(secret_key, "an X25519 secret key", 32))


def x25519_dirty_small(secret_key: Buffer | SecretKey) -> bytes:
    """Monocypher's ``crypto_x25519_dirty_small``: the same key as :func:`x25519_dirty_fast`
    by one ladder over a point of order 8L (smaller code in C, slower). Raises
    :class:`InvalidKeySizeError`."""
    return native(
        "crypto_x25519_dirty_small", 32, key_bytes(secret_key, "an X25519 secret key", 32)
    )


def x25519_inverse(private_key: Buffer | SecretKey, curve_point: Buffer) -> bytes:
    """[1/trim(private_key)] ``curve_point``, cofactor cleared (``crypto_x25519_inverse``).

    Undoes an X25519 blinding: ``x25519_inverse(sk, x25519(sk, P)) == P`` for P in the
    prime-order subgroup (the OPRF use). The inversion and the ladder (on the curve or,
    for a point the peer chose, its twist) run in C; Python only compares the public
    result with zero. Raises :class:`InvalidKeySizeError`, :class:`InvalidPublicKeyError`
    (wrong length, or a low-order point: the result would be all zeros).
    """
    sk = key_bytes(private_key, "an X25519 private key", 32)
    point = point_bytes(curve_point, "a curve point")
    result = native("crypto_x25519_inverse", 32, sk, point)
    if result == bytes(32):
        raise InvalidPublicKeyError(
            "curve point is of low order: the blinded result would be all zeros"
        )
    return result


def eddsa_to_x25519(eddsa_public_key: Buffer) -> bytes:
    """The X25519 public key of an EdDSA public key (``crypto_eddsa_to_x25519``).

    Raises :class:`InvalidPublicKeyError` for a wrong length.
    """
    return native(
        "crypto_eddsa_to_x25519", 32, point_bytes(eddsa_public_key, "an EdDSA public key")
    )


def x25519_to_eddsa(x25519_public_key: Buffer) -> bytes:
    """The EdDSA public key (x taken positive) of an X25519 public key
    (``crypto_x25519_to_eddsa``). Raises :class:`InvalidPublicKeyError` for a wrong length."""
    return native(
        "crypto_x25519_to_eddsa", 32, point_bytes(x25519_public_key, "an X25519 public key")
    )


def eddsa_to_x25519_private(seed: Buffer | SecretKey) -> SecretKey:
    """The X25519 secret key matching an EdDSA-BLAKE2b seed: the first 32 bytes of
    BLAKE2b-512(seed), as Monocypher's manual derives it. Its X25519 public key equals
    :func:`eddsa_to_x25519` of the EdDSA public key. Raises :class:`InvalidKeySizeError`."""
    raw = key_bytes(seed, "an EdDSA seed", 32)
    return SecretKey(hashlib.blake2b(raw, digest_size=64).digest()[:32])
