"""The envelope's header: magic, version, flags, the signer's key, the stanzas (a type
byte, a length, a body) and the MAC, as docs/FORMAT.md specifies them."""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ...abc import Buffer
from ...errors import FormatError, UnsupportedFormatError
from ...keys import SecretKey, hkdf
from ...primitives import ED25519_SIGNATURE_SIZE

__all__ = ["EnvelopeHeader", "Stanza", "parse_header"]

#: The four bytes that start an envelope.
MAGIC = b"SCEV"
#: The envelope version this reads and writes.
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
