"""A store server speaking restic's REST backend protocol (v2), append-only by default.

Theory of operation. One repository lives in ``root``, in the layout restic and the backup
store share: ``config``, ``data/<2 hex>/<name>``, ``index/``, ``keys/``, ``locks/``,
``snapshots/`` (and the store's ``ids/``). The requests (restic's docs, "REST Backend")::

    POST /?create=true                       create the layout (200 if it exists)
    HEAD | GET | POST | DELETE /config
    GET /{type}/                             list: v2 JSON [{"name", "size"}] when the
                                             Accept header asks for v2, else v1 names
    HEAD | GET | POST | DELETE /{type}/{name}    GET honours one byte Range (206)

Two tokens, each sent as a bearer token or as the password of HTTP basic auth (restic
sends ``rest:http://user:TOKEN@host:port/`` as basic auth; the user name is not checked),
compared in constant time. Who may do what is decided in one function,
:func:`_permitted`: the *writer* creates objects and reads; an object that exists is
never replaced and nothing is deleted, except under ``locks/`` (a client refreshes and
removes its own locks; a lock holds no history). The *owner* may also delete and replace
(``forget``, ``prune``). Without an owner token nobody can delete anything.

Every request path becomes a file path in one function, :func:`object_file`: ``config``,
or a known type and a name of letters, digits, ``.``, ``_`` and ``-`` (lower-case hex
under ``data/``) that does not start with a dot. Nothing can name a file outside
``root``, a directory, or a temporary (temporaries start with a dot).

Memory per request is bounded: a body streams to a temporary beside its destination in
slices of at most :data:`_SLICE` bytes, each piece of it must arrive within
``body_timeout`` seconds and the whole at ``min_body_rate`` bytes a second on average
after the first ``body_timeout`` seconds (408), within ``max_object_size`` bytes (413); the
temporary is fsynced and linked into place, which never replaces an existing object
(where replacing is allowed, renamed over it). A body equal to the existing object is
accepted without change (a client's retry after a lost answer). Responses are read in
slices too. File I/O runs on the engine's worker threads (:func:`._work.run_blocking`).

Opening a connection takes no token, so connections are bounded apart from requests
(:meth:`RestServer.serve`): at most :data:`MAX_CONNECTIONS` at once (beyond, the one
that has waited longest for a request head is closed to make room, so connections held
open without a request cannot keep a client out; a new one is closed only when every
other is in a request), each request head complete within :data:`HEAD_TIMEOUT` seconds of the
connection's opening or of the head's first byte and at most :data:`_MAX_HEAD` bytes
(else the connection is closed); a request without a valid token is answered 401 and
its connection closed. Only requests with a valid token count against
:data:`MAX_REQUESTS` (503 beyond), so idle or unauthenticated connections cannot make
the server refuse its clients; :data:`OWNER_REQUESTS` of them are the owner's alone
(:meth:`RestServer._dispatch`), so writers, however many requests they hold, cannot
keep the owner from restoring, verifying or pruning.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import filecmp
import hmac
import json
import logging
import os
import re
import socket
import stat
from collections.abc import Awaitable, Callable, MutableMapping
from functools import partial
from typing import Any

import anyio

from ..engine import DEFAULT_POLICY, OffloadPolicy
from ..errors import (
    AccessDeniedError,
    InvalidParameterError,
    LimitExceededError,
    PeerTimeoutError,
    UnsafePathError,
)
from ..keys import secret_text_bytes
from ..transports import commit_temporary, create_temporary, discard_temporary
from ._work import run_blocking

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: The object types of restic's protocol (besides the single ``config``): ``POST
#: /?create=true`` makes their folders.
RESTIC_TYPES = ("data", "index", "keys", "locks", "snapshots")
#: The types served: restic's and ``ids`` (a write-only store's chunk-id files, one per
#: index file; its folder appears with its first object).
TYPES = (*RESTIC_TYPES, "ids")
#: The media types of the two list formats.
API_V1 = "application/vnd.x.restic.rest.v1"
API_V2 = "application/vnd.x.restic.rest.v2"
#: The largest object accepted: the store's packs go up to 1 GiB (its config's limit),
#: restic's to 128 MiB.
DEFAULT_MAX_OBJECT_SIZE = 1 << 30
#: Seconds a request body may stall between two pieces before it is abandoned (408).
DEFAULT_BODY_TIMEOUT = 60.0
#: Bytes a second a request body must average once ``body_timeout`` seconds have passed
#: since its start (408 when it falls behind): a client trickling a byte per piece no
#: longer holds a request for ever, and a 16 MiB pack may take 34 minutes (restic's
#: uploads over a 1 Mbit/s link, several at once, stay well above it).
DEFAULT_MIN_BODY_RATE = 8 << 10
#: Bytes moved per file call (and at most held per request): 1 MiB amortises a thread
#: hop (tens of microseconds) to well under 1% of a write.
_SLICE = 1 << 20
#: Seconds a connection has to send a whole request head, from its opening or from the
#: first byte of a later head (a head is a few hundred bytes; restic's come at once).
HEAD_TIMEOUT = 10.0
#: Requests with a valid token served at once; another is answered 503 (Retry-After).
MAX_REQUESTS = 64
#: Of :data:`MAX_REQUESTS`, the ones only the owner's token may take: writers hold at
#: most ``MAX_REQUESTS - OWNER_REQUESTS`` at once, so the owner always gets a request
#: in (a store's restore or prune sends a few at a time: one per worker thread).
OWNER_REQUESTS = 16
#: Connections held at once, authenticated or not; beyond, the one waiting longest for a
#: request head is closed (``_make_room``), or the new one when every other is in a request.
#: Until its request runs, each holds at most a head (:data:`_MAX_HEAD`): 510 holding
#: 15 KiB of a head raised the peak by 10 MiB (measured 2026-12-05); 512 stays under
#: the usual limit of 1024 descriptors.
MAX_CONNECTIONS = 512
#: The largest request head (h11's default, named so the bound above holds).
_MAX_HEAD = 16 << 10
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}")
_HEX = re.compile(r"[0-9a-f]{2,200}")
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")
#: Digits of a Range bound read as a number; a longer one is past any file (and int()
#: refuses over 4,300 digits).
_RANGE_DIGITS = 19
_OWNER, _WRITER = "owner", "writer"
_CLOSE = (b"connection", b"close")
_log = logging.getLogger("streamcrypt.backup.server")


class _Refused(Exception):
    """A request answered with an error status (the message goes to the log only)."""

    def __init__(
        self, status: int, reason: str, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.headers = headers or []


def valid_object_name(kind: str, name: str) -> bool:
    """Whether ``name`` can name an object of ``kind`` (one of :data:`TYPES`)."""
    return kind in TYPES and bool((_HEX if kind == "data" else _NAME).fullmatch(name))


def object_file(root: str, kind: str, name: str | None = None) -> str:
    """The file of object ``name`` of ``kind`` under ``root`` (``kind`` ``"config"``
    without a name: the config; a type without a name: its directory). The one place a
    request becomes a path; raises :class:`UnsafePathError` for anything else."""
    if kind == "config" and name is None:
        return os.path.join(root, "config")
    if kind not in TYPES:
        raise UnsafePathError(f"{kind[:40]!r} is not an object type of the store")
    if name is None:
        return os.path.join(root, kind)
    if not valid_object_name(kind, name):
        raise UnsafePathError(
            f"{name[:80]!r} is not an object name: letters, digits, '.', '_', '-' "
            "(lower-case hex in data/), at most 200, not starting with a dot"
        )
    if kind == "data":
        return os.path.join(root, kind, name[:2], name)
    return os.path.join(root, kind, name)


def _permitted(role: str, method: str, kind: str, exists: bool) -> bool:
    """Whether ``role`` may ``method`` an object of ``kind`` that ``exists`` (or not): the
    one rule of append-only serving (module docstring)."""
    if method in ("GET", "HEAD"):
        return True
    if role == _OWNER or kind == "locks":
        return True
    return method == "POST" and not exists


def _kept(kind: str) -> _Refused:
    return _Refused(
        AccessDeniedError.http_status, f"append-only: an existing {kind} object is never replaced"
    )


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``(start, stop)`` of the one byte range asked for, ``None`` for the whole object
    (no header, or one this server ignores: several ranges, another unit). Raises
    :class:`_Refused` (416) when the range lies outside the object."""
    match = _RANGE.fullmatch(header.strip()) if header else None
    if match is None or match.group(1) == match.group(2) == "":
        return None
    first, last = (_bound(text) for text in match.groups())
    if first is not None:
        start, stop = first, last + 1 if last is not None else size
    else:
        assert last is not None
        start, stop = max(0, size - last), size
    if start >= size or stop <= start:
        raise _Refused(
            416,
            f"range {(header or '')[:60]!r} is outside the object ({size} bytes)",
            [(b"content-range", f"bytes */{size}".encode())],
        )
    return start, min(stop, size)


