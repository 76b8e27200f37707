"""TCP on asyncio through a protocol of our own: :class:`ProtocolStream`, :class:`ProtocolListener`.

Theory of operation
-------------------
anyio's asyncio ``SocketStream`` turns reading on and off around every ``receive()``
(``resume_reading`` / ``pause_reading``, two ``epoll_ctl`` calls on uvloop), queues each
read as a fresh ``bytes`` object and splits chunks larger than ``max_bytes``; measured,
plaintext anyio TCP moves half what plain asyncio streams do. :class:`ProtocolStream` is
the same anyio :class:`~anyio.abc.SocketStream` contract over an
:class:`asyncio.BufferedProtocol` of ours: the loop reads straight into one reused
``bytearray`` while it has room (reading pauses only when it is full), ``receive()``
slices what is there, ``send()`` is ``transport.write`` followed, when the transport
could not take it all, by a wait for ``resume_writing`` (write buffer limits 0, as
anyio: a ``send()`` that returned left nothing in user space, so ``aclose()`` may abort).
For a caller with guards and cancellation points of its own (``EncryptedStream``),
:meth:`ProtocolStream.read` and :meth:`ProtocolStream.write` do the same without them and
take a limit on each wait (``stall_limit``), kept as a deadline and one loop timer per
direction armed lazily, so a call that never waits long costs no timer.

:func:`open_tcp` and :meth:`ProtocolListener.create` build them on asyncio (uvloop
included); :func:`on_asyncio` tells the callers (``connect``, ``serve``) when to; on
trio they keep anyio's own TCP streams.

Bounds: received bytes not yet taken by ``receive()`` are at most one buffer
(:data:`READ_BUFFER`; it starts at :data:`FIRST_READ_BUFFER` and doubles only while reads
fill it, so an idle connection holds the small one); reading pauses while it is full.
Unsent bytes are at most the one ``send()`` in progress.

Errors follow anyio's ``SocketStream``: :class:`anyio.EndOfStream` after the peer's FIN,
:class:`anyio.BrokenResourceError` after a transport error (chained),
:class:`anyio.ClosedResourceError` after ``aclose()``, :class:`anyio.BusyResourceError`
for two concurrent receivers or senders. Cancelling a ``receive()`` loses nothing (the
bytes stay in the buffer); cancelling a ``send()`` that waits for the transport to drain
leaves what was written to be sent.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import Callable
from typing import Any, Final, cast

from anyio import (
    BrokenResourceError,
    ClosedResourceError,
    EndOfStream,
    ResourceGuard,
)
from anyio.abc import SocketListener, SocketStream

#: The receive buffer a connection starts with (4 KiB): what an idle connection holds.
FIRST_READ_BUFFER: Final = 4 << 10
#: The most a connection's receive buffer grows to (1 MiB), doubling each time a read
#: fills it: the bound on received bytes waiting for ``receive()``.
READ_BUFFER: Final = 1 << 20


def on_asyncio() -> bool:
    """``True`` in an asyncio task (uvloop included), ``False`` elsewhere (trio)."""
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no asyncio loop in this thread
        return False


#: The message a timeout cancels a wait's future with (told apart from a real cancel).
_TIMEOUT_MESSAGE: Final = "streamcrypt ProtocolStream timeout"


class _Wakeup:
    """Where one task waits for the protocol's callbacks: :meth:`wait` parks it on a
    fresh future, :meth:`wake` (from a callback) lets it go; a wake with no one waiting
    is dropped, so a waiter checks its condition again after each wake.

    A wait may have a stall limit. Its deadline is a float stored per wait; one loop timer
    per wakeup, armed lazily, checks it and moves on to the current deadline when it
    fires early, so a wait costs no timer of its own (``call_later`` and ``cancel`` on
    every wait cost about as much as sealing a 1 KiB record)."""

    __slots__ = ("_deadline", "_future", "_timer", "_timer_at")

    def __init__(self) -> None:
        self._future: asyncio.Future[None] | None = None
        self._deadline: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    async def wait(self, stall_limit: float | None = None) -> None:
        """Until :meth:`wake`; past ``stall_limit`` seconds raise :class:`TimeoutError`."""
        loop = asyncio.get_running_loop()
        future = self._future = loop.create_future()
        if stall_limit is not None:
            deadline = self._deadline = loop.time() + stall_limit
            if self._timer is None or self._timer_at > deadline:
                self._arm(loop, deadline)
        try:
            await future
        except asyncio.CancelledError as exc:
            if exc.args[:1] == (_TIMEOUT_MESSAGE,) and future.cancelled():
                raise TimeoutError(f"no progress for {stall_limit} s") from None
            raise
        finally:
            self._future = self._deadline = None

    def wake(self) -> None:
        future = self._future
        if future is not None and not future.done():
            future.set_result(None)

    def close(self) -> None:
        """Drop the timer (the connection is gone; a waiter was woken)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(at, self._expire, loop)
        self._timer_at = at

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        deadline = self._deadline
        if deadline is None:
            return  # no one waits: the next wait with a timeout arms again
        if loop.time() < deadline:
            self._arm(loop, deadline)  # armed for an earlier wait: on to this one's
            return
        future = self._future
        if future is not None and not future.done():
            future.cancel(_TIMEOUT_MESSAGE)


