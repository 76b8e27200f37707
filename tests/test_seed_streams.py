"""Monocypher's incremental AEAD as a stream transform, and EdDSA-BLAKE2b over streams.

The AEAD stream is read and written by pymonocypher record by record (the peer), runs in
``streamcrypt.pipeline`` on every backend, and fails typed on every bad input.
"""

from __future__ import annotations

import random

import monocypher
import pytest
from support import random_splits

import streamcrypt as sc
from streamcrypt.errors import (
    AuthenticationError,
    BrokenTransformError,
    InvalidParameterError,
    InvalidPublicKeyError,
    InvalidSignatureError,
    NotFinalizedError,
    TruncatedStreamError,
)
from streamcrypt.primitives import (
    EdDsaBlake2bPrivateKey,
    EdDsaBlake2bPublicKey,
    EdDsaBlake2bVerifier,
    MonocypherAeadDecryptor,
    MonocypherAeadEncryptor,
    eddsa_blake2b_verify,
)
from streamcrypt.primitives.hazmat import Salsa20, XorCipher

KEY, NONCE = bytes(range(32)), bytes(range(100, 124))


def _run(transform: object, pieces: list[bytes]) -> bytes:
    out = b"".join(transform.update(p) for p in pieces)  # type: ignore[attr-defined]
    return out + transform.finalize()  # type: ignore[attr-defined]


def _records(stream: bytes, chunk: int) -> list[tuple[bytes, bytes]]:
    size = 16 + chunk
    return [(stream[i : i + 16], stream[i + 16 : i + size]) for i in range(0, len(stream), size)]


@pytest.mark.parametrize("n", [0, 1, 999, 1000, 1001, 5000, 12345])
def test_aead_stream_round_trip_and_monocypher_reads_it(n: int) -> None:
    rng = random.Random(f"aead-stream-{n}")
    data = rng.randbytes(n)
    sealed = _run(
        MonocypherAeadEncryptor(KEY, NONCE, ad=b"hdr", chunk_size=1000), random_splits(data, rng)
    )
    records = _records(sealed, 1000)
    assert len(records) == n // 1000 + 1  # the last record is short, maybe empty
    assert all(len(ct) == 1000 for _, ct in records[:-1]) and len(records[-1][1]) < 1000
    peer = monocypher.IncrementalAuthenticatedEncryption(KEY, NONCE)
    assert b"".join(peer.unlock(mac, ct, b"hdr") for mac, ct in records) == data
    dec = MonocypherAeadDecryptor(KEY, NONCE, ad=b"hdr", chunk_size=1000)
    assert _run(dec, random_splits(sealed, rng)) == data


def test_aead_stream_reads_what_monocypher_wrote() -> None:
    rng = random.Random("aead-stream-peer")
    data = rng.randbytes(4321)
    peer = monocypher.IncrementalAuthenticatedEncryption(KEY, NONCE)
    chunks = [data[i : i + 512] for i in range(0, len(data), 512)]
    if len(chunks[-1]) == 512:
        chunks.append(b"")
    stream = b"".join(b"".join(peer.lock(c, b"")) for c in chunks)
    dec = MonocypherAeadDecryptor(KEY, NONCE, chunk_size=512)
    assert _run(dec, random_splits(stream, rng)) == data


def test_aead_stream_releases_only_verified_records() -> None:
    sealed = _run(MonocypherAeadEncryptor(KEY, NONCE, chunk_size=100), [bytes(350)])
    dec = MonocypherAeadDecryptor(KEY, NONCE, chunk_size=100)
    assert dec.update(sealed[:115]) == b""  # a record not yet complete: nothing
    assert dec.update(sealed[115:116]) == bytes(100)  # complete and verified
    tampered = bytearray(sealed)
    tampered[116 + 20] ^= 1  # second record's ciphertext
    dec = MonocypherAeadDecryptor(KEY, NONCE, chunk_size=100)
    assert dec.update(bytes(tampered[:116])) == bytes(100)
    with pytest.raises(AuthenticationError):
        dec.update(bytes(tampered[116:232]))
    with pytest.raises(BrokenTransformError):
        dec.update(b"")


def _decrypt(stream: bytes, **kw: object) -> bytes:
    return _run(MonocypherAeadDecryptor(KEY, NONCE, chunk_size=100, **kw), [stream])  # type: ignore[arg-type]


