"""Key providers: a picklable name for where a worker finds its key, never the key itself.

A task sent to a Dask worker is pickled, and :class:`~streamcrypt.keys.SecretKey` refuses
to be pickled. What travels instead is a provider: a small frozen object that says where
the key comes from (an environment variable, a file, a password-protected KeyRing file, a
PKCS#11 token, a callable of the user's) and reads it on the worker, at the start of each task. Its repr
names the source, never a secret; a KeyRing file's password is itself named by where it
comes from (an environment variable or a file), so it never travels either.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InvalidKeySizeError, InvalidParameterError, UnknownKeyError
from ..keys import KeyRing, Pkcs11Key, SecretKey, key_bytes, keyfile, secret_text_bytes

#: What a provider resolves to: a key (in memory or in a token), or a ring (its active key
#: encrypts, any key by id decrypts).
KeyMaterial = SecretKey | Pkcs11Key | KeyRing
_KEY_SIZE = 32


def _decode_key(text: bytes, where: str, *, raw: bool = False) -> bytes:
    """64 hex digits or base64 of 32 bytes (surrounding whitespace ignored); with ``raw``
    (a file) also 32 raw bytes, unless they are all printable ASCII: such a value is typed
    text (a password, a hex key of the wrong size), never key material."""
    if raw and len(text) == _KEY_SIZE and not all(0x20 <= b < 0x7F for b in text):
        return text
    stripped = text.strip()
    try:
        if len(stripped) == 2 * _KEY_SIZE:
            return bytes.fromhex(stripped.decode("ascii"))
        decoded = base64.b64decode(stripped, validate=True)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        decoded = b""
    if len(decoded) != _KEY_SIZE:
        forms = "raw, 64 hex digits or base64" if raw else "64 hex digits or base64"
        raise InvalidKeySizeError(f"{where} must hold a 32-byte key ({forms})")
    return decoded


class KeyProvider:
    """Where a worker gets its key. Subclasses are frozen dataclasses that name a source
    and implement :meth:`resolve`; they pickle, and their repr shows no secret."""

    __slots__ = ()

    def resolve(self) -> KeyMaterial:
        """Read the key where the provider says (on the worker). Raises
        :class:`UnknownKeyError` when the source is missing, :class:`InvalidKeySizeError`
        for a key of the wrong size."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class EnvKey(KeyProvider):
    """The key in environment variable ``variable`` of each worker (hex or base64)."""

    variable: str
    key_id: str = ""

    def resolve(self) -> KeyMaterial:
        value = os.environ.get(self.variable)
        if value is None:
            raise UnknownKeyError(
                f"environment variable {self.variable} is not set on this worker; "
                "set it in the environment the workers start in"
            )
        what = f"environment variable {self.variable}"
        raw = _decode_key(secret_text_bytes(value, what), what)
        return SecretKey(raw, key_id=self.key_id)


def _read_file(path: str, what: str) -> bytes:
    try:
        return keyfile.read_secret_file(path, 1 << 20, what)
    except OSError as exc:
        raise UnknownKeyError(
            f"{what} {path!r} cannot be read on this worker ({exc.strerror or exc})"
        ) from None


@dataclass(frozen=True, slots=True)
class FileKey(KeyProvider):
    """The key in a file on each worker: a ``streamcrypt keygen`` key file (its id is used
    unless ``key_id`` is given), 64 hex digits, base64, or 32 raw bytes that are not all
    printable (printable text of 32 characters is a typed password, never a key)."""

    path: str
    key_id: str = ""

    def resolve(self) -> KeyMaterial:
        data = _read_file(self.path, "key file")
        if keyfile.KEY_FILE_MAGIC.encode() in data:
            text = data.decode("utf-8", "replace")
            key = keyfile.secret_key_from_text(text, source=f"key file {self.path!r}")
            return SecretKey(key.secret_bytes(), key_id=self.key_id or key.key_id)
        raw = _decode_key(data, f"key file {self.path!r}", raw=True)
        return SecretKey(raw, key_id=self.key_id)


# A KeyRing file's password KDF (Argon2id) takes a good part of a second: each worker
# process keeps the ring it opened last per file, with what it was opened from (the file's
# mtime and size, and a digest of the password under a key of this process), so a changed
# file or password opens it again and the ring of an older version is let go.
_RINGS: dict[str, tuple[tuple[object, ...], KeyRing]] = {}
_RINGS_LOCK = threading.Lock()
_DIGEST_KEY = os.urandom(32)


