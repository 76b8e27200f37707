"""RFC 8188 ``aes128gcm``: the RFC's examples, interop with http_ece, streaming, bad input."""

from __future__ import annotations

import base64
import random
from collections.abc import Callable

import http_ece
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st
from support import random_splits, record_vectors

import streamcrypt
from streamcrypt.abc import Buffer
from streamcrypt.codecs import ece
from streamcrypt.codecs.ece import (
    OVERHEAD,
    EceDecryptor,
    EceEncryptor,
    EceHeader,
    encrypted_length,
    read_header,
)
from streamcrypt.engine import DEFAULT_POLICY, OrderedBatches
from streamcrypt.errors import (
    AlreadyFinalizedError,
    AuthenticationError,
    BrokenTransformError,
    FormatError,
    InvalidKeySizeError,
    InvalidParameterError,
    LimitExceededError,
    TruncatedStreamError,
    UnknownKeyError,
)
from streamcrypt.keys import KeyRing, SecretKey, hkdf_extract


def b64u(text: str) -> bytes:
    text = "".join(text.split())
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# RFC 8188 section 3.1 (values transcribed from the RFC text, base64url).
RFC_3_1_IKM = b64u("yqdlZ-tYemfogSmv7Ws5PQ")
RFC_3_1_BODY = b64u(
    """I1BsxtFttlv3u_Oo94xnmwAAEAAA-NAVub2qFgBEuQKRapoZu-IxkIva3MEB1PD-
       ly8Thjg"""
)
RFC_3_1_SALT = b64u("I1BsxtFttlv3u_Oo94xnmw")
RFC_3_1_PRK = b64u("zyeH5phsIsgUyd4oiSEIy35x-gIi4aM7y0hCF8mwn9g")
RFC_3_1_CEK = b64u("_wniytB-ofscZDh4tbSjHw")
RFC_3_1_NONCE = b64u("Bcs8gkIRKLI8GeI8")
RFC_3_1_RECORD_PLAINTEXT = b64u("SSBhbSB0aGUgd2FscnVzAg")
# RFC 8188 section 3.2.
RFC_3_2_IKM = b64u("BO3ZVPxUlnLORbVGMpbT1Q")
RFC_3_2_BODY = b64u(
    """uNCkWiNYzKTnBN9ji3-qWAAAABkCYTHOG8chz_gnvgOqdGYovxyjuqRyJFjEDyoF
       1Fvkj6hQPdPHI51OEUKEpgz3SsLWIqS_uA"""
)
WALRUS = b"I am the walrus"

KEY = bytes(range(16))
SALT = bytes(range(100, 116))


# --- RFC 8188 section 3 ------------------------------------------------------------------


def test_rfc8188_examples() -> None:
    ran = 0
    # 3.1: one record, rs 4096, empty key id. The text says "Content-Length: 54" and "54
    # octet content body", but the 71 base64url characters decode to 53 bytes:
    # 21 (header) + 15 (data) + 1 (delimiter) + 16 (tag).
    assert len(RFC_3_1_BODY) == 53 == encrypted_length(len(WALRUS), 4096)
    assert read_header(RFC_3_1_BODY) == EceHeader(RFC_3_1_SALT, 4096, b"")
    assert streamcrypt.decrypt_bytes(RFC_3_1_BODY, RFC_3_1_IKM, format="ece") == WALRUS
    assert (
        streamcrypt.encrypt_bytes(WALRUS, RFC_3_1_IKM, salt=RFC_3_1_SALT, format="ece")
        == RFC_3_1_BODY
    )
    # The intermediate values the RFC lists, checked independently of our record code.
    assert hkdf_extract(RFC_3_1_IKM, RFC_3_1_SALT) == RFC_3_1_PRK
    assert ece._derive(RFC_3_1_IKM, RFC_3_1_SALT) == (RFC_3_1_CEK, RFC_3_1_NONCE)
    assert RFC_3_1_RECORD_PLAINTEXT == WALRUS + b"\x02"
    record = AESGCM(RFC_3_1_CEK).encrypt(RFC_3_1_NONCE, RFC_3_1_RECORD_PLAINTEXT, None)
    assert RFC_3_1_BODY[21:] == record
    ran += 1

    # 3.2: rs 25, key id "a1", one padding octet in the first record: 7 + 8 data bytes.
    assert len(RFC_3_2_BODY) == 73 == encrypted_length(15, 25, keyid=b"a1", padding=1)
    header = read_header(RFC_3_2_BODY)
    assert header == EceHeader(RFC_3_2_BODY[:16], 25, b"a1")
    assert header is not None and header.size == 23
    assert streamcrypt.decrypt_bytes(RFC_3_2_BODY, RFC_3_2_IKM, format="ece") == WALRUS
    assert streamcrypt.decrypt_bytes(RFC_3_2_BODY, {b"a1": RFC_3_2_IKM}, format="ece") == WALRUS
    salt = RFC_3_2_BODY[:16]
    assert (
        streamcrypt.encrypt_bytes(
            WALRUS,
            RFC_3_2_IKM,
            salt=salt,
            segment_size=25 - OVERHEAD,
            keyid="a1",
            padding=1,
            format="ece",
        )
        == RFC_3_2_BODY
    )
    # Streamed in the RFC's two pieces, too.
    enc = EceEncryptor(RFC_3_2_IKM, salt=salt, record_size=25, keyid=b"a1", padding=1)
    assert enc.update(b"I am th") + enc.update(b"e walrus") + enc.finalize() == RFC_3_2_BODY
    ran += 1
    record_vectors("RFC 8188 section 3 examples", ran, 2)


