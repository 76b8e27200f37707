"""EncryptedStream, EncryptedListener, connect/serve: patterns, records, hostile peers.

Every test runs on asyncio, uvloop and trio. Attacks go through ``Hooked``, a byte stream
wrapper that lets a test drop, alter, repeat or cut the chunks one side sends or
receives (over memory streams each ``send()`` of a record batch is one chunk).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import logging
import math
import pickle
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio import (
    BrokenResourceError,
    ClosedResourceError,
    EndOfStream,
    aclose_forcefully,
    create_task_group,
)
from anyio.abc import ByteStream, SocketAttribute
from noise.connection import Keypair, NoiseConnection

from streamcrypt.codecs import records
from streamcrypt.codecs.noise import generate_keypair
from streamcrypt.codecs.records import MAX_RECORD_DATA, preferred_cipher
from streamcrypt.engine import OffloadPolicy
from streamcrypt.errors import (
    AuthenticationError,
    FormatError,
    HandshakeError,
    InvalidKeySizeError,
    InvalidParameterError,
    PeerRejectedError,
    PeerTimeoutError,
    TruncatedStreamError,
)
from streamcrypt.keys import random_bytes
from streamcrypt.testing import MemoryByteStream, encrypted_stream_pair, memory_stream_pair
from streamcrypt.transports import (
    EncryptedListener,
    EncryptedStream,
    EncryptedStreamAttribute,
    connect,
    serve,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

A = EncryptedStreamAttribute
Hook = Callable[[bytes], "list[bytes] | None"]


_CREATED: list[MemoryByteStream] = []


def _mem_pair(max_buffer_size: float = math.inf) -> tuple[MemoryByteStream, MemoryByteStream]:
    pair = memory_stream_pair(max_buffer_size)
    _CREATED.extend(pair)
    return pair


async def _enc(**options: Any) -> tuple[EncryptedStream, EncryptedStream]:
    return await encrypted_stream_pair(_mem_pair(), **options)


@pytest.fixture(autouse=True)
def _close_memory_streams() -> Iterator[None]:
    """anyio warns about unclosed memory streams: close every one a test made."""
    yield
    for stream in _CREATED:
        stream.send_stream.close()
        stream.receive_stream.close()
    _CREATED.clear()


def _same(chunk: bytes) -> list[bytes] | None:
    return [chunk]


@dataclass(eq=False)
class Hooked(ByteStream):
    """Wraps a byte stream; ``outgoing``/``incoming`` map each chunk to chunks (None: cut)."""

    inner: ByteStream
    outgoing: Hook = _same
    incoming: Hook = _same
    sent: list[bytes] = field(default_factory=list)
    _queue: list[bytes] = field(default_factory=list)
    _cut: bool = False

    async def send(self, item: bytes) -> None:
        self.sent.append(bytes(item))
        out = self.outgoing(bytes(item))
        if out is None:
            await self.inner.aclose()
            raise BrokenResourceError("cut by the test")
        for chunk in out:
            await self.inner.send(chunk)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while not self._queue:
            if self._cut:
                raise EndOfStream
            out = self.incoming(await self.inner.receive(1 << 20))
            if out is None:
                self._cut = True
            else:
                self._queue.extend(c for c in out if c)
        chunk = self._queue.pop(0)
        if len(chunk) > max_bytes:
            self._queue.insert(0, chunk[max_bytes:])
        return chunk[:max_bytes]

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _receive_all(stream: ByteStream) -> bytes:
    out = bytearray()
    while True:
        try:
            out += await stream.receive()
        except EndOfStream:
            return bytes(out)


async def _exchange(client: EncryptedStream, server: EncryptedStream) -> None:
    await client.send(b"hello server")
    assert await server.receive() == b"hello server"
    await server.send(b"hello client")
    assert await client.receive() == b"hello client"


def _keys() -> tuple[bytes, bytes, bytes, bytes]:
    sk, spk = generate_keypair()
    ck, cpk = generate_keypair()
    return sk.secret_bytes(), spk, ck.secret_bytes(), cpk


async def _pair_with_hooks(
    client_out: Hook = _same,
    server_in: Hook = _same,
    **options: Any,
) -> tuple[EncryptedStream, EncryptedStream, Hooked, Hooked]:
    left, right = _mem_pair()
    c = Hooked(left, outgoing=client_out)
    s = Hooked(right, incoming=server_in)
    client, server = await encrypted_stream_pair((c, s), **options)
    return client, server, c, s


async def _both_fail(
    client_opts: dict[str, Any], server_opts: dict[str, Any]
) -> tuple[BaseException, BaseException]:
    """Run both handshakes; return (client error, server error)."""
    left, right = _mem_pair()
    errors: dict[str, BaseException] = {}

    async def side(name: str, transport: ByteStream, opts: dict[str, Any]) -> None:
        try:
            await EncryptedStream.wrap(transport, **opts)
        except Exception as exc:
            errors[name] = exc

    with anyio.fail_after(5):
        async with create_task_group() as tg:
            tg.start_soon(side, "client", left, client_opts)
            tg.start_soon(side, "server", right, {**server_opts, "server_side": True})
    assert set(errors) == {"client", "server"}, errors
    return errors["client"], errors["server"]


# -- patterns -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "cipher", "hash_name"),
    [
        ("NNpsk0", "ChaChaPoly", "BLAKE2s"),
        ("NK", "AESGCM", "SHA256"),
        ("IK", "ChaChaPoly", "SHA512"),
        ("XX", "AESGCM", "BLAKE2b"),
    ],
)
async def test_pattern_choice(pattern: str, cipher: str, hash_name: str) -> None:
    sk, spk, ck, cpk = _keys()
    psk = random_bytes(32)
    seen: list[bytes] = []

    def vet(key: bytes) -> bool:
        seen.append(key)
        return True

    client_opts: dict[str, Any] = {
        "NNpsk0": {"psk": psk},
        "NK": {"server_public_key": spk},
        "IK": {"server_public_key": spk, "static_key": ck},
        "XX": {"static_key": ck, "accept_peer": vet},
    }[pattern]
    server_opts: dict[str, Any] = {"psk": psk} if pattern == "NNpsk0" else {"static_key": sk}
    if pattern == "XX":
        server_opts["accept_peer"] = vet
    client, server = await _enc(
        client=client_opts, server=server_opts, cipher=cipher, hash=hash_name
    )
    name = f"Noise_{pattern}_25519_{cipher}_{hash_name}"
    assert client.extra(A.protocol_name) == server.extra(A.protocol_name) == name
    assert client.extra(A.handshake_hash) == server.extra(A.handshake_hash)
    assert len(client.extra(A.handshake_hash)) in (32, 64)
    assert client.extra(A.server_side) is False and server.extra(A.server_side) is True
    expect_client_peer = None if pattern == "NNpsk0" else spk
    expect_server_peer = cpk if pattern in ("IK", "XX") else None
    assert client.extra(A.peer_static_key) == expect_client_peer
    assert server.extra(A.peer_static_key) == expect_server_peer
    if pattern == "XX":
        assert sorted(seen) == sorted([spk, cpk])  # each side vetted the other
    await _exchange(client, server)
    assert "key" not in repr(client).lower() or "hidden" in repr(client)
    await client.aclose()
    await server.aclose()


async def test_async_accept_peer_and_ik_server_vetting() -> None:
    sk, spk, ck, cpk = _keys()

    async def vet(key: bytes) -> bool:
        await anyio.lowlevel.checkpoint()
        return key == cpk

    client, server = await _enc(
        client={"server_public_key": spk, "static_key": ck},
        server={"static_key": sk, "accept_peer": vet},
    )
    assert server.extra(A.peer_static_key) == cpk
    await _exchange(client, server)


async def test_xx_client_refuses_server() -> None:
    sk, _, ck, _ = _keys()
    client_err, server_err = await _both_fail(
        {"static_key": ck, "accept_peer": lambda key: False}, {"static_key": sk}
    )
    assert isinstance(client_err, PeerRejectedError)
    assert "server's static key" in str(client_err)
    assert type(server_err) is HandshakeError
    assert "closed the connection during the handshake" in str(server_err)


@pytest.mark.parametrize("pattern", ["XX", "IK"])
async def test_server_refuses_client(pattern: str) -> None:
    """The server vets the client's key once the client confirmed it (XX: its last
    message; IK: its key confirmation record), so the client's handshake has ended when
    the server refuses: it learns of the refusal when reading."""
    sk, spk, ck, _ = _keys()
    left, right = _mem_pair()
    outcome: dict[str, Any] = {}
    client_opts: dict[str, Any] = (
        {"accept_peer": lambda k: True} if pattern == "XX" else {"server_public_key": spk}
    )

    async def client_side() -> None:
        client = await EncryptedStream.wrap(left, static_key=ck, **client_opts)
        with pytest.raises(TruncatedStreamError):
            await client.receive()
        with pytest.raises(BrokenResourceError):
            await client.receive()
        outcome["client"] = True

    async def server_side() -> None:
        with pytest.raises(PeerRejectedError, match="client's static key"):
            await EncryptedStream.wrap(
                right, server_side=True, static_key=sk, accept_peer=lambda k: False
            )
        outcome["server"] = True

    with anyio.fail_after(5):
        async with create_task_group() as tg:
            tg.start_soon(client_side)
            tg.start_soon(server_side)
    assert outcome == {"client": True, "server": True}


async def test_server_with_accept_peer_refuses_anonymous_nk() -> None:
    sk, spk, _, _ = _keys()
    client_err, server_err = await _both_fail(
        {"server_public_key": spk}, {"static_key": sk, "accept_peer": lambda key: True}
    )
    assert isinstance(client_err, HandshakeError)
    assert isinstance(server_err, HandshakeError) and "anonymous NK" in str(server_err)


def _client_options(pattern: str, spk: bytes, ck: bytes, psk: bytes) -> dict[str, Any]:
    return {
        "NNpsk0": {"psk": psk},
        "NK": {"server_public_key": spk},
        "IK": {"server_public_key": spk, "static_key": ck},
        "XX": {"static_key": ck, "accept_peer": lambda key: True},
    }[pattern]


@pytest.mark.parametrize("pattern", sorted(records.PATTERNS))
def test_a_replayed_first_message_never_completes_the_server_handshake(pattern: str) -> None:
    """Sans-I/O, every pattern the protocol speaks: the client's first flight replayed
    to a fresh server gets its answer, but never :class:`Complete` nor a vetting of the
    client's key, whatever follows (a forged confirmation, the real client's second
    flight from another session); the real client's own session completes (review 3)."""
    sk, spk, ck, _ = _keys()
    psk = random_bytes(32)
    opts = _client_options(pattern, spk, ck, psk)
    server_opts: dict[str, Any] = {"psk": psk} if pattern == "NNpsk0" else {"static_key": sk}
    client = records.ProtocolConfig.make(
        server_side=False, vets_peers="accept_peer" in opts, **_key_options(opts)
    )
    server = records.ProtocolConfig.make(
        server_side=True, vets_peers=pattern == "XX", **server_opts
    )

    def step(handshake: records.Handshake) -> records.HandshakeEvent:
        event = handshake.next_event()
        while isinstance(event, records.VetPeer):
            handshake.vetted()
            event = handshake.next_event()
        return event

    # The real session: what the client sends, flight by flight.
    genuine, real_server = records.Handshake(client), records.Handshake(server)
    step(genuine)
    flights = [genuine.data_to_send()]
    while True:
        real_server.receive_data(flights[-1])
        if isinstance(step(real_server), records.Complete):
            break
        genuine.receive_data(real_server.data_to_send())
        assert isinstance(step(genuine), records.Complete)
        flights.append(genuine.data_to_send())
    assert len(flights) == 2  # the first flight, then the last message or the confirmation

    # The replays: the first flight gets an answer, never Complete nor a VetPeer, and
    # nothing the replayer holds (the real client's later flight, a forged
    # confirmation) completes the handshake.
    for later in (flights[1], b"\x00\x10\x02" + bytes(16)):
        replayed = records.Handshake(server)
        replayed.receive_data(flights[0])
        assert isinstance(replayed.next_event(), records.NeedData)
        assert replayed.data_to_send()
        replayed.receive_data(later)
        with pytest.raises(HandshakeError):
            replayed.next_event()


