"""Taps: hashes and MACs that pass data through unchanged and digest it on the way.

A tap is a :class:`~streamcrypt.abc.Tap` transform: ``update(data)`` absorbs ``data``
and returns it (the same object when it is ``bytes``, a copy of a ``bytearray`` or
``memoryview``), ``finalize()`` returns ``b""`` and fixes the digest, and ``digest()`` /
``hexdigest()`` read it afterwards. A tap can stand anywhere in a pipeline.

Lifecycle (one small state machine, shared with every transform): ``update`` after
``finalize`` raises :class:`AlreadyFinalizedError`; any failure leaves the tap broken and
later calls raise :class:`BrokenTransformError`. ``digest()`` before ``finalize()`` raises
:class:`NotFinalizedError`: the tap has not seen the end of its input, so there is no
digest of the whole stream to give.

Kernels: ``cryptography`` (OpenSSL) for SHA-2, SHA-3, HMAC and Poly1305; ``hashlib`` for
BLAKE2 (it releases the GIL on inputs of 2 KiB or more); the ``blake3`` package for BLAKE3,
multithreaded for large buffers (see :data:`BLAKE3_THREADS_MIN`).

MAC tags: :meth:`MacTap.verify` compares in constant time and raises
:class:`AuthenticationError`. A truncated HMAC tag is accepted only when the caller states
its length up front (``HmacTap(key, "sha256", tag_length=16)``); without that, only a
full-length tag can verify.
"""

from __future__ import annotations

import hashlib
import hmac as _hmac
from typing import Any, ClassVar

import blake3 as _blake3
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import hmac as _crypto_hmac
from cryptography.hazmat.primitives import poly1305 as _poly1305

from ..abc import Buffer, Lifecycle, State, as_bytes
from ..errors import (
    AuthenticationError,
    InvalidKeySizeError,
    InvalidParameterError,
    InvalidTagSizeError,
    NotFinalizedError,
    UnsupportedFormatError,
)
from ..keys import HoldsSecrets, SecretKey, key_bytes

#: Smallest first update for which an automatic :class:`Blake3Tap` hashes on all cores.
#: Measured 2025 on the 2-core CI box, blake3 1.0.11, one ``update`` per size, best of 20:
#: single-threaded 8.6-9.5 GB/s from 64 KiB up; ``max_threads=AUTO`` slower between
#: 32 KiB and 512 KiB (3.6-8.5 GB/s, thread wake-ups) and faster from 1 MiB (16.4 GB/s
#: at 1 MiB, 16.7 GB/s at 4-16 MiB). Below 16 KiB the two are equal.
BLAKE3_THREADS_MIN = 1 << 20

#: Shortest truncated HMAC tag ``HmacTap`` accepts (128 bits).
HMAC_MIN_TAG_LENGTH = 16


def _nbytes(data: Buffer) -> int:
    return data.nbytes if isinstance(data, memoryview) else len(data)


