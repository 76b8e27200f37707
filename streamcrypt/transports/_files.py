"""Async encrypted files: ``async with streamcrypt.open(path, "rb" | "wb", ...) as f``.

Theory of operation
-------------------
A file is a segmented stream (the native container, age, rclone crypt, an AWS
Encryption SDK message) on disk. Every byte of file
I/O and every header check runs on worker threads (the offload policy's pool; with
``policy=None`` the crypto stays on the loop thread, the I/O still does not).

Writing: ``write()`` feeds the sans-I/O encryptor, which cuts the data into segment jobs
on the loop thread (indices and finality are decided there). Jobs are collected into
batches of ``policy.batch_size`` bytes; each batch is sealed on a worker thread, at most
``policy.max_in_flight`` batches at once, and the sealed batches are written in order,
one ``write`` call per batch, so memory is bounded by a few batches whatever the file
length. Plain stages after the segmented one (the AWS signer, which hashes every byte
and appends the signature at close) see the sealed batches in order, on a worker thread
beside the sealing. A path is written *atomically*: the data goes to a temporary file beside the
destination (``.<name>.streamcrypt-<16 hex>.tmp``); a clean close seals the final
segment, fsyncs the temporary, renames it over the destination (``os.replace``) and
fsyncs the directory. An exception inside the ``async with`` block (or a failed close)
removes the temporary and leaves the destination as it was. A crash (SIGKILL, power
loss) cannot run any cleanup: the destination is still untouched, and the stale
temporary stays behind; :func:`remove_stale_temporaries` deletes such leftovers.

Reading: opening reads the header and authenticates it (a wrong key fails in the
``async with``), then maps the file with a :class:`SegmentLayout` (the AWS layout also reads the
file's end to find the final frame, and a signed message whole, to verify its signature). ``read``/``seek``
are random access: a read fetches only the ciphertext of the segments covering the
requested range, opens them (split across workers when large), and keeps the last
segment's plaintext as a one-segment cache, so sequential small reads open each segment
once. A segment that fails to authenticate fails the read that touches it; the rest of
the file stays readable. A wrapped object that cannot seek (a socket, a pipe, any async
byte stream) is read sequentially through the engine's pipeline instead.

Formats come from the codecs' one registry (:data:`streamcrypt.codecs.FORMATS`): each
descriptor says how to build the encryptor, the decryptor and the layout, and how long
the header is; :data:`FORMATS` holds those ``streamcrypt.open`` speaks.
"""

from __future__ import annotations

import functools
import io
import os
import re
import time
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable, Generator, Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.abc import ByteReceiveStream, ByteSendStream

from ..abc import Buffer, Chain, Transform
from ..codecs import FORMATS as CODEC_FORMATS
from ..codecs import (
    FormatOptions,
    ReadAt,
    SegmentedFormat,
    SegmentedTransform,
    SegmentJob,
    SegmentLayout,
)
from ..codecs import age as _age
from ..codecs import container as _container
from ..engine import (
    CLAIM_SIZE,
    DEFAULT_POLICY,
    OffloadPolicy,
    OrderedBatches,
    pipeline,
    wait_future,
)
from ..errors import (
    BrokenTransformError,
    FormatError,
    InvalidParameterError,
    TruncatedStreamError,
    UnsupportedFormatError,
)
from ._atomic import commit_temporary, create_temporary, discard_temporary

__all__ = [
    "FORMATS",
    "EncryptedFile",
    "FileFormat",
    "FileOpener",
    "FileOptions",
    "open_file",
    "remove_stale_temporaries",
]

T = TypeVar("T")

_MODES = ("rb", "wb")
#: Bytes per piece when the policy is None (no batch size to follow).
_INLINE_PIECE = 1 << 20
#: Bytes asked of a non-seekable wrapped object per read call.
_STREAM_READ = 1 << 20
_TEMP_RE = re.compile(r"^\..+\.streamcrypt-[0-9a-f]{16}\.tmp$")


# ---------------------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------------------


#: The keyword arguments of :func:`open_file`, as the format descriptors receive them.
FileOptions = FormatOptions

#: How :func:`open_file` speaks one format: its codec's descriptor.
FileFormat = SegmentedFormat

#: The formats :func:`open_file` speaks, by ``format=`` name: those of
#: :data:`streamcrypt.codecs.FORMATS` with ``opens_files``. Binary age only: armored
#: age cannot be read by random access.
FORMATS: dict[str, FileFormat] = {name: f for name, f in CODEC_FORMATS.items() if f.opens_files}


