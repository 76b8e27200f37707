"""Every segmented format the project speaks passes the public conformance suite,
:func:`streamcrypt.testing.check_segmented_codec` (chunking, truncation at every
boundary, reordered / duplicated / dropped / extended segments, no plaintext before its
tag, range reads agreeing with full decryption)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from streamcrypt.codecs import (
    SegmentCodec,
    SegmentLayout,
    age,
    aws,
    cobblestone,
    container,
    ece,
    envelope,
    rclone,
    secretstream,
    tink,
)
from streamcrypt.keys import SecretKey
from streamcrypt.testing import check_segmented_codec


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


CASES: dict[str, dict[str, Any]] = {
    "container": {
        "encryptor": lambda: container.StreamEncryptor(KEY, segment_size=256, aad=b"ad"),
        "decryptor": lambda: container.StreamDecryptor(KEY, aad=b"ad"),
        "read_range": lambda ct, start, stop: container.layout(
            KEY, ct[: container.MAX_HEADER_SIZE], len(ct), aad=b"ad"
        ).read(_reader(ct), start, stop),
    },
    "container-chacha": {
        "encryptor": lambda: container.StreamEncryptor(
            KEY, suite="chacha20-poly1305", segment_size=256
        ),
        "decryptor": lambda: container.StreamDecryptor(KEY),
    },
    "envelope": {
        "encryptor": lambda: envelope.EnvelopeEncryptor(
            recipients=ENVELOPE_IDENTITY.recipient, segment_size=256, aad=b"ad"
        ),
        "decryptor": lambda: envelope.EnvelopeDecryptor(identities=ENVELOPE_IDENTITY, aad=b"ad"),
    },
    "age": {
        "encryptor": lambda: age.AgeEncryptor([AGE_IDENTITY.recipient]),
        "decryptor": lambda: age.AgeDecryptor([AGE_IDENTITY]),
        "segments": 3,
    },
    **{
        f"tink-{name}": {
            "encryptor": lambda key=key: tink.TinkStreamEncryptor(key, aad=b"ad"),
            "decryptor": lambda key=key: tink.TinkStreamDecryptor(key, aad=b"ad"),
            "read_range": lambda ct, start, stop, key=key: tink.decrypt_range(
                ct, key, start, stop, aad=b"ad"
            ),
        }
        for name, key in TINK_KEYS.items()
    },
    "cobblestone": {
        "encryptor": lambda: cobblestone.CobblestoneEncryptor(KEY, context=b"ad"),
        "decryptor": lambda: cobblestone.CobblestoneDecryptor(KEY, context=b"ad"),
        "read_range": lambda ct, start, stop: cobblestone.read_range(
            KEY, _reader(ct), len(ct), start, stop, context=b"ad"
        ),
        "segments": 3,
    },
    "ece": {
        "encryptor": lambda: ece.EceEncryptor(ECE_KEY, record_size=100),
        "decryptor": lambda: ece.EceDecryptor(ECE_KEY),
    },
    "rclone": {
        "encryptor": lambda: rclone.RcloneEncryptor(RCLONE_KEYS),
        "decryptor": lambda: rclone.RcloneDecryptor(RCLONE_KEYS),
        "read_range": lambda ct, start, stop: rclone.read_range(
            RCLONE_KEYS, _reader(ct), len(ct), start, stop
        ),
        # rclone crypt has no end marker: a file cut at a block boundary is a shorter,
        # authentic file unless the reader knows the size (expected_size).
        "detects_truncation_at_boundary": False,
        "segments": 3,
    },
    **{
        f"aws-{suite:04x}": {
            "encryptor": lambda suite=suite: aws.AwsEncryptor(
                AWS_RING, suite=suite, frame_length=128, encryption_context={"k": "v"}
            ),
            "decryptor": lambda: aws.AwsDecryptor(AWS_RING, encryption_context={"k": "v"}),
            "layout": lambda ct: aws.layout(AWS_RING, _reader(ct), len(ct)),
            "read_range": lambda ct, start, stop: aws.read_range(
                AWS_RING, _reader(ct), len(ct), start, stop
            ),
        }
        for suite in (0x0478, 0x0578)
    },
    "secretstream": {
        "encryptor": lambda: secretstream.SecretStreamEncryptor(
            KEY, chunk_size=SECRETSTREAM_CHUNK, aad=b"ad"
        ),
        "decryptor": lambda: secretstream.SecretStreamDecryptor(
            KEY, chunk_size=SECRETSTREAM_CHUNK, aad=b"ad"
        ),
        "layout": _secretstream_layout,
    },
}


@pytest.mark.parametrize("name", list(CASES))
def test_format_passes_the_conformance_suite(name: str) -> None:
    check_segmented_codec(**CASES[name])


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
