"""C2SP chunked encryption (Cobblestone): Wycheproof vectors, random access, interop."""

from __future__ import annotations

import functools
import hashlib
import random
import zlib
from typing import Any

import pytest
from cryptography.cobblestone import (
    Cobblestone128Decryptor,
    Cobblestone128Encryptor,
    Cobblestone256Decryptor,
    Cobblestone256Encryptor,
)
from cryptography.exceptions import InvalidTag
from support import random_splits, record_vectors, wycheproof, wycheproof_cases

import streamcrypt
from streamcrypt.codecs import cobblestone as cb
from streamcrypt.errors import (
    AuthenticationError,
    BrokenTransformError,
    InvalidKeySizeError,
    InvalidParameterError,
    LimitExceededError,
    StreamCryptError,
    TruncatedStreamError,
)

FILES = {
    128: "c2sp_chunked_encryption_aes_128_gcm_test.json",
    256: "c2sp_chunked_encryption_aes_256_gcm_test.json",
}
FULL_CT = cb.CHUNK_SIZE + cb.TAG_SIZE
PEERS: dict[int, tuple[Any, Any]] = {
    128: (Cobblestone128Encryptor, Cobblestone128Decryptor),
    256: (Cobblestone256Encryptor, Cobblestone256Decryptor),
}


@functools.cache
def cases(variant: int) -> list[tuple[dict[str, Any], bytes]]:
    data = wycheproof(FILES[variant])
    out = []
    for group, test in wycheproof_cases(data):
        assert group["sha"] == "SHA-512"
        assert group["aead"] == f"AEAD_AES_{variant}_GCM"
        out.append((test, zlib.decompress(bytes.fromhex(test["ct"]))))
    assert len(out) == data["numberOfTests"]
    return out


def _length_ok(stream_size: int) -> bool:
    payload = stream_size - cb.HEADER_SIZE
    return payload >= 0 and payload % FULL_CT >= cb.TAG_SIZE


def expected_error(test: dict[str, Any], ct: bytes) -> type[StreamCryptError]:
    """The typed error an invalid vector must raise.

    Truncation is reported as TruncatedStreamError wherever the length alone shows it (a
    header cut short, or a payload missing its short final chunk); a cut that leaves a
    well-formed length (e.g. mid-body) can only show up as a failed tag.
    """
    flags = test["flags"]
    if "InvalidKeySize" in flags:
        return InvalidKeySizeError
    if len(ct) < cb.HEADER_SIZE:
        return TruncatedStreamError
    if "HeaderFailure" in flags:
        return AuthenticationError
    if not _length_ok(len(ct)):
        return TruncatedStreamError
    return AuthenticationError


def _msg_ok(test: dict[str, Any], plaintext: bytes) -> bool:
    return (
        len(plaintext) == test["msgLength"]
        and hashlib.sha512(plaintext).hexdigest() == test["msgSha512"]
    )


def _aligned(ct: bytes) -> list[bytes]:
    """The header, then one piece per chunk: how a careful streaming reader feeds."""
    pieces = [ct[: cb.HEADER_SIZE]]
    pieces += [ct[i : i + FULL_CT] for i in range(cb.HEADER_SIZE, len(ct), FULL_CT)]
    return pieces


def _stream(dec: cb.CobblestoneDecryptor, pieces: list[bytes]) -> tuple[bytes, Exception | None]:
    out = bytearray()
    try:
        for piece in pieces:
            out += dec.update(piece)
        out += dec.finalize()
    except StreamCryptError as exc:
        return bytes(out), exc
    return bytes(out), None


def _key_ctx(test: dict[str, Any]) -> tuple[bytes, bytes]:
    return bytes.fromhex(test["key"]), bytes.fromhex(test["ctx"])


def _open(ct: bytes, key: bytes, *, aad: bytes = b"", suite: cb.Suite | None = None) -> bytes:
    """The whole message through the codec's decryptor, which takes ``suite=`` (checking
    the key's size against it) where the format's reads take the suite from the key."""
    dec = cb.CobblestoneDecryptor(key, aad=aad, suite=suite)
    return dec.update(ct) + dec.finalize()