def _segmented_first(transform: Transform) -> tuple[SegmentedTransform, tuple[Transform, ...]]:
    """A format's transform as its segmented first stage and the plain stages after it
    (the AWS format's signer, which hashes the sealed bytes and appends the footer)."""
    stages = transform.stages if isinstance(transform, Chain) else (transform,)
    first = stages[0]
    assert isinstance(first, SegmentedTransform), "files need a segmented first stage"
    return first, stages[1:]


def _encryptor(
    fmt: FileFormat, opts: FileOptions
) -> tuple[SegmentedTransform, tuple[Transform, ...]]:
    return _segmented_first(fmt.encryptor(opts))


def _decryptor(fmt: FileFormat, opts: FileOptions) -> tuple[Transform, SegmentedTransform]:
    """The whole decryptor and its segmented first stage (which reads the header)."""
    dec = fmt.decryptor(opts)
    return dec, _segmented_first(dec)[0]


def _header_size(fmt: FileFormat, head: bytes) -> int | None:
    assert fmt.header_size is not None, f"{fmt.name} files need header_size"
    return fmt.header_size(head)


def _layout(
    fmt: FileFormat, opts: FileOptions, head: bytes, size: int, read_at: ReadAt
) -> SegmentLayout:
    """The layout on a worker thread. A read starting in the header gets the header
    bytes already read (and no more: most layouts read nothing else); one past it goes to
    ``read_at`` (the AWS format's layout reads the message's end, and for signed suites
    all of it)."""
    assert fmt.layout is not None, f"{fmt.name} files need a layout"

    def cached(offset: int, length: int) -> bytes:
        if offset < len(head):
            return head[offset : offset + length]
        return read_at(offset, length)

    return fmt.layout(opts, cached, size)


def _format(name: str) -> FileFormat:
    fmt = FORMATS.get(name)
    if fmt is None:
        raise UnsupportedFormatError(
            f"unknown file format {name!r}; streamcrypt.open speaks {', '.join(sorted(FORMATS))}"
        )
    return fmt


def _check_mode(mode: str) -> Literal["rb", "wb"]:
    if mode in _MODES:
        return "rb" if mode == "rb" else "wb"
    raise InvalidParameterError(
        f"mode {mode!r} is not supported: encrypted files are binary and read or written "
        "whole; text modes (and append/update modes) are out of scope. Use 'rb' or 'wb'"
    )


# ---------------------------------------------------------------------------------------
# Worker-thread helpers (pure functions of their arguments)
# ---------------------------------------------------------------------------------------


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


def _write_all(fd: int, parts: list[Buffer]) -> None:
    """Write ``parts`` in order (one ``writev`` each time the kernel takes them all)."""
    views = [memoryview(part) for part in parts if len(part)]
    while views:
        done = os.writev(fd, views)
        while views and done >= len(views[0]):
            done -= len(views.pop(0))
        if done:
            views[0] = views[0][done:]


def _open_for_reading(path: str) -> tuple[int, int]:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return fd, os.fstat(fd).st_size
    except BaseException:
        os.close(fd)
        raise


def remove_stale_temporaries(
    directory: str | os.PathLike[str], *, older_than: float = 3600.0
) -> list[Path]:
    """Delete temporaries left in ``directory`` by writers that crashed; return their paths.

    Only names of the form ``.<name>.streamcrypt-<16 hex>.tmp`` last modified more than
    ``older_than`` seconds ago are removed (a writer still running keeps touching its
    temporary, so keep the default unless no writer can be running). Synchronous: call it
    at start-up, or through ``anyio.to_thread.run_sync`` from async code.
    """
    removed: list[Path] = []
    now = time.time()
    with os.scandir(directory) as entries:
        for entry in entries:
            if not _TEMP_RE.match(entry.name) or not entry.is_file(follow_symlinks=False):
                continue
            if now - entry.stat(follow_symlinks=False).st_mtime < older_than:
                continue
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                continue
            removed.append(Path(entry.path))
    return removed


# ---------------------------------------------------------------------------------------
# Sources (reading) and sinks (writing)
# ---------------------------------------------------------------------------------------


