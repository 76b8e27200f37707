"""The byte-stream conformance check of streamcrypt.testing over three kinds of pairs.

Memory byte streams, EncryptedStream over memory streams, and EncryptedStream over real
loopback TCP (127.0.0.1, ephemeral port), each on asyncio, uvloop and trio. A
deliberately broken stream checks that the check itself can fail.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio
import pytest
from anyio.abc import ByteStream, SocketAttribute, SocketStream

from streamcrypt.testing import (
    MemoryByteStream,
    check_byte_stream,
    encrypted_stream_pair,
    memory_stream_pair,
)

pytestmark = pytest.mark.anyio


async def _tcp_pair() -> tuple[SocketStream, SocketStream]:
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as multi:
        listener = multi.listeners[0]
        port = listener.extra(SocketAttribute.local_port)
        client = await anyio.connect_tcp("127.0.0.1", port)
        server = await listener.accept()
    return client, server


async def test_memory_streams() -> None:
    async def make() -> tuple[ByteStream, ByteStream]:
        return memory_stream_pair()

    await check_byte_stream(make)


async def test_encrypted_over_memory() -> None:
    async def make() -> tuple[ByteStream, ByteStream]:
        return await encrypted_stream_pair()

    await check_byte_stream(make)


async def test_encrypted_over_memory_with_backpressure_and_rekeys() -> None:
    async def make() -> tuple[ByteStream, ByteStream]:
        return await encrypted_stream_pair(memory_stream_pair(4), rekey_interval=3)

    await check_byte_stream(make)


async def test_encrypted_over_tcp() -> None:
    async def make() -> tuple[ByteStream, ByteStream]:
        client, server = await _tcp_pair()
        return await encrypted_stream_pair((client, server), cipher="AESGCM", hash="SHA256")

    await check_byte_stream(make)


@dataclass(eq=False)
class _NoEof(MemoryByteStream):
    """A stream that ignores send_eof: the conformance check must catch it."""

    async def send_eof(self) -> None:
        await anyio.lowlevel.checkpoint()


async def test_the_check_catches_a_broken_stream() -> None:
    async def make() -> tuple[ByteStream, ByteStream]:
        a, b = memory_stream_pair()
        return (
            _NoEof(a.send_stream, a.receive_stream),
            _NoEof(b.send_stream, b.receive_stream),
        )

    with pytest.raises(AssertionError, match="send_eof"):
        await check_byte_stream(make, step_timeout=0.2)
