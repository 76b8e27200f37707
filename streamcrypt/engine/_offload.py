"""All bridging to worker threads lives here: the offload policy and how work is awaited.

Native kernels (OpenSSL through ``cryptography`` >= 50, libsodium, BLAKE3) release the GIL
on large inputs, so work on other threads runs on other cores. A thread hop is expensive
next to the kernel, so work crosses in batches, and whether a batch crosses at all is
decided from measurements on the path it is on (:mod:`._adaptive`), not from constants.

Work is submitted to the engine's one pool of worker threads (:func:`start`: light tasks,
no ``concurrent.futures``, which with the ``logging`` it imports would cost the command's
start-up), or to the policy's own ``concurrent.futures.Executor``, without awaiting, so batches run while the loop reads the next
input; a finished future wakes the loop through the backend's own thread-safe scheduler
(``call_soon_threadsafe`` on asyncio, the trio token on trio), so waiting costs no thread.
"""

from __future__ import annotations

import os
import sys
import threading
from _queue import SimpleQueue  # C; the queue module would import more
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, TypeVarTuple, Unpack

from .._lazy import LazyModule
from ..errors import BrokenTransformError, InvalidParameterError

if TYPE_CHECKING:  # imported where used: synchronous callers (the command) need neither
    import asyncio
    import concurrent.futures as futures
else:  # read by typing.get_type_hints, which imports it then (~10 ms with logging)
    futures = LazyModule("concurrent.futures")

T = TypeVar("T")
Ts = TypeVarTuple("Ts")
T_co = TypeVar("T_co", covariant=True)

# These are bounds, not tuning: whether work between them leaves the loop is measured on
# the path at run time (see _adaptive.py and docs/ENGINE.md). Machines of this project's
# kind measured 1.6 to 14 GB/s for one-thread AES-GCM and 30 to 200 us per thread hop.
#: Work smaller than this never leaves the loop: at the fastest hop and slowest kernel
#: measured (30 us, 1.6 GB/s) a hop is worth 50 KB of work, at the slowest hop and
#: fastest kernel (200 us, 14 GB/s) 2.8 MB: 256 KiB is where offload can start to pay.
DEFAULT_INLINE_LIMIT = 256 << 10
#: Bytes per batch handed to a worker: at 14 GB/s 4 MiB is 0.3 ms of work, so even the
#: slowest hop measured (200 us) is under half of it; at 1.6 GB/s it is 2.6 ms. Larger
#: batches only cost memory (peak RSS grows with batch_size x max_in_flight).
DEFAULT_BATCH_SIZE = 4 << 20


