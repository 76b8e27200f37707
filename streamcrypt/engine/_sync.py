"""Synchronous drivers: the engine's scheduler for callers without an event loop.

Theory of operation
-------------------
The ``streamcrypt`` command reads, seals and writes without an event loop (importing and
running one, or ``concurrent.futures`` and the ``logging`` it brings, would cost its
start-up more than a short run gains). It needs two things the async scheduler
(:class:`~._batches.OrderedBatches`) does for the loop; both live here and run on the
engine's one pool (:func:`~._offload.start`, with ``now``: they wait on each other's
threads, so they take an idle worker or a new one rather than queue behind work):

* :func:`run_in_turns`: pieces taken one at a time, in order (``take``), each run by the
  thread that took it (``run``: its bytes are still in that core's cache), and passed on
  in order (``pass_on``) by whichever thread finds the next one ready. No thread waits
  for a piece ahead of its own (one whose thread the system paused): it takes the next,
  at most ``ahead`` per thread in flight. The first failure stops every thread and is
  raised in its piece's turn, after every piece before it was passed on. The jobs of a
  piece run through :func:`~._batches.run_verified`, so output memory is the engine's.
* :class:`WriteBehind`: blocking writes of queued buffers, in order, on a thread behind
  the producer, so that writing overlaps the work that produces the bytes; the queue is
  bounded and the first write error stops it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from ..abc import Buffer
from ._offload import start

#: Buffers per ``write`` call at most (one ``writev``).
_IOV_MAX = 64

P = TypeVar("P")
R = TypeVar("R")


class _Turns(Generic[P, R]):
    """The state :func:`run_in_turns` shares between its threads."""

    def __init__(
        self,
        take: Callable[[], tuple[P, bool]],
        run: Callable[[P], R],
        pass_on: Callable[[R], None],
        window: int,
    ) -> None:
        self._take = take
        self._run = run
        self._pass_on = pass_on
        self._window = window
        self._take_lock = threading.Lock()
        self._taken = 0  # pieces handed out (under _take_lock)
        self._ended = False  # the last piece was handed out (under _take_lock)
        self._cond = threading.Condition()
        self._passed = 0  # pieces passed on (under _cond)
        # Run, not passed on yet: the result, or the failure taking or running it raised.
        self._ready: dict[int, tuple[R | None, BaseException | None]] = {}  # (under _cond)
        self._passing = False  # a thread is passing results on (under _cond)
        self.failure: BaseException | None = None  # the first failure (under _cond)

    def stop(self, exc: BaseException) -> None:
        with self._cond:
            if self.failure is None:
                self.failure = exc
            self._cond.notify_all()

    def help(self) -> None:
        """A helper's loop: never raises (a failure stops every thread)."""
        try:
            self.work()
        except BaseException as exc:
            self.stop(exc)

    def work(self) -> None:
        """Take and run pieces, passing on those ready, until the last one or a failure."""
        while True:
            with self._take_lock:
                with self._cond:
                    while self._taken - self._passed >= self._window and self.failure is None:
                        self._cond.wait()
                if self._ended or self.failure is not None:
                    return
                ticket = self._taken
                self._taken += 1
                try:
                    piece, self._ended = self._take()
                except BaseException as exc:  # raised in its turn
                    self._ended = True
                    self._pass_ready(ticket, (None, exc))
                    return
            try:
                result: tuple[R | None, BaseException | None] = (self._run(piece), None)
            except BaseException as exc:
                result = (None, exc)
            self._pass_ready(ticket, result)

    def _pass_ready(self, ticket: int, result: tuple[R | None, BaseException | None]) -> None:
        """Keep ``result``; pass on every result ready in order, unless another thread is
        passing them on (it will pass this one too). Raises what a result holds."""
        with self._cond:
            self._ready[ticket] = result
            if self._passing or self._passed not in self._ready:
                return
            self._passing = True
        while True:
            with self._cond:
                next_result = self._ready.pop(self._passed, None)
                if next_result is None or self.failure is not None:
                    self._passing = False
                    return
            value, failed = next_result
            if failed is not None:
                raise failed
            self._pass_on(value)  # type: ignore[arg-type]
            with self._cond:
                self._passed += 1
                self._cond.notify_all()