class _Threads:
    """Runs blocking calls on worker threads and remembers them until they finished."""

    def __init__(self, policy: OffloadPolicy | None) -> None:
        self._policy = policy or DEFAULT_POLICY
        self._running: set[Future[Any]] = set()

    def start(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Start ``fn(*args)`` on a worker; remembered until it finished."""
        future = self._policy.submit(fn, *args)
        self._running.add(future)
        future.add_done_callback(self._running.discard)
        return future

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await wait_future(self.start(fn, *args))

    async def settle(self) -> None:
        """Wait until no call started here is still running (before closing its fd)."""
        while self._running:
            for future in list(self._running):  # done callbacks discard from other threads
                try:
                    await wait_future(future)
                except Exception:
                    pass
                self._running.discard(future)


class _RandomAccess(Protocol):
    size: int

    async def read_at(self, offset: int, length: int) -> bytes: ...

    def blocking_reader(self) -> ReadAt:
        """``read_at`` for a worker thread (blocks until the bytes are read)."""
        ...

    async def aclose(self) -> None: ...


class _FdSource:
    """A file descriptor read with ``pread`` on worker threads."""

    def __init__(self, fd: int, size: int, threads: _Threads) -> None:
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


class _Sink(Protocol):
    async def write(self, parts: list[Buffer]) -> None: ...

    async def commit(self) -> None: ...

    async def abort(self) -> None: ...


class _AtomicFileSink:
    """Writes a temporary beside ``dest``; commit renames it into place.

    Writes go *behind*: ``write`` starts writing its buffer on a worker and returns, after
    waiting for the write before it, so the next batch is sealed while this one is written.
    """

    def __init__(self, dest: str, fd: int, tmp: str, threads: _Threads) -> None:
        self._dest = dest
        self._fd: int | None = fd
        self.tmp = tmp
        self._threads = threads
        self._writing: Future[None] | None = None

    async def _written(self) -> None:
        writing, self._writing = self._writing, None
        if writing is not None:
            await wait_future(writing)

    async def write(self, parts: list[Buffer]) -> None:
        assert self._fd is not None
        await self._written()
        self._writing = self._threads.start(_write_all, self._fd, parts)

    async def commit(self) -> None:
        await self._written()
        fd, self._fd = self._fd, None
        assert fd is not None
        try:
            await self._threads.run(commit_temporary, fd, self.tmp, self._dest)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._threads.settle()
                await self._threads.run(discard_temporary, None, self.tmp)
            raise

    async def abort(self) -> None:
        fd, self._fd = self._fd, None
        self._writing = None
        await self._threads.settle()
        await self._threads.run(discard_temporary, fd, self.tmp)


class _StreamSink:
    """A wrapped async object with ``write`` (an anyio file) or ``send`` (a byte stream)."""

    def __init__(self, obj: Any, close: bool) -> None:
        self._obj = obj
        self._close = close

    async def write(self, parts: list[Buffer]) -> None:
        obj = self._obj
        for part in parts:
            data = part if isinstance(part, bytes) else bytes(part)
            if isinstance(obj, ByteSendStream):
                await obj.send(data)
            else:
                await obj.write(data)

    async def commit(self) -> None:
        flush = getattr(self._obj, "flush", None)
        if flush is not None:
            await flush()
        if self._close:
            await self._obj.aclose()

    async def abort(self) -> None:
        if self._close:
            await self._obj.aclose()


# ---------------------------------------------------------------------------------------
# Writer and readers
# ---------------------------------------------------------------------------------------


def _through(stages: tuple[Transform, ...], parts: list[Buffer]) -> list[Buffer]:
    """``parts`` pushed through ``stages`` in order (a pure pass on a worker thread)."""
    out: list[Buffer] = []
    for part in parts:
        for stage in stages:
            part = stage.update(part)
        out.append(part)
    return out


def _finalize(stages: tuple[Transform, ...]) -> bytes:
    """Finalize ``stages`` in order, each one's last output passed through the rest."""
    out = b""
    for stage in stages:
        out = (bytes(stage.update(out)) if out else b"") + stage.finalize()
    return out


class _Writer:
    """Seals through the engine's scheduler and writes each sealed batch, in order.

    Settling the header (an encryptor's password KDF) runs on a worker thread. ``tail``:
    plain stages after the segmented one (the AWS format's signer); each sealed batch
    goes through them in order, on a worker thread when a policy allows offload.
    """

    def __init__(
        self,
        enc: SegmentedTransform,
        tail: tuple[Transform, ...],
        sink: _Sink,
        policy: OffloadPolicy | None,
        threads: _Threads,
    ) -> None:
        self._enc = enc
        self._tail = tail
        self._sink = sink
        self._policy = policy
        self._threads = threads
        self._batches = OrderedBatches(policy, site="file-write", fail=enc.fail)
        self._piece = policy.batch_size if policy is not None else _INLINE_PIECE
        self.position = 0

    async def _emit(self, parts: list[Buffer]) -> None:
        if self._tail:
            if self._policy is None:
                parts = _through(self._tail, parts)
            else:
                parts = await self._threads.run(_through, self._tail, parts)
        await self._sink.write(parts)

    async def _jobs(self, fn: Callable[..., list[SegmentJob]], *args: Any) -> list[SegmentJob]:
        jobs = await self._threads.run(fn, *args) if self._enc.header_pending else fn(*args)
        header = self._enc.take_header()
        if header:
            await self._emit([header])
        return jobs

    async def write(self, view: memoryview) -> int:
        for off in range(0, len(view), self._piece):
            piece = view[off : off + self._piece]
            if not piece.readonly:  # jobs keep views of their input: never of a caller's buffer
                piece = memoryview(bytes(piece))
            jobs = await self._jobs(self._enc.feed, piece)
            await self._batches.put(jobs, self._emit)
        self.position += len(view)
        return len(view)

    async def close(self) -> None:
        jobs = await self._jobs(self._enc.finish)
        await self._batches.put(jobs, self._emit)
        await self._batches.flush(self._emit)
        if self._tail:
            footer = (
                _finalize(self._tail)
                if self._policy is None
                else await self._threads.run(_finalize, self._tail)
            )
            await self._sink.write([footer])
        await self._sink.commit()

    async def abort(self) -> None:
        await self._batches.settle()
        await self._sink.abort()


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
        threads: _Threads,
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


# ---------------------------------------------------------------------------------------
# The public file object
# ---------------------------------------------------------------------------------------


class EncryptedFile:
    """An open encrypted file (mode ``"rb"`` or ``"wb"``). Use :func:`open_file` or :meth:`wrap`.

    Writing: :meth:`write`, :meth:`tell`, :meth:`aclose` (commits). Reading: :meth:`read`,
    :meth:`readinto`, ``async for chunk in f``, :meth:`seek`, :meth:`tell`, :attr:`size`.
    Leaving ``async with`` by an exception discards a write (the destination is untouched).
    Reads raise :class:`AuthenticationError` for a segment that does not verify,
    :class:`TruncatedStreamError` / :class:`FormatError` for a cut file; methods of the
    other mode raise :class:`InvalidParameterError`; after close, anyio's
    ``ClosedResourceError``; two tasks at once, anyio's ``BusyResourceError``.
    """

    def __init__(
        self, mode: Literal["rb", "wb"], impl: _Writer | _RandomReader | _SequentialReader
    ) -> None:
        self.mode = mode
        self._impl = impl
        self._closed = False
        self._guard = anyio.ResourceGuard("using")

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def wrap(
        cls,
        stream: Any,
        mode: Literal["rb", "wb"],
        *,
        key: _container.KeyLike | None = None,
        suite: str | None = None,
        segment_size: int | None = None,
        aad: Buffer = b"",
        policy: OffloadPolicy | None = DEFAULT_POLICY,
        format: str = "native",
        recipients: Iterable[_age.RecipientLike] = (),
        identities: Iterable[_age.IdentityLike] = (),
        passphrase: str | Buffer | None = None,
        password: str | None = None,
        password2: str = "",
        encryption_context: Mapping[str, str] | None = None,
        close_wrapped: bool = True,
    ) -> FileOpener:
        """Encrypt into / decrypt from an already open async object.

        ``"rb"``: an object with async ``seek``/``tell``/``read`` that can seek (an
        ``anyio.open_file`` result) gets random access, its container starting at its
        current position; anything else (an anyio ``ByteReceiveStream``, an object with an
        async ``read``, an async iterable of bytes) is read sequentially (``size`` is then
        ``None`` and :meth:`seek` raises). ``"wb"``: an object with async ``write`` or an
        anyio ``ByteSendStream``; no atomicity (the caller owns the object), and a write
        abandoned by an exception leaves an unterminated stream that readers reject.
        The wrapped object is closed with the file unless ``close_wrapped=False``.
        """
        checked, fmt, opts = _prepared(
            mode,
            format,
            key,
            suite,
            segment_size,
            aad,
            recipients,
            identities,
            passphrase,
            password,
            password2,
            encryption_context,
        )
        return FileOpener(_open_wrapped(stream, checked, fmt, opts, policy, close_wrapped))

    # -- helpers --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise anyio.ClosedResourceError("the encrypted file is closed")

    def _writer(self) -> _Writer:
        self._check_open()
        if not isinstance(self._impl, _Writer):
            raise InvalidParameterError("the file was opened for reading ('rb'); write needs 'wb'")
        return self._impl

    def _reader(self) -> _RandomReader | _SequentialReader:
        self._check_open()
        if isinstance(self._impl, _Writer):
            raise InvalidParameterError("the file was opened for writing ('wb'); read needs 'rb'")
        return self._impl

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def seekable(self) -> bool:
        """True for random access (a path, or a wrapped object that can seek)."""
        return isinstance(self._impl, _RandomReader)

    @property
    def size(self) -> int | None:
        """Plaintext size of a file being read by random access; ``None`` otherwise."""
        return self._impl.size if isinstance(self._impl, _RandomReader) else None

    # -- writing --------------------------------------------------------------------------

    async def write(self, data: Buffer) -> int:
        """Encrypt and write ``data``; returns ``len(data)``. A failure breaks the file."""
        writer = self._writer()
        view = memoryview(data).cast("B")  # a TypeError here does not break the file
        with self._guard:
            try:
                return await writer.write(view)
            except BaseException:
                await self._fail()
                raise

    # -- reading --------------------------------------------------------------------------

    async def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes of verified plaintext (all the rest when ``n < 0``); ``b""`` at EOF."""
        reader = self._reader()
        with self._guard:
            return await reader.read(n)

    async def readinto(self, buffer: bytearray | memoryview) -> int:
        """Read up to ``len(buffer)`` bytes into ``buffer``; returns the count."""
        view = memoryview(buffer).cast("B")
        data = await self.read(len(view))
        view[: len(data)] = data
        return len(data)

    async def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move the read position (random access only); returns the new position."""
        reader = self._reader()
        if not isinstance(reader, _RandomReader):
            raise InvalidParameterError("the wrapped stream cannot seek; it reads front to back")
        with self._guard:
            return await reader.seek(offset, whence)

    async def tell(self) -> int:
        """The plaintext position (bytes written so far when writing)."""
        self._check_open()
        return self._impl.position

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        reader = self._reader()
        while True:
            chunk = await self.read(reader.piece)
            if not chunk:
                return
            yield chunk

    # -- closing --------------------------------------------------------------------------

    async def _fail(self) -> None:
        """Abandon a write: remove the temporary (shielded from cancellation)."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            impl = self._impl
            if isinstance(impl, _Writer):
                await impl.abort()
            else:
                await impl.aclose()

    async def aclose(self) -> None:
        """Finish: a writer seals the final segment and commits (atomic rename for a path);
        a reader releases the file. Closing twice does nothing."""
        if self._closed:
            return
        impl = self._impl
        if not isinstance(impl, _Writer):
            self._closed = True
            with anyio.CancelScope(shield=True):
                await impl.aclose()
            return
        with self._guard:
            try:
                with anyio.CancelScope(shield=True):
                    await impl.close()
            except BaseException:
                await self._fail()
                raise
            self._closed = True

    async def __aenter__(self) -> EncryptedFile:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            await self._fail()
        else:
            await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<EncryptedFile mode={self.mode!r} {state}>"


class FileOpener:
    """What :func:`open_file` returns: ``async with`` it, or ``await`` it for the file."""

    def __init__(self, opening: Callable[[], Any]) -> None:
        self._opening = opening
        self._file: EncryptedFile | None = None

    def __await__(self) -> Generator[Any, None, EncryptedFile]:
        return self._opening().__await__()  # type: ignore[no-any-return]

    async def __aenter__(self) -> EncryptedFile:
        self._file = await self._opening()
        return self._file

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._file is not None
        await self._file.__aexit__(exc_type, exc, tb)


def _prepared(
    mode: str,
    format: str,
    key: _container.KeyLike | None,
    suite: str | None,
    segment_size: int | None,
    aad: Buffer,
    recipients: Iterable[_age.RecipientLike],
    identities: Iterable[_age.IdentityLike],
    passphrase: str | Buffer | None,
    password: str | None,
    password2: str,
    encryption_context: Mapping[str, str] | None,
) -> tuple[Literal["rb", "wb"], FileFormat, FileOptions]:
    """The checked mode, the format and its options, checked against the format for that
    mode: what ``open_file`` and ``EncryptedFile.wrap`` do at the call."""
    checked = _check_mode(mode)
    fmt = _format(format)
    opts = FileOptions(
        key,
        suite,
        segment_size,
        aad,
        (recipients,) if isinstance(recipients, str | os.PathLike) else tuple(recipients),
        (identities,) if isinstance(identities, str | os.PathLike) else tuple(identities),
        passphrase,
        password,
        password2,
        None if encryption_context is None else dict(encryption_context),
    )
    fmt.check(opts, checked)
    return checked, fmt, opts


async def _load_layout(
    source: _RandomAccess, fmt: FileFormat, opts: FileOptions, threads: _Threads
) -> SegmentLayout:
    size = source.size
    want = min(size, 4096)
    while True:
        head = await source.read_at(0, want)
        need = _header_size(fmt, head)
        if need is not None and need <= len(head):
            break
        if len(head) >= size:
            raise TruncatedStreamError("the file ends inside its header: it is truncated")
        if want >= fmt.max_header_size:
            raise FormatError("the file's header is longer than any valid header")
        want = min(size, max(need or 0, 2 * want))
    reader = source.blocking_reader()
    layout = await threads.run(_layout, fmt, opts, head[:need], size, reader)
    _ = layout.plaintext_size  # raises FormatError / TruncatedStreamError for a cut file
    # The length arithmetic alone cannot tell a file cut at a segment boundary (plus a
    # forged 16-byte tail) from a whole one: open the final segment once, up front.
    job, offset, length = layout.final_segment()
    job.data = await source.read_at(offset, length)
    if len(job.data) != length:
        raise TruncatedStreamError("the file is shorter than its header and length say")
    await threads.run(job.run)
    return layout


async def _open_reader_on(
    source: _RandomAccess,
    fmt: FileFormat,
    opts: FileOptions,
    policy: OffloadPolicy | None,
    threads: _Threads,
) -> EncryptedFile:
    try:
        layout = await _load_layout(source, fmt, opts, threads)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await source.aclose()
        raise
    return EncryptedFile("rb", _RandomReader(source, layout, policy, threads))


def open_file(
    path: str | os.PathLike[str],
    mode: Literal["rb", "wb"],
    *,
    key: _container.KeyLike | None = None,
    suite: str | None = None,
    segment_size: int | None = None,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    format: str = "native",
    recipients: Iterable[_age.RecipientLike] = (),
    identities: Iterable[_age.IdentityLike] = (),
    passphrase: str | Buffer | None = None,
    password: str | None = None,
    password2: str = "",
    encryption_context: Mapping[str, str] | None = None,
) -> FileOpener:
    """Open an encrypted file: ``async with open_file(path, "wb", key=k) as f: ...``.

    ``mode`` is ``"rb"`` or ``"wb"`` (text modes are out of scope). ``format="native"``
    (the streamcrypt container: ``key=``, and for writing ``suite=`` (default
    ``"aes-256-gcm"``), ``segment_size=`` (default 65536), ``aad=``), ``"age"``
    (binary age v1: ``recipients=`` or ``passphrase=`` to write, ``identities=`` or
    ``passphrase=`` to read), ``"rclone"`` (rclone crypt file contents: ``password=``
    and the optional ``password2=``, rclone's salt, both in clear; reveal obscured
    rclone.conf values with :func:`streamcrypt.codecs.rclone.reveal`) or ``"aws"`` (the
    AWS Encryption SDK message format, framed: ``key=`` a keyring or a list of them,
    ``encryption_context=``, and for writing ``suite=`` (``"0x0578"``, signed, the
    default; or ``"0x0478"``) and ``segment_size=`` (the frame length, default 4096)).
    rclone files carry no end marker: a file cut at a 64 KiB block boundary reads as a
    shorter file (see :mod:`streamcrypt.codecs.rclone`). A signed AWS file is read whole
    once when opened, to verify its signature before any byte is released (see
    docs/FORMATS.md). Writes are atomic (see the module docstring; a symlink at the
    destination is replaced, not followed). ``policy`` governs the crypto offload;
    ``None`` keeps the crypto on the event loop (file I/O always runs on worker threads).

    Raises at the call: :class:`InvalidParameterError` (mode, arguments),
    :class:`UnsupportedFormatError` (format). When entered: ``OSError`` from the file
    system, :class:`AuthenticationError` (wrong key, tampered header),
    :class:`UnknownKeyError`, :class:`FormatError`, :class:`TruncatedStreamError`,
    :class:`InvalidSignatureError` (a signed AWS file altered).
    """
    checked, fmt, opts = _prepared(
        mode,
        format,
        key,
        suite,
        segment_size,
        aad,
        recipients,
        identities,
        passphrase,
        password,
        password2,
        encryption_context,
    )
    dest = os.fspath(path)
    threads = _Threads(policy)

    async def opening() -> EncryptedFile:
        if checked == "wb":
            enc, tail = await threads.run(_encryptor, fmt, opts)
            with anyio.CancelScope(shield=True):  # never leave a temporary behind
                fd, tmp = await threads.run(create_temporary, dest)
            sink = _AtomicFileSink(dest, fd, tmp, threads)
            return EncryptedFile("wb", _Writer(enc, tail, sink, policy, threads))
        with anyio.CancelScope(shield=True):  # never leak the descriptor
            fd, size = await threads.run(_open_for_reading, dest)
        return await _open_reader_on(_FdSource(fd, size, threads), fmt, opts, policy, threads)

    return FileOpener(opening)


def _open_wrapped(
    stream: Any,
    mode: Literal["rb", "wb"],
    fmt: FileFormat,
    opts: FileOptions,
    policy: OffloadPolicy | None,
    close: bool,
) -> Callable[[], Any]:
    threads = _Threads(policy)

    async def opening() -> EncryptedFile:
        if mode == "wb":
            if not isinstance(stream, ByteSendStream) and not hasattr(stream, "write"):
                raise InvalidParameterError(
                    "wrap(..., 'wb') needs an object with async write() or an anyio ByteSendStream"
                )
            enc, tail = await threads.run(_encryptor, fmt, opts)
            sink = _StreamSink(stream, close)
            return EncryptedFile("wb", _Writer(enc, tail, sink, policy, threads))
        if hasattr(stream, "seek") and hasattr(stream, "tell") and hasattr(stream, "read"):
            try:
                base = await stream.tell()
                end = await stream.seek(0, io.SEEK_END)
                if end is None:
                    end = await stream.tell()
            except (OSError, ValueError):  # io.UnsupportedOperation is both
                pass
            else:
                source = _SeekableSource(stream, base, end - base, close)
                return await _open_reader_on(source, fmt, opts, policy, threads)
        if not (
            isinstance(stream, ByteReceiveStream)
            or hasattr(stream, "read")
            or isinstance(stream, AsyncIterable)
        ):
            raise InvalidParameterError(
                "wrap(..., 'rb') needs an async file, an anyio ByteReceiveStream, "
                "an object with async read() or an async iterable of bytes"
            )
        return await _open_sequential(stream, fmt, opts, policy, threads, close)

    return opening


async def _open_sequential(
    stream: Any,
    fmt: FileFormat,
    opts: FileOptions,
    policy: OffloadPolicy | None,
    threads: _Threads,
    close: bool,
) -> EncryptedFile:
    async def close_stream() -> None:
        if close:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    chunks = _StreamChunks(stream, b"")
    try:
        head = bytearray()
        while True:
            need = _header_size(fmt, bytes(head))
            if need is not None and need <= len(head):
                break
            if need is None and len(head) > fmt.max_header_size:
                raise FormatError("the stream's header is longer than any valid header")
            chunk = await chunks.receive()
            if not chunk:
                raise TruncatedStreamError("the stream ends inside its header: it is truncated")
            head += chunk
        dec, first = await threads.run(_decryptor, fmt, opts)
        # Authenticate the header now (it may run scrypt): exactly the header bytes, so
        # that no segment job is created outside the pipeline.
        await threads.run(first.feed, bytes(head[:need]))
    except BaseException:
        with anyio.CancelScope(shield=True):
            await close_stream()
        raise
    chunks.push_back(bytes(head[need:]))
    out = pipeline(dec, policy=policy).stream(chunks)
    piece = policy.batch_size if policy is not None else _INLINE_PIECE
    return EncryptedFile("rb", _SequentialReader(out, close_stream, piece))