class HashTap(Lifecycle):
    """Base of every tap: pass-through ``update``, ``finalize`` -> ``b""``, then ``digest``.

    ``update``/``update_into`` after ``finalize`` raise :class:`AlreadyFinalizedError`;
    a non-buffer input raises :class:`InvalidParameterError` (and breaks the tap);
    ``digest``/``hexdigest`` before ``finalize`` raise :class:`NotFinalizedError`.
    Subclasses set ``_ctx``, a kernel with ``update`` and ``finalize``, or override
    ``_absorb`` and ``_final``.
    """

    __slots__ = ("_ctx", "_digest", "_name", "_size")

    _ctx: Any

    def __init__(self, name: str, digest_size: int) -> None:
        self._init_lifecycle()
        self._name = name
        self._size = digest_size
        self._digest: bytes | None = None

    @property
    def name(self) -> str:
        """The algorithm, e.g. ``"sha256"``, ``"blake3-keyed"``, ``"hmac-sha512"``."""
        return self._name

    @property
    def digest_size(self) -> int:
        """Length in bytes of :meth:`digest` (a truncated HMAC tag counts as truncated)."""
        return self._size

    # -- hooks -------------------------------------------------------------------------
    def _absorb(self, data: Buffer) -> None:
        self._ctx.update(data)

    def _final(self) -> bytes:
        digest: bytes = self._ctx.finalize()
        return digest

    # -- transform ---------------------------------------------------------------------
    def _feed(self, data: Buffer) -> None:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise self._break(
                InvalidParameterError(
                    f"{self._name} tap takes bytes, bytearray or memoryview, "
                    f"not {type(data).__name__}"
                )
            )
        try:
            self._absorb(data)
        except (TypeError, ValueError, BufferError) as exc:
            raise self._break(
                InvalidParameterError(
                    f"{self._name} tap could not read the input buffer "
                    f"(it must be C-contiguous): {type(exc).__name__}"
                )
            ) from exc

    def update(self, data: Buffer, /) -> bytes:
        """Absorb ``data`` and return it unchanged (``bytes`` are returned as they are)."""
        self._check()
        self._feed(data)
        return as_bytes(data, "data")

    def update_into(self, data: Buffer, out: bytearray | memoryview, /) -> int:
        """Absorb ``data`` and copy it into ``out`` (at least ``len(data)`` bytes).

        Returns the number of bytes written. A short or read-only ``out`` raises
        :class:`InvalidParameterError`.
        """
        self._check()
        size = _nbytes(data)
        try:
            view = memoryview(out).cast("B")
        except TypeError:
            view = None
        if view is None or view.readonly or view.nbytes < size:
            raise self._break(
                InvalidParameterError(
                    f"{self._name} tap output must be a writable buffer of at least {size} bytes"
                )
            )
        self._feed(data)
        view[:size] = memoryview(data).cast("B")
        return size

    def finalize(self) -> bytes:
        """Fix the digest; returns ``b""`` (a tap holds no data back)."""
        self._check()
        self._digest = self._final()
        self._finish()
        return b""

    def _result(self) -> bytes:
        if self._digest is not None:
            return self._digest
        if self._state is State.BROKEN:
            self._check()  # raises BrokenTransformError naming the first failure
        raise NotFinalizedError(
            f"{type(self).__name__}: the digest is available only after finalize(); "
            "call finalize() once the whole input has passed through"
        )

    def digest(self) -> bytes:
        """The digest; raises :class:`NotFinalizedError` before :meth:`finalize`."""
        return self._result()

    def hexdigest(self) -> str:
        """The digest as lowercase hex; raises :class:`NotFinalizedError` before finalize."""
        return self.digest().hex()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r}, state={self._state.value})"


class MacTap(HashTap, HoldsSecrets):
    """A keyed tap whose digest is a tag: adds a constant-time :meth:`verify`."""

    __slots__ = ()

    def verify(self, tag: Buffer) -> None:
        """Check ``tag`` against the digest in constant time.

        Raises :class:`AuthenticationError` when it differs (a tag of any other length
        than :attr:`digest_size` never verifies) and :class:`NotFinalizedError` before
        :meth:`finalize`.
        """
        expected = self._result()
        if not isinstance(tag, bytes | bytearray | memoryview):
            raise InvalidParameterError(f"a {self._name} tag must be bytes-like")
        if not _hmac.compare_digest(expected, as_bytes(tag, "tag")):
            raise AuthenticationError(
                f"{self._name} tag did not verify: wrong key, tampered data, or a tag that "
                f"is not {len(expected)} bytes"
            )


# -- SHA-2 / SHA-3 (cryptography) ----------------------------------------------------------


class _OpenSslHashTap(HashTap):
    _tap_name: ClassVar[str]
    _algorithm: ClassVar[type[hashes.HashAlgorithm]]

    __slots__ = ()

    def __init__(self) -> None:
        algorithm = self._algorithm()
        super().__init__(self._tap_name, algorithm.digest_size)
        self._ctx = hashes.Hash(algorithm)


class Sha256Tap(_OpenSslHashTap):
    """SHA-256 tap."""

    _tap_name = "sha256"
    _algorithm = hashes.SHA256
    __slots__ = ()


class Sha384Tap(_OpenSslHashTap):
    """SHA-384 tap."""

    _tap_name = "sha384"
    _algorithm = hashes.SHA384
    __slots__ = ()


class Sha512Tap(_OpenSslHashTap):
    """SHA-512 tap."""

    _tap_name = "sha512"
    _algorithm = hashes.SHA512
    __slots__ = ()


class Sha3_256Tap(_OpenSslHashTap):
    """SHA3-256 tap."""

    _tap_name = "sha3-256"
    _algorithm = hashes.SHA3_256
    __slots__ = ()


