"""Running a command's transform stages over its input, without an event loop.

``encrypt`` and ``decrypt`` push their input through the stages and queue the output for
writing (:class:`streamcrypt.engine.WriteBehind`, in :mod:`._io`). The work per piece is
native code; not importing or running an event loop saves the command start-up. Both
ways to drive run on the engine's synchronous scheduler; this module makes no thread of
its own:

* **In turns** (a regular file: reading it never blocks for long), through
  :func:`streamcrypt.engine.run_in_turns`: the calling thread and the engine's helper
  threads, one per core in all, each take the next piece of :data:`PIECE_SIZE`
  bytes in turn (read it, run the stages before the first segmented one, cut it into
  segment jobs), run its jobs on their own, and the output is passed on in the same
  order. A piece is read and sealed by one thread, its bytes still in that core's cache.
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
from collections.abc import Callable, Sequence

from ..abc import Buffer, Chain, Transform
from ..codecs import SegmentedTransform, SegmentJob
from ..engine import DEFAULT_POLICY, run_in_turns, run_verified
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
#: spends on them), so more threads would wait for the read, each holding up to two
#: pieces and their output in memory.
MAX_THREADS = 8

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


def _in_turns(
    before: Chain,
    stage: SegmentedTransform,
    later: list[_Segmented | _Plain],
    read: Callable[[int], bytes],
    write: _Push,
    threads: int,
) -> None:
    """Drive in turns (see the module docstring) on the engine's synchronous scheduler:
    each piece is read and cut into jobs in order (under the scheduler's lock), its jobs
    run by the thread that took it, the output passed on in order."""
    push = later[0].push if later else write

    def take() -> tuple[tuple[Buffer, list[SegmentJob]], bool]:
        piece = read(PIECE_SIZE)
        if piece:
            data = before.update(piece)
            jobs = stage.feed(data) if data else []
        else:
            data = before.finalize()
            jobs = stage.feed(data) if data else []
            jobs += stage.finish()
        return (stage.take_header(), jobs), not piece

    def run(piece: tuple[Buffer, list[SegmentJob]]) -> tuple[Buffer, Exception | None]:
        head, jobs = piece
        return run_verified(jobs, None, head=head) if jobs else (head, None)

    def pass_on(result: tuple[Buffer, Exception | None]) -> None:
        out, error = result
        if out:
            push(out)
        if error is not None:
            raise stage.fail(error) from None

    run_in_turns(take, run, pass_on, threads=threads)
    for runner in later:
        runner.close()


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
        _in_turns(Chain(*chain[:first]), stage, later, read, write, threads)
        return
    runners = _runners(chain, write)
    head = runners[0]
    while piece := read(SEQUENTIAL_SIZE):
        head.push(piece)
    for runner in runners:
        runner.close()
