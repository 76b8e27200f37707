"""ProtocolStream / ProtocolListener: the asyncio TCP path under connect() and serve().

On asyncio and uvloop ``connect``/``serve`` run EncryptedStream over ProtocolStream (our
BufferedProtocol); on trio over anyio's TCP stream. The ProtocolStream tests themselves
run on asyncio and uvloop only (the class is asyncio's); each checks what a caller can
observe: which transport is used, errors, bounded buffering, cancellation.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
from anyio import (
    BrokenResourceError,
    BusyResourceError,
    ClosedResourceError,
    EndOfStream,
    create_task_group,
)
from anyio.abc import ByteStream, SocketAttribute, SocketStream

from streamcrypt.codecs.noise import generate_keypair
from streamcrypt.errors import PeerTimeoutError, TruncatedStreamError
from streamcrypt.testing import check_byte_stream, encrypted_stream_pair
from streamcrypt.transports import EncryptedStream, connect, serve
from streamcrypt.transports._socket import (  # private: the transport under connect/serve
    FIRST_READ_BUFFER,
    READ_BUFFER,
    ProtocolListener,
    ProtocolStream,
    open_tcp,
)

try:
    import uvloop
except ImportError:  # pragma: no cover - platforms without uvloop
    uvloop = None

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

_ASYNCIO = [pytest.param(("asyncio", {}), id="asyncio")]
if uvloop is not None:
    _ASYNCIO.append(pytest.param(("asyncio", {"loop_factory": uvloop.new_event_loop}), id="uvloop"))
asyncio_only = pytest.mark.parametrize("anyio_backend", _ASYNCIO)


async def _pair() -> tuple[ProtocolStream, ProtocolStream, ProtocolListener]:
    listener = await ProtocolListener.create("127.0.0.1")
    client = await open_tcp("127.0.0.1", listener.extra(SocketAttribute.local_port))
    server = await listener.accept()
    return client, server, listener


@contextlib.asynccontextmanager
async def _encrypted_server(
    handler: Callable[[EncryptedStream], Awaitable[None]],
) -> AsyncIterator[tuple[int, bytes]]:
    sk, spk = generate_keypair()
    async with create_task_group() as tg:
        port = await tg.start(functools.partial(serve, handler, static_key=sk))
        yield port, spk
        tg.cancel_scope.cancel()


async def test_connect_and_serve_run_over_protocol_streams_on_asyncio(
    anyio_backend: Any,
) -> None:
    seen: list[ByteStream] = []

    async def echo(stream: EncryptedStream) -> None:
        seen.append(stream.transport_stream)
        await stream.send(await stream.receive())

    async with _encrypted_server(echo) as (port, spk):
        async with await connect("127.0.0.1", port, server_public_key=spk) as stream:
            await stream.send(b"ping")
            assert await stream.receive() == b"ping"
            ours = stream.transport_stream
    on_asyncio = anyio_backend[0] == "asyncio"
    for transport in (ours, *seen):
        assert isinstance(transport, SocketStream)
        assert isinstance(transport, ProtocolStream) is on_asyncio


@asyncio_only
async def test_protocol_streams_pass_the_conformance_check(anyio_backend: Any) -> None:
    async def plain() -> tuple[ByteStream, ByteStream]:
        client, server, listener = await _pair()
        await listener.aclose()
        return client, server

    async def encrypted() -> tuple[ByteStream, ByteStream]:
        return await encrypted_stream_pair(await plain(), cipher="AESGCM")

    await check_byte_stream(plain)
    await check_byte_stream(encrypted)


@asyncio_only
async def test_errors_are_anyios(anyio_backend: Any) -> None:
    client, server, listener = await _pair()
    async with listener:
        assert client.extra(SocketAttribute.remote_port) == listener.extra(
            SocketAttribute.local_port
        )
        async with create_task_group() as tg:
            tg.start_soon(client.receive)
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(BusyResourceError):
                await client.receive()
            tg.cancel_scope.cancel()
        with pytest.raises(ValueError, match="max_bytes"):
            await client.receive(0)
        # The peer resets the connection (SO_LINGER 0): reads and writes are broken.
        server.extra(SocketAttribute.raw_socket).setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
        )
        await server.aclose()
        with pytest.raises(BrokenResourceError):
            await client.receive()
        with pytest.raises(BrokenResourceError):
            await client.send(b"x")
        await client.aclose()
        with pytest.raises(ClosedResourceError):
            await client.receive()
        with pytest.raises(ClosedResourceError):
            await client.send(b"x")
        await listener.aclose()
        with pytest.raises(ClosedResourceError):
            await listener.accept()


@asyncio_only
async def test_a_slow_reader_pauses_the_socket_with_one_buffer(anyio_backend: Any) -> None:
    """A reader that reads nothing holds at most one receive buffer; the sender blocks."""
    client, server, listener = await _pair()
    block = os.urandom(1 << 20)
    sent = 0

    async def flood() -> None:
        nonlocal sent
        while True:
            await server.send(block)
            sent += len(block)

    async with listener, client, server, create_task_group() as tg:
        tg.start_soon(flood)
        stalled_at, still = -1, 0
        with anyio.fail_after(20):
            while still < 3:  # the sender made no progress for 0.3 s: it waits
                stalled_at, still = sent, still + 1 if sent == stalled_at else 0
                await anyio.sleep(0.1)
        assert 0 < stalled_at < 256 << 20  # kernel buffers and ours, not the whole flood
        assert FIRST_READ_BUFFER < client.buffered <= READ_BUFFER
        got = 0
        while got < stalled_at + len(block):
            got += len(await client.receive(1 << 20))
        assert sent > stalled_at  # reading resumed the socket and the sender
        tg.cancel_scope.cancel()


@asyncio_only
async def test_a_cancelled_receive_loses_nothing(anyio_backend: Any) -> None:
    client, server, listener = await _pair()
    async with listener, client, server:
        with anyio.move_on_after(0.05) as scope:
            await client.receive()
        assert scope.cancelled_caught
        await server.send(b"after the cancel")
        assert await client.receive() == b"after the cancel"
        # Half-close: the peer's end is EndOfStream, and this side may still send.
        await server.send_eof()
        with pytest.raises(EndOfStream):
            await client.receive()
        await client.send(b"still open")
        assert await server.receive() == b"still open"


@asyncio_only
async def test_read_timeouts_consume_nothing_and_follow_each_wait(anyio_backend: Any) -> None:
    """``read(n, stall_limit)``: past the limit TimeoutError, nothing lost, the stream
    usable; one lazily armed timer per direction still honours each wait's own limit:
    a short wait after a long one is cut on time, a long wait after a short one is not
    cut early."""
    client, server, listener = await _pair()
    async with listener, client, server:
        await server.send(b"a")
        assert await client.read(10, stall_limit=60) == b"a"  # arms the timer at +60 s
        started = anyio.current_time()
        with pytest.raises(TimeoutError, match=r"0\.2 s"):
            await client.read(10, stall_limit=0.2)  # must not wait for the +60 s timer
        assert 0.15 < anyio.current_time() - started < 5

        async def send_after(delay: float, data: bytes) -> None:
            await anyio.sleep(delay)
            await server.send(data)

        async with create_task_group() as tg:
            tg.start_soon(send_after, 0.05, b"soon")
            assert await client.read(10, stall_limit=0.3) == b"soon"  # leaves a +0.3 s timer
            tg.start_soon(send_after, 0.6, b"late")
            # That timer fires during this wait (deadline +2 s): it moves on, no timeout.
            assert await client.read(10, stall_limit=2) == b"late"
        # A real cancellation stays a cancellation, not a timeout.
        with anyio.move_on_after(0.05) as scope:
            await client.read(10, stall_limit=30)
        assert scope.cancelled_caught
        await server.send(b"after")
        assert await client.read(10, stall_limit=1) == b"after"


@asyncio_only
async def test_write_timeouts_cut_a_peer_that_reads_nothing(anyio_backend: Any) -> None:
    client, server, listener = await _pair()
    block = os.urandom(1 << 20)
    async with listener, client, server:
        with anyio.fail_after(30), pytest.raises(TimeoutError):
            while True:
                await server.write(block, stall_limit=0.3)
        # What was written stays written: the reader gets a prefix of the flood, in order.
        data = await client.receive(1 << 16)
        assert data == block[: len(data)]


@asyncio_only
async def test_a_cancelled_encrypted_receive_leaves_the_stream_usable(
    anyio_backend: Any,
) -> None:
    async def echo(stream: EncryptedStream) -> None:
        async for data in stream:
            await stream.send(data)

    async with _encrypted_server(echo) as (port, spk):
        async with await connect("127.0.0.1", port, server_public_key=spk) as stream:
            with anyio.move_on_after(0.05) as scope:
                await stream.receive()
            assert scope.cancelled_caught
            big = os.urandom(3 << 20)
            await stream.send(big)
            got = bytearray()
            while len(got) < len(big):
                got += await stream.receive(1 << 20)
            assert got == big


@asyncio_only
async def test_the_peer_closing_mid_record_is_truncation(anyio_backend: Any) -> None:
    errors: list[BaseException] = []
    done = anyio.Event()

    async def handler(stream: EncryptedStream) -> None:
        try:
            await stream.receive()
        except Exception as exc:
            errors.append(exc)
        done.set()

    async with _encrypted_server(handler) as (port, spk):
        stream = await connect("127.0.0.1", port, server_public_key=spk)
        # A record header announcing 1000 bytes, half of them, then the connection ends.
        await stream.transport_stream.send(b"\x03\xe8\x00" + bytes(500))
        await stream.transport_stream.aclose()
        with anyio.fail_after(5):
            await done.wait()
    assert len(errors) == 1 and isinstance(errors[0], TruncatedStreamError)
    assert "middle of a record" in str(errors[0])


@asyncio_only
async def test_bulk_both_ways_with_records_across_reads(anyio_backend: Any) -> None:
    """Odd-sized writes put records across every read boundary; all bytes arrive intact."""

    async def echo(stream: EncryptedStream) -> None:
        async for data in stream:
            await stream.send(data)

    payload = os.urandom(5_000_011)
    async with _encrypted_server(echo) as (port, spk):
        async with await connect("127.0.0.1", port, server_public_key=spk) as stream:
            async with create_task_group() as tg:

                async def writer() -> None:
                    view = memoryview(payload)
                    for start in range(0, len(payload), 77_777):
                        await stream.send(view[start : start + 77_777])

                tg.start_soon(writer)
                got = bytearray()
                while len(got) < len(payload):
                    got += await stream.receive()
            assert got == payload


@asyncio_only
async def test_timeouts_cut_stalled_peers_over_protocol_streams(anyio_backend: Any) -> None:
    """idle_timeout on a silent peer and on a peer that reads nothing, record_timeout on a
    record header then silence: PeerTimeoutError, then the stream is broken."""
    release = anyio.Event()

    async def stall(stream: EncryptedStream) -> None:
        await release.wait()

    async with _encrypted_server(stall) as (port, spk):
        async with await connect(
            "127.0.0.1", port, server_public_key=spk, idle_timeout=0.3
        ) as stream:
            assert isinstance(stream.transport_stream, ProtocolStream)
            with anyio.fail_after(5), pytest.raises(PeerTimeoutError, match="next record"):
                await stream.receive()
            with pytest.raises(BrokenResourceError):
                await stream.receive()
        async with await connect(
            "127.0.0.1", port, server_public_key=spk, idle_timeout=0.3
        ) as stream:
            block = os.urandom(1 << 20)
            with anyio.fail_after(10), pytest.raises(PeerTimeoutError, match="took no data"):
                while True:
                    await stream.send(block)
        release.set()

    async def header_then_silence(stream: EncryptedStream) -> None:
        await stream.transport_stream.send(b"\x03\xe8\x00" + bytes(10))
        await anyio.sleep(5)

    async with _encrypted_server(header_then_silence) as (port, spk):
        async with await connect(
            "127.0.0.1", port, server_public_key=spk, record_timeout=0.3
        ) as stream:
            with anyio.fail_after(5), pytest.raises(PeerTimeoutError, match="rest of a record"):
                await stream.receive()
