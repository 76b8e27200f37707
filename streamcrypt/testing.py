"""Helpers to test code that uses streamcrypt's streams, as ``trio.testing`` does for trio.

* :func:`memory_stream_pair` — two connected in-memory anyio byte streams (no sockets).
* :func:`encrypted_stream_pair` — two :class:`~streamcrypt.transports.EncryptedStream`
  ends, handshaken over a memory pair (or over transports you give).
* :func:`check_byte_stream` — a conformance check for any two-way anyio byte stream
  (after trio's ``check_two_way_stream``): data both ways, large concurrent transfers,
  ``max_bytes``, ``send_eof`` and ``aclose`` semantics, and concurrent-use detection.
  It raises :class:`AssertionError` naming the first rule broken.
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio import (
    BrokenResourceError,
    BusyResourceError,
    ClosedResourceError,
    EndOfStream,
    ResourceGuard,
)
from anyio.abc import AnyByteStream, ByteStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .keys import random_bytes
from .transports import EncryptedStream

__all__ = [
    "MemoryByteStream",
    "check_byte_stream",
    "encrypted_stream_pair",
    "memory_stream_pair",
]


@dataclass(eq=False)
class MemoryByteStream(ByteStream):
    """One end of :func:`memory_stream_pair`: a byte stream over two memory object streams.

    ``send_eof()`` closes the sending direction (the peer then gets
    :class:`anyio.EndOfStream`); after ``aclose()`` calls raise
    :class:`anyio.ClosedResourceError`, and the peer's sends raise
    :class:`anyio.BrokenResourceError`. Concurrent senders or receivers raise
    :class:`anyio.BusyResourceError`.
    """

    send_stream: MemoryObjectSendStream[bytes]
    receive_stream: MemoryObjectReceiveStream[bytes]
    _leftover: bytes = field(default=b"", init=False, repr=False)
    _send_closed: bool = field(default=False, init=False, repr=False)
    _send_guard: ResourceGuard = field(
        default_factory=lambda: ResourceGuard("sending to"), init=False, repr=False
    )
    _receive_guard: ResourceGuard = field(
        default_factory=lambda: ResourceGuard("reading from"), init=False, repr=False
    )

    async def send(self, item: bytes) -> None:
        with self._send_guard:
            data = bytes(item)  # a copy: the caller may reuse its buffer
            if not data:
                if self._send_closed:
                    raise ClosedResourceError
                await anyio.lowlevel.checkpoint()
                return
            await self.send_stream.send(data)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if max_bytes < 1:
            raise ValueError("max_bytes must be a positive integer")
        with self._receive_guard:
            if self._leftover:
                await anyio.lowlevel.checkpoint()
                data = self._leftover
            else:
                data = await self.receive_stream.receive()
            self._leftover = data[max_bytes:]
            return data[:max_bytes]

    async def send_eof(self) -> None:
        self._send_closed = True
        await self.send_stream.aclose()

    async def aclose(self) -> None:
        self._send_closed = True
        await self.send_stream.aclose()
        await self.receive_stream.aclose()


def memory_stream_pair(
    max_buffer_size: float = math.inf,
) -> tuple[MemoryByteStream, MemoryByteStream]:
    """Two connected in-memory byte streams; each ``send()`` is one chunk for the peer.

    ``max_buffer_size`` counts chunks in flight per direction (``0``: a send waits for
    the peer to receive it).
    """
    a_to_b_send, a_to_b_receive = anyio.create_memory_object_stream[bytes](max_buffer_size)
    b_to_a_send, b_to_a_receive = anyio.create_memory_object_stream[bytes](max_buffer_size)
    return MemoryByteStream(a_to_b_send, b_to_a_receive), MemoryByteStream(
        b_to_a_send, a_to_b_receive
    )


async def encrypted_stream_pair(
    transports: tuple[AnyByteStream, AnyByteStream] | None = None,
    *,
    client: Mapping[str, Any] | None = None,
    server: Mapping[str, Any] | None = None,
    **common: Any,
) -> tuple[EncryptedStream, EncryptedStream]:
    """Handshake two :class:`EncryptedStream` ends: ``(client, server)``.

    ``common`` options go to both sides' :meth:`EncryptedStream.wrap`, ``client`` and
    ``server`` to one side each. Without any key option both get one fresh random
    ``psk`` (NNpsk0). ``transports`` defaults to a new :func:`memory_stream_pair`.
    Raises what ``wrap`` raises (both sides run in one task group, so a failure comes
    as an exception group when both fail).
    """
    client_opts = {**common, **(client or {})}
    server_opts = {**common, **(server or {})}
    key_names = ("psk", "static_key", "server_public_key")
    if not any(k in client_opts or k in server_opts for k in key_names):
        psk = random_bytes(32)
        client_opts["psk"] = server_opts["psk"] = psk
    left, right = transports if transports is not None else memory_stream_pair()
    ends: dict[str, EncryptedStream] = {}

    async def run(name: str, transport: AnyByteStream, opts: dict[str, Any]) -> None:
        ends[name] = await EncryptedStream.wrap(transport, **opts)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "client", left, client_opts)
        tg.start_soon(run, "server", right, {**server_opts, "server_side": True})
    return ends["client"], ends["server"]


# -- the conformance check ----------------------------------------------------------------

#: Seconds one step of a check may block before it counts as a failure.
_step_timeout: ContextVar[float] = ContextVar("_step_timeout", default=5.0)

MakePair = Callable[[], Awaitable[tuple[ByteStream, ByteStream]]]


def _expect(condition: bool, rule: str) -> None:
    if not condition:
        raise AssertionError(f"byte-stream conformance: {rule}")


async def _expect_raises(
    exc_type: type[BaseException] | tuple[type[BaseException], ...],
    call: Callable[[], Awaitable[object]],
    rule: str,
) -> BaseException:
    limit = _step_timeout.get()
    with anyio.move_on_after(limit):
        try:
            await call()
        except exc_type as exc:
            return exc
        raise AssertionError(f"byte-stream conformance: {rule}")
    raise AssertionError(f"byte-stream conformance: {rule} (it blocked for {limit} s)")


async def _receive_exactly(
    stream: ByteStream, size: int, rng: random.Random | None = None
) -> bytes:
    out = bytearray()
    while len(out) < size:
        limit = rng.randint(1, 70000) if rng is not None else 65536
        chunk = await stream.receive(limit)
        _expect(0 < len(chunk) <= limit, f"receive({limit}) returned {len(chunk)} bytes")
        out += chunk
    _expect(len(out) == size, f"received {len(out)} bytes where {size} were sent")
    return bytes(out)


async def _send_in_pieces(stream: ByteStream, data: bytes, rng: random.Random) -> None:
    pos = 0
    while pos < len(data):
        step = rng.choice((1, 17, 1000, 65519, 65520, 100_000, 300_000))
        await stream.send(data[pos : pos + step])
        pos += step


async def _close_both(a: ByteStream, b: ByteStream) -> None:
    with anyio.CancelScope(shield=True):
        await anyio.aclose_forcefully(a)
        await anyio.aclose_forcefully(b)


async def _check_exchange(a: ByteStream, b: ByteStream) -> None:
    await a.send(b"ping")
    _expect(await _receive_exactly(b, 4) == b"ping", "a -> b carries the bytes sent")
    await b.send(b"pong!")
    _expect(await _receive_exactly(a, 5) == b"pong!", "b -> a carries the bytes sent")
    await a.send(b"")  # sending nothing is allowed and delivers nothing
    await a.send(b"0123456789")
    first = await b.receive(3)
    _expect(0 < len(first) <= 3, "receive(max_bytes) never returns more than max_bytes")
    rest = await _receive_exactly(b, 10 - len(first))
    _expect(first + rest == b"0123456789", "data split across receives stays in order")
    await _expect_raises(ValueError, lambda: b.receive(0), "receive(0) raises ValueError")


async def _check_large(a: ByteStream, b: ByteStream) -> None:
    rng = random.Random(4)
    size = 3 << 20
    ab = rng.randbytes(size)
    ba = rng.randbytes(size)
    got: dict[str, bytes] = {}

    async def receiver(name: str, stream: ByteStream) -> None:
        got[name] = await _receive_exactly(stream, size, random.Random(name))

    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver, "b", b)
        tg.start_soon(receiver, "a", a)
        tg.start_soon(_send_in_pieces, a, ab, random.Random(1))
        tg.start_soon(_send_in_pieces, b, ba, random.Random(2))
    _expect(got["b"] == ab, "3 MiB a -> b (sent in mixed pieces) arrives unchanged")
    _expect(got["a"] == ba, "3 MiB b -> a, at the same time, arrives unchanged")


async def _check_send_eof(a: ByteStream, b: ByteStream) -> None:
    await a.send(b"last words")
    await a.send_eof()
    _expect(await _receive_exactly(b, 10) == b"last words", "data before send_eof arrives")
    await _expect_raises(EndOfStream, b.receive, "receive after the peer's send_eof: EndOfStream")
    await _expect_raises(EndOfStream, b.receive, "EndOfStream again on the next receive")
    await _expect_raises(
        ClosedResourceError, lambda: a.send(b"x"), "send after send_eof: ClosedResourceError"
    )
    await b.send(b"reply")  # half-close: the other direction still works
    _expect(await _receive_exactly(a, 5) == b"reply", "the other direction works after send_eof")
    await b.send_eof()
    await _expect_raises(EndOfStream, a.receive, "both sides can send_eof")


async def _check_aclose(a: ByteStream, b: ByteStream) -> None:
    await a.send(b"bye")
    await a.aclose()
    await a.aclose()  # idempotent
    await _expect_raises(
        ClosedResourceError, lambda: a.send(b"x"), "send after aclose: ClosedResourceError"
    )
    await _expect_raises(
        ClosedResourceError, a.receive, "receive after aclose: ClosedResourceError"
    )
    _expect(await _receive_exactly(b, 3) == b"bye", "data sent before aclose arrives")
    await _expect_raises(EndOfStream, b.receive, "the peer of a closed stream gets EndOfStream")
    with anyio.fail_after(10):
        for _ in range(1000):
            try:
                await b.send(b"into the void" * 1000)
            except BrokenResourceError:
                break
            await anyio.sleep(0.001)
        else:
            raise AssertionError(
                "byte-stream conformance: sending to a closed peer never raised BrokenResourceError"
            )
    await b.aclose()


async def _check_concurrent_use(a: ByteStream, b: ByteStream) -> None:
    busy: list[str] = []
    payload = bytes(200_000)

    async def sender() -> None:
        try:
            await a.send(payload)
        except BusyResourceError:
            busy.append("send")

    async def receiver(into: list[bytes]) -> None:
        try:
            into.append(await b.receive())
        except BusyResourceError:
            busy.append("receive")

    async with anyio.create_task_group() as tg:
        tg.start_soon(sender)
        tg.start_soon(sender)
    _expect(busy == ["send"], "two concurrent send() calls: one raises BusyResourceError")
    _expect(
        await _receive_exactly(b, len(payload)) == payload,
        "the refused concurrent send sent nothing; the other arrived whole",
    )
    got: list[bytes] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver, got)
        tg.start_soon(receiver, got)
        await anyio.wait_all_tasks_blocked()
        await a.send(b"one")
    _expect(busy == ["send", "receive"], "two concurrent receive() calls: one raises Busy")
    _expect(got == [b"one"], "the waiting receive got the data")


async def check_byte_stream(make_pair: MakePair, *, step_timeout: float = 5.0) -> None:
    """Run the conformance checks; ``await make_pair()`` gives a fresh connected pair.

    Each check gets its own pair and closes it. Raises :class:`AssertionError` naming
    the first rule a stream breaks (a step that should end but blocks for
    ``step_timeout`` seconds counts as broken).
    """
    token = _step_timeout.set(step_timeout)
    try:
        await _run_checks(make_pair)
    finally:
        _step_timeout.reset(token)


async def _run_checks(make_pair: MakePair) -> None:
    for check in (_check_exchange, _check_large, _check_send_eof, _check_aclose):
        for swap in (False, True):
            a, b = await make_pair()
            if swap:
                a, b = b, a
            try:
                with anyio.fail_after(30):
                    await check(a, b)
            finally:
                await _close_both(a, b)
    a, b = await make_pair()
    try:
        with anyio.fail_after(30):
            await _check_concurrent_use(a, b)
    finally:
        await _close_both(a, b)
