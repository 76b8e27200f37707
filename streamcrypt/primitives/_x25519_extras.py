"""X25519 beyond key exchange: dirty public keys, the scalar inverse, EdDSA <-> X25519.

These are Monocypher 4's ``crypto_x25519_dirty_small`` / ``_dirty_fast``,
``crypto_x25519_inverse``, ``crypto_eddsa_to_x25519`` and ``crypto_x25519_to_eddsa``,
byte for byte.

Theory of operation
-------------------
- A *dirty* public key is [trim(sk)]B + [sk mod 8]T, where T is a fixed point of order 8:
  the low three bits of the secret, which clamping throws away, pick a low-order
  component. Such keys cover the whole curve (not only the prime-order subgroup), which
  Elligator needs for its representatives to look random, and X25519 with any clamped
  scalar gives the same shared secret as with the clean key. The scalar multiplication
  runs in libsodium's Edwards arithmetic (PyNaCl), the low-order point is added there too,
  and the Edwards y becomes the Montgomery u = (1 + y) / (1 - y) here. Monocypher's two
  variants compute the same key two ways; here one function serves both names.
- The scalar inverse (for OPRFs): c = 1/trim(sk) mod L, moved to a multiple of 8 with the
  same residue mod L (c + L * (3c mod 8)), then u([c]P) with the raw 256-bit ladder. For a
  point on the curve [c]P depends only on c mod 8L and u([-c]P) = u([c]P), so c or 8L - c
  is a clamped scalar and libsodium's X25519 computes it; for a point on the twist (or in
  the 2^-127 case where neither fits) the Python ladder does.
- The conversions are the birational maps u = (1 + y) / (1 - y) and y = (u - 1) / (u + 1)
  (the sign of x is dropped, and taken positive on the way back).

An all-zero result from a low-order point is refused with
:class:`~streamcrypt.errors.InvalidPublicKeyError` (Monocypher returns the zeros).
"""

from __future__ import annotations

import functools
import hashlib

from nacl import bindings as _sodium
from nacl import exceptions as _nacl_exc

from ..abc import Buffer
from ..errors import InvalidPublicKeyError
from ..keys import SecretKey
from ._field25519 import (
    SQRTM1,
    A,
    D,
    L,
    P,
    edwards_add,
    edwards_encode,
    fe,
    fe_bytes,
    invert,
    invsqrt,
    key_bytes,
    ladder,
    point_bytes,
    trim_scalar,
)

__all__ = [
    "eddsa_to_x25519",
    "eddsa_to_x25519_private",
    "x25519_dirty_fast",
    "x25519_dirty_small",
    "x25519_inverse",
    "x25519_to_eddsa",
]


def _sqrt(v: int) -> int:
    isr, ok = invsqrt(v)
    if not ok:
        raise AssertionError("not a square")  # only called on known squares
    return v * isr % P


@functools.cache
def _low_order_points() -> tuple[bytes, ...]:
    """Encodings of [k]T for k = 0..7, T the order-8 point with both coordinates below
    p/2 (x^2 = (1 + sqrt(d + 1)) / d, y = -x sqrt(-1)): Monocypher's choice."""
    s = _sqrt(D + 1)
    x2 = (1 + s) * invert(D) % P
    if not invsqrt(x2)[1]:
        x2 = (1 - s) * invert(D) % P
    x = _sqrt(x2)
    if x > P // 2:
        x = P - x
    t = (x, -x * SQRTM1 % P)
    points = [(0, 1)]
    for _ in range(7):
        points.append(edwards_add(points[-1], t))
    return tuple(edwards_encode(q) for q in points)


def _montgomery_u(edwards: bytes) -> bytes:
    y = fe(edwards)
    return fe_bytes((1 + y) * invert(1 - y))


