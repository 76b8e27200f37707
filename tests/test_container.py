"""The native container: vectors, round trips, random access, and every kind of bad input."""

from __future__ import annotations

import json
import random
import re
from typing import Any, cast

import pytest
from container_vectors import PATH, build
from hypothesis import given, settings
from hypothesis import strategies as st

import streamcrypt as sc
from streamcrypt.codecs import container
from streamcrypt.codecs.container import StreamDecryptor, StreamEncryptor, layout
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
    UnsupportedFormatError,
)
from streamcrypt.keys import KeyRing, SecretKey

KEY = bytes(range(32))
SEG = 256
SUITES = list(container.SUITE_IDS)


def seal(data: bytes, key: object = KEY, **kw: object) -> bytes:
    enc = StreamEncryptor(key, segment_size=kw.pop("segment_size", SEG), **kw)  # type: ignore[arg-type]
    return enc.update(data) + enc.finalize()


def open_all(ct: bytes, key: object = KEY, **kw: object) -> bytes:
    dec = StreamDecryptor(key, **kw)  # type: ignore[arg-type]
    return dec.update(ct) + dec.finalize()


def released_before_error(ct: bytes, key: object = KEY, step: int = 1) -> tuple[bytes, Exception]:
    """Feed ``ct`` in small pieces; return what was released and the error raised."""
    dec = StreamDecryptor(key)  # type: ignore[arg-type]
    out = b""
    try:
        for i in range(0, len(ct), step):
            out += dec.update(ct[i : i + step])
        out += dec.finalize()
    except Exception as exc:
        return out, exc
    raise AssertionError("no error raised")


def test_committed_vectors_regenerate_exactly() -> None:
    committed = json.loads(PATH.read_text())
    assert committed == build()
    for v in committed:
        key = SecretKey(bytes.fromhex(v["key"]), key_id=v["key_id"])
        pt = open_all(bytes.fromhex(v["ciphertext"]), key, aad=bytes.fromhex(v["aad"]))
        assert pt.hex() == v["plaintext"]


def _from_the_specification(v: dict[str, Any]) -> bytes:
    """A committed vector's stream written from docs/FORMAT.md alone ("Layout", "Keys",
    "Segments"), with the standard library's HMAC and the peers' AEADs: a second
    implementation of the format, sharing no code with streamcrypt's."""
    import hmac
    import struct

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand
    from nacl.bindings import crypto_aead_xchacha20poly1305_ietf_encrypt

    key, salt, prefix = (bytes.fromhex(v[name]) for name in ("key", "salt", "nonce_prefix"))
    plaintext, aad, kid = bytes.fromhex(v["plaintext"]), bytes.fromhex(v["aad"]), v["key_id"]
    suite_id, size = container.SUITE_IDS[v["suite"]], v["segment_size"]
    body = (
        b"SCRY" + bytes([1, suite_id]) + struct.pack(">I", size) + salt + prefix
        + bytes([len(kid.encode())]) + kid.encode()
    )  # fmt: skip
    seg_key = HKDFExpand(
        hashes.SHA256(), 32, b"streamcrypt container v1 segment key" + body
    ).derive(key)
    tag = hmac.digest(key, b"streamcrypt container v1 header tag" + body + aad, "sha256")
    pieces = [plaintext[i : i + size] for i in range(0, len(plaintext) + 1, size)]
    out = [body, tag]
    for i, piece in enumerate(pieces):  # the last is shorter than a full one, maybe empty
        nonce = prefix + struct.pack(">IB", i, i == len(pieces) - 1)
        if suite_id == 1:
            out.append(AESGCM(seg_key).encrypt(nonce, piece, None))
        elif suite_id == 2:
            out.append(ChaCha20Poly1305(seg_key).encrypt(nonce, piece, None))
        else:
            out.append(crypto_aead_xchacha20poly1305_ietf_encrypt(piece, None, nonce, seg_key))
    return b"".join(out)


