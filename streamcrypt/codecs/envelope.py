"""The streamcrypt envelope, version 1: the native container for passwords and public keys.

The wire format is specified once, in docs/FORMAT.md ("The streamcrypt envelope"); this
module implements it.

Theory of operation
-------------------
A random *file key* is wrapped once per recipient into a *stanza* (passphrase: Argon2id
or scrypt; X25519; ECIES secp256k1 or x25519), each ending with a check value that lets
an identity find its own stanza without revealing to anyone else whom a stanza is for.
The header carries the stanzas and a MAC keyed from the file key; the payload is a native
container keyed from it too, with the header as associated data, so no stanza can be
swapped, dropped or added unnoticed. A signed envelope ends with an Ed25519ph signature
over everything before it (encrypt-then-sign). The stanza machinery (protocols, trying
identities, the header reader) is shared with age in ``codecs._stanza``.

Parallelism: the container's segments are sealed and opened on worker threads by the
engine, signed or not. A signing encryptor is a chain: the segmented encryptor, then a
tap that hashes the ciphertext as it comes out (in order) and appends the signature. A
verifying decryptor holds back the last 64 bytes, hashes the rest in ``feed()`` and
checks the signature before it releases the final segment; segment opening stays
parallel.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, cast

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, x25519

from ..abc import Buffer, Chain, Lifecycle, State
from ..deprecation import renamed_keyword
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    InvalidPublicKeyError,
    InvalidSignatureError,
    TruncatedStreamError,
    UnsupportedFormatError,
)
from ..keys import (
    MAX_READ_PARAMS,
    MAX_SCRYPT_READ_PARAMS,
    MODERATE,
    Argon2Params,
    PasswordParams,
    ScryptParams,
    SecretKey,
    as_secret_key,
    check_read_params,
    derive_key_from_password,
    hkdf,
    random_bytes,
)
from ..primitives import (
    ED25519_SIGNATURE_SIZE,
    ChaCha20Poly1305Suite,
    Ed25519phSigner,
    Ed25519phVerifier,
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from . import _stanza, container, ecies
from ._bech32 import bech32_decode, bech32_encode
from ._format import FormatOptions, ReadAt, SegmentedFormat, or_default
from ._segmented import SegmentCodec, SegmentedDecryptor, SegmentJob, SegmentLayout
from ._x25519 import X25519PublicText, X25519SecretText, x25519_exchange

__all__ = [
    "ARGON2ID",
    "ECIES_SECP256K1",
    "ECIES_X25519",
    "FORMAT",
    "MAGIC",
    "MAX_HEADER_SIZE",
    "MAX_STANZAS",
    "SCRYPT",
    "SIGNATURE_SIZE",
    "X25519",
    "EciesIdentity",
    "EciesRecipient",
    "EnvelopeDecryptor",
    "EnvelopeEncryptor",
    "EnvelopeHeader",
    "Identity",
    "IdentityLike",
    "PassphraseIdentity",
    "PassphraseRecipient",
    "Recipient",
    "RecipientLike",
    "Stanza",
    "X25519Identity",
    "X25519Recipient",
    "decrypt_bytes",
    "encrypt_bytes",
    "layout",
    "parse_header",
    "parse_identity",
    "parse_recipient",
]

#: The four bytes that start an envelope.
MAGIC = b"SCEV"
VERSION = 1
FLAG_SIGNED = 0x01
FILE_KEY_SIZE = 32
MAC_SIZE = 32
CHECK_SIZE = 16
WRAPPED_SIZE = FILE_KEY_SIZE + 16
#: Bytes of the Ed25519ph signature a signed envelope ends with.
SIGNATURE_SIZE = ED25519_SIGNATURE_SIZE
#: Most stanzas (recipients plus at most one passphrase) in one header.
MAX_STANZAS = 64
#: Longest envelope header a reader buffers before refusing it (FormatError).
MAX_HEADER_SIZE = 1 << 16

#: Stanza type: a passphrase, Argon2id.
ARGON2ID = 0x01
#: Stanza type: a passphrase, scrypt.
SCRYPT = 0x02
#: Stanza type: an X25519 recipient.
X25519 = 0x10
#: Stanza type: a secp256k1 recipient (ECIES, as eciespy).
ECIES_SECP256K1 = 0x11
#: Stanza type: an X25519 recipient wrapped as eciespy's ECIES does it.
ECIES_X25519 = 0x12

_INFO = b"streamcrypt envelope v1 "
_LABELS = {
    ARGON2ID: b"argon2id",
    SCRYPT: b"scrypt",
    X25519: b"x25519",
    ECIES_SECP256K1: b"ecies-secp256k1",
    ECIES_X25519: b"ecies-x25519",
}
_PREFIX_SIZES = {ARGON2ID: 24, SCRYPT: 25, X25519: 32, ECIES_SECP256K1: 33, ECIES_X25519: 32}
_PASSPHRASE_TYPES = frozenset({ARGON2ID, SCRYPT})
_ZERO_NONCE = bytes(12)
_ARGON2 = struct.Struct(">16sII")
_SCRYPT = struct.Struct(">16sBII")

_HRP_X25519 = "sc-x25519-pub"
_HRP_X25519_SECRET = "sc-x25519-secret-"
_HRP_SECP256K1 = "sc-secp256k1-pub"
_HRP_SECP256K1_SECRET = "sc-secp256k1-secret-"


# --------------------------------------------------------------------------- header


@dataclass(frozen=True, slots=True)
class Stanza:
    """One wrapped copy of the file key: a type byte and its body."""

    kind: int
    body: bytes

    def encode(self) -> bytes:
        return struct.pack(">BH", self.kind, len(self.body)) + self.body


@dataclass(frozen=True, slots=True)
class EnvelopeHeader:
    """A parsed (not yet authenticated) envelope header."""

    stanzas: tuple[Stanza, ...]
    signer: bytes | None
    raw: bytes  # the header bytes, mac included

    @property
    def size(self) -> int:
        return len(self.raw)

    @property
    def signed(self) -> bool:
        return self.signer is not None


def _encode_header(stanzas: Sequence[Stanza], signer: bytes | None) -> bytes:
    flags = FLAG_SIGNED if signer is not None else 0
    parts = [MAGIC, bytes([VERSION, flags]), signer or b"", bytes([len(stanzas)])]
    parts += [s.encode() for s in stanzas]
    return b"".join(parts)


def parse_header(data: Buffer) -> EnvelopeHeader | None:
    """Parse an envelope header from the start of ``data``; ``None`` if more bytes are needed.

    Raises :class:`FormatError` (bad magic, bad stanza count or size, two passphrase
    stanzas, longer than :data:`MAX_HEADER_SIZE`) and :class:`UnsupportedFormatError`
    (another version, unknown flags).
    """
    parsed = _parse_header(bytes(memoryview(data).cast("B")[: MAX_HEADER_SIZE + 1]))
    return parsed if isinstance(parsed, EnvelopeHeader) else None


def _parse_header(buf: bytes | bytearray) -> EnvelopeHeader | int:
    """:func:`parse_header` without copying ``buf``: the header, or while it is incomplete
    the length ``buf`` must reach before asking again helps. Walks the stanza lengths
    only, so asking again costs the stanza count, not the bytes held."""
    n = min(len(buf), MAX_HEADER_SIZE + 1)
    if not buf.startswith(MAGIC):
        if n >= len(MAGIC) or not MAGIC.startswith(buf):
            raise FormatError("not a streamcrypt envelope (bad magic)")
        return len(MAGIC)
    if n < 6:
        return 6
    version, flags = buf[4], buf[5]
    if version != VERSION:
        raise UnsupportedFormatError(f"unsupported envelope version {version}; this reads 1")
    if flags & ~FLAG_SIGNED:
        raise UnsupportedFormatError(f"unknown envelope flags {flags:#04x}")
    pos = 6
    signer = None
    if flags & FLAG_SIGNED:
        if n < pos + 32:
            return pos + 32
        signer = bytes(buf[pos : pos + 32])
        pos += 32
    if n < pos + 1:
        return pos + 1
    count = buf[pos]
    pos += 1
    if not 1 <= count <= MAX_STANZAS:
        raise FormatError(f"envelope has {count} stanzas; it must have 1..{MAX_STANZAS}")
    spans: list[tuple[int, int, int]] = []
    for _ in range(count):
        if n < pos + 3:
            return _need_more(n, pos + 3)
        kind, length = struct.unpack_from(">BH", buf, pos)
        pos += 3
        if kind in _PREFIX_SIZES and length != _PREFIX_SIZES[kind] + CHECK_SIZE + WRAPPED_SIZE:
            raise FormatError(
                f"envelope {_LABELS[kind].decode()} stanza must be "
                f"{_PREFIX_SIZES[kind] + CHECK_SIZE + WRAPPED_SIZE} bytes, got {length}"
            )
        if n < pos + length:
            return _need_more(n, pos + length)
        spans.append((kind, pos, length))
        pos += length
    if sum(kind in _PASSPHRASE_TYPES for kind, _, _ in spans) > 1:
        raise FormatError("envelope has more than one passphrase stanza")
    if n < pos + MAC_SIZE:
        return _need_more(n, pos + MAC_SIZE)
    stanzas = tuple(Stanza(kind, bytes(buf[at : at + size])) for kind, at, size in spans)
    return EnvelopeHeader(stanzas, signer, bytes(buf[: pos + MAC_SIZE]))


def _need_more(held: int, need: int) -> int:
    """The header is incomplete: refuse it once it passed the size limit."""
    if held > MAX_HEADER_SIZE:
        raise FormatError(f"envelope header is longer than {MAX_HEADER_SIZE} bytes")
    return min(need, MAX_HEADER_SIZE + 1)


def _keys(file_key: bytes) -> tuple[bytes, SecretKey]:
    mac_key = hkdf(file_key, info=_INFO + b"header")
    return mac_key, SecretKey(hkdf(file_key, info=_INFO + b"payload"))


def _mac(mac_key: bytes, body: bytes, aad: Buffer) -> bytes:
    return hmac.new(mac_key, body + bytes(aad), hashlib.sha256).digest()


# --------------------------------------------------------------------------- stanzas


def _kek(kind: int, secret: bytes, salt: bytes) -> tuple[ChaCha20Poly1305Suite, bytes]:
    okm = hkdf(secret, salt=salt, info=_INFO + _LABELS[kind], length=32 + CHECK_SIZE)
    return ChaCha20Poly1305Suite(okm[:32]), okm[32:]


def _seal_stanza(kind: int, prefix: bytes, secret: bytes, salt: bytes, file_key: bytes) -> Stanza:
    aead, check = _kek(kind, secret, salt)
    wrapped = aead.seal(_ZERO_NONCE, file_key, bytes([kind]) + prefix)
    return Stanza(kind, prefix + check + wrapped)


def _open_stanza(stanza: Stanza, secret: bytes, salt: bytes) -> bytes | None:
    """The file key; ``None`` if the stanza is not for this secret (check differs)."""
    n = _PREFIX_SIZES[stanza.kind]
    aead, check = _kek(stanza.kind, secret, salt)
    if not hmac.compare_digest(check, stanza.body[n : n + CHECK_SIZE]):
        return None
    try:
        return aead.open(
            _ZERO_NONCE, stanza.body[n + CHECK_SIZE :], bytes([stanza.kind]) + stanza.body[:n]
        )
    except AuthenticationError:
        raise AuthenticationError(
            f"envelope {_LABELS[stanza.kind].decode()} stanza is addressed to this identity "
            "but its wrapped key does not open: the stanza was tampered with"
        ) from None


class Recipient(_stanza.StanzaRecipient[Stanza], Protocol):
    """Something the file key can be wrapped to: ``wrap(file_key)`` returns one stanza."""


class Identity(_stanza.StanzaIdentity[Stanza], Protocol):
    """Something that may unwrap stanzas of the types in ``kinds``: ``unwrap(stanza)``
    returns the file key, or ``None`` when the stanza is not addressed to it."""

    @property
    def kinds(self) -> frozenset[int]: ...


class X25519Recipient(X25519PublicText):
    """An X25519 public key (``sc-x25519-pub1...``); low-order points are refused.

    Raises :class:`InvalidPublicKeyError` at construction for a wrong size or low order.
    """

    HRP = _HRP_X25519
    DESCRIPTION = "an X25519 recipient (sc-x25519-pub1...)"
    CHECK_ORDER_EARLY = True
    __slots__ = ()

    def wrap(self, file_key: bytes) -> Stanza:
        ephemeral = x25519.X25519PrivateKey.generate()
        share = ephemeral.public_key().public_bytes_raw()
        shared = ephemeral.exchange(x25519.X25519PublicKey.from_public_bytes(self._public))
        return _seal_stanza(X25519, share, shared, share + self._public, file_key)


class X25519Identity(X25519SecretText[X25519Recipient]):
    """An X25519 private key (``SC-X25519-SECRET-1...``); ``repr`` shows only the public key.

    Opens x25519 and ecies-x25519 stanzas (the same key pair serves both).
    """

    SECRET_HRP = _HRP_X25519_SECRET
    DESCRIPTION = "an X25519 identity (SC-X25519-SECRET-1...)"
    RECIPIENT = X25519Recipient
    __slots__ = ()

    kinds: frozenset[int] = frozenset({X25519, ECIES_X25519})

    def unwrap(self, stanza: Stanza) -> bytes | None:
        """The file key, ``None`` if the stanza is not ours.

        Raises :class:`InvalidPublicKeyError` for a low-order or invalid ephemeral key and
        :class:`AuthenticationError` for a stanza of ours that was tampered with.
        """
        share = stanza.body[:32]
        if stanza.kind == ECIES_X25519:
            key = ecies.decapsulate(self.secret_key(), share, curve="x25519")
            return _open_stanza(stanza, key.secret_bytes(), share)
        if stanza.kind != X25519:
            return None
        shared = x25519_exchange(self._private, share)
        if shared is None:
            raise InvalidPublicKeyError("envelope x25519 stanza has a low-order ephemeral key")
        return _open_stanza(stanza, shared, share + self._recipient.public_bytes())


EciesCurve = Literal["secp256k1", "x25519"]
_ECIES_KINDS: dict[str, int] = {"secp256k1": ECIES_SECP256K1, "x25519": ECIES_X25519}


def _ecies_curve(curve: str) -> EciesCurve:
    if curve not in _ECIES_KINDS:
        raise UnsupportedFormatError(
            f"envelope ECIES recipients use secp256k1 or x25519, not {curve!r}"
        )
    return "secp256k1" if curve == "secp256k1" else "x25519"


def _secp256k1_compressed(raw: bytes) -> bytes:
    key = (
        serialization.load_der_public_key(raw)
        if raw[:1] == b"\x30"
        else ec.EllipticCurvePublicKey.from_encoded_point(
            ec.SECP256K1(), b"\x04" + raw if len(raw) == 64 else raw
        )
    )
    return key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint)


class EciesRecipient:
    """A public key for "streaming ECIES" stanzas (``ecies.encapsulate``).

    secp256k1 keys in any form :mod:`streamcrypt.codecs.ecies` takes (text:
    ``sc-secp256k1-pub1...``, compressed); x25519 keys of 32 bytes. Raises
    :class:`InvalidPublicKeyError` for an invalid, off-curve or low-order key.
    """

    __slots__ = ("_curve", "_public")

    def __init__(self, public_key: Buffer, *, curve: EciesCurve = "secp256k1") -> None:
        self._curve = _ecies_curve(curve)
        raw = bytes(public_key)
        ecies.encapsulate(raw, curve=self._curve)  # validates: raises InvalidPublicKeyError
        self._public = _secp256k1_compressed(raw) if self._curve == "secp256k1" else raw

    @classmethod
    def parse(cls, text: str) -> EciesRecipient:
        """Parse ``sc-secp256k1-pub1...`` or ``sc-x25519-pub1...``; raises FormatError."""
        hrp, data = bech32_decode(text)
        if hrp == _HRP_SECP256K1 and len(data) == 33:
            return cls(data, curve="secp256k1")
        if hrp == _HRP_X25519 and len(data) == 32:
            return cls(data, curve="x25519")
        raise FormatError("not an ECIES recipient (sc-secp256k1-pub1... or sc-x25519-pub1...)")

    @property
    def curve(self) -> EciesCurve:
        return self._curve

    def public_bytes(self) -> bytes:
        """The key: SEC1 compressed (secp256k1) or 32 raw bytes (x25519)."""
        return self._public

    def wrap(self, file_key: bytes) -> Stanza:
        share, key = ecies.encapsulate(self._public, curve=self._curve, compress_ephemeral=True)
        kind = _ECIES_KINDS[self._curve]
        return _seal_stanza(kind, share, key.secret_bytes(), share, file_key)

    def __str__(self) -> str:
        hrp = _HRP_SECP256K1 if self._curve == "secp256k1" else _HRP_X25519
        return bech32_encode(hrp, self._public)

    def __repr__(self) -> str:
        return f"EciesRecipient({str(self)!r}, curve={self._curve!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, EciesRecipient)
            and other._curve == self._curve
            and other._public == self._public
        )

    def __hash__(self) -> int:
        return hash((self._curve, self._public))


class EciesIdentity:
    """A private key for ECIES stanzas: secp256k1 (``SC-SECP256K1-SECRET-1...``) or x25519.

    An x25519 ECIES identity also opens plain x25519 stanzas. ``repr`` hides the secret.
    """

    __slots__ = ("_curve", "_raw", "_recipient", "_x25519")

    def __init__(self, private_key: Buffer | SecretKey, *, curve: EciesCurve = "secp256k1") -> None:
        self._curve = _ecies_curve(curve)
        raw = as_secret_key(private_key, 32, what=f"a {self._curve} private key").secret_bytes()
        self._raw = SecretKey(raw)
        public = ecies.public_key(raw, curve=self._curve, compressed=True)
        self._recipient = EciesRecipient(public, curve=self._curve)
        self._x25519 = X25519Identity(raw) if self._curve == "x25519" else None

    @classmethod
    def generate(cls, curve: EciesCurve = "secp256k1") -> EciesIdentity:
        private, _ = ecies.generate_keypair(_ecies_curve(curve))
        return cls(private, curve=curve)

    @classmethod
    def parse(cls, text: str) -> EciesIdentity:
        """Parse ``SC-SECP256K1-SECRET-1...`` or ``SC-X25519-SECRET-1...``."""
        hrp, data = bech32_decode(text)
        if hrp == _HRP_SECP256K1_SECRET and len(data) == 32:
            return cls(data, curve="secp256k1")
        if hrp == _HRP_X25519_SECRET and len(data) == 32:
            return cls(data, curve="x25519")
        raise FormatError("not an ECIES identity (SC-SECP256K1-SECRET-1... or SC-X25519-...)")

    @property
    def kinds(self) -> frozenset[int]:
        return X25519Identity.kinds if self._x25519 is not None else frozenset({ECIES_SECP256K1})

    @property
    def recipient(self) -> EciesRecipient:
        return self._recipient

    def to_string(self) -> str:
        """The secret key text. Handle with care."""
        hrp = _HRP_SECP256K1_SECRET if self._curve == "secp256k1" else _HRP_X25519_SECRET
        return bech32_encode(hrp, self._raw.secret_bytes(), upper=True)

    def secret_key(self) -> SecretKey:
        """The 32 private key bytes. Handle with care."""
        return self._raw

    def unwrap(self, stanza: Stanza) -> bytes | None:
        """As :meth:`X25519Identity.unwrap`."""
        if self._x25519 is not None:
            return self._x25519.unwrap(stanza)
        if stanza.kind != ECIES_SECP256K1:
            return None
        share = stanza.body[:33]
        key = ecies.decapsulate(self._raw, share, curve="secp256k1")
        return _open_stanza(stanza, key.secret_bytes(), share)

    def __repr__(self) -> str:
        return f"EciesIdentity(<secret hidden>, recipient={str(self._recipient)!r})"

    __str__ = __repr__


class PassphraseRecipient:
    """Wrap to a passphrase with Argon2id (``Argon2Params``) or scrypt (``ScryptParams``)."""

    __slots__ = ("_params", "_passphrase")

    def __init__(self, passphrase: str | Buffer, *, params: PasswordParams = MODERATE) -> None:
        if not isinstance(params, Argon2Params | ScryptParams):
            raise InvalidParameterError("params must be Argon2Params or ScryptParams")
        if isinstance(params, ScryptParams) and (params.log_n > 255 or params.r >= 1 << 32):
            raise InvalidParameterError("scrypt parameters do not fit the envelope stanza")
        self._passphrase = _stanza.passphrase_bytes(passphrase)
        self._params = params

    def wrap(self, file_key: bytes) -> Stanza:
        salt = random_bytes(16)
        params = self._params
        if isinstance(params, Argon2Params):
            kind, prefix = ARGON2ID, _ARGON2.pack(salt, params.ops, params.mem // 1024)
        else:
            kind, prefix = SCRYPT, _SCRYPT.pack(salt, params.log_n, params.r, params.p)
        secret = derive_key_from_password(self._passphrase, salt, params=params)
        return _seal_stanza(kind, prefix, secret.secret_bytes(), b"", file_key)

    def __repr__(self) -> str:
        return f"PassphraseRecipient(<passphrase hidden>, params={self._params})"


class PassphraseIdentity:
    """Open a passphrase stanza, refusing KDF parameters above the caps first.

    :meth:`unwrap` raises :class:`LimitExceededError` for parameters above
    ``max_params`` / ``max_scrypt`` and :class:`FormatError` for out-of-range ones.
    """

    __slots__ = ("_max_params", "_max_scrypt", "_passphrase")

    kinds: frozenset[int] = _PASSPHRASE_TYPES

    def __init__(
        self,
        passphrase: str | Buffer,
        *,
        max_params: Argon2Params = MAX_READ_PARAMS,
        max_scrypt: ScryptParams = MAX_SCRYPT_READ_PARAMS,
    ) -> None:
        self._passphrase = _stanza.passphrase_bytes(passphrase)
        self._max_params = max_params
        self._max_scrypt = max_scrypt

    @staticmethod
    def params_of(stanza: Stanza) -> tuple[bytes, PasswordParams]:
        """The salt and KDF parameters a passphrase stanza names (FormatError if invalid)."""
        try:
            if stanza.kind == ARGON2ID:
                salt, ops, mem_kib = _ARGON2.unpack_from(stanza.body)
                return salt, Argon2Params(ops, mem_kib * 1024)
            salt, log_n, r, p = _SCRYPT.unpack_from(stanza.body)
            if not 1 <= log_n <= 63:
                raise InvalidParameterError(f"scrypt log2 N must be 1..63, got {log_n}")
            return salt, ScryptParams(1 << log_n, r, p)
        except InvalidParameterError as exc:
            raise FormatError(f"envelope passphrase stanza has invalid parameters: {exc}") from None

    def unwrap(self, stanza: Stanza) -> bytes | None:
        if stanza.kind not in _PASSPHRASE_TYPES:
            return None
        salt, params = self.params_of(stanza)
        check_read_params(params, max_params=self._max_params, max_scrypt=self._max_scrypt)
        secret = derive_key_from_password(self._passphrase, salt, params=params)
        return _open_stanza(stanza, secret.secret_bytes(), b"")

    def __repr__(self) -> str:
        return "PassphraseIdentity(<passphrase hidden>)"


#: A recipient: a :class:`Recipient` or its string form.
RecipientLike: TypeAlias = Recipient | str
#: An identity: an :class:`Identity` or its string form.
IdentityLike: TypeAlias = Identity | str


def parse_recipient(text: str) -> X25519Recipient | EciesRecipient:
    """``sc-x25519-pub1...`` -> X25519Recipient; ``sc-secp256k1-pub1...`` -> EciesRecipient."""
    hrp, _ = bech32_decode(text.strip())
    if hrp == _HRP_X25519:
        return X25519Recipient.parse(text.strip())
    if hrp == _HRP_SECP256K1:
        return EciesRecipient.parse(text.strip())
    raise FormatError(f"unknown recipient type {hrp!r}; expected sc-x25519-pub or sc-secp256k1-pub")


def parse_identity(text: str) -> X25519Identity | EciesIdentity:
    """``SC-X25519-SECRET-1...`` -> X25519Identity; ``SC-SECP256K1-SECRET-1...`` ->
    EciesIdentity. Raises :class:`FormatError` (the message never contains the key)."""
    hrp, _ = bech32_decode(text.strip())
    if hrp == _HRP_X25519_SECRET:
        return X25519Identity.parse(text.strip())
    if hrp == _HRP_SECP256K1_SECRET:
        return EciesIdentity.parse(text.strip())
    raise FormatError("unknown identity type; expected SC-X25519-SECRET- or SC-SECP256K1-SECRET-")


_RECIPIENTS: _stanza.KeyList[Recipient] = _stanza.KeyList(
    "wrap",
    parse_recipient,
    "a recipient must be an sc-x25519-pub1... or sc-secp256k1-pub1... string or a Recipient",
    "an envelope needs at least one recipient or a passphrase",
)
_IDENTITIES: _stanza.KeyList[Identity] = _stanza.KeyList(
    "unwrap",
    parse_identity,
    "an identity must be an SC-X25519-SECRET-1... or SC-SECP256K1-SECRET-1... string or an Identity",
    "decrypting an envelope needs identities or a passphrase",
)


def _open_file_key(header: EnvelopeHeader, identities: Sequence[Identity]) -> bytes:
    """Each stanza in turn, with each identity that handles its type."""
    return _stanza.open_file_key(
        ((i, s) for s in header.stanzas for i in identities if s.kind in i.kinds),
        lambda: (
            "no stanza of this envelope opens with the given identities or passphrase: "
            "wrong private key or passphrase, or not addressed to you"
        ),
    )


# --------------------------------------------------------------------------- streams


def _recipient_list(
    recipients: Iterable[RecipientLike] | RecipientLike,
    passphrase: str | Buffer | None,
    params: PasswordParams,
) -> list[Recipient]:
    out = _RECIPIENTS(recipients, passphrase, lambda p: PassphraseRecipient(p, params=params))
    if sum(isinstance(r, PassphraseRecipient) for r in out) > 1:
        raise InvalidParameterError("an envelope takes at most one passphrase")
    if len(out) > MAX_STANZAS:
        raise InvalidParameterError(f"an envelope takes at most {MAX_STANZAS} recipients")
    return out


class _Sealer:
    """The envelope's segmented encryptor: stanzas, header and MAC, then the container."""

    __slots__ = ("_build", "_header", "_inner", "header")

    header: EnvelopeHeader | None

    def __init__(
        self,
        recips: list[Recipient],
        signer: bytes | None,
        suite: str,
        segment_size: int,
        aad: Buffer,
    ) -> None:
        file_key = random_bytes(FILE_KEY_SIZE)
        mac_key, payload_key = _keys(file_key)
        associated = bytes(aad)
        # Checked now; the container header is built (keyed) with the rest below.
        self._inner = container.StreamEncryptor(payload_key, suite=suite, segment_size=segment_size)

        def build() -> None:
            # Wrapping the file key may run a password KDF: the engine calls this (through
            # feed/finish while header_pending) on a worker thread.
            stanzas = [r.wrap(file_key) for r in recips]
            body = _encode_header(stanzas, signer)
            raw = body + _mac(mac_key, body, associated)
            self.header = EnvelopeHeader(tuple(stanzas), signer, raw)
            self._inner = container.StreamEncryptor(
                payload_key, suite=suite, segment_size=segment_size, aad=raw + associated
            )
            self._header = raw

        self._build: Callable[[], None] | None = build
        self.header = None
        self._header = b""

    def _settle(self) -> None:
        if self._build is None:
            return
        self._inner._check()  # a failure recorded before the header was built stands
        build, self._build = self._build, None
        try:
            build()
        except Exception as exc:
            raise self._inner.fail(exc) from None

    @property
    def state(self) -> State:
        return self._inner.state

    @property
    def header_pending(self) -> bool:
        return self._build is not None

    def take_header(self) -> bytes:
        if self._build is not None:
            return b""
        header, self._header = self._header, b""
        return header + self._inner.take_header()

    def feed(self, data: Buffer) -> list[SegmentJob]:
        self._settle()
        return self._inner.feed(data)

    def finish(self) -> list[SegmentJob]:
        self._settle()
        return self._inner.finish()

    def fail(self, exc: BaseException) -> BaseException:
        return self._inner.fail(exc)

    def update(self, data: Buffer, /) -> bytes:
        jobs = self.feed(data)
        return self.take_header() + self._inner.run_all(jobs)

    def finalize(self) -> bytes:
        jobs = self.finish()
        return self.take_header() + self._inner.run_all(jobs)