class _ReadBufferProtocol(asyncio.BufferedProtocol):
    """The loop's side: reads land in ``buf[end:]``; ``buf[start:end]`` waits to be taken."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray(FIRST_READ_BUFFER)
        self.view = memoryview(self.buf)
        self.start = 0
        self.end = 0
        self.offered = 0  # size of the last buffer given to the loop
        self.reading_paused = False
        self.writing_paused = False
        self.eof = False
        self.lost = False
        self.exception: BaseException | None = None
        self.readable = _Wakeup()  # bytes came, the peer ended, or the connection went
        self.writable = _Wakeup()  # writing resumed, or the connection went

    # -- asyncio callbacks ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not asyncio.Transport subclasses: no isinstance check)
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(0)

    def get_buffer(self, sizehint: int) -> memoryview:
        start, end = self.start, self.end
        if start == end:
            self.start = self.end = end = 0
        elif end == len(self.buf):  # a part at the end, room at the front: move it there
            size = end - start
            self.view[:size] = bytes(self.view[start:end])
            self.start = 0
            self.end = end = size
        self.offered = len(self.buf) - end
        return self.view[end:]

    def buffer_updated(self, nbytes: int) -> None:
        self.end += nbytes
        if nbytes == self.offered and len(self.buf) < READ_BUFFER and self.start == 0:
            self._grow()
        if self.start == 0 and self.end == len(self.buf):
            assert self.transport is not None
            self.transport.pause_reading()
            self.reading_paused = True
        self.readable.wake()

    def eof_received(self) -> bool:
        self.eof = True
        self.readable.wake()
        return True  # keep the transport: this side may still send (half-close)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = True
        self.exception = exc
        for wakeup in (self.readable, self.writable):
            wakeup.wake()
            wakeup.close()

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self.writable.wake()

    # -- helpers ------------------------------------------------------------------------------

    def _grow(self) -> None:
        """A read filled what was offered: double the buffer (the loop holds no view now)."""
        size = self.end - self.start
        bigger = bytearray(min(READ_BUFFER, 2 * len(self.buf)))
        bigger[:size] = self.view[self.start : self.end]
        self.buf, self.view = bigger, memoryview(bigger)
        self.start, self.end = 0, size

    def consumed(self, count: int) -> None:
        """``count`` bytes at ``start`` were taken: free them, read again if paused."""
        self.start += count
        if self.reading_paused and not self.lost:
            self.reading_paused = False
            assert self.transport is not None
            self.transport.resume_reading()


class ProtocolStream(SocketStream):
    """anyio's :class:`~anyio.abc.SocketStream` contract over :class:`asyncio.BufferedProtocol`
    (asyncio and uvloop only); see the module docstring. Create with :func:`open_tcp` or
    :class:`ProtocolListener`."""

    def __init__(self, transport: asyncio.Transport, protocol: _ReadBufferProtocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._closed = False
        self._eof_sent = False
        self._receive_guard = ResourceGuard("reading from")
        self._send_guard = ResourceGuard("writing to")

    @property
    def _raw_socket(self) -> socket.socket:
        sock: socket.socket = self._transport.get_extra_info("socket")
        return sock

    @property
    def buffered(self) -> int:
        """Received bytes waiting for ``receive()``."""
        return self._protocol.end - self._protocol.start

    def _no_data(self) -> BaseException:
        if self._closed:
            return ClosedResourceError()
        if self._protocol.exception is not None:
            return self._broken()
        return EndOfStream()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if max_bytes < 1:
            raise ValueError("max_bytes must be a positive integer")
        with self._receive_guard:
            return await self.read(max_bytes)

    async def read(self, max_bytes: int, stall_limit: float | None = None) -> bytes:
        """:meth:`receive` without its concurrency guard, for a caller that holds its own,
        and with a ``stall_limit``: seconds to wait for the first byte (``None``: for ever);
        past it raise :class:`TimeoutError`, nothing consumed and the stream still usable.
        A checkpoint whether or not it waits."""
        protocol = self._protocol
        if protocol.end == protocol.start and not (self._closed or protocol.eof or protocol.lost):
            await protocol.readable.wait(stall_limit)
        else:
            await asyncio.sleep(0)
        if self._closed:
            raise ClosedResourceError
        start = protocol.start
        take = min(protocol.end - start, max_bytes)
        if not take:
            raise self._no_data()
        data = bytes(protocol.view[start : start + take])
        protocol.consumed(take)
        return data

    async def send(self, item: bytes) -> None:
        with self._send_guard:
            await asyncio.sleep(0)  # the cancellation point: nothing was written yet
            await self.write(item)

    async def write(self, item: Any, stall_limit: float | None = None) -> None:
        """:meth:`send` without its guard and without its checkpoint before writing, for
        a caller that holds its own guard and made its own cancellation point (a record
        sealed before a checkpoint would be lost if the checkpoint were cancelled).
        Returns once the loop handed every byte to the kernel; a stall of more than
        ``stall_limit`` seconds raises :class:`TimeoutError` (what was written stays written)"""
        protocol = self._protocol
        if self._closed or self._eof_sent:
            raise ClosedResourceError
        if protocol.lost or protocol.exception is not None:
            raise self._broken()
        try:
            self._transport.write(item)
        except RuntimeError as exc:
            if self._transport.is_closing():
                raise BrokenResourceError from exc
            raise
        if protocol.writing_paused:
            await self._drained(stall_limit)

    async def _drained(self, stall_limit: float | None) -> None:
        protocol = self._protocol
        while protocol.writing_paused and not protocol.lost:
            await protocol.writable.wait(stall_limit)
        if self._closed:
            raise ClosedResourceError  # aclose() aborted the transport: unsent data is gone
        if protocol.lost:
            raise self._broken()

    def _broken(self) -> BrokenResourceError:
        cause = self._protocol.exception
        error = BrokenResourceError(
            "the connection is gone" if cause is None else f"the connection failed: {cause!r}"
        )
        error.__cause__ = cause
        return error

    async def send_eof(self) -> None:
        self._eof_sent = True
        try:
            self._transport.write_eof()
        except (OSError, RuntimeError):
            pass
        await asyncio.sleep(0)

    async def aclose(self) -> None:
        self._closed = True
        self._transport.abort()
        await asyncio.sleep(0)


async def open_tcp(host: str, port: int) -> ProtocolStream:
    """Connect over TCP (asyncio only); raises ``OSError`` as anyio's ``connect_tcp``."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_connection(_ReadBufferProtocol, host, port)
    return _stream(transport, protocol)