@pytest.mark.parametrize("variant", [128, 256])
def test_wycheproof_streaming(variant: int) -> None:
    rng = random.Random(variant)
    ran = 0
    for test, ct in cases(variant):
        key, ctx = _key_ctx(test)
        flags = test["flags"]
        if test["result"] == "valid":
            assert test["flags"] in ([], ["CounterRollover"])
            assert _msg_ok(test, _open(ct, key, aad=ctx, suite=f"aes-{variant}-gcm"))
            # The same through aligned pieces and through random cuts.
            plain, err = _stream(cb.CobblestoneDecryptor(key, aad=ctx), _aligned(ct))
            assert err is None and _msg_ok(test, plain)
            pieces = random_splits(ct, rng, max_piece=20000 if len(ct) > 100000 else 97)
            plain, err = _stream(cb.CobblestoneDecryptor(key, aad=ctx), pieces)
            assert err is None and _msg_ok(test, plain)
            # The derived AEAD key and base nonce (the vectors' raw-mode values).
            aead_key, base, commitment = cb.derive_keys(key, ct[:24], ctx)
            assert (aead_key.hex(), base.hex()) == (test["aeadKey"], test["baseNonce"])
            assert commitment == ct[24:56]
            ran += 1
            continue
        assert test["result"] == "invalid"
        want = expected_error(test, ct)
        if want is InvalidKeySizeError:
            with pytest.raises(InvalidKeySizeError):
                cb.CobblestoneDecryptor(key, aad=ctx, suite=f"aes-{variant}-gcm")
            with pytest.raises(InvalidKeySizeError):
                _open(ct, key, aad=ctx, suite=f"aes-{variant}-gcm")
            ran += 1
            continue
        with pytest.raises(want):
            _open(ct, key, aad=ctx, suite=f"aes-{variant}-gcm")
        if "HeaderFailure" in flags and want is AuthenticationError:
            # Refused on the header alone, before any chunk is looked at.
            dec = cb.CobblestoneDecryptor(key, aad=ctx, suite=f"aes-{variant}-gcm")
            with pytest.raises(AuthenticationError):
                dec.update(ct[: cb.HEADER_SIZE])
        # Streaming, chunk-aligned: release at most the valid prefix, then fail for good.
        dec = cb.CobblestoneDecryptor(key, aad=ctx, suite=f"aes-{variant}-gcm")
        plain, err = _stream(dec, _aligned(ct))
        assert isinstance(err, want), (test["tcId"], err)
        if "PartialPlaintext" in flags:
            assert _msg_ok(test, plain), test["tcId"]
        else:
            assert plain == b"", test["tcId"]
        with pytest.raises(BrokenTransformError):
            dec.update(b"\x00" * FULL_CT)
        with pytest.raises(BrokenTransformError):
            dec.finalize()
        # Streaming, all at once: whatever comes out is a verified prefix.
        dec = cb.CobblestoneDecryptor(key, aad=ctx, suite=f"aes-{variant}-gcm")
        plain, err = _stream(dec, [ct])
        assert isinstance(err, want)
        assert plain == b"" or ("PartialPlaintext" in flags and _msg_ok(test, plain))
        ran += 1
    record_vectors(FILES[variant], ran, len(cases(variant)))


def _reader(ct: bytes) -> Any:
    return lambda offset, length: ct[offset : offset + length]