class _SignatureTap(Lifecycle):
    """Signs the envelope that passes through (Ed25519ph) and appends the signature."""

    __slots__ = ("_signer",)

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._init_lifecycle()
        self._signer = Ed25519phSigner(key)

    def update(self, data: Buffer, /) -> bytes:
        self._check()
        return self._signer.update(data)

    def finalize(self) -> bytes:
        self._check()
        self._signer.finalize()
        self._finish()
        return self._signer.signature()


class EnvelopeEncryptor(Chain):
    """Encrypt a stream to recipients and/or a passphrase, optionally signed (sans-I/O).

    ``recipients`` are :class:`X25519Recipient`, :class:`EciesRecipient`,
    :class:`PassphraseRecipient` or their text forms; ``passphrase`` adds a passphrase
    stanza (``work_factor``: Argon2id MODERATE by default, or ScryptParams;
    ``passphrase_params`` is its deprecated name). ``sign_with`` appends an Ed25519ph
    signature over the whole ciphertext.

    A chain (``update``/``finalize``): the segmented encryptor, whose segments the
    engine seals in parallel, then, when signing, a tap that hashes the ciphertext as it
    comes out in order and appends the signature. Unsigned, it is itself a segmented
    transform (``take_header``/``feed``/``finish``/``fail``, for the engine and
    :func:`streamcrypt.open`). Raises :class:`InvalidParameterError`,
    :class:`InvalidPublicKeyError`, :class:`UnsupportedFormatError`.
    """

    __slots__ = ("_sealer",)

    def __init__(
        self,
        *,
        recipients: Iterable[RecipientLike] | RecipientLike = (),
        passphrase: str | Buffer | None = None,
        suite: str = "aes-256-gcm",
        segment_size: int = container.DEFAULT_SEGMENT_SIZE,
        aad: Buffer = b"",
        sign_with: Ed25519PrivateKey | None = None,
        work_factor: PasswordParams = MODERATE,
        passphrase_params: PasswordParams | None = None,
    ) -> None:
        work_factor = renamed_keyword(
            "EnvelopeEncryptor",
            "passphrase_params",
            "work_factor",
            passphrase_params,
            work_factor,
            MODERATE,
        )
        if sign_with is not None and not isinstance(sign_with, Ed25519PrivateKey):
            raise InvalidParameterError("sign_with must be an Ed25519PrivateKey")
        recips = _recipient_list(recipients, passphrase, work_factor)
        public = sign_with.public_bytes() if sign_with else None
        self._sealer = _Sealer(recips, public, suite, segment_size, aad)
        if sign_with is None:
            super().__init__(self._sealer)
        else:
            super().__init__(self._sealer, _SignatureTap(sign_with))

    @property
    def header(self) -> EnvelopeHeader | None:
        """The envelope header, once built (``None`` until the first ``feed``/``finish``)."""
        return self._sealer.header

    @property
    def state(self) -> State:
        return self._sealer.state

    def _segmented(self) -> _Sealer:
        if len(self.stages) > 1:
            raise InvalidParameterError(
                "a signing EnvelopeEncryptor is two stages (encryptor, signature tap): "
                "run it with update()/finalize() or through streamcrypt.pipeline()"
            )
        return self._sealer

    @property
    def header_pending(self) -> bool:
        """True until the header is built (the first ``feed``/``finish`` builds it)."""
        return self._sealer.header_pending

    def take_header(self) -> bytes:
        """The envelope and container headers, once; ``b""`` afterwards (and before the
        first ``feed``/``finish`` built them)."""
        return self._segmented().take_header()

    def feed(self, data: Buffer) -> list[SegmentJob]:
        """Jobs for the segments now complete (unsigned only)."""
        return self._segmented().feed(data)

    def finish(self) -> list[SegmentJob]:
        """The final segment's job (unsigned only)."""
        return self._segmented().finish()

    def fail(self, exc: BaseException) -> BaseException:
        return self._sealer.fail(exc)