class Sha3_512Tap(_OpenSslHashTap):
    """SHA3-512 tap."""

    _tap_name = "sha3-512"
    _algorithm = hashes.SHA3_512
    __slots__ = ()


# -- BLAKE2 (hashlib) ------------------------------------------------------------------------


class _Blake2Tap(HashTap, HoldsSecrets):
    _tap_name: ClassVar[str]
    _max_digest: ClassVar[int]
    _max_key: ClassVar[int]
    _max_salt: ClassVar[int]

    __slots__ = ()

    def __init__(
        self,
        *,
        key: Buffer | SecretKey = b"",
        digest_size: int | None = None,
        salt: Buffer = b"",
        person: Buffer = b"",
    ) -> None:
        name = self._tap_name
        raw = key_bytes(key, f"a {name} key")
        size = self._max_digest if digest_size is None else digest_size
        if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= self._max_digest:
            raise InvalidParameterError(
                f"{name} digest_size must be 1..{self._max_digest} bytes, got {size!r}"
            )
        if len(raw) > self._max_key:
            raise InvalidKeySizeError(
                f"{name} key must be 0..{self._max_key} bytes, got {len(raw)}"
            )
        for what, value in (("salt", salt), ("person", person)):
            if len(value) > self._max_salt:
                raise InvalidParameterError(
                    f"{name} {what} must be at most {self._max_salt} bytes, got {len(value)}"
                )
        super().__init__(f"{name}-keyed" if raw else name, size)
        self._ctx = self._make(raw, size, as_bytes(salt, "salt"), as_bytes(person, "person"))

    def _make(self, key: bytes, size: int, salt: bytes, person: bytes) -> Any:
        raise NotImplementedError

    def _final(self) -> bytes:
        digest: bytes = self._ctx.digest()
        return digest


class Blake2bTap(_Blake2Tap):
    """BLAKE2b tap (RFC 7693): optional key (<= 64 bytes), digest_size 1..64, salt and
    person <= 16 bytes. Raises :class:`InvalidKeySizeError` / :class:`InvalidParameterError`."""

    _tap_name = "blake2b"
    _max_digest = 64
    _max_key = 64
    _max_salt = 16
    __slots__ = ()

    def _make(self, key: bytes, size: int, salt: bytes, person: bytes) -> Any:
        return hashlib.blake2b(key=key, digest_size=size, salt=salt, person=person)


class Blake2sTap(_Blake2Tap):
    """BLAKE2s tap (RFC 7693): optional key (<= 32 bytes), digest_size 1..32, salt and
    person <= 8 bytes. Raises :class:`InvalidKeySizeError` / :class:`InvalidParameterError`."""

    _tap_name = "blake2s"
    _max_digest = 32
    _max_key = 32
    _max_salt = 8
    __slots__ = ()

    def _make(self, key: bytes, size: int, salt: bytes, person: bytes) -> Any:
        return hashlib.blake2s(key=key, digest_size=size, salt=salt, person=person)


# -- BLAKE3 (blake3 package) -----------------------------------------------------------------


def blake3_keyed(key: Buffer | SecretKey, data: Buffer) -> bytes:
    """Keyed BLAKE3 of ``data`` at once (32 bytes), single-threaded.

    The one-shot path for many small inputs (content ids of chunks): the same function as
    ``Blake3Tap(key=key)``, without a tap's bookkeeping. Raises
    :class:`InvalidKeySizeError` for a key that is not 32 bytes.
    """
    raw = key_bytes(key, "a BLAKE3 key", 32)
    digest: bytes = _blake3.blake3(data, key=raw, max_threads=1).digest()
    return digest


