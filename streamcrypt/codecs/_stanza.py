"""The recipient model age and the envelope share (private to ``codecs``).

Theory of operation
-------------------
A random *file key* is wrapped once per recipient into *stanzas*, typed records of the
header: :class:`Stanza`, its arguments (the first names its type) and its body. A
:class:`Recipient` wraps the file key into stanzas; an :class:`Identity` unwraps it from
the stanzas it is shown, and a MAC keyed from the file key then authenticates the whole
header, so a stanza cannot be swapped, dropped or added unnoticed. The wire forms differ
(age: text lines; the envelope: a type byte and a length) and stay in each format's
``_header`` module, with each format's rules (age: a passphrase stanza alone; the
envelope: at most one passphrase stanza, one argument per stanza). What is the same
lives here once: the stanza, the two protocols, turning what a caller gives into
recipients and identities (:class:`KeyList`), trying identities with failures deferred
until none opens (:func:`open_file_key`), and reading the header once for a segmented
decryptor (:class:`StanzaHeaderReader`): parse it, unwrap the file key (the KDF work
happens once), then hand the payload to the format.

X25519 stanzas are age's, and the one X25519 key pair (``codecs._x25519``) writes them,
so age's conventions for a stanza's arguments and body are here too: canonical unpadded
base64 arguments, a 16-byte file key under ChaCha20-Poly1305 with a zero nonce.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, Protocol, TypeAlias, TypeVar, runtime_checkable

from ..abc import Buffer
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    InvalidPublicKeyError,
    LimitExceededError,
    PluginError,
    UnknownKeyError,
)
from ..keys import HoldsSecrets, secret_text_bytes
from ..primitives import ChaCha20Poly1305Suite
from ._format import one_or_many
from ._segmented import SegmentCodec

_T = TypeVar("_T")
_H = TypeVar("_H")
_R = TypeVar("_R")

_ARG = re.compile(r"[\x21-\x7e]+")
_B64 = re.compile(rb"[A-Za-z0-9+/]*")
_ZERO_NONCE = bytes(12)
#: Bytes of an age stanza body that wraps the 16-byte file key (with its 16-byte tag).
WRAPPED_SIZE = 32
#: Bytes read at most from an identity or recipient file given as a path.
_MAX_KEY_FILE = 1 << 20


@dataclass(frozen=True, slots=True)
class Stanza:
    """One recipient stanza: its arguments (the first names the type) and its body.

    Raises :class:`FormatError` unless there is at least one argument and every one is a
    word of visible ASCII.
    """

    args: tuple[str, ...]
    body: bytes

    def __post_init__(self) -> None:
        if not self.args or not all(_ARG.fullmatch(a) for a in self.args):
            raise FormatError("stanza arguments must be 1 or more visible-ASCII words")

    @property
    def kind(self) -> str:
        """The stanza type (its first argument), e.g. ``"X25519"``."""
        return self.args[0]


@runtime_checkable
class Recipient(Protocol):
    """Something the file key can be wrapped to: ``wrap(file_key)`` returns stanzas."""

    def wrap(self, file_key: bytes) -> list[Stanza]: ...


@runtime_checkable
class Identity(Protocol):
    """Unwraps the file key from the stanzas addressed to it: ``unwrap(stanzas)``.

    Returns ``None`` when no stanza is for this identity; raises :class:`FormatError`
    for a malformed stanza of its own type.
    """

    def unwrap(self, stanzas: Sequence[Stanza], /) -> bytes | None: ...


class PublicKey:
    """Base of the recipients that are public keys: equal when of one type with the same
    key bytes (``_public``, whatever text form ``str()`` writes), shown by their text."""

    __slots__ = ("_public",)

    _public: bytes

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._public == self._public

    def __hash__(self) -> int:
        return hash(self._public)


class KeyIdentity(HoldsSecrets, Generic[_R]):
    """Base of the identities that are private keys: their :attr:`recipient`, a ``repr``
    (and ``str``) showing only that, and :meth:`unwrap` trying each stanza of the type
    ``kind`` with :meth:`_unwrap_one`. Pickling raises :class:`TypeError`."""

    __slots__ = ("_recipient",)

    #: The stanza type this identity opens.
    kind: ClassVar[str]
    _recipient: _R

    @property
    def recipient(self) -> _R:
        """The public key (recipient) of this identity."""
        return self._recipient

    def unwrap(self, stanzas: Sequence[Stanza], /) -> bytes | None:
        """The file key from the first stanza of this identity's type that opens with it,
        else ``None``; raises what :meth:`_unwrap_one` raises."""
        for stanza in stanzas:
            if stanza.kind == self.kind:
                file_key = self._unwrap_one(stanza)
                if file_key is not None:
                    return file_key
        return None

    def _unwrap_one(self, stanza: Stanza) -> bytes | None:
        """The file key from one stanza of type :attr:`kind`, ``None`` if not for us."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<secret hidden>, recipient={self._recipient!r})"

    __str__ = __repr__