@dataclass(frozen=True, slots=True)
class KeyRingFile(KeyProvider):
    """A password-protected :class:`KeyRing` file (``KeyRing.to_json``) on each worker.

    The password is named, not given: ``password_env`` (an environment variable of the
    worker) or ``password_file`` (a file on the worker, trailing newline dropped). Each
    worker process opens the ring once (the KDF is slow) while the file is unchanged.
    """

    path: str
    password_env: str | None = None
    password_file: str | None = None

    def __post_init__(self) -> None:
        if (self.password_env is None) == (self.password_file is None):
            raise InvalidParameterError("KeyRingFile takes one of password_env= or password_file=")

    def _password(self) -> bytes:
        if self.password_env is not None:
            value = os.environ.get(self.password_env)
            if value is None:
                raise UnknownKeyError(
                    f"environment variable {self.password_env} (the key ring password) "
                    "is not set on this worker"
                )
            return secret_text_bytes(value, f"environment variable {self.password_env}")
        assert self.password_file is not None
        return _read_file(self.password_file, "key ring password file").rstrip(b"\r\n")

    def resolve(self) -> KeyMaterial:
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise UnknownKeyError(
                f"key ring file {self.path!r} cannot be read on this worker ({exc.strerror or exc})"
            ) from None
        password = self._password()
        opened_from = (
            st.st_mtime_ns,
            st.st_size,
            hmac.digest(_DIGEST_KEY, password, "sha256"),
        )
        with _RINGS_LOCK:
            cached = _RINGS.get(self.path)
            if cached is not None and cached[0] == opened_from:
                return cached[1]
            ring = KeyRing.from_json(_read_file(self.path, "key ring file"), password)
            _RINGS[self.path] = (opened_from, ring)
            return ring


_TOKEN_KEYS: dict[tuple[str, str | None], Pkcs11Key] = {}


@dataclass(frozen=True, slots=True)
class TokenKey(KeyProvider):
    """A key in a PKCS#11 token each worker reaches, named by its RFC 7512 URI
    (:meth:`~streamcrypt.keys.Pkcs11Key.from_uri`), the PIN by ``pin-source=env:NAME``
    there (an environment variable of the worker). Each worker process opens it once.
    Raises :class:`~streamcrypt.errors.TokenError` / ``TokenPinError`` on the worker."""

    uri: str
    key_id: str | None = None

    def resolve(self) -> KeyMaterial:
        with _RINGS_LOCK:
            key = _TOKEN_KEYS.get((self.uri, self.key_id))
            if key is None:
                key = _TOKEN_KEYS[(self.uri, self.key_id)] = Pkcs11Key.from_uri(
                    self.uri, key_id=self.key_id
                )
            return key


@dataclass(frozen=True, slots=True)
class CallableKey(KeyProvider):
    """A function of the user's, called on the worker, that returns the key (a
    :class:`SecretKey`, a :class:`KeyRing` or 32 bytes): a secrets manager, a KMS unwrap.

    The function travels by pickle (cloudpickle), so it must not capture a key itself.
    """

    function: Callable[[], KeyMaterial | bytes]
    key_id: str = ""

    def resolve(self) -> KeyMaterial:
        got = self.function()
        if isinstance(got, SecretKey | KeyRing):
            return got
        if isinstance(got, bytes | bytearray):
            return SecretKey(
                key_bytes(got, "the key callable's key", _KEY_SIZE), key_id=self.key_id
            )
        raise InvalidParameterError(
            f"the key callable returned {type(got).__name__}, not a SecretKey, KeyRing or bytes"
        )

    def __repr__(self) -> str:
        name = getattr(self.function, "__qualname__", type(self.function).__name__)
        return f"CallableKey({name})"


def as_provider(key: object, what: str = "key") -> KeyProvider:
    """``key`` if it is a provider; raises :class:`InvalidParameterError` for anything
    else (keys themselves never travel to workers)."""
    if isinstance(key, KeyProvider):
        return key
    raise InvalidParameterError(
        f"{what} must be a key provider (EnvKey, FileKey, KeyRingFile, TokenKey or "
        f"CallableKey), not "
        f"{type(key).__name__}: keys never travel to workers, providers say where to find them"
    )