def _identity_list(
    identities: Iterable[IdentityLike] | IdentityLike,
    passphrase: str | Buffer | None,
    max_params: Argon2Params,
    max_scrypt: ScryptParams,
) -> list[Identity]:
    out = _IDENTITIES(
        identities,
        passphrase,
        lambda p: PassphraseIdentity(p, max_params=max_params, max_scrypt=max_scrypt),
    )
    for i in out:
        if not hasattr(i, "kinds"):
            raise InvalidParameterError(f"an envelope identity needs kinds: {type(i).__name__}")
    return out


class _HeaderReader(_stanza.StanzaHeaderReader[EnvelopeHeader]):
    """Opens the envelope header once (KDF work happens once), then the container header."""

    __slots__ = ("_aad", "_identities", "_payload_key", "_verify")

    def __init__(
        self, identities: Sequence[Identity], aad: Buffer, verify: Ed25519PublicKey | None
    ) -> None:
        super().__init__()
        self._identities = identities
        self._aad = bytes(aad)
        self._verify = verify
        self._payload_key: SecretKey | None = None

    def _parse(self, data: bytes | bytearray) -> EnvelopeHeader | int:
        return _parse_header(data)

    def _open(self, header: EnvelopeHeader) -> None:
        file_key = _open_file_key(header, self._identities)
        mac_key, payload_key = _keys(file_key)
        body = header.raw[:-MAC_SIZE]
        if not hmac.compare_digest(_mac(mac_key, body, self._aad), header.raw[-MAC_SIZE:]):
            raise AuthenticationError(
                "envelope header did not authenticate: wrong associated data or a tampered header"
            )
        if self._verify is not None:
            if header.signer is None:
                raise InvalidSignatureError(
                    "the envelope is not signed, but a signature was required (verify_with)"
                )
            if header.signer != self._verify.public_bytes():
                raise InvalidSignatureError(
                    "the envelope is signed by another key than verify_with names"
                )
        self._payload_key = payload_key

    def _payload(
        self, header: EnvelopeHeader, data: bytes | bytearray
    ) -> tuple[SegmentCodec, int] | None:
        assert self._payload_key is not None
        size = header.size
        inner = bytes(data[size : size + container.MAX_HEADER_SIZE])  # a header fits in it
        parsed = container.read_header(inner)
        if parsed is None or len(inner) < parsed[1] + container.TAG_SIZE:
            return None
        if parsed[0].key_id:
            raise FormatError("the container inside an envelope must not name a key id")
        lay = container.layout(
            self._payload_key, inner, len(data) - size, aad=header.raw + self._aad
        )
        return lay.codec, size + lay.header_size