def test_rfc8188_examples_decode_with_http_ece() -> None:
    assert http_ece.decrypt(RFC_3_1_BODY, key=RFC_3_1_IKM) == WALRUS
    assert http_ece.decrypt(RFC_3_2_BODY, key=RFC_3_2_IKM) == WALRUS


# --- interop with http_ece ----------------------------------------------------------------

RECORD_SIZES = [18, 19, 25, 32, 100, 4096]


def boundary_sizes(rs: int) -> list[int]:
    chunk = rs - ece.OVERHEAD
    sizes = {0, 1}
    for k in (1, 2, 3):
        sizes.update({k * chunk - 1, k * chunk, k * chunk + 1})
    return sorted(s for s in sizes if s >= 0)


def interop_cases() -> list[tuple[int, int, str]]:
    return [
        (rs, n, keyid) for rs in RECORD_SIZES for n in boundary_sizes(rs) for keyid in ("", "key-7")
    ]


def test_interop_with_http_ece_both_directions() -> None:
    rng = random.Random(8188)
    cases = interop_cases()
    for rs, n, keyid in cases:
        body = rng.randbytes(n)
        ours = streamcrypt.encrypt_bytes(
            body, KEY, salt=SALT, segment_size=rs - OVERHEAD, keyid=keyid, format="ece"
        )
        assert len(ours) == encrypted_length(n, rs, keyid=keyid), (rs, n)
        assert http_ece.decrypt(ours, key=KEY) == body, (rs, n, keyid)
        theirs = http_ece.encrypt(body, salt=SALT, key=KEY, rs=rs, keyid=keyid)
        if n:
            # Same salt, same bytes: the record split and the last-record rule agree.
            assert theirs == ours, (rs, n, keyid)
            assert streamcrypt.decrypt_bytes(theirs, KEY, format="ece") == body
        else:
            # http_ece writes an empty body as a header with no record (see below).
            assert len(theirs) == ece.HEADER_SIZE + len(keyid)
            assert (
                streamcrypt.decrypt_bytes(theirs, KEY, allow_no_records=True, format="ece") == b""
            )
    assert len(cases) == 2 * sum(len(boundary_sizes(rs)) for rs in RECORD_SIZES) > 100


def test_interop_large_record_size_and_body() -> None:
    rng = random.Random(5)
    rs = 65536
    for n in (0, rs - 17, rs - 16, 3 * (rs - 17) + 5):
        body = rng.randbytes(n)
        ours = streamcrypt.encrypt_bytes(body, KEY, segment_size=rs - OVERHEAD, format="ece")
        assert http_ece.decrypt(ours, key=KEY) == body
        if n:
            theirs = http_ece.encrypt(body, key=KEY, rs=rs)
            assert streamcrypt.decrypt_bytes(theirs, KEY, format="ece") == body


def test_http_ece_empty_body_has_no_record_and_is_refused_by_default() -> None:
    theirs = http_ece.encrypt(b"", salt=SALT, key=KEY, rs=4096)
    assert theirs == SALT + (4096).to_bytes(4, "big") + b"\x00"
    # A header alone is also what an attacker leaves after cutting every record off.
    with pytest.raises(TruncatedStreamError):
        streamcrypt.decrypt_bytes(theirs, KEY, format="ece")
    assert streamcrypt.decrypt_bytes(theirs, KEY, allow_no_records=True, format="ece") == b""
    # Ours always carries the last record, which http_ece reads as empty.
    ours = streamcrypt.encrypt_bytes(b"", KEY, salt=SALT, format="ece")
    assert len(ours) == ece.HEADER_SIZE + ece.OVERHEAD == encrypted_length(0)
    assert http_ece.decrypt(ours, key=KEY) == b""
    # allow_no_records does not excuse a body cut inside its header.
    with pytest.raises(TruncatedStreamError):
        streamcrypt.decrypt_bytes(theirs[:-1], KEY, allow_no_records=True, format="ece")


def test_padding_is_read_by_http_ece_and_by_us() -> None:
    rng = random.Random(3)
    for rs in (18, 25, 100):
        for padding in sorted({0, min(1, rs - 18), rs - 18}):
            for n in (0, 1, rs - 17 - padding, rs - 17, 2 * (rs - 17) + 3):
                body = rng.randbytes(n)
                ours = streamcrypt.encrypt_bytes(
                    body, KEY, segment_size=rs - OVERHEAD, padding=padding, format="ece"
                )
                assert len(ours) == encrypted_length(n, rs, padding=padding)
                assert http_ece.decrypt(ours, key=KEY) == body
                assert streamcrypt.decrypt_bytes(ours, KEY, format="ece") == body


