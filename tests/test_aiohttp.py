"""aiohttp: setup_encryption, EncryptedStreamResponse and the client helpers, against a
real aiohttp server and client on 127.0.0.1."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gzip
import hashlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.payload import AsyncIterablePayload
from multidict import CIMultiDict

import streamcrypt
from streamcrypt.codecs.ece import OVERHEAD, encrypted_length, read_header
from streamcrypt.engine import OffloadPolicy
from streamcrypt.errors import AuthenticationError, InvalidParameterError, UnsupportedFormatError
from streamcrypt.keys import KeyRing, SecretKey
from streamcrypt.transports import (
    BODY_DECRYPTED_KEY,
    DEFAULT_HTTP_RECORD_SIZE,
    EncryptedStreamResponse,
    decrypt_response,
    encrypted_body,
    setup_encryption,
)

pytestmark = pytest.mark.asyncio

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


AES = {"Content-Encoding": "aes128gcm"}


def ring(*ids: str) -> KeyRing:
    return KeyRing([SecretKey.generate(16, key_id=i) for i in ids or ("k1",)])


@contextlib.asynccontextmanager
async def served(
    routes: dict[str, Handler], keys: KeyRing | None, **options: Any
) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    """An app with ``routes`` (any method), encryption set up when ``keys`` is given, on
    an ephemeral loopback port; yields a client session and the base URL."""
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_route("*", path, handler)
    if keys is not None:
        setup_encryption(app, key=keys, **options)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            yield session, f"http://{host}:{port}"
    finally:
        await runner.cleanup()


async def raw(resp: aiohttp.ClientResponse) -> bytes:
    return await resp.read()


# -- responses ------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 4079, 70_000, 3 << 20])
async def test_whole_response_encrypted(size: int) -> None:
    keys = ring("old", "new")
    body = os.urandom(size)

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/octet-stream")

    async with served({"/b": handler}, keys) as (s, url), s.get(url + "/b") as r:
        data = await raw(r)
        assert r.status == 200
        assert r.headers["Content-Encoding"] == "aes128gcm"
        assert r.headers["Vary"] == "Content-Encoding"
        assert int(r.headers["Content-Length"]) == len(data)
    assert len(data) == encrypted_length(size, DEFAULT_HTTP_RECORD_SIZE, keyid="new")
    header = read_header(data)
    assert header is not None and header.keyid == b"new"
    assert streamcrypt.decrypt_bytes(data, keys, format="ece") == body


async def test_encrypted_stream_response_and_decrypt_response() -> None:
    keys = ring()
    chunks = [os.urandom(n) for n in (0, 1, 5000, 4079, 65536, 123, 300_000)] * 5

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = EncryptedStreamResponse(headers={"Content-Type": "application/octet-stream"})
        await resp.prepare(request)
        for c in chunks:
            await resp.write(c)
        await resp.write_eof()
        return resp

    async def sized(request: web.Request) -> web.StreamResponse:
        resp = EncryptedStreamResponse(record_size=1000)
        resp.content_length = sum(map(len, chunks))
        await resp.prepare(request)
        for c in chunks:
            await resp.write(c)
        await resp.write_eof()
        return resp

    async with served({"/s": stream, "/z": sized}, keys) as (s, url):
        async with s.get(url + "/s") as r:
            assert r.headers["Content-Encoding"] == "aes128gcm"
            assert "Content-Length" not in r.headers
            out = b"".join([c async for c in decrypt_response(r, keys)])
        async with s.get(url + "/z") as r:
            data = await raw(r)
            length = int(r.headers["Content-Length"])
    plain = b"".join(chunks)
    assert out == plain
    assert length == len(data) == encrypted_length(len(plain), 1000, keyid="k1")
    assert streamcrypt.decrypt_bytes(data, keys, format="ece") == plain


async def test_small_streamed_response_costs_its_size() -> None:
    """Default 64 KiB records cost a 1 KiB body nothing: its one record is 1 KiB long."""
    keys = ring()

    async def small(request: web.Request) -> web.StreamResponse:
        resp = EncryptedStreamResponse()
        resp.content_length = 1024
        await resp.prepare(request)
        await resp.write(b"s" * 1024)
        await resp.write_eof()
        return resp

    async with served({"/s": small}, keys) as (s, url), s.get(url + "/s") as r:
        data = await raw(r)
    header = read_header(data)
    assert header is not None and header.record_size == DEFAULT_HTTP_RECORD_SIZE == 1 << 16
    assert len(data) == 1024 + header.size + 17
    assert streamcrypt.decrypt_bytes(data, keys, format="ece") == b"s" * 1024


async def test_stream_response_without_setup_needs_keys() -> None:
    keys = ring()
    errors: list[BaseException] = []

    async def with_keys(request: web.Request) -> web.StreamResponse:
        resp = EncryptedStreamResponse(key=keys)
        await resp.prepare(request)
        await resp.write(b"hello")
        await resp.write_eof()
        return resp

    async def without(request: web.Request) -> web.StreamResponse:
        resp = EncryptedStreamResponse()
        try:
            await resp.prepare(request)
        except InvalidParameterError as exc:
            errors.append(exc)
        return web.Response(text="no")

    async with served({"/k": with_keys, "/n": without}, None) as (s, url):
        async with s.get(url + "/k") as r:
            assert streamcrypt.decrypt_bytes(await raw(r), keys, format="ece") == b"hello"
        async with s.get(url + "/n") as r:
            assert await r.text() == "no"
    assert len(errors) == 1
    with pytest.raises(InvalidParameterError):
        EncryptedStreamResponse(key=keys).enable_compression()


async def test_http_exception_body_encrypted_and_head() -> None:
    keys = ring()

    async def fail(request: web.Request) -> web.Response:
        raise web.HTTPForbidden(text="secret reason")

    async def body(request: web.Request) -> web.Response:
        return web.Response(text="x" * 10_000)

    async with served({"/f": fail, "/b": body}, keys) as (s, url):
        async with s.get(url + "/f") as r:
            assert r.status == 403
            assert streamcrypt.decrypt_bytes(await raw(r), keys, format="ece") == b"secret reason"
        async with s.head(url + "/b") as r:
            assert r.headers["Content-Encoding"] == "aes128gcm"
            assert int(r.headers["Content-Length"]) == encrypted_length(
                10_000, DEFAULT_HTTP_RECORD_SIZE, keyid="k1"
            )
            assert await raw(r) == b""


async def test_paths_and_content_types() -> None:
    keys = ring()

    async def text(request: web.Request) -> web.Response:
        return web.Response(text="secret text")

    async def image(request: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG", content_type="image/png")

    routes = {"/api/t": text, "/api/public/t": text, "/other": text, "/api/img": image}
    opts = {"include_paths": ["/api/"], "exclude_paths": ["/api/public/"]}
    async with served(routes, keys, content_types=["text/*"], **opts) as (s, url):
        async with s.get(url + "/api/t") as r:
            assert streamcrypt.decrypt_bytes(await raw(r), keys, format="ece") == b"secret text"
        for path in ("/api/public/t", "/other"):
            async with s.get(url + path) as r:
                assert await raw(r) == b"secret text" and "Content-Encoding" not in r.headers
        async with s.get(url + "/api/img") as r:
            assert await raw(r) == b"\x89PNG"


# -- unencryptable answers: encrypted or refused -----------------------------------------


@pytest.fixture
def data_file(tmp_path: Path) -> tuple[Path, bytes]:
    data = os.urandom(2 * (1 << 20) + 77)
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    return path, data


def unencryptable_routes(path: Path, data: bytes) -> dict[str, Handler]:
    async def ranged(request: web.Request) -> web.Response:
        return web.Response(
            status=206,
            body=data[100:5100],
            headers={"Content-Range": f"bytes 100-5099/{len(data)}"},
        )

    async def encoded(request: web.Request) -> web.Response:
        return web.Response(
            body=gzip.compress(b"plain words"), headers={"Content-Encoding": "gzip"}
        )

    async def file(request: web.Request) -> web.FileResponse:
        return web.FileResponse(path)

    async def gen() -> AsyncIterator[bytes]:
        for off in range(0, len(data), 300_000):
            yield data[off : off + 300_000]

    async def payload(request: web.Request) -> web.Response:
        return web.Response(body=AsyncIterablePayload(gen()))

    return {"/206": ranged, "/gz": encoded, "/file": file, "/payload": payload}


async def test_unencryptable_encrypted(data_file: tuple[Path, bytes]) -> None:
    path, data = data_file
    keys = ring()
    async with served(unencryptable_routes(path, data), keys) as (s, url):
        async with s.get(url + "/206") as r:
            assert (
                r.status == 206
                and streamcrypt.decrypt_bytes(await raw(r), keys, format="ece") == data[100:5100]
            )
        async with s.get(url + "/gz") as r:
            assert r.headers["Content-Encoding"] == "gzip, aes128gcm"
            assert (
                gzip.decompress(streamcrypt.decrypt_bytes(await raw(r), keys, format="ece"))
                == b"plain words"
            )
        async with s.get(url + "/file") as r:
            body = await raw(r)
            assert int(r.headers["Content-Length"]) == len(body)
            assert streamcrypt.decrypt_bytes(body, keys, format="ece") == data
        async with s.get(url + "/file", headers={"Range": "bytes=10-20"}) as r:
            assert r.status == 200  # the range is ignored: the whole file, encrypted
            assert streamcrypt.decrypt_bytes(await raw(r), keys, format="ece") == data
        async with s.get(url + "/payload") as r:
            assert streamcrypt.decrypt_bytes(await raw(r), keys, format="ece") == data


@pytest.mark.parametrize("route", ["/206", "/gz", "/file", "/payload"])
async def test_unencryptable_refused(data_file: tuple[Path, bytes], route: str) -> None:
    path, data = data_file
    async with (
        served(unencryptable_routes(path, data), ring(), on_unencryptable="refuse") as (s, url),
        s.get(url + route) as r,
    ):
        body = await raw(r)
    assert r.status == 500
    assert len(body) < 200 and data[100:116] not in body and b"plain" not in body


@pytest.mark.parametrize("mode", ["encrypt", "refuse"])
async def test_plain_stream_response_refused_before_headers(mode: str) -> None:
    """A plain StreamResponse is written by the handler itself: it cannot be encrypted
    afterwards, so the guard refuses it at prepare and nothing goes out in clear."""
    reached: list[str] = []

    async def plain(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        reached.append("written")
        await resp.write(b"plaintext secret")
        await resp.write_eof()
        return resp

    async def compressed(request: web.Request) -> web.Response:
        resp = web.Response(text="compressible secret " * 50)
        resp.enable_compression(force=aiohttp.web.ContentCoding.gzip)
        return resp

    routes = {"/p": plain, "/c": compressed}
    async with served(routes, ring(), on_unencryptable=mode) as (s, url):
        for route in routes:
            async with s.get(url + route, headers={"Accept-Encoding": "gzip"}) as r:
                body = await raw(r)
                assert r.status == 500, route
                assert b"secret" not in body
    assert reached == []


async def test_every_answer_of_the_middleware_is_plain_text_never_stored() -> None:
    """The middleware's own answers are made by one function (``short_answer``): plain
    text, ``Cache-Control: no-store``, whichever path refused. The prepare guard's 500
    (a plain StreamResponse) once had its own text and no Cache-Control."""

    async def plain(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        return resp

    async def compressed(request: web.Request) -> web.Response:
        resp = web.Response(text="secret")
        resp.enable_compression(force=aiohttp.web.ContentCoding.gzip)
        return resp

    async def failing(request: web.Request) -> web.StreamResponse:
        raise RuntimeError("secret")

    routes = {"/plain": plain, "/compressed": compressed, "/failing": failing}
    async with served(routes, ring()) as (s, url):
        for route in routes:
            async with s.get(url + route) as r:
                body = await raw(r)
                assert r.status == 500, route
                assert r.headers["Cache-Control"] == "no-store", route
                assert r.headers["Content-Type"] == "text/plain; charset=utf-8", route
                assert body.startswith(b"500 Internal Server Error: ") and body.endswith(b"\n")


async def test_a_handler_prepared_5xx_or_a_failing_handler_never_leaks() -> None:
    async def prepared_503(request: web.Request) -> web.StreamResponse:
        resp = web.Response(status=503, text="secret maintenance details")
        await resp.prepare(request)
        return resp

    async def returned_503(request: web.Request) -> web.StreamResponse:
        return web.Response(status=503, text="secret maintenance details")

    async def failing(request: web.Request) -> web.StreamResponse:
        raise RuntimeError("secret state in the message")

    keys = ring()
    routes = {"/prepared": prepared_503, "/returned": returned_503, "/failing": failing}
    async with served(routes, keys) as (s, url):
        async with s.get(url + "/prepared") as r:
            body = await raw(r)
            assert r.status == 500 and b"secret" not in body
        async with s.get(url + "/returned") as r:  # encrypted like any other response
            assert r.status == 503
            assert (
                streamcrypt.decrypt_bytes(await raw(r), keys, format="ece")
                == b"secret maintenance details"
            )
        async with s.get(url + "/failing") as r:
            body = await raw(r)
            assert r.status == 500 and b"secret" not in body and b"Traceback" not in body


@pytest.mark.parametrize(
    ("path", "encrypted"),
    [
        ("/health", False),
        ("/health/live", False),
        ("/healthcare/records", True),
        ("/health-admin", True),
    ],
)
async def test_exclude_paths_match_whole_segments(path: str, encrypted: bool) -> None:
    async def hello(request: web.Request) -> web.StreamResponse:
        return web.Response(text="patient record")

    keys = ring()
    routes = {p: hello for p in ("/health", "/health/live", "/healthcare/records")}
    routes["/health-admin"] = hello
    async with served(routes, keys, exclude_paths=["/health"]) as (s, url):
        async with s.get(url + path) as r:
            body = await raw(r)
            assert r.status == 200
            if encrypted:
                assert streamcrypt.decrypt_bytes(body, keys, format="ece") == b"patient record"
            else:
                assert body == b"patient record"


async def test_allow_clear_paths_match_whole_segments() -> None:
    async def upload(request: web.Request) -> web.StreamResponse:
        return web.Response(text=str(len(await request.read())))

    keys = ring()
    routes = {p: upload for p in ("/upload", "/upload/x", "/upload-admin")}
    async with served(routes, keys, allow_clear_paths=["/upload"]) as (s, url):
        for path, status in (("/upload", 200), ("/upload/x", 200), ("/upload-admin", 415)):
            async with s.post(url + path, data=b"clear body") as r:
                assert r.status == status, path


async def test_the_socket_and_http_api_takes_typed_explicit_keywords() -> None:
    """No **options, no parameter typed Any, and every parameter callable by its name,
    across the public socket and HTTP callables."""
    import inspect
    import typing

    from streamcrypt import transports

    names = [
        "connect", "serve", "EncryptedListener", "EncryptedStream", "EncryptionMiddleware",
        "setup_encryption", "EncryptedStreamResponse", "encrypted_body", "decrypt_response",
    ]  # fmt: skip
    for name in names:
        obj = getattr(transports, name)
        functions = [obj] if not isinstance(obj, type) else [obj.__init__]
        if obj is transports.EncryptedStream:
            functions = [obj.wrap, obj.send, obj.receive, obj.send_eof, obj.aclose]
        for function in functions:
            signature = inspect.signature(function)
            for parameter in signature.parameters.values():
                assert parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)
                assert parameter.kind is not parameter.POSITIONAL_ONLY, (name, parameter)
            hints = typing.get_type_hints(function)
            hints.pop("return", None)
            assert all(hint is not Any for hint in hints.values()), (name, hints)


# -- the private aiohttp surface, each use confined to one function: its invariants ----


async def test_a_clone_with_another_body_reads_that_body() -> None:
    """_with_body sets the clone's private _payload (aiohttp offers no public way): every
    public body reader of the request must read it."""
    from aiohttp.test_utils import make_mocked_request

    from streamcrypt.transports._aiohttp import _with_body

    request = make_mocked_request(
        "POST", "/x", headers={"Content-Encoding": "aes128gcm", "Content-Length": "99"}
    )
    reader = aiohttp.StreamReader(request.protocol, 1 << 16, loop=asyncio.get_running_loop())
    reader.feed_data(b'{"plain": "text"}')
    reader.feed_eof()
    clone = _with_body(request, reader)  # type: ignore[arg-type]
    assert clone.content is reader and clone.can_read_body and clone.body_exists
    assert "Content-Encoding" not in clone.headers and "Content-Length" not in clone.headers
    assert await clone.json() == {"plain": "text"}


async def test_the_pull_control_is_connected_only_while_the_request_is() -> None:
    from streamcrypt.transports._aiohttp import _PullControl

    loop = asyncio.get_running_loop()
    assert not _PullControl(loop, None).connected
    connection = aiohttp.base_protocol.BaseProtocol(loop)
    control = _PullControl(loop, connection)
    assert not control.connected
    connection.transport = object()  # type: ignore[assignment]
    assert control.connected
    control.pause_reading()
    assert not control.room.is_set()
    control.resume_reading()
    assert control.room.is_set()


async def test_the_pump_never_outlives_the_handler_and_errors_come_out_whole() -> None:
    from streamcrypt.transports._aiohttp import _pumped

    ended: list[str] = []

    class Reader:
        async def pump(self) -> None:
            try:
                await asyncio.sleep(3600)
            finally:
                ended.append("pump")

    async def ok(request: Any) -> web.StreamResponse:
        return web.Response(text="ok")

    async def refusing(request: Any) -> web.StreamResponse:
        raise web.HTTPForbidden()

    resp = await _pumped(Reader(), ok, None)  # type: ignore[arg-type]
    assert isinstance(resp, web.Response) and ended == ["pump"]
    with pytest.raises(web.HTTPForbidden):  # itself, not an exception group
        await _pumped(Reader(), refusing, None)  # type: ignore[arg-type]
    assert ended == ["pump", "pump"]


# -- requests ---------------------------------------------------------------------------


def echo_routes(log: list[Any]) -> dict[str, Handler]:
    async def stream(request: web.Request) -> web.Response:
        log.append(dict(request.headers))
        h = hashlib.sha256()
        n = 0
        async for chunk in request.content.iter_chunked(5000):
            h.update(chunk)
            n += len(chunk)
            log.append(len(chunk))
        return web.Response(text=f"{n} {h.hexdigest()}")

    async def whole(request: web.Request) -> web.Response:
        data = await request.read()
        return web.Response(text=f"{len(data)} {hashlib.sha256(data).hexdigest()}")

    async def swallow(request: web.Request) -> web.Response:
        try:
            await request.read()
        except AuthenticationError:
            log.append("caught")
        return web.Response(text="all fine")

    return {"/echo": stream, "/whole": whole, "/swallow": swallow}


async def chunks_of(data: bytes, size: int) -> AsyncIterator[bytes]:
    for off in range(0, len(data), size):
        yield data[off : off + size]


def expect(data: bytes) -> str:
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}"


@pytest.mark.parametrize("route", ["/echo", "/whole"])
@pytest.mark.parametrize("record_size", [18, 4096, None])
async def test_encrypted_request_body(route: str, record_size: int | None) -> None:
    """Any record size up to the server's limit; the client's default fits the server's."""
    keys = ring("old")
    old = keys.active
    keys.add(SecretKey.generate(16, key_id="new"), activate=True)
    data = os.urandom(20_000 if record_size is not None and record_size < 100 else 1_000_000)
    log: list[Any] = []
    sizing = {} if record_size is None else {"record_size": record_size}
    body = encrypted_body(chunks_of(data, 33_333), old, keyid="old", **sizing)
    async with served(echo_routes(log), keys) as (s, url), s.post(url + route, data=body) as r:
        assert r.status == 200
        text = streamcrypt.decrypt_bytes(await raw(r), keys, format="ece").decode()
    assert text == expect(data)
    if route == "/echo":
        assert "Content-Encoding" not in log[0] and "Content-Length" not in log[0]


