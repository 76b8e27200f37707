"""ASGI middleware: RFC 8188 (``aes128gcm``) encryption of HTTP bodies, pure ASGI.

Theory of operation
-------------------
The middleware follows the skeleton of Starlette's ``GZipMiddleware``: for every HTTP
request it picks, a per-request responder wraps ``send`` and ``receive``.

Responses: ``http.response.start`` is held until the first body message, since only then
is it known whether the whole body arrived at once. A body in one message is encrypted
whole and sent with the exact ``Content-Length`` (:func:`encrypted_length`); a streamed
body goes through a pipeline feeder in pieces of whole records (:class:`~._http.BodyFeed`),
each piece's ciphertext one body message, so memory stays bounded by a piece, never by
the body; ``Content-Length`` is
then fixed from the app's own one when it gave one, else dropped. ``Content-Encoding:
aes128gcm`` and ``Vary: Content-Encoding`` are added and the final message is always
sent after the encryptor finalized. Where a gzip middleware fails open (a
``http.response.pathsend`` file send, a ranged 206 answer, a body that already carries a
``Content-Encoding``) this one fails closed: it encrypts the body anyway (the file is
read and sent as encrypted body messages; an encoded body becomes ``<coding>,
aes128gcm``; a 206 part is encrypted as a body of its own) or, with
``on_unencryptable="refuse"``, answers 500 instead. A body message of an extension this
middleware does not know (``http.response.zerocopysend``) is always refused. Nothing the
app sends after the response was replaced reaches the client.

Requests fail closed (:meth:`EncryptionSettings.request_rule`): a body with
``Content-Encoding: aes128gcm`` (every header line read, as RFC 9110 says) is decrypted
as it streams in: ``receive`` is wrapped, ciphertext goes through a decrypting feeder,
and the app gets only plaintext whose record verified; ``more_body: False`` comes only
after the whole body authenticated (truncation included). The app's scope loses the
request's ``Content-Encoding`` and ``Content-Length`` (they describe the ciphertext). A
body that stalls or trickles past its deadline (:class:`~._http.BodyDeadline`) fails with 408. When the body fails, the
app's ``receive`` raises the typed error and the client gets the error's
``http_status`` (400, 408, 413) with a short message, if no response had started; if one
had, the exception goes on to the server, which aborts the connection. Any other request
that announces a body gets 415 before the app runs, unless its path or method is allowed
in clear; a request judged bodiless whose body comes anyway gets the same 415 from its
``receive``. ``scope["streamcrypt.body_decrypted"]`` tells the app which it got.

Keys come from a :class:`KeyRing` of 16-byte keys: the active key encrypts and its id is
written into the header; a request body is decrypted with the key its header names.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Literal, TypeAlias, cast

import anyio

from ..abc import Buffer
from ..codecs.ece import EceEncryptor, encrypted_length
from ..engine import DEFAULT_POLICY, OffloadPolicy
from ..errors import PeerTimeoutError, StreamCryptError, UnsupportedFormatError
from ..keys import HoldsSecrets, KeyRing
from ._config import config_of
from ._http import (
    DEFAULT_BODY_MIN_RATE,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HTTP_RECORD_SIZE,
    DEFAULT_REQUEST_MAX_RECORD_SIZE,
    Answer,
    BodyFeed,
    EncryptionSettings,
    RequestRule,
    Unencryptable,
    announces_body,
    bodyless_status,
    content_codings,
    encoded_headers,
    encrypt_whole,
    encrypted_feed,
    failure_text,
    refusal,
    send_file,
    short_answer,
    unencryptable,
)

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]
#: What to do with a response a gzip middleware would pass through untouched.
_Headers: TypeAlias = list[tuple[bytes, bytes]]

_log = logging.getLogger("streamcrypt.transports.asgi")
#: Response messages that carry no body bytes: passed through as they are.
_HEADERS_ONLY = {"http.response.trailers", "http.response.early_hint"}


def _get(headers: _Headers, name: bytes) -> bytes | None:
    for key, value in headers:
        if key.lower() == name:
            return value
    return None


def _without(headers: _Headers, *names: bytes) -> _Headers:
    return [(k, v) for k, v in headers if k.lower() not in names]


def _codings(headers: _Headers) -> list[str]:
    """Every Content-Encoding line's codings (RFC 9110: lines combine like commas)."""
    return content_codings(v for k, v in headers if k.lower() == b"content-encoding")


