"""The async pipeline: drives sans-I/O transforms from an async source to a sink.

Theory of operation
-------------------
Bytes from the source are cut into pieces of at most ``policy.batch_size`` and pushed
through the stages in order. A *segmented* stage (``feed``/``finish`` returning
:class:`~streamcrypt.codecs.SegmentJob` s) hands its jobs to
:class:`~._batches.OrderedBatches`; while its header is pending (a password KDF)
``feed``/``finish`` run on a worker, never on the loop. Any other transform is stateful
and runs one piece at a time, inline or on a worker as its controller measures. A push
below ``inline_limit`` that finds nothing in flight runs at once on the loop thread.
Output kept by the consumer is new ``bytes`` written in place; a consumer done with each
piece gets views of reused buffers. Memory is bounded by ``max_in_flight`` batches plus
one segment per stage, never by the stream length. docs/ENGINE.md has the rest.
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
    Sequence,
)
from contextlib import aclosing
from typing import Any, NoReturn, TypeAlias, TypeVar

import anyio.lowlevel
from anyio.abc import ByteSendStream

from ..abc import Buffer, Chain, Transform, as_bytes
from ..codecs import SegmentedTransform
from ..errors import AlreadyFinalizedError, BrokenTransformError, InvalidParameterError
from ._adaptive import Controller
from ._batches import OUTPUT_PIECE, OrderedBatches
from ._offload import DEFAULT_POLICY, OffloadPolicy

T = TypeVar("T")

#: What a pipeline reads: an async iterable of byte chunks (anyio byte receive streams
#: are such), or a bytes-like object taken whole.
Source: TypeAlias = AsyncIterable[Buffer] | Buffer
#: Where a pipeline writes: an anyio byte send stream or an async callable that consumes
#: a memoryview before it returns (the view's buffer is reused afterwards).
Sink: TypeAlias = ByteSendStream | Callable[[memoryview], Awaitable[Any]]

_Push = Callable[[Buffer], Awaitable[object]]
#: What :meth:`_SegmentedStage.inline` gives for a push that was only held: no job ran
#: (so the loop is owed no turn for it) and nothing is to be handed out. One shared
#: object, so a driver tells it by identity; its list is never added to.
_HELD: tuple[list[Buffer], None] = ([], None)


class _Runner:
    """Drives one stage: :meth:`push`, :meth:`flush` and :meth:`close` pass what they
    produce to the next stage before they return.

    A call that does not complete (a failure, or a cancellation: the stage's work may
    still be running on a worker, or its output was not passed on) breaks the runner
    for good; every later call raises :class:`BrokenTransformError` naming that first
    failure, so a stateful stage is never run twice at once and output is never
    silently short. This is the one guard every stage driver of a pipeline goes through.
    """

    __slots__ = ("_failure",)

    def __init__(self) -> None:
        self._failure: BaseException | None = None

    def _refuse(self) -> NoReturn:
        raise BrokenTransformError(
            f"the pipeline is unusable after an earlier failure: {self._failure!r}"
        ) from self._failure

    async def _guarded(self, step: Callable[..., Awaitable[None]], *args: Any) -> None:
        if self._failure is not None:
            self._refuse()
        try:
            await step(*args)
        except BaseException as exc:
            self._failure = exc
            raise

    async def push(self, data: Buffer) -> None:
        """Run ``data`` through the stage and pass its output on."""
        # :meth:`_guarded` written out: this runs once a chunk, and the indirection (a
        # coroutine and a call with ``*args``) was a measurable part of a 64 KiB chunk.
        if self._failure is not None:
            self._refuse()
        try:
            await self._push(data)
        except BaseException as exc:
            self._failure = exc
            raise

    async def flush(self) -> None:
        """Pass on everything the stage can release now."""
        await self._guarded(self._flush)

    async def close(self) -> None:
        """Finish the stage and pass on the rest."""
        await self._guarded(self._close)

    async def _push(self, data: Buffer) -> None:
        raise NotImplementedError

    async def _flush(self) -> None:
        raise NotImplementedError

    async def _close(self) -> None:
        raise NotImplementedError


class _SegmentedStage(_Runner):
    """Feeds a segmented transform's jobs to the scheduler and emits its output in order."""

    __slots__ = ("_batches", "_policy", "_push_next", "_stage")

    def __init__(
        self,
        stage: SegmentedTransform,
        policy: OffloadPolicy | None,
        push: _Push,
        site: str,
        reuse: bool,
    ) -> None:
        super().__init__()
        self._stage = stage
        self._policy = policy
        self._push_next = push
        self._batches = OrderedBatches(
            policy, site=site, reuse=reuse, fail=stage.fail, piece=OUTPUT_PIECE
        )

    async def _emit(self, parts: list[Buffer]) -> None:
        for part in parts:
            await self._push_next(part)

    @property
    def idle(self) -> bool:
        """Nothing to flush: no job queued or in flight, and neither the stage nor its
        scheduler broken (a broken one's flush raises)."""
        batches = self._batches
        return self._failure is None and not batches.broken and batches.idle

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, on a worker while the header is pending (it may run a KDF)."""
        if self._stage.header_pending and self._policy is not None:
            try:
                return await self._policy.run(fn, *args)
            except BaseException as exc:  # cancelled with the call possibly still running
                raise self._stage.fail(exc) from None
        return fn(*args)

    async def _emit_header(self) -> None:
        header = self._stage.take_header()
        if header:
            await self._push_next(header)

    def inline(self, data: Buffer) -> tuple[list[Buffer], BaseException | None] | None:
        """A push of ``data`` (immutable: jobs keep views of it until they ran) run at
        once, when the scheduler would run it inline anyway (a message-sized body, or any
        push in inline mode), without gathering a batch: the output pieces (the header
        first) and the failure to raise once they were passed on; ``None`` when the push
        must take the batch way (:meth:`push`).

        Synchronous, so that :meth:`Pipeline.stream` hands the pieces out itself (the
        coroutines of a push and its emits were 2 us of a 64 KiB chunk); a failure breaks
        the runner as :meth:`push` does, and the caller gives the loop its turn when the
        scheduler says it is due. A push that was only held (nothing ran, nothing to hand
        out) gives :data:`_HELD`, which a driver may skip."""
        if self._failure is not None:
            self._refuse()
        stage, batches = self._stage, self._batches
        if stage.header_pending or not batches.runs_inline(len(data)):
            return None
        try:
            jobs = stage.feed(data)
            header = stage.take_header()
            if not jobs:  # a chunk that completed no segment is only held: nothing ran
                return ([header], None) if header else _HELD
            parts, failure = batches.run_inline(jobs)
        except BaseException as exc:
            self._failure = exc
            raise
        if failure is not None:
            self._failure = failure
        if header:
            parts.insert(0, header)
        return parts, failure

    async def pass_on(self, parts: list[Buffer], failure: BaseException | None) -> None:
        """Pass on what :meth:`inline` gave (the loop's turn first, when due), then raise
        its failure; a pass that does not complete (the consumer failed, a cancellation)
        breaks the runner, as :meth:`push` does."""
        try:
            if self._batches.turn_due:
                await self._batches.checkpoint()
            for part in parts:
                await self._push_next(part)
        except BaseException as exc:
            if self._failure is None:
                self._failure = exc
            raise
        if failure is not None:
            raise failure

    async def _push(self, data: Buffer) -> None:
        if type(data) is not bytes and not memoryview(data).readonly:
            # Jobs keep views of their input until they ran: never of a buffer the caller
            # (or an upstream stage) may reuse.
            data = as_bytes(data, "data")
        done = self.inline(data)
        if done is _HELD:
            return
        if done is not None:
            await self.pass_on(*done)
            return
        stage, batches = self._stage, self._batches
        jobs = await self._call(stage.feed, data)
        await self._emit_header()
        await batches.put(jobs, self._emit)
        if batches.queued and batches.inline_mode:
            # Inline, a partial batch gains nothing by waiting: it runs now, which leaves
            # the scheduler idle, so the next push runs without one (runs_inline).
            await batches.flush(self._emit)

    async def _flush(self) -> None:
        """Seal or open every complete segment now and emit everything in flight."""
        await self._batches.flush(self._emit)

    async def _close(self) -> None:
        try:
            final_jobs = await self._call(self._stage.finish)
        except Exception:
            # e.g. TruncatedStreamError: release everything verified before it first.
            await self._batches.flush(self._emit)
            raise
        await self._emit_header()
        await self._batches.put(final_jobs, self._emit)
        await self._batches.flush(self._emit)


class _PlainStage(_Runner):
    """Runs an ordinary transform, a controller deciding whether pieces go to a worker.

    Such a transform keeps state: one piece at a time, and a push that does not complete
    (cancelled while ``update`` runs on a worker) breaks the runner (:class:`_Runner`).
    """

    __slots__ = ("_control", "_policy", "_push_next", "_stage")

    def __init__(
        self, stage: Transform, policy: OffloadPolicy | None, push: _Push, site: str
    ) -> None:
        super().__init__()
        self._stage = stage
        self._policy = policy
        self._control = Controller(policy, site) if policy is not None else None
        self._push_next = push

    async def _push(self, data: Buffer) -> None:
        control = self._control
        if control is None or len(data) <= control.batch_size:
            pieces: Iterable[Buffer] = (data,)  # as it came: a pass-through returns it uncopied
        else:
            view, step = memoryview(data), control.batch_size
            pieces = (view[off : off + step] for off in range(0, len(view), step))
        for i, piece in enumerate(pieces):
            if control is not None and control.launch(len(piece)):
                assert self._policy is not None
                out = await self._policy.run(self._stage.update, piece)
            else:
                out = self._stage.update(piece)
                if i:
                    await anyio.lowlevel.checkpoint()
            if out:
                await self._push_next(out)

    async def _flush(self) -> None:
        """Nothing is held here: every update's output was already pushed."""

    async def _close(self) -> None:
        out = self._stage.finalize()
        if out:
            await self._push_next(out)


_Stage: TypeAlias = _SegmentedStage | _PlainStage


def _alone(runners: list[_Stage]) -> _SegmentedStage | None:
    """The one segmented stage of a pipeline of one (what encrypt(), decrypt() and the
    HTTP bodies run), whose inline pushes a driver hands out itself; else ``None``."""
    first = runners[0]
    return first if len(runners) == 1 and isinstance(first, _SegmentedStage) else None


def _as_push(sink: Sink, kept: bool = False) -> tuple[_Push, bool]:
    """The push function for ``sink`` and whether it is done with each view on return
    (``kept``: a callable sink that keeps what it is given gets ``bytes``, not views)."""
    if isinstance(sink, ByteSendStream) or kept:
        send: Callable[[Any], Awaitable[Any]] = (
            sink.send if isinstance(sink, ByteSendStream) else sink
        )

        async def to_keeper(data: Buffer) -> None:
            await send(as_bytes(data, "data"))

        return to_keeper, False

    async def to_callable(data: Buffer) -> None:
        await sink(memoryview(data))

    return to_callable, True


async def _chunks(source: Source, size: int) -> AsyncGenerator[Buffer, None]:
    """Pieces of at most ``size`` bytes, without copying (a ``bytes`` chunk as it is). An
    async generator given as the source is closed when the pipeline stops early (its
    ``finally`` blocks run now)."""
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
    it = aiter(source)
    try:
        async for chunk in it:
            if type(chunk) is bytes and len(chunk) <= size:  # the common case, as it is
                if chunk:
                    yield chunk
                continue
            for piece in _pieces_of(chunk, size):
                yield piece
    finally:
        if isinstance(it, AsyncGenerator):
            await it.aclose()


def _pieces_of(chunk: Buffer, size: int) -> Sequence[Buffer]:
    """``chunk`` as pieces of at most ``size`` bytes that nobody changes (jobs keep views
    of their input until they ran): a ``bytes`` as it is, views of it, or of a copy of a
    writable buffer; none for an empty chunk."""
    if type(chunk) is bytes and len(chunk) <= size:
        return (chunk,) if chunk else ()
    view = memoryview(chunk).cast("B")
    if not view.readonly:  # never a view of a buffer its owner may reuse
        view = memoryview(bytes(view))
    if len(view) <= size:
        return (view,) if view else ()
    return [view[off : off + size] for off in range(0, len(view), size)]


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

    def _build(self, push: _Push, done_on_return: bool, site: str) -> list[_Stage]:
        """Runners from last to first; each pushes into the next, the last into ``push``.

        ``done_on_return``: the final consumer is done with each view when it returns,
        so a segmented stage feeding it may lend reused buffers. One feeding a plain
        stage writes new ``bytes``: a plain stage may pass its input on as it is (a tap,
        the AWS encryptor's signer), and a lent buffer would then be
        copied once more (it was, at 4-9 us a 64 KiB segment).
        """
        runners: list[_Stage] = []
        for stage in reversed(self.stages):
            runner: _Stage
            if isinstance(stage, SegmentedTransform):
                runner = _SegmentedStage(stage, self.policy, push, site, reuse=done_on_return)
            else:
                runner = _PlainStage(stage, self.policy, push, site + "-plain")
            runners.append(runner)
            push = runner.push
            done_on_return = False
        runners.reverse()
        return runners

    async def _drive(self, source: Source, runners: list[_Stage]) -> None:
        first = runners[0]
        async with aclosing(_chunks(source, self._piece_size)) as pieces:
            async for piece in pieces:
                await first.push(piece)
        for runner in runners:
            await runner.close()

    @property
    def _piece_size(self) -> int:
        return self.policy.batch_size if self.policy is not None else 1 << 20

    def feeder(self, sink: Sink, *, kept: bool = False) -> Feeder:
        """Push-mode driving: ``await f.send(data)`` as data arrives, ``await f.aclose()``
        at the end (for callers that are handed data, like ASGI ``send`` hooks).

        A callable sink gets views of reused buffers that it must be done with when it
        returns; with ``kept=True`` it gets ``bytes`` objects instead, made for it (no
        copy needed to keep them, as a request body queued for an app).
        """
        push, done = _as_push(sink, kept)
        return Feeder._start(self._build(push, done, "pipeline-feeder"), self._piece_size)

    async def run(self, source: Source, sink: Sink) -> None:
        """Drive everything from ``source`` into ``sink``."""
        push, done = _as_push(sink)
        await self._drive(source, self._build(push, done, "pipeline-sink"))

    async def stream(self, source: Source) -> AsyncIterator[bytes]:
        """The output as an async iterator of ``bytes`` chunks (at most a batch each)."""
        ready: deque[bytes] = deque()

        async def collect(data: Buffer) -> None:
            ready.append(as_bytes(data, "data"))

        runners = self._build(collect, False, "pipeline-stream")
        first = runners[0]
        # One segmented stage (what encrypt() and decrypt() run): a push that runs inline
        # hands its pieces (new ``bytes``, reuse is off) straight out, no emit chain. The
        # pieces of _chunks are immutable, as inline() needs.
        alone = _alone(runners)
        error: BaseException | None = None
        async with aclosing(_chunks(source, self._piece_size)) as pieces:
            async for piece in pieces:
                if alone is not None:
                    done = alone.inline(piece)  # raises only what verified nothing before it
                    if done is _HELD:
                        continue
                    if done is not None:
                        out, error = done
                        done = None
                        if alone._batches.turn_due:
                            await alone._batches.checkpoint()
                        while out:
                            # Each piece handed over with no reference kept here: one
                            # kept while the next push's objects are made keeps their
                            # memory from the allocator (1 MiB chunks decrypted 1.8 us a
                            # segment slower when this loop held them).
                            yield out.pop(0)  # type: ignore[misc]  # bytes: see above
                        if error is not None:
                            raise error
                        continue
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

        async def add(data: Buffer) -> None:
            parts.append(as_bytes(data, "data"))

        await self._drive(source, self._build(add, False, "pipeline-stream"))
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def __repr__(self) -> str:
        return f"Pipeline({' | '.join(type(s).__name__ for s in self.stages)})"


class Feeder:
    """Drives a pipeline from pushed data; every output goes to the sink before
    ``send`` returns, except what a segmented stage holds back for its next batch.
    Made by :meth:`Pipeline.feeder`; it has no public constructor."""

    _runners: list[_Stage]
    _piece: int
    _closed: bool
    #: The one segmented stage of a pipeline of one (what the HTTP bodies run), or None.
    _alone: _SegmentedStage | None

    def __init__(self) -> None:
        raise TypeError("Feeder has no public constructor: use Pipeline.feeder()")

    @classmethod
    def _start(cls, runners: list[_Stage], piece_size: int) -> Feeder:
        feeder = cls.__new__(cls)
        feeder._runners, feeder._piece, feeder._closed = runners, piece_size, False
        feeder._alone = _alone(runners)
        return feeder

    async def send(self, data: Buffer) -> None:
        """Push ``data`` through the stages (large data in batch-sized pieces)."""
        if self._closed:
            raise AlreadyFinalizedError("this pipeline feeder was already closed")
        alone = self._alone
        for piece in _pieces_of(data, self._piece):
            # A push that runs inline is handed out here, as Pipeline.stream does: no
            # runner coroutines around it (issue 28: an HTTP body's piece each).
            if alone is not None:
                done = alone.inline(piece)
                if done is _HELD:
                    continue
                if done is not None:
                    await alone.pass_on(*done)
                    continue
            await self._runners[0].push(piece)

    async def flush(self) -> None:
        """Emit every complete segment now, without waiting for a full batch.

        Segmented formats can only emit whole segments: a partial segment stays held until
        more data or :meth:`aclose`.
        """
        if self._closed:
            raise AlreadyFinalizedError("this pipeline feeder was already closed")
        alone = self._alone
        if alone is not None and alone.idle:
            return  # nothing queued or in flight: every inline push was passed on
        for runner in self._runners:
            await runner.flush()

    async def aclose(self) -> None:
        """Finalize every stage, emitting what is left (raises what finalization raises)."""
        if self._closed:
            return
        for runner in self._runners:
            await runner.close()  # a close that did not complete: the next one raises
        self._closed = True


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
