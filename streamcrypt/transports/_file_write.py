"""Writing encrypted files: the writer and where its sealed batches go.

:class:`_Writer` seals through the engine's scheduler and hands each sealed batch, in
order, to a sink: a temporary file beside the destination, renamed into place on commit
(:class:`_AtomicFileSink`, written behind on the engine's workers), or a wrapped object
(:class:`_StreamSink`). See :mod:`._files` for the theory of operation.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from anyio.abc import ByteSendStream

from ..abc import Buffer, Transform
from ..codecs import SegmentedTransform, SegmentJob
from ..engine import OffloadPolicy, OrderedBatches, Pending, WorkerCalls, wait_future
from ._atomic import commit_temporary, discard_temporary
from ._file_read import _INLINE_PIECE


def _write_all(fd: int, parts: list[Buffer]) -> None:
    """Write ``parts`` in order (one ``writev`` each time the kernel takes them all)."""
    views = [memoryview(part) for part in parts if len(part)]
    while views:
        done = os.writev(fd, views)
        while views and done >= len(views[0]):
            done -= len(views.pop(0))
        if done:
            views[0] = views[0][done:]


class _Sink(Protocol):
    async def write(self, parts: list[Buffer]) -> None: ...

    async def commit(self) -> None: ...

    async def abort(self) -> None: ...


class _AtomicFileSink:
    """Writes a temporary beside ``dest``; commit renames it into place.

    Writes go *behind*: ``write`` starts writing its buffer on a worker and returns, after
    waiting for the write before it, so the next batch is sealed while this one is written.
    """

    def __init__(self, dest: str, fd: int, tmp: str, threads: WorkerCalls) -> None:
        self._dest = dest
        self._fd: int | None = fd
        self.tmp = tmp
        self._threads = threads
        self._writing: Pending[None] | None = None

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
        await self._threads.run(commit_temporary, fd, self.tmp, self._dest)

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
        threads: WorkerCalls,
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
