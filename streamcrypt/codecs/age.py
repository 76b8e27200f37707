"""age v1 (age-encryption.org/v1, c2sp.org/age), byte for byte and strict.

Theory of operation
-------------------
An age file is a textual header and a binary payload::

    age-encryption.org/v1
    -> X25519 <ephemeral share, base64>
    <wrapped file key, base64 wrapped at 64 columns, last line shorter than 64>
    --- <HMAC-SHA-256 of the header up to and including "---", base64>
    <16-byte payload nonce><chunk 0><chunk 1>...<final chunk>

A random 16-byte *file key* is wrapped once per recipient in a *stanza*: X25519
(HKDF-SHA-256 over the shared secret with salt ``share || recipient``, then
ChaCha20-Poly1305 with a zero nonce), scrypt (a passphrase; must be the only stanza) or
the hybrid post-quantum ``mlkem768x25519`` (HPKE with ML-KEM-768 + X25519); existing SSH
keys serve as ``ssh-ed25519`` (X25519 with a tweak) and ``ssh-rsa`` (RSA-OAEP). An identity
unwraps the file key from a stanza addressed to it; the header MAC, keyed with
``HKDF(file key, "", "header")``, then authenticates the whole header. The payload key
is ``HKDF(file key, salt = nonce, "payload")`` and the payload is a STREAM of 64 KiB
ChaCha20-Poly1305 chunks with nonce ``uint88_be(counter) || last_flag``. The final chunk
may be full; it is empty only when the whole payload is empty. So the payload is a
segmented stream (:class:`AgeCodec` on the shared segmented core) with one chunk of
read-ahead, and the chunks can be sealed and opened in parallel.

Parsing is strict as the spec demands: canonical unpadded base64 everywhere, stanza
arguments of visible ASCII separated by single spaces, 64-column body lines ending with
a shorter line, exact argument counts and lengths per stanza type, and the work-factor
cap for scrypt. Failures are typed: a header that does not parse raises
:class:`FormatError` (:class:`UnsupportedFormatError` for another age version), no
identity matching raises :class:`UnknownKeyError` (a wrong passphrase too: the scrypt
stanza simply does not open, exactly as an X25519 stanza for someone else does), a bad
header MAC or payload chunk raises :class:`AuthenticationError`, a stream that ends
before its final chunk raises :class:`TruncatedStreamError`, an scrypt work factor over
the cap raises :class:`LimitExceededError`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol, cast, runtime_checkable

from cryptography.exceptions import InvalidTag, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, hpke
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

from .._lazy import LazyModule
from ..abc import Buffer
from ..deprecation import keyword_only
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidKeySizeError,
    InvalidParameterError,
    InvalidPublicKeyError,
    LimitExceededError,
    TruncatedStreamError,
    UnsupportedFormatError,
)
from ..keys import SecretKey, as_secret_key, hkdf, random_bytes
from ..primitives import ChaCha20Poly1305Suite
from . import _stanza
from ._bech32 import bech32_decode, bech32_encode
from ._format import FormatOptions, ReadAt, SegmentedFormat, or_default
from ._segmented import SegmentCodec, SegmentedDecryptor, SegmentedEncryptor, SegmentLayout
from ._x25519 import X25519PublicText, X25519SecretText, x25519_exchange
from .armor import ARMOR, ArmorDecoder, is_armored
from .armor import armor as _armor

if TYPE_CHECKING:
    # imported where used: SSH keys (serialization, RSA) and passphrases (the password
    # KDFs) cost an X25519 recipient's every run ~20 ms of start-up (docs/CLI.md)
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
    from cryptography.hazmat.primitives.serialization import SSHPublicKeyTypes
else:  # the RSA keys' annotations, for typing.get_type_hints (imported when it reads them)
    rsa = LazyModule("cryptography.hazmat.primitives.asymmetric.rsa")

__all__ = [
    "CHUNK_SIZE",
    "DEFAULT_MAX_HEADER_SIZE",
    "DEFAULT_MAX_WORK_FACTOR",
    "DEFAULT_WORK_FACTOR",
    "FILE_KEY_SIZE",
    "FORMAT",
    "NONCE_SIZE",
    "TAG_SIZE",
    "VERSION_LINE",
    "AgeCodec",
    "AgeDecryptor",
    "AgeEncryptor",
    "AgeHeader",
    "AnyIdentity",
    "AnyRecipient",
    "Identity",
    "IdentityLike",
    "MLKEM768X25519Identity",
    "MLKEM768X25519Recipient",
    "Recipient",
    "RecipientLike",
    "ScryptIdentity",
    "ScryptRecipient",
    "SshEd25519Identity",
    "SshEd25519Recipient",
    "SshRsaIdentity",
    "SshRsaRecipient",
    "Stanza",
    "X25519Identity",
    "X25519Recipient",
    "decrypt_bytes",
    "encrypt_bytes",
    "layout",
    "parse_header",
    "parse_identities",
    "parse_identity",
    "parse_recipient",
]

#: The first line of every age v1 header.
VERSION_LINE = b"age-encryption.org/v1"
_VERSION_PREFIX = b"age-encryption.org/"
#: Plaintext bytes per payload chunk (the last chunk may be shorter).
CHUNK_SIZE = 65536
#: Bytes of the ChaCha20-Poly1305 tag after each chunk.
TAG_SIZE = 16
#: Bytes of the random file key that each recipient stanza wraps.
FILE_KEY_SIZE = 16
#: Bytes of the random payload nonce between the header and the payload.
NONCE_SIZE = 16
#: scrypt work factor (log2 N) used when encrypting with a passphrase (age's default).
DEFAULT_WORK_FACTOR = 18
#: Highest scrypt work factor a reader accepts unless told otherwise (age's own cap;
#: scrypt with r = 8 needs 128 * r * 2**22 bytes = 4 GiB there).
DEFAULT_MAX_WORK_FACTOR = 22
#: Longest header a reader buffers before giving up (a post-quantum stanza is ~1.6 KB).
DEFAULT_MAX_HEADER_SIZE = 1 << 20
_COLUMNS = 64
_ZERO_NONCE = bytes(12)
_X25519_INFO = b"age-encryption.org/v1/X25519"
_SCRYPT_LABEL = b"age-encryption.org/v1/scrypt"
_PQ_INFO = b"age-encryption.org/mlkem768x25519"
_SSH_ED25519_INFO = b"age-encryption.org/v1/ssh-ed25519"
_SSH_ED25519 = "ssh-ed25519"
_SSH_RSA_LABEL = b"age-encryption.org/v1/ssh-rsa"
_SSH_RSA = "ssh-rsa"
_SSH_TAG_SIZE = 4
# authorized_keys key types start so (ssh-rsa, ecdsa-sha2-nistp256, sk-ssh-ed25519@...)
_SSH_PREFIXES = ("ssh-", "ecdsa-", "sk-")
# age and rage refuse smaller RSA keys; OpenSSH (and OpenSSL's RSA) stop at 16384 bits.
_RSA_MIN_BITS = 2048
_RSA_MAX_BITS = 16384
# An SSH private key file: OpenSSH's own form or PEM (PKCS#1 "RSA PRIVATE KEY", PKCS#8).
_PEM_BEGIN = "-----BEGIN "
_OPENSSH_PRIVATE_BEGIN = b"-----BEGIN OPENSSH PRIVATE KEY-----"
_PQ_ENC_SIZE = 1120
_PQ_PUBLIC_SIZE = 1184 + 32
_WRAPPED_SIZE = FILE_KEY_SIZE + TAG_SIZE

_HRP_X25519 = "age"
_HRP_X25519_SECRET = "age-secret-key-"
_HRP_PQ = "age1pq"
_HRP_PQ_SECRET = "age-secret-key-pq-"

_B64 = re.compile(rb"[A-Za-z0-9+/]*")
_ARG = re.compile(r"[\x21-\x7e]+")
_VERSION = re.compile(rb"age-encryption\.org/[\x21-\x7e]+")
_MAC_LINE = re.compile(rb"--- ([A-Za-z0-9+/]{43})")
_WORK_FACTOR = re.compile(r"[1-9][0-9]*")
_MAC_LINE_SIZE = 4 + 43 + 1


# ---------------------------------------------------------------------------------------
# Canonical unpadded base64
# ---------------------------------------------------------------------------------------


def _b64encode(data: Buffer) -> bytes:
    return base64.b64encode(data).rstrip(b"=")


def _b64decode(text: bytes, what: str) -> bytes:
    if len(text) % 4 == 1 or not _B64.fullmatch(text):
        raise FormatError(f"age {what} is not unpadded base64")
    decoded = base64.b64decode(text + b"=" * (-len(text) % 4))
    if _b64encode(decoded) != text:
        raise FormatError(f"age {what} is not canonical base64 (non-zero unused bits)")
    return decoded


# ---------------------------------------------------------------------------------------
# Header
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stanza:
    """One recipient stanza: its arguments (the first names the type) and its body."""

    args: tuple[str, ...]
    body: bytes

    def __post_init__(self) -> None:
        if not self.args or not all(_ARG.fullmatch(a) for a in self.args):
            raise FormatError("age stanza arguments must be 1 or more visible-ASCII words")

    @property
    def kind(self) -> str:
        """The stanza type (its first argument), e.g. ``"X25519"``."""
        return self.args[0]

    def encode(self) -> bytes:
        """The stanza as header text: the argument line and the 64-column body lines."""
        body = _b64encode(self.body)
        lines = [body[i : i + _COLUMNS] for i in range(0, len(body), _COLUMNS)]
        if not lines or len(lines[-1]) == _COLUMNS:
            lines.append(b"")
        return b"-> " + " ".join(self.args).encode() + b"\n" + b"".join(x + b"\n" for x in lines)


@dataclass(frozen=True, slots=True)
class AgeHeader:
    """A parsed (not yet authenticated) age v1 header."""

    stanzas: tuple[Stanza, ...]
    mac: bytes
    #: Header bytes, including the MAC line's LF (the payload nonce follows).
    size: int
    #: What the MAC covers: the header up to and including ``---``.
    mac_input: bytes = field(repr=False)


def _check_version(data: bytes) -> bool:
    """False while the version line is incomplete; raises if it is not v1."""
    n = min(len(data), len(_VERSION_PREFIX))
    if data[:n] != _VERSION_PREFIX[:n]:
        raise FormatError("not an age file: it must start with 'age-encryption.org/'")
    end = data.find(b"\n")
    if end < 0:
        if len(data) > 256:
            raise FormatError("age version line is too long")
        return False
    version = data[:end]
    if version == VERSION_LINE:
        return True
    if _VERSION.fullmatch(version):
        raise UnsupportedFormatError(
            f"unsupported age version {version[len(_VERSION_PREFIX) :].decode()!r}; this reads v1"
        )
    raise FormatError("age version line is malformed")


def parse_header(data: Buffer, *, max_size: int = DEFAULT_MAX_HEADER_SIZE) -> AgeHeader | None:
    """Parse an age v1 header from the start of ``data``; ``None`` while it is incomplete.

    Raises :class:`FormatError` for anything the spec does not allow (and past
    ``max_size`` bytes), :class:`UnsupportedFormatError` for another age version.
    """
    raw = bytes(data)
    if not _check_version(raw):
        return None
    mark = raw.find(b"\n---")
    if mark < 0:
        _precheck(raw)
        if len(raw) > max_size:
            raise FormatError(f"age header is longer than {max_size} bytes (or not a header)")
        return None
    end = raw.find(b"\n", mark + 1)
    if end < 0:
        _precheck(raw[: mark + 1])  # as fed in pieces: a bad line fails before the MAC line
        if len(raw) - mark - 1 > _MAC_LINE_SIZE:
            raise FormatError("age header MAC line is too long")
        return None
    if end + 1 > max_size:
        raise FormatError(f"age header is longer than {max_size} bytes")
    return _parse_complete(raw[: end + 1])


def _precheck(raw: bytes) -> None:
    """Fail early on a line no header can hold, rather than buffering up to the size cap."""
    lines = raw.split(b"\n")
    for line in lines[1:-1]:  # the complete lines after the version line
        _check_line(line)
    if len(lines) > 1:
        _check_partial(lines[-1])


def _check_line(line: bytes) -> None:
    if not line.startswith(b"-> ") and not (len(line) <= _COLUMNS and _B64.fullmatch(line)):
        raise FormatError("age header line is neither a stanza, a body line, nor the MAC")


def _check_partial(partial: bytes) -> None:
    if len(partial) > _COLUMNS and not partial.startswith(b"-> "):
        raise FormatError("age stanza body line is longer than 64 columns")


class _HeaderScan:
    """Where the header ends, in bytes that arrive in pieces: each byte is looked at about
    once, so reading a header is linear in its length whatever the chunking. Checks lines
    as :func:`parse_header` does, in the same order (a bad line fails before the MAC line).
    """

    __slots__ = ("_line", "_max_size", "_searched")

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        self._line = 0  # start of the first line not checked yet (0: the version line)
        self._searched = 0  # no LF in data[_line:_searched]

    def __call__(self, data: bytes | bytearray) -> int | None:
        """The header's length once its MAC line is complete, else ``None``."""
        if self._line == 0:
            if not _check_version(bytes(data[:258])):  # it refuses a line past 256 bytes
                return None
            self._line = self._searched = data.find(b"\n") + 1
        while True:
            start = self._line
            end = data.find(b"\n", max(start, self._searched))
            if end < 0:
                break
            if data.startswith(b"---", start):
                if end + 1 > self._max_size:
                    raise FormatError(f"age header is longer than {self._max_size} bytes")
                return end + 1
            _check_line(bytes(data[start:end]))
            self._line = self._searched = end + 1
        self._searched = len(data)
        start = self._line
        partial = len(data) - start
        # The MAC line's cap (48) is below a body line's (64), so it is met first.
        if partial > _MAC_LINE_SIZE and data.startswith(b"---", start):
            raise FormatError("age header MAC line is too long")
        if partial > _COLUMNS and not data.startswith(b"-> ", start):
            raise FormatError("age stanza body line is longer than 64 columns")
        if len(data) > self._max_size and not data.startswith(b"---", start):
            raise FormatError(f"age header is longer than {self._max_size} bytes (or not a header)")
        return None