def cpu_budget(root: str = "/sys/fs/cgroup", membership: str = "/proc/self/cgroup") -> int:
    """The CPUs this process may use: those its affinity allows (``sched_getaffinity``),
    capped by its cgroup's CPU quota rounded up (v2 ``cpu.max``, v1
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``; the tightest of the cgroup and its
    ancestors), never ``os.cpu_count()``'s count of the host's CPUs (a 2-CPU container
    on a 64-core host gets 2). ``root`` and ``membership`` are where the cgroup
    file systems are mounted and where the process's cgroups are listed."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    try:
        with open(membership) as f:
            lines = f.read().splitlines()
    except OSError:  # no cgroups (not Linux, or hidden)
        return max(1, cpus)
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        files: tuple[str, ...]
        if controllers == "":  # v2: one hierarchy
            base, files = root, ("cpu.max",)
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's hierarchy
            base = os.path.join(root, controllers)
            if not os.path.isdir(base):
                base = os.path.join(root, "cpu")
            files = ("cpu.cfs_quota_us", "cpu.cfs_period_us")
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):  # the cgroup, then each ancestor
            quota = _cpu_quota(os.path.join(base, *parts[:depth]), files)
            if quota is not None:
                cpus = min(cpus, quota)
    return max(1, cpus)


def _cpu_quota(directory: str, files: tuple[str, ...]) -> int | None:
    """The CPUs a cgroup directory's quota files allow, rounded up; None: no limit (or
    no such files: a cgroup namespace hides the path, or the controller is elsewhere)."""
    try:
        values = []
        for name in files:
            with open(os.path.join(directory, name)) as f:
                values.extend(f.read().split())
    except OSError:
        return None
    if len(values) != 2 or values[0] in ("max", "-1"):
        return None
    try:
        quota, period = int(values[0]), int(values[1])
    except ValueError:
        return None
    return -(-quota // period) if quota > 0 and period > 0 else None


#: The CPUs this process may use, read once at import.
CPUS = cpu_budget()
#: Threads of the shared pool: the CPUs this process may use (at least 2).
DEFAULT_WORKERS = max(2, CPUS)
#: One batch per worker plus one being emitted keeps every worker busy.
DEFAULT_MAX_IN_FLIGHT = DEFAULT_WORKERS + 1


@dataclass(frozen=True, slots=True)
class OffloadPolicy:
    """When work leaves the event loop, and how much of it at once.

    ``inline_limit``: work smaller than this always runs on the loop thread.
    ``batch_size``: bytes of work handed to a worker per hop.
    ``max_in_flight``: batches submitted but not yet emitted (bounds memory).
    ``workers``: threads of the shared pool (ignored when ``executor`` is given).
    ``executor``: any ``concurrent.futures.Executor`` to run batches on instead.
    ``adaptive``: measure each path and keep work inline where offload does not pay
    (the default); ``False`` offloads every batch of at least ``inline_limit``.
    Pass ``policy=None`` wherever a policy is taken to keep everything inline.
    """

    inline_limit: int = DEFAULT_INLINE_LIMIT
    batch_size: int = DEFAULT_BATCH_SIZE
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    workers: int = DEFAULT_WORKERS
    executor: futures.Executor | None = None
    adaptive: bool = True

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.max_in_flight < 1 or self.workers < 1:
            raise InvalidParameterError("batch_size, max_in_flight and workers must be positive")
        if self.inline_limit < 0:
            raise InvalidParameterError("inline_limit must be >= 0")

    def submit(self, fn: Callable[[Unpack[Ts]], T], *args: *Ts) -> Pending[T]:
        """Start ``fn(*args)`` on a worker thread; returns at once."""
        if self.executor is not None:
            return self.executor.submit(fn, *args)
        return start(fn, *args, workers=self.workers)

    async def run(self, fn: Callable[[Unpack[Ts]], T], *args: *Ts) -> T:
        """``fn(*args)`` on a worker thread, awaited (for one-off work such as a KDF)."""
        return await wait_future(self.submit(fn, *args))


DEFAULT_POLICY = OffloadPolicy()


class Pending(Protocol[T_co]):
    """Work started on a worker: the engine's :class:`Task`, or the ``Future`` of an
    executor given in the policy (the scheduler needs only these four methods)."""

    def done(self) -> bool: ...

    def cancel(self) -> bool: ...

    def result(self) -> T_co: ...

    def add_done_callback(self, fn: Callable[[Any], object]) -> None: ...


_PENDING, _RUNNING, _DONE, _CANCELLED = range(4)


class Task(Generic[T]):
    """``fn(*args)`` submitted to the engine's pool: a light future (``done``,
    ``cancel`` before it started, ``result`` waiting for it, ``add_done_callback``)."""

    __slots__ = ("_args", "_callbacks", "_error", "_finished", "_fn", "_lock", "_state", "_value")

    def __init__(self, fn: Callable[..., T], args: tuple[Any, ...]) -> None:
        self._fn = fn
        self._args = args
        self._state = _PENDING
        self._value: T | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Any], object]] = []
        self._lock = threading.Lock()  # its own: threads finishing other tasks never wait
        self._finished = threading.Lock()  # held until the task is done or cancelled
        self._finished.acquire()

    def done(self) -> bool:
        return self._state >= _DONE

    def cancel(self) -> bool:
        """Drop the task if no thread started it (then ``True``)."""
        with self._lock:
            if self._state != _PENDING:
                return self._state == _CANCELLED
            self._state = _CANCELLED
            del self._fn, self._args  # never run: no cycle through a batch's method
        self._end()
        return True

    def result(self) -> T:
        """Wait for the task; its value, or raise what it raised.

        Raises :class:`~streamcrypt.errors.BrokenTransformError` if it was cancelled."""
        if self._state < _DONE:
            with self._finished:
                pass
        if self._state == _CANCELLED:
            raise BrokenTransformError("the work was cancelled before it ran")
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def add_done_callback(self, fn: Callable[[Any], object]) -> None:
        """Call ``fn(task)`` once it is done or cancelled (at once if it is)."""
        with self._lock:
            if self._state < _DONE:
                self._callbacks.append(fn)
                return
        fn(self)

    def run(self) -> None:
        """Run the task on this thread, unless it was cancelled."""
        if self._call():
            self._settle()

    def _call(self) -> bool:
        """Run ``fn`` and keep what it gave; ``False`` if the task was cancelled."""
        with self._lock:
            if self._state != _PENDING:
                return False
            self._state = _RUNNING
        try:
            self._value = self._fn(*self._args)
        except BaseException as exc:
            self._error = exc
        finally:
            # What it ran on may be large (a batch, a buffer), and a batch's method refers
            # back to its task: freed now, not by a garbage collection.
            del self._fn, self._args
        return True

    def _settle(self) -> None:
        """Mark the task done: wake who waits for it, call its callbacks."""
        with self._lock:
            self._state = _DONE
        self._end()

    def _end(self) -> None:
        self._finished.release()
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)


class _Pool:
    """The engine's one pool of worker threads (daemon threads, made on demand).

    It keeps up to ``capacity`` workers (the most any policy asked for), which take work
    in order from one queue (a C ``SimpleQueue``: a hand-over wakes one thread, no
    condition bounced between threads); work submitted while they are all busy waits its
    turn. Work that must start at once (a helper of the command's turns, its writer, a
    wait on I/O that may never end: they wait for other threads or the world) gets a
    thread of its own, counted apart (``extra``): however many such threads run or wait,
    the pool keeps its workers, so queued work always has a thread to come. Such a thread
    joins the workers when its task is done if they are fewer than ``capacity``, and ends
    otherwise."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: SimpleQueue[Task[Any]] = SimpleQueue()
        self.capacity = 0
        self.threads = 0  # the kept workers
        self.extra = 0  # threads running work that had to start at once
        self._idle = 0  # workers waiting for work that no submission has claimed yet
        self._waiting = 0  # work queued while every worker was busy, not claimed yet

    @property
    def busy(self) -> int:
        """Threads running work (or about to)."""
        return self.threads + self.extra - self._idle

    def submit(self, task: Task[Any], workers: int, *, now: bool = False) -> None:
        with self._lock:
            self.capacity = max(self.capacity, workers)
            if now:
                spawn = True
                self.extra += 1
            elif self._idle:
                self._idle -= 1
                spawn = False
            else:
                spawn = self.threads < self.capacity
                self._waiting += not spawn
                self.threads += spawn
        if not now:
            self._queue.put(task)
        if spawn:  # outside the lock: starting a thread waits for it to run
            first = task if now else None
            thread = threading.Thread(
                target=self._work, args=(first,), name="streamcrypt-worker", daemon=True
            )
            try:
                thread.start()
            except RuntimeError:  # interpreter shutdown: the task is never taken
                with self._lock:
                    if now:
                        self.extra -= 1
                    else:
                        self.threads -= 1
                task.cancel()
                raise

    def _work(self, task: Task[Any] | None) -> None:
        if task is not None:  # work that had to start at once, on a thread of its own
            ran = task._call()
            with self._lock:
                self.extra -= 1
                join = self.threads < self.capacity
                if join:
                    self.threads += 1
                    self._take_or_idle()
            if ran:
                task._settle()
            task = None
            if not join:
                return
        get = self._queue.get
        while True:
            task = get()
            ran = task._call()
            with self._lock:  # idle again before its waiters wake
                self._take_or_idle()
            if ran:
                task._settle()
            task = None  # its result is its owner's, not this idle thread's

    def _take_or_idle(self) -> None:
        """A worker's turn ends (under the lock): it takes work queued while every worker
        was busy, or waits idle for the next submission."""
        if self._waiting:
            self._waiting -= 1  # the next get() has work waiting for it
        else:
            self._idle += 1


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _forget_pool_in_child() -> None:
    """After ``fork``: the child has the parent's pool object but none of its threads
    (work submitted there would never run) and maybe locks held by threads that no
    longer exist; it starts with no pool and new locks (gunicorn ``--preload``,
    multiprocessing's fork start)."""
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def start(
    fn: Callable[..., T], *args: Any, workers: int = DEFAULT_WORKERS, now: bool = False
) -> Task[T]:
    """Start ``fn(*args)`` on the engine's pool (``workers``: threads it should keep;
    ``now``: on a thread of its own at once, for work that waits on other threads)."""
    global _pool
    task = Task(fn, args)
    with _pool_lock:
        if _pool is None:
            _pool = _Pool()
        pool = _pool
    pool.submit(task, workers, now=now)
    return task