class Blake3Tap(HashTap, HoldsSecrets):
    """BLAKE3 tap: plain, keyed (32-byte ``key``) or derive-key (``derive_key_context``).

    In derive-key mode the data passing through is the key material and the context
    string names the purpose. ``length`` is the default output length; after finalize,
    ``digest(n)`` / ``hexdigest(n)`` give any length (extendable output).

    ``max_threads=None`` (automatic) picks the kernel at the first non-empty update: one
    of at least :data:`BLAKE3_THREADS_MIN` bytes hashes on all cores
    (``blake3.AUTO``) for the life of the tap, smaller ones single-threaded (the blake3
    package fixes the thread count per hasher). Pass ``1`` or ``blake3.blake3.AUTO`` to
    decide yourself.

    Raises :class:`InvalidKeySizeError` (key not 32 bytes) and
    :class:`InvalidParameterError` (key together with a context, bad length or threads).
    """

    __slots__ = ("_context", "_key", "_threads")

    def __init__(
        self,
        *,
        key: Buffer | SecretKey | None = None,
        derive_key_context: str | None = None,
        length: int = 32,
        max_threads: int | None = None,
    ) -> None:
        raw = None if key is None else key_bytes(key, "a BLAKE3 key", 32)
        if raw is not None and derive_key_context is not None:
            raise InvalidParameterError(
                "blake3 takes a key or a derive_key_context, not both; derive-key mode "
                "hashes its key material as the data"
            )
        if derive_key_context is not None and not isinstance(derive_key_context, str):
            raise InvalidParameterError("blake3 derive_key_context must be a str")
        self._check_length(length)
        if max_threads is not None and (
            not isinstance(max_threads, int)
            or (max_threads < 1 and max_threads != _blake3.blake3.AUTO)
        ):
            raise InvalidParameterError(
                f"blake3 max_threads must be None, a positive int or blake3.AUTO, "
                f"got {max_threads!r}"
            )
        if raw is not None:
            name = "blake3-keyed"
        elif derive_key_context is not None:
            name = "blake3-derive-key"
        else:
            name = "blake3"
        super().__init__(name, length)
        self._key = raw
        self._context = derive_key_context
        self._threads = max_threads
        self._ctx = None if max_threads is None else self._make(max_threads)

    @staticmethod
    def _check_length(length: object) -> None:
        if not isinstance(length, int) or isinstance(length, bool) or length < 1:
            raise InvalidParameterError(f"blake3 output length must be >= 1 byte, got {length!r}")

    def _make(self, threads: int) -> Any:
        if self._key is not None:
            return _blake3.blake3(key=self._key, max_threads=threads)
        if self._context is not None:
            return _blake3.blake3(derive_key_context=self._context, max_threads=threads)
        return _blake3.blake3(max_threads=threads)

    @property
    def max_threads(self) -> int | None:
        """The thread setting in use (``blake3.AUTO`` is -1); None until automatic mode decides."""
        return self._threads

    def _absorb(self, data: Buffer) -> None:
        if self._ctx is None:
            size = _nbytes(data)
            if size == 0:
                return
            self._threads = _blake3.blake3.AUTO if size >= BLAKE3_THREADS_MIN else 1
            self._ctx = self._make(self._threads)
        self._ctx.update(data)

    def _final(self) -> bytes:
        if self._ctx is None:
            self._threads = 1
            self._ctx = self._make(1)
        digest: bytes = self._ctx.digest(self._size)
        return digest

    def digest(self, length: int | None = None) -> bytes:
        """``length`` bytes of output (default: the tap's ``length``); after finalize only.

        Raises :class:`NotFinalizedError` before :meth:`finalize` and
        :class:`InvalidParameterError` for a length below 1.
        """
        result = self._result()
        if length is None or length == self._size:
            return result
        self._check_length(length)
        out: bytes = self._ctx.digest(length)
        return out

    def hexdigest(self, length: int | None = None) -> str:
        """:meth:`digest` as lowercase hex."""
        return self.digest(length).hex()


# -- HMAC and Poly1305 (cryptography) --------------------------------------------------------

_HMAC_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
    "sha512": hashes.SHA512,
}