class EnvelopeDecryptor(SegmentedDecryptor):
    """Decrypt an envelope with any matching identity or the passphrase (sans-I/O).

    Releases only verified segments. With ``verify_with`` (an Ed25519 public key) the
    stream must be signed by it, and ``finish()``/``finalize()`` verify the signature
    before the final segment comes out. Caps on passphrase parameters:
    ``max_work_factor`` (Argon2id; ``max_params`` is its deprecated name) and
    ``max_scrypt``. Raises :class:`UnknownKeyError`,
    :class:`AuthenticationError`, :class:`InvalidSignatureError`,
    :class:`InvalidPublicKeyError`, :class:`LimitExceededError`,
    :class:`TruncatedStreamError`, :class:`FormatError`, :class:`UnsupportedFormatError`.
    """

    __slots__ = ("_reader", "_tail", "_verifier")

    def __init__(
        self,
        *,
        identities: Iterable[IdentityLike] | IdentityLike = (),
        passphrase: str | Buffer | None = None,
        aad: Buffer = b"",
        verify_with: Ed25519PublicKey | Buffer | None = None,
        max_work_factor: Argon2Params = MAX_READ_PARAMS,
        max_scrypt: ScryptParams = MAX_SCRYPT_READ_PARAMS,
        max_params: Argon2Params | None = None,
    ) -> None:
        max_work_factor = renamed_keyword(
            "EnvelopeDecryptor",
            "max_params",
            "max_work_factor",
            max_params,
            max_work_factor,
            MAX_READ_PARAMS,
        )
        idents = _identity_list(identities, passphrase, max_work_factor, max_scrypt)
        verify = None
        if verify_with is not None:
            verify = (
                verify_with
                if isinstance(verify_with, Ed25519PublicKey)
                else Ed25519PublicKey(verify_with)
            )
        self._reader = _HeaderReader(idents, aad, verify)
        super().__init__(self._reader)
        self._verifier = Ed25519phVerifier(verify) if verify is not None else None
        self._tail = bytearray()

    @property
    def header(self) -> EnvelopeHeader | None:
        """The envelope header, once it was opened and authenticated."""
        return self._reader.header

    @property
    def signer(self) -> Ed25519PublicKey | None:
        """The key a signed stream names (checked only when ``verify_with`` was given)."""
        header = self._reader.header
        return Ed25519PublicKey(header.signer) if header and header.signer else None

    @property
    def verified(self) -> bool:
        """True once the signature was checked against ``verify_with``."""
        return self._verifier is not None and self._verifier.verified()

    def _forward(self, chunk: Buffer) -> list[SegmentJob]:
        if self._verifier is not None and len(chunk):
            self._verifier.update(chunk)
        return super().feed(chunk)

    def feed(self, data: Buffer) -> list[SegmentJob]:
        """Jobs for every segment now complete (the last 64 bytes are held back)."""
        self._check()
        view = memoryview(data).cast("B")
        tail = self._tail
        if len(tail) + len(view) <= SIGNATURE_SIZE:
            tail += view
            return []
        try:
            if len(view) >= SIGNATURE_SIZE:
                jobs = self._forward(bytes(tail)) if tail else []
                jobs += self._forward(view[:-SIGNATURE_SIZE])
                tail[:] = view[-SIGNATURE_SIZE:]
            else:
                joined = bytes(tail) + bytes(view)
                jobs = self._forward(joined[:-SIGNATURE_SIZE])
                tail[:] = joined[-SIGNATURE_SIZE:]
        except Exception as exc:
            raise self._break(exc) from None
        return jobs

    def finish(self) -> list[SegmentJob]:
        """Verify the signature (if asked), then the final segment's job.

        Raises :class:`InvalidSignatureError` before any final output.
        """
        self._check()
        try:
            jobs: list[SegmentJob] = []
            tail = bytes(self._tail)
            self._tail.clear()
            header = self._reader.header
            if header is None:
                # The header may end inside the held-back bytes: then the stream is unsigned.
                jobs = self._forward(tail)
                header = self._reader.header
                if header is not None and header.signed:
                    raise TruncatedStreamError("the signed envelope ended before its signature")
            elif not header.signed:
                jobs = self._forward(tail)
            else:
                if len(tail) < SIGNATURE_SIZE:
                    raise TruncatedStreamError("the signed envelope ended before its signature")
                if self._verifier is not None:
                    self._verifier.finalize(tail)
        except Exception as exc:
            raise self._break(exc) from None
        return jobs + super().finish()