def test_encrypted_length_matches_output() -> None:
    rng = random.Random(11)
    for _ in range(300):
        rs = rng.choice([18, 19, 20, 33, 64, 257])
        n = rng.randrange(0, 5 * rs)
        keyid = rng.choice([b"", b"k", b"x" * 255])
        padding = rng.randrange(0, rs - 17)
        out = streamcrypt.encrypt_bytes(
            bytes(n), KEY, segment_size=rs - OVERHEAD, keyid=keyid, padding=padding, format="ece"
        )
        assert len(out) == encrypted_length(n, rs, keyid=keyid, padding=padding)
    assert encrypted_length(0) == 38
    assert encrypted_length(4079) == 21 + 4096  # exactly one full record
    assert encrypted_length(4080) == 21 + 4096 + 18
    with pytest.raises(InvalidParameterError):
        encrypted_length(-1)
    with pytest.raises(InvalidParameterError):
        encrypted_length(10, 17)


# --- key selection ----------------------------------------------------------------------


def test_keys_chosen_by_key_id() -> None:
    body = streamcrypt.encrypt_bytes(WALRUS, KEY, keyid="kid-2", format="ece")
    other = bytes(16)
    sources: list[object] = [
        KEY,
        SecretKey(KEY),
        {b"kid-2": KEY, b"kid-1": other},
        {"kid-2": KEY, "kid-1": other},
        lambda kid: KEY if kid == b"kid-2" else None,
        KeyRing([SecretKey(other, key_id="kid-1"), SecretKey(KEY, key_id="kid-2")]),
    ]
    for source in sources:
        assert streamcrypt.decrypt_bytes(body, source, format="ece") == WALRUS  # type: ignore[arg-type]


def test_keyring_encrypts_with_active_key_and_names_it() -> None:
    ring = KeyRing([SecretKey(bytes(16), key_id="old"), SecretKey(KEY, key_id="new")])
    enc = EceEncryptor(ring, salt=SALT)
    body = enc.update(WALRUS) + enc.finalize()
    assert enc.header == EceHeader(SALT, 4096, b"new")
    assert read_header(body) == enc.header
    assert streamcrypt.decrypt_bytes(body, ring, format="ece") == WALRUS
    assert streamcrypt.decrypt_bytes(body, KEY, format="ece") == WALRUS
    # An explicit key id wins over the ring's.
    named = read_header(streamcrypt.encrypt_bytes(b"", ring, keyid=b"x", format="ece"))
    assert named is not None and named.keyid == b"x"


def _raise_key_error(kid: bytes) -> bytes:
    raise KeyError(kid)


@pytest.mark.parametrize(
    "source",
    [
        {b"other": KEY},
        {"other": KEY},
        lambda kid: None,
        _raise_key_error,
        KeyRing([SecretKey(KEY, key_id="other")]),
    ],
    ids=["bytes-map", "str-map", "callable-none", "callable-keyerror", "keyring"],
)
def test_unknown_key_id(source: object) -> None:
    body = streamcrypt.encrypt_bytes(WALRUS, KEY, keyid="missing", format="ece")
    dec = EceDecryptor(source)  # type: ignore[arg-type]
    with pytest.raises(UnknownKeyError, match="missing"):
        dec.update(body)
    with pytest.raises(BrokenTransformError):
        dec.update(b"")


def test_unknown_key_when_body_names_no_key_id() -> None:
    body = streamcrypt.encrypt_bytes(WALRUS, KEY, format="ece")
    with pytest.raises(UnknownKeyError):
        streamcrypt.decrypt_bytes(body, KeyRing([SecretKey(KEY, key_id="a")]), format="ece")
    with pytest.raises(UnknownKeyError):
        streamcrypt.decrypt_bytes(body, {b"a": KEY}, format="ece")
    # Non-UTF-8 key ids work with bytes-keyed maps and callables, not with a KeyRing.
    raw = streamcrypt.encrypt_bytes(WALRUS, KEY, keyid=b"\xff\xfe", format="ece")
    assert streamcrypt.decrypt_bytes(raw, {b"\xff\xfe": KEY}, format="ece") == WALRUS
    with pytest.raises(UnknownKeyError):
        streamcrypt.decrypt_bytes(raw, KeyRing([SecretKey(KEY, key_id="a")]), format="ece")


def test_wrong_key_size() -> None:
    for bad in (bytes(15), bytes(32), b""):
        with pytest.raises(InvalidKeySizeError):
            streamcrypt.encrypt_bytes(WALRUS, bad, format="ece")
        with pytest.raises(InvalidKeySizeError):
            EceEncryptor(bad)
        with pytest.raises(InvalidKeySizeError):
            streamcrypt.decrypt_bytes(RFC_3_1_BODY, bad, format="ece")
        with pytest.raises(InvalidKeySizeError):
            EceDecryptor(bad)  # checked before any input arrives
    with pytest.raises(InvalidKeySizeError):
        streamcrypt.decrypt_bytes(RFC_3_2_BODY, {b"a1": bytes(32)}, format="ece")
    with pytest.raises(InvalidKeySizeError):
        streamcrypt.decrypt_bytes(
            RFC_3_2_BODY, KeyRing([SecretKey(bytes(32), key_id="a1")]), format="ece"
        )
    with pytest.raises(InvalidParameterError):
        streamcrypt.decrypt_bytes(RFC_3_2_BODY, 42, format="ece")  # type: ignore[arg-type]


