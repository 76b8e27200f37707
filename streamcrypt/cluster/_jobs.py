"""Submitting tasks to a Dask client and turning their outcomes into one summary.

A task reports a data failure (any :class:`StreamCryptError`: wrong key, tampering,
truncation, a malformed header) as its result, so it is not retried and fails alone.
Anything else it raises (an I/O error, a worker killed under it) goes to Dask, which runs
it again up to ``retries`` times (a killed worker's tasks are rescheduled by the
scheduler itself); what still fails is recorded under its exception's class name.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from distributed import Client, as_completed


@dataclass(frozen=True, slots=True)
class ObjectResult:
    """What one task did: bytes read and written, or the failure that stopped it."""

    source: str
    destination: str | None
    bytes_in: int = 0
    bytes_out: int = 0
    error: str | None = None  # the exception's class name, e.g. "AuthenticationError"
    message: str = ""


#: Called on the client with each task's result as it completes (a progress bar).
Progress = Callable[[ObjectResult], object]


@dataclass(frozen=True, slots=True)
class Failure:
    """One object that failed: its URL, the typed error's class name, the message."""

    url: str
    error: str
    message: str


@dataclass(frozen=True, slots=True)
class Summary:
    """The outcome of a cluster job. ``ok`` when nothing failed."""

    operation: str
    objects: int
    succeeded: int
    bytes_in: int
    bytes_out: int
    seconds: float
    tasks: int
    failures: tuple[Failure, ...] = field(default=())
    temporaries_removed: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failed(self) -> int:
        return len(self.failures)


def run_tasks(
    client: Client,
    task: Callable[..., ObjectResult],
    items: Sequence[Any],
    spec: object,
    name: str,
    labels: Sequence[str],
    *,
    retries: int,
    progress: Progress | None,
) -> list[ObjectResult]:
    """``task(item, spec=spec)`` for each of ``items`` on ``client`` (task keys
    ``name-i``), waited for; a task that raised becomes a failed result under its label.
    Every task still running is cancelled on the way out (an error, a cancellation)."""
    keys = [f"{name}-{i}" for i in range(len(items))]
    futures = client.map(task, items, spec=spec, key=keys, retries=retries, pure=False)
    results: list[ObjectResult] = []
    try:
        where = {future.key: label for future, label in zip(futures, labels, strict=True)}
        for future in as_completed(futures):  # type: ignore[no-untyped-call]
            if future.status == "finished":
                result: ObjectResult = future.result()
            else:
                exc = future.exception()
                result = ObjectResult(
                    where[future.key], None, error=type(exc).__name__, message=str(exc)
                )
            results.append(result)
            if progress is not None:
                progress(result)
    finally:
        client.cancel(futures)  # type: ignore[no-untyped-call]
    return results


def summarize(
    operation: str,
    results: Sequence[ObjectResult],
    started: float,
    *,
    objects: int | None = None,
    tasks: int | None = None,
    removed: int = 0,
) -> Summary:
    failures = tuple(Failure(r.source, r.error, r.message) for r in results if r.error is not None)
    count = len(results) if objects is None else objects
    return Summary(
        operation=operation,
        objects=count,
        succeeded=count - len({f.url for f in failures}),
        bytes_in=sum(r.bytes_in for r in results),
        bytes_out=sum(r.bytes_out for r in results),
        seconds=time.perf_counter() - started,
        tasks=len(results) if tasks is None else tasks,
        failures=failures,
        temporaries_removed=removed,
    )