def _stream(transport: asyncio.BaseTransport, protocol: Any) -> ProtocolStream:
    assert isinstance(protocol, _ReadBufferProtocol)
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ProtocolStream(cast(asyncio.Transport, transport), protocol)


class ProtocolListener(SocketListener):
    """A TCP listener (asyncio only) whose connections are :class:`ProtocolStream`;
    create with :meth:`create`. ``serve()`` is anyio's: accept, then start the handler.
    Connections accepted before ``accept()`` asks wait in a queue (their reads bounded
    by their buffers); ``aclose()`` stops listening and closes those still queued."""

    _server: asyncio.Server

    def __init__(self) -> None:
        self._streams: deque[ProtocolStream] = deque()
        self._arrived = _Wakeup()
        self._closed = False
        self._accept_guard = ResourceGuard("accepting connections from")

    @classmethod
    async def create(
        cls, host: str | None = None, port: int = 0, backlog: int = 65536
    ) -> ProtocolListener:
        """Bind ``host:port`` (``None``: every interface; ``port=0``: a free port) and
        listen; raises ``OSError`` if it cannot bind."""
        self = cls()  # before the server: it may accept while create_server runs
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _AcceptedProtocol(self._deliver),
            host,
            port,
            backlog=min(backlog, 65535),
            reuse_address=True,
        )
        return self

    def _deliver(self, stream: ProtocolStream) -> None:
        if self._closed:
            stream._transport.abort()
            return
        self._streams.append(stream)
        self._arrived.wake()

    @property
    def _raw_socket(self) -> socket.socket:
        sock: socket.socket = self._server.sockets[0]
        return sock

    async def accept(self) -> ProtocolStream:
        with self._accept_guard:
            while not self._streams:
                if self._closed:
                    raise ClosedResourceError
                await self._arrived.wait()
            await asyncio.sleep(0)
            return self._streams.popleft()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._server.close()
            while self._streams:
                self._streams.popleft()._transport.abort()
            self._arrived.wake()
        await asyncio.sleep(0)


class _AcceptedProtocol(_ReadBufferProtocol):
    """Hands each connection the server accepts to its listener."""

    def __init__(self, deliver: Callable[[ProtocolStream], None]) -> None:
        super().__init__()
        self._deliver = deliver

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._deliver(_stream(transport, self))
