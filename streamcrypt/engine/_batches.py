"""Ordered batches: the one scheduler every parallel path runs on.

Theory of operation
-------------------
Work arrives as *jobs* (:class:`Job`): pure functions ("seal segments 40-55") that write
at most ``out_size`` bytes into a buffer they are given; the owner decides counters,
nonces and finality on the loop thread first, so nothing here can desynchronise a stream.
:class:`OrderedBatches` groups jobs into batches, runs each inline or on a worker as its
:class:`~._adaptive.Controller` decides, keeps at most ``max_in_flight`` outstanding and
takes them back strictly in order; inside a batch, pieces of about ``CLAIM_SIZE`` are
claimed from a shared counter, so the loop runs the rest of a batch whose worker got no
core. A failing job stops its batch: what verified before it is handed out with the
failure, nothing after, and the scheduler is broken for good (so is it on cancellation
or a failed consumer in the async drivers; the low-level :meth:`wait` is resumable).
Output is written once, where it will be read: recycled buffers lent to a sink (*reuse*
mode) or new ``bytes`` filled in place (:class:`~._memory.Fresh`). :func:`run_verified`
(one-shot calls) is the same claiming over one output object; :func:`ordered_calls` runs
blocking calls through the same scheduler. Measurements and reasons: docs/ENGINE.md.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from typing import Generic, Protocol, TypeAlias, TypeVar

from ..abc import Buffer
from ..codecs import SegmentedTransform
from ..errors import BrokenTransformError
from ._adaptive import INLINE_BATCH, Controller, oneshot_verdict
from ._memory import Fresh
from ._offload import DEFAULT_POLICY, OffloadPolicy, Pending, wait_future

#: Bytes of work a thread claims at a time inside a batch: small enough that the loop can
#: take over most of a batch and that the last claim finishes soon, large enough that
#: claiming (about a microsecond) is lost in the kernel time (80 us at 3 GB/s).
CLAIM_SIZE = 256 << 10
#: Bytes of a new output object of the pipeline's segmented stages: fewer objects (each
#: costs ~2 us to make and its jobs' setup) while glibc still recycles them. Measured
#: (encrypt() / decrypt() of 64 MiB in 1 MiB chunks, policy=None): 256 KiB 31.8 / 32.3 ms
#: and 736 / 1104 page faults; 512 KiB 31.0 / 30.9 ms, 480 / 944; 1 MiB (one per chunk)
#: 62.6 ms and 15,872 faults encrypting (glibc trims its heap top and faults it back).
OUTPUT_PIECE = 512 << 10


class Job(Protocol):
    """A pure unit of work the scheduler may run on any thread."""

    @property
    def out_size(self) -> int:
        """The most bytes :meth:`run_into` may write."""
        ...

    def run_into(self, out: memoryview) -> tuple[int, Exception | None]:
        """Write the output into ``out``; return the bytes written and the failure, if
        any (then only the written bytes, all verified, may be used). Never raises."""
        ...


#: Receives each batch's output in order, in pieces: ``bytes`` it may keep, or (reuse mode)
#: views it must be done with before it returns.
Emit: TypeAlias = Callable[[list[Buffer]], Awaitable[object]]


def _checkpoint_here() -> Callable[[], Awaitable[None]]:
    """The running loop's checkpoint (its other tasks run): ``asyncio.sleep(0)`` on asyncio,
    which is what anyio's checkpoint does there, without anyio's lookup of the running
    library on every call (3.3 against 1.4 us here; the inline path checkpoints after
    every MiB), else anyio's. A scheduler runs on one loop, so it asks once. anyio and
    sniffio are imported on first use: synchronous callers (the command line, one-shot
    calls) never import them."""
    import sniffio

    if sniffio.current_async_library() == "asyncio":
        import asyncio

        return lambda: asyncio.sleep(0)
    import anyio.lowlevel

    return anyio.lowlevel.checkpoint


# ---------------------------------------------------------------------------------------
# Fresh output objects
# ---------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------


def _run_job(job: Job, out: memoryview) -> tuple[int, Exception | None]:
    """``job.run_into(out)``; a job must not raise, and one that does has failed."""
    try:
        return job.run_into(out)
    except Exception as exc:
        return 0, exc


def _run_in_turn(jobs: Iterable[Job], out: memoryview) -> tuple[int, Exception | None]:
    """Run ``jobs`` one after another on this thread, each writing right after the output
    before it: the bytes written and the failure that stopped them, if any. Each job gets
    all the rest of ``out``, not just its share: a job may write past its output (RFC
    8188 opens a record with its delimiter byte in place) where the next job then writes."""
    written = 0
    for job in jobs:
        done, error = _run_job(job, out[written:])
        written += done
        if error is not None:
            return written, error
    return written, None


def _pieces(
    jobs: Iterable[Job], cut: int = CLAIM_SIZE, longest: int = 2 * CLAIM_SIZE
) -> tuple[list[Job], list[int]]:
    """Jobs longer than ``longest`` cut to about ``cut`` bytes where they can be
    (``split``), so threads can share them, and the output bound of each (asked once a
    job: it may be computed)."""
    pieces: list[Job] = []
    sizes: list[int] = []
    for job in jobs:
        size = job.out_size
        split = getattr(job, "split", None) if size > longest else None
        if split is None:
            pieces.append(job)
            sizes.append(size)
            continue
        for piece in split(cut):
            pieces.append(piece)
            sizes.append(piece.out_size)
    return pieces, sizes


class _Batch:
    """Jobs, where each writes, and what running them gave.

    Consecutive jobs share an output *group*: one buffer they fill side by side, handed
    out whole once every job of the group filled its slot.
    """

    __slots__ = (
        "claims",
        "failed_at",
        "future",
        "groups",
        "handed",
        "jobs",
        "lent",
        "results",
        "slots",
    )

    def __init__(
        self, jobs: list[Job], groups: list[_Group], lent: bytearray | None = None
    ) -> None:
        self.jobs = jobs
        self.groups = groups
        #: The recycled buffer the groups are views of (reuse mode), or None.
        self.lent = lent
        self.slots: list[memoryview] = []
        for group in groups:
            pos = 0
            for job in jobs[group.first : group.end]:
                end = pos + job.out_size
                self.slots.append(group.view[pos:end])
                pos = end
        self.results: list[tuple[int, Exception | None] | None] = [None] * len(jobs)
        self.claims = itertools.count()
        #: A hint of how many claims were handed out (racy, never above the truth).
        self.handed = 0
        #: Jobs after this index are skipped: one at or before it failed.
        self.failed_at = len(jobs)
        self.future: Pending[int] | None = None

    @property
    def unclaimed(self) -> bool:
        """Whether jobs may be left to claim (a hint: :meth:`work` is exact)."""
        return self.handed < min(len(self.jobs), self.failed_at)

    def work(self, budget: int | None = None) -> int:
        """Run unclaimed jobs until none is left (or ``budget`` bytes are done); any thread.

        Returns the number of jobs this call ran. ``next()`` on the shared counter is
        atomic under the GIL, so every job runs exactly once whoever claims it; a job
        claimed before a failure of a later one still runs (its output comes first).
        """
        jobs, results, slots = self.jobs, self.results, self.slots
        n = len(jobs)
        ran = done = 0
        for i in self.claims:
            self.handed = max(self.handed, i + 1)
            if i >= n or i > self.failed_at:
                break
            result = results[i] = _run_job(jobs[i], slots[i])
            ran += 1
            if result[1] is not None:
                self.failed_at = min(self.failed_at, i)
                break
            done += len(slots[i])
            if budget is not None and done >= budget:
                break
        return ran

    def collect(self) -> tuple[list[Buffer], Exception | None]:
        """The output of each group in order, up to the first failure (then the verified
        part of the failing job ends the last piece), and that failure.

        Each group's outputs are moved end to end (a job may write less than its slot)
        and the group hands out what was written (:meth:`_Group.handed_out`).
        """
        parts: list[Buffer] = []
        results, slots = self.results, self.slots
        for group in self.groups:
            written = start = 0  # bytes kept so far, where the job's slot starts
            error: Exception | None = None
            for i in range(group.first, group.end):
                result = results[i]
                assert result is not None  # every job before a failure ran
                done, error = result
                if start != written:  # a job before this one wrote less than its bound
                    group.view[written : written + done] = slots[i][:done]
                written += done
                start += len(slots[i])
                if error is not None:
                    break
            parts.append(group.handed_out(written))
            if error is not None:
                return parts, error
        return parts, None


class _Group:
    """The buffer a run of consecutive jobs ``[first, end)`` writes into: a view of new
    output memory (``base`` bytes into it) or of a lent buffer (``fresh`` is None)."""

    __slots__ = ("base", "end", "first", "fresh", "view")

    def __init__(
        self, first: int, end: int, fresh: Fresh | None, view: memoryview, base: int = 0
    ) -> None:
        self.first = first
        self.end = end
        self.fresh = fresh
        self.view = view
        self.base = base

    def handed_out(self, written: int) -> Buffer:
        """What the group gives its consumer once its first ``written`` bytes are the
        output: the new object (:meth:`Fresh.finish`), or a view of the lent buffer."""
        if self.fresh is None:
            return self.view[:written]
        return self.fresh.finish(self.base + written)


def _fresh_groups(sizes: list[int], piece: int) -> list[_Group]:
    """Groups of consecutive jobs (of output bounds ``sizes``) of about ``piece`` bytes,
    each with new output memory."""
    groups: list[_Group] = []
    first = size = 0
    last = len(sizes) - 1
    for i, job_size in enumerate(sizes):
        size += job_size
        if size >= piece or i == last:
            fresh = Fresh(size)
            groups.append(_Group(first, i + 1, fresh, fresh.view))
            first, size = i + 1, 0
    return groups


class OrderedBatches:
    """The ordered, bounded, parallel batch scheduler (see the module docstring).

    ``site`` names the path for the controller's per-process verdicts; ``reuse`` lends
    recycled buffers instead of fresh ``bytes`` (the consumer must be done with each
    view before it asks for the next); ``fail`` turns a job's failure into what the
    owner raises (e.g. ``transform.fail``, which marks the transform broken);
    ``always_offload`` sends every batch to a worker (blocking calls); ``blocking``
    also keeps them there: jobs that read a file run on workers only, never on the loop
    (it neither claims them nor takes back a batch no worker started; it waits);
    ``piece``: the size of the new objects fresh output comes in (consecutive jobs share
    one; see docs/ENGINE.md for why about 256 KiB).
    """

    def __init__(
        self,
        policy: OffloadPolicy | None,
        *,
        site: str,
        reuse: bool = False,
        fail: Callable[[BaseException], BaseException] = lambda exc: exc,
        always_offload: bool = False,
        blocking: bool = False,
        piece: int = CLAIM_SIZE,
    ) -> None:
        self.piece = piece
        self._policy = policy
        self._always = (always_offload or blocking) and policy is not None
        self._blocking = blocking and policy is not None
        self._control = (
            Controller(policy, site) if policy is not None and not self._always else None
        )
        self._window_max = policy.max_in_flight if policy is not None else 1
        self._reuse = reuse
        self._fail = fail
        self._queued: list[Job] = []
        self._queued_bytes = 0
        self._window: deque[_Batch] = deque()
        self._free: list[bytearray] = []
        self._lent: bytearray | None = None
        self._scratch = bytearray()  # run_inline's output buffer in reuse mode
        self._failure: BaseException | None = None
        self._abandoned: list[Pending[int]] = []
        self._held_loop = 0  # bytes run inline since the loop last got a turn
        self._turn: Callable[[], Awaitable[None]] | None = None  # the loop's checkpoint

    # -- state --------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing in flight."""
        return not self._queued and not self._window

    def runs_inline(self, size: int) -> bool:
        """Whether a push of ``size`` bytes should go to :meth:`run_inline`: nothing is queued
        or in flight, it is at most one inline batch, and it would run inline anyway
        (inline mode, or under the inline limit). The batch machinery would run it the
        same way, on this thread, at a cost of its own (a batch, a claim counter, a
        window round trip: a few us a push)."""
        if self._queued or self._window or self._failure is not None or size > INLINE_BATCH:
            return False
        if self.inline_mode:
            return True
        return self._policy is not None and size < self._policy.inline_limit

    @property
    def inline_mode(self) -> bool:
        """Every batch runs on this thread: no policy, or the controller's inline mode."""
        control = self._control
        return not self._always and (control is None or not control.offloading)

    @property
    def broken(self) -> bool:
        """A failure or cancellation broke this scheduler for good."""
        return self._failure is not None

    @property
    def in_flight(self) -> int:
        return len(self._window)

    @property
    def window_full(self) -> bool:
        return len(self._window) >= self._window_max

    @property
    def head_done(self) -> bool:
        """The oldest batch has finished (``pop`` would not wait)."""
        if not self._window:
            return False
        future = self._window[0].future
        return future is None or future.done()

    @property
    def queued(self) -> bool:
        """Jobs are queued and not launched yet."""
        return bool(self._queued)

    @property
    def budget(self) -> int:
        """Bytes of work worth queuing ahead: one batch inline, the window when offloading."""
        offloading = self._always or (self._control is not None and self._control.offloading)
        return self._batch_size() * (self._window_max if offloading else 1)

    @property
    def batch_full(self) -> bool:
        """Enough is queued for a batch."""
        return self._queued_bytes >= self._batch_size()

    def _batch_size(self) -> int:
        if self._control is not None:
            return self._control.batch_size
        return self._policy.batch_size if self._always and self._policy else INLINE_BATCH

    def _check(self) -> None:
        if self._failure is not None:
            raise BrokenTransformError(
                f"the batch scheduler is unusable after an earlier failure: {self._failure!r}"
            ) from self._failure

    def abandon(self, exc: BaseException) -> list[Pending[int]]:
        """Break this scheduler for good with ``exc`` (a seek dropped what it had in
        flight): batches no worker started are cancelled, a running one stops at its next
        claim, and no batch stays referenced. Returns the futures still running, which the
        owner must wait for before closing what their jobs read."""
        self._break(exc)
        running = [future for future in self._abandoned if not future.done()]
        self._abandoned.clear()
        return running

    def _break(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc
        for batch in self._window:
            if batch.future is not None and not batch.future.cancel():
                self._abandoned.append(batch.future)
            batch.failed_at = -1  # a running worker stops at its next claim
        self._window.clear()
        self._queued.clear()

    # -- low level: queue, launch, wait, pop ----------------------------------------------

    def queue(self, jobs: Iterable[Job]) -> None:
        """Add jobs to the batch being gathered (never runs anything)."""
        self._check()
        pieces, sizes = _pieces(jobs)
        self._queued += pieces
        self._queued_bytes += sum(sizes)

    def launch(self) -> None:
        """Start what is queued as one batch: inline now, or on a worker.

        The caller keeps the window bounded (``window_full`` means pop first).
        """
        self._check()
        if not self._queued:
            return
        target = self._batch_size()
        queued = self._queued
        size = count = 0
        while count < len(queued) and size < target:
            size += queued[count].out_size
            count += 1
        jobs = queued[:count]
        del queued[:count]
        self._queued_bytes -= size
        batch = self._batch(jobs, size)
        control = self._control
        if self._always or (control is not None and control.launch(size)):
            assert self._policy is not None
            try:
                batch.future = self._policy.submit(batch.work)
            except RuntimeError:  # the executor is shutting down: run it here
                batch.work()
        else:
            batch.work()
        self._window.append(batch)

    async def wait(self) -> None:
        """Until the oldest batch has finished; cancelling this changes nothing.

        While its worker has not started, the batch is taken back and run here; while
        the worker is busy with it, the loop claims what is left, an inline batch's worth
        at a time with a checkpoint between, so the loop stays responsive. Blocking jobs
        (``blocking``) are only waited for.
        """
        batch = self._window[0]
        future = batch.future
        if self._blocking and future is not None:
            await wait_future(future)
            return
        while future is not None and not future.done():
            if future.cancel():  # never started: the pool is busy elsewhere
                batch.future = future = None
            elif not batch.unclaimed:
                await wait_future(future)
                return
            while batch.unclaimed:
                batch.work(INLINE_BATCH)
                if batch.unclaimed or future is not None:
                    await self.checkpoint()

    async def settle(self) -> None:
        """Until no worker runs a batch of this scheduler any more (results dropped):
        before closing what its jobs read, such as a file descriptor."""
        futures = self._abandoned + [b.future for b in self._window if b.future is not None]
        for future in futures:
            if not future.cancel():
                try:
                    await wait_future(future)
                except Exception:
                    pass
        self._abandoned.clear()

    def pop(self) -> tuple[list[Buffer], BaseException | None]:
        """The oldest finished batch's output (in pieces, in order) and its failure (then
        the scheduler is broken and the failure, passed through ``fail``, is returned to
        raise). In reuse mode the pieces are views valid until the next ``pop``."""
        self._check()
        batch = self._window.popleft()
        if self._lent is not None:
            self._free.append(self._lent)
        parts, error = batch.collect()
        self._lent = batch.lent
        if error is not None:
            failure = self._fail(error)
            self._break(failure)
            return parts, failure
        return parts, None

    def _batch(self, jobs: list[Job], size: int) -> _Batch:
        if not self._reuse:
            return _Batch(jobs, _fresh_groups([job.out_size for job in jobs], self.piece))
        buf = None
        for i, candidate in enumerate(self._free):
            if len(candidate) >= size:
                buf = self._free.pop(i)
                break
        if buf is None:
            if len(self._free) > self._window_max:
                self._free.pop(0)
            # Sized to the work in flight (a 1 KiB body costs 64 KiB, not a whole batch).
            grain = 1 << 16
            buf = bytearray(-(-size // grain) * grain)
        return _Batch(jobs, [_Group(0, len(jobs), None, memoryview(buf)[:size])], buf)

    # -- high level: async drivers that emit in order -------------------------------------

    async def put(self, jobs: Iterable[Job], emit: Emit) -> None:
        """Queue ``jobs``, launch every batch that filled up, emit finished batches in
        order (waiting while the window is full). Breaks the scheduler if it fails or is
        cancelled; raises a job's failure after emitting what verified before it."""
        self._check()
        try:
            self.queue(jobs)
            while self.batch_full:
                await self._make_room(emit)
                self.launch()
                await self._emit_done(emit)
            await self._emit_done(emit)
        except BaseException as exc:
            self._break(exc)
            raise

    def run_inline(self, jobs: Sequence[Job]) -> tuple[list[Buffer], BaseException | None]:
        """Run ``jobs`` on this thread now, without gathering a batch (see
        :meth:`runs_inline`), each writing right after the one before: the output pieces
        (in reuse mode one piece of a reused buffer, else new objects of about ``piece``
        bytes, consecutive jobs sharing one: one HTTP body piece is one write, not one per
        record), and the failure that stopped the jobs (passed through ``fail``; the
        scheduler is then broken) to raise once the pieces, all verified, were handed
        out. The controller counts the work as it counts a batch; the caller gives the
        loop its turn when :attr:`turn_due`."""
        self._check()
        try:
            parts, error = self._run_inline(jobs)
        except BaseException as exc:
            self._break(exc)
            raise
        if error is None:
            return parts, None
        failure = self._fail(error)
        self._break(failure)
        return parts, failure

    def _run_inline(self, jobs: Sequence[Job]) -> tuple[list[Buffer], Exception | None]:
        """:meth:`run_inline`'s work: the output pieces up to the first failure, and that
        failure; counts the bytes toward the loop's turn."""
        if len(jobs) == 1 and not self._reuse:
            # One job of a chunk (a segment or a few), one output object: no lists of
            # pieces, groups or slices. A job of one segment whose codec's kernel makes
            # its own output object runs so (``run_new``: no Fresh memory).
            job = jobs[0]
            size = job.out_size
            if size <= self.piece:
                self._count(size)
                run_new = getattr(job, "run_new", None)
                made = run_new() if run_new is not None else None
                if made is None:
                    fresh = Fresh(size)
                    written, error = _run_job(job, fresh.view)
                    made = (fresh.finish(written) if written else b""), error
                out, error = made
                return ([out] if out else []), error
        # Cut for output objects alone, none much over ``piece`` (inline, no thread shares).
        pieces, sizes = _pieces(jobs, self.piece, self.piece)
        size = sum(sizes)
        self._count(size)
        if self._reuse:
            if len(self._scratch) < size:
                self._scratch = bytearray(size)
            groups = [_Group(0, len(pieces), None, memoryview(self._scratch)[:size])]
        elif size <= self.piece:
            fresh = Fresh(size)
            groups = [_Group(0, len(pieces), fresh, fresh.view)]
        else:
            groups = _fresh_groups(sizes, self.piece)
        parts: list[Buffer] = []
        error = None
        for group in groups:
            written, error = _run_in_turn(pieces[group.first : group.end], group.view)
            if written:
                parts.append(group.handed_out(written))
            if error is not None:
                break
        return parts, error

    def _count(self, size: int) -> None:
        """``size`` bytes run inline now: toward the loop's turn, and for the controller
        work of the inline limit or more is a batch's worth, as put() counts it (for its
        epochs)."""
        self._held_loop += size
        control, policy = self._control, self._policy
        if control and policy and not control.offloading and size >= policy.inline_limit:
            control.launch(size)

    async def flush(self, emit: Emit) -> None:
        """Launch what is queued and emit everything in flight (same failure rules)."""
        self._check()
        try:
            while self._queued:
                await self._make_room(emit)
                self.launch()
            while self._window:
                await self._emit_one(emit)
        except BaseException as exc:
            self._break(exc)
            raise

    async def _make_room(self, emit: Emit) -> None:
        while self.window_full:
            await self._emit_one(emit)

    async def _emit_done(self, emit: Emit) -> None:
        while self.head_done:
            await self._emit_one(emit)

    async def _emit_one(self, emit: Emit) -> None:
        head = self._window[0]
        yields = head.future is not None and not head.future.done()  # wait() will wait
        await self.wait()
        out, error = self.pop()
        self._held_loop = 0 if yields else self._held_loop + sum(map(len, head.slots))
        if self.turn_due:
            await self.checkpoint()
        if any(out):
            await emit(out)
        if error is not None:
            raise error

    @property
    def turn_due(self) -> bool:
        """The loop is owed a turn: an inline batch's worth of work ran on this thread
        since it last had one (:meth:`checkpoint`)."""
        return self._held_loop >= INLINE_BATCH

    async def checkpoint(self) -> None:
        """The loop gets a turn: after an inline batch's worth of work on this thread (the
        ``_held_loop`` count, kept by both inline paths), even when the source and the
        consumer never yield to it themselves; while the loop claims a busy batch."""
        self._held_loop = 0
        turn = self._turn
        if turn is None:
            turn = self._turn = _checkpoint_here()
        await turn()


A = TypeVar("A")
R = TypeVar("R")


class _Call(Generic[A, R]):
    """A job that writes nothing: ``fn(arg)``, its result kept on the job."""

    __slots__ = ("arg", "fn", "result")
    out_size = 0

    def __init__(self, fn: Callable[[A], R], arg: A) -> None:
        self.fn = fn
        self.arg = arg
        self.result: R

    def run_into(self, out: memoryview) -> tuple[int, Exception | None]:
        try:
            self.result = self.fn(self.arg)
        except Exception as exc:
            return 0, exc
        return 0, None


async def ordered_calls(
    policy: OffloadPolicy | None, args: deque[A], fn: Callable[[A], R]
) -> AsyncGenerator[tuple[A, R], None]:
    """``(arg, fn(arg))`` for the items of the deque, in order, ``max_in_flight`` at once.

    For blocking calls (reading and chunking files, reading packs): each call is a batch
    of its own on a worker (``policy=None``: one at a time, inline), through
    :class:`OrderedBatches`, so a call no worker has started is run by the loop while it
    waits. The consumer may put items back on the deque between results (the next step
    of a long job). A call that raises ends the iteration with that exception, after the
    results before it; whenever the iteration ends (a failure, the consumer stopping,
    cancellation), the calls still running finish before this returns, since they may
    touch what the caller cleans up.
    """
    batches = OrderedBatches(policy, site="calls", always_offload=True)
    calls: deque[_Call[A, R]] = deque()
    try:
        while args or calls:
            while args and not batches.window_full:
                call = _Call(fn, args.popleft())
                batches.queue((call,))
                batches.launch()
                calls.append(call)
            await batches.wait()
            _, error = batches.pop()
            call = calls.popleft()
            if error is not None:
                raise error
            yield call.arg, call.result
    finally:
        import anyio

        with anyio.CancelScope(shield=True):
            await batches.settle()


def run_verified(
    jobs: Sequence[Job],
    policy: OffloadPolicy | None,
    *,
    head: Buffer = b"",
    site: str = "one-shot",
) -> tuple[bytes, Exception | None]:
    """Run every job of a one-shot call into one new ``bytes``: ``head``, then the output
    of every job before the first failure (and the verified part of the failing one),
    with that failure, or ``None`` when every job ran.

    Synchronous. The calling thread claims and runs pieces itself; helper threads (when
    the work is large and helpers have been getting cores, see
    :class:`~._adaptive.OneShotVerdict`) claim others. Callers that release all or
    nothing raise the failure (:func:`run_segmented`); synchronous drivers that release
    verified output as it comes (the command line writing to a pipe) write the output
    first."""
    if policy is None or (len(jobs) == 1 and jobs[0].out_size <= 2 * CLAIM_SIZE):
        return _run_here(jobs, head)  # one piece: nothing to share
    pieces, sizes = _pieces(jobs)
    size = sum(sizes)
    if size < 2 * policy.inline_limit or len(pieces) < 2:
        return _run_here(jobs, head, size)
    fresh = Fresh(len(head) + size)
    fresh.view[: len(head)] = head
    # One group over the whole object, head included in what it hands out.
    group = _Group(0, len(pieces), fresh, fresh.view[len(head) :], base=len(head))
    batch = _Batch(pieces, [group])
    verdict = oneshot_verdict(site)
    helpers: list[Pending[int]] = []
    if verdict.helpers_wanted():
        wanted = min(policy.workers, len(pieces) - 1)
        helpers = [policy.submit(batch.work) for _ in range(wanted)]
    mine = batch.work()
    helped = 0
    for future in helpers:
        if future.cancel():
            continue
        helped += future.result()
    if helpers:
        verdict.record(helped / max(1, helped + mine))
    parts, error = batch.collect()
    out = parts[0]
    assert isinstance(out, bytes)
    return out, error


def _run_here(
    jobs: Sequence[Job], head: Buffer, size: int | None = None
) -> tuple[bytes, Exception | None]:
    """:func:`run_verified` in the calling thread alone: each job straight after the
    output before it (:func:`_run_in_turn`), none of the claiming a shared batch needs.
    ``size``: the jobs' output bound, when the caller has summed it already."""
    if size is None:
        size = sum(job.out_size for job in jobs)
    fresh = Fresh(len(head) + size)
    fresh.view[: len(head)] = head
    written, error = _run_in_turn(jobs, fresh.view[len(head) :])
    return fresh.finish(len(head) + written), error


def run_segmented(
    transform: SegmentedTransform, data: Buffer, policy: OffloadPolicy | None = DEFAULT_POLICY
) -> bytes:
    """Run a segmented transform over all of ``data`` at once, in parallel when it is large.

    Synchronous: the calling thread runs segments itself while helper threads take
    others (:func:`run_verified`); the output is written once, into the ``bytes``
    returned. Errors come out after nothing is returned (one-shot calls release all or
    nothing).
    """
    view = memoryview(data).cast("B")
    try:
        jobs = transform.feed(view)
        try:
            jobs += transform.finish()
        except Exception as late:  # a fault in an earlier segment comes first, as in a stream
            raise run_verified(jobs, policy)[1] or late from None
        out, error = run_verified(jobs, policy, head=transform.take_header())
        if error is not None:
            raise error
        return out
    except Exception as exc:
        raise transform.fail(exc) from None
