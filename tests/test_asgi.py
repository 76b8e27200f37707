"""ASGI EncryptionMiddleware against a real uvicorn server on 127.0.0.1, httpx as client."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import hashlib
import itertools
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import http_ece
import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

import streamcrypt
from streamcrypt.codecs.ece import (
    MAX_HEADER_SIZE,
    OVERHEAD,
    EceDecryptor,
    EceEncryptor,
    encrypted_length,
    read_header,
)
from streamcrypt.engine import DEFAULT_POLICY, OffloadPolicy, pipeline
from streamcrypt.errors import AuthenticationError, InvalidParameterError, PeerTimeoutError
from streamcrypt.keys import KeyRing, SecretKey
from streamcrypt.transports import (
    BODY_DECRYPTED,
    DEFAULT_HTTP_RECORD_SIZE,
    EncryptionMiddleware,
)
from streamcrypt.transports._deadline import LoopDeadline, with_timeout
from streamcrypt.transports._http import (
    RESPONSE_PIECE,
    BodyCut,
    BodyDeadline,
    BodyFeed,
    EncryptionSettings,
    encrypted_feed,
)

pytestmark = pytest.mark.asyncio

Scope = dict[str, Any]
App = Callable[[Scope, Any, Any], Awaitable[None]]


AES_HEADERS = {"content-encoding": "aes128gcm"}


def ring(*ids: str) -> KeyRing:
    return KeyRing([SecretKey.generate(16, key_id=i) for i in ids or ("k1",)])


@contextlib.asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    """Run ``app`` on uvicorn on an ephemeral loopback port; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="critical", lifespan="off", ws="none", http="h11", access_log=False
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            assert not task.done(), "uvicorn did not start"
            await asyncio.sleep(0.005)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@contextlib.asynccontextmanager