def run_in_turns(
    take: Callable[[], tuple[P, bool]],
    run: Callable[[P], R],
    pass_on: Callable[[R], None],
    *,
    threads: int,
    ahead: int = 2,
) -> None:
    """Take pieces with ``take()`` (one call at a time, in order: the piece and whether it
    is the last), run each with ``run(piece)`` on the thread that took it, and give each
    result to ``pass_on`` in order (one call at a time); see the module docstring.

    The calling thread works beside ``threads - 1`` helper threads, which have all ended
    when this returns. Raises the first failure, in its piece's turn.
    """
    turns = _Turns(take, run, pass_on, max(1, threads) * ahead)
    helpers = [start(turns.help, now=True) for _ in range(threads - 1)]
    try:
        turns.work()
    except BaseException as exc:
        turns.stop(exc)
    finally:
        try:
            for helper in helpers:
                helper.result()
        except BaseException as exc:  # Ctrl-C while waiting: the helpers stop too
            turns.stop(exc)
            raise
    if turns.failure is not None:  # the first, in input order
        raise turns.failure


class WriteBehind:
    """Blocking writes of queued buffers, in order, on a pool thread behind the
    producer (see the module docstring). ``write(items)`` writes them all or raises
    ``OSError``, which stops the queue and is kept in :attr:`error`.
    """

    def __init__(self, write: Callable[[list[Buffer]], None], ahead: int) -> None:
        self._write = write
        self._ahead = ahead
        self._items: deque[Buffer] = deque()
        self._queued = 0
        self._cond = threading.Condition()
        self._closing = False  # no more items: finish the queue, then stop
        self._dropping = False  # stop at once
        self._done = False
        self._idle = False  # the writer waits for items
        self._full = False  # the producer waits for room
        #: The first write error (then nothing more is written).
        self.error: OSError | None = None
        #: Bytes written so far (not counting those still queued).
        self.written = 0
        self._task = start(self._run, now=True)

    def put(self, data: Buffer, wake_at: int = 0) -> bool:
        """Queue ``data`` (kept until written); ``True`` when more than ``ahead`` bytes
        wait (then call :meth:`wait_room`, off an event loop). A sleeping writer is woken
        once ``wake_at`` bytes are queued (a wake-up costs a hand-over of the GIL), and
        by :meth:`close`."""
        with self._cond:
            self._items.append(data)
            self._queued += len(data)
            if self._idle and self._queued >= wake_at:
                self._cond.notify_all()
            return self._queued > self._ahead

    def wait_room(self) -> None:
        """Until at most ``ahead`` bytes wait to be written (or writing stopped)."""
        with self._cond:
            while self._queued > self._ahead and not self._done:
                self._full = True
                self._cond.wait()
            self._full = False

    def close(self, *, drop: bool = False) -> None:
        """Stop after writing what is queued (or at once, ``drop``) and wait for it."""
        with self._cond:
            self._closing = True
            self._dropping = self._dropping or drop
            self._cond.notify_all()
        self._task.result()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items and not self._closing:
                    self._idle = True
                    self._cond.wait()
                self._idle = False
                if self._dropping or not self._items:
                    break
                batch = [self._items.popleft() for _ in range(min(_IOV_MAX, len(self._items)))]
            size = sum(map(len, batch))
            try:
                self._write(batch)
            except OSError as exc:
                self.error = exc
                break
            finally:
                with self._cond:
                    self._queued -= size
                    if self._full and self._queued <= self._ahead:
                        self._cond.notify_all()
            self.written += size
        with self._cond:
            self._done = True
            self._items.clear()
            self._cond.notify_all()
