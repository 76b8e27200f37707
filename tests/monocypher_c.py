"""C Monocypher 4 as a test oracle: the functions pymonocypher's extension exports.

pymonocypher (a test dependency) compiles Monocypher's own ``monocypher.c`` into its
extension module, whose dynamic symbol table exports every ``crypto_*`` function. Its
Python API covers only part of Monocypher (no DJB/IETF incremental AEAD, no dirty keys,
no scalar inverse, Argon2i only), so the tests call the C functions directly through
ctypes, with the structure layouts of ``monocypher.h``. If the symbols are missing this
module fails at import: a test that cannot reach C Monocypher fails, it never skips.
"""

from __future__ import annotations

import ctypes

import monocypher

_lib = ctypes.CDLL(monocypher.__file__)
_u8p = ctypes.c_char_p
_size = ctypes.c_size_t


class AeadCtx(ctypes.Structure):
    _fields_ = [
        ("counter", ctypes.c_uint64),
        ("key", ctypes.c_uint8 * 32),
        ("nonce", ctypes.c_uint8 * 8),
    ]


class _Argon2Config(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in ("algorithm", "nb_blocks", "nb_passes", "nb_lanes")]


class _Argon2Inputs(ctypes.Structure):
    _fields_ = [
        ("pass_", _u8p),
        ("salt", _u8p),
        ("pass_size", ctypes.c_uint32),
        ("salt_size", ctypes.c_uint32),
    ]


class _Argon2Extras(ctypes.Structure):
    _fields_ = [
        ("key", _u8p),
        ("ad", _u8p),
        ("key_size", ctypes.c_uint32),
        ("ad_size", ctypes.c_uint32),
    ]


def _out(n: int) -> ctypes.Array[ctypes.c_char]:
    return ctypes.create_string_buffer(n)


def _fn1(name: str):  # type: ignore[no-untyped-def]
    """out[32] = f(in[32])."""
    f = getattr(_lib, name)
    f.restype = None

    def call(data: bytes) -> bytes:
        out = _out(32)
        f(out, bytes(data))
        return out.raw

    return call


x25519_dirty_fast = _fn1("crypto_x25519_dirty_fast")
x25519_dirty_small = _fn1("crypto_x25519_dirty_small")
x25519_public_key = _fn1("crypto_x25519_public_key")
eddsa_to_x25519 = _fn1("crypto_eddsa_to_x25519")
x25519_to_eddsa = _fn1("crypto_x25519_to_eddsa")
elligator_map = _fn1("crypto_elligator_map")


def x25519(sk: bytes, pk: bytes) -> bytes:
    out = _out(32)
    _lib.crypto_x25519(out, sk, pk)
    return out.raw


def x25519_inverse(sk: bytes, point: bytes) -> bytes:
    out = _out(32)
    _lib.crypto_x25519_inverse(out, sk, point)
    return out.raw


def elligator_rev(point: bytes, tweak: int) -> bytes | None:
    out = _out(32)
    rc = _lib.crypto_elligator_rev(out, point, ctypes.c_uint8(tweak))
    return None if rc else out.raw


def elligator_key_pair(seed: bytes) -> tuple[bytes, bytes]:
    hidden, secret = _out(32), _out(32)
    _lib.crypto_elligator_key_pair(hidden, secret, ctypes.create_string_buffer(seed, 32))
    return hidden.raw, secret.raw


def eddsa_key_pair(seed: bytes) -> tuple[bytes, bytes]:
    sk, pk = _out(64), _out(32)
    _lib.crypto_eddsa_key_pair(sk, pk, ctypes.create_string_buffer(seed, 32))
    return sk.raw, pk.raw


def eddsa_sign(secret64: bytes, message: bytes) -> bytes:
    out = _out(64)
    _lib.crypto_eddsa_sign(out, secret64, message, _size(len(message)))
    return out.raw


def eddsa_check(signature: bytes, public: bytes, message: bytes) -> bool:
    return _lib.crypto_eddsa_check(signature, public, message, _size(len(message))) == 0


def chacha20_djb(data: bytes, key: bytes, nonce8: bytes, counter: int) -> bytes:
    out = _out(len(data))
    _lib.crypto_chacha20_djb.restype = ctypes.c_uint64
    _lib.crypto_chacha20_djb(out, data, _size(len(data)), key, nonce8, ctypes.c_uint64(counter))
    return out.raw[: len(data)]


def chacha20_ietf(data: bytes, key: bytes, nonce12: bytes, counter: int) -> bytes:
    out = _out(len(data))
    _lib.crypto_chacha20_ietf.restype = ctypes.c_uint32
    _lib.crypto_chacha20_ietf(out, data, _size(len(data)), key, nonce12, ctypes.c_uint32(counter))
    return out.raw[: len(data)]


def chacha20_x(data: bytes, key: bytes, nonce24: bytes, counter: int) -> bytes:
    out = _out(len(data))
    _lib.crypto_chacha20_x.restype = ctypes.c_uint64
    _lib.crypto_chacha20_x(out, data, _size(len(data)), key, nonce24, ctypes.c_uint64(counter))
    return out.raw[: len(data)]


def poly1305(message: bytes, key: bytes) -> bytes:
    out = _out(16)
    _lib.crypto_poly1305(out, message, _size(len(message)), key)
    return out.raw


class Aead:
    """crypto_aead_ctx with init_x / init_djb / init_ietf by nonce length."""

    def __init__(self, key: bytes, nonce: bytes) -> None:
        self.ctx = AeadCtx()
        init = {
            24: _lib.crypto_aead_init_x,
            8: _lib.crypto_aead_init_djb,
            12: _lib.crypto_aead_init_ietf,
        }
        init[len(nonce)](ctypes.byref(self.ctx), key, nonce)

    def write(self, plain: bytes, ad: bytes = b"") -> tuple[bytes, bytes]:
        mac, ct = _out(16), _out(len(plain))
        _lib.crypto_aead_write(
            ctypes.byref(self.ctx), ct, mac, ad, _size(len(ad)), plain, _size(len(plain))
        )
        return mac.raw, ct.raw[: len(plain)]

    def read(self, mac: bytes, ct: bytes, ad: bytes = b"") -> bytes | None:
        out = _out(len(ct))
        rc = _lib.crypto_aead_read(
            ctypes.byref(self.ctx), out, mac, ad, _size(len(ad)), ct, _size(len(ct))
        )
        return None if rc else out.raw[: len(ct)]


ARGON2_D, ARGON2_I, ARGON2_ID = 0, 1, 2


def argon2(
    algorithm: int,
    password: bytes,
    salt: bytes,
    *,
    blocks: int,
    passes: int,
    lanes: int = 1,
    length: int = 32,
    key: bytes = b"",
    ad: bytes = b"",
) -> bytes:
    out = _out(length)
    work = ctypes.create_string_buffer(1024 * blocks)
    _lib.crypto_argon2(
        out,
        ctypes.c_uint32(length),
        work,
        _Argon2Config(algorithm, blocks, passes, lanes),
        _Argon2Inputs(password, salt, len(password), len(salt)),
        _Argon2Extras(key or None, ad or None, len(key), len(ad)),
    )
    return out.raw[:length]


def blake2b_keyed(size: int, key: bytes, message: bytes) -> bytes:
    out = _out(size)
    _lib.crypto_blake2b_keyed(out, _size(size), key, _size(len(key)), message, _size(len(message)))
    return out.raw[:size]