async def test_clear_request_bodies_and_other_codings_get_415() -> None:
    """Fail closed: a body in clear, or in any coding but aes128gcm alone, gets 415 before
    the handler (curl -d secret must not be answered 200); several Content-Encoding lines
    read as one; allowed paths pass in clear and the request says which it got."""
    keys = ring()
    log: list[Any] = []
    async with served(echo_routes(log), keys) as (s, url):
        async with s.post(url + "/whole", data=b"hello") as r:
            assert r.status == 415 and b"hello" not in await r.read()
        for coding in ("gzip", "x-custom", "aes128gcm, gzip"):
            body = gzip.compress(b"abc") if coding == "gzip" else b"abc"
            headers = {"Content-Encoding": coding}
            async with s.post(url + "/echo", data=body, headers=headers) as r:
                assert r.status == 415, coding
        lines = [("Content-Encoding", "aes128gcm"), ("Content-Encoding", "gzip")]
        async with s.post(url + "/echo", data=gzip.compress(b"abc"), headers=lines) as r:
            assert r.status == 415
        lines = [("Content-Encoding", "identity"), ("Content-Encoding", "aes128gcm")]
        async with s.post(
            url + "/whole", data=streamcrypt.encrypt_bytes(b"hi", keys, format="ece"), headers=lines
        ) as r:
            assert streamcrypt.decrypt_bytes(await raw(r), keys, format="ece").decode() == expect(
                b"hi"
            )
    assert all(not isinstance(entry, int) for entry in log)  # no clear body reached a handler

    seen: list[bool] = []

    async def flag(request: web.Request) -> web.Response:
        seen.append(request[BODY_DECRYPTED_KEY])
        return web.Response(body=await request.read())

    async with served({"/open": flag, "/shut": flag}, keys, allow_clear_paths=["/open"]) as (
        s,
        url,
    ):
        async with s.post(url + "/open", data=b"public") as r:
            assert streamcrypt.decrypt_bytes(await raw(r), keys, format="ece") == b"public"
        async with s.get(url + "/shut") as r:
            assert r.status == 200
        async with s.post(
            url + "/shut", data=streamcrypt.encrypt_bytes(b"x", keys, format="ece"), headers=AES
        ) as r:
            assert streamcrypt.decrypt_bytes(await raw(r), keys, format="ece") == b"x"
    assert seen == [False, False, True]


