"""Secret key objects whose repr never shows the bytes, the one rule that keeps secrets out
of pickles (:class:`HoldsSecrets`), and small byte utilities."""

from __future__ import annotations

import hmac
import os
from typing import ClassVar, NoReturn

from ..abc import Buffer
from ..errors import InvalidKeySizeError, InvalidParameterError

_BYTES_LIKE = "bytes-like (bytes, bytearray, memoryview)"
_KINDS = f"{_BYTES_LIKE} or a SecretKey"


def _wrong_kind(key: object, what: str, kinds: str) -> InvalidParameterError:
    """The error for a key of the wrong type: what a key must be, and what to do instead.

    Names only the type, never the value (a str key may be a secret typed by hand).
    """
    hint = ""
    if key is None:
        hint = " (no key was given)"
    elif isinstance(key, str):
        hint = (
            ": a str is not key material; for a hex key use bytes.fromhex(text), for a "
            "password derive a key with streamcrypt.keys.derive_key_from_password()"
        )
    return InvalidParameterError(f"{what} must be {kinds}, not {type(key).__name__}{hint}")


def key_bytes(
    key: Buffer | SecretKey, what: str = "a key", sizes: int | tuple[int, ...] = ()
) -> bytes:
    """The raw bytes of a key given as bytes-like or a :class:`SecretKey`, of one of
    ``sizes`` bytes where given (else the length is the caller's to check).

    Raises :class:`InvalidParameterError` (naming what a key must be) for anything else,
    ``str`` and ``None`` included, and :class:`InvalidKeySizeError` naming ``what`` and
    the sizes it may have, or for a wiped :class:`SecretKey`.
    """
    if isinstance(key, SecretKey):
        raw = key.secret_bytes()
        if not raw:  # a SecretKey is never made empty: this one was wiped
            raise InvalidKeySizeError(f"{what} was wiped: its material is gone")
    elif isinstance(key, bytes | bytearray | memoryview):
        raw = bytes(key)
    else:
        raise _wrong_kind(key, what, _KINDS)
    allowed = (sizes,) if isinstance(sizes, int) else sizes
    if allowed and len(raw) not in allowed:
        *most, last = (str(size) for size in allowed)
        listed = f"{', '.join(most)} or {last}" if most else last
        raise InvalidKeySizeError(f"{what} must be {listed} bytes, got {len(raw)}")
    return raw


def secret_text_bytes(secret: str | Buffer, what: str = "a password") -> bytes:
    """A password, passphrase or key text as bytes (``str`` as UTF-8, bytes-like as is):
    the one place a secret ``str`` is encoded.

    Raises :class:`InvalidParameterError` naming only ``what`` and the type: for another
    type, and for a ``str`` that is not valid text (a lone surrogate, which is what a
    non-UTF-8 byte in an environment variable or argument becomes), whose encoding error
    would carry the whole secret in its arguments.
    """
    if isinstance(secret, str):
        try:
            return secret.encode("utf-8")
        except UnicodeEncodeError:
            pass  # raised below, outside the handler: no secret in __context__ either
        raise InvalidParameterError(
            f"{what} is not valid text: it holds a character that has no UTF-8 form (a "
            "non-UTF-8 byte read from the environment or a command line); its value is "
            "not shown"
        )
    if isinstance(secret, bytes | bytearray | memoryview):
        return bytes(secret)
    raise InvalidParameterError(f"{what} must be str or bytes, not {type(secret).__name__}")


def random_bytes(n: int) -> bytes:
    """``n`` bytes from the operating system's CSPRNG."""
    if n < 0:
        raise InvalidParameterError(f"random_bytes needs a non-negative size, got {n}")
    return os.urandom(n)


def constant_time_equal(a: Buffer, b: Buffer) -> bool:
    """Compare two byte strings in time independent of where they differ."""
    return hmac.compare_digest(bytes(a), bytes(b))


def wipe(buf: bytearray | memoryview | SecretKey) -> None:
    """Best-effort overwrite with zeros (Python may hold other copies; see SECURITY notes)."""
    if isinstance(buf, SecretKey):
        buf.wipe()
        return
    view = memoryview(buf).cast("B")
    if view.readonly:
        raise InvalidParameterError("wipe needs a writable buffer (bytearray), not bytes")
    view[:] = bytes(len(view))


class HoldsSecrets:
    """Base of every type that holds a secret (key bytes, a password, a passphrase, a PSK,
    a private key): its instances refuse to be pickled, and so to be copied, with a
    :class:`TypeError` naming the class and saying what to do instead.

    The one mechanism that keeps secrets out of pickles (a pickle is a file, a queue
    message, a cache entry, a Dask task: it outlives the process and leaves it) and
    stateful ciphers out of copies (a copied encryptor reuses its nonces). A subclass may
    set ``_pickle_advice``. ``tests/test_secrets.py`` finds every public type that takes a
    secret and checks it refuses every pickle protocol, ``copy.copy`` and ``copy.deepcopy``.
    """

    __slots__ = ()

    _pickle_advice: ClassVar[str] = (
        "pass the key itself to where it is needed, or store keys with KeyRing.to_json(password)"
    )

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError(
            f"{type(self).__name__} holds key material and is not picklable; {self._pickle_advice}"
        )


