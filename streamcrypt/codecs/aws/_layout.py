"""Random access to framed messages; for signed suites, reads bound to the verified
signature."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ...abc import Buffer
from ...errors import (
    InvalidSignatureError,
    LimitExceededError,
    TruncatedStreamError,
    UnsupportedFormatError,
)
from ...keys import random_bytes

# SegmentCodec: the type of AwsLayout's inherited field, which get_type_hints resolves here.
from .._segmented import SegmentCodec, SegmentJob, SegmentLayout  # noqa: F401
from ._frames import _FINAL_MARK, _REGULAR, AwsFrameCodec
from ._header import (
    _TAG,
    DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
    DEFAULT_MAX_FRAME_LENGTH,
    DEFAULT_MAX_HEADER_SIZE,
    AwsHeader,
    _HeaderParser,
    _Limits,
)
from ._keyrings import KeyringLike, _keyrings, _open_header
from ._signing import _CURVES, _HASHLIB, _MAX_SIGNATURE, _verifying_key

#: Frames a signed message may have to be read by random access: the layout keeps a
#: 16-byte digest of each (64 MiB at most; 16 GiB of message at the SDKs' 4 KiB frames).
MAX_SIGNED_FRAMES = 1 << 22
_FRAME_DIGEST = 16
_DIGEST_NONCE = bytes(12)


# ---------------------------------------------------------------------------------------
# Random access (framed bodies)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AwsLayout(SegmentLayout):
    """Where the frames of a framed message lie: the basis of random access.

    ``body_end`` is where the footer starts (the stream size for unsigned suites);
    ``final_index`` the final frame's segment index, ``final_plain`` its plaintext size.
    """

    final_index: int = 0
    final_plain: int = 0
    body_end: int = 0

    @property
    def segment_count(self) -> int:
        return self.final_index + 1

    @property
    def plaintext_size(self) -> int:
        return self.final_index * self.codec.segment_size + self.final_plain

    def plan(self, start: int, stop: int) -> tuple[SegmentJob, int, int, int] | None:
        """As :meth:`SegmentLayout.plan`, ending at the footer rather than the stream end."""
        size = self.plaintext_size
        start, stop = max(0, start), min(stop, size)
        if start >= stop:
            return None
        first = self.segment_of(start)
        last = min(self.segment_of(stop - 1), self.final_index)
        if stop >= size:
            last = self.final_index
        offset = self.ciphertext_offset(first)
        end = self.body_end if last == self.final_index else self.ciphertext_offset(last + 1)
        job = SegmentJob(self.codec, False, first, last - first + 1, b"", last == self.final_index)
        return job, offset, end - offset, start - self.plaintext_offset(first)

    def final_segment(self) -> tuple[SegmentJob, int, int]:
        offset = self.ciphertext_offset(self.final_index)
        job = SegmentJob(self.codec, False, self.final_index, 1, b"", True)
        return job, offset, self.body_end - offset


def layout(
    key: KeyringLike,
    read_at: Callable[[int, int], bytes],
    stream_size: int,
    *,
    encryption_context: Mapping[str, str] | None = None,
    allow_legacy: bool = False,
    allow_unverified: bool = False,
    max_encrypted_data_keys: int | None = DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
) -> AwsLayout:
    """Authenticate the header and map a framed message of ``stream_size`` bytes.

    ``read_at(offset, length)`` reads the message. The final frame is located and opened
    (proving the length). For signed suites the whole message is read once, hashed and its
    signature verified, and the layout's reads then release only frames whose bytes are
    those the signature covered (else :class:`InvalidSignatureError`); with
    ``allow_unverified=True`` nothing is verified (range reads are authentic under the
    data key only). Non-framed messages cannot be read by random access
    (:class:`UnsupportedFormatError`); a signed one of more than
    :data:`MAX_SIGNED_FRAMES` frames neither (:class:`LimitExceededError`). Raises as
    :class:`AwsDecryptor`.
    """
    limits = _Limits(
        allow_legacy, max_encrypted_data_keys, DEFAULT_MAX_HEADER_SIZE, DEFAULT_MAX_FRAME_LENGTH
    )
    parser = _HeaderParser(limits)
    head = b""
    want = min(stream_size, 4096)
    while True:
        head = read_at(0, want)
        header = parser.advance(head)
        if header is not None:
            break
        if len(head) >= stream_size:
            raise TruncatedStreamError("the message ends inside its header")
        want = min(stream_size, 2 * want)
    aes_key = _open_header(header, _keyrings(key), dict(encryption_context or {}))
    if not header.framed:
        raise UnsupportedFormatError("a non-framed message cannot be read by random access")
    codec = AwsFrameCodec(aes_key, header.message_id, header.frame_length)
    regular = header.frame_length + _REGULAR
    found = None
    footers = (
        range(0, 1)
        if not header.suite.signed
        else range(2, 2 + 1 + _MAX_SIGNATURE[header.suite.curve or "P-384"])
    )
    tried: set[int] = set()
    for footer in footers:
        space = stream_size - header.size - footer - 24 - _TAG
        if space < 0:
            continue
        k = space // regular
        if k in tried:
            continue
        tried.add(k)
        offset = header.size + k * regular
        head24 = read_at(offset, 24)
        if len(head24) < 24 or head24[:4] != _FINAL_MARK:
            continue
        n = int.from_bytes(head24[20:24], "big")
        end = offset + 24 + n + _TAG
        if n > header.frame_length or end > stream_size:
            continue
        if header.suite.signed:
            sig = read_at(end, 2)
            if len(sig) != 2 or end + 2 + int.from_bytes(sig, "big") != stream_size:
                continue
        elif end != stream_size:
            continue
        found = (k, n, end)
        break
    if found is None:
        raise TruncatedStreamError(
            "no final frame where the message length puts it: truncated or extended message"
        )
    k, n, end = found
    lay = AwsLayout(codec, header.size, stream_size, k, n, end)
    lay.verify_end(read_at)
    if header.suite.signed and not allow_unverified:
        lay = replace(lay, codec=_verify_whole(header, aes_key, read_at, lay))
    return lay


def _read_exact(read_at: Callable[[int, int], bytes], offset: int, length: int) -> bytes:
    data = read_at(offset, length)
    if len(data) != length:
        raise TruncatedStreamError("the message is shorter than its layout says")
    return data


def _verify_whole(
    header: AwsHeader, key: bytes, read_at: Callable[[int, int], bytes], lay: AwsLayout
) -> _SignedFrameCodec:
    """Read the message once: verify its signature and take every frame's digest; the
    codec that opens only frames with those digests."""
    curve = header.suite.curve
    assert curve is not None
    if lay.segment_count > MAX_SIGNED_FRAMES:
        raise LimitExceededError(
            f"the signed message has {lay.segment_count} frames: random access keeps a digest "
            f"of each and reads at most {MAX_SIGNED_FRAMES} (MAX_SIGNED_FRAMES); decrypt it "
            "as a stream"
        )
    digest = hashlib.new(_HASHLIB[curve])
    digest.update(_read_exact(read_at, 0, header.size))
    gmac = AESGCM(random_bytes(32)).encrypt
    digests = bytearray()
    full = lay.codec.full_ciphertext(1)
    per = max(1, (1 << 20) // full)
    index = 0
    while index <= lay.final_index:  # about 1 MiB of regular frames per read, then the final
        count = min(per, lay.final_index - index) or 1
        offset = lay.ciphertext_offset(index)
        final = index == lay.final_index
        stop = lay.body_end if final else lay.ciphertext_offset(index + count)
        chunk = memoryview(_read_exact(read_at, offset, stop - offset))
        digest.update(chunk)
        digests += _frame_digests(gmac, chunk, full, count, final)
        index += count
    footer = read_at(lay.body_end, lay.stream_size - lay.body_end)
    verifying = _verifying_key(header.suite, header.encryption_context)
    try:
        verifying.verify(footer[2:], digest.digest(), ec.ECDSA(Prehashed(_CURVES[curve][1])))
    except InvalidSignature:
        raise InvalidSignatureError("the message signature did not verify") from None
    return _SignedFrameCodec(key, header.message_id, header.frame_length, gmac, digests)


#: GMAC under a key of this process: ``(nonce, b"", frame) -> tag``.
_Gmac = Callable[[bytes, bytes, Buffer], bytes]


def _frame_digests(gmac: _Gmac, frames: memoryview, full: int, count: int, final: bool) -> bytes:
    """The digests of ``count`` frames back to back in ``frames``: regular frames of
    ``full`` bytes, the last one the final frame (the rest) when ``final``.

    A digest is GMAC (the AES-GCM tag of no plaintext, the frame as associated data) under
    a random key that never leaves the process, with one fixed nonce. GHASH under a secret
    key is a universal hash: a different frame of the same length has the same digest
    with probability at most (blocks + 2) / 2**128 (2**-120 for a 4 KiB frame), and the
    digests are never shown to anyone (the fixed nonce would matter only if they were).
    1.3 us per 4 KiB frame here, against 3.5 for keyed BLAKE3 (the call, not the hash,
    is most of it)."""
    regular = count - 1 if final else count
    out = [gmac(_DIGEST_NONCE, b"", frames[p : p + full]) for p in range(0, regular * full, full)]
    if final:
        out.append(gmac(_DIGEST_NONCE, b"", frames[regular * full :]))
    return b"".join(out)


class _SignedFrameCodec(AwsFrameCodec):
    """Opens a frame only when its bytes have the digest recorded while the message's
    signature verified (:func:`_verify_whole`): random reads of a signed message release
    nothing the signature did not cover."""

    __slots__ = ("_digests", "_gmac")

    def __init__(
        self, key: bytes, message_id: bytes, frame_length: int, gmac: _Gmac, digests: Buffer
    ) -> None:
        super().__init__(key, message_id, frame_length)
        self._gmac = gmac
        self._digests = bytes(digests)

    def run_segments(
        self, sealing: bool, first: int, count: int, data: Buffer, final: bool, out: memoryview
    ) -> tuple[int, Exception | None]:
        assert not sealing, "a verified layout only opens frames"
        full = self.segment_size + _REGULAR
        found = _frame_digests(self._gmac, memoryview(data), full, count, final)
        expected = self._digests[first * _FRAME_DIGEST : (first + count) * _FRAME_DIGEST]
        if not hmac.compare_digest(found, expected):
            return 0, InvalidSignatureError(
                f"frames {first + 1}..{first + count} are not the bytes whose signature "
                "verified when the message was opened: the file changed since"
            )
        return super().run_segments(sealing, first, count, data, final, out)