# --- streaming ----------------------------------------------------------------------------


@settings(max_examples=120, deadline=None)
@given(
    body=st.binary(max_size=700),
    rs=st.integers(min_value=18, max_value=90),
    padding=st.integers(min_value=0, max_value=72),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_any_chunking_gives_the_same_bytes(body: bytes, rs: int, padding: int, seed: int) -> None:
    padding = min(padding, rs - 18)
    rng = random.Random(seed)
    whole = streamcrypt.encrypt_bytes(
        body, KEY, salt=SALT, segment_size=rs - OVERHEAD, keyid=b"k", padding=padding, format="ece"
    )
    enc = EceEncryptor(KEY, salt=SALT, record_size=rs, keyid=b"k", padding=padding)
    streamed = b"".join(enc.update(piece) for piece in random_splits(body, rng, rs * 2))
    assert streamed + enc.finalize() == whole
    dec = EceDecryptor(KEY)
    pieces = random_splits(whole, rng, rs * 2)
    plain = b"".join(dec.update(memoryview(piece)) for piece in pieces)
    assert plain + dec.finalize() == body


def test_decryptor_releases_each_record_when_the_next_byte_arrives() -> None:
    rs, chunk = 25, 8
    body = bytes(range(5 * chunk + 3))  # 6 records, the last one short
    wire = streamcrypt.encrypt_bytes(body, KEY, segment_size=rs - OVERHEAD, format="ece")
    header = ece.HEADER_SIZE
    dec = EceDecryptor(KEY)
    assert dec.update(wire[: header + rs]) == b""  # record 0 complete, but maybe the last
    assert dec.header == EceHeader(wire[:16], rs, b"")
    assert dec.update(wire[header + rs : header + rs + 1]) == body[:chunk]
    released = bytearray(body[:chunk])
    # Byte by byte: record i comes out exactly when the first byte of record i+1 arrives.
    for pos in range(header + rs + 1, len(wire)):
        out = dec.update(wire[pos : pos + 1])
        start = pos - header
        if start % rs == 0:
            i = start // rs - 1
            assert out == body[i * chunk : (i + 1) * chunk]
        else:
            assert out == b""
        released += out
    assert bytes(released) == body[: 5 * chunk]
    assert dec.finalize() == body[5 * chunk :]


def test_full_last_record_is_held_until_the_end() -> None:
    rs, chunk = 25, 8
    body = bytes(2 * chunk)  # exactly two full records, the second is the last
    wire = streamcrypt.encrypt_bytes(body, KEY, segment_size=rs - OVERHEAD, format="ece")
    assert len(wire) == ece.HEADER_SIZE + 2 * rs
    dec = EceDecryptor(KEY)
    assert dec.update(wire) == body[:chunk]
    assert dec.finalize() == body[chunk:]
    enc = EceEncryptor(KEY, record_size=rs)
    first = enc.update(bytes(chunk))
    assert len(first) == ece.HEADER_SIZE  # the record might be the last: held back
    assert len(enc.update(b"\x00")) == rs  # now it is not
    assert len(enc.finalize()) == 1 + ece.OVERHEAD


def test_jobs_may_run_in_any_order() -> None:
    rng = random.Random(9)
    body = rng.randbytes(10_000)
    enc = EceEncryptor(KEY, salt=SALT, record_size=100)
    jobs = enc.feed(body[:6000]) + enc.feed(body[6000:]) + enc.finish()
    outputs = {id(job): bytes(job.run()) for job in reversed(jobs)}
    wire = enc.take_header() + b"".join(outputs[id(job)] for job in jobs)
    assert wire == streamcrypt.encrypt_bytes(
        body, KEY, salt=SALT, segment_size=100 - OVERHEAD, format="ece"
    )
    dec = EceDecryptor(KEY)
    djobs = dec.feed(wire) + dec.finish()
    douts = {id(job): bytes(job.run()) for job in reversed(djobs)}
    assert b"".join(douts[id(job)] for job in djobs) == body


def test_records_are_sealed_from_a_buffer_apart_from_their_output() -> None:
    """The native kernel takes its input and its output as two buffers (the same memory
    as both is undefined behaviour in its Rust binding): a record laid out beside its
    delimiter is sealed out of a scratch buffer, never in place in the output, and the
    body stays byte for byte what http_ece reads (padding and a short last record too)."""
    rng = random.Random(12)
    for rs, padding, n in ((100, 0, 1000), (100, 7, 1000), (4096, 0, 3 * 4079 + 5), (25, 1, 15)):
        body = rng.randbytes(n)
        enc = EceEncryptor(KEY, salt=SALT, record_size=rs, padding=padding)
        codec = enc.codec
        assert isinstance(codec, ece.EceCodec)
        calls: list[bool] = []

        def apart(
            nonce: bytes,
            data: Buffer,
            aad: None,
            out: memoryview,
            real: Callable[..., int] = codec._encrypt,
            calls: list[bool] = calls,
        ) -> int:
            calls.append(memoryview(data).obj is not memoryview(out).obj)
            return real(nonce, data, aad, out)

        codec._encrypt = apart
        wire = enc.update(body[: n // 2]) + enc.update(body[n // 2 :]) + enc.finalize()
        assert calls and all(calls), (rs, padding)
        assert http_ece.decrypt(wire, key=KEY) == body
        assert len(wire) == encrypted_length(n, rs, padding=padding)


def test_lifecycle() -> None:
    enc = EceEncryptor(KEY)
    enc.finalize()
    with pytest.raises(AlreadyFinalizedError):
        enc.update(b"x")
    dec = EceDecryptor(RFC_3_1_IKM)
    assert dec.update(RFC_3_1_BODY) == b""
    assert dec.finalize() == WALRUS
    with pytest.raises(AlreadyFinalizedError):
        dec.update(b"")
    dec = EceDecryptor(RFC_3_1_IKM)
    tampered = RFC_3_1_BODY[:-1] + bytes([RFC_3_1_BODY[-1] ^ 1])
    assert dec.update(tampered) == b""
    with pytest.raises(AuthenticationError):
        dec.finalize()
    with pytest.raises(BrokenTransformError):
        dec.finalize()


# --- bad input ----------------------------------------------------------------------------


def _body(n: int = 50, rs: int = 25, **kw: object) -> bytes:
    return streamcrypt.encrypt_bytes(
        bytes(range(n)),
        KEY,
        format="ece",
        salt=SALT,
        segment_size=rs - OVERHEAD,
        **kw,  # type: ignore[arg-type]
    )


def _seal_records(records: list[bytes], rs: int = 25) -> bytes:
    """A body whose record plaintexts (data, delimiter, padding) are given verbatim."""
    cek, nonce = ece._derive(KEY, SALT)
    base = int.from_bytes(nonce, "big")
    aead = AESGCM(cek)
    out = EceHeader(SALT, rs).to_bytes()
    for i, record in enumerate(records):
        out += aead.encrypt((base ^ i).to_bytes(12, "big"), record, None)
    return out


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=8), min_size=1, max_size=12),
    last_pad=st.integers(min_value=0, max_value=4),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_padded_records_anywhere_in_any_chunking(
    sizes: list[int], last_pad: int, seed: int
) -> None:
    """Records whose data is followed by padding (any record, not only the first) open
    to their data alone, whole or fed in random pieces (records opened many per call)."""
    rng = random.Random(seed)
    data = [rng.randbytes(n) for n in sizes]
    records = [d + b"\x01" + bytes(8 - len(d)) for d in data[:-1]]  # rs 25: 9 plaintext
    records.append(data[-1] + b"\x02" + bytes(min(last_pad, 8 - len(data[-1]))))
    wire = _seal_records(records)
    assert streamcrypt.decrypt_bytes(wire, KEY, format="ece") == b"".join(data)
    dec = EceDecryptor(KEY)
    plain = b"".join(dec.update(piece) for piece in random_splits(wire, rng, 80))
    assert plain + dec.finalize() == b"".join(data)


def test_truncation() -> None:
    wire = _body(50)  # 7 records of 25 bytes (6 full + one of 2 data bytes)
    h = ece.HEADER_SIZE
    assert streamcrypt.decrypt_bytes(wire, KEY, format="ece") == bytes(range(50))
    # Inside the header, or a header shorter than 21 bytes: TruncatedStreamError.
    for cut in (0, 1, 20, h - 1):
        with pytest.raises(TruncatedStreamError, match="header"):
            streamcrypt.decrypt_bytes(wire[:cut], KEY, format="ece")
    keyed = _body(5, keyid=b"abc")
    with pytest.raises(TruncatedStreamError):
        streamcrypt.decrypt_bytes(keyed[: h + 2], KEY, format="ece")  # inside the key id
    # Right after the header: no record at all.
    with pytest.raises(TruncatedStreamError):
        streamcrypt.decrypt_bytes(wire[:h], KEY, format="ece")
    # At a record boundary: the last record received says more follow.
    for k in (1, 3, 6):
        with pytest.raises(TruncatedStreamError, match="truncated"):
            streamcrypt.decrypt_bytes(wire[: h + k * 25], KEY, format="ece")
    # Inside a record, fewer than 17 of its bytes left: TruncatedStreamError.
    for left in (1, 16):
        with pytest.raises(TruncatedStreamError):
            streamcrypt.decrypt_bytes(wire[: h + 2 * 25 + left], KEY, format="ece")
    # Inside a record, 17 or more bytes left: the partial record fails its tag.
    for left in (17, 24):
        with pytest.raises(AuthenticationError):
            streamcrypt.decrypt_bytes(wire[: h + 2 * 25 + left], KEY, format="ece")
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(wire[:-1], KEY, format="ece")  # the last record, one byte short


def test_tampering_fails_authentication() -> None:
    wire = bytearray(_body(50))
    h = ece.HEADER_SIZE
    for pos in (0, 15, h, h + 24, h + 25, len(wire) - 1):  # salt bytes and record bytes
        bad = bytearray(wire)
        bad[pos] ^= 0x01
        with pytest.raises(AuthenticationError):
            streamcrypt.decrypt_bytes(bytes(bad), KEY, format="ece")
    swapped = wire[:h] + wire[h + 25 : h + 50] + wire[h : h + 25] + wire[h + 50 :]
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(bytes(swapped), KEY, format="ece")
    dropped = wire[:h] + wire[h + 25 :]
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(bytes(dropped), KEY, format="ece")
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(bytes(wire), bytes(16), format="ece")
    # Another record size in the header shifts every record boundary.
    resized = bytearray(wire)
    resized[16:20] = (26).to_bytes(4, "big")
    for policy in (None, DEFAULT_POLICY):  # in order: the first record fails before the end
        with pytest.raises(AuthenticationError):
            streamcrypt.decrypt_bytes(bytes(resized), KEY, format="ece", policy=policy)


def test_wrong_delimiters() -> None:
    data = b"abcdefgh"
    assert (
        streamcrypt.decrypt_bytes(_seal_records([data + b"\x01", b"xy\x02"]), KEY, format="ece")
        == data + b"xy"
    )
    assert (
        streamcrypt.decrypt_bytes(
            _seal_records([b"\x01" + bytes(8), b"\x02\x00"]), KEY, format="ece"
        )
        == b""
    )
    cases: list[tuple[list[bytes], type[Exception]]] = [
        ([data + b"\x03"], FormatError),  # a value other than 1 or 2
        ([data + b"\x00"], FormatError),  # the last non-zero octet is 'h' (0x68)
        ([bytes(9)], FormatError),  # no delimiter at all
        ([data + b"\x01", bytes(3)], FormatError),  # last record all zero
        ([data + b"\x02", b"xy\x02"], FormatError),  # a record after the last record
        ([data + b"\x01", b"xy\x03"], FormatError),
        ([data + b"\x00", b"xy\x02"], FormatError),  # 'h' (0x68) again, in record 0
        ([data + b"\x01", b"xy\x01"], TruncatedStreamError),  # last says more follow
    ]
    for records, error in cases:
        with pytest.raises(error):
            streamcrypt.decrypt_bytes(_seal_records(records), KEY, format="ece")
        with pytest.raises(http_ece.ECEException):  # the reference agrees it is bad
            http_ece.decrypt(_seal_records(records), key=KEY)


@pytest.mark.parametrize("index", [0, 5])
def test_a_record_opened_alone_gets_the_batch_loops_output_and_verdict(index: int) -> None:
    """A job of one record is opened by ``EceCodec.run_one`` (in scratch memory, the data
    copied out into a new ``bytes``: issue 28) and gives what the batch loop gives, the data or the
    failure with its type and message, for every kind of record: plain, final, padded,
    a wrong or missing delimiter, the final one saying more follow, a record after the
    last, tampered, too short; and sealed alone, the batch loop's bytes."""
    cek, nonce = ece._derive(KEY, SALT)
    aead, iv = AESGCM(cek), (int.from_bytes(nonce, "big") ^ index).to_bytes(12, "big")
    codec = ece.EceCodec(KEY, SALT, 25)
    data = b"abcdefgh"
    cases = [
        (data + b"\x01", False),
        (data + b"\x02", True),
        (b"\x01" + bytes(8), False),  # empty data, padded
        (b"abc\x01" + bytes(5), False),
        (b"ab\x02\x00", True),
        (b"\x02", True),
        (data + b"\x01", True),  # the final record says more follow
        (data + b"\x02", False),  # a record after the last record
        (data + b"\x03", False),
        (data + b"\x00", True),
        (bytes(9), False),
    ]
    sealed = [(aead.encrypt(iv, plain, None), final) for plain, final in cases]
    tampered = bytearray(sealed[0][0])
    tampered[3] ^= 1
    sealed += [(bytes(tampered), False), (sealed[0][0][:-1], True), (sealed[0][0][:16], True)]
    outcomes = set()
    for ct, final in sealed:
        one = codec.run_one(False, index, ct, final)
        assert one is not None
        out = memoryview(bytearray(len(ct) + 1))
        written, error = codec.run_segments(False, index, 1, ct, final, out)
        assert one[0] == bytes(out[:written]) and type(one[0]) is bytes
        assert type(one[1]) is type(error) and str(one[1]) == str(error)
        outcomes.add(type(error))
    assert outcomes == {type(None), FormatError, TruncatedStreamError, AuthenticationError}
    # Sealing alone: the kernel's own object, byte for byte the batch loop's; record 0
    # of a padded body (its padding goes behind the delimiter) is the batch loop's.
    for plain in (b"", b"a", data):
        for final in (False, True):
            one = codec.run_one(True, index, plain, final)
            assert one is not None
            out = memoryview(bytearray(len(plain) + ece.OVERHEAD))
            assert one == (
                bytes(out[: codec.run_segments(True, index, 1, plain, final, out)[0]]),
                None,
            )
            assert type(one[0]) is bytes
    padded = ece.EceCodec(KEY, SALT, 25, first_padding=2)
    assert (padded.run_one(True, index, bytes(2) + data[:6], True) is None) == (index == 0)


def test_record_after_last_record() -> None:
    full = _body(16)  # two full records, the second one is the last
    cek, nonce = ece._derive(KEY, SALT)
    extra = AESGCM(cek).encrypt(
        (int.from_bytes(nonce, "big") ^ 2).to_bytes(12, "big"), b"more\x02", None
    )
    for tail in (extra, b"\x00"):
        with pytest.raises(FormatError, match="follows the last record"):
            streamcrypt.decrypt_bytes(full + tail, KEY, format="ece")
    # Bytes appended to a short last record merge with it, and it fails its tag.
    short = _body(10)  # records of 25 and 19 bytes
    for tail in (b"\x00" * 3, extra, bytes(40)):
        with pytest.raises(AuthenticationError):
            streamcrypt.decrypt_bytes(short + tail, KEY, format="ece")


def test_record_size_limits() -> None:
    for rs in (0, 1, 17):
        header = SALT + rs.to_bytes(4, "big") + b"\x00"
        with pytest.raises(FormatError, match="record size"):
            read_header(header)
        with pytest.raises(FormatError):
            streamcrypt.decrypt_bytes(header + bytes(40), KEY, format="ece")
        with pytest.raises(InvalidParameterError):
            streamcrypt.encrypt_bytes(b"x", KEY, segment_size=rs - OVERHEAD, format="ece")
    with pytest.raises(InvalidParameterError):
        EceEncryptor(KEY, record_size=1 << 32)
    big = streamcrypt.encrypt_bytes(b"x", KEY, segment_size=(1 << 20) - OVERHEAD, format="ece")
    with pytest.raises(LimitExceededError):
        streamcrypt.decrypt_bytes(big, KEY, max_record_size=1 << 16, format="ece")
    assert streamcrypt.decrypt_bytes(big, KEY, max_record_size=1 << 20, format="ece") == b"x"
    huge = SALT + ece.MAX_RECORD_SIZE.to_bytes(4, "big") + b"\x00"
    with pytest.raises(LimitExceededError):
        EceDecryptor(KEY).update(huge)


@pytest.mark.parametrize(
    "make",
    [
        lambda: EceEncryptor(KEY, salt=bytes(15)),
        lambda: EceEncryptor(KEY, keyid=b"x" * 256),
        lambda: EceEncryptor(KEY, record_size=25, padding=8),
        lambda: EceEncryptor(KEY, padding=-1),
        lambda: EceEncryptor(KEY, record_size=25.0),  # type: ignore[arg-type]
    ],
    ids=["salt", "keyid", "padding-too-big", "padding-negative", "rs-float"],
)
def test_bad_encoder_parameters(make: Callable[[], object]) -> None:
    with pytest.raises(InvalidParameterError):
        make()


def test_no_secret_in_reprs_or_errors() -> None:
    enc = EceEncryptor(KEY, salt=SALT)
    cek, _ = ece._derive(KEY, SALT)
    codec = enc._codec
    for text in (repr(enc), repr(codec), repr(enc.header), repr(codec._encrypt)):  # type: ignore[union-attr]
        assert KEY.hex() not in text and cek.hex() not in text and repr(cek) not in text
    # A record without a proper delimiter: the message must not show its last octets.
    for record in (b"secret!Z", b"secret!\x03", b"secret!\x01"):
        with pytest.raises((FormatError, TruncatedStreamError)) as info:
            streamcrypt.decrypt_bytes(_seal_records([record]), KEY, format="ece")
        text = str(info.value)
        assert "secret" not in text and "Z" not in text and "90" not in text and "3" not in text


def test_random_salt_and_default_geometry() -> None:
    a, b = (
        streamcrypt.encrypt_bytes(WALRUS, KEY, format="ece"),
        streamcrypt.encrypt_bytes(WALRUS, KEY, format="ece"),
    )
    assert a[:16] != b[:16] and a != b
    header = read_header(a)
    assert header is not None and header.record_size == ece.DEFAULT_RECORD_SIZE
    assert (
        streamcrypt.decrypt_bytes(a, SecretKey(KEY), format="ece")
        == streamcrypt.decrypt_bytes(b, KEY, format="ece")
        == WALRUS
    )
    codec = EceEncryptor(KEY, record_size=4096)._codec
    assert codec is not None
    assert codec.segment_size == 4079 and codec.overhead == 17 and codec.final_may_be_full
    assert codec.max_segments == ece._MAX_BLOCKS // 255  # RFC 8188 section 4.4


@pytest.mark.parametrize("padding", [0, 1, 7])
@pytest.mark.parametrize("final", [False, True])
def test_a_batch_of_records_is_sealed_as_records_one_by_one(padding: int, final: bool) -> None:
    """The record rule is the batch loop: a batch of any length, record 0 padded or not,
    gives the bytes of the same records sealed as batches of one, and opens back."""
    rng = random.Random(padding)
    rs = 64
    full = rs - 17
    for count in (1, 2, 3, 5):
        codec = ece.EceCodec(KEY, SALT, rs, first_padding=padding)
        tail = rng.randrange(0, full + 1)
        data = bytes(padding) + rng.randbytes(full * (count - 1) + tail - padding)
        if count == 1 and tail < padding:
            continue
        out = bytearray(len(data) + 17 * count)
        written, error = codec.run_segments(True, 0, count, data, final, memoryview(out))
        assert error is None and written == len(out)
        one_by_one = bytearray()
        for i in range(count):
            piece = data[i * full : (i + 1) * full if i < count - 1 else len(data)]
            sealed = bytearray(len(piece) + 17)
            codec.seal_segment(i, piece, final and i == count - 1, memoryview(sealed))
            one_by_one += sealed
        assert out == one_by_one
        plain = bytearray(len(data))
        got, error = codec.run_segments(False, 0, count, bytes(out), final, memoryview(plain))
        assert error is None and bytes(plain[:got]) == data[padding:]


def test_memory_stays_bounded_by_record_size() -> None:
    import tracemalloc

    rs, piece, total = 4096, 65536, 4 << 20
    chunk = bytes(range(256)) * (piece // 256)
    enc = EceEncryptor(KEY, record_size=rs)
    dec = EceDecryptor(KEY)
    seen = 0
    tracemalloc.start()
    try:
        for i in range(total // piece):
            wire = enc.update(chunk)
            plain = dec.update(wire)
            assert len(wire) <= piece + rs + ece.MAX_HEADER_SIZE
            seen += len(plain)
            assert seen >= (i + 1) * piece - 2 * rs  # nothing piles up inside
            del wire, plain
        seen += len(dec.update(enc.finalize())) + len(dec.finalize())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == total
    assert peak < 8 * piece, peak  # a few pieces in flight, never the whole 4 MiB


@pytest.mark.parametrize("records", [1, 2, 9])
@pytest.mark.parametrize("padding", [0, 40])
def test_opening_jobs_fill_their_output_exactly(records: int, padding: int) -> None:
    """An opening job's ``out_size`` is the data it writes (unpadded records), so the
    jobs of a batch fill one output object end to end and it is handed out uncopied;
    padded records write less, which stays correct (the scheduler joins)."""
    key = bytes(range(16))
    data = random.Random(records).randbytes(records * 4079 - 100)
    body = streamcrypt.encrypt_bytes(
        data, key, segment_size=4096 - ece.OVERHEAD, padding=padding, format="ece"
    )
    dec = ece.EceDecryptor(key)
    jobs = dec.feed(memoryview(body)) + dec.finish()
    assert jobs
    got = bytearray()
    for job in jobs:
        out = bytearray(job.out_size)
        written, error = job.run_into(memoryview(out))
        assert error is None
        assert written == job.out_size or padding  # exact unless padded
        got += out[:written]
    assert bytes(got) == data


def test_jobs_run_end_to_end_open_in_place_but_the_last_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Jobs run by the engine's ``run_inline`` get the rest of one output: each opens its
    last record in place, its delimiter byte landing where the next job writes; only the last
    job's last record, with no room after it, is opened aside."""
    rng = random.Random(12)
    data = rng.randbytes(5 * 65519)
    body = streamcrypt.encrypt_bytes(data, KEY, segment_size=65536 - OVERHEAD, format="ece")
    aside: list[int] = []
    scratch = ece._scratch
    monkeypatch.setattr(ece, "_scratch", lambda size: aside.append(size) or scratch(size))
    dec = EceDecryptor(KEY)
    # Cut so that a record straddles two pushes: its own job, then whole records.
    jobs = dec.feed(memoryview(body[:100_000])) + dec.feed(memoryview(body[100_000:]))
    jobs += dec.finish()
    assert len(jobs) >= 3
    parts, failure = OrderedBatches(None, site="test").run_inline(jobs)
    assert [bytes(p) for p in parts] == [data] and failure is None
    assert len(aside) == 1  # the last job's last record only


def test_records_opened_aside_reuse_one_bounded_buffer_per_thread() -> None:
    """The last record of each job is opened in a buffer the thread keeps, reused from
    record to record; a record larger than ``_KEPT_SCRATCH`` (a sender may choose up to
    the decoder's ``max_record_size``) gets a buffer of its own, never kept."""
    vars(ece._scratches).pop("buf", None)  # earlier tests' records may have been larger
    rng = random.Random(11)
    small = rng.randbytes(3 * 65519 + 7)
    body = streamcrypt.encrypt_bytes(small, KEY, segment_size=65536 - OVERHEAD, format="ece")
    dec = EceDecryptor(KEY)
    got = b"".join(dec.update(body[i : i + 50_000]) for i in range(0, len(body), 50_000))
    assert got + dec.finalize() == small
    kept = ece._scratches.buf
    assert len(kept) == 65536 - 16  # one record's plaintext, made once and reused
    dec = EceDecryptor(KEY)
    assert dec.update(body[:70_000]) == small[:65519] and ece._scratches.buf is kept

    big_rs = ece._KEPT_SCRATCH + 4096
    large = rng.randbytes(2 * big_rs)
    body = streamcrypt.encrypt_bytes(large, KEY, segment_size=big_rs - OVERHEAD, format="ece")
    dec = EceDecryptor(KEY)
    got = b"".join(dec.update(body[i : i + 300_000]) for i in range(0, len(body), 300_000))
    assert got + dec.finalize() == large
    assert ece._scratches.buf is kept  # the large records' buffers were not kept
