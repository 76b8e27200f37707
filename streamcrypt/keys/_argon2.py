"""Argon2d, Argon2i and Argon2id (RFC 9106) with every input: lanes, secret key, data.

:func:`~streamcrypt.keys.derive_key_from_password` covers the common case (Argon2id, one
lane, libsodium). :func:`argon2` is the whole of RFC 9106, as Monocypher's
``crypto_argon2`` offers it: the three variants, several lanes, an optional secret key
(pepper) and associated data. It runs on the reference C implementation through
argon2-cffi (the ``argon2`` extra), whose lanes run on threads; the output is the same as
Monocypher's and libsodium's for the same inputs.

Memory is given in KiB blocks (``blocks``, Monocypher's ``nb_blocks``), at least 8 per
lane; like every Argon2 implementation the reference rounds it down to a multiple of
4 x lanes.
"""

from __future__ import annotations

from typing import Any, Literal

from .._lazy import import_extra
from ..abc import Buffer
from ..errors import InvalidParameterError, LimitExceededError
from ._secret import SecretKey, secret_text_bytes

#: The Argon2 variants :func:`argon2` computes.
Argon2Variant = Literal["argon2d", "argon2i", "argon2id"]
#: RFC 9106 type numbers (and Monocypher's ``CRYPTO_ARGON2_D/I/ID``).
ARGON2_VARIANTS: dict[str, int] = {"argon2d": 0, "argon2i": 1, "argon2id": 2}

_MEMORY_ALLOCATION_ERROR = -22
_U32 = (1 << 32) - 1


def _int_in(value: object, low: int, high: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidParameterError(f"{what} must be an integer in {low}..{high}, got {value!r}")
    return value


def _bytes(value: Buffer, what: str) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise InvalidParameterError(f"{what} must be bytes-like, not {type(value).__name__}")
    return bytes(value)


def argon2(
    password: str | Buffer,
    salt: Buffer,
    *,
    variant: Argon2Variant = "argon2id",
    passes: int,
    blocks: int,
    lanes: int = 1,
    length: int = 32,
    key: Buffer = b"",
    ad: Buffer = b"",
) -> SecretKey:
    """The Argon2 hash of ``password`` (RFC 9106, version 0x13) as a key of ``length`` bytes.

    ``variant`` is ``"argon2d"``, ``"argon2i"`` or ``"argon2id"``; ``passes`` >= 1;
    ``blocks`` is memory in KiB, >= 8 x ``lanes``; ``salt`` at least 8 bytes (16
    recommended); ``key`` and ``ad`` are RFC 9106's secret and associated data. Raises
    :class:`InvalidParameterError` for anything out of range and
    :class:`LimitExceededError` when the memory cannot be allocated.
    """
    if variant not in ARGON2_VARIANTS:
        raise InvalidParameterError(
            f"Argon2 variant must be one of {', '.join(ARGON2_VARIANTS)}, got {variant!r}"
        )
    pw = secret_text_bytes(password, "a password")
    salt_b, key_b, ad_b = _bytes(salt, "salt"), _bytes(key, "key"), _bytes(ad, "ad")
    lanes = _int_in(lanes, 1, (1 << 24) - 1, "Argon2 lanes")
    passes = _int_in(passes, 1, _U32, "Argon2 passes")
    blocks = _int_in(blocks, 8 * lanes, _U32, "Argon2 blocks (KiB, at least 8 per lane)")
    length = _int_in(length, 4, _U32, "Argon2 output length")
    if len(salt_b) < 8:
        raise InvalidParameterError(f"an Argon2 salt must be at least 8 bytes, got {len(salt_b)}")
    ll = import_extra(
        "argon2.low_level",
        "Argon2d/Argon2i (and Argon2id with lanes, a key or data) need argon2-cffi",
        "argon2",
    )
    ffi = ll.ffi

    def buf(data: bytes) -> Any:
        return ffi.new("uint8_t[]", data) if data else ffi.NULL

    out = ffi.new("uint8_t[]", length)
    # The context holds raw pointers: these names keep the buffers alive until the call ends.
    pwd_c, salt_c, key_c, ad_c = buf(pw), buf(salt_b), buf(key_b), buf(ad_b)
    ctx = ffi.new(
        "argon2_context *",
        {
            "out": out,
            "outlen": length,
            "pwd": pwd_c,
            "pwdlen": len(pw),
            "salt": salt_c,
            "saltlen": len(salt_b),
            "secret": key_c,
            "secretlen": len(key_b),
            "ad": ad_c,
            "adlen": len(ad_b),
            "t_cost": passes,
            "m_cost": blocks,
            "lanes": lanes,
            "threads": lanes,
            "version": ll.ARGON2_VERSION,
            "allocate_cbk": ffi.NULL,
            "free_cbk": ffi.NULL,
            "flags": 0,
        },
    )
    rc = ll.core(ctx, ARGON2_VARIANTS[variant])
    del pwd_c, salt_c, key_c, ad_c
    if rc == _MEMORY_ALLOCATION_ERROR:
        raise LimitExceededError(f"Argon2 could not allocate {blocks} KiB of memory")
    if rc != 0:
        raise InvalidParameterError(f"Argon2 refused its parameters: {ll.error_to_str(rc)}")
    raw = bytes(ffi.buffer(out, length))
    ffi.memmove(out, bytes(length), length)
    return SecretKey(raw)
