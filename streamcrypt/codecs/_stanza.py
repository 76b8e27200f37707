"""The stanza design age and the envelope share (private to ``codecs``).

Theory of operation
-------------------
A random *file key* is wrapped once per recipient into a *stanza*, a typed record of the
header; an identity unwraps the file key from a stanza addressed to it, and a MAC keyed
from the file key then authenticates the whole header, so a stanza cannot be swapped,
dropped or added unnoticed. The wire forms differ (age: text lines naming the type;
the envelope: a type byte) and stay in their codec modules, with each format's rules
(age: a passphrase stanza alone; the envelope: at most one passphrase stanza). What is
the same lives here once: the recipient and identity protocols, turning what a caller
gives into recipients and identities (:class:`KeyList`), trying identities on stanzas
with failures deferred until none opens (:func:`open_file_key`), and reading the header
once for a segmented decryptor (:class:`StanzaHeaderReader`): parse it, unwrap the file
key (the KDF work happens once), then hand the payload to the format.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, NoReturn, Protocol, TypeVar, runtime_checkable

from ..abc import Buffer
from ..errors import (
    AuthenticationError,
    InvalidParameterError,
    InvalidPublicKeyError,
    LimitExceededError,
    UnknownKeyError,
)
from ._segmented import SegmentCodec

__all__ = [
    "KeyList",
    "StanzaHeaderReader",
    "StanzaIdentity",
    "StanzaRecipient",
    "Unpicklable",
    "open_file_key",
    "passphrase_bytes",
]

_W = TypeVar("_W", covariant=True)
_U = TypeVar("_U", contravariant=True)
_T = TypeVar("_T")
_H = TypeVar("_H")


@runtime_checkable
class StanzaRecipient(Protocol[_W]):
    """Wraps a file key into what the format's header holds (age: a list of stanzas;
    the envelope: one stanza)."""

    def wrap(self, file_key: bytes) -> _W: ...


@runtime_checkable
class StanzaIdentity(Protocol[_U]):
    """Unwraps the file key from what it is shown (age: all stanzas; the envelope: one
    stanza of a type it handles); ``None`` when nothing there is addressed to it."""

    def unwrap(self, stanzas: _U, /) -> bytes | None: ...


class Unpicklable:
    """A base for recipients and identities that hold a secret (a private key or a
    passphrase): pickling (and copying) one raises :class:`TypeError`, so the secret
    never lands in a pickle."""

    __slots__ = ()

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            f"{type(self).__name__} holds a secret and is not picklable; "
            "keep its text form in a key file instead"
        )


def passphrase_bytes(passphrase: str | Buffer) -> bytes:
    """A passphrase as bytes (``str`` as UTF-8); :class:`InvalidParameterError` for
    another type or an empty one."""
    if isinstance(passphrase, str):
        raw = passphrase.encode("utf-8")
    elif isinstance(passphrase, bytes | bytearray | memoryview):
        raw = bytes(passphrase)
    else:
        raise InvalidParameterError(
            f"a passphrase must be str or bytes, not {type(passphrase).__name__}"
        )
    if not raw:
        raise InvalidParameterError("a passphrase cannot be empty")
    return raw


@dataclass(frozen=True, slots=True)
class KeyList(Generic[_T]):
    """How a format takes its recipients (``method="wrap"``) or identities
    (``"unwrap"``): objects having ``method``, or text that ``parse`` reads."""

    method: str
    parse: Callable[[str], _T]
    #: The message for anything else, e.g. "a recipient must be an age1... string or a
    #: Recipient" (the type given is appended).
    wrong: str
    #: The message when nothing was given.
    empty: str

    def __call__(
        self,
        given: Iterable[_T | str] | _T | str,
        passphrase: str | Buffer | None,
        for_passphrase: Callable[[str | Buffer], _T],
    ) -> list[_T]:
        """What ``given`` names (one or an iterable), then ``for_passphrase(passphrase)``
        when a passphrase was given. Raises :class:`InvalidParameterError` for anything
        else and when nothing was given."""
        one = isinstance(given, str) or callable(getattr(given, self.method, None))
        out: list[_T] = []
        for item in [given] if one else given:  # type: ignore[union-attr]
            if isinstance(item, str):
                out.append(self.parse(item))
            elif callable(getattr(item, self.method, None)):
                out.append(item)  # type: ignore[arg-type]
            else:
                raise InvalidParameterError(f"{self.wrong}, not {type(item).__name__}")
        if passphrase is not None:
            out.append(for_passphrase(passphrase))
        if not out:
            raise InvalidParameterError(self.empty)
        return out


def open_file_key(
    attempts: Iterable[tuple[StanzaIdentity[_T], _T]], no_match: Callable[[], str]
) -> bytes:
    """The file key from the first ``(identity, stanzas)`` attempt that unwraps one.

    An attempt that fails with :class:`AuthenticationError` (a stanza of ours that was
    tampered with), :class:`InvalidPublicKeyError` or :class:`LimitExceededError` (KDF
    parameters over the caps) is set aside: it is raised only when no attempt opens.
    Nothing opens: :class:`UnknownKeyError` with ``no_match()``.
    """
    deferred: Exception | None = None
    for identity, stanzas in attempts:
        try:
            file_key = identity.unwrap(stanzas)
        except (AuthenticationError, InvalidPublicKeyError, LimitExceededError) as exc:
            deferred = deferred or exc
            continue
        if file_key is not None:
            return file_key
    if deferred is not None:
        raise deferred
    raise UnknownKeyError(no_match())


class StanzaHeaderReader(Generic[_H]):
    """A segmented decryptor's header reader for a stanza header.

    Calls :meth:`_parse` until the header is complete, :meth:`_open` once (it unwraps
    the file key and authenticates the header), then :meth:`_payload` until the payload
    codec is known. Subclasses implement the three.
    """

    __slots__ = ("header",)

    def __init__(self) -> None:
        #: The parsed header, once it opened (``None`` before).
        self.header: _H | None = None

    def _parse(self, data: bytes | bytearray) -> _H | int | None:
        """The header; while it is incomplete, ``None`` or the length worth waiting for."""
        raise NotImplementedError

    def _open(self, header: _H) -> None:
        """Unwrap the file key and authenticate ``header``; keep what :meth:`_payload` needs."""
        raise NotImplementedError

    def _payload(
        self, header: _H, data: bytes | bytearray
    ) -> tuple[SegmentCodec, int] | int | None:
        """The payload codec and the bytes before the first segment, or what to wait for."""
        raise NotImplementedError

    def __call__(self, data: bytes | bytearray) -> tuple[SegmentCodec, int] | int | None:
        header = self.header
        if header is None:
            parsed = self._parse(data)
            if parsed is None or isinstance(parsed, int):
                return parsed
            self._open(parsed)
            self.header = header = parsed
        return self._payload(header, data)
