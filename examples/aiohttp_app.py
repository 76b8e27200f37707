"""An aiohttp app whose HTTP bodies travel encrypted (RFC 8188 ``aes128gcm``).

Run the server, then make an encrypted request::

    python examples/encrypt_file.py keygen http.key      # or: streamcrypt keygen -o http.key
    python examples/aiohttp_app.py serve --key http.key --port 8080
    python examples/aiohttp_app.py request http://127.0.0.1:8080/echo --key http.key --data hi

:func:`~streamcrypt.transports.setup_encryption` installs the middleware: request bodies
sent with ``Content-Encoding: aes128gcm`` reach the handlers decrypted as they stream in,
whole ``web.Response`` bodies leave encrypted with an exact ``Content-Length``, and a
handler that streams uses :class:`~streamcrypt.transports.EncryptedStreamResponse`
(aiohttp writes a streamed body while the handler runs, so it is encrypted as written).
Anything that would leave in clear on a selected path is refused with 500. ``/health`` is
excluded and stays plain. The client side uses ``encrypted_body`` (a request payload
encrypted as it is sent) and ``decrypt_response`` (verified plaintext, record by record).
The 16-byte key is derived from the 32-byte key file with HKDF, as in asgi_app.py, so
the two apps and their clients are interchangeable.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncIterator, Sequence

import aiohttp
from aiohttp import web

from streamcrypt.errors import StreamCryptError
from streamcrypt.keys import KeyRing, SecretKey, hkdf
from streamcrypt.transports import (
    EncryptedStreamResponse,
    decrypt_response,
    encrypted_body,
    setup_encryption,
)

__all__ = ["create_app", "http_keys", "main", "request"]

KEY_ID = "example-1"


def http_keys(path: str | os.PathLike[str]) -> KeyRing:
    """A KeyRing with the 16-byte aes128gcm key derived from a symmetric key file."""
    raw = SecretKey.from_file(path).secret_bytes()
    key = hkdf(raw, info=b"streamcrypt example http aes128gcm", length=16)
    return KeyRing([SecretKey(key, key_id=KEY_ID)])


# -- the app -----------------------------------------------------------------------------------


async def hello(request: web.Request) -> web.Response:
    return web.Response(text="hello, encrypted world\n")


async def echo(request: web.Request) -> web.Response:
    body = await request.read()  # decrypted and verified by the middleware
    return web.Response(body=body, content_type=request.content_type)


async def count(request: web.Request) -> web.StreamResponse:
    """A streamed body, encrypted as it is written."""
    n = int(request.query.get("n", "1000"))
    response = EncryptedStreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    for i in range(n):
        await response.write(f"line {i}\n".encode())
    await response.write_eof()
    return response


async def health(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


def create_app(ring: KeyRing) -> web.Application:
    """The application, with encryption set up on every path but ``/health``."""
    app = web.Application()
    app.router.add_get("/hello", hello)
    app.router.add_post("/echo", echo)
    app.router.add_get("/count", count)
    app.router.add_get("/health", health)
    setup_encryption(app, key=ring, exclude_paths=["/health"])
    return app


# -- a client ----------------------------------------------------------------------------------


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def request(url: str, ring: KeyRing, data: bytes | None = None) -> tuple[int, bytes]:
    """GET ``url`` (or POST ``data`` encrypted); returns the status and decrypted body.

    Raises :class:`AuthenticationError` if the response body does not verify.
    """
    async with aiohttp.ClientSession() as session:
        if data is None:
            response = await session.get(url)
        else:
            response = await session.post(url, data=encrypted_body(_once(data), ring))
        async with response:
            if response.headers.get("Content-Encoding") == "aes128gcm":
                body = b"".join([chunk async for chunk in decrypt_response(response, ring)])
            else:
                body = await response.read()  # e.g. /health, excluded
            return response.status, body


def main(argv: Sequence[str] | None = None) -> int:
    """``serve`` or ``request`` (one encrypted request); returns the exit status."""
    parser = argparse.ArgumentParser(prog="aiohttp_app.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve", help="run the app")
    p.add_argument("--key", required=True, help="key file (streamcrypt keygen)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p = sub.add_parser("request", help="make one encrypted request and print the answer")
    p.add_argument("url")
    p.add_argument("--key", required=True, help="key file (streamcrypt keygen)")
    p.add_argument("--data", help="POST this text (encrypted) instead of a GET")
    args = parser.parse_args(argv)
    try:
        ring = http_keys(args.key)
        if args.command == "serve":
            web.run_app(create_app(ring), host=args.host, port=args.port)
            return 0
        import asyncio

        data = None if args.data is None else args.data.encode()
        status, body = asyncio.run(request(args.url, ring, data))
    except (StreamCryptError, OSError, aiohttp.ClientError) as exc:
        print(f"aiohttp_app.py: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"{status}: {body.decode(errors='replace')}", end="")
    return 0 if status < 400 else 1


if __name__ == "__main__":
    sys.exit(main())