def _key_options(opts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in opts.items() if k != "accept_peer"}


@pytest.mark.parametrize("pattern", ["IK", "NK", "NNpsk0"])
async def test_a_replayed_first_message_never_reaches_the_handler(pattern: str) -> None:
    """An eavesdropper replays a client's first flight on new connections: the handler
    never runs and ``accept_peer`` never sees the client's key for it; each replay is cut
    at ``handshake_timeout`` (not ``idle_timeout``) and its slot freed, so the real
    client still gets in with ``max_connections=1`` (review 3)."""
    sk, spk, ck, cpk = _keys()
    psk = random_bytes(32)
    opts = _client_options(pattern, spk, ck, psk)
    server_opts: dict[str, Any] = {"psk": psk} if pattern == "NNpsk0" else {"static_key": sk}
    vetted: list[bytes] = []
    if pattern == "IK":
        server_opts["accept_peer"] = lambda key: vetted.append(key) or True
    handled: list[bytes | None] = []

    async def handler(stream: EncryptedStream) -> None:
        handled.append(stream.extra(A.peer_static_key))
        await stream.send(b"for the confirmed client")

    first_flight = records.Handshake(
        records.ProtocolConfig.make(server_side=False, **_key_options(opts))
    )
    first_flight.next_event()
    replay = first_flight.data_to_send()
    limit = 0.5
    async with create_task_group() as tg:
        port = await tg.start(
            functools.partial(
                serve,
                handler,
                **server_opts,
                handshake_timeout=limit,
                idle_timeout=30,
                max_connections=1,
            )
        )
        for _ in range(2):
            async with await anyio.connect_tcp("127.0.0.1", port) as tcp:
                await tcp.send(replay)
                started = time.monotonic()
                answer = b""
                with anyio.fail_after(10), contextlib.suppress(EndOfStream, BrokenResourceError):
                    while True:
                        answer += await tcp.receive()
                held = time.monotonic() - started
            assert answer  # the server's message 2, and nothing sealed for the handler
            assert limit * 0.8 < held < limit + 2.0, held
        assert handled == [] and vetted == []
        async with await connect("127.0.0.1", port, **opts) as client:
            assert await client.receive() == b"for the confirmed client"  # server first
        tg.cancel_scope.cancel()
    assert handled == [cpk if pattern == "IK" else None]
    assert vetted == ([cpk] if pattern == "IK" else [])


@pytest.mark.parametrize("pattern", ["IK", "NK", "NNpsk0", "XX"])
async def test_a_client_that_only_receives_gets_what_the_server_sends_first(
    pattern: str,
) -> None:
    """The key confirmation leaves with the client's handshake, not with its first
    data: a client that never sends still lets the server's handler start."""
    sk, spk, ck, _ = _keys()
    psk = random_bytes(32)
    server_opts: dict[str, Any] = {"psk": psk} if pattern == "NNpsk0" else {"static_key": sk}
    if pattern == "XX":
        server_opts["accept_peer"] = lambda key: True
    client, server = await _enc(client=_client_options(pattern, spk, ck, psk), server=server_opts)
    async with create_task_group() as tg:
        tg.start_soon(server.send, b"the server speaks first")
        with anyio.fail_after(5):
            assert await client.receive() == b"the server speaks first"
    await server.send(b"and again")
    assert await client.receive() == b"and again"
    await _exchange(client, server)


async def test_wrong_server_key_fails_both_sides() -> None:
    sk, _, _, _ = _keys()
    _, wrong = generate_keypair()
    for client_opts in (
        {"server_public_key": wrong},
        {"server_public_key": wrong, "static_key": sk},
    ):
        client_err, server_err = await _both_fail(client_opts, {"static_key": sk})
        assert type(client_err) is HandshakeError
        assert type(server_err) is HandshakeError
        assert isinstance(server_err.__cause__, AuthenticationError)


async def test_wrong_psk_and_mismatched_suites_fail() -> None:
    client_err, server_err = await _both_fail({"psk": bytes(32)}, {"psk": bytes(31) + b"\x01"})
    assert type(client_err) is HandshakeError and type(server_err) is HandshakeError
    client_err, server_err = await _both_fail(
        {"psk": bytes(32), "cipher": "AESGCM"}, {"psk": bytes(32), "cipher": "ChaChaPoly"}
    )
    assert "AESGCM/BLAKE2s" in str(server_err) and isinstance(client_err, HandshakeError)
    client_err, server_err = await _both_fail(
        {"psk": bytes(32), "hash": "SHA256"}, {"psk": bytes(32)}
    )
    assert "SHA256" in str(server_err) and isinstance(client_err, HandshakeError)


@pytest.mark.parametrize("client_cipher", ["auto", "AESGCM", "ChaChaPoly"])
async def test_cipher_is_negotiated_either_side_may_insist(client_cipher: str) -> None:
    """An "auto" server accepts both ciphers; an "auto" client proposes the one its CPU
    flags choose; a side naming a cipher gets exactly that one."""
    client, server = await encrypted_stream_pair(_mem_pair(), client={"cipher": client_cipher})
    expected = preferred_cipher() if client_cipher == "auto" else client_cipher
    for end in (client, server):
        assert end.extra(EncryptedStreamAttribute.protocol_name).split("_")[3] == expected
    await client.send(b"hello")
    assert await server.receive() == b"hello"
    await client.aclose()
    await server.aclose()
    sk, _, _, _ = _keys()
    _, server_err = await _both_fail({"psk": bytes(32)}, {"static_key": sk})
    assert "no pre-shared key" in str(server_err)


@pytest.mark.parametrize(
    ("flags", "cipher"),
    [
        ("fpu sse2 aes pclmulqdq avx2", "AESGCM"),  # x86 with AES-NI
        ("fpu sse2 aes vaes pclmulqdq vpclmulqdq avx512f", "AESGCM"),
        ("fpu sse2 avx2", "ChaChaPoly"),  # x86 without AES-NI
        ("fpu sse2 aes", "ChaChaPoly"),  # AES without carry-less multiply (GHASH slow)
        ("fp asimd evtstrm aes pmull sha1 sha2 crc32", "AESGCM"),  # ARMv8 crypto
        ("fp asimd evtstrm crc32", "ChaChaPoly"),  # ARMv8 without (Raspberry Pi 4)
        ("", "ChaChaPoly"),  # unknown: no /proc/cpuinfo
    ],
)
def test_auto_cipher_follows_cpu_flags(flags: str, cipher: str) -> None:
    assert preferred_cipher(flags.split()) == cipher
    assert preferred_cipher(flags.split()) == cipher  # deterministic: no timing involved


