"""A Starlette app whose HTTP bodies travel encrypted (RFC 8188 ``aes128gcm``).

Run the server, then make an encrypted request::

    python examples/encrypt_file.py keygen http.key      # or: streamcrypt keygen -o http.key
    python examples/asgi_app.py serve --key http.key --port 8000
    python examples/asgi_app.py request http://127.0.0.1:8000/echo --key http.key --data hi

or under uvicorn's own command line (the key file named in the environment)::

    STREAMCRYPT_KEY_FILE=http.key uvicorn --factory asgi_app:app_from_env --app-dir examples

:class:`~streamcrypt.transports.EncryptionMiddleware` wraps the whole app: a request body
sent with ``Content-Encoding: aes128gcm`` reaches the handlers decrypted (a body that does
not verify gets 400 before the handler sees a byte of it), and every response body on the
selected paths leaves encrypted, streamed ones included. ``/health`` is excluded and stays
plain, to show the path filter. Both sides derive the 16-byte ``aes128gcm`` key from the
shared 32-byte key file with HKDF; the key id travels in each body's header.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncIterator, Sequence

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

import streamcrypt
from streamcrypt.codecs.ece import CONTENT_ENCODING
from streamcrypt.errors import InvalidParameterError, StreamCryptError
from streamcrypt.keys import KeyRing, SecretKey, hkdf
from streamcrypt.transports import EncryptionMiddleware

__all__ = ["app_from_env", "create_app", "http_keys", "main", "request"]

KEY_ID = "example-1"


def http_keys(path: str | os.PathLike[str]) -> KeyRing:
    """A KeyRing with the 16-byte aes128gcm key derived from a symmetric key file."""
    raw = SecretKey.from_file(path).secret_bytes()
    key = hkdf(raw, info=b"streamcrypt example http aes128gcm", length=16)
    return KeyRing([SecretKey(key, key_id=KEY_ID)])


# -- the app -----------------------------------------------------------------------------------


async def hello(request: Request) -> Response:
    return PlainTextResponse("hello, encrypted world\n")


async def echo(request: Request) -> Response:
    body = await request.body()  # already decrypted and verified by the middleware
    return Response(body, media_type=request.headers.get("content-type", "text/plain"))


async def count(request: Request) -> Response:
    """A streamed body: encrypted record by record as it is produced."""
    n = int(request.query_params.get("n", "1000"))

    async def lines() -> AsyncIterator[bytes]:
        for i in range(n):
            yield f"line {i}\n".encode()

    return StreamingResponse(lines(), media_type="text/plain")


async def health(request: Request) -> Response:
    return PlainTextResponse("ok\n")


def create_app(ring: KeyRing) -> EncryptionMiddleware:
    """The Starlette app wrapped in the encryption middleware (an ASGI app)."""
    routes = [
        Route("/hello", hello),
        Route("/echo", echo, methods=["POST"]),
        Route("/count", count),
        Route("/health", health),
    ]
    return EncryptionMiddleware(Starlette(routes=routes), key=ring, exclude_paths=["/health"])


def app_from_env() -> EncryptionMiddleware:
    """Factory for ``uvicorn --factory``: the key file is ``$STREAMCRYPT_KEY_FILE``."""
    path = os.environ.get("STREAMCRYPT_KEY_FILE")
    if not path:
        raise InvalidParameterError("set STREAMCRYPT_KEY_FILE to a key file (streamcrypt keygen)")
    return create_app(http_keys(path))


# -- a client ----------------------------------------------------------------------------------


async def request(url: str, ring: KeyRing, data: bytes | None = None) -> tuple[int, bytes]:
    """GET ``url`` (or POST ``data`` encrypted); returns the status and decrypted body.

    Raises :class:`AuthenticationError` if the response body does not verify.
    """
    async with httpx.AsyncClient(timeout=30) as client:
        if data is None:
            response = await client.get(url)
        else:
            body = streamcrypt.encrypt_bytes(data, ring, keyid=KEY_ID, format="ece")
            headers = {"Content-Encoding": CONTENT_ENCODING}
            response = await client.post(url, content=body, headers=headers)
    if response.headers.get("content-encoding") == CONTENT_ENCODING:
        return response.status_code, streamcrypt.decrypt_bytes(response.content, ring, format="ece")
    return response.status_code, response.content  # e.g. /health, excluded


def main(argv: Sequence[str] | None = None) -> int:
    """``serve`` (uvicorn) or ``request`` (one encrypted request); returns the exit status."""
    parser = argparse.ArgumentParser(prog="asgi_app.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve", help="run the app under uvicorn")
    p.add_argument("--key", required=True, help="key file (streamcrypt keygen)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p = sub.add_parser("request", help="make one encrypted request and print the answer")
    p.add_argument("url")
    p.add_argument("--key", required=True, help="key file (streamcrypt keygen)")
    p.add_argument("--data", help="POST this text (encrypted) instead of a GET")
    args = parser.parse_args(argv)
    try:
        ring = http_keys(args.key)
        if args.command == "serve":
            import uvicorn

            uvicorn.run(create_app(ring), host=args.host, port=args.port)
            return 0
        data = None if args.data is None else args.data.encode()
        status, body = anyio.run(request, args.url, ring, data)
    except (StreamCryptError, OSError, httpx.HTTPError) as exc:
        print(f"asgi_app.py: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"{status}: {body.decode(errors='replace')}", end="")
    return 0 if status < 400 else 1


if __name__ == "__main__":
    sys.exit(main())
