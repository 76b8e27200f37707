"""Segmented streaming AEAD: the sans-I/O machinery every segmented format shares.

Theory of operation
-------------------
A segmented format (the STREAM construction of Hoang-Reyhanitabar-Rogaway-Vizar: the
native container, age, Tink streaming AEAD, C2SP chunked encryption, RFC 8188) is a
header followed by segments. Segment *i* is sealed on its own under a per-stream key with
a nonce derived from *i* and, in most formats, a last-segment flag. What differs between
formats is small and lives in a :class:`SegmentCodec`: the geometry (plaintext bytes per
full segment, bytes of overhead, whether the final segment may be full-size) and pure
``seal_segment`` / ``open_segment`` functions of one segment. Everything else lives here
once: buffering and re-chunking, deciding which segment is final, the segment limit, and
the rule that plaintext is released only after its segment verified.

Which segment is final? If the format keeps the final segment shorter than a full one
(``final_may_be_full = False``: native container, C2SP), a full segment is never final,
so it can be sealed or opened the moment it is complete. Otherwise (age, Tink, RFC 8188)
a complete full segment is held back until at least one more byte arrives or the input
ends: one segment of read-ahead.

The work is split as h11 splits protocol from I/O: :meth:`SegmentedEncryptor.feed` and
:meth:`SegmentedDecryptor.feed` do the bookkeeping (indices, finality, limits) on the
caller's thread and return :class:`SegmentJob` objects, pure functions of their inputs,
which may run inline (``update``) or on worker threads (the engine) in any order as long
as their outputs are emitted in order. A failed job must be reported back with ``fail()``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from cryptography.exceptions import InvalidTag

from ..abc import Buffer, Lifecycle, as_buffer
from ..errors import (
    InvalidParameterError,
    LimitExceededError,
    TruncatedStreamError,
)
from ..keys import HoldsSecrets


def _no_final_segment(count: int) -> TruncatedStreamError:
    """A stream cut after ``count`` whole segments: one verdict and message whether it was
    streamed or laid out from its size."""
    return TruncatedStreamError(
        f"the stream ended after {count} segment(s) without its final segment"
    )


class SegmentCodec(HoldsSecrets):
    """A keyed, per-stream segment format. Subclasses set the geometry and the two pure functions.

    ``seal_segment`` writes exactly ``len(plaintext) + overhead`` bytes into ``out`` and
    returns that count. ``open_segment`` writes the plaintext into ``out`` (at least
    ``len(ciphertext) - overhead`` bytes long), returns its length, and raises
    :class:`AuthenticationError` (or :class:`FormatError` for a format rule) on failure;
    on failure nothing in ``out`` may be used.
    """

    segment_size: int  # plaintext bytes of a full segment (index >= 1)
    first_segment_size: int  # plaintext bytes of a full segment 0 (Tink's is shorter)
    overhead: ClassVar[int] = 16  # ciphertext bytes added to each segment
    final_may_be_full: ClassVar[bool] = False
    max_segments: int = 1 << 32

    def seal_segment(self, index: int, plaintext: Buffer, final: bool, out: memoryview) -> int:
        raise NotImplementedError

    def open_segment(self, index: int, ciphertext: Buffer, final: bool, out: memoryview) -> int:
        raise NotImplementedError

    def run_one(
        self, sealing: bool, index: int, data: Buffer, final: bool
    ) -> tuple[bytes, Exception | None] | None:
        """Seal or open segment ``index`` alone into a new ``bytes`` the kernel makes (the
        output and the failure, as :meth:`run_segments` gives them), or ``None`` where the
        codec has no such call (then :meth:`run_segments` into memory the caller made)."""
        return None

    def run_one_batched(
        self, sealing: bool, index: int, data: Buffer, final: bool, size: int
    ) -> tuple[bytes, Exception | None]:
        """Segment ``index`` alone through :meth:`run_segments`, into ``size`` bytes of new
        memory: where a :meth:`run_one` leaves what its kernel call cannot serve (a
        failure, a rule of the format), so that its output and verdict are the batch
        loop's."""
        out = memoryview(bytearray(size))
        written, error = self.run_segments(sealing, index, 1, data, final, out)
        return bytes(out[:written]), error

    def full_plaintext(self, index: int) -> int:
        return self.first_segment_size if index == 0 else self.segment_size

    def full_ciphertext(self, index: int) -> int:
        return self.full_plaintext(index) + self.overhead

    def run_segments(
        self, sealing: bool, first: int, count: int, data: Buffer, final: bool, out: memoryview
    ) -> tuple[int, Exception | None]:
        """Seal or open ``count`` segments from ``first``, back to back in ``data``, into
        ``out``: what :meth:`SegmentJob.run_into` runs (same contract). This loop calls
        ``seal_segment`` / ``open_segment`` once per segment; a codec whose segments are
        small writes its rule as a loop of its own instead (:class:`BatchCodec`)."""
        src = memoryview(data)
        size = len(src)
        last = first + count - 1
        # Hot loop: one kernel call per segment, so keep everything else out of it.
        work: Callable[[int, Buffer, bool, memoryview], int]
        if sealing:
            work, step = self.seal_segment, self.overhead
            full0, full = self.full_plaintext(0), self.full_plaintext(1)
        else:
            work, step = self.open_segment, -self.overhead
            full0, full = self.full_ciphertext(0), self.full_ciphertext(1)
        pos = written = 0
        index = first
        try:
            while index < last:
                end = pos + (full0 if index == 0 else full)
                written += work(
                    index, src[pos:end], False, out[written : written + end - pos + step]
                )
                pos = end
                index += 1
            written += work(index, src[pos:size], final, out[written : written + size - pos + step])
        except Exception as exc:
            return written, exc
        return written, None


