"""aiohttp server middleware and client helpers for RFC 8188 (``aes128gcm``) bodies.

Theory of operation
-------------------
aiohttp writes a streamed body while the handler runs, so a middleware cannot re-encode
it afterwards; that is why aiohttp hooks its own compression into ``StreamResponse``.
This module splits the work the same way:

* :class:`EncryptedStreamResponse` is a ``StreamResponse`` whose ``write`` and
  ``write_eof`` push plaintext through a pipeline feeder whose sink is the real
  ``StreamResponse.write``: the body streams out encrypted, with bounded memory.
* :func:`setup_encryption` installs a middleware (outermost) that, on the routes it
  selects, decrypts ``aes128gcm`` request bodies as the handler reads them (the request
  is cloned over a :class:`aiohttp.StreamReader` that pulls ciphertext only when the
  handler waits for data, so backpressure is the handler's reading pace; plaintext is
  released per verified record) and encrypts whole ``web.Response`` bodies (exact
  ``Content-Length``), raised ``HTTPException`` bodies and ``FileResponse`` files. It
  also installs an ``on_response_prepare`` guard: a response with a body on a selected
  route that is neither encrypted nor marked by the middleware (a plain
  ``StreamResponse`` written from the handler, a body aiohttp compressed after
  encryption) is refused at ``prepare`` before its headers leave, so the handler fails
  and the client gets 500; nothing is ever sent in clear, whatever the status (a
  handler's own 5xx included). A handler that raises gets the middleware's own short
  500, never aiohttp's error page (which in debug mode carries the traceback).
* Errors: a request body that fails to decrypt raises the typed error in the handler's
  read; the middleware answers ``exc.http_status`` (400, 413) with a short message. A
  request ``Content-Encoding`` other than ``aes128gcm`` gets 415 before the handler.
* Client side, :func:`encrypted_body` is a request payload (carrying its own
  ``Content-Encoding``) that encrypts an async iterator as it is sent, and
  :func:`decrypt_response` decrypts a ``ClientResponse``'s content stream.

Unencryptable answers (206, bodies that already carry a ``Content-Encoding``, files)
are encrypted or refused with a 500 by ``on_unencryptable``, as in the ASGI middleware.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Literal, cast

import anyio
from aiohttp import ClientResponse, hdrs, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.base_protocol import BaseProtocol
from aiohttp.payload import AsyncIterablePayload, Payload
from aiohttp.streams import StreamReader
from aiohttp.typedefs import LooseHeaders
from multidict import CIMultiDict

from ..abc import Buffer
from ..codecs.ece import (
    CONTENT_ENCODING,
    DEFAULT_MAX_RECORD_SIZE,
    EceDecryptor,
    EceEncryptor,
    EceKey,
    EceKeySource,
    encrypted_length,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy, pipeline
from ..errors import (
    InvalidParameterError,
    StreamCryptError,
    UnsupportedFormatError,
)
from ..keys import KeyRing
from ._config import config_of
from ._http import (
    DEFAULT_BODY_MIN_RATE,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HTTP_RECORD_SIZE,
    DEFAULT_REQUEST_MAX_RECORD_SIZE,
    RESPONSE_PIECE,
    BodyCut,
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

_log = logging.getLogger("streamcrypt.transports.aiohttp")
_MARK: web.ResponseKey[bool] = web.ResponseKey("streamcrypt_encrypted", bool)
#: Shared by a request and its clone: whether a response of it went through prepare().
_PREPARED: web.RequestKey[list[bool]] = web.RequestKey("streamcrypt_prepared", list)
_AES = CONTENT_ENCODING
_READ_LIMIT = 1 << 16


def _codings(headers: Any) -> list[str]:
    """Every Content-Encoding line's codings (RFC 9110: lines combine like commas)."""
    return content_codings(headers.getall(hdrs.CONTENT_ENCODING, []))


