"""Reading encrypted files: where the ciphertext comes from and the readers over it.

A file read by random access is a :class:`_RandomReader` over a source (a descriptor
read with ``pread`` on the engine's workers, or a wrapped object that can seek); one
that cannot seek is read front to back through the engine's pipeline
(:class:`_SequentialReader`). See :mod:`._files` for the theory of operation.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import mmap
import os
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.abc import ByteReceiveStream

from ..codecs import ReadAt, SegmentCodec, SegmentLayout
from ..engine import OffloadPolicy, OrderedBatches, Pending, WorkerCalls, wait_future
from ..errors import BrokenTransformError, InvalidParameterError, TruncatedStreamError

#: Bytes per piece when the policy is None (no batch size to follow).
_INLINE_PIECE = 1 << 20
#: Bytes asked of a non-seekable wrapped object per read call.
_STREAM_READ = 1 << 20
#: Plaintext bytes of a read-ahead span at most (whole output objects, at least one): one
#: batch, one worker's. Two 1 MiB reads a span halve the batches, hand-overs and waits of
#: 1 MiB spans. Measured (1 GiB in 1 MiB reads, 2 vCPUs, quiet, interleaved,
#: 2026-12-05): 1 MiB 2.90 / 2.87 GB/s at 0.603 / 0.607 CPU-s/GB, 2 MiB 3.35 / 3.05 at
#: 0.525 / 0.575, 4 MiB 3.03 at 0.586 (and 15 times the page faults).
_SPAN = 2 << 20
#: Plaintext bytes whose segments a read job reads with one ``pread`` and opens before
#: the next (whole segments, at least one): the copy out of the page cache costs less
#: per byte in large calls, up to about this size. Measured (one thread, 256 MiB from
#: the page cache into 4 MiB outputs, pread + AES-256-GCM, 2026-12-05): 64 KiB 0.446,
#: 256 KiB 0.427, 512 KiB 0.408, 1 MiB 0.388, 2 MiB 0.388, 4 MiB 0.389 CPU-s/GB.
_READ = 1 << 20


def _full_run(full0: int, full: int, index: int, count: int) -> int:
    """Ciphertext bytes of ``count`` full segments from segment ``index`` (``full0`` and
    ``full``: the ciphertext of a full segment 0 and of any other)."""
    return count * full + (full0 - full if index == 0 else 0)


def _pread_into(fd: int, offset: int, view: memoryview) -> int:
    """Fill ``view`` with the file's bytes from ``offset`` (fewer at its end); the count."""
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], offset + got)
        if not n:
            break
        got += n
    return got


def _pread(fd: int, offset: int, length: int) -> bytes:
    """``length`` bytes of the file from ``offset`` (fewer at its end): for the reads of
    opening (headers, a final segment, a signed file's frames), not for spans."""
    buffer = bytearray(length)
    return bytes(buffer[: _pread_into(fd, offset, memoryview(buffer))])


def _open_for_reading(path: str) -> tuple[int, int]:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return fd, os.fstat(fd).st_size
    except BaseException:
        os.close(fd)
        raise


class _RandomAccess(Protocol):
    size: int

    async def read_at(self, offset: int, length: int) -> bytes: ...

    def blocking_reader(self) -> ReadAt:
        """``read_at`` for a worker thread (blocks until the bytes are read)."""
        ...

    async def aclose(self) -> None: ...


class _FdSource:
    """A file descriptor read with ``pread`` on worker threads."""

    def __init__(self, fd: int, size: int, threads: WorkerCalls) -> None:
        self.fd = fd
        self.size = size
        self._threads = threads

    async def read_at(self, offset: int, length: int) -> bytes:
        return await self._threads.run(_pread, self.fd, offset, length)

    def blocking_reader(self) -> ReadAt:
        return functools.partial(_pread, self.fd)

    async def aclose(self) -> None:
        await self._threads.settle()
        await self._threads.run(os.close, self.fd)