def test_this_machines_cipher_comes_from_its_flags() -> None:
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        assert preferred_cipher() == "ChaChaPoly"
        return
    line = next(
        (
            v
            for k, _, v in (x.partition(":") for x in text.splitlines())
            if k.strip().lower() in ("flags", "features")
        ),
        "",
    )
    assert preferred_cipher() == preferred_cipher(line.split())


@pytest.mark.parametrize("as_secret_key", [False, True])
def test_configs_never_show_or_pickle_their_keys(as_secret_key: bool) -> None:
    from streamcrypt.codecs.records import ProtocolConfig
    from streamcrypt.keys import SecretKey
    from streamcrypt.transports._config import StreamConfig

    raw = {name: bytes([n]) * 32 for n, name in enumerate(("psk", "static_key"), 0x41)}
    psk = SecretKey(raw["psk"]) if as_secret_key else raw["psk"]
    static = SecretKey(raw["static_key"]) if as_secret_key else raw["static_key"]
    holders: list[object] = [
        StreamConfig(psk=psk),
        StreamConfig(static_key=static, accept_peer=bool),
        ProtocolConfig.make(server_side=True, psk=psk),
        ProtocolConfig.make(server_side=True, static_key=static),
    ]
    for holder in holders:
        for text in (repr(holder), str(holder)):
            assert "hidden" in text
            for key in raw.values():
                assert key.hex() not in text and repr(key)[2:20] not in text
        with pytest.raises(TypeError, match="not picklable"):
            pickle.dumps(holder)
        with pytest.raises(TypeError, match="not picklable"):
            copy.copy(holder)


def test_option_errors_before_any_io() -> None:
    async def wrap(**options: Any) -> EncryptedStream:
        return await EncryptedStream.wrap(_mem_pair()[0], **options)

    sk, spk, _, _ = _keys()
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({}, InvalidParameterError, "needs psk="),
        ({"psk": bytes(16)}, InvalidKeySizeError, "32 bytes"),
        ({"static_key": sk}, InvalidParameterError, "accept_peer"),
        ({"psk": bytes(32), "static_key": sk}, InvalidParameterError, "cannot be combined"),
        ({"server_public_key": spk[:31]}, InvalidKeySizeError, "32-byte"),
        ({"psk": bytes(32), "cipher": "AES"}, InvalidParameterError, "unsupported cipher"),
        ({"psk": bytes(32), "hash": "MD5"}, InvalidParameterError, "unsupported hash"),
        ({"psk": bytes(32), "rekey_interval": 0}, InvalidParameterError, "rekey_interval"),
        (
            {"server_side": True, "static_key": sk, "server_public_key": spk},
            InvalidParameterError,
            "client",
        ),
        ({"server_side": True}, InvalidParameterError, "the server needs"),
    ]
    for options, exc_type, text in cases:
        with pytest.raises(exc_type, match=text):
            anyio.run(lambda: wrap(**options))  # noqa: B023
    with pytest.raises(InvalidParameterError):
        EncryptedListener(_mem_pair()[0], psk=bytes(32), cipher="nope")  # type: ignore[arg-type]


# -- records ------------------------------------------------------------------------------


