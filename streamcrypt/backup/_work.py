"""Work on the engine's worker threads: one call, or a stream of jobs in order.

Everything blocking or CPU-heavy in a backup (reading and chunking files, hashing,
compressing, reading and opening packs, writing restored files) runs on the worker
threads of the :class:`~streamcrypt.engine.OffloadPolicy` given, through its public
``submit`` and :func:`~streamcrypt.engine.wait_future`; ``policy=None`` runs it inline.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import Future, wait
from typing import Any, TypeVar

from ..engine import OffloadPolicy, wait_future

__all__ = ["ordered", "run_blocking", "submit"]

T = TypeVar("T")
J = TypeVar("J")


def submit(policy: OffloadPolicy | None, fn: Callable[..., T], *args: Any) -> Future[T]:
    """Start ``fn(*args)`` on a worker (inline, already done, when ``policy`` is None)."""
    if policy is not None:
        return policy.submit(fn, *args)
    future: Future[T] = Future()
    try:
        future.set_result(fn(*args))
    except Exception as exc:
        future.set_exception(exc)
    return future


async def run_blocking(policy: OffloadPolicy | None, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` on the policy's worker threads (inline when ``policy`` is None)."""
    if policy is None:
        return fn(*args)
    return await wait_future(policy.submit(fn, *args))


async def ordered(
    policy: OffloadPolicy | None, jobs: deque[J], run: Callable[[J], T]
) -> AsyncGenerator[tuple[J, T], None]:
    """``(job, run(job))`` for the jobs of the deque, in submission order, a few at once.

    ``max(policy.max_in_flight, workers + 1)`` jobs are in flight, so every worker stays
    busy while the loop takes the oldest result. The consumer may put jobs back on the deque (a large
    file's next step) between results. If a job fails, or the consumer stops, the jobs
    still running finish before this returns (they may touch what the caller cleans up).
    """
    limit = 1 if policy is None else max(policy.max_in_flight, policy.workers + 1)
    inflight: deque[tuple[J, Future[T]]] = deque()
    try:
        while jobs or inflight:
            while jobs and len(inflight) < limit:
                job = jobs.popleft()
                inflight.append((job, submit(policy, run, job)))
            job, future = inflight.popleft()
            yield job, await wait_future(future)
    finally:
        wait([f for _, f in inflight])