def _parse_complete(text: bytes) -> AgeHeader:
    lines = text.split(b"\n")[:-1]  # text ends with LF; the last line is the MAC line
    last = len(lines) - 1
    stanzas: list[Stanza] = []
    i = 1
    while i < last:
        line = lines[i]
        if not line.startswith(b"-> "):
            raise FormatError("age header line is neither a stanza ('-> ') nor the MAC ('---')")
        try:
            args = tuple(line[3:].decode("ascii").split(" "))
        except UnicodeDecodeError:
            raise FormatError("age stanza arguments must be visible ASCII") from None
        if not all(_ARG.fullmatch(a) for a in args):
            raise FormatError(
                "age stanza arguments must be visible ASCII separated by single spaces"
            )
        i += 1
        body = bytearray()
        while True:
            if i >= last:
                raise FormatError(
                    "age stanza body must end with a line shorter than 64 columns "
                    "(an empty line after a full one)"
                )
            chunk = lines[i]
            i += 1
            if len(chunk) > _COLUMNS or not _B64.fullmatch(chunk):
                raise FormatError("age stanza body line is not base64 of at most 64 columns")
            body += chunk
            if len(chunk) < _COLUMNS:
                break
        stanzas.append(Stanza(args, _b64decode(bytes(body), "stanza body")))
    if not stanzas:
        raise FormatError("age header has no recipient stanza")
    mac_line = _MAC_LINE.fullmatch(lines[last])
    if mac_line is None:
        raise FormatError("age header MAC line must be '--- ' and 43 base64 characters")
    mac = _b64decode(mac_line.group(1), "header MAC")
    return AgeHeader(tuple(stanzas), mac, len(text), text[: len(text) - _MAC_LINE_SIZE + 3])


