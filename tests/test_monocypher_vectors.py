"""Monocypher's own test vectors (tests/vectors/monocypher) through streamcrypt.

Every record of every file runs; the summary counts them and the run fails if fewer ran
than the file holds. Three kinds of record meet a deliberate refusal rather than an
output, and the test checks the refusal (and any output up to it):

- ChaCha20 with a 64-bit block counter that wraps (Monocypher wraps to block 0, reusing
  keystream; streamcrypt raises LimitExceededError at the wrap);
- HMAC with an empty key (HmacTap refuses it: InvalidKeySizeError);
- BLAKE2b with a 0-byte digest (BLAKE2 defines 1..64: InvalidParameterError).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives.asymmetric import x25519
from monocypher_vectors import generated, generated_kinds, vec_file
from support import record_vectors

from streamcrypt.codecs._x25519 import x25519_exchange
from streamcrypt.errors import (
    InvalidKeySizeError,
    InvalidParameterError,
    InvalidSignatureError,
    LimitExceededError,
)
from streamcrypt.keys import argon2, hkdf
from streamcrypt.primitives import (
    Blake2bTap,
    Ed25519phSigner,
    Ed25519PrivateKey,
    EdDsaBlake2bPrivateKey,
    HmacTap,
    Poly1305Tap,
    Sha512Tap,
    aead_lock,
    ed25519_verify,
    elligator_map,
    elligator_rev,
    hchacha20,
)
from streamcrypt.primitives.hazmat import ChaCha20, XChaCha20


def _tap(tap: HmacTap | Poly1305Tap | Blake2bTap, data: bytes) -> bytes:
    tap.update(data)
    tap.finalize()
    return tap.digest()


def _chacha(
    cls: type[ChaCha20], key: bytes, nonce: bytes, plain: bytes, ctr: bytes, out: bytes
) -> None:
    counter = int.from_bytes(ctr, "little")
    stream = cls(key, nonce, counter=counter)
    room = ((1 << (8 * len(ctr))) - counter) * 64  # bytes before the counter wraps
    if len(plain) <= room:
        assert stream.update(plain) + stream.finalize() == out
        return
    assert stream.update(plain[:room]) == out[:room]
    with pytest.raises(LimitExceededError):
        stream.update(plain[room:])


def _blake2b(msg: bytes, key: bytes, out: bytes) -> None:
    if not out:
        with pytest.raises(InvalidParameterError):
            Blake2bTap(key=key, digest_size=0)
        return
    assert _tap(Blake2bTap(key=key, digest_size=len(out)), msg) == out


def _hmac(key: bytes, msg: bytes, tag: bytes) -> None:
    if not key:
        with pytest.raises(InvalidKeySizeError):
            HmacTap(key, "sha512")
        return
    assert _tap(HmacTap(key, "sha512"), msg) == tag


def _aead(key: bytes, nonce: bytes, ad: bytes, text: bytes, out: bytes) -> None:
    mac, ct = aead_lock(key, nonce, text, ad)
    assert mac + ct == out


def _argon2(
    alg: bytes,
    blocks: bytes,
    passes: bytes,
    lanes: bytes,
    pw: bytes,
    salt: bytes,
    key: bytes,
    ad: bytes,
    out: bytes,
) -> None:
    variant = ("argon2d", "argon2i", "argon2id")[int.from_bytes(alg, "little")]
    got = argon2(
        pw,
        salt,
        variant=variant,  # type: ignore[arg-type]
        blocks=int.from_bytes(blocks, "little"),
        passes=int.from_bytes(passes, "little"),
        lanes=int.from_bytes(lanes, "little"),
        length=len(out),
        key=key,
        ad=ad,
    )
    assert got.secret_bytes() == out


def _eddsa(seed: bytes, public: bytes, msg: bytes, sig: bytes) -> None:
    key = EdDsaBlake2bPrivateKey(seed)
    assert key.public_bytes() == public
    assert key.sign(msg) == sig
    key.public_key().verify(msg, sig)


def _ed25519(seed: bytes, public: bytes, msg: bytes, sig: bytes) -> None:
    key = Ed25519PrivateKey(seed)
    assert key.public_bytes() == public
    assert key.sign(msg) == sig


def _ed25519_check(public: bytes, msg: bytes, sig: bytes, out: bytes) -> None:
    try:
        ed25519_verify(public, msg, sig)
        ok = True
    except InvalidSignatureError:
        ok = False
    assert ok == (out == b"\x00")


def _ed25519ph(seed: bytes, public: bytes, msg: bytes, sig: bytes) -> None:
    signer = Ed25519phSigner(seed)
    assert signer.public_key().public_bytes() == public
    signer.update(msg)
    signer.finalize()
    assert signer.signature() == sig


def _x25519(scalar: bytes, point: bytes, out: bytes) -> None:
    shared = x25519_exchange(x25519.X25519PrivateKey.from_private_bytes(scalar), point)
    assert (shared or bytes(32)) == out


def _elligator_inv(point: bytes, tweak: bytes, failure: bytes, out: bytes) -> None:
    got = elligator_rev(point, tweak[0])
    if failure == b"\xff":
        assert got is None
    else:
        assert got == out


CHECKS: dict[str, Callable[..., None]] = {
    "chacha20": lambda *r: _chacha(ChaCha20, *r),
    "ietf_chacha20": lambda *r: _chacha(ChaCha20, *r),
    "xchacha20": lambda *r: _chacha(XChaCha20, *r),
    "hchacha20": lambda key, inp, out: _assert(hchacha20(key, inp) == out),
    "aead_ietf": _aead,
    "poly1305": lambda key, msg, tag: _assert(_tap(Poly1305Tap(key), msg) == tag),
    "blake2b": _blake2b,
    "sha512": lambda msg, out: _assert(_tap(Sha512Tap(), msg) == out),
    "sha512_hmac": _hmac,
    "sha512_hkdf": lambda ikm, salt, info, okm: _assert(
        hkdf(ikm, salt=salt, info=info, length=len(okm), algorithm="sha512") == okm
    ),
    "argon2": _argon2,
    "edDSA": _eddsa,
    "edDSA_pk": lambda seed, pk: _assert(EdDsaBlake2bPrivateKey(seed).public_bytes() == pk),
    "ed_25519": _ed25519,
    "ed_25519_check": _ed25519_check,
    "ed_25519ph": _ed25519ph,
    "x25519": _x25519,
    "elligator_inv": _elligator_inv,
    "elligator_dir": lambda hidden, point: _assert(elligator_map(hidden) == point),
}


def _assert(condition: bool) -> None:
    assert condition


def _run(name: str, kind: str, records: list[tuple[bytes, ...]]) -> None:
    check = CHECKS[kind]
    ran = 0
    for i, record in enumerate(records):
        try:
            check(*record)
        except AssertionError as exc:
            raise AssertionError(f"{name}: record {i} failed") from exc
        ran += 1
    record_vectors(name, ran, len(records))


FILES = [
    "argon2",
    "blake2b",
    "chacha20",
    "ed_25519ph",
    "elligator_dir",
    "elligator_inv",
    "poly1305",
    "sha512_hmac",
    "x25519",
]


@pytest.mark.parametrize("kind", FILES)
def test_monocypher_vector_file(kind: str) -> None:
    records = vec_file(kind)
    assert records
    _run(f"monocypher/{kind}.vec", kind, records)


@pytest.mark.parametrize("kind", generated_kinds())
def test_monocypher_generated_vectors(kind: str) -> None:
    records = generated(kind)
    assert records
    _run(f"monocypher/generated.json:{kind}", kind, records)
