"""Every segmented format the project speaks passes the public conformance suite,
:func:`streamcrypt.testing.check_segmented_codec` (chunking, truncation at every
boundary, reordered / duplicated / dropped / extended segments, no plaintext before its
tag, range reads agreeing with full decryption)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from streamcrypt.codecs import (
    FORMATS,
    FormatOptions,
    SegmentCodec,
    SegmentLayout,
    age,
    aws,
    container,
    envelope,
    rclone,
    secretstream,
    tink,
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
        "read_range": lambda ct, start, stop: tink.decrypt_range(
            ct, TINK_KEYS["aes-ctr-hmac"], start, stop, aad=b"ad"
        ),
    },
    "aws-signed-0578-with-context": {
        "encryptor": lambda: aws.AwsEncryptor(
            AWS_RING, suite=0x0578, frame_length=128, encryption_context={"k": "v"}
        ),
        "decryptor": lambda: aws.AwsDecryptor(AWS_RING, encryption_context={"k": "v"}),
        "layout": lambda ct: aws.layout(AWS_RING, _reader(ct), len(ct)),
        "read_range": lambda ct, start, stop: aws.read_range(
            AWS_RING, _reader(ct), len(ct), start, stop
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