def _header_mac(file_key: bytes, mac_input: bytes) -> bytes:
    return hmac.new(hkdf(file_key, info=b"header"), mac_input, hashlib.sha256).digest()


def _build_header(file_key: bytes, recipients: Sequence[Recipient]) -> bytes:
    stanzas = [s for r in recipients for s in r.wrap(file_key)]
    text = VERSION_LINE + b"\n" + b"".join(s.encode() for s in stanzas) + b"---"
    return text + b" " + _b64encode(_header_mac(file_key, text)) + b"\n"


# ---------------------------------------------------------------------------------------
# Recipients and identities
# ---------------------------------------------------------------------------------------


@runtime_checkable
class Recipient(_stanza.StanzaRecipient[list[Stanza]], Protocol):
    """Wraps a file key into stanzas: ``wrap(file_key)`` returns a list of them."""


@runtime_checkable
class Identity(_stanza.StanzaIdentity[Sequence[Stanza]], Protocol):
    """Unwraps the file key from the stanzas addressed to it: ``unwrap(stanzas)``.

    Returns ``None`` when no stanza is for this identity; raises :class:`FormatError`
    for a malformed stanza of its own type.
    """


def _wrap_key(key: bytes, file_key: bytes) -> bytes:
    return ChaCha20Poly1305Suite(key).seal(_ZERO_NONCE, file_key)


def _unwrap_key(key: bytes, body: bytes) -> bytes | None:
    try:
        return ChaCha20Poly1305Suite(key).open(_ZERO_NONCE, body)
    except AuthenticationError:
        return None


def _stanza_arg(stanza: Stanza, index: int, size: int) -> bytes:
    value = _b64decode(stanza.args[index].encode(), f"{stanza.kind} stanza argument")
    if len(value) != size:
        raise FormatError(f"age {stanza.kind} stanza argument must encode {size} bytes")
    return value


def _check_shape(stanza: Stanza, nargs: int) -> None:
    if len(stanza.args) != nargs:
        raise FormatError(
            f"age {stanza.kind} stanza must have {nargs - 1} argument(s) after its type"
        )
    if len(stanza.body) != _WRAPPED_SIZE:
        raise FormatError(f"age {stanza.kind} stanza body must be {_WRAPPED_SIZE} bytes")


def _dh_wrap(
    public: bytes, file_key: bytes, info: bytes, tweak: x25519.X25519PrivateKey | None = None
) -> tuple[bytes, bytes]:
    """X25519 to ``public`` from a fresh ephemeral key (the secret then multiplied by
    ``tweak`` for ssh-ed25519): the share and the wrapped file key. Raises
    :class:`InvalidPublicKeyError` for a low-order ``public``."""
    ephemeral = x25519.X25519PrivateKey.generate()
    share = ephemeral.public_key().public_bytes_raw()
    shared = x25519_exchange(ephemeral, public)
    if shared is not None and tweak is not None:
        shared = x25519_exchange(tweak, shared)
    if shared is None:
        raise InvalidPublicKeyError("the X25519 recipient is a low-order point")
    key = hkdf(shared, salt=share + public, info=info)
    return share, _wrap_key(key, file_key)


def _dh_unwrap(
    private: x25519.X25519PrivateKey,
    public: bytes,
    stanza: Stanza,
    share: bytes,
    info: bytes,
    tweak: x25519.X25519PrivateKey | None = None,
) -> bytes | None:
    """The inverse of :func:`_dh_wrap` for ``private`` (whose public key is ``public``):
    the file key, or ``None`` when the stanza does not open. Raises :class:`FormatError`
    for a low-order share."""
    shared = x25519_exchange(private, share)
    if shared is not None and tweak is not None:
        shared = x25519_exchange(tweak, shared)
    if shared is None:
        raise FormatError(f"age {stanza.kind} stanza has a low-order ephemeral share")
    key = hkdf(shared, salt=share + public, info=info)
    return _unwrap_key(key, stanza.body)


class X25519Recipient(X25519PublicText):
    """An X25519 recipient (``age1...``): a 32-byte Curve25519 public key."""

    HRP = _HRP_X25519
    DESCRIPTION = "an age X25519 recipient (age1...)"
    __slots__ = ()

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """One X25519 stanza; raises :class:`InvalidPublicKeyError` for a low-order key."""
        share, body = _dh_wrap(self._public, file_key, _X25519_INFO)
        return [Stanza(("X25519", _b64encode(share).decode()), body)]


class X25519Identity(X25519SecretText[X25519Recipient]):
    """An X25519 identity (``AGE-SECRET-KEY-1...``). Its repr shows only the recipient."""

    SECRET_HRP = _HRP_X25519_SECRET
    DESCRIPTION = "an age X25519 identity (AGE-SECRET-KEY-1...)"
    RECIPIENT = X25519Recipient
    __slots__ = ()

    def unwrap(self, stanzas: Sequence[Stanza]) -> bytes | None:
        """The file key from an X25519 stanza for this identity, else ``None``.

        Raises :class:`FormatError` for a malformed X25519 stanza or a low-order share.
        """
        ours = self._recipient.public_bytes()
        for stanza in stanzas:
            if stanza.kind != "X25519":
                continue
            _check_shape(stanza, 2)
            share = _stanza_arg(stanza, 1, 32)
            file_key = _dh_unwrap(self._private, ours, stanza, share, _X25519_INFO)
            if file_key is not None:
                return file_key
        return None


def _scrypt(passphrase: bytes, salt: bytes, work_factor: int) -> bytes:
    """age's scrypt (r = 8, p = 1); :class:`LimitExceededError` if its memory is not there."""
    from ..keys import ScryptParams, derive_key_from_password

    params = ScryptParams(1 << work_factor, 8, 1)
    return derive_key_from_password(passphrase, _SCRYPT_LABEL + salt, params=params).secret_bytes()


class ScryptRecipient:
    """Passphrase encryption (an scrypt stanza; it must be a file's only recipient)."""

    __slots__ = ("_passphrase", "work_factor")

    def __init__(self, passphrase: str | Buffer, *, work_factor: int = DEFAULT_WORK_FACTOR):
        if not 1 <= work_factor <= 30:
            raise InvalidParameterError(f"scrypt work factor must be 1..30, got {work_factor}")
        self._passphrase = _stanza.passphrase_bytes(passphrase)
        self.work_factor = work_factor

    def wrap(self, file_key: bytes) -> list[Stanza]:
        salt = random_bytes(16)
        key = _scrypt(self._passphrase, salt, self.work_factor)
        args = ("scrypt", _b64encode(salt).decode(), str(self.work_factor))
        return [Stanza(args, _wrap_key(key, file_key))]

    def __repr__(self) -> str:
        return f"ScryptRecipient(<passphrase hidden>, work_factor={self.work_factor})"