def test_aead_stream_bad_input_gets_typed_errors() -> None:
    sealed = _run(MonocypherAeadEncryptor(KEY, NONCE, chunk_size=100), [bytes(350)])
    records = [sealed[i : i + 116] for i in range(0, len(sealed), 116)]
    with pytest.raises(TruncatedStreamError):
        _decrypt(b"".join(records[:3]))  # cut at a record boundary
    with pytest.raises(TruncatedStreamError):
        _decrypt(b"")
    with pytest.raises(TruncatedStreamError):
        _decrypt(sealed[: -len(records[-1]) + 10])  # less than a mac left
    with pytest.raises(AuthenticationError):
        _decrypt(sealed[:-1])  # last record cut short
    with pytest.raises(AuthenticationError):
        _decrypt(sealed + bytes(5))  # extended
    with pytest.raises(AuthenticationError):
        _decrypt(records[1] + records[0] + b"".join(records[2:]))  # reordered
    with pytest.raises(AuthenticationError):
        _decrypt(records[0] + records[0] + b"".join(records[2:]))  # duplicated
    with pytest.raises(AuthenticationError):
        _decrypt(sealed, ad=b"other")
    with pytest.raises(AuthenticationError):
        _run(MonocypherAeadDecryptor(KEY, NONCE, chunk_size=99), [sealed])
    with pytest.raises(InvalidParameterError):
        MonocypherAeadEncryptor(KEY, NONCE, chunk_size=0)


@pytest.mark.parametrize("nonce", [bytes(8), bytes(12), NONCE], ids=["djb", "ietf", "x"])
@pytest.mark.anyio
async def test_aead_stream_in_a_pipeline(nonce: bytes) -> None:
    data = random.Random("pipe").randbytes(300_000)
    sealed = await sc.pipeline(MonocypherAeadEncryptor(KEY, nonce)).collect(data)
    assert await sc.pipeline(MonocypherAeadDecryptor(KEY, nonce)).collect(sealed) == data
    # chained with other seed transforms: XOR then Salsa20, and back
    chain = XorCipher(b"k") | MonocypherAeadEncryptor(KEY, nonce)
    sealed = await sc.pipeline(chain).collect(data)
    back = MonocypherAeadDecryptor(KEY, nonce) | XorCipher(b"k")
    assert await sc.pipeline(back).collect(sealed) == data
    salsa = await sc.pipeline(Salsa20(KEY, bytes(8))).collect(data)
    assert await sc.pipeline(Salsa20(KEY, bytes(8))).collect(salsa) == data


# ------------------------------------------------------------------ EdDSA streams


def test_eddsa_verifier_tap_and_two_pass_signing() -> None:
    rng = random.Random("eddsa-stream")
    key = EdDsaBlake2bPrivateKey(rng.randbytes(32))
    message = rng.randbytes(200_000)
    pieces = random_splits(message, rng, max_piece=5000)
    signature = key.sign_chunks(lambda: iter(pieces))
    assert signature == key.sign(message)
    tap = key.public_key().verifier(signature)
    assert b"".join(tap.update(p) for p in pieces) == message  # passes data through
    with pytest.raises(NotFinalizedError):
        tap.digest()
    assert tap.finalize() == b"" and tap.verified()
    assert tap.digest() == signature
    bad = EdDsaBlake2bVerifier(key.public_key(), signature)
    bad.update(message[:-1])
    with pytest.raises(InvalidSignatureError):
        bad.finalize()
    with pytest.raises(BrokenTransformError):
        bad.update(b"")


def test_eddsa_bad_input_gets_typed_errors() -> None:
    key = EdDsaBlake2bPrivateKey(bytes(32))
    sig = key.sign(b"msg")
    with pytest.raises(InvalidSignatureError):
        eddsa_blake2b_verify(key.public_bytes(), b"msg", sig[:63])
    with pytest.raises(InvalidSignatureError):
        eddsa_blake2b_verify(key.public_bytes(), b"other", sig)
    s = int.from_bytes(sig[32:], "little") + (1 << 252) + 27742317777372353535851937790883648493
    with pytest.raises(InvalidSignatureError):  # non-canonical S (S + L)
        eddsa_blake2b_verify(key.public_bytes(), b"msg", sig[:32] + s.to_bytes(32, "little"))
    off_curve = next(
        bytes([i]) + bytes(31) for i in range(2, 255) if _off_curve(bytes([i]) + bytes(31))
    )
    with pytest.raises(InvalidSignatureError):  # R off the curve
        eddsa_blake2b_verify(key.public_bytes(), b"msg", off_curve + sig[32:])
    with pytest.raises(InvalidPublicKeyError):
        EdDsaBlake2bPublicKey(off_curve)
    with pytest.raises(InvalidPublicKeyError):
        EdDsaBlake2bPublicKey(bytes(31))
    with pytest.raises(InvalidPublicKeyError):  # the identity: small order
        EdDsaBlake2bPublicKey((1).to_bytes(32, "little"))
    with pytest.raises(sc.errors.InvalidKeySizeError):
        EdDsaBlake2bPrivateKey(bytes(16))
    assert bytes(32).hex() not in repr(key) and "hidden" in repr(key)


def _off_curve(point: bytes) -> bool:
    try:
        EdDsaBlake2bPublicKey(point)
    except InvalidPublicKeyError as exc:
        return "off the curve" in str(exc)
    return False
