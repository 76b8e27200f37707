"""Every segmented format the project speaks passes the public conformance suite,
:func:`streamcrypt.testing.check_segmented_codec` (chunking, truncation at every
boundary, reordered / duplicated / dropped / extended segments, no plaintext before its
tag, range reads agreeing with full decryption)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Any

import pytest

import streamcrypt
from streamcrypt.abc import Chain
from streamcrypt.codecs import (
    FORMATS,
    FormatOptions,
    SegmentCodec,
    SegmentedTransform,
    SegmentLayout,
    age,
    aws,
    container,
    envelope,
    rclone,
    secretstream,
    tink,
)
from streamcrypt.engine import OffloadPolicy
from streamcrypt.errors import (
    AuthenticationError,
    FormatError,
    StreamCryptError,
    TruncatedStreamError,
)
from streamcrypt.keys import SecretKey
from streamcrypt.testing import check_segmented_codec, check_segmented_format


def _reader(ciphertext: bytes) -> Callable[[int, int], bytes]:
    return lambda offset, length: ciphertext[offset : offset + length]


KEY = SecretKey(bytes(range(32)), key_id="conformance")
AGE_IDENTITY = age.X25519Identity.generate()
ENVELOPE_IDENTITY = envelope.X25519Identity.generate()
RCLONE_KEYS = rclone.RcloneKeys.from_material(bytes(range(80)))
AWS_RING = aws.RawAesKeyring("ns", "key", bytes(range(32)))
TINK_KEYS = {
    "aes-gcm-hkdf": tink.TinkStreamingKey.raw(
        bytes(range(32)), tink.AesGcmHkdfStreamingParams(32, 512)
    ),
    "aes-ctr-hmac": tink.TinkStreamingKey.raw(
        bytes(range(32)), tink.AesCtrHmacStreamingParams(32, 512)
    ),
}
ECE_KEY = bytes(range(16))
SECRETSTREAM_CHUNK = 300


class _Geometry(SegmentCodec):
    """secretstream is no SegmentCodec (its messages chain), but its layout is one:
    fixed-size messages with 17 bytes of overhead behind a 24-byte header."""

    overhead = secretstream.ABYTES

    def __init__(self, chunk: int) -> None:
        self.segment_size = self.first_segment_size = chunk


def _secretstream_layout(ciphertext: bytes) -> SegmentLayout:
    return SegmentLayout(_Geometry(SECRETSTREAM_CHUNK), secretstream.HEADER_SIZE, len(ciphertext))


# The options each registered format is exercised with: (write, read). Small segments
# keep the suite fast; age, cobblestone and rclone fix theirs (64, 16, 64 KiB).
OPTIONS: dict[str, tuple[FormatOptions, FormatOptions]] = {
    "native": (FormatOptions(key=KEY, segment_size=256, aad=b"ad"),) * 2,
    "envelope": (
        FormatOptions(recipients=(ENVELOPE_IDENTITY.recipient,), segment_size=256, aad=b"ad"),
        FormatOptions(identities=(ENVELOPE_IDENTITY,), aad=b"ad"),
    ),
    "age": (
        FormatOptions(recipients=(AGE_IDENTITY.recipient,)),
        FormatOptions(identities=(AGE_IDENTITY,)),
    ),
    "tink": (FormatOptions(key=TINK_KEYS["aes-gcm-hkdf"], aad=b"ad"),) * 2,
    "cobblestone": (FormatOptions(key=KEY, aad=b"ad"),) * 2,
    "ece": (FormatOptions(key=ECE_KEY, segment_size=83),) * 2,
    "rclone": (FormatOptions(key=RCLONE_KEYS),) * 2,
    "aws": (FormatOptions(key=AWS_RING, segment_size=128),) * 2,
    "secretstream": (FormatOptions(key=KEY, segment_size=SECRETSTREAM_CHUNK, aad=b"ad"),) * 2,
}
# How many segments the sample spans where segments are large.
#: Every segment on worker threads, in small batches.
THREADED = OffloadPolicy(inline_limit=0, batch_size=4096, max_in_flight=2, adaptive=False)
SEGMENTS = {"age": 3, "cobblestone": 3, "rclone": 3}
# secretstream has no random access, and its decryptor chains messages.
LAYOUTS = {"secretstream": _secretstream_layout}


def test_every_registered_format_is_exercised() -> None:
    assert set(OPTIONS) == set(FORMATS), "give a new format its options here"


@pytest.mark.parametrize("name", list(FORMATS))
def test_registered_format_passes_the_conformance_suite(name: str) -> None:
    write, read = OPTIONS[name]
    check_segmented_format(
        FORMATS[name],
        write,
        read,
        layout=LAYOUTS.get(name),
        segments=SEGMENTS.get(name, 4),
    )


@pytest.mark.parametrize("policy", [None, THREADED], ids=["inline", "threaded"])
# secretstream's messages chain (each opens only after the one before): it has no
# independent segments for a one-shot call to run ahead of the end.
@pytest.mark.parametrize("name", [n for n in FORMATS if n != "secretstream"])
def test_one_shot_reports_the_first_fault_as_a_stream_does(
    name: str, policy: OffloadPolicy | None
) -> None:
    """A forged segment early in a message also cut at its end: the one-shot call raises
    what the format's decryptor raises fed the same bytes (the forgery, met first), not
    the truncation found at the end."""
    write, read = OPTIONS[name]
    fmt = FORMATS[name]

    def sealed(size: int) -> tuple[bytes, SegmentCodec]:
        enc = fmt.encryptor(write)
        first = enc.stages[0] if isinstance(enc, Chain) else enc
        assert isinstance(first, SegmentedTransform)
        out = enc.update(bytes(size)) + enc.finalize()
        assert first._codec is not None
        return out, first._codec

    # Three segments and a final one of 1 byte: cut, it is shorter than its overhead,
    # which the end of the input shows before any segment is opened.
    _, codec = sealed(1)
    ct = bytearray(sealed(codec.first_segment_size + 2 * codec.segment_size + 1)[0])
    ct[len(ct) // 3] ^= 1
    bad = bytes(ct[:-3])
    dec = fmt.decryptor(read)
    with pytest.raises(StreamCryptError) as streamed:
        dec.update(bad)
        dec.finalize()
    kwargs: dict[str, Any] = {n: getattr(read, n) for n in read.given() if n in fmt.reads}
    with pytest.raises(type(streamed.value)):
        streamcrypt.decrypt_bytes(bad, format=name, policy=policy, **kwargs)


# Variants the registry's defaults do not reach: other suites and key types, signed AWS
# messages; through the codecs' own keywords.
VARIANTS: dict[str, dict[str, Any]] = {
    "container-chacha": {
        "encryptor": lambda: container.StreamEncryptor(
            KEY, suite="chacha20-poly1305", segment_size=256
        ),
        "decryptor": lambda: container.StreamDecryptor(KEY),
    },
    "tink-aes-ctr-hmac": {
        "encryptor": lambda: tink.TinkStreamEncryptor(TINK_KEYS["aes-ctr-hmac"], aad=b"ad"),
        "decryptor": lambda: tink.TinkStreamDecryptor(TINK_KEYS["aes-ctr-hmac"], aad=b"ad"),
        "read_range": lambda ct, start, stop: tink.FORMAT.read_range(
            FormatOptions(key=TINK_KEYS["aes-ctr-hmac"], aad=b"ad"),
            _reader(ct),
            len(ct),
            start,
            stop,
        ),
    },
    "aws-signed-0578-with-context": {
        "encryptor": lambda: aws.AwsEncryptor(
            AWS_RING, suite="0x0578", frame_length=128, encryption_context={"k": "v"}
        ),
        "decryptor": lambda: aws.AwsDecryptor(AWS_RING, encryption_context={"k": "v"}),
        "layout": lambda ct: aws.layout(AWS_RING, _reader(ct), len(ct)),
        "read_range": lambda ct, start, stop: aws.FORMAT.read_range(
            FormatOptions(key=AWS_RING), _reader(ct), len(ct), start, stop
        ),
    },
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_passes_the_conformance_suite(name: str) -> None:
    check_segmented_codec(**VARIANTS[name])


def test_the_suite_catches_a_decryptor_that_ignores_truncation() -> None:
    class Lenient:
        def __init__(self) -> None:
            self.inner = container.StreamDecryptor(KEY)
            self.codec: SegmentCodec | None = None

        def update(self, data: Any) -> bytes:
            out = self.inner.update(data)
            self.codec = self.inner.codec
            return out

        def finalize(self) -> bytes:
            try:
                return self.inner.finalize()
            except Exception:
                return b""

    with pytest.raises(AssertionError, match="cut after"):
        check_segmented_codec(lambda: container.StreamEncryptor(KEY, segment_size=256), Lenient)


# -- the suite itself catches broken formats ----------------------------------------------
# A toy segmented format (header b"TOY1", then segments of up to 64 plaintext bytes, each
# XORed with a keystream and followed by a 16-byte HMAC over index, final flag and
# ciphertext; the final segment is always shorter than a full one). Its honest decryptor
# passes the suite; each flaw below must be caught.

TOY_KEY = b"toy key"
TOY_SEG = 64


def _toy_stream(index: int, size: int, bind: bool) -> bytes:
    return hashlib.shake_256(TOY_KEY + (index if bind else 0).to_bytes(8, "big")).digest(size)


def _toy_tag(index: int, final: bool, body: bytes, bind: bool) -> bytes:
    msg = (index if bind else 0).to_bytes(8, "big") + bytes([final]) + body
    return hmac.new(TOY_KEY, msg, "sha256").digest()[:16]


class _ToyEncryptor:
    def __init__(self, bind: bool = True) -> None:
        self.held, self.index, self.bind, self.header = b"", 0, bind, b"TOY1"

    def _seal(self, plain: bytes, final: bool) -> bytes:
        body = bytes(
            a ^ b
            for a, b in zip(plain, _toy_stream(self.index, len(plain), self.bind), strict=True)
        )
        self.index += 1
        return body + _toy_tag(self.index - 1, final, body, self.bind)

    def update(self, data: Any) -> bytes:
        out, self.header = self.header, b""
        self.held += bytes(data)
        while len(self.held) >= TOY_SEG:
            out += self._seal(self.held[:TOY_SEG], False)
            self.held = self.held[TOY_SEG:]
        return out

    def finalize(self) -> bytes:
        return self.update(b"") + self._seal(self.held, True)


class _ToyDecryptor:
    def __init__(self, bind: bool = True, leak: bool = False) -> None:
        self.held, self.index, self.bind, self.leak = b"", 0, bind, leak
        self.header_seen, self.leaked = False, 0

    def _open(self, seg: bytes, final: bool) -> bytes:
        body, tag = seg[:-16], seg[-16:]
        if not hmac.compare_digest(tag, _toy_tag(self.index, final, body, self.bind)):
            raise AuthenticationError("toy segment failed")
        plain = bytes(
            a ^ b for a, b in zip(body, _toy_stream(self.index, len(body), self.bind), strict=True)
        )
        self.index += 1
        return plain

    def update(self, data: Any) -> bytes:
        self.held += bytes(data)
        if not self.header_seen:
            if len(self.held) < 4:
                return b""
            if self.held[:4] != b"TOY1":
                raise FormatError("not a toy stream")
            self.held, self.header_seen = self.held[4:], True
        out = b""
        while len(self.held) >= TOY_SEG + 16:
            plain = self._open(self.held[: TOY_SEG + 16], False)
            out += plain[self.leaked :]
            self.held, self.leaked = self.held[TOY_SEG + 16 :], 0
        if self.leak:  # releases the current segment's bytes before its tag arrives
            body = self.held[: max(0, min(TOY_SEG, len(self.held) - 16))]  # not the tag
            stream = _toy_stream(self.index, len(body), self.bind)
            early = bytes(a ^ b for a, b in zip(body, stream, strict=True))[self.leaked :]
            self.leaked += len(early)
            out += early
        return out

    def finalize(self) -> bytes:
        if not self.header_seen or len(self.held) < 16:
            raise TruncatedStreamError("the toy stream ended early")
        return self._open(self.held, True)[self.leaked :]


class _ToyGeometry(SegmentCodec):
    overhead = 16

    def __init__(self) -> None:
        self.segment_size = self.first_segment_size = TOY_SEG


def _toy_layout(ciphertext: bytes) -> SegmentLayout:
    return SegmentLayout(_ToyGeometry(), 4, len(ciphertext))


def test_the_suite_passes_the_honest_toy_format() -> None:
    check_segmented_codec(_ToyEncryptor, _ToyDecryptor, layout=_toy_layout)


def test_the_suite_catches_plaintext_released_before_its_tag() -> None:
    with pytest.raises(AssertionError, match=r"before its tag verified|not the plaintext's"):
        check_segmented_codec(_ToyEncryptor, lambda: _ToyDecryptor(leak=True), layout=_toy_layout)


def test_the_suite_catches_segments_not_bound_to_their_index() -> None:
    with pytest.raises(AssertionError, match=r"swapped|duplicated|dropped"):
        check_segmented_codec(
            lambda: _ToyEncryptor(bind=False),
            lambda: _ToyDecryptor(bind=False),
            layout=_toy_layout,
        )


def test_detection_tells_the_registered_formats_apart() -> None:
    """A format that detects its streams claims its own output and no other format's."""
    samples = {}
    for name, fmt in FORMATS.items():
        enc = fmt.encryptor(OPTIONS[name][0])
        samples[name] = enc.update(b"detect me") + enc.finalize()
    for name, fmt in FORMATS.items():
        if fmt.detect is None:
            continue
        assert fmt.detect(samples[name]), name
        for other, sample in samples.items():
            assert other == name or not fmt.detect(sample), (name, other)