@pytest.mark.parametrize("variant", [128, 256])
def test_wycheproof_random_access(variant: int) -> None:
    ran = 0
    for test, ct in cases(variant):
        key, ctx = _key_ctx(test)
        flags = test["flags"]
        read = _reader(ct)

        def rr(
            start: int,
            stop: int,
            auth: bool = False,
            ct: bytes = ct,
            key: bytes = key,
            ctx: bytes = ctx,
        ) -> bytes:
            return cb.read_range(
                key,
                _reader(ct),
                len(ct),
                start,
                stop,
                aad=ctx,
                suite=f"aes-{variant}-gcm",
                authenticate_length=auth,
            )

        if test["result"] == "valid":
            size = test["msgLength"]
            whole = rr(0, size, auth=True)
            assert _msg_ok(test, whole)
            lay = cb.layout(key, read(0, 56), len(ct), aad=ctx, suite=f"aes-{variant}-gcm")
            assert lay.plaintext_size == size
            assert lay.segment_count == size // cb.CHUNK_SIZE + 1
            for start, stop in [(0, 1), (16383, 16385), (size - 1, size), (5000, 40000)]:
                assert rr(start, stop) == whole[max(start, 0) : stop]
            assert rr(size, size + 10) == b""
            ran += 1
            continue
        want = expected_error(test, ct)
        if want is InvalidKeySizeError:
            with pytest.raises(InvalidKeySizeError):
                cb.layout(key, read(0, 56), len(ct), aad=ctx, suite=f"aes-{variant}-gcm")
            ran += 1
            continue
        # The whole message never reads cleanly.
        with pytest.raises(want):
            rr(0, 1 << 40, auth=True)
        with pytest.raises((AuthenticationError, TruncatedStreamError)):
            rr(0, 1 << 40)
        if want is AuthenticationError and "HeaderFailure" not in flags:
            # The length is well-formed: opening the final chunk proves it or not.
            if "ValidFinalChunk" in flags:
                assert rr(0, 0, auth=True) == b""
            else:
                with pytest.raises(AuthenticationError):
                    rr(0, 0, auth=True)
            # A range inside the valid prefix reads cleanly and gives the prefix.
            if "PartialPlaintext" in flags:
                n = test["msgLength"]
                lay = cb.layout(key, read(0, 56), len(ct), aad=ctx, suite=f"aes-{variant}-gcm")
                if n < lay.plaintext_size:
                    assert _msg_ok(test, rr(0, n))
                else:
                    # The prefix is all the message claims: reading to its end opens the
                    # (bad) empty final chunk; stopping one byte short reads cleanly.
                    with pytest.raises(AuthenticationError):
                        rr(0, n)
                    assert len(rr(0, n - 1)) == n - 1
        ran += 1
    record_vectors(f"{FILES[variant]} (random access)", ran, len(cases(variant)))


SIZES = [0, 1, 15, 16, 17, 16383, 16384, 16385, 32767, 32768, 32769, 3 * 16384 + 5, 100000]


def _message(n: int) -> bytes:
    return bytes((i * 7 + 3) & 0xFF for i in range(n))