class BatchCodec(SegmentCodec):
    """A codec whose segment rule is written once, as its batch loop: subclasses define
    :meth:`run_segments` only, and one segment is a batch of one. For formats whose
    segments are small (4 KiB frames and records), where the per-segment Python of a
    method call and its slices is what limits throughput."""

    def seal_segment(self, index: int, plaintext: Buffer, final: bool, out: memoryview) -> int:
        return self._one(True, index, plaintext, final, out)

    def open_segment(self, index: int, ciphertext: Buffer, final: bool, out: memoryview) -> int:
        return self._one(False, index, ciphertext, final, out)

    def _one(self, sealing: bool, index: int, data: Buffer, final: bool, out: memoryview) -> int:
        written, error = self.run_segments(sealing, index, 1, data, final, out)
        if error is not None:
            raise error
        return written

    def run_segments(
        self, sealing: bool, first: int, count: int, data: Buffer, final: bool, out: memoryview
    ) -> tuple[int, Exception | None]:
        raise NotImplementedError


#: A native AEAD kernel's ``encrypt_into`` / ``decrypt_into``: (nonce, data, aad, out).
Kernel = Callable[[bytearray, Buffer, None, memoryview], int]


class CounterCodec(BatchCodec):
    """Segments sealed under nonce ``fixed || uint_be(i) || last_flag`` with no associated
    data and a 16-byte tag (the native container, age, Tink AES-GCM-HKDF): the batch loop
    written once.

    A subclass binds, once per stream, ``_encrypt`` / ``_decrypt`` (the native kernel's
    ``encrypt_into`` / ``decrypt_into``) and ``_nonce`` (segment 0's non-final nonce), and
    names in ``_suffix`` the struct of ``(index, final)``, written at ``_suffix_at``
    (it keeps these in its own ``__slots__``). A batch writes each segment's suffix into
    one nonce buffer of its own and each output in place: a segment costs one kernel call,
    two views and a ``pack_into``. On a failure the codec says what it was
    (:meth:`_failed`); :meth:`_check_last` judges the last segment of a batch before it is
    opened. A segment alone (:meth:`run_one`, a job of one segment) is the same rule
    through the kernel's ``encrypt`` / ``decrypt``, which make the output object.
    """

    __slots__ = ()

    _encrypt: Kernel
    _decrypt: Kernel
    _nonce: bytes
    _suffix: ClassVar[struct.Struct]  # packs (index, final)
    _suffix_at: ClassVar[int]

    def _check_last(self, index: int, size: int, final: bool) -> None:
        """Raise for a last segment of ``size`` ciphertext bytes the format forbids."""

    def _failed(self, index: int, final: bool, segment: memoryview, out: memoryview) -> Exception:
        """The error for segment ``index`` that did not open (``out`` has room for it)."""
        raise NotImplementedError

    def run_segments(
        self, sealing: bool, first: int, count: int, data: Buffer, final: bool, out: memoryview
    ) -> tuple[int, Exception | None]:
        if first + count > self.max_segments:  # what the counter field holds
            return 0, LimitExceededError(
                f"segment {first + count - 1} is past this format's {self.max_segments} segments"
            )
        nonce = bytearray(self._nonce)  # this batch's own: batches run on threads
        suffix_into, at = self._suffix.pack_into, self._suffix_at
        src = memoryview(data) if count > 1 else data  # a batch of one takes no view
        size = len(src)
        index, last = first, first + count - 1
        pos = written = 0
        step0, step = self.first_segment_size, self.segment_size
        try:
            if sealing:
                seal = self._encrypt
                while index < last:
                    n = step0 if index == 0 else step
                    suffix_into(nonce, at, index, False)
                    written += seal(
                        nonce, src[pos : pos + n], None, out[written : written + n + 16]
                    )
                    pos += n
                    index += 1
                suffix_into(nonce, at, index, final)
                rest = src[pos:] if pos else src
                written += seal(nonce, rest, None, out[written : written + size - pos + 16])
                return written, None
            open_ = self._decrypt
            while index < last:
                n = step0 if index == 0 else step
                suffix_into(nonce, at, index, False)
                written += open_(nonce, src[pos : pos + n + 16], None, out[written : written + n])
                pos += n + 16
                index += 1
            self._check_last(index, size - pos, final)
            if size - pos < 16:
                raise InvalidTag
            suffix_into(nonce, at, index, final)
            rest = src[pos:] if pos else src
            written += open_(nonce, rest, None, out[written : written + size - pos - 16])
        except InvalidTag:
            end = size if index == last else pos + (step0 if index == 0 else step) + 16
            return written, self._failed(
                index, final and index == last, memoryview(src)[pos:end], out[written:]
            )
        except Exception as exc:
            return written, exc
        return written, None

    def run_one(
        self, sealing: bool, index: int, data: Buffer, final: bool
    ) -> tuple[bytes, Exception | None]:  # never None: the kernel has the call
        # The kernel's own ``encrypt`` / ``decrypt`` return a new object: the engine's
        # output memory (a ``bytes`` made through the C API, a view, the job's slices)
        # cost 1.5 us more a 64 KiB segment, a tenth of what the Python of a 64 KiB chunk
        # was. The rule is the batch loop's; any failure is judged by that loop, so a
        # verdict and its message are one whichever ran.
        if index < self.max_segments:
            nonce = bytearray(self._nonce)
            self._suffix.pack_into(nonce, self._suffix_at, index, final)
            kernel: Any = self._encrypt.__self__  # type: ignore[attr-defined]  # the bound AEAD
            try:
                if sealing:
                    return kernel.encrypt(nonce, data, None), None
                self._check_last(index, len(data), final)
                return kernel.decrypt(nonce, data, None), None
            except Exception:  # judged below, as the batch loop judges it
                pass
        return self.run_one_batched(sealing, index, data, final, len(data) + self.overhead)