def test_committed_vectors_are_the_specification_s_key_schedule() -> None:
    """Every committed vector (each suite, key ids, associated data, one segment and
    many) is what docs/FORMAT.md's key schedule makes: a change to it in the code or in
    the vectors fails here, not only when both drift together."""
    vectors = json.loads(PATH.read_text())
    assert {v["suite"] for v in vectors} == set(SUITES)
    for v in vectors:
        assert _from_the_specification(v).hex() == v["ciphertext"], v


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("n", [0, 1, SEG - 1, SEG, SEG + 1, 3 * SEG, 3 * SEG + 7])
def test_round_trip_sizes(suite: str, n: int) -> None:
    data = random.Random(n).randbytes(n)
    ct = seal(data, suite=suite)
    assert open_all(ct) == data
    # the final segment is always short: n full segments mean one more (empty) final one
    header = len(ct) - (n // SEG + 1) * 16 - n
    assert (
        header == StreamEncryptor(KEY, suite=suite, segment_size=SEG).header.body().__len__() + 32
    )


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=2000), cuts=st.lists(st.integers(0, 700), max_size=12))
def test_any_chunking_gives_the_same_bytes(data: bytes, cuts: list[int]) -> None:
    salt, prefix = b"s" * 32, b"p" * 7
    one = StreamEncryptor(KEY, segment_size=SEG, salt=salt, nonce_prefix=prefix)
    expected = one.update(data) + one.finalize()
    enc = StreamEncryptor(KEY, segment_size=SEG, salt=salt, nonce_prefix=prefix)
    out, pos = b"", 0
    for c in cuts:
        out += enc.update(data[pos : pos + c])
        pos += c
    out += enc.update(data[pos:]) + enc.finalize()
    assert out == expected
    dec, plain, pos = StreamDecryptor(KEY), b"", 0
    for c in cuts:
        plain += dec.update(out[pos : pos + c])
        pos += c
    assert plain + dec.update(out[pos:]) + dec.finalize() == data


def test_nothing_released_before_its_tag_verified() -> None:
    data = bytes(range(256)) * 3
    ct = seal(data)
    dec = StreamDecryptor(KEY)
    header = len(ct) - 3 * (SEG + 16) - 16
    released = []
    for i in range(len(ct)):
        out = dec.update(ct[i : i + 1])
        if out:
            released.append((i + 1, out))
    # each segment comes out exactly when its last ciphertext byte (its tag) arrived
    ends = [header + (k + 1) * (SEG + 16) for k in range(3)]
    assert [pos for pos, _ in released] == ends
    assert b"".join(o for _, o in released) == data
    assert dec.finalize() == b""


def test_flipped_bit_at_every_byte_position() -> None:
    data = random.Random(1).randbytes(2 * SEG + 100)  # three segments
    ct = seal(data, aad=b"")
    header = len(ct) - 2 * (SEG + 16) - 116
    for pos in range(len(ct)):
        bad = bytearray(ct)
        bad[pos] ^= 0x01 << (pos % 8)
        out, exc = released_before_error(bytes(bad), step=37)
        assert isinstance(exc, AuthenticationError | FormatError | TruncatedStreamError), (pos, exc)
        if pos >= header:
            segment = (pos - header) // (SEG + 16)
            assert out == data[: segment * SEG], pos  # only segments before the flip
        else:
            assert out == b""


def test_truncation_at_every_boundary_and_inside_segments() -> None:
    data = random.Random(2).randbytes(3 * SEG + 50)
    ct = seal(data)
    for cut in range(len(ct)):
        out, exc = released_before_error(ct[:cut], step=64)
        assert isinstance(exc, TruncatedStreamError | AuthenticationError | FormatError), cut
        assert data.startswith(out) and len(out) % SEG == 0
    header = len(ct) - 3 * (SEG + 16) - 66
    for k in range(4):  # exactly at a segment boundary: always TruncatedStreamError
        _, exc = released_before_error(ct[: header + k * (SEG + 16)], step=500)
        assert isinstance(exc, TruncatedStreamError), k