@pytest.mark.parametrize("variant", [128, 256])
@pytest.mark.parametrize("context", [b"", b"app v1\x00file"])
def test_interop_with_cryptography(variant: int, context: bytes) -> None:
    rng = random.Random(variant + len(context))
    peer_enc, peer_dec = PEERS[variant]
    key = peer_enc.generate_key()
    assert len(key) == variant // 8
    for n in SIZES:
        msg = _message(n)
        # cryptography -> streamcrypt, fed in random pieces.
        enc = peer_enc(key, context)
        ct = enc.update(msg) + enc.finalize()
        assert len(ct) == cb.HEADER_SIZE + (n // cb.CHUNK_SIZE + 1) * cb.TAG_SIZE + n
        dec = cb.CobblestoneDecryptor(key, aad=context, suite=f"aes-{variant}-gcm")
        plain = b"".join(dec.update(p) for p in random_splits(ct, rng, 5000)) + dec.finalize()
        assert plain == msg
        with pytest.raises(AuthenticationError):
            streamcrypt.decrypt_bytes(ct, key, aad=context + b"!", format="cobblestone")
        # streamcrypt -> cryptography, produced from random pieces.
        ours = cb.CobblestoneEncryptor(key, aad=context, suite=f"aes-{variant}-gcm")
        ct2 = b"".join(ours.update(p) for p in random_splits(msg, rng, 5000)) + ours.finalize()
        assert len(ct2) == len(ct) and ct2[:24] != ct[:24]
        peer = peer_dec(key, context)
        assert peer.update(ct2) + peer.finalize() == msg
        if ct2[cb.HEADER_SIZE :]:
            bad = bytearray(ct2)
            bad[-1] ^= 1
            peer = peer_dec(key, context)
            with pytest.raises(InvalidTag):
                peer.update(bytes(bad))
                peer.finalize()


def test_fixed_salt_is_deterministic_and_matches_header() -> None:
    key, salt = bytes(range(32)), bytes(24)
    a = cb.CobblestoneEncryptor(key, salt=salt, aad=b"c")
    b = cb.CobblestoneEncryptor(key, salt=salt, aad=b"c")
    ct = a.update(b"hello") + a.finalize()
    assert ct == b.update(b"hel") + b.update(b"lo") + b.finalize()
    header = cb.CobblestoneHeader.parse(ct)
    assert header == a.header and header.salt == salt and header.to_bytes() == ct[:56]
    assert len(ct) == 56 + 5 + 16


@pytest.mark.parametrize("size", [0, 1, 15, 17, 24, 31, 33, 64])
def test_invalid_key_sizes(size: int) -> None:
    with pytest.raises(InvalidKeySizeError):
        cb.CobblestoneEncryptor(bytes(size))
    with pytest.raises(InvalidKeySizeError):
        cb.CobblestoneDecryptor(bytes(size))


def test_suite_pins_the_key_size() -> None:
    with pytest.raises(InvalidKeySizeError):
        cb.CobblestoneEncryptor(bytes(16), suite="aes-256-gcm")
    with pytest.raises(InvalidKeySizeError):
        cb.CobblestoneDecryptor(bytes(32), suite="aes-128-gcm")
    ct = streamcrypt.encrypt_bytes(b"x", bytes(32), suite="aes-256-gcm", format="cobblestone")
    assert streamcrypt.decrypt_bytes(ct, bytes(32), format="cobblestone") == b"x"
    for unknown in (128, "128", "cobblestone-128", "AES_128_GCM"):  # one spelling
        with pytest.raises(InvalidParameterError):
            cb.CobblestoneEncryptor(bytes(16), suite=unknown)  # type: ignore[arg-type]
    # The top-level calls take the same suite= as the codec.
    ct = streamcrypt.encrypt_bytes(b"x", bytes(16), format="cobblestone", suite="aes-128-gcm")
    assert _open(ct, bytes(16), suite="aes-128-gcm") == b"x"
    with pytest.raises(InvalidKeySizeError):
        streamcrypt.encrypt_bytes(b"x", bytes(16), format="cobblestone", suite="aes-256-gcm")


def test_chunk_counter_limit() -> None:
    codec = cb.CobblestoneCodec(bytes(16), bytes(12))
    assert codec.max_segments == 1 << 38
    out = memoryview(bytearray(16))
    with pytest.raises(LimitExceededError):
        codec.seal_segment(1 << 38, b"", True, out)
    with pytest.raises(LimitExceededError):
        codec.open_segment(1 << 38, bytes(16), True, memoryview(bytearray(0)))
    # The highest index still works and its nonce is base XOR index.
    assert codec.seal_segment((1 << 38) - 1, b"", True, out) == 16
    # The segmenter stops a stream at the codec's limit (lowered here to keep it small).
    key = bytes(16)
    ct = streamcrypt.encrypt_bytes(bytes(3 * cb.CHUNK_SIZE), key, format="cobblestone")
    dec = cb.CobblestoneDecryptor(key)
    dec.update(ct[:56])
    assert dec.codec is not None
    dec.codec.max_segments = 2
    with pytest.raises(LimitExceededError):
        dec.update(ct[56:])
    enc = cb.CobblestoneEncryptor(key)
    enc.update(b"")
    assert enc._codec is not None
    enc._codec.max_segments = 2
    with pytest.raises(LimitExceededError):
        enc.update(bytes(3 * cb.CHUNK_SIZE))


def test_jobs_run_in_any_order() -> None:
    """feed()/finish() jobs are independent: run them backwards, emit them in order."""
    key = bytes(range(16))
    msg = _message(5 * cb.CHUNK_SIZE + 100)
    enc = cb.CobblestoneEncryptor(key, salt=bytes(24))
    jobs = enc.feed(msg[:40000]) + enc.feed(msg[40000:]) + enc.finish()
    outs = {id(job): bytes(job.run()) for job in reversed(jobs)}
    ct = enc.take_header() + b"".join(outs[id(job)] for job in jobs)
    ref = cb.CobblestoneEncryptor(key, salt=bytes(24))
    assert ct == ref.update(msg) + ref.finalize()
    dec = cb.CobblestoneDecryptor(key)
    djobs = dec.feed(ct) + dec.finish()
    douts = {id(job): bytes(job.run()) for job in reversed(djobs)}
    assert b"".join(douts[id(job)] for job in djobs) == msg


def test_random_ranges_of_own_ciphertext() -> None:
    rng = random.Random(7)
    key = bytes(range(32))
    msg = _message(4 * cb.CHUNK_SIZE)  # ends with an empty final chunk
    ct = streamcrypt.encrypt_bytes(msg, key, aad=b"r", format="cobblestone")
    for _ in range(40):
        a = rng.randrange(0, len(msg) + 1)
        b = rng.randrange(a, len(msg) + 50)
        got = cb.read_range(key, _reader(ct), len(ct), a, b, aad=b"r")
        assert got == msg[a:b]
    assert cb.read_range(key, _reader(ct), len(ct), 0, 0, aad=b"r", authenticate_length=True) == b""
    # A range reaching the end opens the empty final chunk: a forged one fails there, and
    # with authenticate_length whatever the range.
    forged = ct[:-1] + bytes([ct[-1] ^ 1])
    for a, b, authenticate in ((len(msg) - 5, len(msg), False), (0, 10, True)):
        with pytest.raises(AuthenticationError):
            cb.read_range(
                key, _reader(forged), len(ct), a, b, aad=b"r", authenticate_length=authenticate
            )
    assert cb.read_range(key, _reader(forged), len(ct), 0, 10, aad=b"r") == msg[:10]
    # Dropping the empty final chunk is a truncation the layout sees from the length.
    with pytest.raises(TruncatedStreamError):
        cb.read_range(key, _reader(ct[:-16]), len(ct) - 16, 0, 10, aad=b"r")
    # Swapping two full chunks fails in the range that covers them.
    swapped = (
        ct[:56]
        + ct[56 + FULL_CT : 56 + 2 * FULL_CT]
        + ct[56 : 56 + FULL_CT]
        + ct[56 + 2 * FULL_CT :]
    )
    with pytest.raises(AuthenticationError):
        cb.read_range(key, _reader(swapped), len(swapped), 0, 10, aad=b"r")
    assert (
        cb.read_range(key, _reader(swapped), len(swapped), 40000, 40010, aad=b"r")
        == msg[40000:40010]
    )


def test_reordering_and_wrong_context_streaming() -> None:
    key = bytes(16)
    ct = streamcrypt.encrypt_bytes(
        bytes(2 * cb.CHUNK_SIZE + 1), key, aad=b"a", format="cobblestone"
    )
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(ct, key, aad=b"b", format="cobblestone")
    dup = ct[: 56 + FULL_CT] + ct[56 : 56 + FULL_CT] + ct[56 + 2 * FULL_CT :]
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(dup, key, aad=b"a", format="cobblestone")
    with pytest.raises(TruncatedStreamError):
        streamcrypt.decrypt_bytes(ct[: 56 + 2 * FULL_CT], key, aad=b"a", format="cobblestone")


def test_repr_hides_keys() -> None:
    key = bytes(range(16))
    codec = cb.CobblestoneCodec(key, bytes(12))
    assert key.hex() not in repr(codec) and "hidden" in repr(codec)


def test_key_forms() -> None:
    from streamcrypt.keys import SecretKey

    raw = bytes(range(32))
    ct = streamcrypt.encrypt_bytes(
        memoryview(b"payload"), SecretKey(raw), aad=bytearray(b"c"), format="cobblestone"
    )
    assert (
        streamcrypt.decrypt_bytes(ct, memoryview(raw), aad=b"c", format="cobblestone") == b"payload"
    )
    assert (
        streamcrypt.decrypt_bytes(
            bytearray(ct), bytearray(raw), aad=memoryview(b"c"), format="cobblestone"
        )
        == b"payload"
    )
