"""Encryption and decryption: the header, the body on the segmented core, the footer."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

from ...abc import Buffer, Chain, Lifecycle, Transform, as_buffer
from ...errors import (
    FormatError,
    InvalidParameterError,
    InvalidSignatureError,
    LimitExceededError,
    TruncatedStreamError,
)
from ...keys import HoldsSecrets, random_bytes
from .._segmented import SegmentCodec, SegmentedEncryptor, SegmentJob, detached
from ._frames import (
    _FINAL,
    _FINAL_MARK,
    _MAX_FRAMES,
    _REGULAR,
    AwsFrameCodec,
    _FinalFrameSealer,
    _SingleBlockCodec,
)
from ._header import (
    _IV,
    _RESERVED_PREFIX,
    _TAG,
    DEFAULT_FRAME_LENGTH,
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
    DEFAULT_MAX_FRAME_LENGTH,
    DEFAULT_MAX_HEADER_SIZE,
    DEFAULT_SUITE,
    PUBLIC_KEY_FIELD,
    AwsHeader,
    _derive,
    _header_tag,
    _HeaderParser,
    _Limits,
    _suite,
    parse_header,
    serialize_encryption_context,
)
from ._keyrings import Keyring, KeyringLike, _keyrings, _open_header
from ._signing import _CURVES, _HASHLIB, _MAX_SIGNATURE, _public_key_text, _Signer, _verifying_key

# ---------------------------------------------------------------------------------------
# Encryption
# ---------------------------------------------------------------------------------------


_MAX_NON_FRAMED = (1 << 36) - 32


class _BodyEncryptor(SegmentedEncryptor):
    """The header and the body; the final frame is sealed with its own framing."""

    __slots__ = ("_final_codec",)

    def __init__(self, codec: SegmentCodec, final_codec: SegmentCodec, header: bytes) -> None:
        super().__init__(codec, header)
        self._final_codec = final_codec

    def finish(self) -> list[SegmentJob]:
        self._check()
        try:
            first = self._claim(self._final_codec, 1)
        except Exception as exc:
            raise self._break(exc) from None
        job = SegmentJob(self._final_codec, True, first, 1, self._take_held(), True)
        self._finish()
        return [job]


class _NonFramedEncryptor(_BodyEncryptor):
    """Holds the whole plaintext (up to a limit) and seals it at the end."""

    __slots__ = ("_limit",)

    def __init__(self, codec: SegmentCodec, header: bytes, limit: int) -> None:
        super().__init__(codec, codec, header)
        self._limit = limit

    def feed(self, data: Buffer) -> list[SegmentJob]:
        self._check()
        if self._held_len + len(data) > self._limit:
            raise self._break(
                LimitExceededError(
                    f"a non-framed message holds at most {self._limit} bytes here "
                    "(max_body_size); use framing (frame_length > 0) for streams"
                )
            )
        self._hold(memoryview(data).cast("B"))
        return []


class AwsEncryptor(Chain, HoldsSecrets):
    """Encrypt to the AWS Encryption SDK message format (sans-I/O transform).

    ``key``: one keyring or several (the data key is wrapped by each). ``suite``:
    ``"0x0578"`` (default: committing, ECDSA P-384 signed) or ``"0x0478"`` (committing,
    unsigned);
    legacy suites only with ``allow_legacy=True``. ``frame_length``: plaintext bytes per
    frame (4096 by default; 0 for a non-framed body held in memory). A chain of the body
    encryptor (segmented: frames sealed in parallel by the engine) and, for signed
    suites, the signer appending the footer. Raises :class:`InvalidParameterError`,
    :class:`UnsupportedFormatError`, :class:`LimitExceededError`.
    """

    __slots__ = ("header",)

    def __init__(
        self,
        key: KeyringLike,
        *,
        encryption_context: Mapping[str, str] | None = None,
        suite: str = DEFAULT_SUITE,
        frame_length: int = DEFAULT_FRAME_LENGTH,
        allow_legacy: bool = False,
        max_encrypted_data_keys: int | None = None,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    ) -> None:
        chosen = _suite(suite, allow_legacy)
        rings = _keyrings(key)
        if max_encrypted_data_keys is not None and len(rings) > max_encrypted_data_keys:
            raise LimitExceededError(
                f"{len(rings)} keyrings would write more than max_encrypted_data_keys="
                f"{max_encrypted_data_keys} data keys"
            )
        if not 0 <= frame_length <= (1 << 32) - 1:
            raise InvalidParameterError("frame_length must be 0 (non-framed) .. 2**32 - 1")
        context = dict(encryption_context or {})
        if any(k.startswith(_RESERVED_PREFIX) for k in context):
            raise InvalidParameterError(
                f"encryption context keys starting with {_RESERVED_PREFIX!r} are reserved"
            )
        signer: Transform | None = None
        if chosen.curve is not None:
            private = ec.generate_private_key(_CURVES[chosen.curve][0])
            context[PUBLIC_KEY_FIELD] = _public_key_text(private.public_key())
            signer = _Signer(private, chosen)
        ctx_bytes = serialize_encryption_context(context)
        data_key = random_bytes(chosen.key_size)
        message_id = random_bytes(32 if chosen.version == 2 else 16)
        edks = [ring.wrap(data_key, ctx_bytes) for ring in rings]
        aes_key, commitment = _derive(chosen, data_key, message_id)
        framed = frame_length > 0
        head = bytearray()
        if chosen.version == 2:
            head += b"\x02" + chosen.id_bytes
        else:
            head += b"\x01\x80" + chosen.id_bytes
        head += message_id + struct.pack(">H", len(ctx_bytes)) + ctx_bytes
        head += struct.pack(">H", len(edks)) + b"".join(e.encode() for e in edks)
        head += bytes([2 if framed else 1])
        if chosen.version == 1:
            head += bytes(4) + bytes([_IV])
        head += struct.pack(">I", frame_length) + commitment
        iv = bytes(_IV)
        auth = (iv if chosen.version == 1 else b"") + _header_tag(aes_key, bytes(head), iv)
        body_header = bytes(head) + auth
        self.header = parse_header(body_header, allow_legacy=True, max_encrypted_data_keys=None)
        if framed:
            body: Transform = _BodyEncryptor(
                AwsFrameCodec(aes_key, message_id, frame_length),
                _FinalFrameSealer(aes_key, message_id, frame_length),
                body_header,
            )
        else:
            limit = min(max_body_size, _MAX_NON_FRAMED)
            body = _NonFramedEncryptor(
                _SingleBlockCodec(aes_key, message_id, limit), body_header, limit
            )
        super().__init__(*([body, signer] if signer is not None else [body]))


# ---------------------------------------------------------------------------------------
# Decryption
# ---------------------------------------------------------------------------------------


class AwsBodyDecryptor(Lifecycle, HoldsSecrets):
    """The segmented transform of :class:`AwsDecryptor`: header, frames, footer.

    Provides the engine's segmented protocol (``feed`` / ``finish`` jobs opened in
    parallel) and ``update`` / ``finalize`` as a plain transform. A signed message's
    frames are *withheld* (``withhold``): their jobs are kept, not handed out, until
    ``finish`` verified the signature, so that no plaintext exists before it (at most
    ``max_buffered`` bytes of it, else :class:`LimitExceededError`). The suite is known
    only once the header is parsed; an unsigned message's frames go out as they come,
    so the decryptor is one segmented stage whatever the suite.
    """

    __slots__ = (
        "_codec",
        "_expected",
        "_final",
        "_footer",
        "_hash",
        "_held",
        "_held_len",
        "_index",
        "_key",
        "_max_body",
        "_max_buffered",
        "_need",
        "_parser",
        "_pending",
        "_phase",
        "_regular",
        "_rings",
        "_withheld",
        "_withheld_size",
        "_withholds",
        "header",
        "signature_verified",
    )

    def __init__(
        self,
        rings: Sequence[Keyring],
        expected: Mapping[str, str],
        limits: _Limits,
        max_body_size: int,
        withhold: bool = True,
        max_buffered: int = 1 << 30,
    ) -> None:
        self._init_lifecycle()
        self._rings = rings
        self._expected = expected
        self._max_body = max_body_size
        self._parser: _HeaderParser | None = _HeaderParser(limits)
        self._pending = bytearray()
        self._held: list[Buffer] = []  # the pieces of a frame begun, not yet complete
        self._held_len = 0
        self._need = 0  # the size of the frame held, once its start showed it
        self._regular = 0  # a regular frame's size
        self._phase = "header"
        self._codec: SegmentCodec | None = None
        self._index = 0
        self._final: bytes | None = None
        self._footer = bytearray()
        self._hash: hashlib._Hash | None = None
        self._key = b""
        self.header: AwsHeader | None = None
        self.signature_verified = False
        self._withholds = withhold
        self._max_buffered = max_buffered
        # The jobs of a signed message's frames until its signature verified (None: the
        # frames go out as they come, an unsigned message or allow_unverified=True).
        self._withheld: list[SegmentJob] | None = None
        self._withheld_size = 0

    @property
    def header_pending(self) -> bool:
        return self._phase == "header"

    def take_header(self) -> bytes:
        return b""

    def fail(self, exc: BaseException) -> BaseException:
        return self._break(exc)

    # -- parsing ------------------------------------------------------------------------
    def feed(self, data: Buffer) -> list[SegmentJob]:
        self._check()
        try:
            jobs = self._feed(memoryview(as_buffer(data, "data")).cast("B"))
            if self._withheld is None:
                return jobs
            for job in jobs:
                self._withhold(job.count * (self._regular - _REGULAR), job)
            return []
        except Exception as exc:
            raise self._break(exc) from None

    def _withhold(self, plaintext: int, job: SegmentJob | None) -> None:
        """Keep ``job`` (``plaintext`` bytes once opened) until the signature verified;
        its input as it is when immutable, else a copy (its owner may reuse it)."""
        assert self._withheld is not None
        self._withheld_size += plaintext
        if self._withheld_size > self._max_buffered:
            raise LimitExceededError(
                f"a signed message's plaintext is held until its signature verified, "
                f"here at most {self._max_buffered} bytes (max_buffered): raise "
                "max_buffered, read the file with streamcrypt.open (it verifies before any "
                "read), or pass allow_unverified=True to release frames before the signature"
            )
        if job is None:
            return
        if type(job.data) is not bytes and not memoryview(job.data).readonly:
            job.data = bytes(job.data)
        self._withheld.append(job)

    def _feed(self, view: memoryview) -> list[SegmentJob]:
        if self._phase == "header":
            assert self._parser is not None
            # The header is parsed from everything so far: the new bytes alone when
            # nothing is held (a first chunk holding the header), so that what follows
            # the header is taken from them as it is, not copied twice with them.
            held = len(self._pending)
            if held:
                self._pending += view
            data = self._pending if held else view
            header = self._parser.advance(data)
            if header is None:
                if not held:
                    self._pending += view
                return []
            self._key = _open_header(header, self._rings, self._expected)
            self.header = header
            self._parser = None
            if header.suite.curve is not None:
                _verifying_key(header.suite, header.encryption_context)
                self._hash = hashlib.new(_HASHLIB[header.suite.curve])
                self._hash.update(data[: header.size])
                if self._withholds:
                    self._withheld = []
            # The header ends in the new bytes: what was held did not complete it.
            assert header.size > held
            rest = view[header.size - held :]
            self._pending.clear()
            if header.framed:
                self._codec = AwsFrameCodec(self._key, header.message_id, header.frame_length)
                self._regular = header.frame_length + _REGULAR
                self._phase = "frames"
            else:
                self._codec = _SingleBlockCodec(self._key, header.message_id, self._max_body)
                self._phase = "single"
            return self._feed(rest) if rest else []
        if self._phase == "frames":
            return self._frames(view)
        if self._phase == "single":
            return self._single(view)
        if self._phase == "footer":
            self._footer_bytes(view)
            return []
        raise FormatError("bytes after the end of the message")

    def _frames(self, view: memoryview) -> list[SegmentJob]:
        jobs: list[SegmentJob] = []
        if self._held_len:
            # A frame begun in earlier bytes: once the new ones complete it, its pieces
            # are joined in one copy (read-only pieces were held as they are). Its size
            # is known once its start showed it.
            need = self._need or self._frame_size(self._head(view))
            take = need - self._held_len
            if take > len(view):
                self._hold(view, need)
                return jobs
            frame = b"".join([*self._held, view[:take]])
            self._held.clear()
            self._held_len = self._need = 0
            view = view[take:]
            if self._hash is not None:
                self._hash.update(frame)
            if frame[:4] == _FINAL_MARK:
                return self._end_frames(frame, view)
            jobs.append(self._job(frame, 1))
        # Whole regular frames straight from the caller's buffer, no copy.
        regular = self._regular
        if len(view) >= regular:
            count = self._regular_frames(view, regular)
            if count:
                pos = count * regular
                body = view[:pos] if pos < len(view) else view
                if self._hash is not None:
                    self._hash.update(body)
                jobs.append(self._job(body, count))
                view = view[pos:]
        if view:
            # The start of a frame: the final one (what follows regular frames here
            # whole is), or one the next bytes complete.
            size = self._frame_size(view)
            if size <= len(view) and view[:4] == _FINAL_MARK:
                frame = bytes(view[:size])
                if self._hash is not None:
                    self._hash.update(frame)
                self._end_frames(frame, view[size:])
            else:
                self._hold(view, size)
        return jobs

    def _hold(self, view: memoryview, size: int) -> None:
        """Keep the start of a frame, as :func:`detached` keeps a part of one (a view of
        an object of at most a regular frame, else a copy). ``size``: :meth:`_frame_size`
        of what is held with ``view`` (the frame's size once more than its first 24 bytes
        showed)."""
        if view:
            self._held.append(detached(view, self._regular))
            self._held_len += len(view)
            self._need = size if size > 24 else 0

    def _head(self, view: memoryview) -> bytes:
        """The first bytes (up to 24, what :meth:`_frame_size` reads) of the held frame
        continued by ``view``."""
        head = b""
        for piece in (*self._held, view):
            head += piece[: 24 - len(head)]
            if len(head) == 24:
                break
        return head

    @staticmethod
    def _regular_frames(view: memoryview, regular: int) -> int:
        """How many whole regular frames ``view`` starts with (it ends before the final
        frame's ``FFFFFFFF`` mark). Frame starts are read in one strided copy: only a
        frame whose first byte is FF needs a closer look."""
        n = len(view) // regular
        firsts = view[: n * regular : regular].tobytes()
        at = firsts.find(0xFF)
        while at >= 0:
            if view[at * regular : at * regular + 4] == _FINAL_MARK:
                return at
            at = firsts.find(0xFF, at + 1)
        return n

    def _frame_size(self, head: Buffer) -> int:
        """The length of the frame starting with ``head``, or of as much of its start as
        shows that length (4 bytes, then the final frame's 24)."""
        if len(head) < 4:
            return 4
        if head[:4] != _FINAL_MARK:
            return self._regular
        if len(head) < 24:
            return 24
        n = int.from_bytes(head[20:24], "big")
        if n > self._regular - _REGULAR:
            raise FormatError(
                f"the final frame claims {n} bytes, more than the frame length "
                f"{self._regular - _REGULAR}"
            )
        return 24 + n + _TAG

    def _job(self, data: Buffer, count: int) -> SegmentJob:
        assert self._codec is not None
        first = self._index
        if first + count > _MAX_FRAMES:
            raise LimitExceededError("the message has more than 2**32 - 1 frames")
        self._index += count
        return SegmentJob(self._codec, False, first, count, data, False)

    def _end_frames(self, frame: bytes, rest: memoryview) -> list[SegmentJob]:
        self._final = frame
        if self._withheld is not None:
            self._withhold(len(frame) - _FINAL, None)
        assert self.header is not None
        self._phase = "footer" if self.header.suite.signed else "done"
        if len(rest):
            self._feed(rest)
        return []

    def _single(self, view: memoryview) -> list[SegmentJob]:
        pending = self._pending
        pending += view
        if len(pending) >= 20:
            n = int.from_bytes(pending[_IV:20], "big")
            if n > self._max_body:
                raise LimitExceededError(
                    f"the non-framed body holds {n} bytes, over max_body_size={self._max_body}"
                )
            end = 20 + n + _TAG
            if len(pending) >= end:
                self._final = bytes(pending[:end])
                rest = bytes(pending[end:])
                pending.clear()
                if self._hash is not None:
                    self._hash.update(self._final)
                if self._withheld is not None:
                    self._withhold(n, None)
                assert self.header is not None
                self._phase = "footer" if self.header.suite.signed else "done"
                if rest:
                    self._feed(memoryview(rest))
        return []

    def _footer_bytes(self, view: memoryview) -> None:
        self._footer += view
        assert self.header is not None and self.header.suite.curve is not None
        if len(self._footer) >= 2:
            n = int.from_bytes(self._footer[:2], "big")
            if n > _MAX_SIGNATURE[self.header.suite.curve]:
                raise FormatError(f"the footer claims a {n}-byte signature, too long for the curve")
            if len(self._footer) > 2 + n:
                raise FormatError("bytes after the end of the message")

    # -- the end ------------------------------------------------------------------------
    def finish(self) -> list[SegmentJob]:
        self._check()
        try:
            return self._finish_jobs()
        except Exception as exc:
            raise self._break(exc) from None

    def _finish_jobs(self) -> list[SegmentJob]:
        header = self.header
        if self._phase == "header" or header is None:
            raise TruncatedStreamError("the message ended inside its header")
        if self._final is None:
            raise TruncatedStreamError(
                f"the message ended after {self._index} frame(s), before its final frame"
            )
        if header.suite.curve is not None:
            n = int.from_bytes(self._footer[:2], "big") if len(self._footer) >= 2 else -1
            if n < 0 or len(self._footer) != 2 + n:
                raise TruncatedStreamError(
                    "the message ended before the end of its signature footer"
                )
            assert self._hash is not None
            digest = self._hash.digest()
            key = _verifying_key(header.suite, header.encryption_context)
            algorithm = ec.ECDSA(Prehashed(_CURVES[header.suite.curve][1]))
            try:
                key.verify(bytes(self._footer[2:]), digest, algorithm)
            except InvalidSignature:
                raise InvalidSignatureError(
                    "the message signature did not verify: the message was altered or was not "
                    "written by the holder of the signing key"
                ) from None
            self.signature_verified = True
        assert self._codec is not None
        final = self._final
        self._final = None
        jobs, self._withheld = self._withheld or [], None
        self._finish()
        jobs.append(SegmentJob(self._codec, False, self._index, 1, final, True))
        return jobs

    # -- as a plain transform -----------------------------------------------------------
    def update(self, data: Buffer, /) -> bytes:
        return self._run(self.feed(data))

    def finalize(self) -> bytes:
        return self._run(self.finish())

    def _run(self, jobs: list[SegmentJob]) -> bytes:
        try:
            return SegmentedEncryptor.run_all(jobs)
        except Exception as exc:
            raise self._break(exc) from None


class AwsDecryptor(Chain, HoldsSecrets):
    """Decrypt an AWS Encryption SDK message (sans-I/O transform).

    ``key``: one keyring or several, tried in order. ``encryption_context``: entries
    the message must carry (else :class:`AuthenticationError`). ``allow_legacy``: read the
    non-committing suites (v1 messages). A signed message's frames are held as they came
    (up to ``max_buffered`` bytes of plaintext) and opened once its signature verified;
    ``allow_unverified=True`` releases each frame once its tag verified instead (the last
    one still after the signature). One segmented stage whatever the suite (the engine's
    one-stage path). Raises :class:`FormatError`, :class:`UnsupportedFormatError`,
    :class:`UnknownKeyError`, :class:`AuthenticationError`, :class:`InvalidSignatureError`,
    :class:`TruncatedStreamError`, :class:`LimitExceededError`.
    """

    __slots__ = ("body",)

    def __init__(
        self,
        key: KeyringLike,
        *,
        encryption_context: Mapping[str, str] | None = None,
        allow_legacy: bool = False,
        allow_unverified: bool = False,
        max_encrypted_data_keys: int | None = DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        max_buffered: int = 1 << 30,
    ) -> None:
        limits = _Limits(allow_legacy, max_encrypted_data_keys, max_header_size, max_frame_length)
        self.body = AwsBodyDecryptor(
            _keyrings(key),
            dict(encryption_context or {}),
            limits,
            max_body_size,
            withhold=not allow_unverified,
            max_buffered=max_buffered,
        )
        super().__init__(self.body)

    @property
    def header(self) -> AwsHeader | None:
        """The header once it authenticated."""
        return self.body.header
