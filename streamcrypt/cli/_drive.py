"""Running a command's transform stages over its input, without an event loop.

``encrypt`` and ``decrypt`` push their input through the stages and queue the output for
the writer thread. The work per piece is native code and the only hand-offs are the
writer's queue and the threads below; not importing or running an event loop also saves
the command start-up. There are two ways to drive:

* **In turns** (a regular file: reading it never blocks for long). The calling thread and
  helper threads, one per core in all, each take the next piece of :data:`PIECE_SIZE`
  bytes in turn (read it, run the stages before the first segmented one, cut it into
  segment jobs), run its jobs on their own, and the output is passed on in the same
  order. A piece is read and sealed by one thread, its bytes still in that core's cache.
  No thread waits for a piece ahead of its own (one whose thread the system paused): a
  piece run early is kept, at most :data:`_AHEAD` per thread in flight, and passed on by
  whichever thread finds it next in line.
* **Sequentially** (pipes, terminals; or no segmented stage): the calling thread reads a
  piece, pushes it through the stages, and a segmented stage's jobs run through
  :func:`streamcrypt.engine.run_verified`, the calling thread and helpers claiming
  segments side by side. Only the calling thread reads, so Ctrl-C interrupts a blocked
  read.

A segmented stage's output is released as it verifies: when a job fails, what verified
before it goes out first, then the failure is raised (``transform.fail``), so standard
output gets every authenticated byte, as the async pipeline releases them. A failure
in turns is raised at that piece's turn: everything before it was passed on.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence

from ..abc import Buffer, Chain, Transform
from ..codecs import SegmentedTransform, SegmentJob
from ..engine import DEFAULT_POLICY, run_verified
from ..engine import keep_freed_memory as engine_keep_freed_memory

#: The engine's default policy with one helper thread fewer than it has workers (one per
#: core): the calling thread works beside its helpers, so cores - 1 helpers keep every
#: core busy without a thread too many.
_POLICY = dataclasses.replace(DEFAULT_POLICY, workers=max(1, DEFAULT_POLICY.workers - 1))

#: Bytes a thread takes at a time when driving in turns. Each piece costs a fixed amount of
#: Python work (taking a turn, cutting jobs, a new output object, waking the writer), about
#: 2% of sealing 1 MiB; smaller pieces stay in a core's cache but pay that more often.
#: Measured on 2 vCPUs, 1 GiB of age to /dev/null, CPU seconds (medians of 7 alternated
#: runs): 512 KiB 1.48, 1 MiB 1.24, 2 MiB 1.29 (a reader thread and 4 MiB pieces: 1.51).
PIECE_SIZE = 1 << 20
#: Bytes the calling thread reads at a time when driving sequentially.
SEQUENTIAL_SIZE = 4 << 20
#: Threads driving in turns at most, whatever the cores: pieces are read one at a time
#: (~5 GB/s from the page cache, a fifth to a third of the time a ChaCha20-Poly1305 core
#: spends on them), so more threads would wait for the read, each holding up to
#: :data:`_AHEAD` pieces and their output in memory.
MAX_THREADS = 8

__all__ = ["MAX_THREADS", "PIECE_SIZE", "SEQUENTIAL_SIZE", "drive", "keep_freed_memory"]

_Push = Callable[[Buffer], None]


class _Segmented:
    __slots__ = ("_push", "_stage")

    def __init__(self, stage: SegmentedTransform, push: _Push) -> None:
        self._stage = stage
        self._push = push

    def _run(self, jobs: list[SegmentJob]) -> None:
        out, error = run_verified(jobs, _POLICY, head=self._stage.take_header(), site="cli")
        if out:
            self._push(out)
        if error is not None:
            raise self._stage.fail(error) from None

    def push(self, data: Buffer) -> None:
        self._run(self._stage.feed(data))

    def close(self) -> None:
        self._run(self._stage.finish())


class _Plain:
    __slots__ = ("_push", "_stage")

    def __init__(self, stage: Transform, push: _Push) -> None:
        self._stage = stage
        self._push = push

    def push(self, data: Buffer) -> None:
        out = self._stage.update(data)
        if out:
            self._push(out)

    def close(self) -> None:
        out = self._stage.finalize()
        if out:
            self._push(out)


#: Freed memory the process keeps for reuse (glibc): well above what is in flight
#: (the writer's queue, a few pieces per stage).
_KEEP = 256 << 20


def keep_freed_memory() -> None:
    """Have glibc keep freed buffers for reuse instead of returning them to the kernel
    (:func:`streamcrypt.engine.keep_freed_memory`, with a short-lived process's limits).

    Every piece passes through new buffers (read, sealed, armored) that the writer thread
    frees; by default glibc gives large ones back at once (``munmap``, or trimming the
    heap), so the next piece faults its pages in again: a page fault per 4 KiB, measured
    at a third of an armored run's time. Buffers of up to 64 MiB now come from the heap,
    which is trimmed only past :data:`_KEEP` bytes free. A no-op off glibc.
    """
    engine_keep_freed_memory(64 << 20, _KEEP)


def _runners(stages: Sequence[Transform], write: _Push) -> list[_Segmented | _Plain]:
    """A runner per stage, in order, each pushing into the next and the last into ``write``."""
    runners: list[_Segmented | _Plain] = []
    push = write
    for stage in reversed(stages):
        runner = (
            _Segmented(stage, push)
            if isinstance(stage, SegmentedTransform)
            else _Plain(stage, push)
        )
        runners.append(runner)
        push = runner.push
    runners.reverse()
    return runners


#: Pieces in flight per thread when driving in turns: a thread whose piece must wait for
#: an earlier one (on a thread the system paused) takes the next instead of waiting.
_AHEAD = 2

#: What running a piece gave: the failure taking it raised, its output, the failure
#: that stopped its jobs, whether it is the last piece.
_Result = tuple[BaseException | None, Buffer, Exception | None, bool]


class _Turns:
    """Pieces taken, run and passed on in input order by several threads (see the module
    docstring). A piece is a *ticket*: tickets are taken one at a time, run by the thread
    that took them, and passed on in order by whichever thread finds the next one ready;
    at most ``_AHEAD`` per thread are in flight. The first failure stops every thread."""

    def __init__(
        self,
        before: Chain,
        stage: SegmentedTransform,
        later: list[_Segmented | _Plain],
        read: Callable[[int], bytes],
        write: _Push,
        threads: int,
    ) -> None:
        self._before = before
        self._stage = stage
        self._later = later
        self._push = later[0].push if later else write
        self._read = read
        self._threads = threads
        self._take_lock = threading.Lock()
        self._taken = 0  # tickets handed out (under _take_lock)
        self._ended = False  # the last ticket was handed out (under _take_lock)
        self._cond = threading.Condition()
        self._passed = 0  # tickets passed on (under _cond)
        self._ready: dict[int, _Result] = {}  # run, not passed on yet (under _cond)
        self._passing = False  # a thread is passing results on (under _cond)
        self._failure: BaseException | None = None  # the first failure (under _cond)

    def run(self) -> None:
        helpers = [
            threading.Thread(target=self._help, name="streamcrypt-worker", daemon=True)
            for _ in range(self._threads - 1)
        ]
        for helper in helpers:
            helper.start()
        try:
            self._work()
        except BaseException as exc:
            self._stop(exc)
        finally:
            try:
                for helper in helpers:
                    helper.join()
            except BaseException as exc:  # Ctrl-C while waiting: the helpers stop too
                self._stop(exc)
                raise
        if self._failure is not None:  # the first, in input order
            raise self._failure

    def _help(self) -> None:
        try:
            self._work()
        except BaseException as exc:
            self._stop(exc)

    def _stop(self, exc: BaseException) -> None:
        with self._cond:
            if self._failure is None:
                self._failure = exc
            self._cond.notify_all()

    def _take(self) -> tuple[Buffer, list[SegmentJob], bool]:
        """The next piece's header bytes and jobs, and whether it is the last (under
        ``_take_lock``)."""
        piece = self._read(PIECE_SIZE)
        stage = self._stage
        if piece:
            data = self._before.update(piece)
            jobs = stage.feed(data) if data else []
        else:
            data = self._before.finalize()
            jobs = stage.feed(data) if data else []
            jobs += stage.finish()
        return stage.take_header(), jobs, not piece

    def _work(self) -> None:
        """Take and run pieces, passing on those ready, until the last one or a failure."""
        window = self._threads * _AHEAD
        while True:
            with self._take_lock:
                with self._cond:
                    while self._taken - self._passed >= window and self._failure is None:
                        self._cond.wait()
                if self._ended or self._failure is not None:
                    return
                ticket = self._taken
                self._taken += 1
                failed: BaseException | None = None
                try:
                    head, jobs, last = self._take()
                except BaseException as exc:  # passed on (raised) in its turn
                    failed, head, jobs, last = exc, b"", [], True
                self._ended = last
            out, error = run_verified(jobs, None, head=head) if jobs else (head, None)
            self._pass_ready(ticket, (failed, out, error, last))

    def _pass_ready(self, ticket: int, result: _Result) -> None:
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
                if next_result is None or self._failure is not None:
                    self._passing = False
                    return
            failed, out, error, last = next_result
            if failed is not None:
                raise failed
            if out:
                self._push(out)
            if error is not None:
                raise self._stage.fail(error) from None
            if last:
                for runner in self._later:
                    runner.close()
            with self._cond:
                self._passed += 1
                self._cond.notify_all()


def drive(
    stages: Sequence[Transform],
    read: Callable[[int], bytes],
    write: _Push,
    *,
    threads: int = 1,
) -> None:
    """Push every piece ``read(n)`` returns (at most ``n`` bytes; ``b""``: the end) through
    ``stages`` in order, then finish each; ``write`` gets the output, objects it may keep.

    ``threads`` above 1 drives in turns (see the module docstring) with that many
    threads, :data:`MAX_THREADS` at most: ``read`` is then called from any of them, one
    at a time, and must not block for long (a regular file).
    """
    chain = Chain(*stages).stages
    first = next((i for i, s in enumerate(chain) if isinstance(s, SegmentedTransform)), None)
    if threads > 1 and first is not None:
        stage = chain[first]
        assert isinstance(stage, SegmentedTransform)
        later = _runners(chain[first + 1 :], write)
        threads = min(threads, MAX_THREADS)
        _Turns(Chain(*chain[:first]), stage, later, read, write, threads).run()
        return
    runners = _runners(chain, write)
    head = runners[0]
    while piece := read(SEQUENTIAL_SIZE):
        head.push(piece)
    for runner in runners:
        runner.close()
