"""Whether a batch leaves the event loop: measured on the path it is on.

Theory of operation
-------------------
Offload pays only when the threads it adds get a core and the GIL, which no constant can
predict, so a :class:`Controller` per scheduler measures its own path in *epochs* of
``EPOCH_BATCHES`` batches' worth of bytes: it starts in the mode its *site* last settled
on in this process, probes the other mode after ``period`` epochs and keeps the faster
(median of three epochs, inline on a tie within ``MARGIN``), doubling the period up to
``MAX_STAY`` while the verdict holds. A site with no verdict runs inline and first probes
once it ran ``COLD_PROBE_RATIO`` times the probe's bytes (:func:`_first_period`); with
one CPU it never probes. One-shot calls (:func:`~._batches.run_verified`) measure the
share their helpers claim instead (``MIN_HELPER_SHARE``). Figures and reasons:
docs/ENGINE.md ("Inline or offload").
"""

from __future__ import annotations

import os
import time

from . import _offload
from ._offload import OffloadPolicy

#: Bytes per inline batch: the loop checkpoints between batches, so this bounds the time
#: the loop is held (0.6 ms at the slowest one-thread AES-GCM measured, 1.6 GB/s).
INLINE_BATCH = 1 << 20
EPOCH_BATCHES = 4
MARGIN = 1.05
MAX_STAY = 32
MIN_HELPER_SHARE = 0.15
#: A fresh site's first probe waits until it ran this many times the probe's bytes inline.
COLD_PROBE_RATIO = 32

#: The last verdict of every site in this process (True: offload) and its probing period.
_VERDICTS: dict[str, tuple[bool, int]] = {}


def _forget_verdicts_in_child() -> None:
    """After ``fork``: what the parent measured was measured with its threads and CPUs;
    the child measures its own."""
    _VERDICTS.clear()
    _ONESHOT.clear()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_verdicts_in_child)


class Controller:
    """Decides, batch by batch, whether work on one path goes to workers."""

    __slots__ = (
        "_adaptive",
        "_chosen",
        "_epoch_bytes",
        "_mark",
        "_offload",
        "_period",
        "_policy",
        "_probing",
        "_rates",
        "_site",
        "_stay",
        "_warm",
    )

    def __init__(self, policy: OffloadPolicy, site: str) -> None:
        self._policy = policy
        self._site = site
        self._adaptive = policy.adaptive
        if not policy.adaptive:
            chosen, period = True, 1
        else:
            chosen, period = _VERDICTS.get(site) or (False, _first_period(policy))
        self._chosen = self._offload = chosen
        self._period = self._stay = period
        self._rates: dict[bool, list[float]] = {False: [], True: []}
        self._epoch_bytes = 0
        self._mark = time.perf_counter()
        self._warm = self._warmup()
        self._probing = False

    @property
    def offloading(self) -> bool:
        """The current mode (a batch below ``inline_limit`` stays inline regardless)."""
        return self._offload

    @property
    def batch_size(self) -> int:
        """Bytes per batch in the current mode."""
        size = self._policy.batch_size
        return size if self._offload else min(size, INLINE_BATCH)

    def launch(self, size: int) -> bool:
        """Account a batch of ``size`` bytes; ``True`` if it should run on a worker."""
        offload = self._offload and size >= self._policy.inline_limit
        if self._adaptive:
            self._account(size)
        return offload

    def _warmup(self) -> int:
        """Bytes not measured after a switch: offloading, the window filling; inline, the
        last offloaded batches draining."""
        return self._policy.max_in_flight * self.batch_size

    def _account(self, size: int) -> None:
        if self._warm > 0:
            self._warm -= size
            if self._warm <= 0:
                self._mark = time.perf_counter()
            return
        self._epoch_bytes += size
        if self._epoch_bytes < EPOCH_BATCHES * self._policy.batch_size:
            return
        now = time.perf_counter()
        rate = self._epoch_bytes / max(now - self._mark, 1e-9)
        self._mark, self._epoch_bytes = now, 0
        rates = self._rates[self._offload]
        rates.append(rate)
        del rates[:-3]
        if self._probing:
            self._probing = False
            best = self._best()
            self._period = min(self._period * 2, MAX_STAY) if best == self._chosen else 1
            self._stay = self._period
            self._chosen = best
            _VERDICTS[self._site] = (best, self._period)
            self._switch(best)
            return
        self._stay -= 1
        if self._stay <= 0:
            self._probing = True
            self._switch(not self._offload)

    def _best(self) -> bool:
        inline, offload = self._rates[False], self._rates[True]
        if not inline or not offload:
            return bool(offload)
        import statistics  # only when both modes were measured (start-up)

        return statistics.median(offload) > statistics.median(inline) * MARGIN

    def _switch(self, offload: bool) -> None:
        if offload != self._offload:
            self._offload = offload
            self._warm = self._warmup()
            self._epoch_bytes = 0


def _first_period(policy: OffloadPolicy) -> int:
    """Inline epochs before a fresh site's first probe of offload: enough that the probe
    (a window's warm-up and one epoch) is 1/COLD_PROBE_RATIO of the work before it; never,
    in effect, on one CPU."""
    if _offload.CPUS < 2:
        return 1 << 62
    epoch = EPOCH_BATCHES * policy.batch_size
    probe = policy.max_in_flight * policy.batch_size + epoch
    return -(-COLD_PROBE_RATIO * probe // epoch)


class OneShotVerdict:
    """Whether one-shot calls of a site bring helper threads (see the module docstring)."""

    __slots__ = ("_skip", "_skipping")

    def __init__(self) -> None:
        self._skip = 0
        self._skipping = 1

    def helpers_wanted(self) -> bool:
        if self._skip > 0:
            self._skip -= 1
            return False
        return True

    def record(self, helper_share: float) -> None:
        if helper_share < MIN_HELPER_SHARE:
            self._skip = self._skipping
            self._skipping = min(self._skipping * 2, MAX_STAY)
        else:
            self._skipping = 1


#: The verdict of every one-shot site in this process.
_ONESHOT: dict[str, OneShotVerdict] = {}


def oneshot_verdict(site: str) -> OneShotVerdict:
    """The one-shot verdict of ``site`` in this process."""
    return _ONESHOT.setdefault(site, OneShotVerdict())
