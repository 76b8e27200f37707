"""Curve25519 beyond X25519 and Ed25519: argument checks and C Monocypher's kernels.

Theory of operation: every curve operation here that touches a secret (a scalar, a secret
key, a seed, or a point an attacker chose combined with a secret) runs in C Monocypher 4,
which is constant time. Python only checks lengths and moves bytes; it never turns a
secret into an integer, so no big-int arithmetic (whose time depends on the values, and
whose ladders branch on bits) ever sees one.

The kernel is pymonocypher (the ``monocypher`` extra), which compiles Monocypher's own
``monocypher.c`` into its extension module. Its Python API wraps the Elligator functions;
the rest of Monocypher's curve API (dirty keys, the scalar inverse, the EdDSA scalar
helpers, the EdDSA <-> X25519 conversions) it does not wrap, but the extension exports
every ``crypto_*`` symbol, so :func:`_symbol` binds them through ctypes. That is the one
place this module reaches past pymonocypher's Python API. The reason, measured on main at
0348b29: the Python big-int code it replaces ran a 256-step ladder that branched on the
bits of a secret scalar (0.6 ms per ``x25519_inverse`` on a twist point), ``pow(x, -1, L)``
on a secret scalar and secret-indexed table lookups; neither libsodium (through PyNaCl)
nor OpenSSL offers a raw 256-bit ladder on twist points, a dirty public key or a scalar
clamp. The invariant (the symbols exist and compute Monocypher's functions) is checked by
the vectors of ``tests/vectors/monocypher`` and by ``tests/test_secrets.py``.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

from .._lazy import import_extra
from ..abc import Buffer
from ..errors import InvalidParameterError, InvalidPublicKeyError


def point_bytes(point: Buffer, what: str) -> bytes:
    """The raw 32 bytes of a public value, or :class:`InvalidPublicKeyError`."""
    if not isinstance(point, bytes | bytearray | memoryview):
        raise InvalidParameterError(f"{what} must be bytes-like, not {type(point).__name__}")
    raw = bytes(point)
    if len(raw) != 32:
        raise InvalidPublicKeyError(f"{what} must be {32} bytes, got {len(raw)}")
    return raw


@functools.cache
def monocypher() -> Any:
    """pymonocypher's module, or ImportError naming the extra."""
    return import_extra(
        "monocypher",
        "Elligator, dirty X25519 keys, the X25519 scalar inverse and EdDSA-BLAKE2b signing "
        "run on C Monocypher",
        "monocypher",
    )


@functools.cache
def _symbol(name: str) -> Callable[..., None]:
    """Monocypher's C function ``name`` from pymonocypher's extension (void, byte pointers)."""
    try:
        function = getattr(ctypes.CDLL(monocypher().__file__), name)
    except (OSError, AttributeError):  # a build whose extension exports only its init
        raise ImportError(
            f"this pymonocypher build does not export Monocypher's {name}; install the "
            "wheel or sdist from PyPI (pip install 'streamcrypt[monocypher]')"
        ) from None
    function.restype = None
    return function  # type: ignore[no-any-return]


def native(name: str, out_size: int, *args: bytes) -> bytes:
    """``name(out, *args)`` in C Monocypher: the ``out_size`` bytes it writes.

    The output buffer is wiped once copied (it may hold a secret scalar).
    """
    out = ctypes.create_string_buffer(out_size)
    _symbol(name)(out, *args)
    result = out.raw
    ctypes.memset(out, 0, out_size)
    return result
