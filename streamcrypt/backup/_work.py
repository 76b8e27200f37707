"""Blocking work on the engine's worker threads, one call at a time.

Everything blocking or CPU-heavy in a backup (reading and chunking files, hashing,
compressing, reading and opening packs, writing restored files) runs on the worker
threads of the :class:`~streamcrypt.engine.OffloadPolicy` given; ``policy=None`` runs it
inline. Streams of such calls, in order, go through the engine's scheduler
(:func:`~streamcrypt.engine.ordered_calls`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..engine import OffloadPolicy, Pending, Task

T = TypeVar("T")


def submit(policy: OffloadPolicy | None, fn: Callable[..., T], *args: Any) -> Pending[T]:
    """Start ``fn(*args)`` on a worker (inline, already done, when ``policy`` is None)."""
    if policy is not None:
        return policy.submit(fn, *args)
    task = Task(fn, args)
    task.run()
    return task


async def run_blocking(policy: OffloadPolicy | None, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` on the policy's worker threads (inline when ``policy`` is None)."""
    if policy is None:
        return fn(*args)
    return await policy.run(fn, *args)
