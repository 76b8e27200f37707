"""The AWS Encryption SDK message format on its own: round trips, limits, fuzz, random access.

Interop with the aws-encryption-sdk package is in test_aws_interop.py.
"""

from __future__ import annotations

import random
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import random_splits, round_trip_peak_memory

import streamcrypt
from streamcrypt.codecs import FormatOptions, SegmentedTransform, aws
from streamcrypt.codecs.aws import _layout as aws_layout
from streamcrypt.codecs.aws._frames import _FinalFrameSealer
from streamcrypt.codecs.aws._keyrings import _open_header
from streamcrypt.engine import _pipeline
from streamcrypt.errors import (
    AuthenticationError,
    BrokenTransformError,
    FormatError,
    InvalidParameterError,
    InvalidSignatureError,
    LimitExceededError,
    StreamCryptError,
    TruncatedStreamError,
    UnknownKeyError,
    UnsupportedFormatError,
)

RING = aws.RawAesKeyring("ns", "key", bytes(range(32)))


def _data(n: int) -> bytes:
    return random.Random(n).randbytes(n)


def _header(ct: bytes) -> aws.AwsHeader:
    header = aws.parse_header(ct)
    assert header is not None
    return header


@pytest.mark.parametrize("suite", ["0x0478", "0x0578"])
@pytest.mark.parametrize("frame", [0, 1, 100, 4096])
@pytest.mark.parametrize("size", [0, 1, 99, 100, 101, 4096, 10000])
def test_round_trip(suite: str, frame: int, size: int) -> None:
    data = _data(size)
    if frame:
        ct = streamcrypt.encrypt_bytes(
            data, RING, suite=suite, segment_size=frame, encryption_context={"k": "v"}, format="aws"
        )
    else:  # non-framed: the codec's, not the format's
        enc = aws.AwsEncryptor(RING, suite=suite, frame_length=0, encryption_context={"k": "v"})
        ct = enc.update(data) + enc.finalize()
    assert streamcrypt.decrypt_bytes(ct, RING, format="aws") == data
    assert streamcrypt.decrypt_bytes(ct, RING, encryption_context={"k": "v"}, format="aws") == data
    header = _header(ct)
    assert (header.suite.id, header.framed, header.frame_length) == (suite, frame > 0, frame)
    assert aws.header_size(ct) == header.size and aws.is_aws(ct)


