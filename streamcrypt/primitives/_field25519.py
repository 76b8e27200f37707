"""Arithmetic over GF(2^255 - 19) and Curve25519 helpers, in Python integers.

Theory of operation: the curve operations Monocypher offers beyond X25519 and Ed25519
(Elligator 2, dirty public keys, scalar inverse, EdDSA <-> X25519 conversion) are
per-key operations on a handful of field elements. Scalar multiplications run natively
(libsodium's Edwards arithmetic through PyNaCl, OpenSSL's X25519); what is left to Python
is a few field multiplications, one inversion or one inverse square root per call, here.

:func:`key_bytes` and :func:`point_bytes` are the argument checks every curve function
shares (32 bytes, typed errors). Encodings follow Monocypher's ``fe_frombytes``/``fe_tobytes``: 32 bytes little-endian, the
top bit ignored on input, values at or above p taken modulo p, canonical output.

The inverse square root is Monocypher's ``invsqrt`` contract: for x a non-zero square,
a square root of 1/x; for a non-square, a square root of sqrt(-1)/x; for zero, zero
(reported as a square). Callers only use its square or normalise its sign, so the root
chosen does not matter.
"""

from __future__ import annotations

from ..abc import Buffer
from ..errors import InvalidKeySizeError, InvalidParameterError, InvalidPublicKeyError
from ..keys import SecretKey

__all__ = [
    "SQRTM1",
    "A",
    "D",
    "L",
    "P",
    "edwards_add",
    "edwards_encode",
    "fe",
    "fe_bytes",
    "invert",
    "invsqrt",
    "is_negative",
    "key_bytes",
    "ladder",
    "point_bytes",
    "trim_scalar",
]

#: The field prime.
P = (1 << 255) - 19
#: Order of the prime-order subgroup (the base point's order).
L = (1 << 252) + 27742317777372353535851937790883648493
#: Montgomery coefficient of Curve25519 (v^2 = u^3 + A u^2 + u).
A = 486662
#: Edwards coefficient of edwards25519 (-x^2 + y^2 = 1 + d x^2 y^2).
D = (-121665 * pow(121666, -1, P)) % P
#: The square root of -1 that Monocypher and libsodium use (2^((p-1)/4)).
SQRTM1 = pow(2, (P - 1) // 4, P)

_MASK255 = (1 << 255) - 1


def key_bytes(key: Buffer | SecretKey, what: str) -> bytes:
    """The raw 32 bytes of a secret, or :class:`InvalidKeySizeError` naming ``what``."""
    if isinstance(key, SecretKey):
        raw = key.secret_bytes()
    elif isinstance(key, bytes | bytearray | memoryview):
        raw = bytes(key)
    else:
        raise InvalidParameterError(f"{what} must be bytes-like, not {type(key).__name__}")
    if len(raw) != 32:
        raise InvalidKeySizeError(f"{what} must be {32} bytes, got {len(raw)}")
    return raw


def point_bytes(point: Buffer, what: str) -> bytes:
    """The raw 32 bytes of a public value, or :class:`InvalidPublicKeyError`."""
    if not isinstance(point, bytes | bytearray | memoryview):
        raise InvalidParameterError(f"{what} must be bytes-like, not {type(point).__name__}")
    raw = bytes(point)
    if len(raw) != 32:
        raise InvalidPublicKeyError(f"{what} must be {32} bytes, got {len(raw)}")
    return raw


def fe(data: Buffer) -> int:
    """A field element from 32 bytes (top bit ignored, reduced modulo p)."""
    return (int.from_bytes(data, "little") & _MASK255) % P


def fe_bytes(x: int) -> bytes:
    """The canonical 32-byte encoding of ``x``."""
    return (x % P).to_bytes(32, "little")


def is_negative(x: int) -> bool:
    """Monocypher's sign: odd canonical value."""
    return bool((x % P) & 1)


def invert(x: int) -> int:
    """1/x, with 0 mapped to 0 (as Monocypher's ``fe_invert`` does)."""
    x %= P
    return pow(x, -1, P) if x else 0


def _pow22523(x: int) -> int:
    """x^((p-5)/8) = x^(2^252 - 3), by an addition chain (about half the cost of pow)."""
    p = P

    def sq(v: int, n: int) -> int:
        for _ in range(n):
            v = v * v % p
        return v

    x2 = x * x % p
    x9 = sq(x2, 2) * x % p
    x11 = x9 * x2 % p
    e5 = x11 * x11 % p * x9 % p  # 2^5 - 1
    e10 = sq(e5, 5) * e5 % p
    e20 = sq(e10, 10) * e10 % p
    e40 = sq(e20, 20) * e20 % p
    e50 = sq(e40, 10) * e10 % p
    e100 = sq(e50, 50) * e50 % p
    e200 = sq(e100, 100) * e100 % p
    e250 = sq(e200, 50) * e50 % p
    return sq(e250, 2) * x % p


def invsqrt(x: int) -> tuple[int, bool]:
    """(isr, is_square) as Monocypher's ``invsqrt`` (see the module docstring)."""
    x %= P
    t0 = _pow22523(x)
    quartic = t0 * t0 % P * x % P
    if quartic in (P - 1, P - SQRTM1):
        t0 = t0 * SQRTM1 % P
    return t0, x == 0 or quartic in (1, P - 1)


def trim_scalar(data: Buffer) -> int:
    """Monocypher's ``crypto_eddsa_trim_scalar`` (X25519 clamping) as an integer."""
    k = int.from_bytes(data, "little")
    return (k & ~7 & _MASK255) | (1 << 254)


# --------------------------------------------------------------------------- Edwards


def edwards_encode(point: tuple[int, int]) -> bytes:
    """The canonical encoding of an affine point."""
    x, y = point
    out = bytearray(fe_bytes(y))
    out[31] |= is_negative(x) << 7
    return bytes(out)


def edwards_add(p1: tuple[int, int], p2: tuple[int, int]) -> tuple[int, int]:
    """Affine addition on edwards25519 (complete formulas; only used on constants)."""
    x1, y1 = p1
    x2, y2 = p2
    t = D * x1 % P * x2 % P * y1 % P * y2 % P
    x3 = (x1 * y2 + y1 * x2) * invert(1 + t) % P
    y3 = (y1 * y2 + x1 * x2) * invert(1 - t) % P
    return x3, y3


# ------------------------------------------------------------------------- Montgomery


def ladder(k: int, u: int, bits: int) -> int:
    """u([k]P) on Curve25519 or its twist, the Montgomery ladder over ``bits`` bits.

    The raw scalar multiplication (no clamping) for the cases the native X25519 kernels
    cannot express. A few milliseconds: used only where the native path does not apply.
    """
    p = P
    x1 = u % p
    x2, z2, x3, z3 = 1, 0, x1, 1
    swap = 0
    for pos in range(bits - 1, -1, -1):
        bit = (k >> pos) & 1
        if swap ^ bit:
            x2, x3, z2, z3 = x3, x2, z3, z2
        swap = bit
        a = x2 + z2
        aa = a * a % p
        b = x2 - z2
        bb = b * b % p
        e = aa - bb
        c = x3 + z3
        d = x3 - z3
        da = d * a % p
        cb = c * b % p
        x3 = (da + cb) ** 2 % p
        z3 = x1 * ((da - cb) ** 2 % p) % p
        x2 = aa * bb % p
        z2 = e * (aa + 121665 * e) % p
    if swap:
        x2, z2 = x3, z3
    return x2 * invert(z2) % p