#: A recipient: a :class:`Recipient`, its text (age: ``age1...``, ``ssh-ed25519 AAAA...``;
#: the envelope: ``sc-x25519-pub1...``; or a recipients file's text, one a line, ``#``
#: comments), or a path to such a file (:class:`os.PathLike`).
RecipientLike: TypeAlias = Recipient | str | os.PathLike[str]
#: An identity: an :class:`Identity`, its text (or an identity file's text, as age-keygen
#: writes it: one a line, ``#`` comments; for age also an SSH private key file's text),
#: or a path to such a file (:class:`os.PathLike`).
IdentityLike: TypeAlias = Identity | str | os.PathLike[str]


# ---------------------------------------------------------------------------------------
# age's stanza conventions
# ---------------------------------------------------------------------------------------


def b64encode(data: Buffer) -> bytes:
    """Canonical unpadded base64, as age writes it."""
    return base64.b64encode(data).rstrip(b"=")


def b64decode(text: bytes, what: str) -> bytes:
    """The bytes of canonical unpadded base64; :class:`FormatError` for anything else."""
    if len(text) % 4 == 1 or not _B64.fullmatch(text):
        raise FormatError(f"age {what} is not unpadded base64")
    decoded = base64.b64decode(text + b"=" * (-len(text) % 4))
    if b64encode(decoded) != text:
        raise FormatError(f"age {what} is not canonical base64 (non-zero unused bits)")
    return decoded


def wrap_key(key: bytes, file_key: bytes) -> bytes:
    """The file key under ChaCha20-Poly1305 with ``key`` and a zero nonce."""
    return ChaCha20Poly1305Suite(key).seal(_ZERO_NONCE, file_key)


def unwrap_key(key: bytes, body: bytes) -> bytes | None:
    """The inverse of :func:`wrap_key`; ``None`` when ``body`` does not open."""
    try:
        return ChaCha20Poly1305Suite(key).open(_ZERO_NONCE, body)
    except AuthenticationError:
        return None


def stanza_arg(stanza: Stanza, index: int, size: int) -> bytes:
    """Argument ``index`` of an age stanza, base64 of ``size`` bytes (FormatError if not)."""
    value = b64decode(stanza.args[index].encode(), f"{stanza.kind} stanza argument")
    if len(value) != size:
        raise FormatError(f"age {stanza.kind} stanza argument must encode {size} bytes")
    return value


def check_shape(stanza: Stanza, nargs: int) -> None:
    """An age stanza with ``nargs`` arguments (its type included) wrapping a file key."""
    if len(stanza.args) != nargs:
        raise FormatError(
            f"age {stanza.kind} stanza must have {nargs - 1} argument(s) after its type"
        )
    if len(stanza.body) != WRAPPED_SIZE:
        raise FormatError(f"age {stanza.kind} stanza body must be {WRAPPED_SIZE} bytes")


# ---------------------------------------------------------------------------------------
# Keys given, file keys found, headers read
# ---------------------------------------------------------------------------------------


def passphrase_bytes(passphrase: str | Buffer) -> bytes:
    """A passphrase as bytes (:func:`~streamcrypt.keys.secret_text_bytes`);
    :class:`InvalidParameterError` for another type, text that is not valid, or an empty
    one."""
    raw = secret_text_bytes(passphrase, "a passphrase")
    if not raw:
        raise InvalidParameterError("a passphrase cannot be empty")
    return raw


def key_lines(text: str) -> list[str]:
    """The keys in an identity or recipient file's text, as age reads such files: a PEM
    block (an SSH private key file) is one key; otherwise each line that is neither blank
    nor a ``#`` comment is one (age-keygen's ``# created:`` / ``# public key:`` lines
    are comments)."""
    if text.lstrip().startswith("-----BEGIN "):
        return [text]
    return [s for s in (line.strip() for line in text.splitlines()) if s and not s.startswith("#")]