def _bound(digits: str) -> int | None:
    """A Range bound as a number (``None`` when absent); one of more than
    :data:`_RANGE_DIGITS` digits is taken as ``2**63``, past the end of any file."""
    if not digits:
        return None
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= _RANGE_DIGITS else 1 << 63


def _open_slice(
    path: str, range_header: str | None, read: bool
) -> tuple[int, int, tuple[int, int] | None, bytes]:
    """Open ``path`` (no symlink, regular files only) and, if ``read``, read its first
    slice: ``(fd, size, range or None, first slice)``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise _Refused(404, "no such object") from None
    except OSError:
        raise _Refused(404, "not a readable object") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Refused(404, "not a file")
        span = _byte_range(range_header, st.st_size)
        start, stop = span or (0, st.st_size)
        first = os.pread(fd, min(_SLICE, stop - start), start) if read else b""
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size, span, first


def _write_all(fd: int, data: bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _new_temporary(path: str) -> tuple[int, str]:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    return create_temporary(path, mode=0o600)


def _same_file(a: str, b: str) -> bool:
    return filecmp.cmp(a, b, shallow=False)


def _delete(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        raise _Refused(404, "no such object") from None


def _create_layout(root: str) -> None:
    for kind in RESTIC_TYPES:
        os.makedirs(object_file(root, kind), mode=0o700, exist_ok=True)


def _listing(root: str, kind: str) -> list[tuple[str, int]]:
    """``(name, size)`` of each object of ``kind`` (``data/`` spans its 2-hex folders)."""
    top = object_file(root, kind)
    folders = [top]
    if kind == "data":
        try:
            with os.scandir(top) as it:
                folders = [e.path for e in it if _HEX.fullmatch(e.name) and len(e.name) == 2]
        except FileNotFoundError:
            return []
    found: list[tuple[str, int]] = []
    for folder in folders:
        try:
            with os.scandir(folder) as it:
                found.extend(
                    (entry.name, entry.stat(follow_symlinks=False).st_size)
                    for entry in it
                    if valid_object_name(kind, entry.name) and entry.is_file(follow_symlinks=False)
                )
        except FileNotFoundError:
            continue
    return found


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _credential(scope: Scope) -> bytes | None:
    """The token a request carries: a bearer token or the password of basic auth."""
    text = _header(scope, b"authorization")
    if text is None:
        return None
    scheme, _, value = text.strip().partition(" ")
    if scheme.lower() == "bearer":
        return value.strip().encode("latin-1")
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            return None
        return decoded.partition(b":")[2]
    return None


async def _respond(
    send: Send, status: int, body: bytes = b"", headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    head = [(b"content-length", str(len(body)).encode()), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


class RestServer:
    """The ASGI app: one repository in ``root``, served by restic's REST protocol.

    ``token``: the writer's (append-only); ``owner_token``: the owner's (may also
    delete and replace); at least one is needed. ``max_object_size``, ``body_timeout``,
    ``min_body_rate``: the limits of one request body (module docstring). Run it with
    uvicorn (:meth:`serve`). Raises :class:`InvalidParameterError` for missing or equal
    tokens.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        token: str | None = None,
        owner_token: str | None = None,
        max_object_size: int = DEFAULT_MAX_OBJECT_SIZE,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        min_body_rate: int = DEFAULT_MIN_BODY_RATE,
        policy: OffloadPolicy | None = DEFAULT_POLICY,
    ) -> None:
        if not token and not owner_token:
            raise InvalidParameterError(
                "a store server needs a writer token, an owner token or both"
            )
        if max_object_size < 1 or body_timeout <= 0 or min_body_rate <= 0:
            raise InvalidParameterError(
                "max_object_size, body_timeout and min_body_rate must be positive"
            )
        self.root = os.path.abspath(os.fspath(root))
        self.max_object_size = max_object_size
        self.body_timeout = body_timeout
        self.min_body_rate = min_body_rate
        self.policy = policy
        self._tokens = tuple(
            (secret_text_bytes(secret, f"the {role}'s token"), role)
            for secret, role in ((token, _WRITER), (owner_token, _OWNER))
            if secret
        )
        if len(self._tokens) == 2 and hmac.compare_digest(self._tokens[0][0], self._tokens[1][0]):
            raise InvalidParameterError("the writer's and the owner's tokens must differ")
        # requests with a valid token in progress, per role (on the loop's thread)
        self._active = {_WRITER: 0, _OWNER: 0}

    def __repr__(self) -> str:
        roles = "+".join(role for _, role in self._tokens)
        return f"<RestServer {self.root!r} ({roles})>"

    def __reduce__(self) -> Any:
        raise TypeError("a RestServer holds its tokens and does not pickle")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        try:
            await self._dispatch(scope, receive, send)
        except _Refused as exc:
            level = logging.DEBUG if exc.status in (404, 416) else logging.WARNING
            _log.log(
                level, "refused %s %r: %s (%d)", scope["method"], scope["path"], exc, exc.status
            )
            body = b"" if scope["method"] == "HEAD" else f"{exc}\n".encode()
            await _respond(send, exc.status, body, exc.headers)

    def _role(self, scope: Scope) -> str:
        """The role whose token the request carries; compares with every token (no early
        exit). Raises :class:`_Refused` (401)."""
        given = _credential(scope)
        role = None
        for secret, who in self._tokens:
            if given is not None and hmac.compare_digest(given, secret):
                role = who
        if role is None:
            raise _Refused(
                401,
                "no valid token",
                [(b"www-authenticate", b'Basic realm="streamcrypt store"'), _CLOSE],
            )
        return role

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on a worker thread, awaited to its end even when the request is
        cancelled (each call is bounded: a slice, an fsync, a listing), so a descriptor is
        never closed while a worker still uses it."""
        with anyio.CancelScope(shield=True):
            return await run_blocking(self.policy, fn, *args)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a request with a valid token if a slot is free for its role: the one
        place slots are given. At most :data:`MAX_REQUESTS` in all, of which the writers'
        at most ``MAX_REQUESTS - OWNER_REQUESTS``. Raises :class:`_Refused` (401 without
        a token, 503 over the limit)."""
        role = self._role(scope)
        held = self._active[_WRITER] if role == _WRITER else sum(self._active.values())
        limit = MAX_REQUESTS - OWNER_REQUESTS if role == _WRITER else MAX_REQUESTS
        if held >= limit:
            raise _Refused(
                503,
                f"{limit} requests{' of writers' if role == _WRITER else ''} are in "
                "progress; try again",
                [(b"retry-after", b"1"), _CLOSE],
            )
        self._active[role] += 1
        try:
            await self._route(role, scope, receive, send)
        finally:
            self._active[role] -= 1

    async def _route(self, role: str, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        parts = scope["path"].split("/")[1:]
        try:
            if parts == [""]:
                await self._repository(method, scope, send)
                return
            if parts == ["config"]:
                kind, path = "config", object_file(self.root, "config")
            elif len(parts) == 2 and parts[1] == "":
                if method != "GET":
                    raise _Refused(405, "a type folder is only listed")
                await self._list(parts[0], scope, send)
                return
            elif len(parts) == 2:
                kind, path = parts[0], object_file(self.root, parts[0], parts[1])
            else:
                raise UnsafePathError("not a path of the protocol")
        except UnsafePathError as exc:
            raise _Refused(400, str(exc)) from None
        if method in ("GET", "HEAD"):
            await self._get(method, path, scope, send)
        elif method == "POST":
            await self._post(role, kind, path, scope, receive, send)
        elif method == "DELETE":
            if not _permitted(role, "DELETE", kind, True):
                raise _Refused(
                    AccessDeniedError.http_status, f"append-only: {kind} objects are never deleted"
                )
            await self._run(_delete, path)
            await _respond(send, 200)
        else:
            raise _Refused(405, "method not allowed")

    async def _repository(self, method: str, scope: Scope, send: Send) -> None:
        if method == "POST" and b"create=true" in bytes(scope.get("query_string", b"")).split(b"&"):
            await self._run(_create_layout, self.root)
            await _respond(send, 200)
        elif method == "DELETE":
            raise _Refused(501, "a repository is not deleted through the server")
        else:
            raise _Refused(400, "the repository root takes POST ?create=true only")

    async def _list(self, kind: str, scope: Scope, send: Send) -> None:
        if kind not in TYPES:
            raise _Refused(404, "not an object type")
        found = await self._run(_listing, self.root, kind)
        if API_V2 in (_header(scope, b"accept") or ""):
            doc: list[Any] = [{"name": name, "size": size} for name, size in found]
            media = API_V2
        else:
            doc, media = [name for name, _ in found], API_V1
        await _respond(send, 200, json.dumps(doc).encode(), [(b"content-type", media.encode())])

    async def _get(self, method: str, path: str, scope: Scope, send: Send) -> None:
        ranged = _header(scope, b"range") if method == "GET" else None
        fd, size, span, first = await self._run(_open_slice, path, ranged, method == "GET")
        start, stop = span or (0, size)
        try:
            headers = [
                (b"content-length", str(stop - start).encode()),
                (b"content-type", b"application/octet-stream"),
                (b"accept-ranges", b"bytes"),
            ]
            if span is not None:
                headers.append((b"content-range", f"bytes {start}-{stop - 1}/{size}".encode()))
            status = 200 if span is None else 206
            await send({"type": "http.response.start", "status": status, "headers": headers})
            if method == "HEAD":
                await send({"type": "http.response.body", "body": b""})
                return
            offset = start + len(first)
            chunk = first
            while offset < stop:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                chunk = await self._run(os.pread, fd, min(_SLICE, stop - offset), offset)
                if not chunk:
                    break  # the file shrank under us: the length sent cannot be met
                offset += len(chunk)
            await send({"type": "http.response.body", "body": chunk})
        finally:
            os.close(fd)

    async def _post(
        self, role: str, kind: str, path: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        declared = _header(scope, b"content-length")
        if declared and declared.isdigit() and int(declared) > self.max_object_size:
            raise self._too_large()
        replace = _permitted(role, "POST", kind, True)
        fd, tmp = await self._run(_new_temporary, path)
        try:
            await self._receive_body(receive, fd)
            if not replace and await self._run(os.path.lexists, path):
                if not await self._run(_same_file, tmp, path):
                    raise _kept(kind)
                await self._run(discard_temporary, fd, tmp)
            else:
                await self._run(partial(commit_temporary, exclusive=not replace), fd, tmp, path)
            fd = -1
        except FileExistsError:
            fd = -1  # a concurrent upload of the same name won the link; commit removed ours
            raise _kept(kind) from None
        finally:
            if fd != -1:
                await self._run(discard_temporary, fd, tmp)
        await _respond(send, 200)

    def _too_large(self) -> _Refused:
        return _Refused(
            LimitExceededError.http_status,
            f"the body is over the limit of {self.max_object_size} bytes",
        )

    async def _receive_body(self, receive: Receive, fd: int) -> None:
        """Write the request body to ``fd`` in slices. Raises :class:`_Refused` (408 when
        a piece stalls for ``body_timeout`` or the body falls behind its deadline,
        ``body_timeout`` after its start plus a second per ``min_body_rate`` bytes
        received; 413 over the size limit, 400 when the client went away)."""
        pending, total, more = bytearray(), 0, True
        started = anyio.current_time()
        while more:
            deadline = started + self.body_timeout + total / self.min_body_rate
            try:
                with anyio.fail_after(min(self.body_timeout, deadline - anyio.current_time())):
                    message = await receive()
            except TimeoutError:
                raise _Refused(
                    PeerTimeoutError.http_status,
                    f"the body stalled for {self.body_timeout} s or came slower than "
                    f"{self.min_body_rate} bytes/s",
                ) from None
            if message["type"] == "http.disconnect":
                raise _Refused(400, "the client went away before the end of the body")
            body = message.get("body", b"")
            total += len(body)
            if total > self.max_object_size:
                raise self._too_large()
            pending += body
            more = bool(message.get("more_body", False))
            if len(pending) >= _SLICE or (pending and not more):
                data, pending = pending, bytearray()
                await self._run(_write_all, fd, data)

    @staticmethod
    def bind(listen: str) -> socket.socket:
        """A listening TCP socket on ``HOST:PORT`` (``[::1]:PORT`` for IPv6; port 0: a free
        one), for :meth:`serve`. Raises :class:`InvalidParameterError` for another form,
        ``OSError`` when the address cannot be bound."""
        host, sep, port = listen.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not sep or not host or not port.isdigit() or int(port) > 65535:
            raise InvalidParameterError(f"{listen!r} is not HOST:PORT (e.g. 127.0.0.1:8000)")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, int(port)))
            sock.listen(128)
        except BaseException:
            sock.close()
            raise
        return sock

    def serve(self, sock: socket.socket) -> None:
        """Serve under uvicorn on the listening ``sock`` until SIGINT or SIGTERM (needs
        uvicorn: the ``server`` extra). No access log: refusals are logged as warnings of
        ``streamcrypt.backup.server`` (method, path, reason; never a header). The limits
        of connections are the module docstring's: uvicorn's ``limit_concurrency`` is not
        used, as it counts connections that never sent a head."""
        import uvicorn

        config = uvicorn.Config(
            self,
            lifespan="off",
            ws="none",  # an Upgrade request stays in the bounded h11 protocol
            access_log=False,
            log_level="warning",
            http=_bounded_h11(),
            h11_max_incomplete_event_size=_MAX_HEAD,
            timeout_keep_alive=30,
        )
        uvicorn.Server(config).run(sockets=[sock])