class SecretKey(HoldsSecrets):
    """Symmetric key material with an optional key id.

    ``repr`` and ``str`` show the size and the id, never the bytes. The bytes come out
    only through :meth:`secret_bytes`, so each place that touches them is greppable.
    An HMAC keyed by it (:func:`~streamcrypt.keys.hmac_digests`) keys OpenSSL's context
    once per key object and keeps it here, each use a copy; :meth:`wipe` drops it.
    """

    __slots__ = ("_macs", "_material", "key_id")

    def __init__(self, material: Buffer, *, key_id: str = "") -> None:
        if not isinstance(material, bytes | bytearray | memoryview):
            raise _wrong_kind(material, "SecretKey material", _BYTES_LIKE)
        if len(material) == 0:
            raise InvalidKeySizeError("a secret key cannot be empty")
        if not isinstance(key_id, str):
            raise InvalidParameterError(f"a key id is a str, not {type(key_id).__name__}")
        try:
            id_size = len(key_id.encode())
        except UnicodeEncodeError:
            raise InvalidParameterError("a key id must be text without lone surrogates") from None
        if id_size > 255:
            raise InvalidParameterError("a key id is at most 255 bytes of UTF-8")
        self._material = bytearray(material)
        self.key_id = key_id
        #: HMAC contexts keyed by this key, by hash name (keys._kdf; never updated).
        self._macs: dict[str, object] = {}

    @classmethod
    def generate(cls, size: int = 32, *, key_id: str = "") -> SecretKey:
        """A fresh random key of ``size`` bytes."""
        return cls(random_bytes(size), key_id=key_id)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> SecretKey:
        """Read a symmetric key file (docs/CLI.md, "Key files"), as ``streamcrypt keygen``
        and :meth:`to_file` write it; the older form of 64 hex digits is read too.

        Raises :class:`OSError` if the file cannot be read, :class:`InvalidParameterError`
        (:class:`InvalidKeySizeError` for a wrong size) if it is not a symmetric key file.
        """
        from .keyfile import read_secret_key_file  # the format module imports this one

        return read_secret_key_file(path)

    def to_file(self, path: str | os.PathLike[str]) -> None:
        """Write this key (16 or 32 bytes) to a new key file of mode 0600, in the documented
        format; :meth:`from_file` reads it back, as the command and the HTTP middleware do.

        Never replaces a file (:class:`FileExistsError`); raises
        :class:`InvalidKeySizeError` for a key of another size.
        """
        from .keyfile import write_secret_key_file

        write_secret_key_file(path, self)

    def secret_bytes(self) -> bytes:
        """The raw key bytes. Handle with care."""
        return bytes(self._material)

    def wipe(self) -> None:
        """Overwrite the key material in place and drop the HMAC contexts keyed by it;
        the key is unusable afterwards."""
        self._material[:] = bytes(len(self._material))
        self._material = bytearray()
        self._macs.clear()

    def __len__(self) -> int:
        return len(self._material)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SecretKey):
            return NotImplemented
        return self.key_id == other.key_id and hmac.compare_digest(
            bytes(self._material), bytes(other._material)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        kid = f", key_id={self.key_id!r}" if self.key_id else ""
        return f"SecretKey(<{len(self._material)} bytes hidden>{kid})"

    __str__ = __repr__

    _pickle_advice = "serialize a KeyRing with a password"


def as_secret_key(
    key: Buffer | SecretKey, size: int | None = 32, *, what: str = "a key", kinds: str = _KINDS
) -> SecretKey:
    """Accept raw bytes or a :class:`SecretKey`; check the size when ``size`` is given.

    Raises :class:`InvalidKeySizeError` naming the expected size, and
    :class:`InvalidParameterError` naming what a key must be (``kinds``) for any other
    type (``str`` and ``None`` included).
    """
    if not isinstance(key, SecretKey | bytes | bytearray | memoryview):
        raise _wrong_kind(key, what, kinds if size is None else f"{kinds} ({size} bytes)")
    actual = len(key) if isinstance(key, SecretKey) else memoryview(key).nbytes
    if actual == 0 or (size is not None and actual != size):
        want = "non-empty" if size is None else f"{size} bytes"
        raise InvalidKeySizeError(f"{what} must be {want}, got {actual}")
    return key if isinstance(key, SecretKey) else SecretKey(key)