def _segments(ct: bytes) -> tuple[bytes, list[bytes]]:
    lay = layout(KEY, ct, len(ct))
    segs = [
        ct[
            lay.ciphertext_offset(i) : lay.ciphertext_offset(i + 1)
            if i + 1 < lay.segment_count
            else len(ct)
        ]
        for i in range(lay.segment_count)
    ]
    return ct[: lay.header_size], segs


def test_reordered_duplicated_dropped_and_extended_segments_fail() -> None:
    data = random.Random(3).randbytes(3 * SEG + 10)
    ct = seal(data)
    head, segs = _segments(ct)
    assert len(segs) == 4
    variants = {
        "swap": [segs[1], segs[0], segs[2], segs[3]],
        "duplicate": [segs[0], segs[0], segs[1], segs[2], segs[3]],
        "drop": [segs[0], segs[2], segs[3]],
        "drop-final": segs[:3],
        "extend": [*segs, segs[3]],
        "extend-bytes": [*segs, b"\x00" * 20],
    }
    for name, order in variants.items():
        out, exc = released_before_error(head + b"".join(order), step=1000)
        assert isinstance(exc, AuthenticationError | TruncatedStreamError), name
        assert data.startswith(out), name


def test_wrong_key_aad_and_key_ids() -> None:
    ct = seal(b"hello" * 100, aad=b"ctx")
    with pytest.raises(AuthenticationError, match="header did not authenticate"):
        open_all(ct, bytes(32), aad=b"ctx")
    with pytest.raises(AuthenticationError):
        open_all(ct, KEY, aad=b"other")
    ring = KeyRing()
    old = ring.rotate()
    ct_old = seal(b"x" * 600, ring)
    new = ring.rotate()
    ct_new = seal(b"y" * 600, ring)
    assert open_all(ct_old, ring) == b"x" * 600 and open_all(ct_new, ring) == b"y" * 600
    assert old.key_id != new.key_id
    with pytest.raises(UnknownKeyError):
        open_all(ct_old, KeyRing([new]))
    with pytest.raises(UnknownKeyError):
        open_all(seal(b"z"), ring)  # no key id in the header


def test_header_garbage_versions_suites_and_segment_sizes() -> None:
    ct = seal(b"abc")
    cases = {
        b"NOPE" + ct[4:]: FormatError,
        ct[:4] + b"\x03" + ct[5:]: UnsupportedFormatError,
        ct[:5] + b"\x09" + ct[6:]: UnsupportedFormatError,
        ct[:6] + (0).to_bytes(4, "big") + ct[10:]: FormatError,
        ct[:6] + (1 << 30).to_bytes(4, "big") + ct[10:]: FormatError,
        b"garbage that is not a header at all, long enough to parse": FormatError,
    }
    for bad, err in cases.items():
        with pytest.raises(err):
            open_all(bad)
    for size in (0, 255, (1 << 24) + 1):
        with pytest.raises(InvalidParameterError):
            StreamEncryptor(KEY, segment_size=size)
    with pytest.raises(UnsupportedFormatError):
        StreamEncryptor(KEY, suite="rot13")
    with pytest.raises(InvalidKeySizeError, match="32 bytes"):
        StreamEncryptor(bytes(16))
    with pytest.raises(TruncatedStreamError):
        open_all(ct[:20])


def test_lifecycle_after_finalize_and_failure() -> None:
    enc = StreamEncryptor(KEY, segment_size=SEG)
    enc.finalize()
    with pytest.raises(AlreadyFinalizedError):
        enc.update(b"x")
    dec = StreamDecryptor(bytes(32))
    with pytest.raises(AuthenticationError):
        dec.update(seal(b"x"))
    with pytest.raises(BrokenTransformError) as info:
        dec.update(b"more")
    assert isinstance(info.value.__cause__, AuthenticationError)