def x25519_dirty_fast(secret_key: Buffer | SecretKey) -> bytes:
    """The dirty public key of ``secret_key`` (Monocypher's ``crypto_x25519_dirty_fast``).

    Compatible with X25519 (any peer's shared secret is the same as with the clean key),
    but it reveals the secret's three low bits: use it only for ephemeral keys that
    Elligator hides. Raises :class:`InvalidKeySizeError`.
    """
    sk = key_bytes(secret_key, "an X25519 secret key")
    main = _sodium.crypto_scalarmult_ed25519_base_noclamp(trim_scalar(sk).to_bytes(32, "little"))
    low = _low_order_points()[sk[0] & 7]
    return _montgomery_u(_sodium.crypto_core_ed25519_add(main, low))


def x25519_dirty_small(secret_key: Buffer | SecretKey) -> bytes:
    """Monocypher's ``crypto_x25519_dirty_small``: the same key as :func:`x25519_dirty_fast`
    (Monocypher's two variants trade code size for speed; here one kernel serves both)."""
    return x25519_dirty_fast(secret_key)


def _native_x25519(k: int, point: bytes) -> int:
    """u([k]P) for a clamped ``k`` by libsodium; 0 for a low-order result."""
    try:
        return fe(_sodium.crypto_scalarmult(k.to_bytes(32, "little"), point))
    except _nacl_exc.RuntimeError:  # libsodium refuses an all-zero result
        return 0


def x25519_inverse(private_key: Buffer | SecretKey, curve_point: Buffer) -> bytes:
    """[1/trim(private_key)] ``curve_point``, cofactor cleared (``crypto_x25519_inverse``).

    Undoes an X25519 blinding: ``x25519_inverse(sk, x25519(sk, P)) == P`` for P in the
    prime-order subgroup (the OPRF use). Raises :class:`InvalidKeySizeError`,
    :class:`InvalidPublicKeyError` (wrong length, or a low-order point: the result would
    be all zeros).
    """
    sk = key_bytes(private_key, "an X25519 private key")
    point = point_bytes(curve_point, "a curve point")
    inv = pow(trim_scalar(sk) % L, -1, L)  # trim(sk) is never a multiple of L
    cleared = inv + L * ((3 * inv) & 7)  # same residue mod L, a multiple of 8
    u = fe(point)
    result: int | None = None
    if invsqrt(u * (u * u + A * u + 1))[1]:  # on the curve, not the twist
        for k in (cleared, 8 * L - cleared):
            if 1 << 254 <= k < 1 << 255:
                result = _native_x25519(k, point)
                break
    if result is None:
        result = ladder(cleared, u, 256)
    if result == 0:
        raise InvalidPublicKeyError(
            "curve point is of low order: the blinded result would be all zeros"
        )
    return fe_bytes(result)


def eddsa_to_x25519(eddsa_public_key: Buffer) -> bytes:
    """The X25519 public key of an EdDSA public key (``crypto_eddsa_to_x25519``).

    Raises :class:`InvalidPublicKeyError` for a wrong length.
    """
    return _montgomery_u(point_bytes(eddsa_public_key, "an EdDSA public key"))


def x25519_to_eddsa(x25519_public_key: Buffer) -> bytes:
    """The EdDSA public key (x taken positive) of an X25519 public key
    (``crypto_x25519_to_eddsa``). Raises :class:`InvalidPublicKeyError` for a wrong length."""
    u = fe(point_bytes(x25519_public_key, "an X25519 public key"))
    return fe_bytes((u - 1) * invert(u + 1))


def eddsa_to_x25519_private(seed: Buffer | SecretKey) -> SecretKey:
    """The X25519 secret key matching an EdDSA-BLAKE2b seed: the first 32 bytes of
    BLAKE2b-512(seed), as Monocypher's manual derives it. Its X25519 public key equals
    :func:`eddsa_to_x25519` of the EdDSA public key. Raises :class:`InvalidKeySizeError`."""
    raw = key_bytes(seed, "an EdDSA seed")
    return SecretKey(hashlib.blake2b(raw, digest_size=64).digest()[:32])