def _bounded_h11() -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the two limits of connections (module docstring): at
    most :data:`MAX_CONNECTIONS`, and each request head within :data:`HEAD_TIMEOUT`.
    (Made here because uvicorn is an optional extra.)"""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11(H11Protocol):
        # A head is awaited while h11 sees the client IDLE: from the opening, and from
        # the first byte after a response (or the response's end, when that byte came
        # before it); the idle time between requests is uvicorn's keep-alive timeout.
        # The clock stops when h11 has the whole head.
        _head_clock: asyncio.TimerHandle | None = None
        _idle_since = 0.0  # when it last began to wait for a head (opened, or answered)

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._idle_since = self.loop.time()
            if len(self.connections) > MAX_CONNECTIONS and not self._make_room():
                _log.warning("refused a connection: %d are in a request", MAX_CONNECTIONS)
                self.transport.close()
                return
            self._start_head_clock()

        def _make_room(self) -> bool:
            """Close the connection that has waited longest for a request head, if more
            than :data:`MAX_CONNECTIONS` are open (the one place a connection is chosen
            to go); ``False`` when every other one is in a request."""
            live = [c for c in self.connections if not c.transport.is_closing()]
            if len(live) <= MAX_CONNECTIONS:
                return True
            waiting = [
                c
                for c in live
                if c is not self and isinstance(c, BoundedH11) and c.conn.their_state is h11.IDLE
            ]
            if not waiting:
                return False
            oldest = min(waiting, key=lambda c: c._idle_since)
            _log.debug("closed the connection waiting longest for a head: %d are open", len(live))
            oldest.transport.close()
            return True

        def data_received(self, data: bytes) -> None:
            if self.conn.their_state is h11.IDLE:
                self._start_head_clock()
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._stop_head_clock()

        def on_response_complete(self) -> None:
            self._idle_since = self.loop.time()
            super().on_response_complete()
            if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
                self._start_head_clock()  # part of a pipelined head came with the last

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_head_clock()
            super().connection_lost(exc)

        def _start_head_clock(self) -> None:
            if self._head_clock is None:
                self._head_clock = self.loop.call_later(HEAD_TIMEOUT, self._head_late)

        def _stop_head_clock(self) -> None:
            if self._head_clock is not None:
                self._head_clock.cancel()
                self._head_clock = None

        def _head_late(self) -> None:
            self._head_clock = None
            _log.debug("closed a connection: no request head within %s s", HEAD_TIMEOUT)
            self.transport.close()

    return BoundedH11
