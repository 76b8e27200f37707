"""All bridging to worker threads lives here: the offload policy and how work is awaited.

Native kernels (OpenSSL through ``cryptography`` >= 50, libsodium, BLAKE3) release the GIL
on large inputs, so work on other threads runs on other cores. A thread hop is expensive
next to the kernel, so work crosses in batches of many segments, a bounded number of
batches in flight, and small work stays on the event loop.

Work is submitted to a ``concurrent.futures.Executor`` (the policy's, or one shared pool
of ``workers`` threads) without awaiting, so batches run while the loop reads the next
input; a finished future wakes the loop through the backend's own thread-safe scheduler
(``call_soon_threadsafe`` on asyncio, the trio token on trio), so waiting costs no thread.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from ..errors import InvalidParameterError

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_INLINE_LIMIT",
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_POLICY",
    "DEFAULT_WORKERS",
    "OffloadPolicy",
    "wait_future",
]

T = TypeVar("T")

# Measured 2026-12-02 on the project's 2-core AMD EPYC (VAES, AVX-512); `make bench`,
# section "engine", repeats these. A hop as done here (executor submit, then a wake through
# the loop's thread-safe scheduler) costs 29-54 us (uvloop), 55-89 us (asyncio), 68-73 us
# (trio), medians over runs; anyio.to_thread measured 37-200 us (it blocks a thread while
# waiting, and takes no Executor). Sealing 64 KiB costs 3.8 us with AES-256-GCM
# (17 GB/s hot, ~9 GB/s streaming from memory) and 14.6 us with ChaCha20-Poly1305
# (4.5 GB/s). Below 1 MiB of work a hop is not worth it.
DEFAULT_INLINE_LIMIT = 1 << 20
# 4 MiB is ~0.45 ms of AES-GCM and ~1 ms of ChaCha20 work per hop (hop <= 10% of it);
# 8 MiB was no faster and doubled memory: peak RSS growth of an encrypt | decrypt chain
# was 109 MiB at 8 MiB x 3, 61 MiB at 4 MiB x 3, 38 MiB at 2 MiB x 3.
DEFAULT_BATCH_SIZE = 4 << 20
# Two cores: one batch per worker plus one being emitted keeps both busy.
DEFAULT_MAX_IN_FLIGHT = 3
DEFAULT_WORKERS = max(2, os.cpu_count() or 2)


@dataclass(frozen=True, slots=True)
class OffloadPolicy:
    """When work leaves the event loop, and how much of it at once.

    ``inline_limit``: batches smaller than this run on the loop thread.
    ``batch_size``: bytes of segments handed to a worker per hop.
    ``max_in_flight``: batches submitted but not yet emitted (bounds memory).
    ``workers``: threads of the shared pool (ignored when ``executor`` is given).
    ``executor``: any ``concurrent.futures.Executor`` to run batches on instead.
    Pass ``policy=None`` wherever a policy is taken to keep everything inline.
    """

    inline_limit: int = DEFAULT_INLINE_LIMIT
    batch_size: int = DEFAULT_BATCH_SIZE
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    workers: int = DEFAULT_WORKERS
    executor: Executor | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.max_in_flight < 1 or self.workers < 1:
            raise InvalidParameterError("batch_size, max_in_flight and workers must be positive")
        if self.inline_limit < 0:
            raise InvalidParameterError("inline_limit must be >= 0")

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Start ``fn(*args)`` on a worker thread; returns at once."""
        return (self.executor or _shared_pool(self.workers)).submit(fn, *args)


DEFAULT_POLICY = OffloadPolicy()

_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _shared_pool(workers: int) -> ThreadPoolExecutor:
    with _pools_lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = ThreadPoolExecutor(
                workers, thread_name_prefix="streamcrypt-worker"
            )
        return pool


def _waker(event: anyio.Event) -> Callable[[], None]:
    """A function any thread may call to set ``event`` on the current event loop."""
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: trio is the other backend anyio runs on
        import trio

        token = trio.lowlevel.current_trio_token()

        def wake_trio() -> None:
            try:
                token.run_sync_soon(event.set)
            except trio.RunFinishedError:
                pass

        return wake_trio

    def wake_asyncio() -> None:
        try:
            loop.call_soon_threadsafe(event.set)
        except RuntimeError:  # the loop closed while the work ran: nobody is waiting
            pass

    return wake_asyncio


async def wait_future(future: Future[T]) -> T:
    """Await a ``concurrent.futures.Future`` on asyncio or trio without blocking a thread.

    Cancelling the wait does not stop the work; the caller must treat its state as broken.
    """
    if not future.done():
        event = anyio.Event()
        wake = _waker(event)
        future.add_done_callback(lambda _f: wake())
        await event.wait()
    return future.result()