class _SeekableSource:
    """A wrapped async file-like object (``anyio.open_file``...) with ``seek`` and ``read``."""

    def __init__(self, obj: Any, base: int, size: int, close: bool) -> None:
        self._obj = obj
        self._base = base
        self.size = size
        self._close = close

    async def read_at(self, offset: int, length: int) -> bytes:
        await self._obj.seek(self._base + offset)
        parts: list[bytes] = []
        got = 0
        while got < length:
            chunk = await self._obj.read(length - got)
            if not chunk:
                break
            parts.append(bytes(chunk))
            got += len(chunk)
        return b"".join(parts)

    def blocking_reader(self) -> ReadAt:
        """Reads through the event loop that owns the object (called from its worker)."""
        token = anyio.lowlevel.current_token()
        return lambda offset, length: anyio.from_thread.run(
            self.read_at, offset, length, token=token
        )

    async def aclose(self) -> None:
        if self._close:
            await self._obj.aclose()


class _StreamChunks:
    """An async iterator over a non-seekable object's bytes, ``head`` first."""

    def __init__(self, obj: Any, head: bytes) -> None:
        self._obj = obj
        self._head = head
        self._iter: AsyncIterator[Any] | None = None
        self._done = False

    def push_back(self, data: bytes) -> None:
        """Bytes to give out before the object's next bytes."""
        self._head = data + self._head

    def __aiter__(self) -> _StreamChunks:
        return self

    async def __anext__(self) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            return head
        chunk = await self.receive()
        if not chunk:
            raise StopAsyncIteration
        return chunk

    async def receive(self) -> bytes:
        """The next bytes of the object; ``b""`` at its end."""
        if self._done:
            return b""
        obj = self._obj
        chunk: Any
        if isinstance(obj, ByteReceiveStream):
            try:
                chunk = await obj.receive()
            except anyio.EndOfStream:
                chunk = b""
        elif hasattr(obj, "read"):
            chunk = await obj.read(_STREAM_READ)
        else:
            if self._iter is None:
                self._iter = aiter(obj)
            try:
                chunk = await anext(self._iter)
            except StopAsyncIteration:
                chunk = b""
        if not chunk:
            self._done = True
        return bytes(chunk)


