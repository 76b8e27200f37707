"""Ordered batches: the one scheduler every parallel path runs on.

Theory of operation
-------------------
Work arrives as *jobs* (:class:`Job`): pure functions such as "seal segments 40-55" or
"open these records" that write at most ``out_size`` bytes into a buffer they are given
and report how much they wrote and whether they failed. The owner (a pipeline stage, an
encrypted file, an encrypted socket) decides counters, nonces and finality on the loop
thread before it hands jobs over, so nothing here can desynchronise a stream.

:class:`OrderedBatches` groups jobs into batches of about the controller's batch size and
runs each batch inline, on the loop thread, or on a worker thread, as its
:class:`~._adaptive.Controller` decides from what it measures; at most ``max_in_flight``
batches are outstanding. Batches are taken back strictly in order, so output order never
depends on which thread finished first. Inside a batch, jobs (cut into pieces of about
``CLAIM_SIZE``) are *claimed* one at a time from a shared counter: when the loop must wait
for a batch whose worker is slow to get a core, it claims the rest and runs it itself,
and a batch a busy pool has not started is taken back whole.

A job that fails stops its batch: the output of the jobs before it and the verified part
of the failing job are handed out with the failure, everything after is dropped, and the
scheduler is broken for good. The async drivers (:meth:`put`, :meth:`flush`) also break
it on cancellation or when the consumer fails, since output may then be lost; the
low-level :meth:`wait` changes nothing when cancelled (a receiver can resume).

Output model (measured, see docs/ENGINE.md): fresh memory costs a page fault per 4 KiB,
on this project's VMs about 1 ms per MiB, more than AES-GCM itself. So output is written
once, where it will be read: in *reuse* mode into a few recycled buffers lent to a
consumer that is done with them before it asks for more (sinks); otherwise into a new
``bytes`` object per batch, filled in place by the worker (:func:`fresh_bytes`), which
the consumer keeps without a copy and the allocator recycles when it is dropped.
:func:`run_all` (one-shot calls) fills one such object with the whole output, the
calling thread and helper threads claiming pieces of it.
"""

from __future__ import annotations

import ctypes
import itertools
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Protocol, TypeAlias

import anyio.lowlevel

from .._state import Buffer
from ..errors import BrokenTransformError
from ._adaptive import INLINE_BATCH, Controller, OneShotVerdict
from ._offload import OffloadPolicy, wait_future

__all__ = [
    "CLAIM_SIZE",
    "Emit",
    "Job",
    "OrderedBatches",
    "fresh_bytes",
    "run_all",
]

#: Bytes of work a thread claims at a time inside a batch: small enough that the loop can
#: take over most of a batch and that the last claim finishes soon, large enough that
#: claiming (about a microsecond) is lost in the kernel time (80 us at 3 GB/s).
CLAIM_SIZE = 256 << 10
#: Below this a fresh output is a bytearray copied once; above it, filled in place.
_FRESH_IN_PLACE = 64 << 10


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


#: Receives each batch's output in order: ``bytes`` it may keep, or (reuse mode) a view
#: it must be done with before it returns.
Emit: TypeAlias = Callable[[Buffer], Awaitable[object]]


# ---------------------------------------------------------------------------------------
# Fresh output objects
# ---------------------------------------------------------------------------------------


def _bytes_c_api() -> tuple[Callable[[None, int], bytes], Callable[[bytes], int]] | None:
    """CPython's ``PyBytes_FromStringAndSize`` and ``PyBytes_AsString``, through ctypes."""
    if sys.implementation.name != "cpython":  # pragma: no cover - others copy once
        return None
    new = ctypes.pythonapi.PyBytes_FromStringAndSize
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
    address = ctypes.pythonapi.PyBytes_AsString
    address.restype = ctypes.c_void_p
    address.argtypes = (ctypes.py_object,)
    return new, address


_BYTES_C_API = _bytes_c_api()


