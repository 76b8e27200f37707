"""The backup store over restic's REST protocol: ``rest:http://[user:TOKEN@]host:port/``.

:class:`RestFiles` makes the few file-system calls a :class:`~._store.Store` makes, with
fsspec's names and result shapes (``exists``, ``cat_file``, ``pipe_file``, ``rm_file``,
``ls``, ``find``, ``makedirs``), as requests to a REST server (``streamcrypt backup
serve``, or restic's rest-server). The store's paths map onto the protocol's objects in
one function, :meth:`RestFiles._object`: ``config`` is ``/config``,
``data/<2 hex>/<id>`` is ``/data/<id>``, ``index|snapshots|locks|keys/<name>`` is
``/<type>/<name>``; the folders are listings (``GET /<type>/``, API v2). A name the
server would refuse (its rule, :func:`._server.valid_object_name`) fails here first.

Credentials (:func:`_authorization`): the URL's ``user:TOKEN`` as HTTP basic auth (as
restic sends them); without a password in the URL, ``token=`` (a storage option), else
the first line of the file named by ``$STREAMCRYPT_REST_TOKEN_FILE``, else
``$STREAMCRYPT_REST_TOKEN``: a command line then need not hold the token, where ``ps``
shows it to every user. Such a token goes as basic auth with the URL's user name, or
as a bearer token without one. A 401 or 403 is
:class:`~streamcrypt.errors.AccessDeniedError` (an append-only server refuses deletes
and overwrites: ``forget`` and ``prune`` need the owner's token), a 404
``FileNotFoundError``, anything else unexpected ``OSError``.

Blocking (``http.client``): the store calls it on the engine's worker threads; each call
takes an idle kept-alive connection or opens one. A request that fails on a reused
connection (the server closed it while idle) is sent once more on a new one; this is
safe for uploads too, as a server accepts a body equal to the stored object unchanged.
"""

from __future__ import annotations

import base64
import http.client
import ipaddress
import os
import ssl
import warnings
from typing import Any
from urllib.parse import SplitResult, unquote

from ..errors import AccessDeniedError, FormatError, InvalidParameterError, LimitExceededError
from ..keys import load_json, secret_text_bytes
from ..keys.keyfile import read_secret_file
from ._server import API_V2, TYPES, valid_object_name
from ._store import split_url

#: Seconds a connection may wait for the server on any one read or write.
DEFAULT_TIMEOUT = 120.0
#: The environment variable naming a file whose first line is the token (as ``backup
#: serve --token-file`` reads its own), for a URL without one.
TOKEN_FILE_VARIABLE = "STREAMCRYPT_REST_TOKEN_FILE"
#: The environment variable holding the token itself, for a URL without one.
TOKEN_VARIABLE = "STREAMCRYPT_REST_TOKEN"
#: The longest token line read from a file.
_MAX_TOKEN = 4096


def _given_token(token: str | None) -> bytes | None:
    """The token for a URL without a password: ``token``, else the first line of the
    file ``$STREAMCRYPT_REST_TOKEN_FILE`` names, else ``$STREAMCRYPT_REST_TOKEN``.
    Raises :class:`InvalidParameterError` (a file without a token, text that is not
    UTF-8; never quoting it), ``OSError`` when the file cannot be read."""
    if token:
        return secret_text_bytes(token, "the REST token")
    path = os.environ.get(TOKEN_FILE_VARIABLE)
    if path:
        raw = read_secret_file(path, _MAX_TOKEN, "the REST token file")
        line = raw[:_MAX_TOKEN].split(b"\n", 1)[0].strip()
        if not line:
            raise InvalidParameterError(
                f"the REST token file {path} (${TOKEN_FILE_VARIABLE}) holds no token"
            )
        return line
    text = os.environ.get(TOKEN_VARIABLE)
    return secret_text_bytes(text.strip(), f"${TOKEN_VARIABLE}") if text else None


def _authorization(parts: SplitResult, token: str | None) -> dict[str, str]:
    """The ``Authorization`` header for the URL ``parts`` (module docstring): the one
    place the client's credentials are chosen. Raises :class:`InvalidParameterError`
    (never quoting the token) for a token holding a control character (a line break
    from ``$(cat file)``, say), which no header may hold."""
    secret = (
        secret_text_bytes(unquote(parts.password), "the URL's token")
        if parts.password is not None
        else _given_token(token)
    )
    if secret is None:
        return {}
    if any(byte < 0x20 or byte == 0x7F for byte in secret):
        raise InvalidParameterError(
            "the REST token holds a control character (a line break?), which no HTTP "
            "header may hold; its value is not shown"
        )
    if parts.password is None and parts.username is None:
        return {"Authorization": "Bearer " + secret.decode("latin-1")}
    user = secret_text_bytes(unquote(parts.username or ""), "the URL's user name")
    return {"Authorization": "Basic " + base64.b64encode(user + b":" + secret).decode()}


