"""Reading encrypted files: where the ciphertext comes from and the readers over it.

A file read by random access is a :class:`_RandomReader` over a source (a descriptor
read with ``pread`` on the engine's workers, or a wrapped object that can seek); one
that cannot seek is read front to back through the engine's pipeline
(:class:`_SequentialReader`). See :mod:`._files` for the theory of operation.
"""

from __future__ import annotations

import functools
import io
import os
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.abc import ByteReceiveStream

from ..codecs import ReadAt, SegmentJob, SegmentLayout
from ..engine import CLAIM_SIZE, OffloadPolicy, OrderedBatches, WorkerCalls
from ..errors import BrokenTransformError, InvalidParameterError, TruncatedStreamError

#: Bytes per piece when the policy is None (no batch size to follow).
_INLINE_PIECE = 1 << 20
#: Bytes asked of a non-seekable wrapped object per read call.
_STREAM_READ = 1 << 20


def _pread_all(fd: int, offset: int, length: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < length:
        chunk = os.pread(fd, length - got, offset + got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


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
        return await self._threads.run(_pread_all, self.fd, offset, length)

    def blocking_reader(self) -> ReadAt:
        return functools.partial(_pread_all, self.fd)

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
    """Read a run of segments' ciphertext with ``pread`` and open it: a worker's job."""

    __slots__ = ("_fd", "_job", "_length", "_offset", "out_size")

    def __init__(self, fd: int, job: SegmentJob, offset: int, length: int) -> None:
        self._fd = fd
        self._job = job
        self._offset = offset
        self._length = length
        self.out_size = max(0, length - job.count * job.codec.overhead)

    def run_into(self, out: memoryview) -> tuple[int, Exception | None]:
        try:
            data = _pread_all(self._fd, self._offset, self._length)
        except OSError as exc:
            return 0, exc
        if len(data) != self._length:
            return 0, TruncatedStreamError(
                "the file is shorter than when it was opened: it was truncated meanwhile"
            )
        self._job.data = data
        return self._job.run_into(out)


class _RandomReader:
    """Random access through a SegmentLayout, with read-ahead for sequential reads.

    A read is served from the *span* last opened (whole segments around the position,
    about the size of the read); past it, the next span comes from the engine's
    scheduler. From a file descriptor, spans are read and opened on workers (``pread``
    and the cipher in one job); once a read continues the span before it, up to
    ``max_in_flight`` spans ahead are already in flight; a seek elsewhere drops them.
    Random reads read only the segments they cover. A span whose segment fails opens up to that segment: reads before it succeed,
    a read that touches it raises, the rest of the file stays readable.
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
        self._cache = b""
        self._cache_start = 0
        # Read-ahead runs only where the worker can read by itself (a descriptor) and a
        # policy lets work leave the loop.
        self._fd = source.fd if isinstance(source, _FdSource) and policy is not None else None
        self._batches = self._new_batches()
        self._spans: deque[tuple[int, int]] = deque()  # plaintext ranges in flight, in order
        self._span = 0
        self._dropped: list[OrderedBatches] = []

    def _new_batches(self) -> OrderedBatches:
        # One output object per span, so a read of exactly a span returns it uncopied.
        return OrderedBatches(
            self._policy, site="file-read", always_offload=self._fd is not None, piece=1 << 62
        )

    async def read(self, n: int) -> bytes:
        start = self.position
        stop = self.size if n < 0 else min(self.size, start + n)
        parts: list[bytes] = []
        pos = start
        while pos < stop:
            offset = pos - self._cache_start
            if 0 <= offset < len(self._cache):
                take = min(stop - pos, len(self._cache) - offset)
                parts.append(self._cache[offset : offset + take])
                pos += take
            else:
                await self._load(pos, stop - pos)
        self.position = pos
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _span_size(self, want: int) -> int:
        seg = self._layout.codec.full_plaintext(1)
        return min(max(-(-want // seg) * seg, seg), max(self.piece, seg))

    def _queue(self, start: int, jobs: list[Any]) -> None:
        self._batches.queue(jobs)
        self._batches.launch()
        self._spans.append((start, start + sum(job.out_size for job in jobs)))

    def _queue_span(self, start: int) -> None:
        """Queue, as one batch of claim-sized jobs, the span of whole segments from
        plaintext ``start`` (a segment boundary), each job reading its own ciphertext."""
        assert self._fd is not None
        layout = self._layout
        first = layout.segment_of(start)
        last = layout.segment_of(min(self.size, start + self._span) - 1)
        per = max(1, CLAIM_SIZE // layout.codec.full_ciphertext(1))
        jobs: list[Any] = []
        for i in range(first, last + 1, per):
            j = min(last, i + per - 1)
            planned = layout.plan(layout.plaintext_offset(i), layout.plaintext_offset(j + 1))
            assert planned is not None
            job, offset, length, _skip = planned
            jobs.append(_PreadJob(self._fd, job, offset, length))
            if job.final:  # a range that reaches the end took the final segment with it
                break
        self._queue(start, jobs)

    async def _queue_direct(self, start: int) -> None:
        """Without read-ahead: fetch the span's ciphertext here, then queue its job."""
        planned = self._layout.plan(start, start + self._span)
        assert planned is not None
        job, offset, length, _skip = planned
        job.data = await self._source.read_at(offset, length)
        if len(job.data) != length:
            raise TruncatedStreamError(
                "the file is shorter than when it was opened: it was truncated meanwhile"
            )
        self._queue(start, [job])

    async def _load(self, pos: int, want: int) -> None:
        layout = self._layout
        start = layout.plaintext_offset(layout.segment_of(pos))
        want += pos - start
        if not self._spans or self._spans[0][0] != start:
            self._restart(want)
            if self._fd is not None:
                self._queue_span(start)
            else:
                await self._queue_direct(start)
        span_start, span_stop = self._spans.popleft()
        await self._batches.wait()
        parts, error = self._batches.pop()
        sequential = span_start == self._cache_start + len(self._cache)
        out = parts[0] if len(parts) == 1 and isinstance(parts[0], bytes) else b"".join(parts)
        self._cache, self._cache_start = out, span_start
        if error is not None:
            self._restart(want)
            if pos >= span_start + len(out):
                raise error
            return
        if self._fd is not None and sequential:  # read ahead while reads go forward
            nxt = self._spans[-1][1] if self._spans else span_stop
            while nxt < self.size and not self._batches.window_full:
                self._queue_span(nxt)
                nxt = self._spans[-1][1]

    def _restart(self, want: int) -> None:
        """Drop what is in flight (a seek, or a failed span) and size spans for ``want``."""
        if self._batches.broken or not self._batches.idle:
            self._dropped.append(self._batches)
            self._batches = self._new_batches()
        self._spans.clear()
        self._span = self._span_size(want)

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
        # Jobs in flight read the descriptor: let them finish before it is closed.
        for batches in [*self._dropped, self._batches]:
            await batches.settle()
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
