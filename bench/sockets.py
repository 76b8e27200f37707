"""Encrypted sockets: EncryptedStream against TLS 1.3 and plaintext TCP over loopback,
server and client in separate processes (as users deploy them), both on uvloop.

Each contender's server runs in a process of its own (``bench._procs``) and speaks one
tiny protocol on every connection: a 9-byte command (op + 8-byte big-endian count) then
``D`` sends that many bytes, ``U`` receives that many and answers ``k``, ``E`` echoes
messages of that size until the end, ``H`` answers ``h`` and waits (an idle, held
connection). The client (this process) measures bulk transfer each way, 1 KiB
round-trip latency, sequential handshakes, and the server's RSS per idle connection.
Timed rows run the contenders interleaved (A B C D, A B C D, ...) and quote medians.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import os
import ssl
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteStream, SocketAttribute
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from streamcrypt.codecs.noise import generate_keypair
from streamcrypt.transports import (
    EncryptedListener,
    EncryptedStream,
    EncryptedStreamAttribute,
    connect,
)
from streamcrypt.transports import serve as serve_encrypted
from streamcrypt.transports._socket import ProtocolListener, open_tcp  # the plain contender

from ._procs import ServerProcess, announce, raise_fd_limit
from ._report import (
    Report,
    aesgcm_rates,
    crypto_ceiling,
    gbps,
    interleaved_async,
    percentile,
    run_uvloop,
)

WRITE = 256 * 1024  # bytes per application write, for every contender
READ = 1 << 20  # max_bytes per receive (and asyncio streams' buffer limit)
MESSAGE = 1024  # the round-trip message
BLOCK = os.urandom(WRITE)

#: The contenders: label -> server kind.
KINDS = {
    "EncryptedStream (default options, NK)": "encrypted",
    "TLS 1.3 (ssl, asyncio streams)": "tls",
    "plaintext TCP (anyio stream)": "plain",
    "plaintext TCP (asyncio streams)": "asyncio",
    "EncryptedStream over anyio's SocketStream": "encrypted-anyio",
    "plaintext TCP (streamcrypt ProtocolStream)": "plain-protocol",
}
ENC, TLS, PLAIN, PLAIN_ASYNCIO, ENC_ANYIO, PLAIN_PROTOCOL = KINDS


# -- TLS ------------------------------------------------------------------------------------


def _make_cert(directory: str) -> tuple[str, str]:
    """A self-signed P-256 certificate for ``localhost``: (cert path, key path)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), False)
        .sign(key, hashes.SHA256())
    )
    cert_path = os.path.join(directory, "cert.pem")
    key_path = os.path.join(directory, "key.pem")
    Path(cert_path).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    Path(key_path).write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _server_context(cert_path: str, key_path: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(cert_path, key_path)
    return ctx


def _client_context(cert_path: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(cert_path)
    return ctx


@dataclass(eq=False)
class _AsyncioStream(ByteStream):
    """A minimal anyio ByteStream over asyncio's StreamReader/StreamWriter (bench only)."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def send(self, item: bytes) -> None:
        self.writer.write(item)
        await self.writer.drain()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        data = await self.reader.read(max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def send_eof(self) -> None:
        self.writer.write_eof()

    async def aclose(self) -> None:
        self.writer.close()


# -- the server process ---------------------------------------------------------------------


class _Reader:
    """Exact reads over a ByteStream (what one receive gave beyond them is kept)."""

    def __init__(self, stream: ByteStream) -> None:
        self.stream = stream
        self.buf = bytearray()

    async def read(self, n: int) -> bytes:
        while len(self.buf) < n:
            self.buf += await self.stream.receive(READ)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    async def skip(self, n: int) -> None:
        got = min(n, len(self.buf))
        del self.buf[:got]
        while got < n:
            got += len(await self.stream.receive(READ))
        assert got == n, "the client sent past the upload"


async def _handle(stream: ByteStream) -> None:
    """Serve commands on one connection until the client closes it."""
    reader = _Reader(stream)
    try:
        while True:
            head = await reader.read(9)
            op, n = head[:1], int.from_bytes(head[1:], "big")
            if op == b"D":
                for _ in range(n // WRITE):
                    await stream.send(BLOCK)
                if n % WRITE:
                    await stream.send(BLOCK[: n % WRITE])
            elif op == b"U":
                await reader.skip(n)
                await stream.send(b"k")
            elif op == b"E":
                while True:
                    await stream.send(await reader.read(n))
            elif op == b"H":
                await stream.send(b"h")
            else:
                raise ValueError(f"unknown command {op!r}")
    except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
        return


def serve(args: list[str]) -> None:
    """The server process: ``python -m bench._procs sockets KIND [CERT KEY]``."""
    kind = args[0]

    async def main() -> None:
        if kind == "encrypted":
            key, public = generate_keypair()
            async with anyio.create_task_group() as tg:
                port = await tg.start(
                    functools.partial(
                        serve_encrypted, _handle, static_key=key, max_connections=None
                    )
                )
                announce(port, public.hex())
                await anyio.sleep_forever()
        elif kind == "encrypted-anyio":
            key, public = generate_keypair()
            tcp = await anyio.create_tcp_listener(local_host="127.0.0.1")
            announce(tcp.extra(SocketAttribute.local_port), public.hex())
            await EncryptedListener(tcp, static_key=key, max_connections=None).serve(_handle)
        elif kind in ("plain", "plain-protocol"):
            listener = (
                await anyio.create_tcp_listener(local_host="127.0.0.1")
                if kind == "plain"
                else await ProtocolListener.create("127.0.0.1")
            )
            announce(listener.extra(SocketAttribute.local_port))
            await listener.serve(_handle)
        else:
            ctx = _server_context(args[1], args[2]) if kind == "tls" else None

            async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                try:
                    await _handle(_AsyncioStream(reader, writer))
                finally:
                    writer.close()

            server = await asyncio.start_server(
                handle, "127.0.0.1", 0, ssl=ctx, limit=READ, backlog=4096
            )
            announce(server.sockets[0].getsockname()[1])
            await anyio.sleep_forever()

    run_uvloop(main)


# -- the client -----------------------------------------------------------------------------


Opener = Callable[[], Awaitable[ByteStream]]


async def _close(stream: ByteStream) -> None:
    """Close as a client that finished: an EncryptedStream sends its authenticated close
    (a bare aclose() would be an abort), other streams just close."""
    async with stream:
        pass


def _opener(kind: str, server: ServerProcess, cert_path: str) -> Opener:
    port = server.port
    if kind == "encrypted":
        public = bytes.fromhex(server.info)
        return lambda: connect("127.0.0.1", port, server_public_key=public)
    if kind == "encrypted-anyio":
        key = bytes.fromhex(server.info)

        async def open_over_anyio() -> ByteStream:
            tcp = await anyio.connect_tcp("127.0.0.1", port)
            return await EncryptedStream.wrap(tcp, server_public_key=key)

        return open_over_anyio
    if kind == "plain":
        return lambda: anyio.connect_tcp("127.0.0.1", port)
    if kind == "plain-protocol":
        return lambda: open_tcp("127.0.0.1", port)
    ctx = _client_context(cert_path) if kind == "tls" else None

    async def open_asyncio() -> ByteStream:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=ctx, server_hostname="localhost" if ctx else None, limit=READ
        )
        return _AsyncioStream(reader, writer)

    return open_asyncio


def _server(kind: str, cert_path: str, key_path: str) -> ServerProcess:
    return ServerProcess("sockets", kind, *((cert_path, key_path) if kind == "tls" else ()))


def _command(op: bytes, n: int) -> bytes:
    return op + n.to_bytes(8, "big")


async def _download(stream: ByteStream, total: int) -> None:
    await stream.send(_command(b"D", total))
    got = 0
    while got < total:
        got += len(await stream.receive(READ))
    assert got == total


async def _upload(stream: ByteStream, total: int) -> None:
    await stream.send(_command(b"U", total))
    for _ in range(total // WRITE):
        await stream.send(BLOCK)
    assert await stream.receive(1) == b"k"


def _negotiated(kind: str, stream: ByteStream) -> str:
    if kind.startswith("encrypted"):
        return stream.extra(EncryptedStreamAttribute.protocol_name)
    if kind == "tls":
        assert isinstance(stream, _AsyncioStream)
        obj = stream.writer.get_extra_info("ssl_object")
        return f"{obj.version()} {obj.cipher()[0]}"
    return ""


async def _bulk(
    report: Report, quick: bool, openers: dict[str, Opener], servers: dict[str, ServerProcess]
) -> dict[str, str]:
    total = (128 if quick else 1024) << 20
    rounds = 3 if quick else 5
    streams = {name: await open_() for name, open_ in openers.items()}
    negotiated = {name: _negotiated(KINDS[name], s) for name, s in streams.items()}
    cpu: dict[str, list[float]] = {}
    clocks: dict[str, Callable[[], float]] = {}
    try:
        variants: dict[str, Callable[[], Awaitable[object]]] = {}
        for name, stream in streams.items():
            variants[f"{name}|down"] = functools.partial(_download, stream, total)
            variants[f"{name}|up"] = functools.partial(_upload, stream, total)
            clocks[f"{name}|down"] = clocks[f"{name}|up"] = servers[name].cpu_seconds
        times = await interleaved_async(variants, rounds, cpu=cpu, server_cpu=clocks)
    finally:
        for stream in streams.values():
            await _close(stream)
    t = report.table(
        f"Sockets: bulk transfer, {total >> 20} MiB each way, server in its own process "
        "(uvloop both sides)",
        [
            "contender",
            "direction",
            "GB/s",
            "vs TLS",
            "vs plain anyio TCP",
            "vs plain asyncio",
            "CPU s/GB (both ends)",
        ],
    )
    med = {key: statistics.median(ts) for key, ts in times.items()}
    cpu_per_gb = {key: statistics.median(c) * 1e9 / total for key, c in cpu.items()}
    for direction, label in (("down", "server -> client"), ("up", "client -> server")):
        for name in openers:
            m = med[f"{name}|{direction}"]
            t.add(
                name,
                label,
                gbps(total, m),
                med[f"{TLS}|{direction}"] / m,
                med[f"{PLAIN}|{direction}"] / m,
                med[f"{PLAIN_ASYNCIO}|{direction}"] / m,
                cpu_per_gb[f"{name}|{direction}"],
            )
    t.notes.append(
        f"one connection per contender, opened before timing; {WRITE >> 10} KiB writes, "
        f"receives of up to {READ >> 20} MiB; medians of {rounds} interleaved rounds after a "
        "warm-up; ratios are speed ratios (higher is better for the row); CPU: client and "
        "server process together, every thread"
    )
    t.notes.append(
        "EncryptedStream's connect/serve run over streamcrypt's ProtocolStream on asyncio "
        "(its plaintext is the ProtocolStream row); 'EncryptedStream over anyio's "
        "SocketStream' is EncryptedStream.wrap over anyio's TCP stream (the plain anyio "
        "column); TLS runs over asyncio streams (uvloop's SSL), whose plaintext is the "
        "asyncio column"
    )
    t.notes.append(
        f"negotiated: EncryptedStream {negotiated[ENC]}; {negotiated[TLS]} (self-signed P-256 cert)"
    )
    t.notes.append("target (issue 12): EncryptedStream >= 2.5x TLS and >= 0.7x plaintext TCP")
    seal, open_ = aesgcm_rates(32, 65519)
    crypto = 1 / seal + 1 / open_
    plains = (PLAIN, PLAIN_ASYNCIO, PLAIN_PROTOCOL)
    for direction, label in (("down", "server -> client"), ("up", "client -> server")):
        cheapest = min(cpu_per_gb[f"{p}|{direction}"] for p in plains)
        cap = crypto_ceiling(cheapest, crypto)
        vs_tls = cap * med[f"{TLS}|{direction}"] * 1e9 / total
        vs_plain = cap * med[f"{PLAIN}|{direction}"] * 1e9 / total
        above = [
            f"{goal}x {what}"
            for goal, what, got in ((2.5, "TLS", vs_tls), (0.7, "plain", vs_plain))
            if got < goal
        ]
        verdict = (
            f"; above it, out of reach on this machine: {' and '.join(above)}" if above else ""
        )
        t.notes.append(
            f"ceiling {label}: {cap:.2f} GB/s = {vs_tls:.2f}x TLS, {vs_plain:.2f}x plain anyio "
            f"TCP. The cheapest plain transfer here took {cheapest:.2f} CPU-s per GB (both "
            f"ends); sealing and opening add {crypto:.2f} (AES-256-GCM, one thread: seals "
            f"{seal:.2f}, opens {open_:.2f} GB/s on 65,519-byte records); no encrypted "
            f"transfer fits more GB into the {os.cpu_count() or 1} cores' seconds{verdict}"
        )
    return negotiated


async def _latency(report: Report, quick: bool, openers: dict[str, Opener]) -> None:
    per_round = 300 if quick else 1000
    rounds = 4 if quick else 8
    streams = {name: await open_() for name, open_ in openers.items()}
    samples: dict[str, list[float]] = {name: [] for name in openers}
    message = os.urandom(MESSAGE)
    started = False

    def trips(name: str) -> Callable[[], Awaitable[None]]:
        stream = streams[name]

        async def run() -> None:
            reader = _Reader(stream)
            for _ in range(per_round):
                t0 = time.perf_counter()
                await stream.send(message)
                await reader.read(MESSAGE)
                if started:
                    samples[name].append(time.perf_counter() - t0)

        return run

    try:
        for stream in streams.values():
            await stream.send(_command(b"E", MESSAGE))
        variants: dict[str, Callable[[], Awaitable[object]]] = {n: trips(n) for n in openers}
        for name in openers:  # warm-up round, not recorded
            await variants[name]()
        started = True
        await interleaved_async(variants, rounds, warmup=0)
    finally:
        for stream in streams.values():
            await _close(stream)
    t = report.table(
        f"Sockets: {MESSAGE} B request / {MESSAGE} B response round trips (server in its own "
        "process)",
        ["contender", "p50 µs", "p99 µs", "p99 vs TLS (TLS / row)"],
    )
    tls_p99 = percentile(samples[TLS], 0.99)
    for name in openers:
        p50, p99 = percentile(samples[name], 0.5), percentile(samples[name], 0.99)
        t.add(name, p50 * 1e6, p99 * 1e6, tls_p99 / p99)
    t.notes.append(
        f"{rounds} interleaved rounds of {per_round} sequential round trips on one open "
        "connection per contender, after a warm-up round; percentiles over all of them"
    )
    t.notes.append("target (issue 12): EncryptedStream p99 no worse than TLS (ratio >= 1)")


async def _handshakes(report: Report, quick: bool, openers: dict[str, Opener]) -> None:
    count = 50 if quick else 200
    rounds = 3 if quick else 5

    def connects(open_: Opener) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            for _ in range(count):
                stream = await open_()
                await _close(stream)

        return run

    times = await interleaved_async(
        {name: connects(open_) for name, open_ in openers.items()}, rounds
    )
    t = report.table(
        "Sockets: connections per second (sequential connect + handshake + close, server in "
        "its own process)",
        ["contender", "per second", "ms each", "vs TLS"],
    )
    med = {name: statistics.median(ts) for name, ts in times.items()}
    for name in openers:
        t.add(name, count / med[name], med[name] / count * 1e3, med[TLS] / med[name])
    t.notes.append(
        f"{count} connections per round, medians of {rounds} interleaved rounds after a "
        "warm-up; EncryptedStream: Noise NK (X25519, the client knows the server's key), "
        "TLS 1.3: P-256 certificate, verified by the client"
    )
    t.notes.append("target (issue 12): EncryptedStream handshakes/s >= TLS")


async def _held(kind: str, count: int, cert_path: str, key_path: str) -> float:
    """Server RSS growth per idle connection while ``count`` connections are held."""
    with _server(kind, cert_path, key_path) as server:
        open_ = _opener(kind, server, cert_path)
        streams: list[ByteStream] = []

        async def hold() -> None:
            stream = await open_()
            streams.append(stream)
            await stream.send(_command(b"H", 0))
            assert await stream.receive(1) == b"h"

        async def hold_many(n: int) -> None:
            for start in range(0, n, 100):
                async with anyio.create_task_group() as tg:
                    for _ in range(min(100, n - start)):
                        tg.start_soon(hold)

        async def release() -> None:
            for stream in streams:
                await _close(stream)
            streams.clear()

        try:
            await hold_many(50)  # warm-up: the first connections' one-time allocations
            await release()
            await anyio.sleep(0.5)
            before = server.rss()
            await hold_many(count)
            await anyio.sleep(0.5)
            after = server.rss()
        finally:
            await release()
    return (after - before) / count


async def _memory(report: Report, quick: bool, cert_path: str, key_path: str) -> None:
    counts = [1000, 5000]
    t = report.table(
        "Sockets: server RSS per idle connection (server process RSS delta / connections)",
        ["contender", *(f"{c} connections, KiB each" for c in counts), "vs TLS (at 1000)"],
    )
    skipped: dict[int, str] = {}
    for count in counts:
        reason = raise_fd_limit(count + 512)
        if reason:
            skipped[count] = reason
            print(f"  skipping {count} connections: {reason}", flush=True)
    results: dict[tuple[str, int], float] = {}
    for count in counts:
        if count in skipped:
            continue
        for name, kind in KINDS.items():
            results[name, count] = await _held(kind, count, cert_path, key_path)
    for name in KINDS:
        cells = [results[name, c] / 1024 if (name, c) in results else "skipped" for c in counts]
        t.add(name, *cells, results[TLS, 1000] / results[name, 1000])
    t.notes.append(
        "a fresh server process per cell; 50 connections opened and closed first (warm-up), "
        "then the count opened 100 at a time, each after one 1-byte exchange, and held idle; "
        "RSS read from /proc 0.5 s after the last; 'vs TLS' = TLS KiB / row KiB"
    )
    for count, reason in skipped.items():
        t.notes.append(f"{count} connections skipped: {reason}")


def run(report: Report, quick: bool) -> None:
    """Run the socket benchmarks (quick: smaller transfers, fewer rounds)."""

    async def main() -> None:
        with tempfile.TemporaryDirectory() as directory, ExitStack() as stack:
            cert_path, key_path = _make_cert(directory)
            servers = {
                name: stack.enter_context(_server(kind, cert_path, key_path))
                for name, kind in KINDS.items()
            }
            openers = {
                name: _opener(kind, servers[name], cert_path) for name, kind in KINDS.items()
            }
            await _bulk(report, quick, openers, servers)
            await _latency(report, quick, openers)
            await _handshakes(report, quick, openers)
            stack.close()
            await _memory(report, quick, cert_path, key_path)

    run_uvloop(main)