def test_segment_limit() -> None:
    enc = StreamEncryptor(KEY, segment_size=SEG)
    assert enc._codec is not None
    enc._codec.max_segments = 3
    enc.update(b"a" * (3 * SEG - 1))
    enc.update(b"a")  # segments 0..2 are full; the final one would be a fourth
    with pytest.raises(LimitExceededError, match="3 segments"):
        enc.finalize()


@pytest.mark.parametrize("suite", SUITES)
def test_random_access_reads_only_covering_segments(suite: str) -> None:
    data = random.Random(4).randbytes(10 * SEG + 33)
    ct = seal(data, suite=suite)
    lay = layout(KEY, ct, len(ct))
    assert lay.plaintext_size == len(data) and lay.segment_count == 11
    reads: list[tuple[int, int]] = []

    def read_at(off: int, n: int) -> bytes:
        reads.append((off, n))
        return ct[off : off + n]

    rng = random.Random(5)
    for _ in range(200):
        a = rng.randrange(len(data) + 1)
        b = rng.randrange(a, len(data) + 1)
        reads.clear()
        assert lay.read(read_at, a, b) == data[a:b]
        if a < b:
            ((_off, n),) = reads
            assert n <= ((b - 1) // SEG - a // SEG + 1) * (SEG + 16)
    bad = bytearray(ct)
    bad[lay.ciphertext_offset(5) + 3] ^= 1
    bad_lay = layout(KEY, bytes(bad), len(bad))
    assert bad_lay.read(lambda o, n: bytes(bad[o : o + n]), 0, 5 * SEG) == data[: 5 * SEG]
    with pytest.raises(AuthenticationError):
        bad_lay.read(lambda o, n: bytes(bad[o : o + n]), 5 * SEG, 5 * SEG + 1)
    with pytest.raises(TruncatedStreamError):  # the stream path's verdict for this cut
        layout(KEY, ct, len(ct) - 40).plaintext_size  # noqa: B018


def test_bytes_api_in_parallel_matches_inline() -> None:
    data = random.Random(6).randbytes(3 << 20)
    policy = sc.OffloadPolicy(batch_size=256 << 10, inline_limit=0, adaptive=False)
    ct = sc.encrypt_bytes(data, KEY, segment_size=4096, policy=policy)
    assert sc.decrypt_bytes(ct, KEY, policy=None) == data
    assert sc.decrypt_bytes(ct, KEY, policy=policy) == data
    bad = bytearray(ct)
    bad[len(bad) // 2] ^= 1
    with pytest.raises(AuthenticationError):
        sc.decrypt_bytes(bytes(bad), KEY, policy=policy)


def test_random_access_to_the_end_proves_the_length() -> None:
    """A stream cut at a segment boundary with a forged empty final segment appended has
    a plausible length; any read reaching the end, and verify_end, must still fail."""
    data = random.Random(9).randbytes(3 * SEG)  # 3 full segments, then an empty final one
    ct = seal(data)
    lay = layout(KEY, ct, len(ct))
    lay.verify_end(lambda o, n: ct[o : o + n])
    forged = ct[: lay.ciphertext_offset(2)] + bytes(16)  # drop a segment, forge the end
    bad = layout(KEY, forged, len(forged))
    assert bad.plaintext_size == 2 * SEG  # the arithmetic alone is fooled
    for start in (0, SEG, 2 * SEG - 1):
        with pytest.raises(AuthenticationError):
            bad.read(lambda o, n: forged[o : o + n], start, 2 * SEG)
    with pytest.raises(AuthenticationError):
        bad.verify_end(lambda o, n: forged[o : o + n])
    assert bad.read(lambda o, n: forged[o : o + n], 0, SEG) == data[:SEG]  # inner reads still work


# ---------------------------------------------------------------------------------------
# One-segment messages: the direct path of encrypt_bytes / decrypt_bytes (issue 28)
# ---------------------------------------------------------------------------------------


def test_one_segment_path_writes_and_reads_the_committed_vectors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The direct path writes the vectors byte for byte (its randomness fixed to theirs)
    and reads every vector, one segment or many."""
    for v in json.loads(PATH.read_text()):
        key = SecretKey(bytes.fromhex(v["key"]), key_id=v["key_id"])
        aad, ct = bytes.fromhex(v["aad"]), bytes.fromhex(v["ciphertext"])
        plaintext = bytes.fromhex(v["plaintext"])
        assert sc.decrypt_bytes(ct, key, aad=aad) == plaintext
        fixed = bytes.fromhex(v["salt"] + v["nonce_prefix"])
        monkeypatch.setattr(container, "random_bytes", lambda n, fixed=fixed: fixed[:n])
        again = sc.encrypt_bytes(
            plaintext, key, suite=v["suite"], segment_size=v["segment_size"], aad=aad
        )
        assert again == ct, v


@pytest.mark.parametrize("suite", SUITES)
def test_one_segment_messages_skip_the_engine_and_longer_ones_take_it(
    suite: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import streamcrypt._api as api

    ran: list[int] = []
    engine = sc.engine.run_segmented

    def counted(transform: Any, data: bytes, policy: Any) -> bytes:
        ran.append(len(data))
        return engine(transform, data, policy)

    monkeypatch.setattr(api, "run_segmented", counted)
    for n in (0, 1, SEG - 1, SEG, SEG + 1, 3 * SEG):
        data = random.Random(n).randbytes(n)
        ct = sc.encrypt_bytes(data, KEY, suite=suite, segment_size=SEG)
        assert open_all(ct) == data  # the stream decryptor reads what it wrote
        assert sc.decrypt_bytes(memoryview(bytearray(ct)), KEY) == data
        assert sc.decrypt_bytes(seal(data, suite=suite), KEY) == data
    # only messages of more than one segment ran on the engine: 3 of the 6 sizes, each
    # once to write and twice to read
    assert len(ran) == 3 * 3


def test_one_segment_path_gives_the_stream_path_verdict() -> None:
    """Tampering, truncation, a wrong key or associated data: the direct path raises the
    same typed error, with the same message, as the stream decryptor."""
    data = random.Random(7).randbytes(100)
    ct = seal(data, aad=b"ad")
    header = len(ct) - 116
    cases = [ct[:cut] for cut in (0, 10, header - 1, header, header + 15, header + 16)]
    for pos in (0, 5, header - 1, header, len(ct) - 1):
        bad = bytearray(ct)
        bad[pos] ^= 1
        cases.append(bytes(bad))
    cases.append(ct + b"x")
    for case in cases:
        for key, aad in ((KEY, b"ad"), (KEY, b"other"), (bytes(32), b"ad")):
            try:
                open_all(case, key, aad=aad)
            except Exception as exc:
                expected: Exception = exc
            else:
                raise AssertionError("the stream decryptor accepted a bad message")
            with pytest.raises(type(expected)) as got:
                sc.decrypt_bytes(case, key, aad=aad, format="native")
            assert str(got.value) == str(expected)
    wrong: object
    for wrong in ["x" * 32, b"short", 7]:
        with pytest.raises((InvalidParameterError, InvalidKeySizeError)) as stream_error:
            open_all(ct, wrong)
        with pytest.raises(type(stream_error.value)) as direct_error:
            sc.decrypt_bytes(ct, cast("bytes", wrong), format="native")
        assert str(direct_error.value) == str(stream_error.value)


@pytest.mark.parametrize("suite", SUITES)
def test_one_segment_path_is_the_stream_path(suite: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The direct path is the stream path for a one-segment message: for the same salt and
    nonce prefix the same bytes, whatever the key's form (bytes, SecretKey with an id,
    KeyRing) and the associated data; each reads what the other wrote (bytes-like inputs
    of any kind); a cut or flipped byte gets the same typed error from both."""
    rng = random.Random(suite)
    ring = KeyRing([SecretKey(bytes(range(32, 64)), key_id="k1")])
    prefix = {"xchacha20-poly1305": 19}.get(suite, 7)  # docs/FORMAT.md, "Layout"
    for key in (KEY, SecretKey(KEY, key_id="id"), ring):
        for size in (0, 1, 100, SEG - 1):
            data, aad = rng.randbytes(size), rng.randbytes(rng.choice((0, 9)))
            fixed = rng.randbytes(32 + prefix)
            monkeypatch.setattr(container, "random_bytes", lambda n, fixed=fixed: fixed[:n])
            direct = sc.encrypt_bytes(data, key, suite=suite, segment_size=SEG, aad=aad)
            stream = seal(data, key, suite=suite, aad=aad, salt=fixed[:32], nonce_prefix=fixed[32:])
            assert direct == stream
            monkeypatch.undo()
            fresh = sc.encrypt_bytes(bytearray(data), key, suite=suite, segment_size=SEG, aad=aad)
            assert open_all(fresh, key, aad=aad) == data
            assert sc.decrypt_bytes(memoryview(stream), key, aad=aad) == data
            for case in (stream[: len(stream) - 1], stream[:-16], stream[:40], _flip(stream, -1)):
                with pytest.raises(Exception) as streamed:
                    open_all(case, key, aad=aad)
                with pytest.raises(
                    type(streamed.value), match=f"^{re.escape(str(streamed.value))}$"
                ):
                    sc.decrypt_bytes(case, key, aad=aad)


def test_one_segment_path_runs_the_engines_job_of_one_segment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """encrypt_bytes / decrypt_bytes of a one-segment message run segment 0 as the engine
    runs a job of one segment (SegmentCodec.run_one: the kernel makes the output, a
    failure is judged by the batch loop), with no loop or output memory of their own:
    one run_one a call, final, and a read hands out the object the kernel made."""
    calls: list[tuple[bool, int, bool, bytes, bytes]] = []
    real = container.ContainerCodec.run_one

    def spy(
        codec: Any, sealing: bool, index: int, data: Any, final: bool
    ) -> tuple[bytes, Exception | None]:
        made = real(codec, sealing, index, data, final)
        calls.append((sealing, index, final, bytes(data), made[0]))
        return made

    monkeypatch.setattr(container.ContainerCodec, "run_one", spy)
    for key in (KEY, SecretKey(KEY)):
        calls.clear()
        data = random.Random(5).randbytes(100)
        ct = sc.encrypt_bytes(data, key)
        assert calls == [(True, 0, True, data, ct[-116:])]
        opened = sc.decrypt_bytes(ct, key)
        assert opened == data
        assert calls[1][:4] == (False, 0, True, ct[-116:])
        assert opened is calls[1][4]  # not a copy
        with pytest.raises(AuthenticationError, match="segment 0 did not verify"):
            sc.decrypt_bytes(_flip(ct, -1), key)
        assert len(calls) == 3


def _flip(data: bytes, pos: int) -> bytes:
    out = bytearray(data)
    out[pos] ^= 1
    return bytes(out)


def test_every_reader_refuses_a_key_of_another_size_before_deriving_with_it() -> None:
    """A reader takes 32 bytes or a SecretKey of 32 as they are once _reader_key checked
    them (an HMAC would take a key of any size): every way into a container's header
    refuses a 16-byte key of each kind with InvalidKeySizeError, never an
    AuthenticationError from keys derived with it."""
    key = bytes(range(32))
    ct = sc.encrypt_bytes(b"message", key)
    header = StreamEncryptor(key).take_header()
    entries = {
        "decrypt_bytes": lambda k: sc.decrypt_bytes(ct, k),
        "decrypt_bytes native": lambda k: sc.decrypt_bytes(ct, k, format="native"),
        "StreamDecryptor": lambda k: StreamDecryptor(k).feed(ct),
        "layout": lambda k: layout(k, ct, len(ct)),
        "sealing_layout": lambda k: container.sealing_layout(k, header, 7),
    }
    for short in (key[:16], bytearray(key[:16]), SecretKey(key[:16])):
        for entry in entries.values():
            with pytest.raises(InvalidKeySizeError, match="32 bytes"):
                entry(short)