def _is_loopback(host: str) -> bool:
    """True for ``localhost`` or a loopback address (``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RestFiles:
    """The store's file calls over the REST protocol, for the server at ``url``
    (``http://[user:TOKEN@]host:port[/path]``, without the ``rest:`` of a location;
    ``token``: see the module docstring). ``root`` is the prefix of every path the store
    passes (the URL without credentials). Raises :class:`InvalidParameterError` for
    another kind of URL, or one :func:`._store.split_url` refuses."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = DEFAULT_TIMEOUT):
        self._idle: list[http.client.HTTPConnection] = []
        parts = split_url(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidParameterError(
                "a REST store location is rest:http://[user:TOKEN@]host:port/ (or https)"
            )
        host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
        self._prefix = parts.path.rstrip("/")
        self.root = f"{parts.scheme}://{netloc}{self._prefix}"
        self._https = parts.scheme == "https"
        self._address = (parts.hostname, parts.port)
        self._timeout = timeout
        self._auth = _authorization(parts, token)
        if self._auth and not self._https and not _is_loopback(parts.hostname):
            warnings.warn(
                f"the REST store {self.root} gets its token in clear text (http:// to a "
                "host that is not loopback): use https://, or http only on a private "
                "network you trust (docs/BACKUP.md)",
                stacklevel=2,
            )

    def __repr__(self) -> str:
        return f"<RestFiles {self.root!r}>"

    def __reduce__(self) -> Any:
        raise TypeError("RestFiles holds the server's credentials and does not pickle")

    def close(self) -> None:
        """Close the idle connections."""
        while self._idle:
            self._idle.pop().close()

    def __del__(self) -> None:  # a Store has no close: its connections go with it
        self.close()

    # -- requests ---------------------------------------------------------------------------

    def _connect(self) -> http.client.HTTPConnection:
        host, port = self._address
        if self._https:
            return http.client.HTTPSConnection(
                host, port, timeout=self._timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(host, port, timeout=self._timeout)

    def _request(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[http.client.HTTPResponse, bytes]:
        """Send one request; the response and its whole body. Raises ``OSError`` when the
        server cannot be reached, :class:`InvalidParameterError` (without the text of
        http.client's ``ValueError``, which quotes the header) when a request cannot be
        sent."""
        for attempt in (1, 2):
            try:
                conn, reused = self._idle.pop(), True
            except IndexError:
                conn, reused = self._connect(), False
            refused = False
            try:
                conn.request(
                    method,
                    self._prefix + target,
                    body=body,
                    headers={**self._auth, **(headers or {})},
                )
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                if reused and attempt == 1:
                    continue
                raise OSError(f"{method} {self.root}{target} failed: {exc}") from None
            except ValueError:  # http.client quotes the header it refuses: the token
                conn.close()
                refused = True
            except BaseException:
                conn.close()
                raise
            if refused:  # raised outside the handler: no token in __context__ either
                raise InvalidParameterError(
                    f"{method} {self.root}{target} was not sent: http.client refused a "
                    "header or the target (not shown: a header holds the token)"
                )
            if response.will_close:
                conn.close()
            else:
                self._idle.append(conn)
            return response, data
        raise AssertionError("unreachable")  # pragma: no cover

    def _check(self, method: str, target: str, response: http.client.HTTPResponse) -> None:
        """Raise the typed error for a response that is not a success."""
        status = response.status
        if status in (200, 206):
            return
        what = f"{method} {target}"
        if status == 404:
            raise FileNotFoundError(f"{self.root}{target}: no such object on the server")
        if status == 401:
            raise AccessDeniedError(
                f"{self.root} refused the credentials ({what}): check the token (the URL's, "
                f"or ${TOKEN_FILE_VARIABLE}'s file, or ${TOKEN_VARIABLE})"
            )
        if status == 403:
            raise AccessDeniedError(
                f"{self.root} refused {what}: the server is append-only for this token "
                "(it never deletes or replaces an object); forget and prune need the "
                "owner's token"
            )
        if status == 413:
            raise LimitExceededError(f"{self.root} refused {what}: the object is too large")
        raise OSError(f"{self.root} answered {status} {response.reason} to {what}")

    # -- paths -------------------------------------------------------------------------------

    def _relative(self, path: str) -> str:
        path = path.rstrip("/")
        if path == self.root:
            return ""
        if not path.startswith(self.root + "/"):
            raise InvalidParameterError(f"{path!r} is not below {self.root!r}")
        return path[len(self.root) + 1 :]

    def _object(self, path: str) -> str | None:
        """The request target of the object at ``path``, ``None`` for a folder. Raises
        :class:`InvalidParameterError` for a name no server takes."""
        parts = self._relative(path).split("/")
        if parts == ["config"]:
            return "/config"
        if parts in ([""], ["data"]) or (len(parts) == 1 and parts[0] in TYPES):
            return None
        if parts[0] == "data" and len(parts) in (2, 3) and len(parts[1]) == 2:
            if len(parts) == 2:
                return None
            if parts[2].startswith(parts[1]):
                parts = ["data", parts[2]]
        if len(parts) != 2 or not valid_object_name(parts[0], parts[1]):
            raise InvalidParameterError(
                f"{path!r} is not an object a REST server holds: a name of letters, digits, "
                "'.', '_' and '-' (hex under data/), at most 200, not starting with a dot"
            )
        return f"/{parts[0]}/{parts[1]}"

    def _path(self, kind: str, name: str) -> str:
        if kind == "data":
            return f"{self.root}/data/{name[:2]}/{name}"
        return f"{self.root}/{kind}/{name}"

    def _list(self, kind: str) -> dict[str, int]:
        """Paths and sizes of the objects of ``kind`` (API v2 listing)."""
        target = f"/{kind}/"
        response, data = self._request("GET", target, headers={"Accept": API_V2})
        if response.status == 404:
            return {}
        self._check("GET", target, response)
        if response.getheader("Content-Type", "").split(";")[0].strip() != API_V2:
            raise FormatError(f"{self.root} lists without sizes (REST API v1); v2 is needed")
        doc = load_json(data, f"the listing of {kind}/ from {self.root}")
        try:
            found = {self._path(kind, e["name"]): int(e["size"]) for e in doc}
        except (ValueError, TypeError, KeyError) as exc:
            raise FormatError(f"{self.root} sent a malformed listing of {kind}/: {exc}") from None
        return {
            p: size for p, size in found.items() if valid_object_name(kind, p.rsplit("/", 1)[1])
        }

    def _files_below(self, path: str, maxdepth: int | None) -> dict[str, int]:
        rel = self._relative(path)
        if rel == "":
            response, _ = self._request("HEAD", "/config")
            found = {}
            if response.status != 404:
                self._check("HEAD", "/config", response)
                found[f"{self.root}/config"] = int(response.getheader("Content-Length") or 0)
            if maxdepth is None or maxdepth > 1:
                for kind in TYPES:
                    found.update(self._list(kind))
            return found
        kind, _, sub = rel.partition("/")
        listed = self._list(kind)
        return {p: s for p, s in listed.items() if not sub or p.startswith(f"{path}/")}

    # -- the file-system calls -----------------------------------------------------------------

    def exists(self, path: str) -> bool:
        target = self._object(path)
        if target is None:
            return True  # folders of a REST repository always exist (they list empty)
        response, _ = self._request("HEAD", target)
        if response.status == 404:
            return False
        self._check("HEAD", target, response)
        return True

    def cat_file(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        target = self._object(path)
        if target is None:
            raise IsADirectoryError(path)
        start = start or 0
        if end is not None and end <= start:
            return b""
        headers = {}
        if start or end is not None:
            headers["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
        response, data = self._request("GET", target, headers=headers)
        if response.status == 416:
            return b""
        self._check("GET", target, response)
        if response.status == 200 and headers:  # a server that ignored the range
            return data[start:end]
        return data

    def pipe_file(self, path: str, value: bytes) -> None:
        target = self._object(path)
        if target is None:
            raise IsADirectoryError(path)
        response, _ = self._request(
            "POST", target, bytes(value), {"Content-Type": "application/octet-stream"}
        )
        self._check("POST", target, response)

    def rm_file(self, path: str) -> None:
        target = self._object(path)
        if target is None:
            raise IsADirectoryError(path)
        response, _ = self._request("DELETE", target)
        self._check("DELETE", target, response)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Create the repository when ``path`` is its root; other folders need nothing."""
        if self._relative(path) == "":
            response, _ = self._request("POST", "/?create=true")
            self._check("POST", "/?create=true", response)

    def ls(self, path: str, detail: bool = True) -> list[Any]:
        found = self._files_below(path, 1)
        if not detail:
            return sorted(found)
        return [{"name": p, "type": "file", "size": s} for p, s in sorted(found.items())]

    def find(
        self, path: str, maxdepth: int | None = None, detail: bool = False
    ) -> dict[str, Any] | list[str]:
        found = self._files_below(path, maxdepth)
        if not detail:
            return sorted(found)
        return {p: {"name": p, "type": "file", "size": s} for p, s in found.items()}