async def test_small_large_and_split_records() -> None:
    client, server, c, _ = await _pair_with_hooks()
    c.sent.clear()
    sizes = [1, 100, MAX_RECORD_DATA, MAX_RECORD_DATA + 1, 3 * MAX_RECORD_DATA + 7, 5 << 20]
    for size in sizes:
        data = random_bytes(size)
        await client.send(data)
        assert await _receive_exactly(server, size) == data
    # The wire: every record is 2-byte length, type 0, Noise message of <= 65535 bytes.
    wire = b"".join(c.sent)
    pos = 0
    records = 0
    while pos < len(wire):
        length = int.from_bytes(wire[pos : pos + 2], "big")
        assert wire[pos + 2] == 0 and 16 <= length <= 65535
        pos += 3 + length
        records += 1
    assert pos == len(wire)
    expect = sum(-(-size // MAX_RECORD_DATA) for size in sizes)
    assert records == expect
    assert len(wire) == sum(sizes) + records * 19
    # a single small send is sealed and sent at once, as one transport write
    c.sent.clear()
    await client.send(bytearray(b"x"))
    assert len(c.sent) == 1 and len(c.sent[0]) == 3 + 1 + 16
    assert await server.receive() == b"x"


@pytest.mark.parametrize("seed", range(3))
async def test_any_chunking_of_the_wire_gives_the_same_plaintext(seed: int) -> None:
    """Records split anywhere (inside headers too) and runs of records in one chunk: the
    record layer parses chunks in place and carries only the record spanning two."""
    rng = random.Random(seed)

    def rechunk(chunk: bytes) -> list[bytes]:
        out, pos = [], 0
        while pos < len(chunk):
            step = rng.choice([1, 2, 3, 5, 19, 4096, 65538, 200_000])
            out.append(chunk[pos : pos + step])
            pos += step
        return out

    client, server, _, _ = await _pair_with_hooks(client_out=rechunk)
    for size in [1, 100, MAX_RECORD_DATA + 1, 3 << 20, 7]:
        data = random_bytes(size)
        await client.send(data)
        assert await _receive_exactly(server, size) == data


async def _receive_exactly(stream: ByteStream, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        out += await stream.receive(1 << 20)
    assert len(out) == size
    return bytes(out)


async def test_receive_respects_max_bytes_within_a_record() -> None:
    client, server = await _enc()
    await client.send(b"abcdefghij")
    assert await server.receive(3) == b"abc"
    assert await server.receive(4) == b"defg"
    assert await server.receive() == b"hij"


async def test_rekey_after_the_interval() -> None:
    client, server = await _enc(rekey_interval=3)
    for i in range(20):
        await client.send(b"m%d" % i)
        assert await server.receive() == b"m%d" % i
        await server.send(b"r%d" % i)
        assert await client.receive() == b"r%d" % i
    # Proof that keys change: a receiver that rekeys on another schedule fails at record 4
    # (NNpsk0: the client's key confirmation is its first record, counted as any other).
    client, server = await _enc(client={"rekey_interval": 3}, server={"rekey_interval": 5})
    for i in range(2):
        await client.send(b"m%d" % i)
        assert await server.receive() == b"m%d" % i
    await client.send(b"after the client's rekey")
    with pytest.raises(AuthenticationError):
        await server.receive()


async def test_eof_semantics() -> None:
    client, server = await _enc()
    await client.send(b"data")
    await client.send_eof()
    await client.send_eof()  # idempotent
    assert await server.receive() == b"data"
    with pytest.raises(EndOfStream):
        await server.receive()
    with pytest.raises(EndOfStream):
        await server.receive()
    with pytest.raises(ClosedResourceError):
        await client.send(b"more")
    await server.send(b"still open this way")
    assert await client.receive() == b"still open this way"
    await server.send_eof()
    await server.aclose()
    with pytest.raises(EndOfStream):
        await client.receive()
    with pytest.raises(ClosedResourceError):
        await server.receive()


async def _end_of(stream: EncryptedStream) -> type[BaseException]:
    """What the peer's next receive() after everything sent raises."""
    try:
        await stream.receive()
    except BaseException as exc:
        return type(exc)
    raise AssertionError("receive() returned data")


async def test_the_stream_state_is_one_enum_through_its_life() -> None:
    client, server = await _enc()
    assert "open" in repr(client)
    await client.send_eof()
    assert "send-closed" in repr(client)
    with pytest.raises(EndOfStream):
        await server.receive()
    assert "receive-closed" in repr(server)
    await server.send_eof()
    with pytest.raises(EndOfStream):
        await client.receive()
    assert "ended" in repr(client) and "ended" in repr(server)
    await client.aclose()
    assert "closed" in repr(client)
    state_fields = [
        f for f in vars(EncryptedStream)["__dataclass_fields__"] if "eof" in f or "broken" in f
    ]
    assert state_fields == []  # no booleans beside the enum
    await server.aclose()


async def test_only_a_sender_that_finished_sends_the_authenticated_close() -> None:
    # aclose() without send_eof() is an abort: the peer can tell it from an end.
    client, server = await _enc()
    await client.send(b"part")
    await client.aclose()
    assert await server.receive() == b"part"
    with pytest.raises(TruncatedStreamError, match="aborted"):
        await server.receive()
    # async with left by an exception: an abort.
    client, server = await _enc()
    with pytest.raises(RuntimeError):
        async with client:
            await client.send(b"part")
            raise RuntimeError("the sender failed")
    assert await server.receive() == b"part"
    assert await _end_of(server) is TruncatedStreamError
    # ... left by a cancellation: an abort.
    client, server = await _enc()
    with anyio.CancelScope() as scope:
        async with client:
            await client.send(b"part")
            scope.cancel()
            await anyio.sleep(1)
    assert await server.receive() == b"part"
    assert await _end_of(server) is TruncatedStreamError
    # ... left normally: the end, authenticated.
    client, server = await _enc()
    async with client:
        await client.send(b"all")
    assert await server.receive() == b"all"
    assert await _end_of(server) is EndOfStream
    await server.aclose()


async def test_a_failed_send_never_ends_the_stream_cleanly() -> None:
    cut = {"on": False}

    def client_out(chunk: bytes) -> list[bytes] | None:
        return None if cut["on"] else [chunk]

    client, server, _, _ = await _pair_with_hooks(client_out)
    await client.send(b"first")
    cut["on"] = True
    with pytest.raises(BrokenResourceError):
        async with client:
            await client.send(b"second")
    assert await server.receive() == b"first"
    assert await _end_of(server) is TruncatedStreamError


async def test_a_listener_handler_that_raises_aborts_its_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    psk = random_bytes(32)
    outcomes: list[type[BaseException]] = []

    async def handler(stream: EncryptedStream) -> None:
        await stream.send(b"one")
        await stream.send(b"two")
        if await stream.receive() == b"fail":
            raise ValueError("the handler failed half-way")

    async with create_task_group() as tg:
        port = await tg.start(functools.partial(serve, handler, psk=psk))
        for request in (b"fail", b"finish"):
            async with await connect("127.0.0.1", port, psk=psk) as stream:
                await stream.send(request)
                got = b""
                while len(got) < 6:
                    got += await stream.receive()
                assert got == b"onetwo"
                outcomes.append(await _end_of(stream))
        tg.cancel_scope.cancel()
    assert outcomes == [TruncatedStreamError, EndOfStream]
    assert "the handler failed half-way" in caplog.text


async def test_close_without_close_record_is_truncation() -> None:
    client, server = await _enc()
    await client.send(b"complete record")
    await client.transport_stream.aclose()  # the transport ends, no close record
    assert await server.receive() == b"complete record"
    with pytest.raises(TruncatedStreamError, match="without the authenticated close"):
        await server.receive()
    with pytest.raises(BrokenResourceError):
        await server.receive()
    with pytest.raises(BrokenResourceError):
        await server.send(b"x")


async def test_truncation_mid_record_returns_nothing_partial() -> None:
    cut = {"on": False}

    def client_out(chunk: bytes) -> list[bytes] | None:
        if cut["on"]:
            return [chunk[: len(chunk) // 2]]
        return [chunk]

    client, server, c, _ = await _pair_with_hooks(client_out)
    cut["on"] = True
    await client.send(b"A" * 1000)
    await c.inner.aclose()
    with pytest.raises(TruncatedStreamError, match="middle of a record"):
        await server.receive()
    with pytest.raises(BrokenResourceError):
        await server.receive()


@pytest.mark.parametrize("where", [3, 10, -1])
async def test_tampered_record_fails_then_broken(where: int) -> None:
    state = {"on": False}

    def client_out(chunk: bytes) -> list[bytes] | None:
        if state["on"]:
            data = bytearray(chunk)
            data[where] ^= 0x01
            return [bytes(data)]
        return [chunk]

    client, server, _, _ = await _pair_with_hooks(client_out)
    await client.send(b"fine")
    assert await server.receive() == b"fine"
    state["on"] = True
    await client.send(b"secret plaintext")
    with pytest.raises(AuthenticationError) as info:
        await server.receive()
    assert "secret" not in str(info.value)
    with pytest.raises(BrokenResourceError):
        await server.receive()
    with pytest.raises(BrokenResourceError):
        await server.send(b"x")
    await server.aclose()


async def test_verified_data_before_a_bad_record_in_the_same_chunk_is_kept() -> None:
    held: list[bytes] = []
    state = {"on": False}

    def client_out(chunk: bytes) -> list[bytes] | None:
        if not state["on"]:
            return [chunk]
        if not held:
            held.append(chunk)
            return []
        return [held[0] + chunk[:-1] + bytes([chunk[-1] ^ 0x80])]

    client, server, _, _ = await _pair_with_hooks(client_out)
    state["on"] = True
    await client.send(b"good")
    await client.send(b"evil")  # both records reach the server in one chunk
    assert await server.receive() == b"good"
    with pytest.raises(AuthenticationError):
        await server.receive()
    with pytest.raises(BrokenResourceError):
        await server.receive()


async def test_buffered_records_come_back_together_within_max_bytes() -> None:
    client, server, _, _ = await _pair_with_hooks()
    await client.send(b"a" * 100_000)  # two records, one transport write
    first = await server.receive(70_000)
    assert first == b"a" * 70_000  # both records opened, max_bytes of them returned
    assert await server.receive(1 << 20) == b"a" * 30_000
    await client.send(b"b" * 100_000)
    assert await server.receive(1 << 20) == b"b" * 100_000  # both records at once


async def test_tampered_record_type_fails_authentication() -> None:
    client, server, _, _ = await _pair_with_hooks(
        lambda chunk: [chunk[:2] + b"\x01" + chunk[3:]] if len(chunk) == 3 + 5 + 16 else [chunk]
    )
    await client.send(b"12345")  # its type byte becomes "close"
    with pytest.raises(AuthenticationError):
        await server.receive()


async def test_replayed_and_dropped_records_fail() -> None:
    mode = {"replay": False, "drop": False}

    def client_out(chunk: bytes) -> list[bytes] | None:
        if mode["drop"]:
            mode["drop"] = False
            return []
        return [chunk, chunk] if mode["replay"] else [chunk]

    client, server, _, _ = await _pair_with_hooks(client_out)
    mode["replay"] = True
    await client.send(b"pay 100")
    assert await server.receive() == b"pay 100"
    with pytest.raises(AuthenticationError):
        await server.receive()  # the same record again
    mode["replay"] = False
    client, server, _, _ = await _pair_with_hooks(client_out)
    mode["drop"] = True
    await client.send(b"one")
    await client.send(b"two")
    with pytest.raises(AuthenticationError):
        await server.receive()  # "two" under nonce 0: a dropped record is detected


async def test_short_length_prefix_is_format_error() -> None:
    client, server = await _enc()
    await client.transport_stream.send(b"\x00\x05\x00hello")
    with pytest.raises(FormatError, match="shorter than the 16-byte tag"):
        await server.receive()
    with pytest.raises(BrokenResourceError):
        await server.receive()


async def test_oversized_handshake_length_prefix_is_format_error() -> None:
    left, right = _mem_pair()
    await left.send(b"sc\x02\x01\x01\x03" + b"\xff\xff" + bytes(100))
    with pytest.raises(FormatError, match="claims 65535 bytes"):
        await EncryptedStream.wrap(right, server_side=True, psk=bytes(32))
    with pytest.raises(BrokenResourceError):
        await left.send(b"the server closed the connection")


@pytest.mark.parametrize(
    ("garbage", "error", "text"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", FormatError, "preamble"),
        (b"sc\x01\x01\x01\x03", FormatError, "version 1"),
        (b"sc\x02\x09\x01\x03", FormatError, "unknown pattern"),
        (b"sc\x02\x01\x01\x03\x00\x30" + bytes(48), HandshakeError, "refused"),
        (b"sc\x02\x01", HandshakeError, "closed the connection"),
    ],
)
async def test_garbage_handshakes(garbage: bytes, error: type[Exception], text: str) -> None:
    left, right = _mem_pair()
    await left.send(garbage)
    await left.send_eof()
    with pytest.raises(error, match=text):
        await EncryptedStream.wrap(right, server_side=True, psk=bytes(32))


async def test_stalled_handshake_times_out() -> None:
    left, right = _mem_pair()
    await left.send(b"sc\x02")  # then nothing
    with anyio.fail_after(5), pytest.raises(HandshakeError, match=r"within 0\.2 s") as info:
        await EncryptedStream.wrap(right, server_side=True, psk=bytes(32), handshake_timeout=0.2)
    assert isinstance(info.value.__cause__, TimeoutError)
    with pytest.raises(BrokenResourceError):
        await left.send(b"x")  # the server closed its end


async def test_cancelled_send_breaks_the_stream() -> None:
    client, server = await encrypted_stream_pair(_mem_pair(0))
    with anyio.move_on_after(0.05) as scope:
        await client.send(b"never received")  # nobody reads: blocks in the transport
    assert scope.cancelled_caught
    with pytest.raises(BrokenResourceError):
        await client.send(b"x")
    # ...whereas a send cancelled before it starts leaves the stream sound
    client, server = await _enc()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await client.send(b"never sealed")
    await client.send(b"ok")
    assert await server.receive() == b"ok"


async def test_extra_attributes_merge_over_tcp_and_no_secrets_in_repr() -> None:
    sk, spk, _, _ = _keys()

    async def handler(stream: EncryptedStream) -> None:
        await stream.send(await stream.receive())

    with pytest.raises(InvalidParameterError, match="the server needs"):
        await serve(handler)  # checked before a port is bound
    async with create_task_group() as tg:
        port = await tg.start(functools.partial(serve, handler, static_key=sk))
        async with await connect("127.0.0.1", port, server_public_key=spk) as stream:
            assert stream.extra(SocketAttribute.remote_port) == port
            assert stream.extra(A.peer_static_key) == spk
            await stream.send(b"echo")
            assert await stream.receive() == b"echo"
            assert sk.hex() not in repr(stream) and "Noise_NK" in repr(stream)
        tg.cancel_scope.cancel()


# -- a server with good and bad clients at once --------------------------------------------


@pytest.mark.parametrize(
    "error",
    [TimeoutError(10.553053123000154), ValueError(), PeerTimeoutError("10.5"), EndOfStream()],
)
async def test_every_failure_line_says_what_failed(
    caplog: pytest.LogCaptureFixture, error: BaseException
) -> None:
    """A failed connection once logged as the bare text 10.553053123000154: every line
    now names what failed, the peer and the error type, whatever the error's message."""
    caplog.set_level(logging.WARNING, logger="streamcrypt.transports")
    psk = random_bytes(32)

    async def handler(stream: EncryptedStream) -> None:
        raise error

    async with create_task_group() as tg:
        port = await tg.start(functools.partial(serve, handler, psk=psk))
        async with await connect("127.0.0.1", port, psk=psk) as stream:
            with contextlib.suppress(TruncatedStreamError, BrokenResourceError):
                await stream.receive()
        for _ in range(500):  # the server logs once its handler's task ended
            if caplog.records:
                break
            await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "streamcrypt.transports"]
    assert "encrypted connection with 127.0.0.1:" in line
    assert type(error).__name__ in line and "connection" in line.split(":")[0]
    assert line.endswith(str(error) or type(error).__name__)


async def test_server_survives_bad_clients(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="streamcrypt.transports")
    sk, spk, ck, _ = _keys()
    _, wrong = generate_keypair()
    payload = random_bytes(300_000)
    done: list[str] = []

    async def echo(stream: EncryptedStream) -> None:
        async for chunk in stream:
            await stream.send(chunk)

    async def good(name: str, **options: Any) -> None:
        async with await connect("127.0.0.1", port, **options) as stream:
            async with create_task_group() as tg:
                tg.start_soon(_send_then_eof, stream, payload)
                assert await _receive_all(stream) == payload
        done.append(name)

    async def raw(data: bytes, *, stall: float = 0.0) -> None:
        stream = await anyio.connect_tcp("127.0.0.1", port)
        async with stream:
            await stream.send(data)
            await anyio.sleep(stall)
            with pytest.raises((EndOfStream, BrokenResourceError)):
                await stream.receive()

    async def wrong_key() -> None:
        with pytest.raises(HandshakeError):
            await connect("127.0.0.1", port, server_public_key=wrong)

    async def hooked(out: Hook, after: bytes = b"x") -> None:
        transport = Hooked(await anyio.connect_tcp("127.0.0.1", port), outgoing=_same)
        stream = await EncryptedStream.wrap(transport, server_public_key=spk)
        transport.outgoing = out
        try:
            await stream.send(after)
            await stream.receive()
        except (EndOfStream, BrokenResourceError, TruncatedStreamError, ClosedResourceError):
            pass
        await stream.aclose()

    def flip(chunk: bytes) -> list[bytes] | None:
        return [chunk[:-1] + bytes([chunk[-1] ^ 1])]

    async with create_task_group() as tg:
        port = await tg.start(lambda **kw: serve(echo, static_key=sk, handshake_timeout=0.5, **kw))
        async with create_task_group() as clients:
            for i in range(3):
                clients.start_soon(lambda i=i: good(f"nk{i}", server_public_key=spk))
                clients.start_soon(lambda i=i: good(f"ik{i}", server_public_key=spk, static_key=ck))
                clients.start_soon(
                    lambda i=i: good(f"xx{i}", static_key=ck, accept_peer=lambda k: k == spk)
                )
            clients.start_soon(raw, b"\x16\x03\x01\x02\x00" + bytes(100))  # a TLS hello
            clients.start_soon(raw, b"sc\x02\x02\x01\x03\xff\xff")  # oversized prefix
            clients.start_soon(lambda: raw(b"sc\x02\x02\x01\x03", stall=1.0))  # stalls
            clients.start_soon(wrong_key)
            clients.start_soon(hooked, flip)  # tampered record
            clients.start_soon(hooked, lambda chunk: [chunk, chunk])  # replayed record
            clients.start_soon(hooked, lambda chunk: [b"\x00\x01\x00"])  # short length
            clients.start_soon(hooked, lambda chunk: None, b"y" * 5000)  # cut mid-record
        tg.cancel_scope.cancel()
    assert sorted(done) == sorted(f"{p}{i}" for p in ("nk", "ik", "xx") for i in range(3))
    lines = [r.getMessage() for r in caplog.records if r.name == "streamcrypt.transports"]
    text = "\n".join(lines)
    assert len(lines) == 8, text
    for expected in (
        "FormatError: the client did not open with the EncryptedStream preamble",
        "FormatError: handshake message 0 claims 65535",
        "HandshakeError: the Noise handshake did not complete within 0.5 s",
        "HandshakeError: Noise handshake message 0",
        "TruncatedStreamError",
        "FormatError: record length 1",
    ):
        assert expected in text, text
    assert text.count("AuthenticationError") == 2, text
    assert sk.hex() not in text and ck.hex() not in text


async def _send_then_eof(stream: EncryptedStream, data: bytes) -> None:
    for i in range(0, len(data), 70_000):
        await stream.send(data[i : i + 70_000])
    await stream.send_eof()


# -- interop: the handshake is plain Noise ---------------------------------------------------


@pytest.mark.parametrize("pattern", ["NK", "XX", "NNpsk0"])
async def test_noiseprotocol_client_against_encrypted_stream_server(pattern: str) -> None:
    """The ``noiseprotocol`` package runs the client handshake (with our preamble and
    prologue); records then need its CipherState with the 3-byte header as AD, since the
    record layer adds a type byte that a bare Noise transport does not have."""
    sk, spk, ck, _ = _keys()
    psk = random_bytes(32)
    server_opts: dict[str, Any] = {"psk": psk} if pattern == "NNpsk0" else {"static_key": sk}
    received: list[bytes] = []
    hashes: list[bytes] = []

    async def handler(stream: EncryptedStream) -> None:
        hashes.append(stream.extra(A.handshake_hash))
        received.append(await stream.receive())
        await stream.send(b"reply from streamcrypt")
        with pytest.raises(EndOfStream):
            await stream.receive()

    pid = {"NNpsk0": 1, "NK": 2, "XX": 4}[pattern]
    preamble = b"sc\x02" + bytes((pid, 1, 3))
    conn = NoiseConnection.from_name(f"Noise_{pattern}_25519_ChaChaPoly_BLAKE2s".encode())
    conn.set_prologue(b"streamcrypt EncryptedStream\x00" + preamble)
    conn.set_as_initiator()
    if pattern == "NK":
        conn.set_keypair_from_public_bytes(Keypair.REMOTE_STATIC, spk)
    elif pattern == "XX":
        conn.set_keypair_from_private_bytes(Keypair.STATIC, ck)
    else:
        conn.set_psks(psks=[psk])
    conn.start_handshake()

    async with create_task_group() as tg:
        port = await tg.start(lambda **kw: serve(handler, **server_opts, **kw))
        async with await anyio.connect_tcp("127.0.0.1", port) as tcp:
            buf = bytearray()

            async def read(n: int) -> bytes:
                while len(buf) < n:
                    buf.extend(await tcp.receive())
                out = bytes(buf[:n])
                del buf[:n]
                return out

            first = True
            for i in range(3 if pattern == "XX" else 2):
                if i % 2 == 0:
                    msg = bytes(conn.write_message())
                    await tcp.send((preamble if first else b"") + len(msg).to_bytes(2, "big") + msg)
                    first = False
                else:
                    size = int.from_bytes(await read(2), "big")
                    conn.read_message(await read(size))
                    if pattern == "XX":  # the server's static key, read from message 1
                        rs = conn.noise_protocol.handshake_state.rs.public_bytes
                        assert bytes(rs) == spk
            assert conn.handshake_finished
            send_cs = conn.noise_protocol.cipher_state_encrypt
            recv_cs = conn.noise_protocol.cipher_state_decrypt
            first_flight = b""
            if pattern != "XX":  # the server wrote the last message: confirm the keys first
                confirm = (16).to_bytes(2, "big") + b"\x02"
                first_flight = confirm + bytes(send_cs.encrypt_with_ad(confirm, b""))
            data = b"hello from noiseprotocol"
            header = (len(data) + 16).to_bytes(2, "big") + b"\x00"
            await tcp.send(first_flight + header + bytes(send_cs.encrypt_with_ad(header, data)))
            header = await read(3)
            reply = recv_cs.decrypt_with_ad(header, await read(int.from_bytes(header[:2], "big")))
            assert header[2] == 0 and bytes(reply) == b"reply from streamcrypt"
            close = (16).to_bytes(2, "big") + b"\x01"
            await tcp.send(close + bytes(send_cs.encrypt_with_ad(close, b"")))
            header = await read(3)
            assert header[2] == 1  # the server's handler ended: its authenticated close
            assert bytes(recv_cs.decrypt_with_ad(header, await read(16))) == b""
            assert hashes == [bytes(conn.get_handshake_hash())]
        tg.cancel_scope.cancel()
    assert received == [b"hello from noiseprotocol"]


# -- record crypto offloaded to worker threads ----------------------------------------------

#: Everything offloaded, two records per worker batch.
_BATCH = 2 * MAX_RECORD_DATA


class CountingPool(ThreadPoolExecutor):
    """A pool that counts submits and can hold every task until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__(2, thread_name_prefix="test-offload")
        self.submitted = 0
        self.gate = threading.Event()
        self.gate.set()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1

        def gated() -> Any:
            self.gate.wait(10)
            return fn(*args, **kwargs)

        return super().submit(gated)


@pytest.fixture
def pool() -> Iterator[CountingPool]:
    executor = CountingPool()
    yield executor
    executor.gate.set()
    executor.shutdown(wait=True)


def _offload(pool: CountingPool, batch: int = _BATCH) -> OffloadPolicy:
    return OffloadPolicy(
        inline_limit=0, batch_size=batch, max_in_flight=3, executor=pool, adaptive=False
    )


@pytest.mark.parametrize("cipher", ["ChaChaPoly", "AESGCM"])
async def test_offloaded_large_transfers_both_ways(pool: CountingPool, cipher: str) -> None:
    client, server = await _enc(cipher=cipher, policy=_offload(pool))
    up = random_bytes(3 << 20)
    down = random_bytes((2 << 20) + 12345)
    got: dict[str, bytes] = {}

    async def pump(sender: EncryptedStream, data: bytes) -> None:
        for size in (1, 100, MAX_RECORD_DATA + 1, len(data)):
            await sender.send(data[:size])
        await sender.send_eof()

    async def drain(name: str, receiver: EncryptedStream) -> None:
        got[name] = await _receive_all(receiver)

    async with create_task_group() as tg:
        tg.start_soon(pump, client, up)
        tg.start_soon(pump, server, down)
        tg.start_soon(drain, "server", server)
        tg.start_soon(drain, "client", client)
    expect = {"server": up, "client": down}
    for name, data in expect.items():
        sizes = (1, 100, MAX_RECORD_DATA + 1, len(data))
        assert got[name] == b"".join(data[:size] for size in sizes)
    assert pool.submitted > 2 * (3 << 20) // _BATCH  # seals and opens went to the pool


@pytest.mark.parametrize("cipher", ["ChaChaPoly", "AESGCM"])
async def test_offloaded_and_inline_ends_speak_the_same_wire(
    pool: CountingPool, cipher: str
) -> None:
    data = random_bytes(700_000)
    for client_policy, server_policy in ((_offload(pool), None), (None, _offload(pool))):
        client, server = await _enc(
            cipher=cipher, client={"policy": client_policy}, server={"policy": server_policy}
        )
        await client.send(data)
        assert await _receive_exactly(server, len(data)) == data
        await server.send(data[::-1])
        assert await _receive_exactly(client, len(data)) == data[::-1]
        await client.send_eof()
        await client.aclose()
        with pytest.raises(EndOfStream):
            await server.receive()


@pytest.mark.parametrize("bad", [0, 4, 7])
async def test_tampered_record_inside_a_batch(pool: CountingPool, bad: int) -> None:
    """Records verified before the bad one come out; then AuthenticationError, then broken."""
    wire = 3 + MAX_RECORD_DATA + 16

    def client_out(chunk: bytes) -> list[bytes] | None:
        if len(chunk) < 10 * wire:
            return [chunk]
        data = bytearray(chunk)
        data[bad * wire + 100] ^= 0x01
        return [bytes(data)]

    client, server, _, _ = await _pair_with_hooks(
        client_out, client={"policy": None}, server={"policy": _offload(pool, 3 * MAX_RECORD_DATA)}
    )
    data = random_bytes(10 * MAX_RECORD_DATA)
    before = pool.submitted
    await client.send(data)  # ten records in one transport write, tampered in record ``bad``
    out = bytearray()
    with pytest.raises(AuthenticationError) as info:
        while True:
            out += await server.receive(1 << 20)
    assert bytes(out) == data[: bad * MAX_RECORD_DATA]
    assert "did not authenticate" in str(info.value)
    assert pool.submitted > before
    with pytest.raises(BrokenResourceError):
        await server.receive()


@pytest.mark.parametrize("interval", [1, 2, 3, 5])
async def test_rekey_inside_and_around_batches(pool: CountingPool, interval: int) -> None:
    # batches of 2 records against rekeys every 1, 2, 3 or 5 records; the other end of
    # each direction is sometimes inline, so both must rekey at the same records
    policy = _offload(pool)
    for client_policy, server_policy in ((policy, policy), (policy, None), (None, policy)):
        client, server = await _enc(
            rekey_interval=interval,
            client={"policy": client_policy},
            server={"policy": server_policy},
        )
        for size in (1, 7 * MAX_RECORD_DATA + 3, 2 * MAX_RECORD_DATA, 5, 3 * MAX_RECORD_DATA):
            data = random_bytes(size)
            await client.send(data)
            assert await _receive_exactly(server, size) == data
            await server.send(data)
            assert await _receive_exactly(client, size) == data
    # a receiver on another schedule fails inside the batch, after the verified records
    client, server = await _enc(
        client={"rekey_interval": 3, "policy": None},
        server={"rekey_interval": 4, "policy": _offload(pool, 10 * MAX_RECORD_DATA)},
    )
    data = random_bytes(6 * MAX_RECORD_DATA)
    await client.send(data)
    out = bytearray()
    with pytest.raises(AuthenticationError):
        while True:
            out += await server.receive(1 << 20)
    assert bytes(out) == data[: 2 * MAX_RECORD_DATA]  # the key confirmation came first


async def test_cancelled_offloaded_send_breaks_the_stream(pool: CountingPool) -> None:
    client, _ = await _enc(policy=_offload(pool))
    pool.gate.clear()  # workers hold every batch: the send waits on its sealing
    with anyio.move_on_after(0.1) as scope:
        await client.send(random_bytes(1 << 20))
    assert scope.cancelled_caught
    pool.gate.set()
    with pytest.raises(BrokenResourceError):
        await client.send(b"x")


async def test_cancelled_receive_keeps_the_batch_in_flight(pool: CountingPool) -> None:
    client, server = await _enc(client={"policy": None}, server={"policy": _offload(pool)})
    data = random_bytes(5 * MAX_RECORD_DATA)
    await client.send(data)
    pool.gate.clear()
    with anyio.move_on_after(0.1) as scope:
        await server.receive(1 << 20)  # the batch is in a worker, which waits
    assert scope.cancelled_caught
    pool.gate.set()
    assert await _receive_exactly(server, len(data)) == data  # nothing lost, nonces agree
    await client.send(b"after")
    assert await server.receive() == b"after"


async def test_policy_option_is_checked() -> None:
    with pytest.raises(InvalidParameterError, match="OffloadPolicy or None"):
        await EncryptedStream.wrap(_mem_pair()[0], psk=bytes(32), policy="fast")  # type: ignore[arg-type]


async def test_small_work_stays_inline_large_work_offloads(pool: CountingPool) -> None:
    policy = OffloadPolicy(
        inline_limit=512 << 10, batch_size=1 << 20, executor=pool, adaptive=False
    )
    client, server = await _enc(policy=policy)
    small = random_bytes(300_000)
    await client.send(small)
    assert await _receive_exactly(server, len(small)) == small
    assert pool.submitted == 0  # under the inline limit: sealed and opened on the loop
    large = random_bytes(3 << 20)
    await client.send(large)
    assert pool.submitted == 3  # three 1 MiB batches (a 835-byte tail stays inline)
    assert await _receive_exactly(server, len(large)) == large
    assert pool.submitted >= 4  # the receiver opened at least one buffered run in a worker


@pytest.mark.parametrize("offload", [False, True])
async def test_a_sender_cancelled_at_random_points_never_looks_finished(
    pool: CountingPool, offload: bool
) -> None:
    """Cancel a 2 MiB send at random points: the peer gets all of it and EndOfStream, or a
    prefix of it and a typed error; never a prefix and EndOfStream."""
    rng = random.Random(27)
    data = random_bytes(2 << 20)
    pool.gate.set()

    async def sender(client: EncryptedStream, delay: float) -> None:
        with anyio.move_on_after(delay):
            async with client:
                await client.send(data)

    async def receiver(server: EncryptedStream, got: bytearray, end: list[object]) -> None:
        while True:
            try:
                got.extend(await server.receive())
            except (EndOfStream, TruncatedStreamError, BrokenResourceError) as exc:
                end.append(type(exc))
                return

    for _ in range(12):
        policy = _offload(pool) if offload else None
        client, server = await encrypted_stream_pair(_mem_pair(4), policy=policy)
        got = bytearray()
        end: list[object] = []
        with anyio.fail_after(20):
            async with create_task_group() as tg:
                tg.start_soon(receiver, server, got, end)
                tg.start_soon(sender, client, rng.random() * 0.02)
        assert data.startswith(got)
        if end == [EndOfStream]:
            assert bytes(got) == data
        await server.aclose()


async def test_a_receiver_cancelled_at_random_points_loses_nothing(pool: CountingPool) -> None:
    rng = random.Random(26)
    data = random_bytes(3 << 20)
    pool.gate.set()

    async def sender(client: EncryptedStream) -> None:
        async with client:
            for pos in range(0, len(data), 300_000):
                await client.send(data[pos : pos + 300_000])

    for offload in (False, True):
        policy = _offload(pool) if offload else None
        client, server = await encrypted_stream_pair(_mem_pair(4), policy=policy)
        got = bytearray()
        with anyio.fail_after(30):
            async with create_task_group() as tg:
                tg.start_soon(sender, client)
                while True:
                    with anyio.move_on_after(rng.random() * 0.002):
                        try:
                            got.extend(await server.receive(rng.randint(1, 1 << 18)))
                        except EndOfStream:
                            break
        assert bytes(got) == data
        await server.aclose()


async def test_cancelled_receive_never_drops_a_verified_record() -> None:
    """A receive() cancelled while a complete record is buffered must leave that record
    for the next call (once opened, a record's counter has advanced: dropping it would
    leave a silent gap in the data)."""
    client, server = await encrypted_stream_pair()
    async with client, server:
        await client.send(b"A" * 65519 + b"B" * 10)  # two records, one transport write
        assert await server.receive(65519) == b"A" * 65519
        with anyio.CancelScope() as scope:
            scope.cancel()
            await server.receive()
        assert scope.cancelled_caught
        await client.send(b"C" * 5)
        got = b""
        with anyio.move_on_after(5):  # a dropped record would leave us waiting forever
            while len(got) < 15:  # the B record first, then C (one or two calls)
                got += await server.receive()
        assert got == b"B" * 10 + b"C" * 5


# -- limits: every stall is cut by a timeout ------------------------------------------------


async def _raw_server_pair(**server: Any) -> tuple[ByteStream, EncryptedStream, EncryptedStream]:
    """A handshaken pair whose client transport is also returned, to send raw bytes on."""
    left, right = _mem_pair()
    client, stream = await encrypted_stream_pair((left, right), server=server)
    return left, client, stream


async def test_a_record_header_then_silence_is_cut_by_record_timeout() -> None:
    raw, client, server = await _raw_server_pair(record_timeout=0.2, idle_timeout=60)
    await raw.send(b"\xff\xff\x00")  # a record of 65535 bytes announced, none sent
    start = anyio.current_time()
    with pytest.raises(PeerTimeoutError, match="the rest of a record"):
        await server.receive()
    assert anyio.current_time() - start < 5
    with pytest.raises(BrokenResourceError):
        await server.receive()
    await client.aclose()


async def _sealed_records(count: int, size: int) -> tuple[bytes, Hooked, EncryptedStream]:
    """``count`` records of ``size`` bytes sealed by a client whose sends the server never
    saw: the wire bytes, the client's transport (to send them raw) and the server."""
    captured: list[bytes] = []

    def capture(chunk: bytes) -> list[bytes]:
        if not hold:
            return [chunk]  # the handshake
        captured.append(chunk)
        return []

    hold = False
    client, server, c, _ = await _pair_with_hooks(
        capture, server={"record_timeout": 0.5, "idle_timeout": 60}
    )
    hold = True
    for i in range(count):
        await client.send(bytes([i]) * size)
    return b"".join(captured), c, server


async def test_a_trickled_record_is_cut_by_record_timeout_from_its_first_byte() -> None:
    wire, c, server = await _sealed_records(1, 1000)
    got: list[bytes] = []

    async def trickle() -> None:
        for i in range(len(wire)):  # a byte every 0.1 s: each read well within 0.5 s
            await c.inner.send(wire[i : i + 1])
            await anyio.sleep(0.1)

    start = anyio.current_time()
    async with create_task_group() as tg:
        tg.start_soon(trickle)
        with pytest.raises(PeerTimeoutError, match="the rest of a record"):
            got.append(await server.receive())
        tg.cancel_scope.cancel()
    assert 0.4 < anyio.current_time() - start < 3 and got == []


async def test_record_timeout_is_per_record_not_per_connection() -> None:
    # Each chunk ends a record and begins the next, so part of a record is always
    # buffered for 2 s, four times record_timeout: no record took longer than 0.2 s.
    wire, c, server = await _sealed_records(10, 1000)
    size = len(wire) // 10
    cuts = [0, *(i * size + size // 2 for i in range(10)), len(wire)]

    async def sender() -> None:
        for start, end in itertools.pairwise(cuts):
            await c.inner.send(wire[start:end])
            await anyio.sleep(0.2)

    out = b""
    async with create_task_group() as tg:
        tg.start_soon(sender)
        while len(out) < 10_000:
            out += await server.receive()
    assert out == b"".join(bytes([i]) * 1000 for i in range(10))


async def test_serve_refuses_connections_beyond_max_connections(
    caplog: pytest.LogCaptureFixture,
) -> None:
    psk = random_bytes(32)
    release = anyio.Event()

    async def handler(stream: EncryptedStream) -> None:
        await stream.send(b"in")
        await release.wait()

    async with create_task_group() as tg:
        port = await tg.start(functools.partial(serve, handler, psk=psk, max_connections=2))
        held = [await connect("127.0.0.1", port, psk=psk) for _ in range(2)]
        for stream in held:
            assert await stream.receive() == b"in"
        for _ in range(5):  # told so, never a bare reset (review 3)
            with pytest.raises(HandshakeError, match=r"refused the connection: .*max_connections"):
                await connect("127.0.0.1", port, psk=psk)
        assert "(max_connections=2)" in caplog.text
        release.set()
        for stream in held:
            await stream.aclose()
        with anyio.fail_after(5):
            while True:  # the slots free once the handlers end
                try:
                    async with await connect("127.0.0.1", port, psk=psk) as again:
                        assert await again.receive() == b"in"
                        break
                except HandshakeError:
                    await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    with pytest.raises(InvalidParameterError, match="max_connections"):
        await serve(handler, psk=psk, max_connections=0)


async def test_an_idle_peer_is_cut_by_idle_timeout() -> None:
    _raw, client, server = await _raw_server_pair(idle_timeout=0.2)
    with pytest.raises(PeerTimeoutError, match="waiting for the next record"):
        await server.receive()
    await client.aclose()


async def test_a_peer_that_reads_nothing_is_cut_by_idle_timeout() -> None:
    left, right = memory_stream_pair(max_buffer_size=0)  # a send waits for a reader
    _CREATED.extend((left, right))
    client, _server = await encrypted_stream_pair((left, right), client={"idle_timeout": 0.2})
    with pytest.raises(PeerTimeoutError, match="took no data"):
        await client.send(b"x" * 100)  # nobody receives on the other side
    with pytest.raises(BrokenResourceError):
        await client.send(b"y")


@pytest.mark.parametrize(
    "function", [connect, serve, EncryptedStream.wrap, EncryptedListener.__init__]
)
def test_options_are_explicit_typed_keywords(function: Callable[..., object]) -> None:
    import inspect
    import typing

    signature = inspect.signature(function)
    kinds = {p.kind for p in signature.parameters.values()}
    assert inspect.Parameter.VAR_KEYWORD not in kinds and "config" not in signature.parameters
    for name in ("psk", "static_key", "cipher", "hash", "record_timeout", "policy"):
        assert signature.parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
    hints = typing.get_type_hints(function)
    assert all(hint is not Any for hint in hints.values()), hints
    # Each option reaches the one config under its own name and default (config_of
    # takes the call's locals() by field name: a keyword it missed would be dropped).
    from dataclasses import fields

    from streamcrypt.transports._config import StreamConfig

    defaults = {f.name: f.default for f in fields(StreamConfig)}
    own = {"max_connections", "server_side", "task_status"}
    options = {
        name: p.default
        for name, p in signature.parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in own
    }
    assert options and {name: defaults.get(name, "missing") for name in options} == options


def test_the_testing_helpers_take_wraps_options_typed() -> None:
    """streamcrypt.testing's public callables take no parameter typed Any, and
    ``WrapOptions`` (what encrypted_stream_pair passes on) is wrap's keywords exactly,
    each typed as wrap types it."""
    import inspect
    import typing

    from streamcrypt import testing

    for name in testing.__all__:
        obj = getattr(testing, name)
        function = obj.__init__ if isinstance(obj, type) else obj
        if callable(function) and not typing.is_typeddict(obj):
            hints = typing.get_type_hints(function)
            assert all(hint is not Any for hint in hints.values()), (name, hints)
    wrap = typing.get_type_hints(EncryptedStream.wrap)
    keywords = {
        name
        for name, p in inspect.signature(EncryptedStream.wrap).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "server_side"
    }
    options = typing.get_type_hints(testing.WrapOptions)
    assert options == {name: wrap[name] for name in keywords}


def test_bad_options_raise_before_any_io() -> None:
    with pytest.raises(InvalidParameterError, match="idle_timeout"):
        EncryptedListener(_mem_pair()[0], psk=bytes(32), idle_timeout=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="unsupported cipher"):
        EncryptedListener(_mem_pair()[0], psk=bytes(32), cipher="AES")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="psks"):
        EncryptedListener(_mem_pair()[0], psks=bytes(32))  # type: ignore[arg-type, call-arg]


async def test_connect_and_serve_by_the_names_their_signatures_report() -> None:
    sk, spk, _, _ = _keys()

    async def echo(stream: EncryptedStream) -> None:
        await stream.send(await stream.receive())

    async with create_task_group() as tg:
        port = await tg.start(
            functools.partial(serve, handler=echo, host="127.0.0.1", port=0, static_key=sk)
        )
        async with await connect(host="127.0.0.1", port=port, server_public_key=spk) as stream:
            await stream.send(b"ping")
            assert await stream.receive() == b"ping"
        tg.cancel_scope.cancel()


async def test_failed_connections_are_logged_at_a_bounded_rate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Fifty clients speaking another protocol: ten lines, not fifty, then a summary."""
    sk, _, _, _ = _keys()

    async def never(stream: EncryptedStream) -> None:
        raise AssertionError("no bad client gets this far")

    caplog.set_level(logging.WARNING, logger="streamcrypt.transports")
    async with create_task_group() as tg:
        port = await tg.start(functools.partial(serve, never, static_key=sk))
        for _ in range(50):
            async with await anyio.connect_tcp("127.0.0.1", port) as raw:
                await raw.send(b"GET / HTTP/1.1\r\n\r\n")
                with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    await raw.receive()
        await anyio.sleep(0.1)
        tg.cancel_scope.cancel()
    lines = [r for r in caplog.records if r.name == "streamcrypt.transports"]
    assert len(lines) == 10
    assert all("FormatError" in r.getMessage() for r in lines)
    assert all(bytes(sk).hex() not in r.getMessage() for r in lines)


def test_failure_log_summarises_what_it_left_out(caplog: pytest.LogCaptureFixture) -> None:
    from streamcrypt.transports._ratelog import FailureLog

    log = FailureLog(logging.getLogger("streamcrypt.test"), burst=2, interval=0.05)
    caplog.set_level(logging.WARNING, logger="streamcrypt.test")
    for _ in range(5):
        log.failure("the handshake with a peer failed", FormatError("bad peer"))
    time.sleep(0.06)
    log.failure("the handshake with another failed", HandshakeError("another"))
    messages = [r.getMessage() for r in caplog.records]
    assert messages[:2] == ["the handshake with a peer failed: FormatError: bad peer"] * 2
    assert "3 more failures" in messages[2] and "FormatError x3" in messages[2]
    assert messages[3] == "the handshake with another failed: HandshakeError: another"


# -- the small-message path: one record sealed and opened inline, no scheduler -------------


def _no_batches(stream: EncryptedStream) -> None:
    """Make any use of the stream's batch schedulers fail the test."""

    def boom(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a small message went through the batch scheduler")

    for sched in (stream._sending, stream._receiving):
        sched.launch = boom  # type: ignore[method-assign]
        sched.queue = boom  # type: ignore[method-assign]


def _held_until_close(held: list[bytes], armed: list[bool]) -> Hook:
    """Once ``armed[0]``, a hook that holds every chunk until the close record, then sends
    all as one."""

    def hook(chunk: bytes) -> list[bytes]:
        if not armed[0]:  # the handshake
            return [chunk]
        held.append(chunk)
        if chunk[2] != 1:  # not the close record yet
            return []
        return [b"".join(held)]

    return hook


async def test_a_small_write_is_one_record_in_one_transport_write() -> None:
    client, server, c, _ = await _pair_with_hooks()
    _no_batches(client)
    _no_batches(server)
    for item in (b"x", bytes(1024), memoryview(bytes(400)).cast("I"), bytearray(16000)):
        before = len(c.sent)
        await client.send(item)
        size = memoryview(item).nbytes
        assert [len(chunk) for chunk in c.sent[before:]] == [size + 3 + 16]
        assert await _receive_exactly(server, size) == bytes(item)
    client, server, c, _ = await _pair_with_hooks()
    _no_batches(client)  # a full record is still sealed inline, in one write
    await client.send(bytes(MAX_RECORD_DATA))
    assert [len(chunk) for chunk in c.sent[-1:]] == [MAX_RECORD_DATA + 3 + 16]
    assert await _receive_exactly(server, MAX_RECORD_DATA) == bytes(MAX_RECORD_DATA)


async def test_small_records_and_the_close_in_one_read() -> None:
    held: list[bytes] = []
    armed = [False]
    client, server, _, _ = await _pair_with_hooks(_held_until_close(held, armed))
    armed[0] = True
    _no_batches(server)
    for item in (b"a", b"bb", b"ccc"):
        await client.send(item)
    await client.send_eof()
    assert await server.receive(2) == b"ab"  # max_bytes holds across records
    assert await server.receive() == b"bccc"
    with pytest.raises(EndOfStream):
        await server.receive()
    with pytest.raises(EndOfStream):
        await server.receive()


async def test_a_tampered_small_record_after_good_ones_in_one_read() -> None:
    held: list[bytes] = []
    armed = [False]
    hold = _held_until_close(held, armed)

    def tamper(chunk: bytes) -> list[bytes]:
        out = hold(chunk)
        if not out or not armed[0]:
            return out
        data = bytearray(out[0])
        data[3 + 1 + 16 + 3 + 1] ^= 1  # the second record's body
        return [bytes(data)]

    client, server, _, _ = await _pair_with_hooks(tamper)
    armed[0] = True
    for item in (b"1", b"22", b"333"):
        await client.send(item)
    await client.send_eof()
    assert await server.receive() == b"1"  # verified before the failure: returned first
    with pytest.raises(AuthenticationError):
        await server.receive()
    with pytest.raises(BrokenResourceError):
        await server.receive()


@pytest.mark.parametrize("interval", [1, 2, 3])
async def test_small_messages_across_rekeys(interval: int) -> None:
    client, server = await _enc(rekey_interval=interval)
    for i in range(10):
        message = random_bytes(1 + 97 * i)
        await client.send(message)
        assert await _receive_exactly(server, len(message)) == message
        await server.send(message[::-1])
        assert await _receive_exactly(client, len(message)) == message[::-1]
    # a large write (through the scheduler) between small ones keeps the counters agreed
    big = random_bytes(5 * MAX_RECORD_DATA + 7)
    await client.send(big)
    await client.send(b"after")
    assert await _receive_exactly(server, len(big) + 5) == big + b"after"


async def test_timeouts_cut_real_waits_on_tcp() -> None:
    """Deadlines are armed only when a transport call really waits (asyncio): over TCP a
    silent peer is still cut on receive, and a peer that reads nothing on send."""
    private, public = generate_keypair()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(SocketAttribute.local_port)
    release = anyio.Event()

    async def silent(transport: ByteStream) -> None:
        try:
            await EncryptedStream.wrap(transport, server_side=True, static_key=private)
            await release.wait()  # never sends, never reads
        finally:
            await aclose_forcefully(transport)

    async with listener, create_task_group() as tg:
        tg.start_soon(listener.serve, silent)
        transport = await anyio.connect_tcp("127.0.0.1", port)
        client = await EncryptedStream.wrap(transport, server_public_key=public, idle_timeout=0.3)
        with anyio.fail_after(10):
            await client.send(b"small: taken at once, no deadline needed")
            with pytest.raises(PeerTimeoutError, match="waiting for the next record"):
                await client.receive()
        await aclose_forcefully(client)
        transport = await anyio.connect_tcp("127.0.0.1", port)
        client = await EncryptedStream.wrap(transport, server_public_key=public, idle_timeout=0.3)
        block = bytes(1 << 20)
        with anyio.fail_after(20), pytest.raises(PeerTimeoutError, match="took no data"):
            while True:  # the socket buffers fill, then the send waits and is cut
                await client.send(block)
        with pytest.raises(BrokenResourceError):
            await client.send(b"x")
        await aclose_forcefully(client)
        release.set()
        tg.cancel_scope.cancel()


async def test_a_deadline_on_a_real_wait_leaves_other_cancellations_alone() -> None:
    """The lazy deadline (one loop timer on asyncio) tells its own expiry from a real
    cancellation: a cancel scope cutting a waiting receive cancels it and nothing more (the
    stream stays usable), and a timeout leaves the task with no cancel request pending."""
    private, public = generate_keypair()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(SocketAttribute.local_port)
    go = anyio.Event()

    async def late_echo(transport: ByteStream) -> None:
        stream = await EncryptedStream.wrap(transport, server_side=True, static_key=private)
        try:
            await go.wait()
            await stream.send(await stream.receive())
            await anyio.sleep_forever()
        finally:
            await aclose_forcefully(stream)

    async with listener, create_task_group() as tg:
        tg.start_soon(listener.serve, late_echo)
        transport = await anyio.connect_tcp("127.0.0.1", port)
        client = await EncryptedStream.wrap(transport, server_public_key=public, idle_timeout=5)
        with anyio.move_on_after(0.2) as scope:
            await client.receive()  # waits: the deadline is armed, then the scope cuts it
        assert scope.cancelled_caught
        go.set()
        await client.send(b"still sound")
        with anyio.fail_after(5):
            assert await client.receive() == b"still sound"
        await aclose_forcefully(client)
        transport = await anyio.connect_tcp("127.0.0.1", port)
        client = await EncryptedStream.wrap(transport, server_public_key=public, idle_timeout=0.2)
        with pytest.raises(PeerTimeoutError, match="waiting for the next record"):
            await client.receive()  # the server already echoed once and now sleeps
        assert _asyncio_task_cancelling() in (None, 0)
        await anyio.sleep(0.01)  # the task goes on: no stray cancellation was left behind
        await aclose_forcefully(client)
        tg.cancel_scope.cancel()


def _asyncio_task_cancelling() -> int | None:
    """``asyncio.current_task().cancelling()``, or ``None`` off asyncio."""
    import asyncio

    try:
        task = asyncio.current_task()
    except RuntimeError:
        return None
    return None if task is None else task.cancelling()


async def test_one_record_per_chunk_is_opened_from_the_chunk() -> None:
    """The small-message path (a chunk that is exactly one data record) keeps the rules:
    empty records in their own chunks are skipped without piling up calls, a record
    larger than ``max_bytes`` is split, and a tampered one breaks the stream."""
    raw, client, server = await _raw_server_pair()
    records = client._records
    assert records is not None
    for _ in range(3000):  # deeper than the recursion limit, were each one a call
        await raw.send(records.seal(0, b""))
    await raw.send(records.seal(0, b"after the empty ones"))
    assert await server.receive() == b"after the empty ones"
    await raw.send(records.seal(0, b"0123456789"))
    assert await server.receive(4) == b"0123"
    assert await server.receive() == b"456789"
    sealed = bytearray(records.seal(0, b"tampered"))
    sealed[5] ^= 1
    await raw.send(bytes(sealed))
    with pytest.raises(AuthenticationError):
        await server.receive()
    with pytest.raises(BrokenResourceError):
        await server.receive()
