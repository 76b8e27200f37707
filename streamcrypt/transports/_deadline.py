"""Timeouts on awaited calls, cheap on asyncio: :func:`with_timeout`.

Used by the encrypted stream (a transport call under ``idle_timeout`` /
``record_timeout``) and by the HTTP middlewares (the next piece of a request body under
``body_timeout``). On asyncio a deadline is armed only once the call really waits (a
read of data already there arms nothing), as one loop timer that cancels the awaited
future; elsewhere it is an anyio cancel scope, which costs about as much as sealing a
1 KiB record.
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


class _Deadline:
    """A deadline on one awaited call, as one loop timer (asyncio): when it fires, the
    future the call waits on is cancelled with :data:`_DEADLINE_MESSAGE`, the way
    ``Task.cancel()`` wakes a task, but without a cancel scope (about a third of a small
    receive's instructions on uvloop) and without touching the task's cancel count."""

    __slots__ = ("fired", "waiting")

    def __init__(self) -> None:
        self.fired = False
        self.waiting: Any = None

    def fire(self) -> None:
        self.fired = True
        waiting = self.waiting
        if waiting is not None and not waiting.done():
            waiting.cancel(_DEADLINE_MESSAGE)


def timed_out(seconds: float, what: str) -> PeerTimeoutError:
    """The error for a peer that made no progress for ``seconds`` (``what`` it owed)."""
    return PeerTimeoutError(
        f"the peer made no progress for {seconds} s ({what}): the connection is "
        "stalled or the peer is hostile; it was cut"
    )


@types.coroutine
def _lazy_deadline(
    seconds: float, what: str, call: Coroutine[Any, Any, T]
) -> Generator[Any, Any, T]:
    """Drive ``call`` for an asyncio task, arming a :class:`_Deadline` at its first real
    wait (a future; a bare ``None`` is a checkpoint, one turn of the loop, which cannot
    stall): a send the transport takes at once or a read of data already there arms
    nothing. Past ``seconds`` raise :class:`PeerTimeoutError` naming ``what``."""
    deadline: _Deadline | None = None
    timer: asyncio.TimerHandle | None = None
    try:
        value = call.send(None)
        while True:
            if value is not None:
                if deadline is None:
                    deadline = _Deadline()
                    timer = asyncio.get_running_loop().call_later(seconds, deadline.fire)
                deadline.waiting = value
                if deadline.fired:
                    value.cancel(_DEADLINE_MESSAGE)
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
        if deadline is not None and deadline.fired and exc.args[:1] == (_DEADLINE_MESSAGE,):
            raise timed_out(seconds, what) from None
        raise
    finally:
        if timer is not None:
            timer.cancel()


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
    timer (:func:`_lazy_deadline`), not a cancel scope: an anyio cancel scope and its
    timer cost about as much as a 1 KiB record's whole seal. A plain function, not a
    coroutine: one frame fewer on every transport call.
    """
    if seconds is None:
        return call
    if lazy and type(call) is types.CoroutineType:
        return _lazy_deadline(seconds, what, call)
    return _scoped_timeout(seconds, what, call)
