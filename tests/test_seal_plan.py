"""SegmentLayout.for_plaintext / seal_plan: ranges of segments sealed apart, in any order,
give the bytes of one sequential run (what the cluster's one-huge-object path relies on)."""

from __future__ import annotations

import random

import pytest

from streamcrypt.codecs import SegmentLayout, container, tink
from streamcrypt.errors import AuthenticationError, InvalidParameterError
from streamcrypt.keys import SecretKey

KEY = SecretKey(bytes(range(32)), key_id="k1")
SIZES = [0, 1, 255, 256, 257, 511, 512, 513, 1000, 2560, 4097]


def _plaintext(size: int) -> bytes:
    return random.Random(size).randbytes(size)


def _seal_by_ranges(lay: SegmentLayout, header: bytes, plain: bytes, per: int) -> bytes:
    out = bytearray(lay.stream_size)
    out[: len(header)] = header
    starts = list(range(0, lay.segment_count, per))
    random.Random(per).shuffle(starts)  # any order
    for first in starts:
        count = min(per, lay.segment_count - first)
        job, offset, length, at = lay.seal_plan(first, count)
        job.data = plain[offset : offset + length]
        sealed = job.run()
        out[at : at + len(sealed)] = sealed
    return bytes(out)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("per", [1, 3])
def test_container_ranges_match_one_run(size: int, per: int) -> None:
    plain = _plaintext(size)
    enc = container.StreamEncryptor(KEY, segment_size=256, salt=b"s" * 32, nonce_prefix=b"p" * 7)
    whole = enc.update(plain) + enc.finalize()
    lay = container.sealing_layout(KEY, whole, size)
    assert lay.stream_size == len(whole)
    assert lay.plaintext_size == size
    assert _seal_by_ranges(lay, whole[: lay.header_size], plain, per) == whole
    assert container.StreamDecryptor(KEY).update(whole) is not None


@pytest.mark.parametrize("size", [0, 1, 4096 - 16 - 40, 4096 - 16, 4080, 9000, 3 * 4080])
def test_final_may_be_full_geometry(size: int) -> None:
    """Tink's final segment may be full-size: the size formula follows that rule too."""
    key = tink.TinkStreamingKey.raw(b"\x42" * 32, "AES256_GCM_HKDF_4KB")
    enc = tink.TinkStreamEncryptor(key)
    whole = enc.update(_plaintext(size)) + enc.finalize()
    lay = tink.layout(key, whole, len(whole))
    planned = SegmentLayout.for_plaintext(lay.codec, lay.header_size, size)
    assert planned.stream_size == len(whole)
    assert planned.segment_count == lay.segment_count


def test_wrong_key_and_bad_ranges_fail() -> None:
    enc = container.StreamEncryptor(KEY, segment_size=256)
    header = enc.take_header()
    with pytest.raises(AuthenticationError):
        container.sealing_layout(SecretKey(b"x" * 32, key_id="k1"), header, 10)
    lay = container.sealing_layout(KEY, header, 1000)
    with pytest.raises(InvalidParameterError):
        lay.seal_plan(0, lay.segment_count + 1)
    with pytest.raises(InvalidParameterError):
        lay.seal_plan(0, 0)
    with pytest.raises(InvalidParameterError):
        SegmentLayout.for_plaintext(lay.codec, lay.header_size, -1)


@pytest.mark.parametrize("size", [0, 256, 1000])
def test_open_plan_by_ranges(size: int) -> None:
    plain = _plaintext(size)
    enc = container.StreamEncryptor(KEY, segment_size=256)
    whole = enc.update(plain) + enc.finalize()
    lay = container.layout(KEY, whole, len(whole))
    got = bytearray(size)
    for first in range(lay.segment_count):
        job, offset, length, at = lay.open_plan(first, 1)
        job.data = whole[offset : offset + length]
        opened = job.run()
        got[at : at + len(opened)] = opened
    assert bytes(got) == plain
    # the last segment opened as non-final fails: the final flag is in the nonce
    job, offset, length, _ = lay.open_plan(lay.segment_count - 1, 1)
    job.data, job.final = whole[offset : offset + length], False
    with pytest.raises(AuthenticationError):
        job.run()
