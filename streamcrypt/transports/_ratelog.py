"""Failure logging at a bounded rate: a flood of bad peers must not flood the log.

The first ``burst`` failures of each ``interval`` are logged one line each; after that
only a count is kept, and the next failure after the interval ends first logs one summary
line (how many were left out, and of which error types). Messages come from the callers,
which never put key bytes or plaintext in them.
"""

from __future__ import annotations

import logging
import time
from collections import Counter


class FailureLog:
    """Logs failures on ``logger``, at most ``burst`` lines per ``interval`` seconds."""

    def __init__(self, logger: logging.Logger, *, burst: int = 10, interval: float = 10.0) -> None:
        self.logger = logger
        self.burst = burst
        self.interval = interval
        self._window_start = time.monotonic()
        self._logged = 0
        self._dropped: Counter[str] = Counter()

    def failure(self, what: str, exc: BaseException | None = None, *, trace: bool = False) -> None:
        """Log that ``what`` failed (a sentence naming the peer), with the error: one
        line ``<what>: <ErrorType>: <message>``, so a line always says what failed, even
        when the error's message is a bare value (a number) or empty. ``trace``: with
        the traceback (an unexpected error)."""
        now = time.monotonic()
        if now - self._window_start >= self.interval:
            self._flush(now)
        kind = "refused" if exc is None else type(exc).__name__
        if self._logged < self.burst:
            self._logged += 1
            if exc is None:
                self.logger.warning("%s", what)
                return
            text = " ".join(str(exc).split())
            self.logger.warning(
                "%s: %s%s",
                what,
                kind,
                f": {text}" if text else "",
                exc_info=exc if trace else None,
            )
        else:
            self._dropped[kind] += 1

    def _flush(self, now: float) -> None:
        if self._dropped:
            total = sum(self._dropped.values())
            kinds = ", ".join(f"{k} x{n}" for k, n in self._dropped.most_common())
            self.logger.warning(
                "%d more failures in the last %.0f s were not logged one by one (%s)",
                total,
                now - self._window_start,
                kinds,
            )
        self._window_start = now
        self._logged = 0
        self._dropped.clear()