class HmacTap(MacTap):
    """HMAC tap (RFC 2104) over SHA-256, SHA-384 or SHA-512.

    ``tag_length`` truncates the tag (RFC 2104 section 5) to that many leading bytes,
    from :data:`HMAC_MIN_TAG_LENGTH` up to the hash size. It is stated once, up front:
    ``digest()`` then returns the truncated tag and ``verify()`` accepts exactly that
    length, so a shortened tag from the wire can never pass by accident.

    Raises :class:`InvalidKeySizeError` (empty key), :class:`InvalidParameterError`
    (unknown hash), :class:`InvalidTagSizeError` (``tag_length`` out of range); ``verify``
    raises :class:`AuthenticationError`.
    """

    __slots__ = ()

    def __init__(
        self,
        key: Buffer | SecretKey,
        algorithm: str = "sha256",
        *,
        tag_length: int | None = None,
    ) -> None:
        raw = key_bytes(key, "an HMAC key")
        if not raw:
            raise InvalidKeySizeError("HMAC key must not be empty")
        try:
            alg = _HMAC_HASHES[algorithm]()
        except (KeyError, TypeError):
            raise InvalidParameterError(
                f"unsupported HMAC hash {algorithm!r}; use one of {sorted(_HMAC_HASHES)}"
            ) from None
        size = alg.digest_size if tag_length is None else tag_length
        if (
            not isinstance(size, int)
            or isinstance(size, bool)
            or not HMAC_MIN_TAG_LENGTH <= size <= alg.digest_size
        ):
            raise InvalidTagSizeError(
                f"hmac-{algorithm} tag_length must be {HMAC_MIN_TAG_LENGTH}..{alg.digest_size} "
                f"bytes, got {size!r}"
            )
        super().__init__(f"hmac-{algorithm}", size)
        self._ctx = _crypto_hmac.HMAC(raw, alg)

    def _final(self) -> bytes:
        return super()._final()[: self._size]


class Poly1305Tap(MacTap):
    """Poly1305 tap (RFC 8439) with a 32-byte **one-time** key: never MAC two messages
    with the same key (an attacker who sees two tags can forge). Tags are 16 bytes.

    Raises :class:`InvalidKeySizeError`; ``verify`` raises :class:`AuthenticationError`.
    """

    __slots__ = ()

    def __init__(self, key: Buffer | SecretKey) -> None:
        raw = key_bytes(key, "a Poly1305 key", 32)
        super().__init__("poly1305", 16)
        self._ctx = _poly1305.Poly1305(raw)


# -- factory ---------------------------------------------------------------------------------

_UNKEYED: dict[str, type[_OpenSslHashTap]] = {
    cls._tap_name: cls for cls in (Sha256Tap, Sha384Tap, Sha512Tap, Sha3_256Tap, Sha3_512Tap)
}
_OPTIONAL_KEY: dict[str, type[Blake2bTap | Blake2sTap | Blake3Tap]] = {
    "blake2b": Blake2bTap,
    "blake2s": Blake2sTap,
    "blake3": Blake3Tap,
}

#: Every name :func:`hash_tap` knows.
TAP_NAMES: tuple[str, ...] = (
    *_UNKEYED,
    *_OPTIONAL_KEY,
    *(f"hmac-{h}" for h in _HMAC_HASHES),
    "poly1305",
)


def hash_tap(name: str, key: Buffer | SecretKey | None = None, **options: Any) -> HashTap:
    """A new tap by name (one of :data:`TAP_NAMES`), e.g. ``hash_tap("hmac-sha256", key)``.

    ``options`` go to the class (``digest_size``/``salt``/``person`` for BLAKE2,
    ``derive_key_context``/``length``/``max_threads`` for BLAKE3, ``tag_length`` for HMAC).
    Raises :class:`UnsupportedFormatError` for an unknown name and
    :class:`InvalidParameterError` for a missing, unexpected key or unknown option.
    """
    if not isinstance(name, str):
        raise InvalidParameterError(f"a tap name must be a str such as 'sha256', got {name!r}")
    lowered = name.lower()
    needs_key = lowered == "poly1305" or lowered.startswith("hmac-")
    if lowered not in TAP_NAMES:
        raise UnsupportedFormatError(f"unknown tap {name!r}; supported: {', '.join(TAP_NAMES)}")
    if needs_key and key is None:
        raise InvalidParameterError(f"the {lowered} tap needs a key")
    if lowered in _UNKEYED and key is not None:
        raise InvalidParameterError(f"{lowered} takes no key; use an HMAC tap for a keyed hash")
    try:
        if lowered in _UNKEYED:
            return _UNKEYED[lowered](**options)
        if lowered in _OPTIONAL_KEY:
            cls = _OPTIONAL_KEY[lowered]
            if key is not None:
                options["key"] = key
            return cls(**options)
        assert key is not None
        if lowered == "poly1305":
            return Poly1305Tap(key, **options)
        return HmacTap(key, lowered.removeprefix("hmac-"), **options)
    except TypeError as exc:
        raise InvalidParameterError(f"bad options for the {lowered} tap: {exc}") from None