def _batch_of_one(
    codec: SegmentCodec, sealing: bool, index: int, data: bytes, final: bool
) -> tuple[bytes, str | None]:
    out = bytearray(len(data) + codec.overhead)
    written, error = codec.run_segments(sealing, index, 1, data, final, memoryview(out))
    return bytes(out[:written]), None if error is None else f"{type(error).__name__}: {error}"


def _alone(
    codec: SegmentCodec, sealing: bool, index: int, data: bytes, final: bool
) -> tuple[bytes, str | None] | None:
    made = codec.run_one(sealing, index, data, final)
    if made is None:
        return None
    out, error = made
    return out, None if error is None else f"{type(error).__name__}: {error}"


def test_a_segment_run_alone_gives_the_batch_loops_bytes_and_verdict() -> None:
    """The engine runs a job of one segment through ``SegmentCodec.run_one`` (the kernel
    makes the output object), a batch through ``run_segments``: the same bytes, and for
    a forged segment, a wrong final flag, a segment shorter than its tag or one past the
    format's last index the same error, type and message (one verdict whichever ran)."""
    ran: list[str] = []
    for name, fmt in FORMATS.items():
        enc = fmt.encryptor(OPTIONS[name][0])
        first = enc.stages[0] if isinstance(enc, Chain) else enc
        if not isinstance(first, SegmentedTransform):
            continue
        enc.update(b"x")
        codec = first._codec  # type: ignore[attr-defined]
        if codec is None or codec.run_one(True, 1, b"", False) is None:
            continue
        ran.append(name)
        plain = (
            bytes(range(256)) * (codec.segment_size // 256) + b"tail"[: codec.segment_size % 256]
        )
        for index, final in ((0, False), (1, False), (2, True)):
            sealed = _batch_of_one(codec, True, index, plain, final)
            assert _alone(codec, True, index, plain, final) == sealed
            ct = sealed[0]
            assert _alone(codec, False, index, ct, final) == (plain, None)
            forged = bytes([ct[0] ^ 1]) + ct[1:]
            cases = [
                (forged, final, index),  # a forged segment
                (ct, not final, index),  # the final flag it was not sealed with
                (ct, final, index + 1),  # another index (reordered)
                (ct[:5], final, index),  # shorter than its tag
                (ct, final, codec.max_segments),  # past the last index
            ]
            for data, flag, at in cases:
                alone = _alone(codec, False, at, data, flag)
                assert alone == _batch_of_one(codec, False, at, data, flag)
                assert alone is not None and alone[1] is not None
            assert _alone(codec, True, codec.max_segments, plain, final) == _batch_of_one(
                codec, True, codec.max_segments, plain, final
            )
    assert {"native", "age", "tink"} <= set(ran)