class WorkerCalls:
    """Blocking calls (file I/O, a KDF) on the policy's workers, remembered until they
    finished, so that their owner can :meth:`settle` them before it closes what they
    use (a file descriptor). ``policy=None`` still runs them on the default policy's
    workers: blocking I/O never runs on the event loop."""

    def __init__(self, policy: OffloadPolicy | None) -> None:
        self._policy = policy or DEFAULT_POLICY
        self._running: set[Pending[Any]] = set()

    def start(self, fn: Callable[..., T], *args: Any) -> Pending[T]:
        """Start ``fn(*args)`` on a worker; remembered until it finished."""
        return self.watch(self._policy.submit(fn, *args))

    def watch(self, future: Pending[T]) -> Pending[T]:
        """Remember ``future``, work started elsewhere that uses what the owner closes (a
        batch dropped by a seek reads the descriptor), until it finished."""
        self._running.add(future)
        future.add_done_callback(self._running.discard)
        return future

    async def run(self, fn: Callable[[Unpack[Ts]], T], *args: *Ts) -> T:
        """``fn(*args)`` on a worker, awaited."""
        return await wait_future(self.start(fn, *args))

    async def settle(self) -> None:
        """Until no call started here is still running (their failures dropped)."""
        while self._running:
            for future in list(self._running):  # done callbacks discard from other threads
                try:
                    await wait_future(future)
                except Exception:
                    pass
                self._running.discard(future)