async def _send_answer(send: Send, answer: Answer) -> None:
    """Send one of the middleware's own answers (:func:`short_answer`, the browser module)."""
    status, headers, body = answer
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


#: The scope key saying whether the app's request body was decrypted (True) or came in
#: clear (False: no body, an allowed path or method, or decrypt_requests=False).
BODY_DECRYPTED = "streamcrypt.body_decrypted"


class EncryptionMiddleware(HoldsSecrets):
    """Encrypt response bodies and decrypt request bodies with RFC 8188 ``aes128gcm``.

    Options (keywords): ``key`` (required: a :class:`KeyRing` of 16-byte keys; the
    active one encrypts, a request body is decrypted with the key its header names);
    ``record_size`` of the responses; ``include_paths`` (``None``: all) and
    ``exclude_paths``: which requests are handled, a rule covering its path and what is
    below it (``"/health"`` covers ``/health/live``, never ``/healthcare``);
    ``content_types`` encrypted (``"text/*"`` works; ``None``: all);
    ``on_unencryptable``: ``"encrypt"`` or ``"refuse"`` (500) file sends, 206 answers
    and already-encoded bodies; ``decrypt_requests`` (``False``: request bodies pass in
    clear); ``allow_clear_paths`` / ``allow_clear_methods`` whose request bodies may
    come in clear; ``max_record_size`` a request may announce (413 above it);
    ``body_timeout`` and ``body_min_rate`` (408: a body gets ``body_timeout`` seconds
    plus one per ``body_min_rate`` bytes, and no wait longer than ``body_timeout``);
    ``policy``: the offload policy of the pipelines; ``serve_browser_module``: a path
    (e.g. ``"/streamcrypt/ece.js"``) where the browser module is served (docs/browser.md;
    ``None``: not served). Requests fail closed: a
    request that announces a body not encrypted with ``aes128gcm`` gets 415 before the app
    runs, unless its path or method is in ``allow_clear_paths`` / ``allow_clear_methods``;
    the scope's :data:`BODY_DECRYPTED` key says whether the app's body was decrypted.
    Raises :class:`InvalidParameterError` for bad settings; see the module docstring for
    the HTTP answers.

    Wrap any ASGI app, or add it to Starlette/FastAPI as
    ``Middleware(EncryptionMiddleware, key=ring)``; ``ring`` holds 16-byte keys, e.g.
    ``KeyRing([SecretKey.generate(16, key_id="2026-12")])``.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        key: KeyRing,
        record_size: int = DEFAULT_HTTP_RECORD_SIZE,
        include_paths: Iterable[str] | None = None,
        exclude_paths: Iterable[str] = (),
        content_types: Iterable[str] | None = None,
        on_unencryptable: Unencryptable = "encrypt",
        decrypt_requests: bool = True,
        allow_clear_paths: Iterable[str] = (),
        allow_clear_methods: Iterable[str] = (),
        max_record_size: int = DEFAULT_REQUEST_MAX_RECORD_SIZE,
        body_timeout: float | None = DEFAULT_BODY_TIMEOUT,
        body_min_rate: float | None = DEFAULT_BODY_MIN_RATE,
        policy: OffloadPolicy | None = DEFAULT_POLICY,
        serve_browser_module: str | None = None,
    ) -> None:
        self.app = app
        self.settings = config_of(EncryptionSettings, locals())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (
            module := self.settings.browser_module(scope["method"], scope.get("path", ""))
        ):
            await _send_answer(send, module)
            return
        if scope["type"] != "http" or not self.settings.selects(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        await _Responder(self, scope, receive, send).run()


def _body_size(message: Message) -> int:
    return len(message.get("body", b""))


class _DecryptingReceive:
    """Wraps ``receive``: ciphertext in, verified plaintext out as ``http.request``."""

    def __init__(self, receive: Receive, mw: EncryptionMiddleware) -> None:
        self._receive = receive
        self._ready: deque[bytes] = deque()
        self._feed, self.deadline = mw.settings.request_body(self._collect)
        self._complete = False  # the whole body authenticated
        self._final_given = False
        self.error: StreamCryptError | None = None

    async def _collect(self, plaintext: Buffer) -> None:
        self._ready.append(cast(bytes, plaintext))  # a kept feeder's sink gets bytes

    async def __call__(self) -> Message:
        if self.error is not None:
            raise self.error
        while not self._ready and not self._complete:
            try:
                message = await self.deadline.read(self._receive, _body_size)
            except PeerTimeoutError as exc:
                self.error = exc
                raise
            if message["type"] != "http.request":
                return message  # http.disconnect: the client is gone
            try:
                # Verified records reach the app as the client sends them.
                await self._feed.send(message.get("body", b""))
                if not message.get("more_body", False):
                    await self._feed.aclose()
                    self._complete = True
            except StreamCryptError as exc:
                self._ready.clear()
                self.error = exc
                raise
        if self._ready:
            body = self._ready.popleft()
            more = bool(self._ready) or not self._complete
            self._final_given = not more
            return {"type": "http.request", "body": body, "more_body": more}
        if not self._final_given:
            self._final_given = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return await self._receive()  # after the body: wait for the disconnect


class _ClearGuard:
    """Wraps ``receive`` of a request judged bodiless: body bytes raise, never reach the app."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self.error: StreamCryptError | None = None

    async def __call__(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request" and message.get("body"):
            self.error = UnsupportedFormatError(
                "the request sent a body in clear; this server accepts request bodies "
                "in the aes128gcm content coding only"
            )
            raise self.error
        return message


class _Responder:
    """One request: wraps ``send`` (and ``receive`` when the body is encrypted)."""

    def __init__(
        self, mw: EncryptionMiddleware, scope: Scope, receive: Receive, send: Send
    ) -> None:
        self.mw = mw
        self.scope = scope
        self.receive = receive
        self.send = send
        self.decrypting: _DecryptingReceive | None = None
        self.start: Message | None = None  # held http.response.start
        self.started = False  # something went to the client
        self.mode: Literal["pending", "encrypt", "plain", "swallow", "done"] = "pending"
        self.feed: BodyFeed | None = None
        self.head = scope.get("method") == "HEAD"

    # -- request side -----------------------------------------------------------------

    async def run(self) -> None:
        headers: _Headers = list(self.scope.get("headers", []))
        scope = dict(self.scope)
        method = str(scope.get("method", "GET"))
        path = str(scope.get("path", ""))
        has_body = announces_body(
            method,
            _get(headers, b"content-length"),
            _get(headers, b"transfer-encoding") is not None,
        )
        settings = self.mw.settings
        rule = settings.request_rule(method, path, _codings(headers), has_body)
        if rule is RequestRule.REFUSE:
            await self._answer_error(UnsupportedFormatError("request body not in aes128gcm"))
            return
        wrapped: _DecryptingReceive | _ClearGuard | None = None
        if rule is RequestRule.DECRYPT:
            wrapped = self.decrypting = _DecryptingReceive(self.receive, self.mw)
            scope["headers"] = _without(headers, b"content-encoding", b"content-length")
        elif settings.decrypt_requests and not settings.clear_allowed(method, path):
            # Judged bodiless: any body byte that comes anyway is refused, never handed over.
            wrapped = _ClearGuard(self.receive)
        scope[BODY_DECRYPTED] = rule is RequestRule.DECRYPT
        try:
            await self.mw.app(scope, wrapped or self.receive, self._send)
        except StreamCryptError as exc:
            if wrapped is None or exc is not wrapped.error:
                raise
            if self.mode == "swallow":
                return  # an error answer went out already
            if self.started:
                raise  # the response is under way: let the server abort the connection
            await self._answer_error(exc)
        finally:
            if self.decrypting is not None:
                self.decrypting.deadline.close()  # its timer, however the app left

    async def _answer_error(self, exc: StreamCryptError) -> None:
        await self._answer(*failure_text(exc))

    async def _answer(self, status: int, text: str) -> None:
        """Send this short answer instead of the app's response, and drop the app's."""
        self.mode = "swallow"
        self.started = True
        await _send_answer(self.send, short_answer(status, text))

    # -- response side ----------------------------------------------------------------

    async def _refuse(self, what: str) -> None:
        await self._answer(*refusal(_log, what, self.scope.get("path", "")))

    async def _send(self, message: Message) -> None:
        kind = message["type"]
        if self.mode == "swallow" or (self.mode == "done" and kind != "http.response.trailers"):
            return
        if kind == "http.response.start":
            await self._on_start(message)
        elif kind == "http.response.body":
            await self._on_body(message)
        elif kind == "http.response.pathsend":
            await self._on_pathsend(message)
        elif kind in _HEADERS_ONLY or self.mode == "plain":
            await self.send(message)
        else:  # a body message this middleware does not know (zerocopysend, ...)
            if self.started:
                raise RuntimeError(f"cannot encrypt a {kind!r} message; response aborted")
            await self._refuse(f"a {kind!r} message")

    async def _on_start(self, message: Message) -> None:
        if self.decrypting is not None and self.decrypting.error is not None:
            await self._answer_error(self.decrypting.error)
            return
        headers: _Headers = list(message.get("headers", []))
        status = int(message["status"])
        if bodyless_status(status) or not self.mw.settings.encrypts_type(
            _get(headers, b"content-type")
        ):
            self.mode = "plain"
            self.started = True
            await self.send(message)
            return
        codings = _codings(headers)
        what = unencryptable(status, codings)
        if what is not None and self.mw.settings.on_unencryptable == "refuse":
            await self._refuse(what)
            return
        self.mode = "encrypt"
        coding, vary = encoded_headers(codings, _get(headers, b"vary"))
        headers = [*_without(headers, b"content-encoding"), (b"content-encoding", coding.encode())]
        if vary is not None:
            headers = [*_without(headers, b"vary"), (b"vary", vary.encode("latin-1"))]
        self.start = {**message, "headers": headers}

    def _set_length(self, plaintext_length: int | None, encryptor: EceEncryptor) -> None:
        assert self.start is not None
        headers = _without(self.start["headers"], b"content-length")
        if plaintext_length is not None and not self.start.get("trailers", False):
            size = encrypted_length(
                plaintext_length, self.mw.settings.record_size, keyid=encryptor.header.keyid
            )
            headers.append((b"content-length", str(size).encode()))
        self.start["headers"] = headers

    def _app_length(self) -> int | None:
        assert self.start is not None
        value = _get(self.start["headers"], b"content-length")
        if value is None or not value.strip().isdigit():
            return None
        return int(value)

    async def _send_start(self) -> None:
        if not self.started:
            assert self.start is not None
            self.started = True
            await self.send(self.start)

    async def _emit(self, body: bytes) -> None:
        """Send one piece of ciphertext (the pipeline made it for this message)."""
        if not self.started:  # once a response: no coroutine a piece for it
            await self._send_start()
        if not self.head:
            await self.send({"type": "http.response.body", "body": body, "more_body": True})

    async def _passed_plain(self, message: Message, what: str) -> bool:
        """Send ``message`` as it is when the response is not encrypted (True); refuse
        one before ``http.response.start``."""
        if self.mode == "plain":
            await self.send(message)
            return True
        if self.mode != "encrypt":
            raise RuntimeError(f"ASGI app sent {what} before http.response.start")
        return False

    async def _on_body(self, message: Message) -> None:
        if await self._passed_plain(message, "a response body"):
            return
        body = message.get("body", b"")
        more = bool(message.get("more_body", False))
        if self.feed is None and not more:
            # The whole body at once: exact Content-Length, one message.
            encryptor = self.mw.settings.encryptor()
            if self.head:
                self._set_length(self._app_length() if not body else len(body), encryptor)
                await self._finish()
                return
            self._set_length(len(body), encryptor)
            await self._finish(await encrypt_whole(encryptor, body, self.mw.settings.policy))
            return
        if self.feed is None:
            encryptor = self.mw.settings.encryptor()
            self._set_length(self._app_length(), encryptor)
            self.feed = encrypted_feed(encryptor, self.mw.settings.policy, self._emit)
        # A streamed body goes out as the app produces it, not in batch-size bursts.
        await self.feed.send(body)
        if not more:
            await self._finish()

    async def _finish(self, last: bytes = b"") -> None:
        """Send the final body message (``last``, after what the feeder still holds)."""
        if self.feed is not None:
            await self.feed.aclose()
        await self._send_start()
        await self.send({"type": "http.response.body", "body": last, "more_body": False})
        self.mode = "done"

    async def _on_pathsend(self, message: Message) -> None:
        if await self._passed_plain(message, "http.response.pathsend"):
            return
        if self.mw.settings.on_unencryptable == "refuse":
            await self._refuse("a file path send")
            return
        if self.feed is not None:
            raise RuntimeError("ASGI app sent http.response.pathsend after body messages")
        size = (await anyio.Path(message["path"]).stat()).st_size
        app_length = self._app_length()
        encryptor = self.mw.settings.encryptor()
        self._set_length(size if app_length is None or app_length == size else None, encryptor)
        feed = self.feed = encrypted_feed(encryptor, self.mw.settings.policy, self._emit)
        if not self.head:
            await send_file(message["path"], feed.send)
        await self._finish()
