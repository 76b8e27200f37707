"""The async pipeline: drives sans-I/O transforms from an async source to a sink.

Theory of operation
-------------------
A pipeline is a list of stages, each a sans-I/O transform. Bytes from the source are
cut into pieces of at most ``policy.batch_size`` and pushed through the stages in order;
each stage pushes its output to the next, the last one to the sink.

* A *segmented* stage (anything with ``feed``/``finish`` returning
  :class:`~streamcrypt.codecs._segmented.SegmentJob` s: the container, age, Tink, C2SP,
  RFC 8188) collects jobs into batches of ``batch_size`` bytes and submits each batch to
  a worker thread without waiting, up to ``max_in_flight`` batches; outputs are emitted
  strictly in order, each into a reused output buffer. Counters and finality are decided
  on the loop thread by ``feed`` before dispatch, so a cancelled wait cannot
  desynchronise the stream (the stage is broken instead). Batches under
  ``inline_limit`` run on the loop thread.
* Any other transform runs its ``update`` inline, or on a worker thread for a piece of
  at least ``inline_limit`` bytes (one at a time: such transforms are stateful).

Memory is bounded by ``max_in_flight`` batches of input and output plus one segment of
each stage: never by the stream length. A pipeline emits in batches; for interactive
traffic use records (:class:`~streamcrypt.transports.EncryptedStream`) or ``policy=None``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
)
from concurrent.futures import Future
from contextlib import aclosing
from typing import Any, TypeAlias

import anyio
import anyio.lowlevel
from anyio.abc import ByteSendStream

from .._state import Buffer, Chain, Transform
from ..codecs._segmented import SegmentedTransform, SegmentJob
from ..errors import AlreadyFinalizedError, InvalidParameterError
from ._offload import DEFAULT_POLICY, OffloadPolicy, wait_future

__all__ = ["Feeder", "Pipeline", "Sink", "Source", "pipeline"]

#: What a pipeline reads: an async iterable of byte chunks (anyio byte receive streams
#: are such), or a bytes-like object taken whole.
Source: TypeAlias = AsyncIterable[Buffer] | Buffer
#: Where a pipeline writes: an anyio byte send stream or an async callable that consumes
#: a memoryview before it returns (the view's buffer is reused afterwards).
Sink: TypeAlias = ByteSendStream | Callable[[memoryview], Awaitable[Any]]

_Push = Callable[[memoryview], Awaitable[None]]


def _run_batch(jobs: list[SegmentJob], out: bytearray) -> tuple[int, BaseException | None]:
    """Worker body: run jobs back to back into ``out``; stop at the first failure.

    Returns the bytes written and the failure, so that everything before a failed
    segment (all of it verified) is still released, in order, before the error.
    """
    view = memoryview(out)
    pos = 0
    for job in jobs:
        done, error = job.run_partial(view[pos : pos + job.out_size])
        pos += len(done)
        if error is not None:
            return pos, error
    return pos, None


class _Batch:
    __slots__ = ("future", "jobs", "out", "result")

    def __init__(self, jobs: list[SegmentJob], out: bytearray) -> None:
        self.jobs = jobs
        self.out = out
        self.future: Future[tuple[int, BaseException | None]] | None = None
        self.result: tuple[int, BaseException | None] | None = None


class _SegmentedStage:
    """Runs a segmented transform's jobs in ordered, bounded, parallel batches."""

    def __init__(
        self, stage: SegmentedTransform, policy: OffloadPolicy | None, push: _Push
    ) -> None:
        self._stage = stage
        self._policy = policy
        self._push = push
        self._jobs: list[SegmentJob] = []
        self._job_bytes = 0
        self._in_flight: deque[_Batch] = deque()
        self._free: list[bytearray] = []

    async def _emit_header(self) -> None:
        header = self._stage.take_header()
        if header:
            await self._push(memoryview(header))

    async def push(self, data: memoryview) -> None:
        await self._emit_header()
        if not data.readonly:
            # Jobs keep views of their input until they ran; an upstream stage's output is
            # a view of a buffer it recycles, so it must be copied before it is kept.
            data = memoryview(bytes(data))
        if self._stage.header_pending and self._policy is not None:
            # Reading a header may run scrypt or Argon2id at a cost the input chooses:
            # never on the event loop.
            jobs = await wait_future(self._policy.submit(self._stage.feed, data))
        else:
            jobs = self._stage.feed(data)
        for job in jobs:
            self._jobs.append(job)
            self._job_bytes += job.out_size
        limit = self._policy.batch_size if self._policy is not None else 0
        # Launch when one more segment would overflow the batch: a batch-sized piece of
        # ciphertext holds a little less than a batch of plaintext, and waiting for a
        # second piece would double the batch and halve the parallelism.
        segment = self._jobs[-1].codec.full_ciphertext(1) if self._jobs else 0
        if self._jobs and self._job_bytes + segment > limit:
            await self._launch()
        else:
            await self._emit_ready()

    async def flush(self) -> None:
        """Seal or open every complete segment now and emit everything in flight."""
        if self._jobs:
            await self._launch()
        while self._in_flight:
            await self._emit_oldest()

    async def _emit_ready(self) -> None:
        """Emit finished batches at the head of the queue (in order) without waiting."""
        while self._in_flight and (
            self._in_flight[0].future is None or self._in_flight[0].future.done()
        ):
            await self._emit_oldest()

    async def close(self) -> None:
        await self._emit_header()
        try:
            final_jobs = self._stage.finish()
        except Exception:
            # e.g. TruncatedStreamError: release everything verified before it first.
            if self._jobs:
                await self._launch()
            while self._in_flight:
                await self._emit_oldest()
            raise
        for job in final_jobs:
            self._jobs.append(job)
            self._job_bytes += job.out_size
        if self._jobs:
            await self._launch()
        while self._in_flight:
            await self._emit_oldest()

    def _buffer(self, size: int) -> bytearray:
        """A reused output buffer: a fresh one costs page faults worth more than the cipher."""
        for i, buf in enumerate(self._free):
            if len(buf) >= size:
                return self._free.pop(i)
        # Batches differ by a segment or so: one size with headroom lets them all share
        # (a batch launches before one more segment would overflow it).
        batch = self._policy.batch_size if self._policy is not None else 0
        floor = batch + batch // 16
        grain = 1 << 16
        if len(self._free) > 2:
            self._free.pop(0)
        return bytearray(-(-max(size, floor) // grain) * grain)

    async def _launch(self) -> None:
        batch = _Batch(self._jobs, self._buffer(self._job_bytes))
        size = self._job_bytes
        self._jobs, self._job_bytes = [], 0
        policy = self._policy
        if policy is None or size < policy.inline_limit:
            batch.result = _run_batch(batch.jobs, batch.out)
        else:
            batch.future = policy.submit(_run_batch, batch.jobs, batch.out)
        self._in_flight.append(batch)
        window = policy.max_in_flight if policy is not None else 1
        while len(self._in_flight) >= window:
            await self._emit_oldest()
        await self._emit_ready()

    async def _emit_oldest(self) -> None:
        batch = self._in_flight[0]
        try:
            if batch.result is None:
                assert batch.future is not None
                batch.result = await wait_future(batch.future)
        except BaseException as exc:
            # Cancelled (or the executor failed) with work possibly still running: the
            # stream can no longer be trusted to continue.
            self._in_flight.clear()
            raise self._stage.fail(exc) from None
        self._in_flight.popleft()
        # One checkpoint per batch (~1 MiB inline, a batch offloaded): the event loop
        # gets a turn even when every future was already done.
        await anyio.lowlevel.checkpoint()
        written, error = batch.result
        if written:
            await self._push(memoryview(batch.out)[:written])
        self._free.append(batch.out)
        if error is not None:
            self._in_flight.clear()
            raise self._stage.fail(error)


class _PlainStage:
    """Runs an ordinary transform, offloading large pieces one at a time."""

    def __init__(self, stage: Transform, policy: OffloadPolicy | None, push: _Push) -> None:
        self._stage = stage
        self._policy = policy
        self._push = push

    async def push(self, data: memoryview) -> None:
        policy = self._policy
        if policy is not None and len(data) >= policy.inline_limit:
            out = await wait_future(policy.submit(self._stage.update, data))
        else:
            out = self._stage.update(data)
        if out:
            await self._push(memoryview(out))

    async def flush(self) -> None:
        """Nothing is held here: every update's output was already pushed."""

    async def close(self) -> None:
        out = self._stage.finalize()
        if out:
            await self._push(memoryview(out))


def _as_push(sink: Sink) -> _Push:
    if isinstance(sink, ByteSendStream):
        send = sink.send

        async def to_stream(view: memoryview) -> None:
            await send(bytes(view))

        return to_stream

    async def to_callable(view: memoryview) -> None:
        await sink(view)

    return to_callable


async def _chunks(source: Source, size: int) -> AsyncGenerator[memoryview, None]:
    """Pieces of at most ``size`` bytes, without copying."""
    if isinstance(source, bytes | bytearray | memoryview):
        view = memoryview(source).cast("B")
        for off in range(0, len(view), size):
            yield view[off : off + size]
        return
    if not isinstance(source, AsyncIterable):
        raise InvalidParameterError(
            "a pipeline source must be an async iterable of bytes or a bytes-like object, "
            f"not {type(source).__name__}"
        )
    async for chunk in source:
        view = memoryview(chunk).cast("B")
        if not view.readonly:  # jobs keep views of their input: never of a reusable buffer
            view = memoryview(bytes(view))
        if len(view) <= size:
            if len(view):
                yield view
            continue
        for off in range(0, len(view), size):
            yield view[off : off + size]


class Pipeline:
    """Stages run from an async source to a sink (or as an async iterator of bytes).

    Build with :func:`pipeline` or ``a | b``. A pipeline runs once: its transforms keep
    state. Errors of the stages (``AuthenticationError``, ``TruncatedStreamError``...)
    come out unchanged, after every byte that verified before them.
    """

    def __init__(self, *stages: Transform, policy: OffloadPolicy | None = DEFAULT_POLICY) -> None:
        if not stages:
            raise InvalidParameterError("a pipeline needs at least one stage")
        self.stages: tuple[Transform, ...] = Chain(*stages).stages
        self.policy = policy

    def __or__(self, other: Transform) -> Pipeline:
        return Pipeline(*self.stages, other, policy=self.policy)

    def _build(self, push: _Push) -> list[_SegmentedStage | _PlainStage]:
        runners: list[_SegmentedStage | _PlainStage] = []
        for stage in reversed(self.stages):
            runner: _SegmentedStage | _PlainStage
            if isinstance(stage, SegmentedTransform):
                runner = _SegmentedStage(stage, self.policy, push)
            else:
                runner = _PlainStage(stage, self.policy, push)
            runners.append(runner)
            push = runner.push
        runners.reverse()
        return runners

    async def _drive(self, source: Source, push: _Push) -> None:
        runners = self._build(push)
        first = runners[0]
        async with aclosing(_chunks(source, self._piece_size)) as pieces:
            async for piece in pieces:
                await first.push(piece)
        for runner in runners:
            await runner.close()

    @property
    def _piece_size(self) -> int:
        return self.policy.batch_size if self.policy is not None else 1 << 20

    def feeder(self, sink: Sink) -> Feeder:
        """Push-mode driving: ``await f.send(data)`` as data arrives, ``await f.aclose()``
        at the end (for callers that are handed data, like ASGI ``send`` hooks)."""
        return Feeder(self._build(_as_push(sink)), self._piece_size)

    async def run(self, source: Source, sink: Sink) -> None:
        """Drive everything from ``source`` into ``sink``."""
        await self._drive(source, _as_push(sink))

    async def stream(self, source: Source) -> AsyncIterator[bytes]:
        """The output as an async iterator of ``bytes`` chunks (at most a batch each)."""
        ready: deque[bytes] = deque()

        async def collect(view: memoryview) -> None:
            ready.append(bytes(view))

        runners = self._build(collect)
        first = runners[0]
        error: Exception | None = None
        async with aclosing(_chunks(source, self._piece_size)) as pieces:
            async for piece in pieces:
                try:
                    await first.push(piece)
                except Exception as exc:  # release what verified before the failure
                    error = exc
                while ready:
                    yield ready.popleft()
                if error is not None:
                    raise error
        for runner in runners:
            try:
                await runner.close()
            except Exception as exc:
                error = exc
            while ready:
                yield ready.popleft()
            if error is not None:
                raise error

    async def collect(self, source: Source) -> bytes:
        """All output as one ``bytes`` (only for data that fits in memory)."""
        parts: list[bytes] = []

        async def add(view: memoryview) -> None:
            parts.append(bytes(view))

        await self._drive(source, add)
        return b"".join(parts)

    def __repr__(self) -> str:
        return f"Pipeline({' | '.join(type(s).__name__ for s in self.stages)})"


class Feeder:
    """Drives a pipeline from pushed data; every output goes to the sink before
    ``send`` returns, except what a segmented stage holds back for its next batch."""

    def __init__(self, runners: list[_SegmentedStage | _PlainStage], piece_size: int) -> None:
        self._runners = runners
        self._piece = piece_size
        self._closed = False

    async def send(self, data: Buffer) -> None:
        """Push ``data`` through the stages (large data in batch-sized pieces)."""
        if self._closed:
            raise AlreadyFinalizedError("this pipeline feeder was already closed")
        view = memoryview(data).cast("B")
        if not view.readonly:
            view = memoryview(bytes(view))
        for off in range(0, len(view), self._piece):
            await self._runners[0].push(view[off : off + self._piece])

    async def flush(self) -> None:
        """Emit every complete segment now, without waiting for a full batch.

        Segmented formats can only emit whole segments: a partial segment stays held until
        more data or :meth:`aclose`.
        """
        if self._closed:
            raise AlreadyFinalizedError("this pipeline feeder was already closed")
        for runner in self._runners:
            await runner.flush()

    async def aclose(self) -> None:
        """Finalize every stage, emitting what is left (raises what finalization raises)."""
        if self._closed:
            return
        self._closed = True
        for runner in self._runners:
            await runner.close()


def pipeline(
    *stages: Transform | Iterable[Transform], policy: OffloadPolicy | None = DEFAULT_POLICY
) -> Pipeline:
    """Compose transforms and taps into one :class:`Pipeline`.

    ``policy`` decides offload (``None``: everything inline on the event loop).
    """
    flat: list[Transform] = []
    for stage in stages:
        if isinstance(stage, Transform) or isinstance(stage, Chain):
            flat.append(stage)
        else:
            flat.extend(stage)
    return Pipeline(*flat, policy=policy)