#: Where :func:`setup_encryption` keeps its options in the application.
_SETTINGS_KEY: web.AppKey[EncryptionSettings] = web.AppKey("streamcrypt_encryption")
#: Whether the handler's request body was decrypted (True) or came in clear (False: no
#: body, an allowed path or method, or decrypt_requests=False): ``request[BODY_DECRYPTED_KEY]``.
BODY_DECRYPTED_KEY: web.RequestKey[bool] = web.RequestKey("streamcrypt_body_decrypted", bool)


def _error(status: int, text: str) -> web.Response:
    _, headers, body = short_answer(status, text)
    resp = web.Response(status=status, headers=headers, body=body)
    resp[_MARK] = True
    return resp


def _decrypt_error(exc: StreamCryptError) -> web.Response:
    return _error(*failure_text(exc))


def _refusal(what: str, path: str) -> web.Response:
    return _error(*refusal(_log, what, path))


def _set_encoding(headers: CIMultiDict[str]) -> None:
    coding, vary = encoded_headers(_codings(headers), headers.get(hdrs.VARY))
    headers.popall(hdrs.CONTENT_ENCODING, None)
    headers[hdrs.CONTENT_ENCODING] = coding
    if vary is not None:
        headers[hdrs.VARY] = vary


class EncryptedStreamResponse(web.StreamResponse):
    """A ``StreamResponse`` whose body is encrypted as it is written.

    Use it like ``StreamResponse``: ``await resp.prepare(request)``, ``await
    resp.write(data)`` any number of times, ``await resp.write_eof()``. ``key`` (a
    :class:`KeyRing` of 16-byte keys; the active one encrypts), ``record_size`` and
    ``policy`` (``"app"``) default to the application's :func:`setup_encryption`
    options. If
    ``content_length`` is set to the plaintext length before ``prepare``, the exact
    encrypted length is sent; otherwise the body is chunked. Raises
    :class:`InvalidParameterError` when no key is known, and for
    ``enable_compression`` (compressing ciphertext is useless and would replace the
    coding).
    """

    def __init__(
        self,
        *,
        status: int = 200,
        reason: str | None = None,
        headers: LooseHeaders | None = None,
        key: KeyRing | None = None,
        record_size: int | None = None,
        policy: OffloadPolicy | Literal["app"] | None = "app",
    ) -> None:
        super().__init__(status=status, reason=reason, headers=headers)
        self._sc_key = key
        self._sc_record_size = record_size
        self._sc_policy = policy
        self._sc_feed: BodyFeed | None = None
        self[_MARK] = True

    def enable_compression(
        self, force: bool | web.ContentCoding | None = None, strategy: int | None = None
    ) -> None:
        raise InvalidParameterError(
            "an EncryptedStreamResponse cannot be compressed after encryption; compress "
            "the plaintext before writing it if needed"
        )

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        if self.prepared:
            return await super().prepare(request)
        settings = (
            request.config_dict.get(_SETTINGS_KEY) if isinstance(request, web.Request) else None
        )
        key = self._sc_key or (settings.key if settings is not None else None)
        if key is None:
            raise InvalidParameterError(
                "EncryptedStreamResponse needs key=, or setup_encryption() on the app"
            )
        record_size = self._sc_record_size or (
            settings.record_size if settings is not None else DEFAULT_HTTP_RECORD_SIZE
        )
        policy: OffloadPolicy | None
        if isinstance(self._sc_policy, str):
            policy = settings.policy if settings is not None else DEFAULT_POLICY
        else:
            policy = self._sc_policy
        encryptor = EceEncryptor(key, record_size=record_size)
        _set_encoding(self.headers)
        plain_length = self.headers.get(hdrs.CONTENT_LENGTH)
        if plain_length is not None:
            size = encrypted_length(int(plain_length), record_size, keyid=encryptor.header.keyid)
            self.headers[hdrs.CONTENT_LENGTH] = str(size)
        self._sc_feed = encrypted_feed(encryptor, policy, super().write)
        return await super().prepare(request)

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt and send ``data`` (its complete records leave before this returns)."""
        if self._sc_feed is None:
            raise RuntimeError("Cannot call write() before prepare()")
        if self._eof_sent:
            raise RuntimeError("Cannot call write() after write_eof()")
        await self._sc_feed.send(data)

    async def write_eof(self, data: bytes = b"") -> None:
        """Send ``data``, the last record and the end of the body."""
        if self._eof_sent:
            return
        if self._sc_feed is None:
            raise RuntimeError("Cannot call write_eof() before prepare()")
        await self._sc_feed.send(data)
        await self._sc_feed.aclose()
        await super().write_eof()


class _PullControl(BaseProtocol):
    """The decrypting reader's flow control. ``aiohttp.StreamReader`` (public) must be
    given a ``BaseProtocol``, whose pause/resume would act on a socket; this one's act on
    the task that feeds the reader instead: its buffer above the limit pauses the pump,
    below it resumes it. ``connected`` is the request's own connection's (a read after
    the client left fails as it would on aiohttp's reader)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, connection: BaseProtocol | None) -> None:
        super().__init__(loop)
        self.room = anyio.Event()
        self.room.set()
        self._connection = connection

    @property
    def connected(self) -> bool:
        return self._connection is not None and self._connection.connected

    def pause_reading(self) -> None:
        self.room = anyio.Event()

    def resume_reading(self, resume_parser: bool = True) -> None:
        self.room.set()


class _DecryptingReader(StreamReader):
    """A request body reader holding only plaintext whose record verified.

    :meth:`pump` (a task beside the handler) reads ciphertext, decrypts it and feeds the
    plaintext through ``StreamReader``'s public ``feed_data``/``feed_eof``; it waits while
    the handler has not read what it has (the reader's own limit), so memory stays one
    record plus the reader's buffer. A failure reaches the handler's read as the typed
    error (``set_exception``).
    """

    def __init__(self, request: web.BaseRequest, settings: EncryptionSettings) -> None:
        loop = asyncio.get_running_loop()
        self._sc_control = _PullControl(loop, request.protocol)
        super().__init__(self._sc_control, _READ_LIMIT, loop=loop)
        self._sc_source = request.content
        # The room event is replaced on each pause: wait on the one current then.
        self._sc_feed, self._sc_deadline = settings.request_body(
            self._sc_put, lambda: self._sc_control.room.wait()
        )
        self.sc_error: StreamCryptError | None = None

    async def _sc_put(self, plaintext: Buffer) -> None:
        self.feed_data(cast(bytes, plaintext))  # a kept feeder's sink gets bytes

    async def _sc_next(self) -> bytes:
        """The body's next ciphertext. Data already there is taken after a turn of the
        loop, so the handler takes what the last piece gave first (a handler's
        ``readany`` joins whatever is buffered into one new object: a copy of a piece
        or more); a read that waits gives it that turn anyway."""
        source = self._sc_source
        chunk = source.read_nowait()
        if chunk or source.at_eof():
            await asyncio.sleep(0)
            return chunk
        return await source.readany()

    async def pump(self) -> None:
        try:
            while True:
                room = self._sc_control.room
                if not room.is_set():  # (a set one would cost a turn of the loop)
                    await room.wait()
                chunk = await self._sc_deadline.read(self._sc_next, len)
                if not chunk:
                    await self._sc_feed.aclose()
                    self.feed_eof()
                    return
                # Records reach the handler as they verify; a large read is decrypted
                # only as fast as the handler takes the plaintext.
                await self._sc_feed.send(chunk)
        except StreamCryptError as exc:
            self.sc_error = exc
            self.set_exception(exc)
        except Exception as exc:  # the connection failed under the body: the handler sees it
            self.set_exception(exc)
        finally:
            self._sc_deadline.close()  # its timer, however the pump ended


async def _file_response(
    resp: web.FileResponse, path: Path, request: web.Request
) -> web.StreamResponse:
    """Send a ``FileResponse``'s whole file encrypted (ranges and validators ignored)."""
    size = (await anyio.Path(path).stat()).st_size
    out = EncryptedStreamResponse(status=200, headers={hdrs.CONTENT_TYPE: resp.content_type})
    out.content_length = size
    await out.prepare(request)
    if request.method != hdrs.METH_HEAD:
        await send_file(path, out.write)
    await out.write_eof()
    return out


async def _encrypt_body(resp: web.Response, settings: EncryptionSettings, body: bytes) -> None:
    """Replace a whole body by its encryption (offloaded when large); marks ``resp``."""
    data = await encrypt_whole(settings.encryptor(), body, settings.policy)
    _set_encoding(resp.headers)
    resp.headers.pop(hdrs.CONTENT_LENGTH, None)
    resp.body = data
    resp[_MARK] = True


def _carries_nothing(request: web.BaseRequest, resp: web.StreamResponse) -> bool:
    """Nothing of this response could leak: no body can or will be sent."""
    if bodyless_status(resp.status) or request.method == hdrs.METH_HEAD:
        return True
    if isinstance(resp, web.Response) and not isinstance(resp.body, Payload):
        return not resp.body
    return False


async def _seal(
    request: web.Request, resp: web.StreamResponse, settings: EncryptionSettings
) -> web.StreamResponse:
    """Encrypt (or refuse) what the handler gave, before it is prepared."""
    if resp.get(_MARK) or resp.prepared:
        return resp  # encrypted already, or streamed (the prepare guard judged it)
    if bodyless_status(resp.status) or not settings.encrypts_type(resp.content_type):
        return resp
    refuse = settings.on_unencryptable == "refuse"
    if isinstance(resp, web.FileResponse):
        path = getattr(resp, "_path", None)
        if refuse or not isinstance(path, Path):
            return _refusal("a file response", request.path)
        return await _file_response(resp, path, request)
    if not isinstance(resp, web.Response):
        return _refusal("an unprepared stream response", request.path)
    what = unencryptable(resp.status, _codings(resp.headers))
    if what is not None and refuse:
        return _refusal(what, request.path)
    if resp.compression:
        return _refusal("a body aiohttp would compress after encryption", request.path)
    body = resp.body
    if isinstance(body, Payload):
        if refuse:
            return _refusal("a streamed payload body", request.path)
        return await _payload_response(resp, body, request)
    await _encrypt_body(resp, settings, bytes(body or b""))
    return resp


async def _payload_response(
    resp: web.Response, body: Payload, request: web.Request
) -> web.StreamResponse:
    """Stream a ``Payload`` body (async iterable, file object) encrypted."""
    headers = CIMultiDict(resp.headers)
    headers.pop(hdrs.CONTENT_LENGTH, None)
    out = EncryptedStreamResponse(status=resp.status, reason=resp.reason, headers=headers)
    if body.size is not None:
        out.content_length = body.size
    await out.prepare(request)
    try:
        await body.write(_PayloadSink(out))
    finally:
        await body.close()
    await out.write_eof()
    return out


class _PayloadSink(AbstractStreamWriter):
    """The stream writer ``Payload.write`` is given: every chunk it writes is encrypted."""

    def __init__(self, out: EncryptedStreamResponse) -> None:
        self._out = out

    async def write(self, chunk: Buffer) -> None:
        await self._out.write(chunk)

    async def write_eof(self, chunk: bytes = b"") -> None:
        if chunk:
            await self._out.write(chunk)

    async def drain(self) -> None:
        return None

    def enable_compression(self, encoding: str = "deflate", strategy: int | None = None) -> None:
        raise InvalidParameterError("an encrypted payload cannot be compressed")

    def enable_chunking(self) -> None:
        return None

    async def write_headers(self, status_line: str, headers: CIMultiDict[str]) -> None:
        raise RuntimeError("a payload writes no headers")


def _with_body(request: web.Request, reader: _DecryptingReader) -> web.Request:
    """A clone of ``request`` whose body is ``reader`` (plaintext), without the headers
    that describe the ciphertext.

    aiohttp has no public way to give a request another body (``clone()`` takes
    headers, not a payload), so this one function sets the clone's private ``_payload``,
    which ``content``, ``read()``, ``text()``, ``json()``, ``post()`` and
    ``can_read_body`` all read (``test_aiohttp.py`` checks that invariant). The public
    alternative, decrypting the whole body before the handler runs, would hold the whole
    body in memory (a 64 MiB upload: 64 MiB of plaintext) where this holds one record
    and the reader's 64 KiB limit.
    """
    headers = CIMultiDict(request.headers)
    headers.popall(hdrs.CONTENT_ENCODING, None)
    headers.pop(hdrs.CONTENT_LENGTH, None)
    clone = request.clone(headers=headers)
    clone._payload = reader
    return clone


async def _pumped(
    reader: _DecryptingReader,
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    request: web.Request,
) -> web.StreamResponse:
    """``await handler(request)`` while ``reader.pump()`` feeds its body, in one task
    group (the pump never outlives the handler, nor is its task left unreferenced); the
    handler's own exception (a typed error, an ``HTTPException``) comes out as itself,
    not inside an exception group."""
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader.pump)
            try:
                response = await handler(request)
            finally:
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    return response


