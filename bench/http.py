"""HTTP bodies: the RFC 8188 codec against http_ece, and encrypted against plain response
throughput through uvicorn + httpx and through aiohttp (server in its own thread and
event loop, client in this one, both on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import aiohttp
import http_ece
import httpx
import uvicorn
from aiohttp import web

from streamcrypt.codecs.ece import EceDecryptor, decrypt_bytes, encrypt_bytes
from streamcrypt.engine import DEFAULT_POLICY, OffloadPolicy, pipeline
from streamcrypt.keys import KeyRing, SecretKey
from streamcrypt.transports import EncryptionMiddleware
from streamcrypt.transports._aiohttp import (
    EncryptedStreamResponse,
    decrypt_response,
    setup_encryption,
)

from ._report import Report, gbps, median_time

BLOCK = 1 << 20


def _codec(report: Report, quick: bool) -> None:
    t = report.table(
        "RFC 8188 aes128gcm: streamcrypt codec vs http_ece (same body, one thread)",
        ["op", "record size", "body", "streamcrypt GB/s", "http_ece GB/s", "ratio"],
    )
    key = os.urandom(16)
    salt = os.urandom(16)
    repeat = 3 if quick else 5
    for rs in (4096, 65536):
        size = (1 << 20) if quick else (4 << 20)
        body = os.urandom(size)
        ours = encrypt_bytes(body, key, salt=salt, record_size=rs)
        theirs = http_ece.encrypt(body, salt=salt, key=key, rs=rs, version="aes128gcm")
        assert ours == theirs and decrypt_bytes(theirs, key) == body
        enc_ours = median_time(lambda: encrypt_bytes(body, key, salt=salt, record_size=rs), repeat)
        enc_ref = median_time(
            lambda: http_ece.encrypt(body, salt=salt, key=key, rs=rs, version="aes128gcm"), repeat
        )
        dec_ours = median_time(lambda: decrypt_bytes(ours, key), repeat)
        dec_ref = median_time(lambda: http_ece.decrypt(ours, key=key, version="aes128gcm"), repeat)
        label = f"{size >> 20} MiB"
        t.add("encrypt", rs, label, gbps(size, enc_ours), gbps(size, enc_ref), enc_ref / enc_ours)
        t.add("decrypt", rs, label, gbps(size, dec_ours), gbps(size, dec_ref), dec_ref / dec_ours)
    t.notes.append("ratio = http_ece time / streamcrypt time (higher is better for streamcrypt)")
    t.notes.append("byte-identical output checked for each record size (same key and salt)")
    t.notes.append(
        "http_ece slices the whole body per record, so its time grows faster than the body: "
        "bodies of a few MiB keep the comparison short; the ratio widens with size"
    )


# -- servers in their own thread ---------------------------------------------------------


class _Uvicorn:
    def __init__(self, app: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(
            app, log_level="error", lifespan="off", ws="none", access_log=False, loop="asyncio"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


class _Aiohttp:
    def __init__(self, make_app: Callable[[], web.Application]) -> None:
        self.make_app = make_app
        self.loop = asyncio.new_event_loop()
        self.runner: web.AppRunner | None = None
        self.ready = threading.Event()
        self.url = ""
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.runner = web.AppRunner(self.make_app(), access_log=None)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        host, port = self.runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        self.ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.runner.cleanup())
        self.loop.close()

    def __enter__(self) -> str:
        self.thread.start()
        if not self.ready.wait(10):
            raise RuntimeError("aiohttp did not start")
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


# -- apps ------------------------------------------------------------------------------


def _asgi_app(size: int) -> Any:
    block = os.urandom(BLOCK)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        headers = [(b"content-length", str(size).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for _ in range(size // BLOCK):
            await send({"type": "http.response.body", "body": block, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def _aiohttp_app(
    size: int, keys: KeyRing | None, record_size: int, policy: OffloadPolicy | None
) -> web.Application:
    block = os.urandom(BLOCK)

    async def handler(request: web.Request) -> web.StreamResponse:
        resp: web.StreamResponse
        if keys is None:
            resp = web.StreamResponse()
        else:
            resp = EncryptedStreamResponse(record_size=record_size, policy=policy)
        resp.content_length = size
        await resp.prepare(request)
        for _ in range(size // BLOCK):
            await resp.write(block)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/", handler)
    if keys is not None:
        setup_encryption(app, keys=keys, record_size=record_size)
    return app


# -- clients ---------------------------------------------------------------------------


async def _count(chunks: AsyncIterator[bytes]) -> int:
    n = 0
    async for chunk in chunks:
        n += len(chunk)
    return n


async def _httpx_get(
    client: httpx.AsyncClient, keys: KeyRing | None, policy: OffloadPolicy | None
) -> int:
    async with client.stream("GET", "/") as r:
        if keys is None:
            return await _count(r.aiter_raw())
        return await _count(pipeline(EceDecryptor(keys), policy=policy).stream(r.aiter_raw()))


async def _aiohttp_get(
    session: aiohttp.ClientSession, url: str, keys: KeyRing | None, policy: OffloadPolicy | None
) -> int:
    async with session.get(url) as r:
        if keys is None:
            return await _count(r.content.iter_any())
        return await _count(decrypt_response(r, keys, policy=policy))


def _timed(
    loop: asyncio.AbstractEventLoop, make: Callable[[], Coroutine[Any, Any, int]], size: int, n: int
) -> float:
    def once() -> None:
        got = loop.run_until_complete(make())
        assert got == size, (got, size)

    return median_time(once, repeat=n)


#: Policies compared: the engine default (8 MiB batches offloaded, 3 in flight) and
#: 1 MiB batches kept on the event loop (each step blocks the loop for ~1 MiB of work).
POLICIES: dict[str, OffloadPolicy | None] = {
    "default": DEFAULT_POLICY,
    "1 MiB inline": OffloadPolicy(batch_size=1 << 20, inline_limit=2 << 20),
}


def _uvicorn_time(
    loop: asyncio.AbstractEventLoop, app: Any, keys: KeyRing | None, policy: Any, size: int, n: int
) -> float:
    with _Uvicorn(app) as url:
        client = httpx.AsyncClient(base_url=url, timeout=120)
        try:
            return _timed(loop, lambda: _httpx_get(client, keys, policy), size, n)
        finally:
            loop.run_until_complete(client.aclose())


def _aiohttp_time(
    loop: asyncio.AbstractEventLoop,
    make: Callable[[], web.Application],
    keys: KeyRing | None,
    policy: Any,
    size: int,
    n: int,
) -> float:
    with _Aiohttp(make) as url:
        session = loop.run_until_complete(_session())
        try:
            return _timed(loop, lambda: _aiohttp_get(session, url, keys, policy), size, n)
        finally:
            loop.run_until_complete(session.close())


def _throughput(report: Report, quick: bool) -> None:
    t = report.table(
        "HTTP responses: encrypted (RFC 8188) vs plain throughput, 127.0.0.1",
        ["stack", "record size", "policy", "body", "plain GB/s", "encrypted GB/s", "ratio"],
    )
    size = (16 if quick else 64) << 20
    repeat = 3 if quick else 5
    keys = KeyRing([SecretKey.generate(16, key_id="bench")])
    loop = asyncio.new_event_loop()
    body = f"{size >> 20} MiB"
    try:
        for rs in (4096, 65536):
            plain = _uvicorn_time(loop, _asgi_app(size), None, None, size, repeat)
            for name, policy in POLICIES.items():
                app = EncryptionMiddleware(
                    _asgi_app(size), keys=keys, record_size=rs, policy=policy
                )
                enc = _uvicorn_time(loop, app, keys, policy, size, repeat)
                t.add(
                    "uvicorn + httpx",
                    rs,
                    name,
                    body,
                    gbps(size, plain),
                    gbps(size, enc),
                    plain / enc,
                )
            plain = _aiohttp_time(
                loop, lambda: _aiohttp_app(size, None, rs, None), None, None, size, repeat
            )
            for name, policy in POLICIES.items():
                enc = _aiohttp_time(
                    loop,
                    lambda p=policy: _aiohttp_app(size, keys, rs, p),  # type: ignore[misc]
                    keys,
                    policy,
                    size,
                    repeat,
                )
                t.add("aiohttp", rs, name, body, gbps(size, plain), gbps(size, enc), plain / enc)
    finally:
        loop.close()
    t.notes.append(
        "ratio = encrypted GB/s / plain GB/s (target >= 0.7 at 64 MiB). Encrypted: the server "
        "encrypts as it streams 1 MiB writes, the client decrypts as it reads (same policy); "
        "Content-Length set on both (exact encrypted length)"
    )
    t.notes.append(
        "server in its own thread and event loop, client in this one: one process, one GIL, "
        "2 cores shared with the offload workers; medians of repeated downloads"
    )


async def _session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(auto_decompress=False)


def run(report: Report, quick: bool) -> None:
    _codec(report, quick)
    _throughput(report, quick)