async def test_a_stalled_request_body_is_cut_with_408() -> None:
    keys = ring()
    body = streamcrypt.encrypt_bytes(b"x" * 20000, keys, format="ece")

    async def stalling() -> AsyncIterator[bytes]:
        yield body[:5000]
        await asyncio.sleep(3)
        yield body[5000:]

    async with served(echo_routes([]), keys, body_timeout=0.3) as (s, url):
        async with s.post(url + "/echo", data=stalling(), headers=AES) as r:
            assert r.status == 408


async def test_a_trickled_request_body_is_cut_by_its_minimum_rate() -> None:
    keys = ring()
    body = streamcrypt.encrypt_bytes(b"x" * 2000, keys, format="ece")

    async def trickling() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 40):
            yield body[i : i + 40]
            await asyncio.sleep(0.1)

    start = time.monotonic()
    async with served(echo_routes([]), keys, body_timeout=0.5, body_min_rate=2000) as (s, url):
        async with s.post(url + "/echo", data=trickling(), headers=AES) as r:
            assert r.status == 408
    assert time.monotonic() - start < 5  # the whole body would take 5.4 s


def tamper(keys: KeyRing) -> bytes:
    body = bytearray(streamcrypt.encrypt_bytes(b"p" * 9000, keys, format="ece"))
    body[5000] ^= 1
    return bytes(body)


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
    ("tampered", tamper, 400),
    ("truncated", lambda ks: streamcrypt.encrypt_bytes(b"p" * 9000, ks, format="ece")[:-4200], 400),
    ("empty", lambda ks: b"", 400),
    (
        "rs too large",
        lambda ks: streamcrypt.encrypt_bytes(
            b"p" * 10, ks, segment_size=(1 << 25) - OVERHEAD, format="ece"
        ),
        413,
    ),
]


