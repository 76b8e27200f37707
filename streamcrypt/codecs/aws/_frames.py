"""The body's frames on the segmented core: regular and final frames, and the non-framed
body."""

from __future__ import annotations

import struct
from typing import ClassVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ...abc import Buffer
from ...errors import (
    AuthenticationError,
    FormatError,
)
from .._segmented import BatchCodec, SegmentCodec
from ._header import _IV, _TAG

# ---------------------------------------------------------------------------------------
# Body: frames on the segmented core
# ---------------------------------------------------------------------------------------


_MAX_FRAMES = (1 << 32) - 1
_FINAL_MARK = b"\xff\xff\xff\xff"
_FRAME_AAD = b"AWSKMSEncryptionClient Frame"
_FINAL_AAD = b"AWSKMSEncryptionClient Final Frame"
_SINGLE_AAD = b"AWSKMSEncryptionClient Single Block"
_FRAME_HEAD = struct.Struct(">I8xI")  # sequence number, then the IV: 8 zeros || seq
_FINAL_HEAD = struct.Struct(">4sI8xII")  # end mark, sequence number, IV, content length
_AAD_TAIL = struct.Struct(">IQ")  # sequence number, content length
_SEQ = struct.Struct(">I")
_NONCE = struct.Struct(">8xI")  # the IV alone
_REGULAR = 4 + _IV + _TAG  # framing bytes of a regular frame
_FINAL = 4 + 4 + _IV + 4 + _TAG  # of the final frame


def _misnumbered(seq: int, found: int) -> AuthenticationError:
    return AuthenticationError(
        f"frame {seq} carries sequence number {found}: frames were reordered, duplicated or dropped"
    )


class AwsFrameCodec(BatchCodec):
    """Seals and opens frames: regular ones, then the final frame when a job is ``final``.

    Segment *i* is frame sequence number *i + 1*. The frame rule (framing, IV, AAD) is
    written once, as the batch loop :meth:`run_segments` (frames are 4 KiB by default, so
    per-frame Python is what limits throughput); one frame is a batch of one. Opening,
    a frame's own sequence number must match (else :class:`AuthenticationError`:
    reordered or duplicated).
    """

    __slots__ = (
        "_aad",
        "_decrypt",
        "_encrypt",
        "_final_prefix",
        "_frame_prefix",
        "_kernel",
        "first_segment_size",
        "segment_size",
    )

    overhead: ClassVar[int] = _REGULAR
    final_may_be_full: ClassVar[bool] = False
    max_segments: int = _MAX_FRAMES

    def __init__(self, key: bytes, message_id: bytes, frame_length: int) -> None:
        kernel = self._kernel = AESGCM(key)
        self._encrypt = kernel.encrypt_into
        self._decrypt = kernel.decrypt_into
        self._frame_prefix = message_id + _FRAME_AAD
        self._final_prefix = message_id + _FINAL_AAD
        # A regular frame's AAD, its sequence number 0 (each batch copies it).
        self._aad = self._frame_prefix + _AAD_TAIL.pack(0, frame_length)
        self.segment_size = self.first_segment_size = frame_length

    def run_segments(
        self, sealing: bool, first: int, count: int, data: Buffer, final: bool, out: memoryview
    ) -> tuple[int, Exception | None]:
        # A regular frame's AAD differs from the next one's only in the sequence number:
        # one AAD buffer per batch (batches run on threads), its number written in place;
        # the IV is read from (opening) or written to (sealing) the frame itself.
        src = memoryview(data).cast("B")
        size = self.segment_size
        full = size + _REGULAR
        at = len(self._frame_prefix)
        aad = bytearray(self._aad)
        seq_into = _SEQ.pack_into
        first = seq = first + 1
        stop = first + count - (1 if final else 0)  # after the regular frames
        pos = written = 0
        try:
            if sealing:
                encrypt, head_into = self._encrypt, _FRAME_HEAD.pack_into
                for seq in range(first, stop):
                    head_into(out, written, seq, seq)
                    seq_into(aad, at, seq)
                    encrypt(
                        out[written + 4 : written + 16],
                        src[pos : pos + size],
                        aad,
                        out[written + 16 : written + full],
                    )
                    pos += size
                    written += full
                if final:
                    seq, n = stop, len(src) - pos
                    _FINAL_HEAD.pack_into(out, written, _FINAL_MARK, seq, seq, n)
                    written += 24 + encrypt(
                        out[written + 8 : written + 20],
                        src[pos:],
                        self._final_prefix + _AAD_TAIL.pack(seq, n),
                        out[written + 24 : written + 24 + n + _TAG],
                    )
                return written, None
            if len(src) < (stop - first) * full + (_FINAL if final else 0):
                raise FormatError(f"frame {stop if final else stop - 1} has the wrong length")
            decrypt, unpack = self._decrypt, _SEQ.unpack_from
            for seq in range(first, stop):
                if unpack(src, pos)[0] != seq:
                    raise _misnumbered(seq, unpack(src, pos)[0])
                seq_into(aad, at, seq)
                decrypt(
                    src[pos + 4 : pos + 16],
                    src[pos + 16 : pos + full],
                    aad,
                    out[written : written + size],
                )
                pos += full
                written += size
            if not final:
                if pos != len(src):
                    raise FormatError(f"frame {stop - 1} has the wrong length")
                return written, None
            seq = stop
            if bytes(src[pos : pos + 4]) != _FINAL_MARK:
                raise FormatError(f"frame {seq} should be the final frame")
            pos += 4
            n = int.from_bytes(src[pos + 16 : pos + 20], "big")
            end = pos + 20 + n + _TAG
            if n > size or end != len(src):
                raise FormatError(f"frame {seq} has the wrong length")
            if unpack(src, pos)[0] != seq:
                raise _misnumbered(seq, unpack(src, pos)[0])
            written += decrypt(
                src[pos + 4 : pos + 16],
                src[pos + 20 : end],
                self._final_prefix + _AAD_TAIL.pack(seq, n),
                out[written : written + n],
            )
        except InvalidTag:
            error = AuthenticationError(
                f"frame {seq} did not verify: tampered, reordered or truncated message"
            )
            return written, error
        except Exception as exc:
            return written, exc
        return written, None

    def run_one(
        self, sealing: bool, index: int, data: Buffer, final: bool
    ) -> tuple[bytes, Exception | None] | None:
        # Opening one regular frame (a job of a frame joined across two chunks): the
        # kernel's own ``decrypt`` makes the output object, no output memory made for
        # it. The rule is the batch loop's, and any failure is judged by that loop, so a
        # verdict and its message are one whichever ran. Sealing and the final frame go
        # the batch way (a frame's output is its framing and the kernel's).
        if sealing or final:
            return None
        src = memoryview(data)
        size, seq = self.segment_size, index + 1
        if len(src) == size + _REGULAR and _SEQ.unpack_from(src)[0] == seq:
            try:
                aad = self._frame_prefix + _AAD_TAIL.pack(seq, size)
                return self._kernel.decrypt(src[4:16], src[16:], aad), None
            except InvalidTag:
                pass
        return self.run_one_batched(False, index, src, False, size)

    def __repr__(self) -> str:
        return f"AwsFrameCodec(frame_length={self.segment_size}, <key hidden>)"


