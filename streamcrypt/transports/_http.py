"""What the HTTP middlewares share: their settings, checked once, the request rules and
the answers they make themselves (:func:`short_answer`).

Framework-free (no starlette, no aiohttp), so both the ASGI middleware and the aiohttp
helpers build on it: one declaration of the options (``EncryptionSettings``, private), one
reading of ``Content-Encoding`` (all header lines, RFC 9110 section 5.3), one decision of
what a request's body must be (:meth:`EncryptionSettings.request_rule`).

Memory per request, by design: a request body is decrypted record by record, so what one
request can pin is one partial record (at most ``max_record_size``, 64 KiB by default)
plus verified plaintext not yet read by the app (at most one body message's worth; the
aiohttp reader stops decrypting above its 64 KiB limit) plus the framework's own read
buffer; bodies go through the pipeline a piece at a time (:class:`BodyFeed`: the records
of at most 128 KiB of a request, :data:`REQUEST_PIECE`, 256 KiB of a response,
:data:`RESPONSE_PIECE`; a piece is a view of the write it came in, and its output leaves
before the next piece goes in), so its buffers hold one piece's output, and a response
leaves as one write per piece, each awaited, so a slow client holds about that much
queued (a 1 KiB body costs about 1 KiB).
A request body is cut (408) once it took longer than ``body_timeout`` seconds plus one
per ``body_min_rate`` bytes it brought (:class:`BodyDeadline`): a client that stalls or
trickles holds a request for about ``body_timeout``, not for as long as it likes.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import os
import time
import types
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Iterator,
)
from dataclasses import dataclass
from importlib import resources
from typing import Literal, TypeAlias, TypeVar, cast

import anyio

from ..abc import Buffer
from ..codecs.ece import (
    CONTENT_ENCODING,
    MAX_HEADER_SIZE,
    OVERHEAD,
    EceDecryptor,
    EceEncryptor,
    read_header,
)
from ..engine import DEFAULT_POLICY, INLINE_BATCH, Feeder, OffloadPolicy, Sink, pipeline
from ..errors import InvalidParameterError, StreamCryptError
from ..keys import KeyRing
from ._config import check_timeout
from ._deadline import LoopDeadline, timed_out, with_timeout
from ._socket import on_asyncio

_T = TypeVar("_T")

#: What to do with a response a gzip middleware would pass through untouched (file
#: sends, 206 answers, bodies already carrying a Content-Encoding): encrypt it, or refuse
#: it with a 500. Never send it in clear.
Unencryptable: TypeAlias = Literal["encrypt", "refuse"]
#: An answer a middleware makes itself: status, headers, body.
Answer: TypeAlias = tuple[int, dict[str, str], bytes]
#: Largest record a request body may announce by default: RFC 8188's own default is
#: 4096 and clients (http_ece, streamcrypt) use it; 64 KiB leaves room for clients that
#: chose larger records while bounding what a stalled request pins.
DEFAULT_REQUEST_MAX_RECORD_SIZE = 1 << 16
#: Record size (``rs``) of the bodies the HTTP helpers encrypt: responses of both
#: middlewares and ``encrypted_body`` uploads. Every record costs a fixed ~8,000 CPU
#: instructions of Python and kernel-call work besides its AES-GCM, which with 4 KiB
#: records (RFC 8188's example size) is a third of the work (issue 12, measured: 8.4 M
#: against 6.4 M instructions per MiB through the ASGI middleware, 16 KiB 7.0 M).
#: It costs no memory on small bodies (the last record is as short as its data: a 1 KiB
#: body is 1 KiB + 38 bytes), and a receiver buffers at most one record: 64 KiB, which
#: is exactly what these middlewares accept from a request by default.
DEFAULT_HTTP_RECORD_SIZE = 1 << 16
#: Response ciphertext sealed through a pipeline at a time: the output of one piece is
#: one body write to the server (a ``bytes`` the engine wrote in place, never copied nor
#: sliced), so a piece bounds both the pipeline's buffers and what a slow client leaves
#: queued. A response's pieces are cut at whole records of the stream
#: (:class:`BodyFeed`), so no record straddles two pieces. Issue 28: each piece costs a
#: pipeline push and a server write (uvicorn's h11 send, profiled: ~25 us a call) whatever
#: its size; against 128 KiB pieces cut per app write and sent as 64 KiB writes, a 64 MiB
#: ASGI download (in process, no socket) fell from 0.52 to 0.43 CPU-s/GB (AES alone 0.29).
RESPONSE_PIECE = 256 << 10
#: Most ciphertext of a request body opened through its decrypting pipeline at a time, in
#: whole records after the header (:class:`BodyCut`): with 64 KiB records a piece is then
#: under the engine's default inline limit (256 KiB), so it is opened at once. Measured
#: against 256 KiB, server RSS per concurrent 1 MiB exchange fell from 0.20 to 0.09 MiB
#: (uvicorn) and 1.45 to 0.98 MiB (aiohttp), throughput unchanged.
REQUEST_PIECE = 128 << 10
#: Seconds a request body may take before it counts against ``body_min_rate`` (408 past
#: its deadline: see :class:`BodyDeadline`).
DEFAULT_BODY_TIMEOUT = 30.0
#: Bytes per second a request body must average beyond ``body_timeout``: Apache's
#: ``mod_reqtimeout`` default (``body=20,MinRate=500``); a 64 KiB record then has about
#: two minutes, and a 2G mobile link (~6 KB/s) a tenth of the margin.
DEFAULT_BODY_MIN_RATE = 500.0
#: Methods whose requests carry no body unless they say so (Content-Length,
#: Transfer-Encoding).
BODYLESS_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE", "TRACE", "CONNECT"})
#: Bytes read from a file at a time when a file response is encrypted.
FILE_CHUNK = 1 << 20

_DECRYPT_FAILED = {
    400: "400 Bad Request: the aes128gcm request body failed to decrypt",
    408: "408 Request Timeout: the request body stalled",
    413: "413 Content Too Large: the aes128gcm request body exceeds this server's limits",
    415: "415 Unsupported Media Type: this server accepts request bodies in the aes128gcm "
    "content coding only",
}


def short_answer(status: int, text: str) -> Answer:
    """A middleware's own answer in place of the app's (a failed body, a refusal):
    ``text`` as a line of plain text, never stored by a cache."""
    body = text.encode() + b"\n"
    headers = {
        "Content-Type": "text/plain; charset=utf-8",
        "Content-Length": str(len(body)),
        "Cache-Control": "no-store",
    }
    return status, headers, body


def failure_text(exc: StreamCryptError) -> tuple[int, str]:
    """The status and short text a request whose body failed (``exc``) is answered with."""
    status = exc.http_status
    text = _DECRYPT_FAILED.get(status, f"{status}: the request body was refused")
    return status, f"{text} ({type(exc).__name__})"


def bodyless_status(status: int) -> bool:
    """Whether a response of ``status`` never carries a body (1xx, 204, 304: RFC 9110
    section 6.4.1), so both middlewares pass it as it is; an empty 200 is still encrypted."""
    return status in (204, 304) or 100 <= status < 200


def refusal(log: logging.Logger, what: str, path: str) -> tuple[int, str]:
    """Log that a response (``what`` it was) on ``path`` was refused rather than sent in
    clear (``on_unencryptable="refuse"``, or nothing that could encrypt it), and give the
    status and short text it is answered with instead."""
    log.error("refused to send %s in clear on %s", what, path)
    return 500, f"500 Internal Server Error: the response ({what}) could not be encrypted"


def unencryptable(status: int, codings: list[str]) -> str | None:
    """What a gzip middleware would pass through untouched in this response (a ranged
    206 answer, a body already encoded), for ``on_unencryptable``; ``None``: nothing."""
    if status == 206:
        return "a ranged 206 answer"
    return "an already encoded body" if codings else None


def header_text(value: str | bytes) -> str:
    """A header value as text (ASGI gives bytes: Latin-1, RFC 9110 section 5.5)."""
    return value.decode("latin-1") if isinstance(value, bytes) else value


def encoded_headers(codings: list[str], vary: str | bytes | None) -> tuple[str, str | None]:
    """The ``Content-Encoding`` and ``Vary`` of a response encrypted on top of its own
    ``codings``, whose ``Vary`` was ``vary``: ``aes128gcm`` last, ``Content-Encoding``
    added to ``Vary`` (``None``: ``vary`` covers it already)."""
    coding = ", ".join([*codings, CONTENT_ENCODING])
    if vary is None:
        return coding, "Content-Encoding"
    text = header_text(vary)
    if {t.strip().lower() for t in text.split(",")} & {"*", "content-encoding"}:
        return coding, None
    return coding, text + ", Content-Encoding"


class RequestRule(enum.Enum):
    """What a middleware does with a request's body."""

    DECRYPT = "decrypt"  # an aes128gcm body: decrypted before the app sees it
    CLEAR = "clear"  # allowed in clear (no body, or an allowed path or method)
    REFUSE = "refuse"  # anything else: 415 before the app runs