@pytest.mark.parametrize(("name", "make", "status"), BAD, ids=[b[0] for b in BAD])
@pytest.mark.parametrize("route", ["/echo", "/whole", "/swallow"])
async def test_bad_request_bodies(
    name: str, make: Callable[[KeyRing], bytes], status: int, route: str
) -> None:
    keys = ring()
    log: list[Any] = []
    headers = {"Content-Encoding": "aes128gcm"}
    async with (
        served(echo_routes(log), keys) as (s, url),
        s.post(url + route, data=make(keys), headers=headers) as r,
    ):
        body = await raw(r)
        assert r.status == status
        assert r.headers["Content-Type"].startswith("text/plain")
    assert b"ppp" not in body and len(body) < 200
    assert sum(x for x in log if isinstance(x, int)) < 9000


async def test_decrypt_response_refuses_plain() -> None:
    async def plain(request: web.Request) -> web.Response:
        return web.Response(text="plain")

    async with served({"/p": plain}, None) as (s, url), s.get(url + "/p") as r:
        with pytest.raises(UnsupportedFormatError):
            async for _ in decrypt_response(r, ring()):
                pass


class _OneChunk:
    """What decrypt_response reads of a ClientResponse: its headers and one chunk of
    content (a chunked body's HTTP chunk can come as one large chunk)."""

    def __init__(self, body: bytes, *chunks: bytes) -> None:
        self.headers = CIMultiDict({"Content-Encoding": "aes128gcm"})
        self.content = self
        self._chunks = list(chunks) or [body]

    async def iter_chunks(self) -> AsyncIterator[tuple[bytes, bool]]:
        for chunk in self._chunks:
            yield chunk, True