@given(st.binary(max_size=20000), st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_any_chunking_gives_the_same_bytes(data: bytes, seed: int) -> None:
    rng = random.Random(seed)
    enc = aws.AwsEncryptor(RING, frame_length=rng.choice([1, 64, 4096]))
    ct = b"".join(enc.update(p) for p in random_splits(data, rng, 3000)) + enc.finalize()
    dec = aws.AwsDecryptor(RING)
    out = b"".join(dec.update(p) for p in random_splits(ct, rng, 3000)) + dec.finalize()
    assert out == data


@given(st.binary(max_size=6000), st.integers(0, 2**32 - 1), st.sampled_from(["0x0478", "0x0578"]))
@settings(max_examples=30, deadline=None)
def test_frames_across_pieces_of_a_reused_buffer(data: bytes, seed: int, suite: str) -> None:
    """A frame begun in one piece is held until later pieces complete it (its head too,
    the final frame's 24 bytes among them): a read-only piece as it is, a writable one
    as a copy, so a caller that refills one buffer for every piece (as a socket reader
    does) still gets the message back; so are a signed message's whole frames, withheld
    until the signature verified."""
    rng = random.Random(seed)
    enc = aws.AwsEncryptor(RING, suite=suite, frame_length=rng.choice([1, 64, 1000]))
    ct = enc.update(data) + enc.finalize()
    dec = aws.AwsDecryptor(RING)
    buf = bytearray(64)
    out, pos = [], 0
    while pos < len(ct):
        n = rng.randint(1, 64)
        piece = ct[pos : pos + n]
        buf[: len(piece)] = piece
        out.append(dec.update(memoryview(buf)[: len(piece)]))
        buf[:] = bytes([0xA5]) * 64  # the caller reuses its buffer
        pos += n
    assert b"".join(out) + dec.finalize() == data


def test_frames_after_the_header_are_opened_from_the_piece_itself() -> None:
    """The frames that follow the header in the same piece are opened where they lie
    (the jobs' input is the caller's piece, not a copy of what follows the header)."""
    ct = streamcrypt.encrypt_bytes(
        _data(3 * 4096 + 5), RING, suite="0x0478", segment_size=4096, format="aws"
    )
    for held in (0, 10):  # the header alone, or the header completed by the second piece
        body = aws.AwsDecryptor(RING).body
        assert body.feed(ct[:held]) == []
        rest = ct[held:]
        jobs = body.feed(rest)
        assert jobs and all(memoryview(job.data).obj is rest for job in jobs), held
        assert b"".join(bytes(job.run()) for job in jobs) == _data(3 * 4096 + 5)[: 3 * 4096]


def test_one_frame_opened_alone_gives_the_batch_loops_bytes_and_verdict() -> None:
    """A job of one regular frame is opened by the kernel's own ``decrypt`` (it makes
    the output object); whatever the frame, the bytes and the verdict (its class and
    message) are the batch loop's. Sealing and the final frame go the batch way."""
    data = _data(3 * 4096 + 5)
    ct = streamcrypt.encrypt_bytes(data, RING, suite="0x0478", segment_size=4096, format="aws")
    header = _header(ct)
    codec = aws.AwsFrameCodec(_open_header(header, [RING], {}), header.message_id, 4096)
    regular = 4096 + codec.overhead
    frame = ct[header.size + regular : header.size + 2 * regular]  # frame 2: index 1
    flipped = bytearray(frame)
    flipped[100] ^= 1
    cases = [(1, frame), (1, bytes(flipped)), (2, frame), (1, frame[:-1]), (1, frame + b"x")]
    for index, one in cases:
        got = codec.run_one(False, index, one, False)
        assert got is not None
        out = memoryview(bytearray(4096))
        written, error = codec.run_segments(False, index, 1, one, False, out)
        assert got[0] == bytes(out[:written]), index
        assert type(got[1]) is type(error) and str(got[1]) == str(error), (got[1], error)
    assert codec.run_one(False, 1, frame, False) == (data[4096:8192], None)
    assert codec.run_one(True, 1, data[:4096], False) is None
    assert codec.run_one(False, 3, ct[header.size + 3 * regular :], True) is None


def test_final_frame_at_a_multiple_is_empty_and_full_final_frames_are_read() -> None:
    data = _data(8192)
    ct = streamcrypt.encrypt_bytes(data, RING, suite="0x0478", segment_size=4096, format="aws")
    header = _header(ct)
    # Two regular frames, then an empty final frame (as the Python SDK writes it).
    assert len(ct) == header.size + 2 * (4096 + 32) + 40
    # The spec's other choice: the last 4096 bytes in a full final frame. Seal one with
    # the message's own key (read from the decryptor: test-only) and check it is read.
    body = aws.AwsDecryptor(RING).body
    body.update(ct[: header.size])
    sealer = _FinalFrameSealer(body._key, header.message_id, 4096)
    frame = bytearray(4096 + 40)
    sealer.seal_segment(0, data[:4096], True, memoryview(frame))
    assert (
        streamcrypt.decrypt_bytes(ct[: header.size] + bytes(frame), RING, format="aws")
        == data[:4096]
    )


def test_legacy_suites_need_allow_legacy() -> None:
    ct = streamcrypt.encrypt_bytes(b"hello", RING, suite="0x0178", allow_legacy=True, format="aws")
    with pytest.raises(UnsupportedFormatError):
        streamcrypt.decrypt_bytes(ct, RING, format="aws")
    assert streamcrypt.decrypt_bytes(ct, RING, allow_legacy=True, format="aws") == b"hello"
    with pytest.raises(UnsupportedFormatError):
        aws.AwsEncryptor(RING, suite="0x0178")
    for unknown in ("0x9999", "0578", "AES_256_GCM_HKDF_SHA512_COMMIT_KEY"):  # one spelling
        with pytest.raises(UnsupportedFormatError):
            aws.AwsEncryptor(RING, suite=unknown)


def test_encryptor_argument_errors() -> None:
    with pytest.raises(InvalidParameterError):
        aws.AwsEncryptor(RING, encryption_context={"aws-crypto-public-key": "x"})
    with pytest.raises(InvalidParameterError):
        aws.AwsEncryptor([])
    with pytest.raises(InvalidParameterError):
        aws.AwsEncryptor(RING, frame_length=-1)
    with pytest.raises(LimitExceededError):
        aws.AwsEncryptor(RING, encryption_context={"k": "v" * 70000})
    enc = aws.AwsEncryptor(RING, frame_length=0, max_body_size=1000)
    with pytest.raises(LimitExceededError):
        enc.update(bytes(1001))
    assert "key hidden" in repr(RING) and "key hidden" in repr(
        aws.AwsFrameCodec(bytes(32), bytes(32), 10)
    )


def test_signed_messages_release_nothing_before_the_signature_unless_allowed() -> None:
    data = _data(50000)
    ct = streamcrypt.encrypt_bytes(data, RING, format="aws")
    held = aws.AwsDecryptor(RING)
    assert held.update(ct[:-1]) == b""  # every frame verified, the signature not yet
    assert held.update(ct[-1:]) == b"" and held.finalize() == data
    forged = aws.AwsDecryptor(RING)
    assert forged.update(ct[:-1] + bytes([ct[-1] ^ 1])) == b""
    with pytest.raises(InvalidSignatureError):
        forged.finalize()
    small = aws.AwsDecryptor(RING, max_buffered=1000)
    with pytest.raises(LimitExceededError, match="allow_unverified=True"):
        small.update(ct)
    early = aws.AwsDecryptor(RING, allow_unverified=True)  # opted in by name
    first = early.update(ct)
    assert first == data[: len(first)] and len(first) == 12 * 4096  # the final frame is held
    assert first + early.finalize() == data
    # An unsigned message's frames come out as they verify, with no opt-in.
    unsigned = aws.AwsDecryptor(RING)
    assert (
        len(unsigned.update(streamcrypt.encrypt_bytes(data, RING, suite="0x0478", format="aws")))
        == 12 * 4096
    )


def test_the_engine_releases_nothing_of_a_signed_message_before_its_signature() -> None:
    data = _data(300000)
    ct = streamcrypt.encrypt_bytes(data, RING, format="aws")
    forged = ct[:-1] + bytes([ct[-1] ^ 1])

    async def pieces() -> AsyncIterator[bytes]:
        for i in range(0, len(forged), 4096):
            yield forged[i : i + 4096]

    async def main() -> None:
        for run in (
            lambda: streamcrypt.decrypt(pieces(), RING, format="aws"),
            lambda: streamcrypt.decrypt(pieces(), format="aws", key=RING, policy=None),
        ):
            got = bytearray()
            with pytest.raises(InvalidSignatureError):
                async for chunk in run():
                    got += chunk
            assert got == b""
        early = bytearray()  # opted in by name: verified frames come out first
        with pytest.raises(InvalidSignatureError):
            async for chunk in streamcrypt.decrypt(
                pieces(), RING, format="aws", allow_unverified=True
            ):
                early += chunk
        assert len(early) > 0 and data.startswith(early)

    anyio.run(main)


@pytest.mark.parametrize("allow_unverified", [False, True])
@pytest.mark.parametrize("suite", ["0x0478", "0x0578"])
def test_the_decryptor_is_one_segmented_stage_on_the_inline_hand_out(
    suite: str, allow_unverified: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the suite (known only once the header is read), the decryptor is one
    segmented stage: the engine's one-stage path hands each inline push's pieces out
    itself, and no plain stage runs per piece (the signature gate was one)."""
    data = _data(5 * 65536 + 17)
    ct = streamcrypt.encrypt_bytes(data, RING, suite=suite, segment_size=65536, format="aws")
    stages = streamcrypt.pipeline(aws.AwsDecryptor(RING)).stages
    assert len(stages) == 1 and isinstance(stages[0], SegmentedTransform)
    handed_out = []
    inline = _pipeline._SegmentedStage.inline

    def spy(self: Any, piece: Any) -> Any:
        done = inline(self, piece)
        handed_out.append(done is not None)
        return done

    async def no_plain_stage(self: Any, piece: Any) -> None:
        raise AssertionError("a plain stage ran")

    monkeypatch.setattr(_pipeline._SegmentedStage, "inline", spy)
    monkeypatch.setattr(_pipeline._PlainStage, "_push", no_plain_stage)

    async def main() -> bytes:
        out = bytearray()
        async for piece in streamcrypt.decrypt(
            _pieces(ct, 65536), RING, format="aws", policy=None, allow_unverified=allow_unverified
        ):
            out += piece
        return bytes(out)

    assert anyio.run(main) == data
    # Every push after the one that read the header took the inline hand-out (the first
    # asked twice: in the stream's loop, then in the batch way it was sent on).
    assert handed_out.count(True) == -(-len(ct) // 65536) - 1 and handed_out[-1]


async def _pieces(data: bytes, size: int) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


@given(st.integers(1, 16000), st.sampled_from(["signature", "frame", "end"]))
@settings(max_examples=20, deadline=None)
def test_a_signed_message_releases_nothing_before_its_signature_over_any_chunking(
    chunk: int, damage: str
) -> None:
    """A signed message's frames are withheld until its signature verified: through the
    engine (inline and offloaded) and as a plain transform, whatever the chunking, a
    forged signature, a tampered frame or a truncated footer releases no byte and gives
    one verdict; an intact message comes out whole."""
    data = _data(12000)
    ct = streamcrypt.encrypt_bytes(data, RING, segment_size=1000, format="aws")
    bad = bytearray(ct)
    if damage == "signature":
        bad[-1] ^= 1
        error: type[Exception] = InvalidSignatureError
    elif damage == "frame":
        bad[len(bad) // 2] ^= 1
        error = AuthenticationError
    else:
        del bad[-1]
        error = TruncatedStreamError

    async def read(message: bytes, policy: Any) -> tuple[bytes, Exception | None]:
        out = bytearray()
        try:
            async for piece in streamcrypt.decrypt(
                _pieces(message, chunk), RING, format="aws", policy=policy
            ):
                out += piece
        except StreamCryptError as exc:
            return bytes(out), exc
        return bytes(out), None

    for policy in (None, streamcrypt.OffloadPolicy(inline_limit=0)):
        assert anyio.run(read, ct, policy) == (data, None)
        got, exc = anyio.run(read, bytes(bad), policy)
        assert got == b"" and isinstance(exc, error), (policy, exc)
    dec = aws.AwsDecryptor(RING)
    assert b"".join(dec.update(bad[i : i + chunk]) for i in range(0, len(bad), chunk)) == b""
    with pytest.raises(error):
        dec.finalize()


def _rewrite_frame(ct: bytearray, index: int, plaintext: bytes) -> None:
    """Seal ``plaintext`` as regular frame ``index`` with the message's own data key
    (what any holder of a wrapping key can do) and write it over the frame."""
    header = _header(bytes(ct))
    key = _open_header(header, [RING], {})
    codec = aws.AwsFrameCodec(key, header.message_id, header.frame_length)
    frame = bytearray(header.frame_length + codec.overhead)
    codec.seal_segment(index, plaintext, False, memoryview(frame))
    offset = header.size + index * len(frame)
    ct[offset : offset + len(frame)] = frame
    assert (
        codec.run_segments(False, index, 1, bytes(frame), False, memoryview(bytearray(len(frame))))[
            1
        ]
        is None
    )


def test_random_access_to_a_signed_message_returns_only_signed_frames() -> None:
    data = _data(20 * 1000 + 10)
    ct = bytearray(streamcrypt.encrypt_bytes(data, RING, segment_size=1000, format="aws"))
    lay = aws.layout(RING, lambda o, n: bytes(ct[o : o + n]), len(ct))  # verified here
    _rewrite_frame(ct, 7, b"E" * 1000)

    def read_at(offset: int, length: int) -> bytes:
        return bytes(ct[offset : offset + length])

    assert lay.read(read_at, 0, 7000) == data[:7000]
    assert lay.read(read_at, 8000, 20010) == data[8000:]
    for start, stop in [(7000, 8000), (6999, 7001), (0, 20010)]:
        with pytest.raises(InvalidSignatureError, match="changed"):
            lay.read(read_at, start, stop)
    # Without the signature (opted in by name) the forged frame reads.
    blind = aws.layout(RING, read_at, len(ct), allow_unverified=True)
    assert blind.read(read_at, 7000, 8000) == b"E" * 1000


def test_random_access_to_a_signed_message_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    ct = streamcrypt.encrypt_bytes(
        _data(10 * 100), RING, segment_size=100, format="aws"
    )  # 11 frames
    read_at = lambda o, n: ct[o : o + n]  # noqa: E731
    monkeypatch.setattr(aws_layout, "MAX_SIGNED_FRAMES", 10)
    with pytest.raises(LimitExceededError, match="MAX_SIGNED_FRAMES"):
        aws.layout(RING, read_at, len(ct))
    monkeypatch.setattr(aws_layout, "MAX_SIGNED_FRAMES", 11)
    assert aws.layout(RING, read_at, len(ct)).read(read_at, 0, 1000) == _data(1000)


def test_a_frame_rewritten_after_open_is_refused(tmp_path: Path) -> None:
    data = _data(40 * 512 + 77)
    path = tmp_path / "signed.aws"
    path.write_bytes(streamcrypt.encrypt_bytes(data, RING, segment_size=512, format="aws"))

    async def main() -> None:
        async with streamcrypt.open(path, "rb", format="aws", key=RING) as f:
            assert await f.read(512) == data[:512]
            ct = bytearray(path.read_bytes())
            _rewrite_frame(ct, 9, b"E" * 512)
            path.write_bytes(ct)
            await f.seek(9 * 512)
            with pytest.raises(InvalidSignatureError):
                await f.read(512)
            await f.seek(12 * 512)
            assert await f.read(512) == data[12 * 512 : 13 * 512]

    anyio.run(main)


def test_truncation_and_trailing_bytes() -> None:
    for suite in ("0x0478", "0x0578"):
        ct = streamcrypt.encrypt_bytes(
            _data(10000), RING, suite=suite, segment_size=1000, format="aws"
        )
        for cut in range(1, len(ct), 97):
            dec = aws.AwsDecryptor(RING)
            with pytest.raises(StreamCryptError) as info:
                dec.update(ct[:cut])
                dec.finalize()
            assert isinstance(info.value, TruncatedStreamError | AuthenticationError | FormatError)
        with pytest.raises(FormatError):
            streamcrypt.decrypt_bytes(ct + b"x", RING, format="aws")


def test_signature_tamper_and_reuse_across_messages() -> None:
    a = streamcrypt.encrypt_bytes(_data(5000), RING, format="aws")
    b = streamcrypt.encrypt_bytes(_data(5000), RING, format="aws")
    footer = 2 + 103  # the static-length P-384 signature and its length
    forged = a[:-footer] + b[-footer:]
    with pytest.raises(InvalidSignatureError):
        streamcrypt.decrypt_bytes(forged, RING, format="aws")


def test_engine_releases_verified_frames_then_the_error() -> None:
    data = _data(4 << 20)
    ct = bytearray(
        streamcrypt.encrypt_bytes(data, RING, suite="0x0478", segment_size=65536, format="aws")
    )
    hsize = _header(bytes(ct)).size
    ct[hsize + 40 * (65536 + 32) + 50] ^= 1

    async def main() -> None:
        got = bytearray()
        with pytest.raises(AuthenticationError):
            async for chunk in streamcrypt.decrypt(bytes(ct), RING, format="aws"):
                got += chunk
        assert bytes(got) == data[: len(got)] and len(got) <= 40 * 65536

    anyio.run(main)


# ----------------------------------------------------------------------------- limits


def _v2_header(
    *,
    context: bytes = b"",
    edks: list[tuple[bytes, bytes, bytes]] | None = None,
    edk_count: int | None = None,
    content: int = 2,
    frame: int = 4096,
) -> bytes:
    edks = edks if edks is not None else [(b"ns", b"info", b"x" * 10)]
    out = b"\x02\x04\x78" + bytes(32) + struct.pack(">H", len(context)) + context
    out += struct.pack(">H", len(edks) if edk_count is None else edk_count)
    for parts in edks:
        out += b"".join(struct.pack(">H", len(p)) + p for p in parts)
    return out + bytes([content]) + struct.pack(">I", frame) + bytes(32) + bytes(16)


def test_header_limits_are_checked_field_by_field() -> None:
    with pytest.raises(LimitExceededError):
        aws.parse_header(_v2_header(edk_count=65535, edks=[]))  # refused at the count
    with pytest.raises(LimitExceededError):
        aws.parse_header(_v2_header(edks=[(b"ns", b"i", b"k")] * 65), max_encrypted_data_keys=64)
    assert aws.parse_header(
        _v2_header(edks=[(b"ns", b"i", b"k")] * 65), max_encrypted_data_keys=None
    )
    with pytest.raises(LimitExceededError):
        aws.parse_header(_v2_header(frame=(1 << 26) + 1))
    with pytest.raises(LimitExceededError):
        aws.parse_header(_v2_header(edks=[(b"ns", b"i", b"k" * 60000)] * 20))  # > 1 MiB header
    with pytest.raises(FormatError):
        aws.parse_header(_v2_header(edks=[], edk_count=0))
    with pytest.raises(FormatError):
        aws.parse_header(_v2_header(content=3))
    with pytest.raises(FormatError):
        aws.parse_header(_v2_header(content=1, frame=5))
    with pytest.raises(FormatError):
        aws.parse_header(_v2_header(context=b"\x00\x00"))  # a count of zero pairs
    with pytest.raises(FormatError):
        aws.parse_header(_v2_header(context=b"\x00\x02\x00\x01a\x00\x01b\x00\x01a\x00\x01c"))
    with pytest.raises(FormatError):
        aws.parse_header(_v2_header(context=b"\x00\x01\x00\x05ab"))
    with pytest.raises(UnsupportedFormatError):
        aws.parse_header(b"\x03" + bytes(100))
    assert aws.parse_header(_v2_header()[:50]) is None
    assert not aws.is_aws(b"RCLONE\x00\x00") and aws.is_aws(_v2_header())


def test_header_parsing_is_linear_fed_byte_by_byte() -> None:
    ct = streamcrypt.encrypt_bytes(
        b"x",
        [aws.RawAesKeyring("ns", f"k{i}", bytes(32)) for i in range(60)] + [RING],
        format="aws",
    )
    hsize = _header(ct).size
    assert hsize > 4000
    dec = aws.AwsDecryptor(RING)
    t0 = time.perf_counter()
    for i in range(len(ct)):
        dec.update(ct[i : i + 1])
    assert dec.finalize() == b"x"
    elapsed = time.perf_counter() - t0
    # A quadratic re-parse would cost ~hsize**2 / 2 field reads; this is a few ms.
    assert elapsed < 2.0


def test_fuzz_malformed_messages_give_typed_errors() -> None:
    rng = random.Random(16)
    good = streamcrypt.encrypt_bytes(
        _data(3000), RING, segment_size=500, encryption_context={"a": "b"}, format="aws"
    )
    for _ in range(400):
        blob = bytearray(good[: rng.randint(0, len(good))])
        for _ in range(rng.randint(0, 3)):
            if blob:
                blob[rng.randrange(len(blob))] = rng.randrange(256)
        if rng.random() < 0.3:
            blob += rng.randbytes(rng.randint(1, 50))
        dec = aws.AwsDecryptor(RING)
        try:
            dec.update(bytes(blob))
            dec.finalize()
        except StreamCryptError:
            with pytest.raises(BrokenTransformError):
                dec.update(b"x")


def test_wrong_keyring_and_memory_bound() -> None:
    ct = streamcrypt.encrypt_bytes(b"data", RING, format="aws")
    with pytest.raises(UnknownKeyError):
        streamcrypt.decrypt_bytes(
            ct, aws.RawAesKeyring("other", "key", bytes(range(32))), format="aws"
        )
    assert (
        round_trip_peak_memory(aws.AwsEncryptor(RING, suite="0x0478"), aws.AwsDecryptor(RING))
        < 8 << 20
    )


def test_non_framed_body_limit_on_read() -> None:
    enc = aws.AwsEncryptor(RING, frame_length=0)  # non-framed: the codec's, not the format's
    ct = enc.update(bytes(5000)) + enc.finalize()
    dec = aws.AwsDecryptor(RING, max_body_size=4000)
    with pytest.raises(LimitExceededError):
        dec.update(ct)
        dec.finalize()
    with pytest.raises(UnsupportedFormatError):
        aws.layout(RING, lambda o, n: ct[o : o + n], len(ct))


@pytest.mark.parametrize("suite", ["0x0478", "0x0578"])
def test_random_access(suite: str) -> None:
    data = _data(100000)
    ct = streamcrypt.encrypt_bytes(data, RING, suite=suite, segment_size=3000, format="aws")

    def read_at(offset: int, length: int) -> bytes:
        return ct[offset : offset + length]

    rng = random.Random(suite)
    for _ in range(30):
        a = rng.randint(0, len(data))
        b = rng.randint(a, len(data) + 3)
        assert aws.FORMAT.read_range(FormatOptions(key=RING), read_at, len(ct), a, b) == data[a:b]
    with pytest.raises(TruncatedStreamError):
        aws.layout(RING, read_at, len(ct) - 1)


_PREFIXES = [b"", b"\x02\x04\x78", b"\x02\x05\x78", b"\x01\x80\x01\x78", b"\x01\x80\x03\x78"]
_GOOD = streamcrypt.encrypt_bytes(
    b"fuzz", RING, segment_size=64, encryption_context={"k": "v"}, format="aws"
)


@given(
    st.sampled_from(_PREFIXES),
    st.binary(max_size=400),
    st.integers(min_value=0, max_value=2**32 - 1),
)
@settings(max_examples=300, deadline=None)
def test_fuzz_header_parser_and_decryptor_on_any_bytes(
    prefix: bytes, blob: bytes, seed: int
) -> None:
    """After a valid magic, any bytes either parse or fail typed, in one call or fed in
    pieces, whatever the legacy policy."""
    data = prefix + blob
    for allow_legacy in (False, True):
        try:
            aws.parse_header(data, allow_legacy=allow_legacy)
        except StreamCryptError:
            pass
    try:
        aws.header_size(data)
    except StreamCryptError:
        pass
    dec = aws.AwsDecryptor(RING, allow_legacy=True)
    try:
        for piece in random_splits(data, random.Random(seed)):
            assert dec.update(piece) == b""  # nothing forged ever opens
        dec.finalize()
    except StreamCryptError:
        with pytest.raises(BrokenTransformError):
            dec.update(b"x")


@given(st.integers(min_value=0, max_value=len(_GOOD)), st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_fuzz_any_tail_after_a_real_prefix(cut: int, tail: bytes) -> None:
    data = _GOOD[:cut] + tail
    try:
        aws.parse_header(data)
    except StreamCryptError:
        pass
    try:
        out = streamcrypt.decrypt_bytes(data, RING, format="aws")
    except StreamCryptError:
        pass
    else:
        assert data == _GOOD and out == b"fuzz"