async def run_io(fn: Callable[[Unpack[Ts]], T], *args: *Ts, abandon: bool = False) -> T:
    """``fn(*args)``, a call that blocks on I/O, off the event loop, awaited: the one way
    streamcrypt's async layers wait on blocking I/O outside the engine's own transports.

    It runs on the engine's pool. Cancelled, a call no thread started is dropped; one
    that started is waited for (it may be using the caller's buffer), then the
    cancellation goes on. ``abandon``: a call
    that may never end (a read of a terminal or a pipe) gets a thread of its own, so the
    pool's CPU work never queues behind it, and a cancelled wait leaves it to finish there,
    its result dropped."""
    task = start(fn, *args, now=abandon)
    if abandon:
        return await wait_future(task)
    import anyio

    try:
        return await wait_future(task)
    except anyio.get_cancelled_exc_class():
        if task.cancel():  # it never started: it never touched the caller's buffer
            raise
        with anyio.CancelScope(shield=True):
            try:
                await wait_future(task)
            except Exception:  # the call's own failure: the cancellation wins
                pass
        raise


def _resolve(waiter: asyncio.Future[None]) -> None:
    """Wake the task awaiting ``waiter`` (on its loop), unless it stopped waiting."""
    if not waiter.done():
        waiter.set_result(None)


async def _wait_trio(future: Pending[Any]) -> None:
    """Until ``future`` is done, on trio (anyio's other backend)."""
    import anyio
    import trio

    event = anyio.Event()
    token = trio.lowlevel.current_trio_token()

    def wake(_future: object) -> None:
        try:
            token.run_sync_soon(event.set)
        except trio.RunFinishedError:
            pass

    future.add_done_callback(wake)
    await event.wait()


async def wait_future(future: Pending[T]) -> T:
    """Await work started on a worker (:class:`Pending`) on asyncio or trio without blocking a thread.

    On asyncio the waiting task awaits a future of its loop, which the worker resolves
    through ``call_soon_threadsafe``: one hop, no event object. Cancelling the wait does
    not stop the work; the caller must treat its state as broken.
    """
    if future.done():
        return future.result()
    loop: asyncio.AbstractEventLoop | None = None
    aio = sys.modules.get("asyncio")  # not imported: not running on asyncio
    if aio is not None:
        try:
            loop = aio.get_running_loop()
        except RuntimeError:  # trio, the other backend anyio runs on
            pass
    if loop is None:
        await _wait_trio(future)
        return future.result()
    waiter: asyncio.Future[None] = loop.create_future()
    call_soon = loop.call_soon_threadsafe

    def wake(_future: object) -> None:
        try:
            call_soon(_resolve, waiter)
        except RuntimeError:  # the loop closed while the work ran: nobody is waiting
            pass

    future.add_done_callback(wake)
    await waiter
    return future.result()