@pytest.mark.parametrize("sized", [True, False])
async def test_decrypt_response_takes_the_chunks_as_aiohttp_received_them(
    sized: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """decrypt_response never reads with readany, which joins everything aiohttp has
    buffered into one new object: a copy of the whole body into fresh memory (issue 28)."""
    keys = ring()
    plaintext = os.urandom(3 << 20)

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = EncryptedStreamResponse()
        if sized:
            resp.content_length = len(plaintext)
        await resp.prepare(request)
        await resp.write(plaintext)
        await resp.write_eof()
        return resp

    async def no_readany(self: object) -> bytes:
        raise AssertionError("readany joins what was buffered")

    async with served({"/s": stream}, keys) as (s, url), s.get(url + "/s") as r:
        await asyncio.sleep(0.1)  # let aiohttp buffer several reads
        monkeypatch.setattr(aiohttp.StreamReader, "readany", no_readany)
        out = [c async for c in decrypt_response(r, keys)]
    assert b"".join(out) == plaintext


async def test_decrypt_response_opens_a_large_chunk_in_pieces_on_the_loop() -> None:
    """decrypt_response opens what aiohttp read in pieces of whole records under the
    inline limit, as the middlewares do, never as one batch for the workers (issue 28:
    on two cores that cost ~0.7 CPU-s/GB more and halved the download); a chunk's pieces
    come out in order, and a bad record fails after the records before it."""
    keys = ring()
    plaintext = os.urandom(3 << 20)
    body = streamcrypt.encrypt_bytes(plaintext, keys, format="ece", segment_size=65536 - 17)
    submitted: list[object] = []

    class Spy(concurrent.futures.ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            submitted.append(fn)
            return super().submit(fn, *args, **kwargs)

    with Spy(2) as executor:
        policy = OffloadPolicy(executor=executor, adaptive=False)  # offloads every batch
        response: Any = _OneChunk(body)
        out = [c async for c in decrypt_response(response, keys, policy=policy)]
        assert b"".join(out) == plaintext
        # Only the header's reading went to a worker (the engine reads every header there).
        assert [getattr(fn, "__name__", fn) for fn in submitted] == ["feed"]
        assert max(map(len, out)) < 256 << 10  # pieces, not the whole chunk
        bad = bytearray(body)
        bad[len(body) // 2] ^= 1
        got = bytearray()
        with pytest.raises(AuthenticationError):
            async for chunk in decrypt_response(_OneChunk(bytes(bad)), keys, policy=policy):  # type: ignore[arg-type]
                got += chunk
        assert 0 < len(got) < len(body) // 2 and plaintext.startswith(got)


async def test_setup_checks_settings() -> None:
    with pytest.raises(InvalidParameterError):
        setup_encryption(web.Application(), key=ring(), record_size=5)
    with pytest.raises(InvalidParameterError):
        setup_encryption(web.Application(), key=ring(), on_unencryptable="pass")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        setup_encryption(web.Application(), key=KeyRing([SecretKey.generate(32, key_id="a")]))


# -- large bodies, bounded memory --------------------------------------------------------


def _reset_peak() -> int:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status("VmRSS")


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(field)


async def test_32_mib_each_way_bounded_memory() -> None:
    keys = ring()
    size = 32 << 20
    policy = OffloadPolicy(batch_size=256 << 10, inline_limit=128 << 10, adaptive=False)
    seed = os.urandom(1 << 20)
    count = {"n": size >> 20}

    async def gen() -> AsyncIterator[bytes]:
        for i in range(count["n"]):
            yield i.to_bytes(8, "big") + seed[8:]

    async def down(request: web.Request) -> web.StreamResponse:
        resp = EncryptedStreamResponse(policy=policy)
        await resp.prepare(request)
        async for block in gen():
            await resp.write(block)
        await resp.write_eof()
        return resp

    async def up(request: web.Request) -> web.Response:
        h = hashlib.sha256()
        n = 0
        async for chunk in request.content.iter_any():
            h.update(chunk)
            n += len(chunk)
        return web.Response(text=f"{n} {h.hexdigest()}")

    expected = hashlib.sha256()
    for i in range(count["n"]):
        expected.update(i.to_bytes(8, "big") + seed[8:])

    async def roundtrip(s: aiohttp.ClientSession, url: str) -> tuple[int, bytes, str]:
        got = hashlib.sha256()
        n = 0
        async with s.get(url + "/down") as r:
            async for chunk in decrypt_response(r, keys, policy=policy):
                got.update(chunk)
                n += len(chunk)
        body = encrypted_body(gen(), keys, policy=policy, record_size=65536)
        async with s.post(url + "/up", data=body) as r:
            answer = streamcrypt.decrypt_bytes(await raw(r), keys, format="ece").decode()
        return n, got.digest(), answer

    async with served({"/down": down, "/up": up}, keys, policy=policy) as (s, url):
        count["n"] = 4  # warm-up round
        await roundtrip(s, url)
        count["n"] = size >> 20
        base = _reset_peak()
        n, digest, answer = await roundtrip(s, url)
        growth = _status("VmHWM") - base
    assert n == size and digest == expected.digest()
    assert answer == f"{size} {expected.hexdigest()}"
    assert growth < 16 << 20, f"peak RSS grew by {growth >> 20} MiB"


async def test_bad_body_after_the_response_started_aborts() -> None:
    """A handler that streams its answer before reading a bad body: the answer cannot be
    replaced any more, so the connection is aborted and the client never gets a
    complete (authenticated) response."""
    keys = ring()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = EncryptedStreamResponse(policy=None)
        await resp.prepare(request)
        await resp.write(b"started " * 1000)
        data = await request.read()
        await resp.write(data)
        await resp.write_eof()
        return resp

    headers = {"Content-Encoding": "aes128gcm"}
    async with served({"/h": handler}, keys) as (s, url):
        with pytest.raises(aiohttp.ClientPayloadError):
            async with s.post(url + "/h", data=tamper(keys), headers=headers) as r:
                assert r.status == 200
                async for _ in decrypt_response(r, keys, policy=None):
                    pass


async def test_the_handler_reads_each_piece_alone_when_the_body_is_already_there() -> None:
    # The pump gives the handler a turn before it decrypts ciphertext that was already
    # there, so a handler's readany takes each piece's plaintext as it came (at most two
    # 64 KiB records), never several pieces joined into a new object (a copy). A read
    # that waits gives it that turn anyway (issue 28: no turn of the loop for it then).
    from aiohttp.test_utils import make_mocked_request

    from streamcrypt.transports._aiohttp import _DecryptingReader, _pumped
    from streamcrypt.transports._http import EncryptionSettings

    keys = ring()
    plain = os.urandom(1 << 20)
    body = streamcrypt.encrypt_bytes(plain, keys, format="ece", segment_size=(1 << 16) - 17)
    request = make_mocked_request("POST", "/", headers={"Content-Encoding": "aes128gcm"})
    source = aiohttp.StreamReader(request.protocol, 1 << 22, loop=asyncio.get_running_loop())

    async def arriving() -> None:  # a chunk each turn of the loop: there when it is read
        for off in range(0, len(body), 200_000):
            source.feed_data(body[off : off + 200_000])
            await asyncio.sleep(0)
        source.feed_eof()

    request._payload = source  # the mocked request's body (no public setter)
    reader = _DecryptingReader(request, EncryptionSettings(key=keys))
    sizes: list[int] = []

    async def handler(_: web.Request) -> web.StreamResponse:
        while chunk := await reader.readany():
            sizes.append(len(chunk))
        return web.Response()

    client = asyncio.ensure_future(arriving())
    await _pumped(reader, handler, request)
    await client
    assert sum(sizes) == len(plain)
    assert max(sizes) <= 2 * ((1 << 16) - 17)