async def client(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(app) as url, httpx.AsyncClient(base_url=url, timeout=60) as c:
        yield c


def keyid_of(body: bytes) -> str:
    header = read_header(body)
    assert header is not None
    return header.keyid.decode()


# -- responses ------------------------------------------------------------------------


async def test_streaming_response_many_chunks() -> None:
    keys = ring("old", "new")
    rng = __import__("random").Random(1)
    chunks = [os.urandom(rng.randrange(0, 9000)) for _ in range(300)]

    async def gen() -> AsyncIterator[bytes]:
        for c in chunks:
            yield c

    async def endpoint(request: Request) -> StreamingResponse:
        return StreamingResponse(gen(), media_type="application/octet-stream")

    app = EncryptionMiddleware(Starlette(routes=[Route("/s", endpoint)]), key=keys)
    async with client(app) as c, c.stream("GET", "/s") as r:
        assert r.status_code == 200
        assert r.headers["content-encoding"] == "aes128gcm"
        assert r.headers["vary"] == "Content-Encoding"
        assert "content-length" not in r.headers
        dec = EceDecryptor(keys)
        out = bytearray()
        raw = bytearray()
        async for piece in r.aiter_raw():
            raw += piece
            out += dec.update(piece)
        out += dec.finalize()
    assert bytes(out) == b"".join(chunks)
    assert keyid_of(bytes(raw)) == "new"  # the active key encrypts, its id in the header
    assert http_ece.decrypt(bytes(raw), key=keys.get("new").secret_bytes()) == bytes(out)


@pytest.mark.parametrize("size", [0, 1, 4078, 4079, 4080, 100_000])
async def test_whole_body_exact_content_length(size: int) -> None:
    keys = ring()
    body = os.urandom(size)

    async def endpoint(request: Request) -> Response:
        return Response(body, media_type="application/octet-stream")

    app = EncryptionMiddleware(Starlette(routes=[Route("/b", endpoint)]), key=keys)
    async with client(app) as c:
        r = await c.get("/b")
    assert r.status_code == 200
    assert r.headers["content-encoding"] == "aes128gcm"
    assert int(r.headers["content-length"]) == len(r.content)
    assert len(r.content) == encrypted_length(size, DEFAULT_HTTP_RECORD_SIZE, keyid="k1")
    assert streamcrypt.decrypt_bytes(r.content, keys, format="ece") == body
    assert size < 16 or body[:16] not in r.content


async def test_small_streamed_response_costs_its_size() -> None:
    """Default 64 KiB records cost a 1 KiB streamed body nothing: one 1 KiB record."""
    keys = ring()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"s" * 1000, "more_body": True})
        await send({"type": "http.response.body", "body": b"s" * 24, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async with client(EncryptionMiddleware(app, key=keys)) as c:
        r = await c.get("/")
    header = read_header(r.content)
    assert header is not None and header.record_size == DEFAULT_HTTP_RECORD_SIZE == 1 << 16
    assert len(r.content) == 1024 + header.size + 17
    assert streamcrypt.decrypt_bytes(r.content, keys, format="ece") == b"s" * 1024


def _bounds(start: int, end: int, record: int) -> int:
    """How many record boundaries of a body (multiples of ``record`` from where its
    records start, 0 included) lie in its bytes ``[start, end)``: at most this many
    records a push of those bytes releases (a record goes once the byte after it came:
    RFC 8188's last record may be full)."""
    return -(-end // record) - -(-start // record)


async def test_a_streamed_response_leaves_in_pieces_of_whole_records() -> None:
    """Each piece of a streamed body leaves as one body message of whole records, at most
    RESPONSE_PIECE of them (counted on the body's records whatever the app's writes
    are): never a message per record or a slice of a piece (issue 28: a server write
    costs ~25 us whatever its size), no record straddles two pieces, and a write goes
    in as few pieces as that allows (a 1 MiB write of 64 KiB records was five pushes,
    a 256 KiB one two, where four and one release the same records)."""
    keys = ring()
    for rs, writes_sizes in (
        (5000, (1 << 20, 3, 70_001, 1 << 20, 262_143, 9)),
        (1 << 16, (1 << 20, 1 << 18, 1 << 18, 1 << 20, 300_000)),
    ):
        writes = [os.urandom(n) for n in writes_sizes]
        body = b"".join(writes)

        async def app(scope: Any, receive: Any, send: Any, writes: list[bytes] = writes) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            for chunk in writes:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        sent: list[bytes] = []

        async def send(message: dict[str, Any], sent: list[bytes] = sent) -> None:
            if message["type"] == "http.response.body":
                assert isinstance(message["body"], bytes)
                sent.append(message["body"])

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        mw = EncryptionMiddleware(app, key=keys, record_size=rs)
        await mw({"type": "http", "method": "GET", "path": "/", "headers": []}, receive, send)
        assert streamcrypt.decrypt_bytes(b"".join(sent), keys, format="ece") == body
        header = read_header(sent[0])
        assert header is not None and len(sent[0]) == header.size  # the header, on its own
        most = RESPONSE_PIECE // rs  # records of one piece
        middle = [len(m) for m in sent[1:-1] if m]
        # Whole records, at most a piece's; the last message carries the final, short record.
        assert middle and all(n % rs == 0 and n <= most * rs for n in middle[:-1]), middle
        assert middle[-1] % rs and middle[-1] <= (most + 1) * rs
        # As few pieces as whole records allow: each write's records go in the fewest
        # pushes of at most ``most`` records each; the final record leaves at the end.
        data = rs - OVERHEAD
        fewest, start = 1, 0
        for n in writes_sizes:
            fewest += max(1, -(-_bounds(start, start + n, data) // most))
            start += n
        assert len(middle) <= fewest, (len(middle), fewest)


async def test_a_body_cut_releases_at_most_its_records_a_piece_in_the_fewest_pieces() -> None:
    """BodyCut (both middlewares' one cut) ends a piece on a record boundary of the body
    or where the write ends, each piece holding at most ``piece // record`` boundaries
    (so releasing at most that many records: a record goes once the byte after it
    came), and cuts a write into no more pieces than that needs: a write that holds no
    more is pushed whole, as it came."""
    record = 10
    cut = BodyCut(30, record=record)  # three records a piece
    fed = 0
    for size in (5, 25, 41, 100, 0, 1, 29, 60, 333):
        pieces = [len(p) for p in cut.pieces(b"x" * size)]
        assert sum(pieces) == size
        bounds = _bounds(fed, fed + size, record)
        assert len(pieces) == max(1 if size else 0, -(-bounds // 3)), (size, pieces)
        start = fed
        for n in pieces:
            assert _bounds(start, start + n, record) <= 3
            start += n
            assert start == fed + size or start % record == 0  # ends on a record end
        fed += size


async def test_a_body_feed_flushes_every_piece_before_the_next_goes_in() -> None:
    """BodyFeed (both middlewares' one body feed) flushes after every piece, so a piece's
    output leaves before the next piece is pushed whatever the policy (a piece the
    scheduler queues, as it does pieces of at least the inline limit while it offloads,
    would otherwise wait, with the pieces after it, for the write's end: memory of a
    write, not a piece), and awaits ``pause`` before every piece after a write's
    first."""
    events: list[str] = []

    async def sink(data: bytes) -> None:
        events.append("out")

    encryptor = EceEncryptor(ring(), record_size=300_000)  # a piece: one 300 kB record
    policy = OffloadPolicy(adaptive=False, max_in_flight=8, batch_size=4 << 20)
    feed = encrypted_feed(encryptor, policy, sink)
    real = feed.feeder

    class Spy:
        async def send(self, data: memoryview) -> None:
            events.append("in")
            await real.send(data)

        async def flush(self) -> None:
            await real.flush()

    feed.feeder = Spy()  # type: ignore[assignment]
    await feed.send(os.urandom(5 * 299_983 + 7))
    await real.aclose()
    # Six pieces of one record each (the first releases only the header: a record goes
    # once the byte after it came), and every piece's output left before the next went in.
    assert events.count("in") == 6, events
    assert all(events[i + 1] == "out" for i, e in enumerate(events) if e == "in"), events

    pauses: list[str] = []

    class Feeder:
        async def send(self, data: memoryview) -> None:
            pauses.append(f"send {len(data)}")

        async def flush(self) -> None:
            pauses.append("flush")

    async def pause() -> None:
        pauses.append("pause")

    paused = BodyFeed(Feeder(), BodyCut(20, record=10), pause)  # type: ignore[arg-type]
    await paused.send(b"x" * 15)  # record boundaries 0, 10: whole
    await paused.send(b"x" * 65)  # bytes 15..80, boundaries 20, 30 | 40, 50 | 60, 70
    within = ["send 25", "flush", "pause", "send 20", "flush", "pause", "send 20", "flush"]
    assert pauses == ["send 15", "flush", *within], pauses


async def _pushed_pieces(body: bytes, first: int, keys: KeyRing) -> tuple[bytes, list[int]]:
    """A request body's decrypting feed given ``body`` in two writes (``first`` bytes,
    then the rest), pieces of at most 2500 bytes: the plaintext and each piece's length."""
    pushed: list[int] = []
    got: list[bytes] = []

    async def sink(data: Any) -> None:
        got.append(bytes(data))

    feed, _ = EncryptionSettings(key=keys).request_body(sink)
    real = feed.feeder

    class Spy:
        async def send(self, data: memoryview) -> None:
            pushed.append(len(data))
            await real.send(data)

        async def flush(self) -> None:
            await real.flush()

        async def aclose(self) -> None:
            await real.aclose()

    feed.feeder = Spy()  # type: ignore[assignment]
    feed._cut._piece = 2500
    await feed.send(body[:first])
    await feed.send(body[first:])
    await feed.aclose()
    return b"".join(got), pushed


async def test_a_ciphertext_feed_pushes_its_header_alone_then_whole_records() -> None:
    """A request body's decrypting feed pushes the header on its own (the engine reads a
    header on a worker and runs that push's records through its batches, so records
    pushed with it would leave the loop), then pieces of as many whole records as the
    piece size holds, cut where the body's records end whatever the writes are (issue
    28: a record cut in two is joined first); a header split across writes goes
    through as it comes."""
    keys = ring()
    plaintext = os.urandom(9 * 983 + 100)
    body = streamcrypt.encrypt_bytes(plaintext, keys, format="ece", segment_size=983)
    header = read_header(body)
    assert header is not None and header.record_size == 1000
    got, pushed = await _pushed_pieces(body, len(body), keys)
    assert got == plaintext
    assert pushed[0] == header.size and pushed[1:-1] == [2000] * 4, pushed
    for first in (7, 600):
        got, pushed = await _pushed_pieces(body, first, keys)
        assert got == plaintext
        ends = list(itertools.accumulate(pushed))
        if first == 7:  # 7 bytes, then up to MAX_HEADER_SIZE until the header is read
            assert pushed[:2] == [7, MAX_HEADER_SIZE]
            ends = ends[2:]
        else:
            assert pushed[0] == header.size
            ends = ends[1:]
        cuts = [e for e in ends[:-1] if e != first]  # a write's end cuts where it falls
        assert cuts and all((c - header.size) % 1000 == 0 for c in cuts), pushed
        # Each piece after the header holds at most two record boundaries (releases at
        # most two records).
        spans = itertools.pairwise(ends)
        assert all(_bounds(a - header.size, b - header.size, 1000) <= 2 for a, b in spans)


async def test_record_size_and_head() -> None:
    keys = ring()
    body = b"x" * 50_000

    async def endpoint(request: Request) -> Response:
        return PlainTextResponse(body.decode())

    app = EncryptionMiddleware(
        Starlette(routes=[Route("/b", endpoint, methods=["GET", "HEAD"])]),
        key=keys,
        record_size=1000,
    )
    async with client(app) as c:
        r = await c.get("/b")
        h = await c.head("/b")
    header = read_header(r.content)
    assert header is not None and header.record_size == 1000
    assert streamcrypt.decrypt_bytes(r.content, keys, format="ece") == body
    assert h.status_code == 200 and h.content == b""
    assert h.headers["content-encoding"] == "aes128gcm"
    assert int(h.headers["content-length"]) == encrypted_length(len(body), 1000, keyid="k1")


async def test_existing_vary_merged_and_bodyless_statuses_untouched() -> None:
    keys = ring()

    async def vary(request: Request) -> Response:
        return Response(b"v", headers={"Vary": "Accept-Language"})

    async def nothing(request: Request) -> Response:
        return Response(status_code=204)

    routes = [Route("/vary", vary), Route("/204", nothing)]
    app = EncryptionMiddleware(Starlette(routes=routes), key=keys)
    async with client(app) as c:
        r = await c.get("/vary")
        n = await c.get("/204")
    assert r.headers["vary"] == "Accept-Language, Content-Encoding"
    assert streamcrypt.decrypt_bytes(r.content, keys, format="ece") == b"v"
    assert n.status_code == 204 and "content-encoding" not in n.headers


@pytest.mark.parametrize("status", [101, 103, 204, 304])
async def test_a_bodyless_status_passes_as_the_app_sent_it(status: int) -> None:
    """A status that never carries a body (1xx, 204, 304) passes untouched, as on
    aiohttp (one rule, ``bodyless_status``): the ASGI middleware once knew only 204 and
    304 and gave a 1xx answer an encrypted body and a Content-Encoding."""

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
    await EncryptionMiddleware(app, key=ring())(scope, receive, send)
    assert sent == [
        {"type": "http.response.start", "status": status, "headers": []},
        {"type": "http.response.body", "body": b"", "more_body": False},
    ]


async def test_streaming_is_incremental_with_inline_policy() -> None:
    """With policy=None each record leaves once complete: the client sees the first
    chunk's records (two full 64 KiB records: the client releases one once the next
    begins) before the app sends its second chunk."""
    keys = ring()
    seen = asyncio.Event()
    first = os.urandom(140_000)

    async def gen() -> AsyncIterator[bytes]:
        yield first
        await asyncio.wait_for(seen.wait(), 10)
        yield b"tail"

    async def endpoint(request: Request) -> StreamingResponse:
        return StreamingResponse(gen())

    app = EncryptionMiddleware(Starlette(routes=[Route("/s", endpoint)]), key=keys, policy=None)
    async with client(app) as c, c.stream("GET", "/s") as r:
        dec = EceDecryptor(keys)
        out = bytearray()
        async for piece in r.aiter_raw():
            out += dec.update(piece)
            if out:
                seen.set()
        out += dec.finalize()
    assert bytes(out) == first + b"tail"


async def test_paths_and_content_types_select() -> None:
    keys = ring()

    async def text(request: Request) -> Response:
        return PlainTextResponse("secret text")

    async def image(request: Request) -> Response:
        return Response(b"\x89PNG", media_type="image/png")

    routes = [Route("/api/t", text), Route("/api/public/t", text), Route("/other", text)]
    routes.append(Route("/api/img", image))
    app = EncryptionMiddleware(
        Starlette(routes=routes),
        key=keys,
        include_paths=["/api/"],
        exclude_paths=["/api/public/"],
        content_types=["text/*"],
    )
    async with client(app) as c:
        enc = await c.get("/api/t")
        public = await c.get("/api/public/t")
        other = await c.get("/other")
        img = await c.get("/api/img")
    assert streamcrypt.decrypt_bytes(enc.content, keys, format="ece") == b"secret text"
    assert public.content == other.content == b"secret text"
    assert "content-encoding" not in public.headers and "content-encoding" not in other.headers
    assert img.content == b"\x89PNG" and "content-encoding" not in img.headers


# -- what a gzip middleware would pass through: pathsend, 206, already encoded --------


def with_pathsend(app: App) -> App:
    """Pretend the server offers the pathsend extension (uvicorn does not)."""

    async def inner(scope: Scope, receive: Any, send: Any) -> None:
        scope.setdefault("extensions", {})["http.response.pathsend"] = {}
        await app(scope, receive, send)

    return inner


def file_app(path: Path) -> Starlette:
    async def endpoint(request: Request) -> FileResponse:
        return FileResponse(path, media_type="application/octet-stream")

    async def gz(request: Request) -> Response:
        return Response(gzip.compress(b"plain words"), headers={"Content-Encoding": "gzip"})

    return Starlette(routes=[Route("/f", endpoint), Route("/gz", gz)])


@pytest.fixture
def data_file(tmp_path: Path) -> tuple[Path, bytes]:
    data = os.urandom(3 * (1 << 20) + 123)
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    return path, data


async def test_pathsend_encrypted(data_file: tuple[Path, bytes]) -> None:
    path, data = data_file
    keys = ring()
    app = EncryptionMiddleware(with_pathsend(file_app(path)), key=keys)
    async with client(app) as c:
        r = await c.get("/f")
    assert r.status_code == 200 and r.headers["content-encoding"] == "aes128gcm"
    assert int(r.headers["content-length"]) == len(r.content)
    assert len(r.content) == encrypted_length(len(data), DEFAULT_HTTP_RECORD_SIZE, keyid="k1")
    assert streamcrypt.decrypt_bytes(r.content, keys, format="ece") == data


async def test_pathsend_refused(data_file: tuple[Path, bytes]) -> None:
    path, data = data_file
    app = EncryptionMiddleware(with_pathsend(file_app(path)), key=ring(), on_unencryptable="refuse")
    async with client(app) as c:
        r = await c.get("/f")
    assert r.status_code == 500
    assert data[:16] not in r.content and len(r.content) < 200


async def test_streamed_file_without_pathsend_keeps_exact_length(
    data_file: tuple[Path, bytes],
) -> None:
    path, data = data_file
    keys = ring()
    app = EncryptionMiddleware(file_app(path), key=keys)
    async with client(app) as c:
        r = await c.get("/f")
    assert int(r.headers["content-length"]) == encrypted_length(
        len(data), DEFAULT_HTTP_RECORD_SIZE, keyid="k1"
    )
    assert streamcrypt.decrypt_bytes(r.content, keys, format="ece") == data


@pytest.mark.parametrize("pathsend", [False, True])
async def test_ranged_206_encrypted(data_file: tuple[Path, bytes], pathsend: bool) -> None:
    path, data = data_file
    keys = ring()
    inner = file_app(path)
    app = EncryptionMiddleware(with_pathsend(inner) if pathsend else inner, key=keys)
    async with client(app) as c:
        r = await c.get("/f", headers={"Range": "bytes=100-5099"})
    assert r.status_code == 206
    assert r.headers["content-encoding"] == "aes128gcm"
    assert streamcrypt.decrypt_bytes(r.content, keys, format="ece") == data[100:5100]
    assert data[100:116] not in r.content


async def test_ranged_206_refused(data_file: tuple[Path, bytes]) -> None:
    path, data = data_file
    app = EncryptionMiddleware(file_app(path), key=ring(), on_unencryptable="refuse")
    async with client(app) as c:
        r = await c.get("/f", headers={"Range": "bytes=100-5099"})
        whole = await c.get("/f")
    assert r.status_code == 500 and data[100:116] not in r.content
    assert whole.status_code == 200  # only the ranged answer is refused


async def test_already_encoded_encrypted_on_top(data_file: tuple[Path, bytes]) -> None:
    keys = ring()
    app = EncryptionMiddleware(file_app(data_file[0]), key=keys)
    async with client(app) as c, c.stream("GET", "/gz") as r:
        raw = b"".join([piece async for piece in r.aiter_raw()])  # httpx would gunzip it
    assert r.headers["content-encoding"] == "gzip, aes128gcm"
    assert gzip.decompress(streamcrypt.decrypt_bytes(raw, keys, format="ece")) == b"plain words"


async def test_already_encoded_refused(data_file: tuple[Path, bytes]) -> None:
    app = EncryptionMiddleware(file_app(data_file[0]), key=ring(), on_unencryptable="refuse")
    async with client(app) as c:
        r = await c.get("/gz")
    assert r.status_code == 500
    assert gzip.compress(b"plain words")[10:] not in r.content


# -- requests -------------------------------------------------------------------------


def echo_app(log: list[Any]) -> Starlette:
    """Reads the body as a stream; answers its SHA-256 and length (and logs chunks)."""

    async def echo(request: Request) -> Response:
        h = hashlib.sha256()
        n = 0
        log.append(dict(request.headers))
        async for chunk in request.stream():
            log.append(len(chunk))
            h.update(chunk)
            n += len(chunk)
        return PlainTextResponse(f"{n} {h.hexdigest()}")

    return Starlette(routes=[Route("/echo", echo, methods=["POST"])])


async def chunked(data: bytes, size: int) -> AsyncIterator[bytes]:
    for off in range(0, len(data), size):
        yield data[off : off + size]


@pytest.mark.parametrize("record_size", [18, 100, 4096, 65536])
async def test_request_body_decrypted_streaming(record_size: int) -> None:
    keys = ring("old")
    old = keys.active
    keys.add(SecretKey.generate(16, key_id="new"), activate=True)
    data = os.urandom(30_000 if record_size < 100 else 300_000)
    body = streamcrypt.encrypt_bytes(
        data, old, keyid="old", segment_size=record_size - OVERHEAD, format="ece"
    )  # rotated-out key
    log: list[Any] = []
    app = EncryptionMiddleware(echo_app(log), key=keys)
    async with client(app) as c:
        r = await c.post(
            "/echo", content=chunked(body, 7777), headers={"Content-Encoding": "aes128gcm"}
        )
    assert r.status_code == 200
    assert (
        streamcrypt.decrypt_bytes(r.content, keys, format="ece").decode()
        == f"{len(data)} {hashlib.sha256(data).hexdigest()}"
    )
    assert keyid_of(r.content) == "new"
    headers = log[0]
    assert "content-encoding" not in headers and "content-length" not in headers


async def test_a_request_body_in_clear_is_refused_before_the_app() -> None:
    """Fail closed: a POST body without aes128gcm gets 415 and the app never runs; a
    request without a body, or on an allowed path, passes and the scope says how."""
    keys = ring()
    seen: list[tuple[str, bool]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen.append((scope["path"], scope[BODY_DECRYPTED]))
        await PlainTextResponse(f"{len(body)}")(scope, receive, send)

    mw = EncryptionMiddleware(app, key=keys, allow_clear_paths=["/open"])
    async with client(mw) as c:
        r = await c.post("/echo", content=b"secret")
        assert r.status_code == 415 and b"secret" not in r.content
        assert seen == []
        r = await c.post("/echo", content=b"")  # Content-Length: 0: nothing to protect
        assert r.status_code == 200 and seen[-1] == ("/echo", False)
        r = await c.get("/echo")
        assert (
            r.status_code == 200
            and streamcrypt.decrypt_bytes(r.content, keys, format="ece") == b"0"
        )
        r = await c.post("/open/x", content=b"public")
        assert streamcrypt.decrypt_bytes(r.content, keys, format="ece") == b"6" and seen[-1] == (
            "/open/x",
            False,
        )
        r = await c.post(
            "/echo",
            content=streamcrypt.encrypt_bytes(b"secret", keys, format="ece"),
            headers=AES_HEADERS,
        )
        assert streamcrypt.decrypt_bytes(r.content, keys, format="ece") == b"6" and seen[-1] == (
            "/echo",
            True,
        )
    methods = EncryptionMiddleware(app, key=keys, allow_clear_methods=["put"])
    async with client(methods) as c:
        assert (await c.put("/x", content=b"ok")).status_code == 200
        assert (await c.post("/x", content=b"no")).status_code == 415


async def test_body_bytes_on_a_bodiless_request_never_reach_the_app() -> None:
    """A GET that carries a body anyway (chunked, no Content-Length): the bytes raise in
    the app's receive and the client gets 415."""
    keys = ring()
    got: list[bytes] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        got.append(message.get("body", b""))
        await PlainTextResponse("read")(scope, receive, send)

    async def body() -> AsyncIterator[bytes]:
        yield b"sneaky"

    async with client(EncryptionMiddleware(app, key=keys)) as c:
        r = await c.request("GET", "/x", content=body())
    assert r.status_code == 415 and got == []


async def test_content_encoding_on_several_lines_is_read_as_one() -> None:
    """RFC 9110: two lines mean the comma-joined value. identity + aes128gcm is an
    encrypted body (decrypted); aes128gcm + gzip is not one we decrypt (415)."""
    keys = ring()
    app = EncryptionMiddleware(echo_app([]), key=keys)
    body = streamcrypt.encrypt_bytes(b"hello", keys, format="ece")
    async with client(app) as c:
        headers = [("content-encoding", "identity"), ("content-encoding", "aes128gcm")]
        r = await c.post("/echo", content=body, headers=headers)
        assert r.status_code == 200 and streamcrypt.decrypt_bytes(
            r.content, keys, format="ece"
        ).startswith(b"5 ")
        headers = [("content-encoding", "aes128gcm"), ("content-encoding", "gzip")]
        r = await c.post("/echo", content=body, headers=headers)
        assert r.status_code == 415


async def test_a_stalled_request_body_is_cut_with_408() -> None:
    keys = ring()
    app = EncryptionMiddleware(echo_app([]), key=keys, body_timeout=0.3)
    body = streamcrypt.encrypt_bytes(b"x" * 20000, keys, format="ece")

    async def stalling() -> AsyncIterator[bytes]:
        yield body[:5000]
        await asyncio.sleep(3)
        yield body[5000:]

    async with client(app) as c:
        # Only the timeout can make this 408: the whole body would decrypt (200) without it.
        r = await c.post("/echo", content=stalling(), headers=AES_HEADERS)
        assert r.status_code == 408


async def test_a_trickled_request_body_is_cut_by_its_minimum_rate() -> None:
    # Each piece comes well within body_timeout, but 400 bytes/s is under the minimum
    # rate of 2000: the body's deadline (0.5 s + 1 s per 2000 bytes) passes after ~0.6 s.
    keys = ring()
    app = EncryptionMiddleware(echo_app([]), key=keys, body_timeout=0.5, body_min_rate=2000)
    body = streamcrypt.encrypt_bytes(b"x" * 2000, keys, format="ece")

    async def trickling() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 40):
            yield body[i : i + 40]
            await asyncio.sleep(0.1)

    async with client(app) as c:
        r = await c.post("/echo", content=trickling(), headers=AES_HEADERS)
        assert r.status_code == 408
        fast = EncryptionMiddleware(echo_app([]), key=keys, body_timeout=0.5, body_min_rate=100)
    async with client(fast) as c:  # the same trickle is fine at a 10 bytes/s minimum
        r = await c.post("/echo", content=trickling(), headers=AES_HEADERS)
        assert r.status_code == 200


class _CountedTimers:
    """Keeps the handles of the loop timers a :class:`LoopDeadline` arms (``call_at``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        loop = asyncio.get_running_loop()
        self.handles: list[asyncio.TimerHandle] = []
        call_at = loop.call_at

        def counted(when: float, callback: Any, *args: Any, **kwargs: Any) -> Any:
            handle = call_at(when, callback, *args, **kwargs)
            if isinstance(getattr(callback, "__self__", None), LoopDeadline):
                self.handles.append(handle)
            return handle

        monkeypatch.setattr(loop, "call_at", counted)


def _arriving(delays: list[float]) -> Callable[[], Awaitable[bytes]]:
    """A body read whose pieces come after ``delays`` seconds each (every read waits)."""
    pending = iter(delays)

    async def read() -> bytes:
        await asyncio.sleep(next(pending))
        return b"x" * 100

    return read


async def test_a_body_whose_reads_all_wait_arms_one_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 28: a timer armed and cancelled on every read that waits cost ~2 us a read
    # (0.036 CPU-s/GB on an aiohttp upload); the body's reads now share one.
    deadline = BodyDeadline(30.0, 500.0)
    read = _arriving([0.001] * 50)
    timers = _CountedTimers(monkeypatch)
    for _ in range(50):
        await deadline.read(read, len)
    assert len(timers.handles) == 1 and not timers.handles[0].cancelled()
    deadline.close()
    assert timers.handles[0].cancelled()  # the body is over: its timer with it


async def test_a_transport_call_under_with_timeout_leaves_no_timer_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # with_timeout (the encrypted stream's transport calls) and a body's reads share one
    # driver (LoopDeadline): a call that never waits arms nothing, one that waits arms a
    # timer of its own that is gone when the call is over, and a stall is still cut.
    timers = _CountedTimers(monkeypatch)

    async def ready() -> int:
        return 7

    assert await with_timeout(5.0, "x", ready(), True) == 7
    assert timers.handles == []
    read = _arriving([0.001] * 20)
    for _ in range(20):
        assert await with_timeout(5.0, "x", read(), True) == b"x" * 100
    assert len(timers.handles) == 20 and all(h.cancelled() for h in timers.handles)
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(PeerTimeoutError, match=r"made no progress for 0\.2 s"):
        await with_timeout(0.2, "x", _arriving([3600.0])(), True)
    assert 0.19 <= loop.time() - start < 1.0


async def test_a_stall_after_a_slow_piece_is_cut_at_its_own_deadline() -> None:
    # The timer armed for the first wait (due at 0.3 s) fires during the second wait,
    # whose deadline is 0.3 s from its own start: it is re-armed, not cut early, and the
    # stall is still cut.
    deadline = BodyDeadline(0.3, None)
    read = _arriving([0.2, 3600.0])
    await deadline.read(read, len)
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(PeerTimeoutError):
        await deadline.read(read, len)
    assert 0.29 <= loop.time() - start < 1.0


async def test_a_stall_after_a_pause_without_reads_is_cut() -> None:
    # The timer fires while nothing waits (the app was busy, not reading): it is dropped,
    # and the next wait that stalls arms one again.
    deadline = BodyDeadline(0.2, None)
    read = _arriving([0.01, 3600.0])
    await deadline.read(read, len)
    await asyncio.sleep(0.3)
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(PeerTimeoutError):
        await deadline.read(read, len)
    assert 0.19 <= loop.time() - start < 1.0


async def test_a_trickle_is_cut_by_the_body_deadline_with_one_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 100 bytes every 0.05 s (2,000 bytes/s) under a 20,000 bytes/s minimum: the body's
    # deadline (0.3 s plus 1 s per 20,000 bytes) passes after about 0.35 s, though no
    # single wait is long. One timer, re-armed as the deadline moves on.
    deadline = BodyDeadline(0.3, 20_000.0)
    read = _arriving([0.05] * 100)
    timers = _CountedTimers(monkeypatch)
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(PeerTimeoutError, match="slower than 20000 bytes/s"):
        while True:
            await deadline.read(read, len)
    assert 0.3 <= loop.time() - start < 1.0
    assert 1 <= len(timers.handles) <= 3


async def test_data_that_comes_as_the_timer_fires_is_read_and_the_next_wait_is_not_cut() -> None:
    # The timer fires in the same loop turn as the piece it guarded came: the piece is
    # read, and the deadline is not spent on the next wait.
    loop = asyncio.get_running_loop()
    clock = LoopDeadline(loop)
    came: asyncio.Future[bytes] = loop.create_future()

    async def first() -> bytes:
        return await came

    task = asyncio.ensure_future(clock.wait(first(), loop.time() - 1, 1.0, "a piece"))
    await asyncio.sleep(0)  # the wait is on ``came`` and the timer armed
    came.set_result(b"piece")
    clock._fire()  # due already, in the same turn as the data
    assert await task == b"piece"

    async def second() -> bytes:
        await asyncio.sleep(0.01)
        return b"next"

    assert await clock.wait(second(), loop.time() + 5, 5.0, "a piece") == b"next"
    clock.close()


async def _path_app(scope: Any, receive: Any, send: Any) -> None:
    """Any path: answers its body's length (read whole)."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    headers = [(b"content-type", b"text/plain")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"record %d" % size})


@pytest.mark.parametrize(
    ("path", "encrypted"),
    [("/health", False), ("/health/live", False), ("/healthcare/records", True)],
)
async def test_exclude_paths_match_whole_segments(path: str, encrypted: bool) -> None:
    keys = ring()
    app = EncryptionMiddleware(_path_app, key=keys, exclude_paths=["/health"])
    async with client(app) as c:
        r = await c.get(path)
        body = streamcrypt.decrypt_bytes(r.content, keys, format="ece") if encrypted else r.content
        assert r.status_code == 200 and body == b"record 0"


async def test_allow_clear_paths_match_whole_segments() -> None:
    app = EncryptionMiddleware(_path_app, key=ring(), allow_clear_paths=["/upload"])
    async with client(app) as c:
        for path, status in (("/upload", 200), ("/upload/x", 200), ("/upload-admin", 415)):
            r = await c.post(path, content=b"clear body")
            assert r.status_code == status, path


async def test_one_path_rule_by_whole_segments() -> None:
    def selects(path: str, rule: str) -> bool:
        return EncryptionSettings(key=ring(), include_paths=[rule]).selects(path)

    assert selects("/health", "/health") and selects("/health/x", "/health")
    assert not selects("/healthcare", "/health")
    assert selects("/api/v1", "/api/") and not selects("/api", "/api/")
    assert selects("/anything", "/")
    # dot segments are resolved first: judged as the path a normalising router serves
    assert not selects("/health/../records", "/health")
    assert selects("/x/../health/live", "/health")
    assert selects("/health/./live", "/health") and not selects("/..", "/health")
    clear = EncryptionSettings(key=ring(), allow_clear_paths=["/upload"])
    assert clear.clear_allowed("POST", "/upload/x") and not clear.clear_allowed("POST", "/uploads")


async def test_options_are_explicit_typed_keywords() -> None:
    import inspect
    import typing

    from streamcrypt.transports import setup_encryption

    for function in (EncryptionMiddleware.__init__, setup_encryption):
        signature = inspect.signature(function)
        kinds = {p.kind for p in signature.parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD not in kinds, function
        assert "settings" not in signature.parameters
        assert signature.parameters["key"].kind is inspect.Parameter.KEYWORD_ONLY
        hints = typing.get_type_hints(function)
        assert all(hint is not Any for hint in hints.values()), hints
        # Each option reaches the settings under its own name and default (config_of
        # takes the call's locals() by field name: a keyword it missed would be dropped).
        empty = {dataclasses.MISSING: inspect.Parameter.empty}
        defaults = {
            f.name: empty.get(f.default, f.default) for f in dataclasses.fields(EncryptionSettings)
        }
        options = {
            name: p.default
            for name, p in signature.parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        }
        assert {name: defaults.get(name, "missing") for name in options} == options
    keys = ring()
    middleware = EncryptionMiddleware(echo_app([]), key=keys, allow_clear_methods=["put"])
    assert middleware.settings.allow_clear_methods == frozenset({"PUT"})
    with pytest.raises(TypeError, match="decrypt_request"):
        EncryptionMiddleware(echo_app([]), key=keys, decrypt_request=False)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="key"):
        EncryptionMiddleware(echo_app([]))  # type: ignore[call-arg]
    with pytest.raises(InvalidParameterError, match="KeyRing"):
        EncryptionMiddleware(echo_app([]), key=b"x" * 16)  # type: ignore[arg-type]


BAD = [
    (
        "wrong key",
        lambda ks: streamcrypt.encrypt_bytes(
            b"p" * 9000, SecretKey.generate(16), keyid="k1", format="ece"
        ),
        400,
    ),
    (
        "unknown key id",
        lambda ks: streamcrypt.encrypt_bytes(b"p" * 9000, ks.active, keyid="zz", format="ece"),
        400,
    ),
    ("no key id", lambda ks: streamcrypt.encrypt_bytes(b"p" * 9000, ks.active, format="ece"), 400),
    ("truncated", lambda ks: streamcrypt.encrypt_bytes(b"p" * 9000, ks, format="ece")[:-4200], 400),
    (
        "cut at record",
        lambda ks: streamcrypt.encrypt_bytes(
            b"p" * 9000, ks, segment_size=4096 - OVERHEAD, format="ece"
        )[:4117],
        400,
    ),
    ("empty", lambda ks: b"", 400),
    ("header only", lambda ks: streamcrypt.encrypt_bytes(b"", ks, format="ece")[:23], 400),
    (
        "rs too large",
        lambda ks: streamcrypt.encrypt_bytes(
            b"p" * 10, ks, segment_size=(1 << 25) - OVERHEAD, format="ece"
        ),
        413,
    ),
    ("rs too small", lambda ks: b"\x00" * 16 + (5).to_bytes(4, "big") + b"\x00" + b"x" * 40, 400),
]


def tamper(ks: KeyRing) -> bytes:
    body = bytearray(streamcrypt.encrypt_bytes(b"p" * 9000, ks, format="ece"))
    body[5000] ^= 1
    return bytes(body)


BAD.append(("tampered", tamper, 400))


@pytest.mark.parametrize(("name", "make", "status"), BAD, ids=[b[0] for b in BAD])
async def test_bad_request_bodies(name: str, make: Callable[[KeyRing], bytes], status: int) -> None:
    keys = ring()
    log: list[Any] = []
    app = EncryptionMiddleware(echo_app(log), key=keys)
    async with client(app) as c:
        r = await c.post("/echo", content=make(keys), headers={"Content-Encoding": "aes128gcm"})
    assert r.status_code == status
    assert r.headers["content-type"].startswith("text/plain")
    assert b"ppp" not in r.content and len(r.content) < 200
    assert "content-encoding" not in r.headers
    assert sum(x for x in log[1:] if isinstance(x, int)) < 9000  # never the whole body


async def test_app_catching_the_error_cannot_answer_200() -> None:
    keys = ring()
    seen: list[BaseException] = []

    async def endpoint(request: Request) -> Response:
        try:
            await request.body()
        except AuthenticationError as exc:
            seen.append(exc)
        return PlainTextResponse("all fine")

    app = EncryptionMiddleware(
        Starlette(routes=[Route("/p", endpoint, methods=["POST"])]), key=keys
    )
    async with client(app) as c:
        r = await c.post("/p", content=tamper(keys), headers={"Content-Encoding": "aes128gcm"})
    assert r.status_code == 400
    assert len(seen) == 1


@pytest.mark.parametrize("coding", ["gzip", "br", "aes128gcm, gzip", "gzip, aes128gcm"])
async def test_other_request_coding_415(coding: str) -> None:
    log: list[Any] = []
    app = EncryptionMiddleware(echo_app(log), key=ring())
    async with client(app) as c:
        r = await c.post("/echo", content=b"abc", headers={"Content-Encoding": coding})
    assert r.status_code == 415
    assert log == []  # the app never ran


async def test_requests_untouched_when_not_decrypting() -> None:
    keys = ring()
    log: list[Any] = []
    app = EncryptionMiddleware(echo_app(log), key=keys, decrypt_requests=False)
    async with client(app) as c:
        r = await c.post("/echo", content=b"abc", headers={"Content-Encoding": "gzip"})
    assert r.status_code == 200 and log[0]["content-encoding"] == "gzip"


async def test_settings_checked() -> None:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        raise AssertionError

    with pytest.raises(InvalidParameterError):
        EncryptionMiddleware(app, key=ring(), record_size=10)
    with pytest.raises(InvalidParameterError):
        EncryptionMiddleware(app, key=ring(), on_unencryptable="pass")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        EncryptionMiddleware(app, key=KeyRing([SecretKey.generate(32, key_id="a")]))
    with pytest.raises(InvalidParameterError):
        EncryptionMiddleware(app, key=b"k" * 16)  # type: ignore[arg-type]


# -- large bodies, bounded memory -------------------------------------------------------


def _reset_peak() -> int:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status("VmRSS")


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(field)


async def _roundtrip(
    c: httpx.AsyncClient,
    keys: KeyRing,
    policy: OffloadPolicy | None,
    gen: Callable[[], AsyncIterator[bytes]],
) -> tuple[bytes, int, bytes]:
    """Download (decrypting as it streams) and upload (encrypting as it streams)."""
    async with c.stream("GET", "/down") as r:
        got = hashlib.sha256()
        n = 0
        async for plain in pipeline(EceDecryptor(keys), policy=policy).stream(r.aiter_raw()):
            got.update(plain)
            n += len(plain)
    up = await c.post(
        "/up",
        content=pipeline(EceEncryptor(keys), policy=policy).stream(gen()),
        headers={"Content-Encoding": "aes128gcm"},
    )
    return up.content, n, got.digest()


async def _big_roundtrip(size: int, policy: OffloadPolicy | None, limit: int) -> None:
    """``size`` bytes down and up through the middleware, both ends streaming; the peak
    RSS of the process (server and client) may grow by at most ``limit``."""
    keys = ring()
    piece = 1 << 20
    seed = os.urandom(piece)
    count = {"n": size // piece}

    def block(i: int) -> bytes:
        return hashlib.sha256(i.to_bytes(8, "big")).digest()[:8] + seed[8:]

    async def gen() -> AsyncIterator[bytes]:
        for i in range(count["n"]):
            yield block(i)

    async def download(request: Request) -> StreamingResponse:
        return StreamingResponse(gen(), media_type="application/octet-stream")

    async def upload(request: Request) -> Response:
        h = hashlib.sha256()
        n = 0
        async for chunk in request.stream():
            h.update(chunk)
            n += len(chunk)
        return PlainTextResponse(f"{n} {h.hexdigest()}")

    routes = [Route("/down", download), Route("/up", upload, methods=["POST"])]
    app = EncryptionMiddleware(Starlette(routes=routes), key=keys, record_size=65536, policy=policy)
    expected = hashlib.sha256()
    for i in range(count["n"]):
        expected.update(block(i))
    async with client(app) as c:
        # A first, shorter round warms up (imports, worker threads, allocator arenas).
        count["n"] = min(count["n"], 16)
        await _roundtrip(c, keys, policy, gen)
        count["n"] = size // piece
        base = _reset_peak()
        up, n, got = await _roundtrip(c, keys, policy, gen)
        growth = _status("VmHWM") - base
    assert n == size and got == expected.digest()
    assert (
        streamcrypt.decrypt_bytes(up, keys, format="ece").decode()
        == f"{size} {expected.hexdigest()}"
    )
    print(f"{size >> 20} MiB each way: peak RSS grew by {growth / 2**20:.1f} MiB")
    assert growth < limit, f"peak RSS grew by {growth >> 20} MiB"


SMALL_BATCHES = OffloadPolicy(batch_size=256 << 10, inline_limit=128 << 10, adaptive=False)


async def test_32_mib_bounded_memory() -> None:
    """Four pipelines (encrypt and decrypt at each end) with 256 KiB batches."""
    await _big_roundtrip(32 << 20, SMALL_BATCHES, 20 << 20)


async def test_256_mib_bounded_memory() -> None:
    """The same with 1 MiB batches: the peak does not follow the body size."""
    await _big_roundtrip(256 << 20, OffloadPolicy(batch_size=1 << 20, adaptive=False), 32 << 20)


async def test_transports_import_without_the_optional_extras() -> None:
    """starlette and aiohttp are optional: the package and the ASGI middleware import
    without them; the aiohttp names fail only when used."""
    code = (
        "import sys\n"
        "sys.modules['aiohttp'] = None\n"
        "sys.modules['starlette'] = None\n"
        "import streamcrypt.transports as t\n"
        "assert t.EncryptionMiddleware\n"
        "try:\n"
        "    t.setup_encryption\n"
        "except ImportError:\n"
        "    print('lazy ok')\n"
    )
    argv = [sys.executable, "-c", code]
    done = await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "lazy ok"


async def test_bad_body_after_the_response_started_aborts() -> None:
    """An app that streams its answer before reading a bad body: the answer cannot be
    replaced, so the server aborts the connection; the client never gets a complete
    (authenticated) response."""
    keys = ring()

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"started " * 1000, "more_body": True})
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    mw = EncryptionMiddleware(app, key=keys, policy=None)
    async with client(mw) as c:
        with pytest.raises(httpx.RemoteProtocolError):
            async with c.stream(
                "POST", "/", content=tamper(keys), headers={"Content-Encoding": "aes128gcm"}
            ) as r:
                assert r.status_code == 200
                async for _ in r.aiter_raw():
                    pass


@pytest.mark.parametrize("mode", ["encrypt", "refuse"])
async def test_unknown_body_message_refused(tmp_path: Path, mode: str) -> None:
    """A body message of an extension the middleware does not know never passes."""
    path = tmp_path / "f"
    path.write_bytes(b"zero-copy secret")

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        with path.open("rb") as f:
            await send({"type": "http.response.zerocopysend", "file": f, "more_body": False})

    mw = EncryptionMiddleware(app, key=ring(), on_unencryptable=mode)  # type: ignore[arg-type]
    sent: list[dict[str, Any]] = []  # what the server would get (uvicorn lacks zerocopysend)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
    await mw(scope, receive, send)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 500 and b"secret" not in sent[1]["body"]


@pytest.mark.slow
async def test_1_gib_default_policy_bounded_memory() -> None:
    """The default policy (8 MiB batches, 3 in flight): the peak is a constant of the
    policy (a few batches per pipeline), far below a 1 GiB body."""
    await _big_roundtrip(1 << 30, DEFAULT_POLICY, 320 << 20)


async def test_as_starlette_middleware() -> None:
    """Added the Starlette way (inside Starlette's error handling)."""
    from starlette.middleware import Middleware

    keys = ring()

    async def endpoint(request: Request) -> Response:
        return PlainTextResponse(str(len(await request.body())))

    app = Starlette(
        routes=[Route("/p", endpoint, methods=["POST"])],
        middleware=[Middleware(EncryptionMiddleware, key=keys)],
    )
    headers = {"Content-Encoding": "aes128gcm"}
    async with client(app) as c:
        good = await c.post(
            "/p",
            content=streamcrypt.encrypt_bytes(b"x" * 5000, keys, format="ece"),
            headers=headers,
        )
        bad = await c.post("/p", content=tamper(keys), headers=headers)
    assert streamcrypt.decrypt_bytes(good.content, keys, format="ece") == b"5000"
    assert bad.status_code == 400


@pytest.mark.parametrize("policy", [None, DEFAULT_POLICY], ids=["inline", "default"])
async def test_a_large_whole_body_response_does_not_hold_the_loop(
    policy: OffloadPolicy | None,
) -> None:
    """A 32 MiB response sent as one body message is encrypted in inline batches with the
    loop free between them (or offloaded), never in one call on the loop: with
    policy=None the whole body went into one update() and the loop ran nothing else for
    all of it (the second review's finding). Counted in loop turns, not seconds, so that
    a loaded machine cannot decide it."""
    body = os.urandom(32 << 20)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    ring = KeyRing([SecretKey.generate(16, key_id="k")])
    middleware = EncryptionMiddleware(app, key=ring, policy=policy)
    turns = 0
    done = asyncio.Event()
    sent: list[bytes] = []

    async def ticker() -> None:
        nonlocal turns
        while not done.is_set():
            await asyncio.sleep(0)
            turns += 1

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message.get("body", b""))

    scope = {"type": "http", "method": "GET", "path": "/x", "headers": [], "query_string": b""}
    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = turns
    await middleware(scope, receive, send)
    during = turns - before
    done.set()
    await tick
    assert streamcrypt.decrypt_bytes(b"".join(sent), format="ece", key=ring) == body
    assert during >= 16, during  # 32 batches of 1 MiB: the loop ran between them