def _read_key_text(path: os.PathLike[str]) -> str:
    """The text of an identity or recipient file given as a path; raises :class:`OSError`
    or :class:`InvalidParameterError` (naming the file, never its content)."""
    with open(path, "rb") as f:
        raw = f.read(_MAX_KEY_FILE + 1)
    if len(raw) > _MAX_KEY_FILE:
        raise InvalidParameterError(f"{os.fspath(path)} is too large to be a key file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidParameterError(f"{os.fspath(path)} is not a text key file") from None


@dataclass(frozen=True, slots=True)
class KeyList(Generic[_T]):
    """How a format takes its recipients (``method="wrap"``) or identities
    (``"unwrap"``): objects having ``method``; text, each key of which
    (:func:`key_lines`: one a line, comments allowed) ``parse`` reads; or an
    :class:`os.PathLike` naming a file of such text."""

    method: str
    parse: Callable[[str], _T]
    #: The message for anything else, e.g. "a recipient must be an age1... string or a
    #: Recipient" (the type given is appended).
    wrong: str
    #: The message when nothing was given.
    empty: str

    def keys(
        self, given: Iterable[_T | str | os.PathLike[str]] | _T | str | os.PathLike[str]
    ) -> list[_T]:
        """What ``given`` names: one or an iterable, as
        :func:`~streamcrypt.codecs.one_or_many` reads it (``None``, bytes or another
        object that is no key is one item, refused); an empty list for an empty
        iterable. Raises :class:`InvalidParameterError` for anything else and for a text
        or file holding no key; :class:`OSError` when a file cannot be read."""
        out: list[_T] = []
        for item in one_or_many(given):
            if isinstance(item, str | os.PathLike):
                text = item if isinstance(item, str) else _read_key_text(item)
                keys = key_lines(text)
                if not keys:
                    where = "a text" if isinstance(item, str) else os.fspath(item)
                    raise InvalidParameterError(
                        f"{where} given holds no key, only blank lines or # comments"
                    )
                out.extend(self.parse(key) for key in keys)
            elif callable(getattr(item, self.method, None)):
                out.append(item)  # type: ignore[arg-type]
            else:
                raise InvalidParameterError(f"{self.wrong}, not {type(item).__name__}")
        return out

    def __call__(
        self,
        given: Iterable[_T | str | os.PathLike[str]] | _T | str | os.PathLike[str],
        passphrase: str | Buffer | None,
        for_passphrase: Callable[[str | Buffer], _T],
    ) -> list[_T]:
        """What ``given`` names (:meth:`keys`), then ``for_passphrase(passphrase)`` when
        a passphrase was given. Raises :class:`InvalidParameterError` as :meth:`keys`
        does and when nothing was given; :class:`OSError` when a file cannot be read."""
        out = self.keys(given)
        if passphrase is not None:
            out.append(for_passphrase(passphrase))
        if not out:
            raise InvalidParameterError(self.empty)
        return out


def open_file_key(
    attempts: Iterable[Callable[[], bytes | None]], no_match: Callable[[], str]
) -> bytes:
    """The file key from the first attempt (an identity shown stanzas) that unwraps one.

    An attempt that fails with :class:`AuthenticationError` (a stanza of ours that was
    tampered with), :class:`InvalidPublicKeyError`, :class:`LimitExceededError` (KDF
    parameters over the caps) or :class:`PluginError` (an age plugin that failed: the
    spec lets a reader try the next identity) is set aside: it is raised only when no
    attempt opens.
    Nothing opens: :class:`UnknownKeyError` with ``no_match()``.
    """
    deferred: Exception | None = None
    for attempt in attempts:
        try:
            file_key = attempt()
        except (AuthenticationError, InvalidPublicKeyError, LimitExceededError, PluginError) as exc:
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


def rekeyed_stanzas(
    stanzas: Sequence[Stanza],
    file_key: bytes,
    identities: Sequence[Identity],
    recipients: Sequence[Recipient],
    add: Sequence[Recipient],
    remove: Sequence[Recipient],
    *,
    opens: Callable[[Identity, Stanza], bytes | None],
    names: Callable[[Stanza, Recipient], bool],
    wrap: Callable[[Recipient, bytes], list[Stanza]],
) -> list[Stanza]:
    """A header's stanzas with those of ``remove`` dropped and ``add``'s wrapped on; or,
    given ``recipients`` (alone), only theirs: every old stanza goes.

    A stanza belongs to a recipient to remove when ``names(stanza, recipient)`` says so
    (a stanza that carries its key's tag, as age's ssh stanzas do) or when one of
    ``identities`` whose ``recipient`` it is opens it (``opens``: the format's rule for
    one stanza) to ``file_key``. The other stanzas (X25519, ML-KEM, ECIES, passphrase,
    unknown types) do not say whom they are for: that is their privacy. Raises
    :class:`UnknownKeyError` for a recipient to remove with no stanza told apart, and
    :class:`InvalidParameterError` when no stanza would be left, or for ``recipients``
    with ``add`` or ``remove``.
    """
    if recipients:
        if add or remove:
            raise InvalidParameterError(
                "recipients= is the whole new list of recipients: give it alone, or change "
                "the list with add= and remove="
            )
        return [s for r in recipients for s in wrap(r, file_key)]
    dropped: set[int] = set()
    for recipient in remove:
        owners = [i for i in identities if getattr(i, "recipient", None) == recipient]
        found = [
            n
            for n, stanza in enumerate(stanzas)
            if names(stanza, recipient) or any(opens(i, stanza) == file_key for i in owners)
        ]
        if not found:
            raise UnknownKeyError(
                f"cannot remove {str(recipient)[:80]}: no stanza can be told to be its own "
                "(it is not a recipient, or its stanza type does not name its key: X25519, "
                "ML-KEM, ECIES; give its identity too to remove it)"
            )
        dropped.update(found)
    kept = [s for n, s in enumerate(stanzas) if n not in dropped]
    out = kept + [s for r in add for s in wrap(r, file_key)]
    if not out:
        raise InvalidParameterError(
            "removing every recipient would leave a file nobody can open: add one first"
        )
    return out