def fresh_bytes(size: int) -> tuple[Buffer, memoryview]:
    """A new output object of ``size`` bytes and a writable view of its memory.

    On CPython large outputs are ``bytes`` created uninitialised through the C API
    (``PyBytes_FromStringAndSize(NULL, size)``, as C extensions build them) and filled
    through the view before anyone else sees them: written once, never copied. The
    caller must fill every byte before handing the object out and must drop the view.
    Elsewhere, and for small sizes, the object is a ``bytearray`` to be copied by
    :func:`finish_fresh`.
    """
    if _BYTES_C_API is None or size < _FRESH_IN_PLACE:
        buf = bytearray(size)
        return buf, memoryview(buf)
    new, address = _BYTES_C_API
    obj = new(None, size)
    array = (ctypes.c_char * size).from_address(address(obj))
    return obj, memoryview(array).cast("B")


def finish_fresh(obj: Buffer) -> bytes:
    """The ``bytes`` a filled :func:`fresh_bytes` object stands for."""
    return obj if isinstance(obj, bytes) else bytes(obj)


# ---------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------


def _pieces(jobs: Iterable[Job]) -> Iterable[Job]:
    """Jobs cut to about CLAIM_SIZE where they can be (``split``), so threads can share."""
    for job in jobs:
        split = getattr(job, "split", None)
        if split is not None and job.out_size > 2 * CLAIM_SIZE:
            yield from split(CLAIM_SIZE)
        else:
            yield job


class _Batch:
    """Jobs, the output slot of each, and what running them gave."""

    __slots__ = (
        "claims",
        "failed_at",
        "future",
        "handed",
        "jobs",
        "obj",
        "offsets",
        "results",
        "size",
        "view",
    )

    def __init__(self, jobs: list[Job], obj: Buffer | None, view: memoryview) -> None:
        self.jobs = jobs
        offsets = [0]
        for job in jobs:
            offsets.append(offsets[-1] + job.out_size)
        self.offsets = offsets
        self.size = offsets[-1]
        self.obj = obj
        self.view = view
        self.results: list[tuple[int, Exception | None] | None] = [None] * len(jobs)
        self.claims = itertools.count()
        #: A hint of how many claims were handed out (racy, never above the truth).
        self.handed = 0
        #: Jobs after this index are skipped: one at or before it failed.
        self.failed_at = len(jobs)
        self.future: Future[int] | None = None

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
        jobs, results, view, offsets = self.jobs, self.results, self.view, self.offsets
        n = len(jobs)
        ran = done = 0
        for i in self.claims:
            self.handed = max(self.handed, i + 1)
            if i >= n or i > self.failed_at:
                break
            start, stop = offsets[i], offsets[i + 1]
            try:
                result = jobs[i].run_into(view[start:stop])
            except Exception as exc:  # a job must not raise; if one does, it failed
                result = (0, exc)
            results[i] = result
            ran += 1
            if result[1] is not None:
                self.failed_at = min(self.failed_at, i)
                break
            done += stop - start
            if budget is not None and done >= budget:
                break
        return ran

    def collect(self) -> tuple[Buffer, Exception | None, bool]:
        """The output in order, the first failure, and whether the output is exactly the
        whole slot area (every job filled its slot: the buffer itself can be handed out)."""
        parts: list[memoryview] = []
        error: Exception | None = None
        whole = True
        view, offsets = self.view, self.offsets
        for i, result in enumerate(self.results):
            assert result is not None  # every job before a failure ran
            written, error = result
            if written != offsets[i + 1] - offsets[i]:
                whole = False
            parts.append(view[offsets[i] : offsets[i] + written])
            if error is not None:
                whole = False
                break
        if whole:
            return view[: self.size], None, True
        return b"".join(parts), error, False