def detached(part: Buffer, bound: int) -> Buffer:
    """``part``, a part of a segment (or frame) held until the next push, as it may be
    kept: itself when it is a ``bytes`` or a read-only view of an object of at most
    ``bound`` bytes; else a copy (at most a segment), so that a hold never keeps a larger
    object alive nor a writable buffer its owner may reuse.

    Held as a view, the tail of a 1 MiB chunk kept the chunk until the next chunk and its
    join were made; without ``keep_freed_memory()``, glibc then trimmed its heap top and
    faulted it back every chunk or two in some processes' layouts (decrypt() of 1 MiB
    chunks: 70-230 page faults a MiB and ~10 us a segment, against 7-20; docs/ENGINE.md,
    "Output memory"). The one rule for every decryptor's hold (:class:`_Segmenter`, the
    AWS frames')."""
    if type(part) is bytes and len(part) <= bound:
        return part
    view = part if type(part) is memoryview else memoryview(part)
    if view.readonly:
        obj = view.obj
        if (
            obj is not None
            and (len(obj) if type(obj) is bytes else memoryview(obj).nbytes) <= bound
        ):
            return view
    return memoryview(bytes(view))


@dataclass(slots=True, eq=False)
class SegmentJob:
    """Seal or open ``count`` consecutive segments: a pure function, safe on any thread.

    ``data`` holds the segments' input back to back; the last one is the stream's final
    segment when ``final`` is true. :meth:`run_into` is what the engine calls;
    :meth:`run` is the convenience that raises.
    """

    codec: SegmentCodec
    sealing: bool
    first_index: int
    count: int
    data: Buffer
    final: bool

    @property
    def out_size(self) -> int:
        """An upper bound of the output length (exact when sealing)."""
        codec = self.codec
        extra = self.count * codec.overhead
        if self.sealing:
            return len(self.data) + extra
        return max(len(self.data) - extra, 0)

    def run(self, out: bytearray | memoryview | None = None) -> memoryview:
        """Run the job into ``out`` (allocated when None); return the written part."""
        dst = memoryview(out if out is not None else bytearray(self.out_size))
        written, error = self.run_into(dst)
        if error is not None:
            raise error
        return dst[:written]

    def run_into(self, out: memoryview) -> tuple[int, Exception | None]:
        """Run into ``out`` (at least :attr:`out_size` bytes); never raises.

        Returns the bytes written and the failure that stopped the job, if any: on a
        failure, the first bytes written are the output of the segments before the
        failing one (all verified), and nothing after them may be used.
        """
        return self.codec.run_segments(
            self.sealing, self.first_index, self.count, self.data, self.final, out
        )

    def run_new(self) -> tuple[bytes, Exception | None] | None:
        """A job of one segment run into a new ``bytes`` its codec's kernel makes (the
        output and the failure, as :meth:`run_into` gives them); ``None`` when the job has
        several segments or the codec no such call (then :meth:`run_into`). Never raises."""
        if self.count != 1:
            return None
        return self.codec.run_one(self.sealing, self.first_index, self.data, self.final)

    def split(self, max_bytes: int) -> list[SegmentJob]:
        """This job as consecutive jobs of its own class, of whole segments, about
        ``max_bytes`` of input each (at least one segment); only the last keeps ``final``."""
        codec = self.codec
        full = codec.full_plaintext(1) if self.sealing else codec.full_ciphertext(1)
        per = max(1, max_bytes // full)
        if self.count <= per:
            return [self]
        full0 = codec.full_plaintext(0) if self.sealing else codec.full_ciphertext(0)
        view = memoryview(self.data)
        make = type(self)
        jobs: list[SegmentJob] = []
        pos, index, left = 0, self.first_index, self.count
        while left > per:
            size = per * full + (full0 - full if index == 0 else 0)
            jobs.append(make(codec, self.sealing, index, per, view[pos : pos + size], False))
            pos, index, left = pos + size, index + per, left - per
        jobs.append(make(codec, self.sealing, index, left, view[pos:], self.final))
        return jobs


@runtime_checkable
class SegmentedTransform(Protocol):
    """What the engine needs of a segmented transform (both directions provide it)."""

    @property
    def header_pending(self) -> bool: ...
    def take_header(self) -> bytes: ...
    def feed(self, data: Buffer) -> list[SegmentJob]: ...
    def finish(self) -> list[SegmentJob]: ...
    def fail(self, exc: BaseException) -> BaseException: ...


class _Segmenter(Lifecycle, HoldsSecrets):
    """The bookkeeping both directions share: cut input into segments, assign indices.

    Input not yet part of a complete segment is *held*: read-only pieces by reference
    (the engine hands over only immutable data), except a partial segment cut from a
    larger object, which is copied (:meth:`_keep`), and writable ones, also copied. A
    segment that lies whole inside one piece is never copied; one that straddles pieces
    is joined once.
    """

    __slots__ = (
        "_codec",
        "_full0",
        "_full1",
        "_held",
        "_held_len",
        "_index",
        "_sealing",
        "_sized",
    )

    _codec: SegmentCodec | None

    def __init__(self, codec: SegmentCodec | None, *, sealing: bool) -> None:
        self._init_lifecycle()
        self._codec = codec
        self._sealing = sealing
        self._held: list[Buffer] = []
        self._held_len = 0
        self._index = 0
        #: The codec whose full segment sizes (``_full0``, ``_full1``) ``_cut`` knows.
        self._sized: SegmentCodec | None = None
        self._full0 = self._full1 = 0

    @property
    def codec(self) -> SegmentCodec | None:
        """The keyed codec, once the header is settled (read and verified, or built)."""
        return self._codec

    def _full(self, codec: SegmentCodec, index: int) -> int:
        return codec.full_plaintext(index) if self._sealing else codec.full_ciphertext(index)

    def _claim(self, codec: SegmentCodec, count: int) -> int:
        first = self._index
        if first + count > codec.max_segments:
            raise LimitExceededError(
                f"the stream would exceed {codec.max_segments} segments; "
                "split the data into several streams or use a larger segment size"
            )
        self._index = first + count
        return first

    def _hold(self, view: Buffer) -> None:
        """Hold ``view`` until the next push as it is when it is read-only, else a copy."""
        if view:
            self._held.append(view if memoryview(view).readonly else bytes(view))
            self._held_len += len(view)

    def _keep(self, part: Buffer) -> None:
        """Hold ``part`` (not empty) of the segment being held until the next push: as it
        is when it is the whole segment and read-only (a job's input as it is, never
        copied), else as :func:`detached` keeps a part of one (less than a segment, which
        the next push joins anyway)."""
        if len(part) != (self._full0 if self._index == 0 else self._full1) or not (
            type(part) is bytes or memoryview(part).readonly
        ):
            part = detached(part, self._full1)
        self._held.append(part)
        self._held_len += len(part)

    def _take_held(self, tail: Buffer | None = None) -> Buffer:
        """Everything held (plus ``tail``) as one buffer; the hold is emptied."""
        parts = self._held
        if tail:
            parts.append(tail)
        out: Buffer = parts[0] if len(parts) == 1 else b"".join(parts)
        self._held = []
        self._held_len = 0
        return out

    def _cut(self, data: Buffer) -> list[SegmentJob]:
        """Turn held bytes plus ``data`` (bytes-like of single bytes: :func:`as_buffer`'s)
        into jobs for every segment known to be non-final. Runs once a pushed chunk: the
        sizes of a full segment are asked of the codec once, not per call, and a chunk
        that completes no segment is held as it is (no view made of it)."""
        codec = self._codec
        assert codec is not None
        if self._sized is not codec:
            self._sized = codec
            self._full0, self._full1 = self._full(codec, 0), self._full(codec, 1)
        hold = codec.final_may_be_full
        size = len(data)
        index = self._index
        jobs: list[SegmentJob] = []
        view: Buffer = data
        if self._held_len:
            need = (self._full0 if index == 0 else self._full1) - self._held_len
            if size < need or (hold and size == need):
                self._keep(data)
                return jobs
            view = memoryview(data)
            jobs.append(self._job(codec, self._take_held(view[:need]), 1))
            view = view[need:]
            size -= need
            index += 1
        # Whole segments straight from the caller's buffer, no copy. Every segment but
        # segment 0 has the same size, so count them by division, not one by one: a
        # complete segment is taken when more bytes follow it, or (no hold) at the end.
        pos = count = 0
        if index == 0:
            full = self._full0
            if size > full or (size == full and not hold):
                pos, count = full, 1
        if count or index:
            full = self._full1
            left = size - pos
            more = (left - 1) // full if hold else left // full
            if more > 0:
                pos += more * full
                count += more
        if pos == 0:
            if size:
                self._keep(view)
            return jobs
        if pos < size:
            view = memoryview(view)
            jobs.append(self._job(codec, view[:pos], count))
            self._keep(view[pos:])
        else:
            jobs.append(self._job(codec, view, count))
        return jobs

    def _job(
        self, codec: SegmentCodec, data: Buffer, count: int, final: bool = False
    ) -> SegmentJob:
        first = self._claim(codec, count)
        return SegmentJob(codec, self._sealing, first, count, data, final)

    def fail(self, exc: BaseException) -> BaseException:
        """Record that a job of this stream failed; the stream is broken from now on."""
        return self._break(exc)

    def take_header(self) -> bytes:
        """Bytes to emit before the first segment's output (``b""`` when there are none)."""
        return b""

    @property
    def header_pending(self) -> bool:
        """True while the header is not settled: a decryptor has not read it yet, or an
        encryptor has not built it yet. Settling it may run a password KDF (scrypt,
        Argon2id) or public-key work, so the engine then calls ``feed``/``finish`` on a
        worker thread."""
        return self._codec is None

    @staticmethod
    def run_all(jobs: list[SegmentJob]) -> bytes:
        if not jobs:
            return b""
        if len(jobs) == 1:
            return bytes(jobs[0].run())
        return b"".join([job.run() for job in jobs])


#: Builds an encryptor's codec and header when first needed (may run a password KDF).
HeaderBuilder = Callable[[], "tuple[SegmentCodec, bytes]"]


class SegmentedEncryptor(_Segmenter):
    """Seal a stream segment by segment: ``header`` first, then the sealed segments.

    As a transform: ``update(data) -> bytes`` and ``finalize() -> bytes``. The engine uses
    ``take_header()``, ``feed()`` and ``finish()`` to run the jobs elsewhere. Give either
    the keyed ``codec`` and ``header``, or ``build``: a function returning both, called on
    the first ``feed``/``finish`` (so that an expensive key derivation happens where the
    engine runs it, never in the constructor on the event loop).
    """

    __slots__ = ("_build", "_header")

    def __init__(
        self,
        codec: SegmentCodec | None = None,
        header: bytes = b"",
        *,
        build: HeaderBuilder | None = None,
    ) -> None:
        if (codec is None) == (build is None):
            raise TypeError("give either codec (and header) or build")
        super().__init__(codec, sealing=True)
        self._header = header
        self._build = build

    def _settle(self) -> SegmentCodec:
        codec = self._codec
        if codec is None:
            assert self._build is not None
            codec, self._header = self._build()
            self._codec, self._build = codec, None
        return codec

    def take_header(self) -> bytes:
        """The header bytes, once; ``b""`` afterwards (and before the header is built)."""
        header, self._header = self._header, b""
        return header

    def feed(self, data: Buffer) -> list[SegmentJob]:
        """Jobs for every segment that is now complete. Do not modify ``data`` until they ran."""
        self._check()
        try:
            data = as_buffer(data, "data")  # bytes as they are; an int or a str refused
            self._settle()
            return self._cut(data)
        except Exception as exc:
            raise self._break(exc) from None

    def finish(self) -> list[SegmentJob]:
        """The job sealing the final segment; the encryptor is finalized."""
        self._check()
        try:
            codec = self._settle()
            job = self._job(codec, self._take_held(), 1, final=True)
        except Exception as exc:
            raise self._break(exc) from None
        self._finish()
        return [job]

    def update(self, data: Buffer) -> bytes:
        """Seal what is complete; returns the header on the first call."""
        jobs = self.feed(data)
        header = self.take_header()
        body = self.run_all(jobs)
        return header + body if header else body

    def finalize(self) -> bytes:
        """Seal the final segment (possibly empty)."""
        jobs = self.finish()
        return self.take_header() + self.run_all(jobs)


#: Parses a header from the start of a stream, given every byte received so far (one
#: bytearray that grows in place, never rejoined): ``None`` while more bytes are needed,
#: or an int, the held length below which asking again is pointless, else the keyed codec
#: and the header length. Each call must cost about the bytes new since the last (keep a
#: scan position; copy out only what it keeps), so header parsing stays linear in the
#: bytes received whatever the chunking. Raises FormatError, AuthenticationError,
#: UnknownKeyError; it must raise FormatError itself past its maximum header size.
HeaderReader = Callable[[bytearray], "tuple[SegmentCodec, int] | int | None"]


#: Bytes a decryptor's first look at a large feed holds for its header reader; each
#: further look doubles what is held (a header of n bytes costs O(n) copies and looks).
_HEAD_STEP = 4 << 10


class SegmentedDecryptor(_Segmenter):
    """Open a stream segment by segment, releasing only verified plaintext.

    ``update`` returns ``b""`` until a whole segment verified; ``finalize`` opens the final
    segment and raises :class:`TruncatedStreamError` if the stream ended early.

    """

    __slots__ = ("_head", "_head_need", "_read_header")

    def __init__(self, read_header: HeaderReader) -> None:
        super().__init__(None, sealing=False)
        self._read_header = read_header
        self._head = bytearray()
        self._head_need = 0

    def feed(self, data: Buffer) -> list[SegmentJob]:
        """Jobs for every segment now known complete and non-final."""
        self._check()
        try:
            data = as_buffer(data, "data")  # bytes as they are; an int or a str refused
            if self._codec is None:
                return self._feed_header(memoryview(data).cast("B"))
            return self._cut(data)
        except Exception as exc:
            raise self._break(exc) from None

    def _feed_header(self, view: memoryview, *, last: bool = False) -> list[SegmentJob]:
        # The reader sees everything so far (it may judge by length), appended in place,
        # _HEAD_STEP at first, then doubling: a large first feed is not copied whole, only
        # the header's neighbourhood; the rest goes on as the caller's own bytes.
        head = self._head
        while True:
            room = max(self._head_need - len(head), _HEAD_STEP, len(head))
            head += view[:room]
            view = view[room:]
            more = len(view) > 0
            if len(head) < self._head_need and not last:
                if not more:
                    return []
                continue
            parsed = self._read_header(head)
            if parsed is None or isinstance(parsed, int):
                self._head_need = parsed or 0
                if not more:
                    return []
                continue
            self._codec, used = parsed
            rest = memoryview(head)[used:]  # no copy: ``head`` is never changed again
            self._head = bytearray()
            jobs = self._cut(rest)
            if more:
                jobs += self._cut(view)
            return jobs

    def _header_held(self) -> bytes:
        """The header bytes held so far (the reader has not settled the header yet)."""
        return bytes(self._head)

    def _last_look(self) -> None:
        """Ask the header reader once more about everything held (at the end)."""
        if self._codec is None and self._head:
            self._feed_header(memoryview(b""), last=True)

    def finish(self) -> list[SegmentJob]:
        """The job opening the final segment; raises TruncatedStreamError if there is none."""
        self._check()
        try:
            self._last_look()
            codec = self._codec
            if codec is None:
                raise TruncatedStreamError("the stream ended inside its header")
            if self._held_len < codec.overhead:
                raise _no_final_segment(self._index)
            job = self._job(codec, self._take_held(), 1, final=True)
        except Exception as exc:
            raise self._break(exc) from None
        self._finish()
        return [job]

    def update(self, data: Buffer) -> bytes:
        jobs = self.feed(data)
        try:
            return self.run_all(jobs)
        except Exception as exc:
            raise self._break(exc) from None

    def finalize(self) -> bytes:
        jobs = self.finish()
        try:
            return self.run_all(jobs)
        except Exception as exc:
            raise self._break(exc) from None


@dataclass(frozen=True, slots=True)
class SegmentLayout:
    """Where segments lie in a stream of known length: the basis of random access."""

    codec: SegmentCodec
    header_size: int
    stream_size: int

    @classmethod
    def for_plaintext(
        cls, codec: SegmentCodec, header_size: int, plaintext_size: int
    ) -> SegmentLayout:
        """The layout that ``plaintext_size`` bytes will have once sealed behind a header
        of ``header_size`` bytes: what lets many workers seal one stream by ranges."""
        if plaintext_size < 0:
            raise InvalidParameterError("a plaintext size cannot be negative")
        full0, full = codec.full_plaintext(0), codec.full_plaintext(1)
        if plaintext_size < full0 or (codec.final_may_be_full and plaintext_size == full0):
            count = 1
        elif codec.final_may_be_full:
            count = 1 + -(-(plaintext_size - full0) // full)
        else:  # the final segment is shorter than a full one, possibly empty
            count = 2 + (plaintext_size - full0) // full
        if count > codec.max_segments:
            raise LimitExceededError(
                f"{plaintext_size} bytes would exceed {codec.max_segments} segments; "
                "use a larger segment size"
            )
        return cls(codec, header_size, header_size + plaintext_size + count * codec.overhead)

    def seal_plan(self, first: int, count: int) -> tuple[SegmentJob, int, int, int]:
        """Sealing segments ``[first, first + count)`` of this layout: a job template, the
        plaintext offset and length it takes, and the ciphertext offset of its output.

        The job is final exactly when the range ends with the stream's last segment, so
        the ranges of one stream can be sealed anywhere, in any order, and their outputs
        written at their offsets give the bytes a single sequential run gives. Fill the
        job's ``data`` with plaintext ``[offset, offset + length)``.
        """
        return self._plan(first, count, sealing=True)

    def open_plan(self, first: int, count: int) -> tuple[SegmentJob, int, int, int]:
        """Opening segments ``[first, first + count)``: a job template, the ciphertext
        offset and length it takes, and the plaintext offset of its output (final exactly
        when the range ends with the last segment, which proves the stream's length)."""
        return self._plan(first, count, sealing=False)

    def _plan(self, first: int, count: int, *, sealing: bool) -> tuple[SegmentJob, int, int, int]:
        total = self.segment_count
        if count < 1 or first < 0 or first + count > total:
            raise InvalidParameterError(
                f"segments {first}..{first + count - 1} are outside 0..{total - 1}"
            )
        end = first + count
        final = end == total
        source, dest = (
            (self.plaintext_offset, self.ciphertext_offset)
            if sealing
            else (self.ciphertext_offset, self.plaintext_offset)
        )
        source_size = self.plaintext_size if sealing else self.stream_size
        start = source(first)
        stop = source_size if final else source(end)
        job = SegmentJob(self.codec, sealing, first, count, b"", final)
        return job, start, stop - start, dest(first)

    @property
    def segment_count(self) -> int:
        payload = self.stream_size - self.header_size
        c = self.codec
        first = c.full_ciphertext(0)
        if payload < c.overhead:
            raise TruncatedStreamError("the stream is too short to hold its final segment")
        if payload < first or (c.final_may_be_full and payload == first):
            return 1
        rest = payload - first
        full = c.full_ciphertext(1)
        n, tail = divmod(rest, full)
        if c.final_may_be_full and tail == 0:
            return 1 + n
        if tail < c.overhead:  # cut after a whole segment: what the stream path says
            raise _no_final_segment(1 + n)
        return 2 + n

    def ciphertext_offset(self, index: int) -> int:
        c = self.codec
        if index == 0:
            return self.header_size
        return self.header_size + c.full_ciphertext(0) + (index - 1) * c.full_ciphertext(1)

    def plaintext_offset(self, index: int) -> int:
        c = self.codec
        return 0 if index == 0 else c.full_plaintext(0) + (index - 1) * c.full_plaintext(1)

    @property
    def plaintext_size(self) -> int:
        last = self.segment_count - 1
        tail = self.stream_size - self.ciphertext_offset(last) - self.codec.overhead
        return self.plaintext_offset(last) + tail

    def segment_of(self, plaintext_pos: int) -> int:
        c = self.codec
        if plaintext_pos < c.full_plaintext(0):
            return 0
        return 1 + (plaintext_pos - c.full_plaintext(0)) // c.full_plaintext(1)

    def plan(self, start: int, stop: int) -> tuple[SegmentJob, int, int, int] | None:
        """For plaintext ``[start, stop)``: a job template, ciphertext offset and length, skip.

        Returns ``None`` for an empty range. The job's ``data`` is empty: fill it with the
        ciphertext bytes ``[offset, offset + length)`` via :meth:`job_for`.
        """
        size = self.plaintext_size
        start, stop = max(0, start), min(stop, size)
        if start >= stop:
            return None
        first = self.segment_of(start)
        last = min(self.segment_of(stop - 1), self.segment_count - 1)
        if stop >= size:
            # A range that reaches the end also opens the final segment (possibly empty),
            # whose last-segment flag is what proves the stream was not cut short.
            last = self.segment_count - 1
        offset = self.ciphertext_offset(first)
        end = (
            self.stream_size if last == self.segment_count - 1 else self.ciphertext_offset(last + 1)
        )
        final = last == self.segment_count - 1
        job = SegmentJob(self.codec, False, first, last - first + 1, b"", final)
        return job, offset, end - offset, start - self.plaintext_offset(first)

    def final_segment(self) -> tuple[SegmentJob, int, int]:
        """A job template opening only the final segment, its ciphertext offset and length.

        Opening it proves the stream's length (truncation at a segment boundary leaves a
        final segment that fails): readers do it once, before trusting ``plaintext_size``.
        """
        last = self.segment_count - 1
        offset = self.ciphertext_offset(last)
        return SegmentJob(self.codec, False, last, 1, b"", True), offset, self.stream_size - offset

    def verify_end(self, read_at: Callable[[int, int], bytes]) -> None:
        """Open the final segment; raises :class:`AuthenticationError` for a cut stream."""
        job, offset, length = self.final_segment()
        job.data = read_at(offset, length)
        if len(job.data) != length:
            raise TruncatedStreamError("the stream is shorter than its layout says")
        job.run()

    def read(self, read_at: Callable[[int, int], bytes], start: int, stop: int) -> bytes:
        """Decrypt plaintext ``[start, stop)`` reading only the segments that cover it."""
        planned = self.plan(start, stop)
        if planned is None:
            return b""
        job, offset, length, skip = planned
        job.data = read_at(offset, length)
        if len(job.data) != length:
            raise TruncatedStreamError("the stream is shorter than its layout says")
        plain = job.run()
        return bytes(plain[skip : skip + (min(stop, self.plaintext_size) - max(start, 0))])