def _middleware(settings: EncryptionSettings) -> Any:
    @web.middleware
    async def encryption(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if module := settings.browser_module(request.method, request.path):
            status, headers, body = module
            return web.Response(status=status, headers=headers, body=body)
        if not settings.selects(request.path):
            return await handler(request)
        reader: _DecryptingReader | None = None
        prepared: list[bool] = []
        request[_PREPARED] = prepared  # the clone below shares this list
        has_body = request.body_exists or announces_body(
            request.method, request.headers.get(hdrs.CONTENT_LENGTH), False
        )
        rule = settings.request_rule(
            request.method, request.path, _codings(request.headers), has_body
        )
        if rule is RequestRule.REFUSE:
            return _decrypt_error(UnsupportedFormatError("request body not in aes128gcm"))
        if rule is RequestRule.DECRYPT:
            reader = _DecryptingReader(request, settings)
            request = _with_body(request, reader)
        request[BODY_DECRYPTED_KEY] = reader is not None
        try:
            if reader is None:
                resp = await handler(request)
            else:
                resp = await _pumped(reader, handler, request)
        except web.HTTPException as exc:
            if reader is not None and reader.sc_error is not None and not prepared:
                return _decrypt_error(reader.sc_error)
            if exc.get(_MARK) or bodyless_status(exc.status) or isinstance(exc.body, Payload):
                raise
            if settings.on_unencryptable == "refuse" and _codings(exc.headers):
                return _refusal("an already encoded body", request.path)
            await _encrypt_body(exc, settings, bytes(exc.body or b""))  # not a Payload
            raise
        except Exception as exc:
            if prepared:
                raise  # a response is under way: the server aborts the connection
            if reader is not None and reader.sc_error is not None and exc is reader.sc_error:
                return _decrypt_error(reader.sc_error)
            # Answered here, not by aiohttp's own error page, which the guard would have
            # to let pass unencrypted (in debug mode it carries the traceback).
            _log.exception("the handler of %s failed; answered 500", request.path)
            return _error(500, "500 Internal Server Error: the handler failed")
        if reader is not None and reader.sc_error is not None and not resp.prepared:
            return _decrypt_error(reader.sc_error)  # the handler swallowed the error
        return await _seal(request, resp, settings)

    return encryption


def _guard(settings: EncryptionSettings) -> Callable[[web.Request, web.StreamResponse], Any]:
    async def on_prepare(request: web.Request, resp: web.StreamResponse) -> None:
        if not settings.selects(request.path):
            return
        prepared = request.get(_PREPARED)
        if prepared is not None:
            prepared.append(True)
        if resp.get(_MARK):
            if resp.status < 400 or isinstance(resp, EncryptedStreamResponse):
                last = _codings(resp.headers)[-1:]
                if last != [_AES] and not _carries_nothing(request, resp):
                    raise web.HTTPInternalServerError(text="response coding was changed")
            return
        if _carries_nothing(request, resp) or not settings.encrypts_type(resp.content_type):
            return
        # prepare() already set the connection's writer up for this body; undo that so
        # the 500 that replaces it is framed by its own headers.
        writer = request.writer
        writer.length = None
        if getattr(writer, "chunked", False):
            writer.chunked = False  # type: ignore[attr-defined]
        _, headers, body = short_answer(*refusal(_log, "a plaintext body", request.path))
        refused = web.HTTPInternalServerError(headers=headers, text=body.decode())
        refused[_MARK] = True
        raise refused

    return on_prepare


def setup_encryption(
    app: web.Application,
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
    """Encrypt ``app``'s responses and decrypt its ``aes128gcm`` requests.

    The options (keywords, ``key`` required) mean what they mean for the ASGI
    :class:`~streamcrypt.transports.EncryptionMiddleware`: requests fail closed (415 for
    a body not in aes128gcm unless its path or method is allowed in clear;
    ``request[BODY_DECRYPTED_KEY]`` says which the handler got), a body that stalls or
    trickles past its deadline gets 408; ``serve_browser_module`` serves the browser
    module at that path (docs/browser.md). Installs the middleware (outermost) and the
    ``on_response_prepare`` guard, and keeps the options in the app for
    :class:`EncryptedStreamResponse`. Raises :class:`InvalidParameterError` for bad
    options.
    """
    settings = config_of(EncryptionSettings, locals())
    app[_SETTINGS_KEY] = settings
    app.middlewares.insert(0, _middleware(settings))
    app.on_response_prepare.append(_guard(settings))


def encrypted_body(
    source: AsyncIterable[Buffer],
    key: EceKey | KeyRing,
    *,
    record_size: int = DEFAULT_HTTP_RECORD_SIZE,
    keyid: bytes | str = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterablePayload:
    """A client request body that encrypts ``source`` as it is sent.

    Pass it as ``data=``; it carries ``Content-Encoding: aes128gcm`` itself. ``key`` is
    the 16-byte key or a :class:`KeyRing` (its active key and id). Raises
    :class:`InvalidKeySizeError`, :class:`InvalidParameterError`.
    """
    encryptor = EceEncryptor(key, record_size=record_size, keyid=keyid)
    stream = pipeline(encryptor, policy=policy).stream(source)
    return AsyncIterablePayload(
        stream,
        content_type="application/octet-stream",
        headers={hdrs.CONTENT_ENCODING: _AES},
    )


async def _received(content: StreamReader) -> AsyncIterator[bytes]:
    """``content``'s bytes as aiohttp's parser handed them over (``iter_chunks``), not
    joined: ``iter_any`` joins everything buffered into one new object, a copy of the
    whole body into fresh memory (issue 28: a 64 MiB encrypted download cost the client
    1.11-1.54 CPU-s/GB with it, 0.96-1.09 without; page faults 84-161k/GB, 24-68k)."""
    async for data, _ in content.iter_chunks():
        if data:  # an empty one marks the end of an HTTP chunk
            yield data


async def decrypt_response(
    response: ClientResponse,
    key: EceKeySource,
    *,
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """The plaintext of an ``aes128gcm`` response, streamed (each record verified first).

    The last ``Content-Encoding`` must be ``aes128gcm`` (an earlier coding, as in
    ``gzip, aes128gcm``, is left for the caller to undo). Raises
    :class:`UnsupportedFormatError` for another coding, then the decryptor's errors
    (:class:`AuthenticationError`, :class:`TruncatedStreamError`, ...), after every
    record that verified before the failure.
    """
    codings = _codings(response.headers)
    if codings[-1:] != [_AES]:
        raise UnsupportedFormatError(
            f"the response's Content-Encoding is {', '.join(codings) or 'identity'!r}, "
            "not aes128gcm: nothing to decrypt"
        )
    # A chunk larger than a piece (a long HTTP chunk) is opened in pieces under the inline
    # limit, as the middlewares' bodies are, never handed to workers as one batch (issue
    # 28: that cost ~0.4-1.0 CPU-s/GB more on two cores).
    decryptor = EceDecryptor(key, max_record_size=max_record_size)
    pieces = BodyCut(RESPONSE_PIECE - 1, decryptor).over(_received(response.content))
    async for chunk in pipeline(decryptor, policy=policy).stream(pieces):
        yield chunk