class _PreadJob:
    """Read segments' ciphertext with ``pread`` into a buffer borrowed from the reader's
    pool and open them from there, straight into the output the read hands out: a
    worker's job, one per output object.

    The segments are read ``_READ`` plaintext bytes' worth at a time (whole segments, at
    least one), each piece opened before the next is read, so the buffer stays about
    that size whatever the output's. The buffer goes back to the pool when the job ends,
    so the pool holds one buffer per job running at once (the workers'), whatever the
    spans in flight: no span keeps ciphertext while it waits. ``done`` is set once the
    job has ended (on the worker; read by the loop to tell a worker is idle)."""

    __slots__ = (
        "_codec",
        "_count",
        "_fd",
        "_final",
        "_first",
        "_offset",
        "_pool",
        "_size",
        "done",
        "out_size",
    )

    def __init__(
        self,
        fd: int,
        codec: SegmentCodec,
        first: int,
        count: int,
        offset: int,
        size: int,
        final: bool,
        pool: list[mmap.mmap],
    ) -> None:
        self._fd = fd
        self._codec = codec
        self._first = first  # segment index
        self._count = count  # segments
        self._offset = offset  # of the ciphertext in the file
        self._size = size  # ciphertext bytes
        self._final = final  # the last segment is the stream's final one
        self._pool = pool
        self.done = False
        self.out_size = max(0, size - count * codec.overhead)

    def run_into(self, out: memoryview) -> tuple[int, Exception | None]:
        codec, fd, pool = self._codec, self._fd, self._pool
        full0, full = codec.full_ciphertext(0), codec.full_ciphertext(1)
        per = max(1, _READ // codec.full_plaintext(1))  # segments a pread
        index, left, offset, rest = self._first, self._count, self._offset, self._size
        buffer = _borrow(pool, min(rest, per * full + max(0, full0 - full)))
        written = 0
        try:
            while left:
                n = min(per, left)
                size = rest if n == left else _full_run(full0, full, index, n)
                if len(buffer) < size:  # a final frame longer than a full one (AWS)
                    buffer = _borrow(pool, size)
                data = memoryview(buffer)[:size]
                try:
                    got = _pread_into(fd, offset, data)
                except OSError as exc:
                    return written, exc
                if got != size:
                    return written, TruncatedStreamError(
                        "the file is shorter than when it was opened: it was truncated meanwhile"
                    )
                final = self._final and n == left
                done, error = codec.run_segments(False, index, n, data, final, out[written:])
                written += done
                if error is not None:
                    return written, error
                index, left, offset, rest = index + n, left - n, offset + size, rest - size
            return written, None
        finally:
            pool.append(buffer)
            self.done = True


def _borrow(pool: list[mmap.mmap], size: int) -> mmap.mmap:
    """A ciphertext buffer of at least ``size`` bytes: one of ``pool`` (``list.pop`` is
    atomic: any thread may borrow) or a new anonymous mapping, not a ``bytearray``, which
    would zero it where it is made, the loop among others (holding the GIL the workers
    need); a mapping's pages are first touched by the ``pread`` filling them."""
    try:
        buffer = pool.pop()
    except IndexError:
        return mmap.mmap(-1, size)
    return buffer if len(buffer) >= size else mmap.mmap(-1, size)


class _RandomReader:
    """Random access through a SegmentLayout, with read-ahead for sequential reads.

    A read is served from the *span* last opened (whole segments around the position),
    kept as output objects of about the read's size (whole segments), so that a read
    that continues the one before returns one of them uncopied. Past the span, the next
    span comes from the engine's scheduler. From a file descriptor, spans are read and
    opened on workers only (one job per output object: ``pread`` into a buffer borrowed
    for the job and the cipher straight into the object the read hands out; the loop
    never runs one: it would read the file on the loop). The first span after a seek is
    one read's worth; a read that continues the one before (or starts the file) first
    queues the spans after it, then waits for its own, so workers read and open the next
    spans while this one is opened: *read-ahead*, spans of twice the read's size, each
    twice the one before, up to ``_SPAN`` in whole output objects.

    How many spans are in flight (the *depth*) is measured, not set: it starts at one
    per worker plus the one the read waits for, and grows by one each time a read comes
    for its span and finds a worker with nothing to do (fewer spans unfinished than
    workers, while the depth held back the next span: the reads came late, and more
    read-ahead would have kept the workers busy), never past the cap: as many spans as
    half ``batch_size x max_in_flight`` holds (at least ``max_in_flight``). Memory: that
    much plaintext in flight, plus one ciphertext buffer of about ``_READ`` plaintext
    bytes' segments per job running (the workers'); a seek elsewhere drops it. Random
    reads read only the segments they cover. A span whose segment fails opens up to that
    segment: reads before it succeed, a read that touches it raises, the rest of the file
    stays readable.
    """

    def __init__(
        self,
        source: _RandomAccess,
        layout: SegmentLayout,
        policy: OffloadPolicy | None,
        threads: WorkerCalls,
    ) -> None:
        self._source = source
        self._layout = layout
        self._policy = policy
        self._threads = threads
        self.size = layout.plaintext_size
        self.position = 0
        self.piece = policy.batch_size if policy is not None else _INLINE_PIECE
        self._segment = layout.codec.full_plaintext(1)
        # The plaintext of the span last opened: consecutive objects from _cache_start.
        self._cache: list[bytes] = []
        self._cache_start = self._cache_end = 0
        # Read-ahead runs only where the worker can read by itself (a descriptor) and a
        # policy lets work leave the loop.
        self._fd = source.fd if isinstance(source, _FdSource) and policy is not None else None
        self._out = self._segment  # plaintext bytes per output object (about a read)
        self._span = self._out  # plaintext bytes of a read-ahead span at most
        self._ahead_span = self._out  # plaintext bytes of the last span read ahead
        self._batches = self._new_batches()
        self._spans: deque[int] = deque()  # where the spans in flight start, in order
        self._ends: deque[_PreadJob] = deque()  # the last job of each (from a descriptor)
        # Spans in flight at most, learnt (see the class docstring), kept across seeks.
        self._workers = policy.workers if policy is not None else 1
        self._depth = self._workers + 1
        self._queued_end = 0  # where the last span queued ends
        # Ciphertext buffers of the jobs not running (see _PreadJob), and with policy=None
        # the next span's ciphertext being read (offset, length, its buffer, the read).
        self._pool: list[mmap.mmap] = []
        self._ahead: tuple[int, int, mmap.mmap, Pending[int]] | None = None

    def _new_batches(self) -> OrderedBatches:
        policy = self._policy
        if self._fd is None:
            return OrderedBatches(policy, site="file-read")
        # Jobs that read the descriptor block: they run on workers only. Many spans of
        # _SPAN rather than a few large ones: a span is one worker's, so the window's
        # head waits for that worker alone while others, done, have nothing to take. The
        # scheduler's window is the cap; the depth (at most the cap) decides.
        assert policy is not None
        cap = max(policy.max_in_flight, policy.batch_size * policy.max_in_flight // 2 // self._span)
        policy = dataclasses.replace(policy, max_in_flight=cap)
        return OrderedBatches(policy, site="file-read", blocking=True)

    async def read(self, n: int) -> bytes:
        start = self.position
        stop = self.size if n < 0 else min(self.size, start + n)
        parts: list[bytes] = []
        pos = start
        while pos < stop:
            if self._cache_start <= pos < self._cache_end:
                pos = self._take(pos, stop, parts)
            else:
                await self._load(pos, stop - pos)
        self.position = pos
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _take(self, pos: int, stop: int, parts: list[bytes]) -> int:
        """Append the cached plaintext from ``pos`` (cached) up to ``stop`` or the cache's
        end to ``parts`` (a whole object uncopied); returns where that ends."""
        base = self._cache_start
        for piece in self._cache:
            end = base + len(piece)
            if pos < end:
                take = min(stop, end) - pos
                parts.append(piece[pos - base : pos - base + take])
                pos += take
                if pos >= stop:
                    break
            base = end
        return pos

    def _queue(self, start: int, jobs: list[Any]) -> None:
        self._batches.queue(jobs)
        self._batches.launch()
        assert not self._batches.queued, "a span is one batch (at most a batch size)"
        self._queued_end = start + sum(job.out_size for job in jobs)
        self._spans.append(start)

    def _queue_span(self, start: int, span: int) -> None:
        """Queue, as one batch, the whole segments of ``span`` plaintext bytes from
        ``start`` (a segment boundary): one job per output object, each reading its own
        ciphertext (:class:`_PreadJob`). The span is planned once; its jobs are cut from
        it by the segment sizes."""
        assert self._fd is not None
        planned = self._layout.plan(start, start + span)
        assert planned is not None
        whole, pos, length, _skip = planned
        codec = whole.codec
        full0, full = codec.full_ciphertext(0), codec.full_ciphertext(1)
        per_out = max(1, self._out // self._segment)  # segments per output object
        at = 0  # where the next job's ciphertext starts, from pos
        index = whole.first_index
        last = index + whole.count - 1
        # A final segment with no plaintext (the file ends on a segment boundary) is
        # opened with the one before it: alone, it would be a job writing nothing, which
        # the scheduler launches as a batch of its own.
        end = last
        if (
            whole.count > 1
            and length - _full_run(full0, full, index, last - index) == codec.overhead
        ):
            end = last - 1
        jobs: list[_PreadJob] = []
        while index <= end:
            j = min(end, index + per_out - 1)
            j = last if j == end else j
            n = j - index + 1
            size = length - at if j == last else _full_run(full0, full, index, n)
            final = whole.final and j == last
            jobs.append(_PreadJob(self._fd, codec, index, n, pos + at, size, final, self._pool))
            at += size
            index = j + 1
        self._queue(start, jobs)
        self._ends.append(jobs[-1])

    async def _queue_direct(self, start: int) -> None:
        """Without workers that read for themselves: fetch the span's ciphertext (the
        read started ahead, if any), then queue its job. While reads go forward from a
        descriptor (``policy=None``: the cipher runs on the loop, in ``_queue``), the
        next span's ciphertext is read on a worker into a pool buffer while this one is
        opened."""
        planned = self._layout.plan(start, start + self._out)
        assert planned is not None
        job, offset, length, _skip = planned
        ahead, buffer = self._ahead, None
        if ahead is not None and ahead[:2] == (offset, length):
            got = await wait_future(ahead[3])  # cancelled: the read stays ahead
            buffer = ahead[2]
            job.data = memoryview(buffer)[:got]
        else:
            # A read ahead elsewhere (a seek) is dropped with its buffer: it may still
            # be writing it.
            job.data = await self._source.read_at(offset, length)
        self._ahead = None
        try:
            if len(job.data) != length:
                raise TruncatedStreamError(
                    "the file is shorter than when it was opened: it was truncated meanwhile"
                )
            source = self._source
            if isinstance(source, _FdSource) and start == self._cache_end:
                nxt = self._layout.plan(start + self._out, start + 2 * self._out)
                if nxt is not None:
                    _, at, size, _ = nxt
                    into = _borrow(self._pool, size)
                    read = self._threads.start(_pread_into, source.fd, at, memoryview(into)[:size])
                    self._ahead = (at, size, into, read)
            self._queue(start, [job])
        finally:
            if buffer is not None:  # policy=None: the job ran in _queue, on the loop
                job.data = b""
                self._pool.append(buffer)

    async def _load(self, pos: int, want: int) -> None:
        layout = self._layout
        start = layout.plaintext_offset(layout.segment_of(pos))
        want += pos - start
        if not self._spans or self._spans[0] != start:
            self._restart(want)
            if self._fd is not None:
                self._queue_span(start, self._out)
            else:
                await self._queue_direct(start)
        # Reads going forward (this span continues the one before, or the file's start):
        # the spans after it are queued before waiting for it, so they are read while
        # it is opened.
        sequential = start == self._cache_end
        if sequential:
            self._deepen()
            self._read_ahead()
        await self._batches.wait()  # cancelled: the span stays in flight, nothing changed
        span_start = self._spans.popleft()
        if self._ends:
            self._ends.popleft()
        parts, error = self._batches.pop()
        self._cache = [part if isinstance(part, bytes) else bytes(part) for part in parts]
        self._cache_start = span_start
        self._cache_end = span_start + sum(map(len, self._cache))
        if error is not None:
            self._restart(want)
            if pos >= self._cache_end:
                raise error
            return
        if sequential:
            self._read_ahead()

    def _deepen(self) -> None:
        """One span more in flight from now on if, as a read comes for its span, a
        worker has had nothing to do: fewer spans unfinished than workers while the depth
        held back the next span (and more of the file is left to queue)."""
        if (
            len(self._spans) >= self._depth
            and self._queued_end < self.size
            and not self._batches.window_full
            and sum(not job.done for job in self._ends) < self._workers
        ):
            self._depth += 1

    def _read_ahead(self) -> None:
        """Queue the span after the last one queued (from a descriptor, whose jobs read
        for themselves) if the window has room: twice the read's size, each next one
        twice the one before, up to ``_span`` (small reads after a seek read little
        ahead; a long run of reads soon moves whole spans). One span a call, twice a
        load (before waiting and after): the window grows by one span a load, and the
        loop is held for one span's jobs at a time, not for a window's."""
        if self._fd is None:
            return
        room = len(self._spans) < self._depth and not self._batches.window_full
        if room and self._queued_end < self.size:
            self._ahead_span = min(2 * self._ahead_span, self._span)
            self._queue_span(self._queued_end, self._ahead_span)

    def _restart(self, want: int) -> None:
        """Drop what is in flight (a seek, or a failed span) and size output for ``want``."""
        old = self._batches
        if old.broken or not old.idle:
            # Abandoned (the span after a seek does not queue behind its batches); the
            # jobs still running read the descriptor: the worker calls keep them, for
            # aclose.
            for future in old.abandon(BrokenTransformError("dropped by a seek")):
                self._threads.watch(future)
        self._spans.clear()
        self._ends.clear()
        seg = self._segment
        self._out = min(max(-(-want // seg) * seg, seg), max(self.piece, seg))
        self._ahead_span = self._out
        # Whole output objects, at most a batch size: the scheduler launches a span's
        # jobs as one batch.
        self._span = self._out * max(1, min(_SPAN, self.piece) // self._out)
        self._batches = self._new_batches()
        # A group of jobs becomes one object once it holds more than out - seg bytes: at
        # the end of each output object, also one whose segment 0 is shorter (Tink).
        self._batches.piece = self._out - seg + 1

    async def seek(self, offset: int, whence: int) -> int:
        if whence == io.SEEK_SET:
            target = offset
        elif whence == io.SEEK_CUR:
            target = self.position + offset
        elif whence == io.SEEK_END:
            target = self.size + offset
        else:
            raise InvalidParameterError(f"whence must be 0, 1 or 2, not {whence!r}")
        if target < 0:
            raise InvalidParameterError(f"cannot seek to a negative position ({target})")
        self.position = target
        return target

    async def aclose(self) -> None:
        # Jobs in flight, and those of spans a seek dropped, read the descriptor: they
        # finish before it is closed.
        await self._batches.settle()
        await self._threads.settle()
        # Plaintext and ciphertext buffers go with the file, not with the object a caller
        # may keep.
        self._batches.abandon(BrokenTransformError("the file is closed"))  # drops the jobs
        self._spans.clear()
        self._ends.clear()
        self._pool.clear()  # the list the jobs share
        self._cache, self._ahead = [], None
        self._cache_start = self._cache_end = 0
        await self._source.aclose()


class _SequentialReader:
    """Reads a non-seekable stream front to back through the engine's pipeline."""

    def __init__(self, chunks: AsyncIterator[bytes], close: Callable[[], Any], piece: int) -> None:
        self._chunks = chunks
        self._close = close
        self._buffer = bytearray()
        self._eof = False
        self._failure: BaseException | None = None
        self.position = 0
        self.piece = piece

    async def _more(self) -> bool:
        if self._eof:
            return False
        if self._failure is not None:
            raise BrokenTransformError(
                "the stream is unusable after an earlier failure; reopen it"
            ) from self._failure
        try:
            chunk = await anext(self._chunks)
        except StopAsyncIteration:
            self._eof = True
            return False
        except BaseException as exc:  # an error or a cancellation ends the pipeline for good
            self._failure = exc
            raise
        self._buffer += chunk
        return True

    async def read(self, n: int) -> bytes:
        while n < 0 or len(self._buffer) < n:
            if self._failure is not None and self._buffer:
                break  # hand out what verified before the failure; the next read raises
            if not await self._more():
                break
        take = len(self._buffer) if n < 0 else min(n, len(self._buffer))
        out = bytes(self._buffer[:take])
        del self._buffer[:take]
        self.position += take
        return out

    async def aclose(self) -> None:
        aclose = getattr(self._chunks, "aclose", None)
        if aclose is not None:
            await aclose()
        await self._close()