class OrderedBatches:
    """The ordered, bounded, parallel batch scheduler (see the module docstring).

    ``site`` names the path for the controller's per-process verdicts; ``reuse`` lends
    recycled buffers instead of fresh ``bytes`` (the consumer must be done with each
    view before it asks for the next); ``fail`` turns a job's failure into what the
    owner raises (e.g. ``transform.fail``, which marks the transform broken);
    ``always_offload`` sends every batch to a worker (jobs that do blocking I/O).
    """

    def __init__(
        self,
        policy: OffloadPolicy | None,
        *,
        site: str,
        reuse: bool = False,
        fail: Callable[[BaseException], BaseException] = lambda exc: exc,
        always_offload: bool = False,
    ) -> None:
        self._policy = policy
        self._always = always_offload and policy is not None
        self._control = (
            Controller(policy, site) if policy is not None and not always_offload else None
        )
        self._window_max = policy.max_in_flight if policy is not None else 1
        self._reuse = reuse
        self._fail = fail
        self._queued: list[Job] = []
        self._queued_bytes = 0
        self._window: deque[_Batch] = deque()
        self._free: list[bytearray] = []
        self._lent: bytearray | None = None
        self._failure: BaseException | None = None
        self._abandoned: list[Future[int]] = []

    # -- state --------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing in flight."""
        return not self._queued and not self._window

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
        for job in _pieces(jobs):
            self._queued.append(job)
            self._queued_bytes += job.out_size

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
        obj, view = self._output(size)
        batch = _Batch(jobs, obj, view)
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
        at a time with a checkpoint between, so the loop stays responsive.
        """
        batch = self._window[0]
        future = batch.future
        while future is not None and not future.done():
            if future.cancel():  # never started: the pool is busy elsewhere
                batch.future = future = None
            elif not batch.unclaimed:
                await wait_future(future)
                return
            while batch.unclaimed:
                batch.work(INLINE_BATCH)
                if batch.unclaimed or future is not None:
                    await anyio.lowlevel.checkpoint()

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

    def pop(self) -> tuple[Buffer, BaseException | None]:
        """The oldest finished batch's output and its failure (then the scheduler is
        broken and the failure, passed through ``fail``, is returned to raise)."""
        self._check()
        batch = self._window.popleft()
        if self._lent is not None:
            self._free.append(self._lent)
            self._lent = None
        out, error, whole = batch.collect()
        if whole:
            if self._reuse:
                assert isinstance(batch.obj, bytearray)
                self._lent = batch.obj
            else:
                assert batch.obj is not None
                out = finish_fresh(batch.obj)
        batch.view.release()
        if error is not None:
            failure = self._fail(error)
            self._break(failure)
            return out, failure
        return out, None

    def _output(self, size: int) -> tuple[Buffer, memoryview]:
        if not self._reuse:
            return fresh_bytes(size)
        for i, buf in enumerate(self._free):
            if len(buf) >= size:
                del self._free[i]
                return buf, memoryview(buf)[:size]
        if len(self._free) > self._window_max:
            self._free.pop(0)
        # Batches differ by a piece or so: one size with headroom lets them all share.
        grain = 1 << 16
        target = self._batch_size()
        buf = bytearray(-(-max(size, target + target // 16) // grain) * grain)
        return buf, memoryview(buf)[:size]

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
        offloaded = self._window[0].future is not None
        await self.wait()
        out, error = self.pop()
        if not offloaded and not self.idle:
            # Between inline batches the loop gets a turn (waiting gave it one otherwise).
            await anyio.lowlevel.checkpoint()
        if out:
            await emit(out)
        if error is not None:
            raise error


_ONESHOT: dict[str, OneShotVerdict] = {}


def run_all(
    jobs: Sequence[Job],
    policy: OffloadPolicy | None,
    *,
    head: Buffer = b"",
    site: str = "one-shot",
) -> bytes:
    """Run every job of a one-shot call into one new ``bytes``: ``head``, then the output.

    Synchronous. The calling thread claims and runs pieces itself; helper threads (when
    the work is large and helpers have been getting cores, see
    :class:`~._adaptive.OneShotVerdict`) claim others. All or nothing: on a failure
    the first one is raised and nothing is returned.
    """
    pieces = list(_pieces(jobs))
    size = sum(job.out_size for job in pieces)
    obj, full = fresh_bytes(len(head) + size)
    full[: len(head)] = head
    batch = _Batch(pieces, obj, full[len(head) :])
    verdict = _ONESHOT.setdefault(site, OneShotVerdict())
    helpers: list[Future[int]] = []
    if (
        policy is not None
        and size >= 2 * policy.inline_limit
        and len(pieces) > 1
        and verdict.helpers_wanted()
    ):
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
    try:
        out, error, whole = batch.collect()
    finally:
        batch.view.release()
        full.release()
    if error is not None:
        raise error
    if whole:
        return finish_fresh(obj)
    return bytes(head) + bytes(out)
