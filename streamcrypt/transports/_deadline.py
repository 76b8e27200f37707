"""Timeouts on awaited calls, cheap on asyncio: :func:`with_timeout`, :class:`LoopDeadline`.

Used by the encrypted stream (a transport call under ``idle_timeout`` /
``record_timeout``: :func:`with_timeout`) and by the HTTP middlewares (the next piece of
a request body under ``body_timeout``: :class:`LoopDeadline`, one timer for the whole
body). On asyncio a deadline is armed only once the call really waits (a read of data
already there arms nothing), as a loop timer that cancels the awaited future; elsewhere
it is an anyio cancel scope, which costs about as much as sealing a 1 KiB record.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any, Final, TypeVar

import anyio

from ..errors import PeerTimeoutError

T = TypeVar("T")

#: The message a deadline cancels the awaited future with (told apart from a real cancel).
_DEADLINE_MESSAGE: Final = "streamcrypt deadline"


def timed_out(seconds: float, what: str) -> PeerTimeoutError:
    """The error for a peer that made no progress for ``seconds`` (``what`` it owed)."""
    return PeerTimeoutError(
        f"the peer made no progress for {seconds} s ({what}): the connection is "
        "stalled or the peer is hostile; it was cut"
    )


#: How early a :class:`LoopDeadline` timer may fire and still count (uvloop's timers
#: have millisecond steps): a timer earlier than that is re-armed.
_EARLY: Final = 0.001


class LoopDeadline:
    """Deadlines on the successive awaited calls of one asyncio task (a request body's
    reads, or one transport call of :func:`with_timeout`: :meth:`wait`), as one loop
    timer for all of them. When it fires, the future the call waits on is cancelled with
    :data:`_DEADLINE_MESSAGE`, the way ``Task.cancel()`` wakes a task, but without a
    cancel scope (about a third of a small receive's instructions on uvloop) and
    without touching the task's cancel count. The timer is armed at the first call that
    really waits and then left armed: a timer that fires before the current wait's
    deadline (it was armed for an earlier one, and deadlines only move on) is re-armed
    for it; one that fires while nothing waits is dropped until the next wait arms it.
    So a body whose reads wait costs one timer per deadline that passes, not a timer
    armed and cancelled per wait (issue 28: about 0.036 CPU-s/GB on an aiohttp upload
    of 256 KiB arrivals). :meth:`close` when the calls are over.
    """

    __slots__ = ("_due", "_fired", "_loop", "_timer", "_waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._timer: asyncio.TimerHandle | None = None
        self._waiting: Any = None  # the future the current wait is on
        self._due = 0.0  # the current wait's deadline, loop time
        self._fired = False

    def now(self) -> float:
        """The loop's clock, which the deadlines given to :meth:`wait` are read on."""
        return self._loop.time()

    def wait(
        self, call: Coroutine[Any, Any, T], due: float, seconds: float, what: str
    ) -> Awaitable[T]:
        """Drive ``call`` (awaitable); waiting past ``due`` (:meth:`now`'s clock; it must
        not be earlier than the last call's) raises :class:`PeerTimeoutError` naming
        ``what`` and ``seconds``. A call that never waits arms nothing."""
        return _driven(call, self, due, seconds, what)

    def _arm(self, waiting: Any, due: float) -> None:
        """A call waits on the future ``waiting`` until ``due`` at the latest."""
        self._due, self._waiting = due, waiting
        if self._fired:
            waiting.cancel(_DEADLINE_MESSAGE)
        elif self._timer is None:
            self._timer = self._loop.call_at(due, self._fire)

    def _fire(self) -> None:
        self._timer = None
        waiting = self._waiting
        if waiting is None or waiting.done():
            return  # nothing waits (or what it waits for came): the next wait arms
        if self._due - self._loop.time() > _EARLY:
            self._timer = self._loop.call_at(self._due, self._fire)
            return
        self._fired = True
        waiting.cancel(_DEADLINE_MESSAGE)

    def close(self) -> None:
        """Drop the timer (the calls are over)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


async def _scoped_timeout(seconds: float, what: str, call: Awaitable[T]) -> T:
    with anyio.move_on_after(seconds) as scope:
        return await call
    assert scope.cancelled_caught
    raise timed_out(seconds, what)


def with_timeout(
    seconds: float | None, what: str, call: Awaitable[T], lazy: bool = False
) -> Awaitable[T]:
    """``call``, bounded: past ``seconds`` awaiting it raises :class:`PeerTimeoutError`
    naming ``what``.

    ``lazy`` (asyncio only): no deadline unless ``call`` really waits, and then one loop
    timer (:class:`LoopDeadline`), not a cancel scope: an anyio cancel scope and its
    timer cost about as much as a 1 KiB record's whole seal. A plain function, not a
    coroutine: one frame fewer on every transport call.
    """
    if seconds is None:
        return call
    if lazy and type(call) is types.CoroutineType:
        return _driven(call, None, None, seconds, what)
    return _scoped_timeout(seconds, what, call)


@types.coroutine
def _driven(
    call: Coroutine[Any, Any, T],
    deadline: LoopDeadline | None,
    due: float | None,
    seconds: float,
    what: str,
) -> Generator[Any, Any, T]:
    """Drive ``call`` for an asyncio task under ``deadline`` (``None``: a deadline of its
    own, made at its first real wait, ``seconds`` from then, and dropped at its end) or
    ``due``: the one driver of both :func:`with_timeout` and :meth:`LoopDeadline.wait`.
    A future it yields is a real wait and is armed; a bare ``None`` is a checkpoint, one
    turn of the loop, which cannot stall: a send the transport takes at once or a read of
    data already there arms nothing."""
    own = deadline is None
    try:
        value = call.send(None)
        while True:
            if value is not None:
                if deadline is None:
                    deadline = LoopDeadline(asyncio.get_running_loop())
                if due is None:
                    due = deadline.now() + seconds
                deadline._arm(value, due)
            try:
                sent = yield value
            except GeneratorExit:
                call.close()
                raise
            except BaseException as exc:  # a cancellation (or our deadline), for ``call``
                value = call.throw(exc)
            else:
                value = call.send(sent)
    except StopIteration as stop:
        result: T = stop.value  # (no typing.cast: a call on every transport operation)
        return result
    except asyncio.CancelledError as exc:
        if deadline is not None and deadline._fired and exc.args[:1] == (_DEADLINE_MESSAGE,):
            raise timed_out(seconds, what) from None
        raise
    finally:
        if deadline is not None:
            deadline._waiting = None
            if own:
                deadline.close()
