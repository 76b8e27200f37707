"""The envelope's header: magic, version, flags, the signer's key, the stanzas (a type
byte, a length, a body) and the MAC, as docs/FORMAT.md specifies them."""

from __future__ import annotations

import hashlib
import hmac
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ...abc import Buffer, as_bytes
from ...errors import FormatError, InvalidParameterError, UnsupportedFormatError
from ...keys import SecretKey, hkdf
from ...primitives import ED25519_SIGNATURE_SIZE
from .._stanza import Stanza

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

#: Stanza type: a passphrase, Argon2id (type byte 0x01 on the wire).
ARGON2ID = "argon2id"
#: Stanza type: a passphrase, scrypt (0x02).
SCRYPT = "scrypt"
#: Stanza type: an X25519 recipient (0x10).
X25519 = "x25519"
#: Stanza type: a secp256k1 recipient (ECIES, as eciespy; 0x11).
ECIES_SECP256K1 = "ecies-secp256k1"
#: Stanza type: an X25519 recipient wrapped as eciespy's ECIES does it (0x12).
ECIES_X25519 = "ecies-x25519"

_INFO = b"streamcrypt envelope v1 "
#: Each stanza type's byte on the wire; another byte ``b`` reads as type ``"0x%02x" % b``.
_TYPE_BYTES = {
    ARGON2ID: 0x01,
    SCRYPT: 0x02,
    X25519: 0x10,
    ECIES_SECP256K1: 0x11,
    ECIES_X25519: 0x12,
}
_TYPE_NAMES = {byte: name for name, byte in _TYPE_BYTES.items()}
_OTHER_TYPE = re.compile(r"0x[0-9a-f]{2}")
_PREFIX_SIZES = {ARGON2ID: 24, SCRYPT: 25, X25519: 32, ECIES_SECP256K1: 33, ECIES_X25519: 32}
_PASSPHRASE_TYPES = frozenset({ARGON2ID, SCRYPT})


# --------------------------------------------------------------------------- header


def _type_byte(stanza: Stanza) -> int:
    """The wire byte of an envelope stanza's type; :class:`InvalidParameterError` for a
    stanza no envelope holds (more than one argument, or an unknown type name)."""
    kind = stanza.kind
    if len(stanza.args) == 1 and kind in _TYPE_BYTES:
        return _TYPE_BYTES[kind]
    if len(stanza.args) == 1 and _OTHER_TYPE.fullmatch(kind):
        return int(kind, 16)
    raise InvalidParameterError(
        f"a {kind[:32]!r} stanza cannot go into an envelope (an age-only recipient?)"
    )


def _encode_stanza(stanza: Stanza) -> bytes:
    """A stanza as the envelope writes it: type byte, body length, body."""
    if len(stanza.body) > 0xFFFF:
        raise InvalidParameterError("an envelope stanza body must be at most 65535 bytes")
    return struct.pack(">BH", _type_byte(stanza), len(stanza.body)) + stanza.body


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
    """The header up to its MAC, for encrypting and re-keying alike: what is written
    reads. Raises :class:`InvalidParameterError` for stanzas :func:`_parse_header`
    refuses (more than :data:`MAX_STANZAS`, two passphrases, a known type of the wrong
    size, a header over :data:`MAX_HEADER_SIZE`) or no envelope holds."""
    if not 1 <= len(stanzas) <= MAX_STANZAS:
        raise InvalidParameterError(
            f"an envelope header of {len(stanzas)} stanzas cannot be written: "
            f"it holds 1 to {MAX_STANZAS}"
        )
    flags = FLAG_SIGNED if signer is not None else 0
    parts = [MAGIC, bytes([VERSION, flags]), signer or b"", bytes([len(stanzas)])]
    parts += [_encode_stanza(s) for s in stanzas]
    body = b"".join(parts)
    try:
        _parse_header(body + bytes(MAC_SIZE))
    except FormatError as exc:
        raise InvalidParameterError(f"this envelope header cannot be written: {exc}") from None
    return body


def parse_header(data: Buffer) -> EnvelopeHeader | None:
    """Parse an envelope header from the start of ``data``; ``None`` if more bytes are needed.

    Raises :class:`FormatError` (bad magic, bad stanza count or size, two passphrase
    stanzas, longer than :data:`MAX_HEADER_SIZE`) and :class:`UnsupportedFormatError`
    (another version, unknown flags).
    """
    parsed = _parse_header(bytes(memoryview(data).cast("B")[:MAX_HEADER_SIZE]))
    return parsed if isinstance(parsed, EnvelopeHeader) else None


def _parse_header(buf: bytes | bytearray) -> EnvelopeHeader | int:
    """:func:`parse_header` without copying ``buf``: the header, or while it is incomplete
    the length ``buf`` must reach before asking again helps. Walks the stanza lengths
    only, so asking again costs the stanza count, not the bytes held; refuses a header
    as soon as its lengths pass :data:`MAX_HEADER_SIZE` (:func:`_missing`)."""
    n = len(buf)
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
    spans: list[tuple[str, int, int]] = []
    for _ in range(count):
        if missing := _missing(n, pos + 3):
            return missing
        byte, length = struct.unpack_from(">BH", buf, pos)
        kind = _TYPE_NAMES.get(byte) or f"0x{byte:02x}"
        pos += 3
        if kind in _PREFIX_SIZES and length != _PREFIX_SIZES[kind] + CHECK_SIZE + WRAPPED_SIZE:
            raise FormatError(
                f"envelope {kind} stanza must be "
                f"{_PREFIX_SIZES[kind] + CHECK_SIZE + WRAPPED_SIZE} bytes, got {length}"
            )
        if missing := _missing(n, pos + length):
            return missing
        spans.append((kind, pos, length))
        pos += length
    if sum(kind in _PASSPHRASE_TYPES for kind, _, _ in spans) > 1:
        raise FormatError("envelope has more than one passphrase stanza")
    if missing := _missing(n, pos + MAC_SIZE):
        return missing
    stanzas = tuple(Stanza((kind,), bytes(buf[at : at + size])) for kind, at, size in spans)
    return EnvelopeHeader(stanzas, signer, bytes(buf[: pos + MAC_SIZE]))


def _missing(held: int, end: int) -> int:
    """0 when the ``held`` bytes reach ``end``, else ``end`` (the length to wait for).
    Raises :class:`FormatError` when ``end`` passes :data:`MAX_HEADER_SIZE`: the lengths
    read say the header is longer, whether or not its bytes are all there."""
    if end > MAX_HEADER_SIZE:
        raise FormatError(f"envelope header is longer than {MAX_HEADER_SIZE} bytes")
    return 0 if held >= end else end


def _keys(file_key: bytes) -> tuple[bytes, SecretKey]:
    mac_key = hkdf(file_key, info=_INFO + b"header")
    return mac_key, SecretKey(hkdf(file_key, info=_INFO + b"payload"))


def _mac(mac_key: bytes, body: bytes, aad: Buffer) -> bytes:
    return hmac.new(mac_key, body + as_bytes(aad, "aad"), hashlib.sha256).digest()