def content_codings(values: Iterable[str | bytes]) -> list[str]:
    """The codings of every ``Content-Encoding`` line, in order, lower case, without
    ``identity`` (several lines mean the same as one comma-joined line)."""
    out: list[str] = []
    for value in values:
        out += [t.strip().lower() for t in header_text(value).split(",")]
    return [t for t in out if t not in ("", "identity")]


def path_matches(path: str, rules: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``rules`` or below one, segment by segment: the one
    path rule of both middlewares. ``"/health"`` matches ``/health`` and
    ``/health/live``, never ``/healthcare``; ``"/"`` matches every path. Dot segments
    are resolved first (RFC 3986 section 5.2.4), so ``/public/../secret`` is judged as
    ``/secret``, the path a normalising router would serve."""
    if "/." in path:
        resolved: list[str] = []
        for segment in path.split("/"):
            if segment == "..":
                if len(resolved) > 1:
                    resolved.pop()
            elif segment != ".":
                resolved.append(segment)
        path = "/".join(resolved) or "/"
        if not path.startswith("/"):
            path = "/" + path
    for rule in rules:
        if path == rule or path.startswith(rule if rule.endswith("/") else rule + "/"):
            return True
    return False


def _paths(value: Iterable[str] | None, name: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise InvalidParameterError(f"{name} takes a list of paths, not a str")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class EncryptionSettings:
    """The options of :class:`~streamcrypt.transports.EncryptionMiddleware` and
    :func:`~streamcrypt.transports.setup_encryption` (documented there: explicit
    keywords), checked once and shared by both; private. Bad options raise
    :class:`InvalidParameterError`.
    """

    key: KeyRing
    record_size: int = DEFAULT_HTTP_RECORD_SIZE
    include_paths: Iterable[str] | None = None
    exclude_paths: Iterable[str] = ()
    content_types: Iterable[str] | None = None
    on_unencryptable: Unencryptable = "encrypt"
    decrypt_requests: bool = True
    allow_clear_paths: Iterable[str] = ()
    allow_clear_methods: Iterable[str] = ()
    max_record_size: int = DEFAULT_REQUEST_MAX_RECORD_SIZE
    body_timeout: float | None = DEFAULT_BODY_TIMEOUT
    body_min_rate: float | None = DEFAULT_BODY_MIN_RATE
    policy: OffloadPolicy | None = DEFAULT_POLICY
    serve_browser_module: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.key, KeyRing):
            raise InvalidParameterError(
                f"key must be a KeyRing of 16-byte keys, not {type(self.key).__name__}"
            )
        if self.on_unencryptable not in ("encrypt", "refuse"):
            raise InvalidParameterError(
                f"on_unencryptable must be 'encrypt' or 'refuse', not {self.on_unencryptable!r}"
            )
        check_timeout(self.body_timeout, "body_timeout")
        if self.body_min_rate is not None and not self.body_min_rate > 0:
            raise InvalidParameterError("body_min_rate must be a positive bytes/s figure or None")
        route = self.serve_browser_module
        if route is not None and (
            not isinstance(route, str)
            or not route.startswith("/")
            or route.endswith("/")  # "/" or a directory would hide the app's own pages
            or "?" in route
            or "/." in route
        ):
            raise InvalidParameterError(
                f"serve_browser_module must be a file path like '/ece.js', not {route!r}"
            )
        EceEncryptor(self.key, record_size=self.record_size)  # the record size and key, now
        # Normalise what may come as any iterable.
        set_ = object.__setattr__
        set_(self, "include_paths", _paths(self.include_paths, "include_paths"))
        set_(self, "exclude_paths", _paths(self.exclude_paths, "exclude_paths") or ())
        set_(self, "allow_clear_paths", _paths(self.allow_clear_paths, "allow_clear_paths") or ())
        set_(self, "allow_clear_methods", frozenset(m.upper() for m in self.allow_clear_methods))
        if self.content_types is not None:
            set_(
                self,
                "content_types",
                frozenset(t.partition(";")[0].strip().lower() for t in self.content_types),
            )

    def selects(self, path: str) -> bool:
        """Whether requests to ``path`` are handled (:func:`path_matches`); never the
        browser module's route."""
        if path == self.serve_browser_module:
            return False
        if self.include_paths is not None and not path_matches(path, self.include_paths):
            return False
        return not path_matches(path, self.exclude_paths)

    def browser_module(self, method: str, path: str) -> Answer | None:
        """The answer (status, headers, body) to a request for the browser module at the
        ``serve_browser_module`` route, ``None`` for any other request: the one route
        rule of both middlewares. The module is public code, so it goes in clear."""
        if path != self.serve_browser_module:
            return None
        if method not in ("GET", "HEAD"):
            return 405, {"Allow": "GET, HEAD", "Content-Length": "0"}, b""
        source = _browser_module_source()
        headers = {
            "Content-Type": "text/javascript; charset=utf-8",
            "Content-Length": str(len(source)),
            "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff",
        }
        return 200, headers, source if method == "GET" else b""

    def encrypts_type(self, content_type: str | bytes | None) -> bool:
        """Whether a response of this ``Content-Type`` is encrypted (``text/*`` works)."""
        if self.content_types is None:
            return True
        media = header_text(content_type or "").partition(";")[0].strip().lower()
        return media in self.content_types or f"{media.partition('/')[0]}/*" in self.content_types

    def request_rule(
        self, method: str, path: str, codings: list[str], has_body: bool
    ) -> RequestRule:
        """What to do with a request body: decrypt it, let it in clear, or refuse it.

        ``has_body``: the request announced a body (a nonzero Content-Length, a
        Transfer-Encoding, or a method that carries one); a middleware must still refuse
        body bytes that arrive on a request judged bodiless unless they were allowed.
        """
        if not self.decrypt_requests:
            return RequestRule.CLEAR
        if codings == [CONTENT_ENCODING]:
            return RequestRule.DECRYPT
        if codings:
            return RequestRule.REFUSE
        if not has_body or self.clear_allowed(method, path):
            return RequestRule.CLEAR
        return RequestRule.REFUSE

    def encryptor(self) -> EceEncryptor:
        """A response body's encryptor (the key ring's active key, ``record_size``)."""
        return EceEncryptor(self.key, record_size=self.record_size)

    def request_body(
        self,
        sink: Callable[[Buffer], Awaitable[None]],
        pause: Callable[[], Awaitable[object]] | None = None,
    ) -> tuple[BodyFeed, BodyDeadline]:
        """How one request body is read: a decrypting feed (``pause``: see
        :class:`BodyFeed`) whose ``sink`` gets each verified record's plaintext as
        ``bytes``, and the body's :class:`BodyDeadline`."""
        decryptor = EceDecryptor(self.key, max_record_size=self.max_record_size)
        feeder = pipeline(decryptor, policy=self.policy).feeder(sink, kept=True)
        feed = BodyFeed(feeder, BodyCut(REQUEST_PIECE, decryptor), pause)
        return feed, BodyDeadline(self.body_timeout, self.body_min_rate)

    def clear_allowed(self, method: str, path: str) -> bool:
        """Whether this request's body may come in clear."""
        return method.upper() in self.allow_clear_methods or path_matches(
            path, self.allow_clear_paths
        )


@functools.cache
def _browser_module_source() -> bytes:
    """streamcrypt/web/ece.js, the browser module shipped in the package (docs/browser.md)."""
    return (resources.files("streamcrypt") / "web" / "ece.js").read_bytes()


def announces_body(method: str, content_length: str | bytes | None, chunked: bool) -> bool:
    """Whether a request announced a body: a nonzero Content-Length, a Transfer-Encoding,
    or neither on a method that carries a body (POST, PUT, PATCH...)."""
    if content_length is not None:
        return header_text(content_length).strip() not in ("", "0")
    return chunked or method.upper() not in BODYLESS_METHODS


class BodyDeadline:
    """How long one request body may take: the one rule both middlewares read a body by.

    No wait for the next piece longer than ``body_timeout``, and the whole body within
    ``body_timeout`` seconds from the first read plus one second for every
    ``body_min_rate`` bytes that came (Apache ``mod_reqtimeout``'s ``MinRate`` rule): a
    client that trickles its body (a byte every 29 s) is cut as one that stalls, while
    one that keeps up the minimum rate is never cut, however long its body. With
    ``body_min_rate=None`` each wait is bounded by ``body_timeout`` alone; with
    ``body_timeout=None`` nothing is. Past the deadline raises :class:`PeerTimeoutError`
    (408). On asyncio a piece already there arms no timer, and the reads that wait share
    one (:class:`LoopDeadline`); :meth:`close` drops it once the body is over.
    """

    __slots__ = ("_clock", "_rate", "_received", "_start", "_timeout")

    def __init__(self, timeout: float | None, min_rate: float | None) -> None:
        self._timeout = timeout
        self._rate = min_rate
        self._start: float | None = None
        self._received = 0
        self._clock: LoopDeadline | None = None  # asyncio: the body's one timer

    async def read(self, read: Callable[[], Awaitable[_T]], size: Callable[[_T], int]) -> _T:
        """``await read()`` (the next piece of the body, of ``size(piece)`` bytes) within
        the body's deadline."""
        timeout = self._timeout
        if timeout is None:
            return await read()
        clock = self._clock
        if self._start is None and on_asyncio():
            clock = self._clock = LoopDeadline(asyncio.get_running_loop())
        now = clock.now() if clock is not None else time.monotonic()
        if self._start is None:
            self._start = now
        left, what = timeout, "the request body sent nothing"
        if self._rate is not None:
            overall = self._start + timeout + self._received / self._rate - now
            if overall < left:
                left, what = overall, f"the request body came slower than {self._rate:g} bytes/s"
            if left <= 0:
                raise timed_out(timeout, what)
        call = read()
        piece: _T
        if clock is not None and type(call) is types.CoroutineType:
            piece = await clock.wait(call, now + left, left, what)
        else:
            piece = await with_timeout(left, what, call)
        self._received += size(piece)
        return piece

    def close(self) -> None:
        """The body is over (read to its end, failed, or left unread): drop its timer."""
        if self._clock is not None:
            self._clock.close()


class BodyCut:
    """Where a body is cut into the pieces pushed through its pipeline: a piece ends on a
    record boundary of the body (a multiple of ``record`` bytes from where its records
    start, whatever the writes are) or where its write ends, and holds at most
    ``piece // record`` boundaries (at least one). A segmented stage releases a record
    once the byte after it came (an RFC 8188 record is known not to be the last only
    then), so such a piece releases at most that many records, and no record straddles
    two pieces of a write (a record cut in two is joined before it is run: a 64 KiB
    copy). A write is pushed in as few pieces as that allows, whole when it holds no
    more boundaries (issue 28: a 1 MiB response write of 64 KiB records was five pushes
    and a 256 KiB one two, where four and one release the same records); a piece that
    starts inside a record is then up to a record longer than its records, a view of
    the write, never copied. A ciphertext body (``decryptor`` given; ``record``, its
    record size, is read from the header) pushes its header first, alone: the engine
    reads a header on a worker and runs that push's records through its batches, so
    records pushed with it would leave the loop.
    """

    __slots__ = ("_count", "_decryptor", "_fed", "_piece", "_record")

    def __init__(
        self, piece: int, decryptor: EceDecryptor | None = None, *, record: int = 0
    ) -> None:
        self._piece = piece
        self._decryptor = decryptor  # until the header was read
        self._fed = 0  # bytes fed: of the body, then (header read) after the header
        self._record = record
        self._count = max(1, piece // record) if record else 0

    @classmethod
    def for_records(cls, encryptor: EceEncryptor) -> BodyCut:
        """The cut of a plaintext body into ``encryptor``'s pipeline: each piece releases
        the records of at most :data:`RESPONSE_PIECE` of ciphertext (at least one)."""
        rs = encryptor.header.record_size
        return cls(max(1, RESPONSE_PIECE // rs) * (rs - OVERHEAD), record=rs - OVERHEAD)

    def pieces(self, data: Buffer) -> Iterator[memoryview]:
        """``data`` (the body's next bytes) as pieces; each must be pushed before the
        next is asked for (a header is complete once the decryptor read it)."""
        view = memoryview(data).cast("B")
        if self._decryptor is not None:
            view = yield from self._header(view, self._decryptor)
        record, reach, fed = self._record, self._count * self._record, self._fed
        size, off = len(view), 0
        while off < size:
            # The first record boundary at or after the piece's start, then ``count`` on.
            end = -(-(fed + off) // record) * record + reach - fed
            yield view[off:end] if off or end < size else view
            off = end
        self._fed = fed + size

    def _header(
        self, view: memoryview, decryptor: EceDecryptor
    ) -> Generator[memoryview, None, memoryview]:
        """Yield the header's bytes (all of it when ``view`` starts the body and holds it,
        else at most :data:`MAX_HEADER_SIZE` at a time until the decryptor read it) and
        return the rest of ``view``; once the header is known, the pieces are whole
        records counted from its end."""
        while view and decryptor.header is None:
            size = MAX_HEADER_SIZE
            if self._fed == 0:
                try:
                    header = read_header(view)
                except StreamCryptError:
                    header = None  # the decryptor raises it, as it does for any body
                size = header.size if header is not None else size
            head, view = view[:size], view[size:]
            self._fed += len(head)
            yield head
        known = decryptor.header
        if known is not None:
            self._record = rs = known.record_size
            self._count = max(1, self._piece // rs)
            self._fed -= known.size
            self._decryptor = None
        return view

    async def over(self, chunks: AsyncIterable[Buffer]) -> AsyncIterator[memoryview]:
        """The pieces of a body read as ``chunks`` (a pipeline's source)."""
        async for chunk in chunks:
            for piece in self.pieces(chunk):
                yield piece


class BodyFeed:
    """A body pushed through a pipeline ``feeder`` in the pieces ``cut`` makes, so
    complete records leave as the data comes, through bounded buffers: each piece is
    flushed before the next goes in, so its output has left whatever the policy (a piece
    the engine ran inline left at once, and its flush returns at once; one it queued, as
    it queues work of at least the inline limit while it offloads, would otherwise wait
    with the pieces after it for the write's end). ``pause`` is awaited before each piece
    after a write's first (a reader's backpressure).
    """

    __slots__ = ("_cut", "_pause", "feeder")

    def __init__(
        self,
        feeder: Feeder,
        cut: BodyCut,
        pause: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self.feeder = feeder
        self._cut = cut
        self._pause = pause

    async def send(self, data: Buffer) -> None:
        """Push ``data`` (the body's next bytes) through, a piece at a time."""
        feeder, pause = self.feeder, self._pause
        for i, piece in enumerate(self._cut.pieces(data)):
            if i and pause is not None:
                await pause()
            await feeder.send(piece)
            await feeder.flush()

    async def aclose(self) -> None:
        """Finish the body (:meth:`Feeder.aclose`)."""
        await self.feeder.aclose()


def encrypted_feed(
    encryptor: EceEncryptor,
    policy: OffloadPolicy | None,
    sink: Callable[[bytes], Awaitable[object]],
) -> BodyFeed:
    """A response body's feed (:meth:`BodyCut.for_records`): ``sink`` gets the header,
    then each piece's records as one new ``bytes`` it may keep (a server's write)."""
    # A kept feeder's sink gets bytes: ``sink`` itself, no coroutine around it.
    feeder = pipeline(encryptor, policy=policy).feeder(cast(Sink, sink), kept=True)
    return BodyFeed(feeder, BodyCut.for_records(encryptor))


async def encrypt_whole(
    encryptor: EceEncryptor, body: Buffer, policy: OffloadPolicy | None
) -> bytes:
    """A whole body's encryption: in one call on the loop below the policy's inline limit
    (and never more than the engine's inline batch), else through the pipeline, which
    offloads it or, with ``policy=None``, yields to the loop between inline batches."""
    small = min(INLINE_BATCH if policy is None else policy.inline_limit, INLINE_BATCH)
    if len(body) < small:
        return encryptor.update(body) + encryptor.finalize()
    return await pipeline(encryptor, policy=policy).collect(body)


async def send_file(
    path: str | os.PathLike[str], write: Callable[[bytes], Awaitable[object]]
) -> None:
    """Hand the file at ``path`` to ``write`` :data:`FILE_CHUNK` bytes at a time."""
    async with await anyio.open_file(path, "rb") as file:
        while chunk := await file.read(FILE_CHUNK):
            await write(chunk)