def encrypt_bytes(
    plaintext: Buffer,
    *,
    recipients: Iterable[RecipientLike] | RecipientLike = (),
    passphrase: str | Buffer | None = None,
    suite: str = "aes-256-gcm",
    segment_size: int = container.DEFAULT_SEGMENT_SIZE,
    aad: Buffer = b"",
    sign_with: Ed25519PrivateKey | None = None,
    work_factor: PasswordParams = MODERATE,
    passphrase_params: PasswordParams | None = None,
) -> bytes:
    """Encrypt ``plaintext`` into an envelope at once (see :class:`EnvelopeEncryptor`)."""
    work_factor = renamed_keyword(
        "envelope.encrypt_bytes",
        "passphrase_params",
        "work_factor",
        passphrase_params,
        work_factor,
        MODERATE,
    )
    enc = EnvelopeEncryptor(
        recipients=recipients,
        passphrase=passphrase,
        suite=suite,
        segment_size=segment_size,
        aad=aad,
        sign_with=sign_with,
        work_factor=work_factor,
    )
    return enc.update(plaintext) + enc.finalize()


def decrypt_bytes(
    ciphertext: Buffer,
    *,
    identities: Iterable[IdentityLike] | IdentityLike = (),
    passphrase: str | Buffer | None = None,
    aad: Buffer = b"",
    verify_with: Ed25519PublicKey | Buffer | None = None,
    max_work_factor: Argon2Params = MAX_READ_PARAMS,
    max_scrypt: ScryptParams = MAX_SCRYPT_READ_PARAMS,
    max_params: Argon2Params | None = None,
) -> bytes:
    """Decrypt a whole envelope; returns nothing on failure (errors as
    :class:`EnvelopeDecryptor`)."""
    max_work_factor = renamed_keyword(
        "envelope.decrypt_bytes",
        "max_params",
        "max_work_factor",
        max_params,
        max_work_factor,
        MAX_READ_PARAMS,
    )
    dec = EnvelopeDecryptor(
        identities=identities,
        passphrase=passphrase,
        aad=aad,
        verify_with=verify_with,
        max_work_factor=max_work_factor,
        max_scrypt=max_scrypt,
    )
    return dec.update(ciphertext) + dec.finalize()