class ScryptIdentity:
    """Passphrase decryption. Work factors above ``max_work_factor`` raise
    :class:`LimitExceededError`; a wrong passphrase unwraps nothing (``None``)."""

    __slots__ = ("_passphrase", "max_work_factor")

    def __init__(
        self, passphrase: str | Buffer, *, max_work_factor: int = DEFAULT_MAX_WORK_FACTOR
    ) -> None:
        self._passphrase = _stanza.passphrase_bytes(passphrase)
        self.max_work_factor = max_work_factor

    def unwrap(self, stanzas: Sequence[Stanza]) -> bytes | None:
        """The file key from the scrypt stanza, or ``None`` for a wrong passphrase.

        Raises :class:`FormatError` (malformed stanza, or not the only stanza) and
        :class:`LimitExceededError` (work factor over the cap).
        """
        for stanza in stanzas:
            if stanza.kind != "scrypt":
                continue
            if len(stanzas) != 1:
                raise FormatError("an age scrypt stanza must be the only stanza in the header")
            _check_shape(stanza, 3)
            salt = _stanza_arg(stanza, 1, 16)
            digits = stanza.args[2]
            if not _WORK_FACTOR.fullmatch(digits):
                raise FormatError("age scrypt work factor must be a decimal without leading 0")
            # Compare lengths first: int() refuses strings of more than 4300 digits.
            cap = str(self.max_work_factor)
            if len(digits) > len(cap) or int(digits) > self.max_work_factor:
                shown = digits if len(digits) <= 20 else f"of {len(digits)} digits"
                raise LimitExceededError(
                    f"age scrypt work factor {shown} is over the limit "
                    f"{self.max_work_factor}; raise max_work_factor if you trust this file"
                )
            work_factor = int(digits)
            return _unwrap_key(_scrypt(self._passphrase, salt, work_factor), stanza.body)
        return None

    def __repr__(self) -> str:
        return f"ScryptIdentity(<passphrase hidden>, max_work_factor={self.max_work_factor})"


# ---------------------------------------------------------------------------------------
# ssh-ed25519 (an OpenSSH Ed25519 key as an age recipient, as age and rage accept)
# ---------------------------------------------------------------------------------------


def _ssh_wire(public_key: ed25519.Ed25519PublicKey | rsa.RSAPublicKey) -> bytes:
    """The SSH wire encoding of a public key (the base64 of authorized_keys)."""
    from cryptography.hazmat.primitives import serialization

    line = public_key.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return base64.b64decode(line.split()[1])


def _ssh_tag(wire: bytes) -> bytes:
    """The stanza tag of an SSH recipient: the first 4 bytes of SHA-256 of its wire key."""
    return hashlib.sha256(wire).digest()[:_SSH_TAG_SIZE]


def _ssh_public_key(text: str, kind: str) -> SSHPublicKeyTypes:
    """The key of an authorized_keys line ``<kind> AAAA... [comment]``; raises
    :class:`FormatError` (:class:`UnsupportedFormatError` for an SSH type age lacks)."""
    from cryptography.hazmat.primitives import serialization

    fields = text.split()
    if len(fields) < 2 or not fields[0].startswith(_SSH_PREFIXES):
        raise FormatError(f"not an SSH public key line ({kind} AAAA...)")
    if fields[0] not in (_SSH_ED25519, _SSH_RSA):
        raise UnsupportedFormatError(
            f"SSH key type {fields[0][:32]!r} is not supported as an age recipient; "
            "use an ssh-ed25519 or ssh-rsa key"
        )
    if fields[0] != kind:
        raise FormatError(f"not an {kind} public key line")
    try:
        return serialization.load_ssh_public_key(f"{fields[0]} {fields[1]}".encode())
    except (ValueError, UnsupportedAlgorithm):
        raise FormatError(f"the {kind} public key does not parse") from None