class _FinalFrameSealer(AwsFrameCodec):
    """The final frame's geometry (8 more bytes of framing: the end mark and the length)
    for the encryptor's last job; the rule is :class:`AwsFrameCodec`'s."""

    __slots__ = ()
    overhead: ClassVar[int] = _FINAL


class _SingleBlockCodec(SegmentCodec):
    """A non-framed body: one AES-GCM call over everything (``IV || length || ct || tag``)."""

    __slots__ = ("_kernel", "_prefix", "first_segment_size", "segment_size")

    overhead: ClassVar[int] = _IV + 8 + _TAG
    final_may_be_full: ClassVar[bool] = False
    max_segments: int = 1

    def __init__(self, key: bytes, message_id: bytes, max_size: int) -> None:
        self._kernel = AESGCM(key)
        self._prefix = message_id + _SINGLE_AAD + (1).to_bytes(4, "big")
        self.segment_size = self.first_segment_size = max_size + 1

    def seal_segment(self, index: int, plaintext: Buffer, final: bool, out: memoryview) -> int:
        n = len(plaintext)
        iv = _NONCE.pack(1)
        out[0:20] = iv + n.to_bytes(8, "big")
        aad = self._prefix + n.to_bytes(8, "big")
        return 20 + self._kernel.encrypt_into(iv, plaintext, aad, out[20 : 20 + n + _TAG])

    def open_segment(self, index: int, ciphertext: Buffer, final: bool, out: memoryview) -> int:
        body = memoryview(ciphertext)
        n = int.from_bytes(body[_IV:20], "big")
        if len(body) != 20 + n + _TAG:
            raise FormatError("the non-framed body has the wrong length")
        aad = self._prefix + n.to_bytes(8, "big")
        try:
            return self._kernel.decrypt_into(bytes(body[:_IV]), body[20:], aad, out[:n])
        except InvalidTag:
            raise AuthenticationError(
                "the non-framed body did not verify: tampered or truncated message"
            ) from None