def layout(
    head: Buffer,
    stream_size: int,
    *,
    identities: Iterable[IdentityLike] | IdentityLike = (),
    passphrase: str | Buffer | None = None,
    aad: Buffer = b"",
    max_work_factor: Argon2Params = MAX_READ_PARAMS,
    max_scrypt: ScryptParams = MAX_SCRYPT_READ_PARAMS,
    max_params: Argon2Params | None = None,
) -> SegmentLayout:
    """Open the headers at the start of ``head`` and map an envelope of ``stream_size`` bytes.

    For random access: ``head`` must hold both headers (the first 64 KiB + 1 KiB always
    suffice). A signed envelope's trailing signature is left out of the layout and NOT
    verified (random reads cannot check a signature over the whole stream; read it all
    with ``verify_with`` for that). Raises like :class:`EnvelopeDecryptor`, and
    :class:`FormatError` when ``head`` is shorter than the headers.
    """
    max_work_factor = renamed_keyword(
        "envelope.layout",
        "max_params",
        "max_work_factor",
        max_params,
        max_work_factor,
        MAX_READ_PARAMS,
    )
    idents = _identity_list(identities, passphrase, max_work_factor, max_scrypt)
    reader = _HeaderReader(idents, aad, None)
    opened = reader(bytes(head))
    if opened is None or isinstance(opened, int) or reader.header is None:
        raise FormatError("the data is shorter than the envelope and container headers")
    codec, size = opened
    end = stream_size - (SIGNATURE_SIZE if reader.header.signed else 0)
    return SegmentLayout(codec, size, end)