def _ssh_private_key(data: str | Buffer) -> PrivateKeyTypes:
    """The key in an unencrypted OpenSSH or PEM private key file; raises
    :class:`FormatError` (:class:`UnsupportedFormatError` when passphrase-protected)."""
    from cryptography.hazmat.primitives import serialization

    raw = data.encode() if isinstance(data, str) else bytes(data)
    try:
        if raw.lstrip().startswith(_OPENSSH_PRIVATE_BEGIN):
            return serialization.load_ssh_private_key(raw, password=None)
        return serialization.load_pem_private_key(raw, password=None)
    except TypeError:  # cryptography's "a password is needed"
        raise UnsupportedFormatError(
            "the SSH private key is passphrase-protected: decrypt a copy with "
            "'ssh-keygen -p' (only unencrypted keys are read)"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise FormatError("the SSH private key file does not parse") from None


class SshEd25519Recipient:
    """An OpenSSH Ed25519 public key as an age recipient (``ssh-ed25519 AAAA...``).

    The stanza is ``-> ssh-ed25519 <tag> <share>``: the tag is the first 4 bytes of
    SHA-256 of the SSH wire key; the X25519 exchange runs against the key's Montgomery
    form and is then multiplied by a tweak, HKDF-SHA-256 of the wire key (as the salt).
    """

    __slots__ = ("_ed25519", "_tag", "_tweak", "_wire", "_x25519")

    def __init__(self, public_key: Buffer | ed25519.Ed25519PublicKey) -> None:
        if isinstance(public_key, ed25519.Ed25519PublicKey):
            key = public_key
        else:
            raw = bytes(public_key)
            if len(raw) != 32:
                raise InvalidKeySizeError(f"an Ed25519 public key must be 32 bytes, got {len(raw)}")
            key = ed25519.Ed25519PublicKey.from_public_bytes(raw)
        from ..primitives import eddsa_to_x25519  # libsodium's bindings: SSH keys only

        self._ed25519 = key.public_bytes_raw()
        self._x25519 = eddsa_to_x25519(self._ed25519)
        self._wire = _ssh_wire(key)
        self._tag = _ssh_tag(self._wire)
        tweak = hkdf(b"", salt=self._wire, info=_SSH_ED25519_INFO)
        self._tweak = x25519.X25519PrivateKey.from_private_bytes(tweak)

    @classmethod
    def parse(cls, text: str) -> SshEd25519Recipient:
        """Parse an authorized_keys line ``ssh-ed25519 AAAA... [comment]``; raises
        :class:`FormatError` (:class:`UnsupportedFormatError` for another SSH key type)."""
        key = _ssh_public_key(text, _SSH_ED25519)
        if not isinstance(key, ed25519.Ed25519PublicKey):
            raise FormatError("the ssh-ed25519 line does not hold an Ed25519 key")
        return cls(key)

    def public_bytes(self) -> bytes:
        """The 32-byte Ed25519 public key."""
        return self._ed25519

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """One ssh-ed25519 stanza; raises :class:`InvalidPublicKeyError` for a key whose
        Montgomery form is a low-order point."""
        share, body = _dh_wrap(self._x25519, file_key, _SSH_ED25519_INFO, self._tweak)
        args = (_SSH_ED25519, _b64encode(self._tag).decode(), _b64encode(share).decode())
        return [Stanza(args, body)]

    def __str__(self) -> str:
        return f"{_SSH_ED25519} {base64.b64encode(self._wire).decode()}"

    def __repr__(self) -> str:
        return f"SshEd25519Recipient({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SshEd25519Recipient) and other._ed25519 == self._ed25519

    def __hash__(self) -> int:
        return hash(self._ed25519)


class SshEd25519Identity:
    """An OpenSSH Ed25519 private key as an age identity. Its repr shows only the recipient.

    Its X25519 secret is the first 32 bytes of SHA-512 of the Ed25519 seed (the scalar
    Ed25519 itself signs with), so its public key is the Ed25519 key's Montgomery form.
    """

    __slots__ = ("_private", "_recipient")

    def __init__(self, private_key: Buffer | SecretKey | ed25519.Ed25519PrivateKey) -> None:
        if isinstance(private_key, ed25519.Ed25519PrivateKey):
            seed = private_key.private_bytes_raw()
        else:
            what = "an Ed25519 private key seed"
            seed = as_secret_key(private_key, 32, what=what).secret_bytes()
        key = ed25519.Ed25519PrivateKey.from_private_bytes(seed)
        scalar = hashlib.sha512(seed).digest()[:32]
        self._private = x25519.X25519PrivateKey.from_private_bytes(scalar)
        self._recipient = SshEd25519Recipient(key.public_key())

    @classmethod
    def generate(cls) -> SshEd25519Identity:
        return cls(random_bytes(32))

    @classmethod
    def from_openssh(cls, data: str | Buffer) -> SshEd25519Identity:
        """Load an unencrypted OpenSSH private key file (``-----BEGIN OPENSSH PRIVATE KEY``).

        Raises :class:`FormatError` for one that does not parse and
        :class:`UnsupportedFormatError` for a passphrase-protected or non-Ed25519 key.
        """
        key = _ssh_private_key(data)
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            raise UnsupportedFormatError("the SSH private key is not an Ed25519 key")
        return cls(key)

    @property
    def recipient(self) -> SshEd25519Recipient:
        return self._recipient

    def unwrap(self, stanzas: Sequence[Stanza]) -> bytes | None:
        """The file key from an ssh-ed25519 stanza for this key, else ``None``.

        Stanzas with another key's tag are skipped. Raises :class:`FormatError` for a
        malformed ssh-ed25519 stanza or a low-order share.
        """
        ours = self._recipient
        for stanza in stanzas:
            if stanza.kind != _SSH_ED25519:
                continue
            _check_shape(stanza, 3)
            if _stanza_arg(stanza, 1, _SSH_TAG_SIZE) != ours._tag:
                continue
            share = _stanza_arg(stanza, 2, 32)
            file_key = _dh_unwrap(
                self._private, ours._x25519, stanza, share, _SSH_ED25519_INFO, ours._tweak
            )
            if file_key is not None:
                return file_key
        return None

    def __repr__(self) -> str:
        return f"SshEd25519Identity(<secret hidden>, recipient={str(self._recipient)!r})"

    __str__ = __repr__


def _oaep() -> padding.OAEP:
    """age's RSA-OAEP parameters: SHA-256, MGF1 with SHA-256, the ssh-rsa label."""
    from cryptography.hazmat.primitives.asymmetric import padding

    return padding.OAEP(
        mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=_SSH_RSA_LABEL
    )


class SshRsaRecipient:
    """An OpenSSH RSA public key as an age recipient (``ssh-rsa AAAA...``).

    The stanza is ``-> ssh-rsa <tag>``, the tag being the first 4 bytes of SHA-256 of the
    SSH wire key; its body is the file key under RSA-OAEP (SHA-256, MGF1-SHA-256, label
    ``age-encryption.org/v1/ssh-rsa``). Keys under 2048 bits raise
    :class:`InvalidKeySizeError`, as age and rage refuse them.
    """

    __slots__ = ("_key", "_tag", "_wire")

    def __init__(self, public_key: rsa.RSAPublicKey) -> None:
        from cryptography.hazmat.primitives.asymmetric import rsa

        if not isinstance(public_key, rsa.RSAPublicKey):
            raise InvalidParameterError(
                f"an ssh-rsa recipient takes an RSA public key, not {type(public_key).__name__}"
            )
        if not _RSA_MIN_BITS <= public_key.key_size <= _RSA_MAX_BITS:
            raise InvalidKeySizeError(
                f"an ssh-rsa age key must have {_RSA_MIN_BITS} to {_RSA_MAX_BITS} bits, "
                f"this one has {public_key.key_size}"
            )
        self._key = public_key
        self._wire = _ssh_wire(public_key)
        self._tag = _ssh_tag(self._wire)

    @classmethod
    def parse(cls, text: str) -> SshRsaRecipient:
        """Parse an authorized_keys line ``ssh-rsa AAAA... [comment]``; raises
        :class:`FormatError` and :class:`InvalidKeySizeError` (under 2048 bits)."""
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = _ssh_public_key(text, _SSH_RSA)
        if not isinstance(key, rsa.RSAPublicKey):
            raise FormatError("the ssh-rsa line does not hold an RSA key")
        return cls(key)

    @property
    def key_size(self) -> int:
        """The modulus size in bits."""
        return self._key.key_size

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """One ssh-rsa stanza (the body is as long as the modulus)."""
        body = self._key.encrypt(file_key, _oaep())
        return [Stanza((_SSH_RSA, _b64encode(self._tag).decode()), body)]

    def __str__(self) -> str:
        return f"{_SSH_RSA} {base64.b64encode(self._wire).decode()}"

    def __repr__(self) -> str:
        return f"SshRsaRecipient({str(self)[:24]!r}..., {self.key_size} bits)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SshRsaRecipient) and other._wire == self._wire

    def __hash__(self) -> int:
        return hash(self._wire)


class SshRsaIdentity:
    """An OpenSSH RSA private key as an age identity. Its repr shows only the recipient.

    Keys under 2048 bits raise :class:`InvalidKeySizeError`.
    """

    __slots__ = ("_private", "_recipient")

    def __init__(self, private_key: rsa.RSAPrivateKey) -> None:
        from cryptography.hazmat.primitives.asymmetric import rsa

        if not isinstance(private_key, rsa.RSAPrivateKey):
            raise InvalidParameterError(
                f"an ssh-rsa identity takes an RSA private key, not {type(private_key).__name__}"
            )
        self._recipient = SshRsaRecipient(private_key.public_key())
        self._private = private_key

    @classmethod
    def generate(cls, key_size: int = 3072) -> SshRsaIdentity:
        """A fresh key (3072 bits, as ``ssh-keygen -t rsa`` makes, unless told otherwise)."""
        from cryptography.hazmat.primitives.asymmetric import rsa

        if not _RSA_MIN_BITS <= key_size <= _RSA_MAX_BITS:
            raise InvalidKeySizeError(
                f"an ssh-rsa age key must have {_RSA_MIN_BITS} to {_RSA_MAX_BITS} bits"
            )
        return cls(rsa.generate_private_key(public_exponent=65537, key_size=key_size))

    @classmethod
    def from_openssh(cls, data: str | Buffer) -> SshRsaIdentity:
        """Load an unencrypted RSA private key file: OpenSSH's own form
        (``-----BEGIN OPENSSH PRIVATE KEY``) or PEM (``BEGIN RSA PRIVATE KEY``, as
        ``ssh-keygen -m PEM`` writes, or PKCS#8 ``BEGIN PRIVATE KEY``).

        Raises :class:`FormatError` for one that does not parse,
        :class:`UnsupportedFormatError` for a passphrase-protected or non-RSA key and
        :class:`InvalidKeySizeError` for one under 2048 bits.
        """
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = _ssh_private_key(data)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise UnsupportedFormatError("the SSH private key is not an RSA key")
        return cls(key)

    @property
    def recipient(self) -> SshRsaRecipient:
        return self._recipient

    def unwrap(self, stanzas: Sequence[Stanza]) -> bytes | None:
        """The file key from the ssh-rsa stanza for this key, else ``None``.

        Stanzas with another key's tag are skipped. Raises :class:`FormatError` for a
        malformed ssh-rsa stanza and :class:`AuthenticationError` for one with this key's
        tag that does not decrypt (tampered or corrupted; age fails there too).
        """
        ours = self._recipient
        size = (ours.key_size + 7) // 8
        for stanza in stanzas:
            if stanza.kind != _SSH_RSA:
                continue
            if len(stanza.args) != 2:
                raise FormatError("age ssh-rsa stanza must have 1 argument after its type")
            if _stanza_arg(stanza, 1, _SSH_TAG_SIZE) != ours._tag:
                continue
            if len(stanza.body) != size:
                raise FormatError(f"age ssh-rsa stanza body must be {size} bytes for this key")
            try:
                return self._private.decrypt(stanza.body, _oaep())
            except ValueError:
                raise AuthenticationError(
                    "the ssh-rsa stanza for this key does not decrypt: "
                    "the file was tampered with or corrupted"
                ) from None
        return None

    def __repr__(self) -> str:
        return f"SshRsaIdentity(<secret hidden>, recipient={self._recipient!r})"

    __str__ = __repr__


_PQ_SUITE = hpke.Suite(hpke.KEM.MLKEM768_X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)


class MLKEM768X25519Recipient:
    """A hybrid post-quantum recipient (``age1pq1...``): ML-KEM-768 || X25519 public keys."""

    __slots__ = ("_key", "_public")

    def __init__(self, public_key: Buffer) -> None:
        raw = bytes(public_key)
        if len(raw) != _PQ_PUBLIC_SIZE:
            raise InvalidKeySizeError(
                f"an ML-KEM-768 + X25519 public key must be {_PQ_PUBLIC_SIZE} bytes, got {len(raw)}"
            )
        from cryptography.hazmat.primitives.asymmetric import mlkem

        try:
            self._key = hpke.MLKEM768X25519PublicKey(
                mlkem.MLKEM768PublicKey.from_public_bytes(raw[:1184]),
                x25519.X25519PublicKey.from_public_bytes(raw[1184:]),
            )
        except ValueError:
            raise InvalidPublicKeyError("not a valid ML-KEM-768 + X25519 public key") from None
        self._public = raw

    @classmethod
    def parse(cls, text: str) -> MLKEM768X25519Recipient:
        """Parse ``age1pq1...``; raises :class:`FormatError`."""
        hrp, data = bech32_decode(text)
        if hrp != _HRP_PQ or len(data) != _PQ_PUBLIC_SIZE:
            raise FormatError("not an age post-quantum recipient (age1pq1... of 1216 bytes)")
        try:
            return cls(data)
        except InvalidPublicKeyError as exc:
            raise FormatError(str(exc)) from None

    def public_bytes(self) -> bytes:
        return self._public

    def wrap(self, file_key: bytes) -> list[Stanza]:
        sealed = _PQ_SUITE.encrypt(file_key, self._key, info=_PQ_INFO)
        enc, body = sealed[:_PQ_ENC_SIZE], sealed[_PQ_ENC_SIZE:]
        return [Stanza(("mlkem768x25519", _b64encode(enc).decode()), body)]

    def __str__(self) -> str:
        return bech32_encode(_HRP_PQ, self._public)

    def __repr__(self) -> str:
        return f"MLKEM768X25519Recipient({str(self)[:16]!r}...)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MLKEM768X25519Recipient) and other._public == self._public

    def __hash__(self) -> int:
        return hash(self._public)


class MLKEM768X25519Identity:
    """A hybrid post-quantum identity (``AGE-SECRET-KEY-PQ-1...``): a 32-byte seed.

    The seed expands with SHAKE-256 to 96 bytes: the ML-KEM-768 seed (d || z) and the
    X25519 private key, as the MLKEM768-X25519 KEM of filippo.io/hpke-pq (X-Wing) does.
    """

    __slots__ = ("_dh", "_private", "_recipient", "_seed")

    def __init__(self, seed: Buffer | SecretKey) -> None:
        self._seed = as_secret_key(seed, 32, what="a post-quantum identity seed").secret_bytes()
        expanded = hashlib.shake_256(self._seed).digest(96)
        from cryptography.hazmat.primitives.asymmetric import mlkem

        kem = mlkem.MLKEM768PrivateKey.from_seed_bytes(expanded[:64])
        dh = x25519.X25519PrivateKey.from_private_bytes(expanded[64:])
        self._private = hpke.MLKEM768X25519PrivateKey(kem, dh)
        self._dh = dh
        self._recipient = MLKEM768X25519Recipient(
            kem.public_key().public_bytes_raw() + dh.public_key().public_bytes_raw()
        )

    @classmethod
    def generate(cls) -> MLKEM768X25519Identity:
        return cls(random_bytes(32))

    @classmethod
    def parse(cls, text: str) -> MLKEM768X25519Identity:
        """Parse ``AGE-SECRET-KEY-PQ-1...``; raises :class:`FormatError`."""
        hrp, data = bech32_decode(text)
        if hrp != _HRP_PQ_SECRET or len(data) != 32:
            raise FormatError("not an age post-quantum identity (AGE-SECRET-KEY-PQ-1...)")
        return cls(data)

    @property
    def recipient(self) -> MLKEM768X25519Recipient:
        return self._recipient

    def to_string(self) -> str:
        """The secret key string ``AGE-SECRET-KEY-PQ-1...``. Handle with care."""
        return bech32_encode(_HRP_PQ_SECRET, self._seed, upper=True)

    def unwrap(self, stanzas: Sequence[Stanza]) -> bytes | None:
        """The file key from an ``mlkem768x25519`` stanza for this identity, else ``None``.

        Raises :class:`FormatError` for a malformed stanza of that type, or one whose
        X25519 share is low-order (an all-zero shared secret).
        """
        for stanza in stanzas:
            if stanza.kind != "mlkem768x25519":
                continue
            _check_shape(stanza, 2)
            enc = _stanza_arg(stanza, 1, _PQ_ENC_SIZE)
            try:
                self._dh.exchange(x25519.X25519PublicKey.from_public_bytes(enc[-32:]))
            except ValueError:
                raise FormatError(
                    "age mlkem768x25519 stanza has a low-order X25519 share"
                ) from None
            try:
                return _PQ_SUITE.decrypt(enc + stanza.body, self._private, info=_PQ_INFO)
            except (InvalidTag, ValueError):
                continue
        return None

    def __repr__(self) -> str:
        return f"MLKEM768X25519Identity(recipient={str(self._recipient)[:16]!r}...)"

    __str__ = __repr__


#: A recipient: an ``age1...``, ``ssh-ed25519 AAAA...`` or ``ssh-rsa AAAA...`` string or a
#: :class:`Recipient`.
RecipientLike = str | Recipient
#: An identity: an ``AGE-SECRET-KEY-1...`` string, an SSH (Ed25519 or RSA) private key
#: file's text, or an :class:`Identity`.
IdentityLike = str | Identity
#: What :func:`parse_recipient` returns.
AnyRecipient = X25519Recipient | MLKEM768X25519Recipient | SshEd25519Recipient | SshRsaRecipient
#: What :func:`parse_identity` returns.
AnyIdentity = X25519Identity | MLKEM768X25519Identity | SshEd25519Identity | SshRsaIdentity


def _ssh_identity(text: str) -> SshEd25519Identity | SshRsaIdentity:
    """The identity in an SSH private key file; raises :class:`FormatError`
    (:class:`UnsupportedFormatError` for a locked key or a type age lacks)."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = _ssh_private_key(text)
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return SshEd25519Identity(key)
    if isinstance(key, rsa.RSAPrivateKey):
        return SshRsaIdentity(key)
    raise UnsupportedFormatError(
        "only ssh-ed25519 and ssh-rsa private keys are supported as age identities"
    )


def parse_recipient(text: str) -> AnyRecipient:
    """Parse ``age1...``, ``age1pq1...`` or an SSH public key line (``ssh-ed25519 AAAA...``,
    ``ssh-rsa AAAA...``).

    Raises :class:`FormatError` (:class:`UnsupportedFormatError` for another SSH key type,
    :class:`InvalidKeySizeError` for an RSA key under 2048 bits).
    """
    if text.startswith(_SSH_RSA + " "):
        return SshRsaRecipient.parse(text)
    if text.startswith(_SSH_PREFIXES):
        return SshEd25519Recipient.parse(text)
    hrp, _ = bech32_decode(text)
    if hrp == _HRP_PQ:
        return MLKEM768X25519Recipient.parse(text)
    if hrp == _HRP_X25519:
        return X25519Recipient.parse(text)
    raise FormatError(
        "unknown age recipient type: expected age1..., age1pq1..., ssh-ed25519 or ssh-rsa"
    )


def parse_identity(text: str) -> AnyIdentity:
    """Parse ``AGE-SECRET-KEY-1...``, ``AGE-SECRET-KEY-PQ-1...`` or an unencrypted SSH
    (Ed25519 or RSA, OpenSSH or PEM) private key file's text; raises :class:`FormatError`."""
    if text.lstrip().startswith(_PEM_BEGIN):
        return _ssh_identity(text)
    hrp, _ = bech32_decode(text)
    if hrp == _HRP_PQ_SECRET:
        return MLKEM768X25519Identity.parse(text)
    if hrp == _HRP_X25519_SECRET:
        return X25519Identity.parse(text)
    raise FormatError("unknown age identity type: expected AGE-SECRET-KEY-1... or -PQ-1...")


def parse_identities(text: str) -> list[AnyIdentity]:
    """Parse an identity file: one key a line, blank lines and ``#`` comments skipped, or
    a whole SSH private key file (as age's ``-i ~/.ssh/id_ed25519`` or ``id_rsa``)."""
    if text.lstrip().startswith(_PEM_BEGIN):
        return [_ssh_identity(text)]
    keys = [
        parse_identity(line.strip())
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not keys:
        raise FormatError("the identity file holds no identity")
    return keys


_RECIPIENTS: _stanza.KeyList[Recipient] = _stanza.KeyList(
    "wrap",
    parse_recipient,
    "a recipient must be an age1..., age1pq1..., ssh-ed25519 or ssh-rsa string or a Recipient",
    "give at least one recipient or a passphrase",
)
_IDENTITIES: _stanza.KeyList[Identity] = _stanza.KeyList(
    "unwrap",
    parse_identity,
    "an identity must be an AGE-SECRET-KEY-... string, an SSH private key file's text "
    "or an Identity",
    "give at least one identity or a passphrase",
)


def _recipient_list(
    recipients: Iterable[RecipientLike] | RecipientLike,
    passphrase: str | Buffer | None,
    work_factor: int,
) -> list[Recipient]:
    out = _RECIPIENTS(recipients, passphrase, lambda p: ScryptRecipient(p, work_factor=work_factor))
    if len(out) > 1 and any(isinstance(r, ScryptRecipient) for r in out):
        raise InvalidParameterError("a passphrase must be a file's only recipient in age")
    pq = [isinstance(r, MLKEM768X25519Recipient) for r in out]
    if any(pq) and not all(pq):
        raise InvalidParameterError(
            "post-quantum recipients must not be mixed with classic ones "
            "(the file would be only as strong as the weakest)"
        )
    return out


def _identity_list(
    identities: Iterable[IdentityLike] | IdentityLike,
    passphrase: str | Buffer | None,
    max_work_factor: int,
) -> list[Identity]:
    return _IDENTITIES(
        identities, passphrase, lambda p: ScryptIdentity(p, max_work_factor=max_work_factor)
    )


def _no_match(identities: Sequence[Identity]) -> str:
    if any(isinstance(i, ScryptIdentity) for i in identities):
        return (
            "no identity matched the age file: wrong passphrase, "
            "or the file was encrypted to recipients rather than a passphrase"
        )
    return "no identity matched the age file: it was encrypted to other recipients"


def _open_file_key(header: AgeHeader, identities: Sequence[Identity]) -> bytes:
    """Each identity in turn, shown all stanzas (as age's identities are)."""
    stanzas = header.stanzas
    if len(stanzas) > 1 and any(s.kind == "scrypt" for s in stanzas):
        raise FormatError("an age scrypt stanza must be the only stanza in the header")
    file_key = _stanza.open_file_key(
        ((i, stanzas) for i in identities), lambda: _no_match(identities)
    )
    if len(file_key) != FILE_KEY_SIZE:
        raise FormatError(f"the unwrapped age file key is not {FILE_KEY_SIZE} bytes")
    if not hmac.compare_digest(_header_mac(file_key, header.mac_input), header.mac):
        raise AuthenticationError(
            "age header MAC did not verify: the header was tampered with "
            "(or a stanza was crafted for this identity)"
        )
    return file_key


# ---------------------------------------------------------------------------------------
# Payload
# ---------------------------------------------------------------------------------------


class AgeCodec(SegmentCodec):
    """The age payload: 64 KiB ChaCha20-Poly1305 chunks, nonce ``uint88_be(i) || last``."""

    __slots__ = ("_aead", "_kernel", "first_segment_size", "segment_size")

    overhead: ClassVar[int] = TAG_SIZE
    final_may_be_full: ClassVar[bool] = True
    max_segments: int = 1 << 88

    def __init__(self, payload_key: bytes) -> None:
        self._aead = ChaCha20Poly1305Suite(payload_key)
        self._kernel = self._aead.native(_ZERO_NONCE)[0]
        self.segment_size = self.first_segment_size = CHUNK_SIZE

    def run_segments(
        self, sealing: bool, first: int, count: int, data: Buffer, final: bool, out: memoryview
    ) -> tuple[int, Exception | None]:
        """Every chunk but the last through the native kernel in one tight loop (the
        per-chunk checks of :meth:`seal_segment` cost a tenth of a 64 KiB chunk's sealing);
        the last, with the final-chunk rules, and any chunk that fails to open, through
        :meth:`seal_segment` / :meth:`open_segment`."""
        src = memoryview(data)
        step = CHUNK_SIZE if sealing else CHUNK_SIZE + TAG_SIZE
        size = step + TAG_SIZE if sealing else CHUNK_SIZE
        work = self._kernel.encrypt_into if sealing else self._kernel.decrypt_into
        last = first + count - 1
        pos = written = 0
        index = first
        try:
            try:
                while index < last:
                    nonce = self._nonce(index, False)
                    written += work(
                        nonce, src[pos : pos + step], None, out[written : written + size]
                    )
                    pos += step
                    index += 1
            except InvalidTag:  # raises the error open_segment gives this chunk
                self.open_segment(
                    index, src[pos : pos + step], False, out[written : written + size]
                )
                raise
            rest = src[pos:]
            end = written + len(rest) + (TAG_SIZE if sealing else -TAG_SIZE)
            if sealing:
                written += self.seal_segment(index, rest, final, out[written:end])
            else:
                written += self.open_segment(index, rest, final, out[written:end])
        except Exception as exc:
            return written, exc
        return written, None

    @staticmethod
    def _nonce(index: int, final: bool) -> bytes:
        return index.to_bytes(11, "big") + (b"\x01" if final else b"\x00")

    def seal_segment(self, index: int, plaintext: Buffer, final: bool, out: memoryview) -> int:
        return self._aead.seal_into(self._nonce(index, final), plaintext, out)

    def open_segment(self, index: int, ciphertext: Buffer, final: bool, out: memoryview) -> int:
        """Open chunk ``index``; a final empty chunk after data raises FormatError.

        A full final chunk that opens only as a non-final one means chunks are missing at
        the end: :class:`TruncatedStreamError`. Other failures: AuthenticationError.
        """
        size = len(ciphertext)
        if final and index > 0 and size == TAG_SIZE:
            raise FormatError("age payload ends with an empty chunk after data (not allowed)")
        try:
            return self._aead.open_into(self._nonce(index, final), ciphertext, out)
        except AuthenticationError:
            if final and size == CHUNK_SIZE + TAG_SIZE:
                try:
                    self._aead.open_into(self._nonce(index, False), ciphertext, out)
                except AuthenticationError:
                    pass
                else:
                    raise TruncatedStreamError(
                        f"age payload ends after chunk {index}, which is not the final chunk: "
                        "the file is truncated"
                    ) from None
            raise AuthenticationError(
                f"age payload chunk {index} did not verify: tampered, reordered, "
                "or cut inside a chunk"
            ) from None


def _payload_codec(file_key: bytes, nonce: bytes) -> AgeCodec:
    return AgeCodec(hkdf(file_key, salt=nonce, info=b"payload"))


class AgeEncryptor(SegmentedEncryptor):
    """Encrypt to age v1 (sans-I/O transform): header first, then the payload chunks.

    Give ``recipients`` (``age1...`` strings or recipient objects) or a ``passphrase``.
    Raises :class:`InvalidParameterError` (no recipient, a passphrase mixed with
    recipients, classic mixed with post-quantum) and :class:`FormatError` (bad key string)
    here; the header (scrypt for a passphrase) is built on the first ``feed``/``finish``,
    which the engine runs on a worker thread.
    """

    __slots__ = ()

    @keyword_only("recipients", "passphrase")
    def __init__(
        self,
        *,
        recipients: Iterable[RecipientLike] | RecipientLike = (),
        passphrase: str | Buffer | None = None,
        work_factor: int = DEFAULT_WORK_FACTOR,
    ) -> None:
        targets = _recipient_list(recipients, passphrase, work_factor)

        def build() -> tuple[SegmentCodec, bytes]:
            file_key = random_bytes(FILE_KEY_SIZE)
            nonce = random_bytes(NONCE_SIZE)
            header = _build_header(file_key, targets)
            return _payload_codec(file_key, nonce), header + nonce

        super().__init__(build=build)


class _HeaderReader(_stanza.StanzaHeaderReader[AgeHeader]):
    """Parses the header once complete, unwraps the file key once, then waits for the nonce."""

    __slots__ = ("_file_key", "_identities", "_scan")

    def __init__(self, identities: Sequence[Identity], max_header_size: int) -> None:
        super().__init__()
        self._identities = identities
        self._scan = _HeaderScan(max_header_size)
        self._file_key = b""

    def _parse(self, data: bytes | bytearray) -> AgeHeader | None:
        size = self._scan(data)
        return None if size is None else _parse_complete(bytes(data[:size]))

    def _open(self, header: AgeHeader) -> None:
        self._file_key = _open_file_key(header, self._identities)

    def _payload(
        self, header: AgeHeader, data: bytes | bytearray
    ) -> tuple[SegmentCodec, int] | int:
        end = header.size + NONCE_SIZE
        if len(data) < end:
            return end
        codec = _payload_codec(self._file_key, bytes(data[header.size : end]))
        self._file_key = b""
        return codec, end


class AgeDecryptor(SegmentedDecryptor):
    """Decrypt age v1 (sans-I/O transform), releasing only chunks that verified.

    Give ``identities`` (``AGE-SECRET-KEY-...`` strings or identity objects) or a
    ``passphrase``. Binary input only: put an :class:`~streamcrypt.codecs.armor.ArmorDecoder`
    in front for armored files. Raises :class:`FormatError`, :class:`UnknownKeyError`,
    :class:`AuthenticationError`, :class:`TruncatedStreamError`,
    :class:`LimitExceededError` (see the module docstring).
    """

    __slots__ = ("_reader",)

    @keyword_only("identities", "passphrase")
    def __init__(
        self,
        *,
        identities: Iterable[IdentityLike] | IdentityLike = (),
        passphrase: str | Buffer | None = None,
        max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
    ) -> None:
        self._reader = _HeaderReader(
            _identity_list(identities, passphrase, max_work_factor), max_header_size
        )
        super().__init__(self._reader)

    @property
    def header(self) -> AgeHeader | None:
        """The parsed header once it authenticated (``None`` before)."""
        return self._reader.header if self.codec is not None else None


@keyword_only("recipients", "passphrase", "armor")
def encrypt_bytes(
    plaintext: Buffer,
    *,
    recipients: Iterable[RecipientLike] | RecipientLike = (),
    passphrase: str | Buffer | None = None,
    armor: bool = False,
    work_factor: int = DEFAULT_WORK_FACTOR,
) -> bytes:
    """Encrypt ``plaintext`` to an age v1 file (ASCII-armored when ``armor``).

    Raises as :class:`AgeEncryptor`.
    """
    enc = AgeEncryptor(recipients=recipients, passphrase=passphrase, work_factor=work_factor)
    out = enc.update(plaintext) + enc.finalize()
    return _armor(out) if armor else out


@keyword_only("identities", "passphrase")
def decrypt_bytes(
    ciphertext: Buffer,
    *,
    identities: Iterable[IdentityLike] | IdentityLike = (),
    passphrase: str | Buffer | None = None,
    max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
) -> bytes:
    """Decrypt an age v1 file, binary or ASCII-armored (detected as the age tool does).

    Raises as :class:`AgeDecryptor`; bad armor raises :class:`FormatError`.
    """
    dec = AgeDecryptor(
        identities=identities, passphrase=passphrase, max_work_factor=max_work_factor
    )
    if not is_armored(ciphertext):
        return dec.update(ciphertext) + dec.finalize()
    # The same chain a stream goes through: the first fault in byte order wins.
    armored = ArmorDecoder()
    out = dec.update(armored.update(ciphertext))
    out += dec.update(armored.finalize())
    return out + dec.finalize()


@keyword_only("identities", "passphrase")
def layout(
    head: Buffer,
    stream_size: int,
    *,
    identities: Iterable[IdentityLike] | IdentityLike = (),
    passphrase: str | Buffer | None = None,
    max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
) -> SegmentLayout:
    """Authenticate the header at the start of ``head`` and map a binary age file of
    ``stream_size`` bytes for random access (``SegmentLayout.read``)."""
    reader = _HeaderReader(_identity_list(identities, passphrase, max_work_factor), max_header_size)
    opened = reader(bytes(head))
    if opened is None or isinstance(opened, int):
        raise TruncatedStreamError("the data is shorter than the age header and payload nonce")
    codec, size = opened
    return SegmentLayout(codec, size, stream_size)


def _check(options: FormatOptions, mode: str) -> None:
    if options.key is not None:
        raise InvalidParameterError(
            'format="age" takes recipients=/identities= or passphrase=, not key='
        )
    if options.suite is not None or options.segment_size is not None or options.aad:
        raise InvalidParameterError(
            "age fixes its suite (ChaCha20-Poly1305) and chunk size (64 KiB) and has no "
            "associated data: drop suite=, segment_size= and aad="
        )
    has_passphrase = options.passphrase is not None
    if mode == "wb" and (options.identities or not (options.recipients or has_passphrase)):
        raise InvalidParameterError(
            "writing age takes recipients= (public keys) or passphrase=, not identities="
        )
    if mode == "rb" and (options.recipients or not (options.identities or has_passphrase)):
        raise InvalidParameterError(
            "reading age takes identities= (secret keys) or passphrase=, not recipients="
        )


def _header_size(head: bytes) -> int | None:
    header = parse_header(head)
    return None if header is None else header.size + NONCE_SIZE


def _layout(options: FormatOptions, read_at: ReadAt, stream_size: int) -> SegmentLayout:
    head = read_at(0, min(stream_size, DEFAULT_MAX_HEADER_SIZE))
    identities = cast("tuple[IdentityLike, ...]", options.identities)
    return layout(head, stream_size, identities=identities, passphrase=options.passphrase)


#: age v1's format descriptor (binary; armor is a stage in front).
FORMAT = SegmentedFormat(
    "age",
    encryptor=lambda o: AgeEncryptor(
        recipients=cast("tuple[RecipientLike, ...]", o.recipients),
        passphrase=o.passphrase,
        work_factor=cast(int, or_default(o.work_factor, DEFAULT_WORK_FACTOR)),
    ),
    decryptor=lambda o: AgeDecryptor(
        identities=cast("tuple[IdentityLike, ...]", o.identities),
        passphrase=o.passphrase,
        max_work_factor=cast(int, or_default(o.max_work_factor, DEFAULT_MAX_WORK_FACTOR)),
    ),
    writes=frozenset({"recipients", "passphrase", "work_factor", "armor"}),
    reads=frozenset({"identities", "passphrase", "max_work_factor"}),
    check=_check,
    detect=lambda head: head.startswith(VERSION_LINE),
    header_size=_header_size,
    max_header_size=DEFAULT_MAX_HEADER_SIZE,
    layout=_layout,
    opens_files=True,
    armor=ARMOR,
)