def _layout(options: FormatOptions, read_at: ReadAt, stream_size: int) -> SegmentLayout:
    head = read_at(0, min(stream_size, 65 << 10))
    return layout(
        head,
        stream_size,
        identities=cast("tuple[IdentityLike, ...]", options.identities),
        passphrase=options.passphrase,
        aad=options.aad,
    )


#: The envelope's format descriptor (unsigned; ``sign_with`` / ``verify_with`` are
#: the codec's own keywords).
FORMAT = SegmentedFormat(
    "envelope",
    encryptor=lambda o: EnvelopeEncryptor(
        recipients=cast("tuple[RecipientLike, ...]", o.recipients),
        passphrase=o.passphrase,
        suite=o.suite or "aes-256-gcm",
        segment_size=or_default(o.segment_size, container.DEFAULT_SEGMENT_SIZE),
        aad=o.aad,
        work_factor=cast("PasswordParams", or_default(o.work_factor, MODERATE)),
        sign_with=o.sign_with,
    ),
    decryptor=lambda o: EnvelopeDecryptor(
        identities=cast("tuple[IdentityLike, ...]", o.identities),
        passphrase=o.passphrase,
        aad=o.aad,
        max_work_factor=cast("Argon2Params", or_default(o.max_work_factor, MAX_READ_PARAMS)),
        verify_with=o.verify_with,
    ),
    writes=frozenset(
        {"recipients", "passphrase", "suite", "segment_size", "aad", "work_factor", "sign_with"}
    ),
    reads=frozenset({"identities", "passphrase", "aad", "max_work_factor", "verify_with"}),
    detect=lambda head: head.startswith(MAGIC),
    layout=_layout,
)
