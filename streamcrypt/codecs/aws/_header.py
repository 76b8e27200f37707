"""The AWS message header: suites, the encryption context, the encrypted data keys, the
header fields parsed one by one, and the key derivation."""

from __future__ import annotations

import struct
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ...abc import Buffer, as_bytes
from ...errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    LimitExceededError,
    UnsupportedFormatError,
)
from ...keys import hkdf, hkdf_expand, hkdf_extract

#: Plaintext bytes per frame an encryptor writes unless told otherwise (the SDKs' default).
DEFAULT_FRAME_LENGTH = 4096
#: Encrypted data keys a reader accepts unless told otherwise (each may cost an RSA
#: decryption; the SDK's own default is no limit).
DEFAULT_MAX_ENCRYPTED_DATA_KEYS = 64
#: Longest message header a reader accepts unless told otherwise.
DEFAULT_MAX_HEADER_SIZE = 1 << 20
#: Longest frame a reader buffers (the format allows 2**32 - 1; the SDKs write 4 KiB).
DEFAULT_MAX_FRAME_LENGTH = 1 << 26
#: Longest non-framed body a reader (or writer) holds in memory.
DEFAULT_MAX_BODY_SIZE = 1 << 26
#: Where signed suites keep the verifying key in the encryption context.
PUBLIC_KEY_FIELD = "aws-crypto-public-key"
_RESERVED_PREFIX = "aws-crypto-"
_IV = 12
_TAG = 16
_U16 = 0xFFFF

Curve = Literal["P-256", "P-384"]


@dataclass(frozen=True, slots=True)
class AwsSuite:
    """An algorithm suite: AES-GCM key size, key derivation, commitment, signature.

    ``id`` is the suite's one spelling, as AWS documents it: ``"0x0578"``."""

    id: str
    name: str
    key_size: int
    kdf: Literal["identity", "sha256", "sha384", "sha512"]
    committing: bool
    curve: Curve | None = None

    @property
    def version(self) -> int:
        """The message format version that carries this suite."""
        return 2 if self.committing else 1

    @property
    def signed(self) -> bool:
        return self.curve is not None

    @property
    def id_bytes(self) -> bytes:
        return int(self.id, 16).to_bytes(2, "big")

    @property
    def signature_size(self) -> int:
        """The DER signature length the AWS SDKs write (71 for P-256, 103 for P-384)."""
        return {"P-256": 71, "P-384": 103, None: 0}[self.curve]


_SUITE_LIST = [
    AwsSuite("0x0014", "AES_128_GCM_IV12_TAG16_NO_KDF", 16, "identity", False),
    AwsSuite("0x0046", "AES_192_GCM_IV12_TAG16_NO_KDF", 24, "identity", False),
    AwsSuite("0x0078", "AES_256_GCM_IV12_TAG16_NO_KDF", 32, "identity", False),
    AwsSuite("0x0114", "AES_128_GCM_IV12_TAG16_HKDF_SHA256", 16, "sha256", False),
    AwsSuite("0x0146", "AES_192_GCM_IV12_TAG16_HKDF_SHA256", 24, "sha256", False),
    AwsSuite("0x0178", "AES_256_GCM_IV12_TAG16_HKDF_SHA256", 32, "sha256", False),
    AwsSuite(
        "0x0214", "AES_128_GCM_IV12_TAG16_HKDF_SHA256_ECDSA_P256", 16, "sha256", False, "P-256"
    ),
    AwsSuite(
        "0x0346", "AES_192_GCM_IV12_TAG16_HKDF_SHA384_ECDSA_P384", 24, "sha384", False, "P-384"
    ),
    AwsSuite(
        "0x0378", "AES_256_GCM_IV12_TAG16_HKDF_SHA384_ECDSA_P384", 32, "sha384", False, "P-384"
    ),
    AwsSuite("0x0478", "AES_256_GCM_HKDF_SHA512_COMMIT_KEY", 32, "sha512", True),
    AwsSuite(
        "0x0578", "AES_256_GCM_HKDF_SHA512_COMMIT_KEY_ECDSA_P384", 32, "sha512", True, "P-384"
    ),
]
#: Every suite of the message format, by id (``"0x0578"``).
SUITES: dict[str, AwsSuite] = {s.id: s for s in _SUITE_LIST}
_ON_WIRE: dict[int, AwsSuite] = {int(s.id, 16): s for s in _SUITE_LIST}
#: The SDKs' default (and ours): committing, signed.
DEFAULT_SUITE = "0x0578"


def _suite(suite_id: str, allow_legacy: bool) -> AwsSuite:
    """The suite ``suite_id`` (``"0x0578"``) names; raises :class:`UnsupportedFormatError`
    for an unknown one, and a legacy one unless ``allow_legacy``."""
    suite = SUITES.get(suite_id)
    if suite is None:
        raise UnsupportedFormatError(
            f"unknown AWS Encryption SDK algorithm suite {suite_id!r}: the suites are "
            f"{', '.join(SUITES)}"
        )
    if not suite.committing and not allow_legacy:
        raise UnsupportedFormatError(
            f"algorithm suite {suite_id} ({suite.name}) does not commit to its key; "
            "pass allow_legacy=True to accept it"
        )
    return suite


# ---------------------------------------------------------------------------------------
# Encryption context
# ---------------------------------------------------------------------------------------


def serialize_encryption_context(context: Mapping[str, str]) -> bytes:
    """The context as the header and the raw keyrings see it (sorted by UTF-8 key).

    Raises :class:`InvalidParameterError` (not str, too long) and
    :class:`LimitExceededError` (over 65535 bytes serialized).
    """
    if not context:
        return b""
    items: list[tuple[bytes, bytes]] = []
    for key, value in context.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidParameterError("encryption context keys and values must be str")
        k, v = key.encode(), value.encode()
        if len(k) > _U16 or len(v) > _U16:
            raise LimitExceededError("an encryption context key or value is over 65535 bytes")
        items.append((k, v))
    items.sort()
    out = bytearray(struct.pack(">H", len(items)))
    for k, v in items:
        out += struct.pack(">H", len(k)) + k + struct.pack(">H", len(v)) + v
    if len(out) > _U16:
        raise LimitExceededError("the encryption context is over 65535 bytes serialized")
    return bytes(out)


def _parse_context(raw: bytes) -> dict[str, str]:
    if not raw:
        return {}
    if len(raw) < 2:
        raise FormatError("the encryption context is cut short")
    (count,) = struct.unpack_from(">H", raw)
    if count == 0:
        raise FormatError("a non-empty encryption context must hold at least one pair")
    pos, out = 2, {}
    for _ in range(count):
        pair = []
        for _ in range(2):
            if pos + 2 > len(raw):
                raise FormatError("the encryption context is cut short")
            (n,) = struct.unpack_from(">H", raw, pos)
            if pos + 2 + n > len(raw):
                raise FormatError("an encryption context entry runs past its length")
            try:
                pair.append(raw[pos + 2 : pos + 2 + n].decode())
            except UnicodeDecodeError:
                raise FormatError("an encryption context entry is not UTF-8") from None
            pos += 2 + n
        if pair[0] in out:
            raise FormatError(f"the encryption context repeats the key {pair[0]!r}")
        out[pair[0]] = pair[1]
    if pos != len(raw):
        raise FormatError("the encryption context has bytes after its last pair")
    return out


@dataclass(frozen=True, slots=True)
class EncryptedDataKey:
    """One wrapped data key: who wrapped it (provider id and info) and the ciphertext."""

    provider_id: bytes
    provider_info: bytes
    ciphertext: bytes = field(repr=False)

    def encode(self) -> bytes:
        parts = (self.provider_id, self.provider_info, self.ciphertext)
        if any(len(p) > _U16 for p in parts):
            raise LimitExceededError("an encrypted data key field is over 65535 bytes")
        return b"".join(struct.pack(">H", len(p)) + p for p in parts)


# ---------------------------------------------------------------------------------------
# Header
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AwsHeader:
    """A parsed header (authenticated only once a decryptor or :func:`layout` opened it)."""

    suite: AwsSuite
    message_id: bytes
    encryption_context: Mapping[str, str]
    encrypted_data_keys: tuple[EncryptedDataKey, ...]
    framed: bool
    frame_length: int
    #: v2: the key commitment; v1: empty.
    commitment: bytes = field(repr=False)
    #: The header bytes the authentication tag covers.
    body: bytes = field(repr=False)
    #: v1: the header IV; v2: empty.
    auth_iv: bytes = field(repr=False)
    auth_tag: bytes = field(repr=False)

    @property
    def version(self) -> int:
        return self.suite.version

    @property
    def size(self) -> int:
        """Header bytes including the authentication."""
        return len(self.body) + len(self.auth_iv) + len(self.auth_tag)

    @property
    def context_bytes(self) -> bytes:
        return serialize_encryption_context(self.encryption_context)


#: A header parser step: asks for ``n`` more bytes and is sent them.
_Steps = Generator[int, bytes, AwsHeader]


@dataclass(frozen=True, slots=True)
class _Limits:
    allow_legacy: bool = False
    max_encrypted_data_keys: int | None = DEFAULT_MAX_ENCRYPTED_DATA_KEYS
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE
    max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH


def _header_steps(limits: _Limits) -> _Steps:
    """Parse a header field by field: yields how many bytes it needs next, is sent them.

    Resumable, so a header arriving in small pieces is parsed once, in linear time; every
    limit is checked as soon as its field is read.
    """
    body = bytearray()

    def take(data: bytes) -> bytes:
        body.extend(data)
        if len(body) > limits.max_header_size:
            raise LimitExceededError(
                f"the message header is over {limits.max_header_size} bytes (max_header_size)"
            )
        return data

    version = take((yield 1))[0]
    if version == 2:
        suite = _suite(f"0x{take((yield 2)).hex().upper()}", limits.allow_legacy)
        if suite.version != 2:
            raise FormatError(f"suite {suite.id} belongs to message format v1, not v2")
        id_size = 32
    elif version == 1:
        if take((yield 1)) != b"\x80":
            raise FormatError("a v1 message header must have type 0x80")
        suite = _suite(f"0x{take((yield 2)).hex().upper()}", limits.allow_legacy)
        if suite.version != 1:
            raise FormatError(f"suite {suite.id} belongs to message format v2, not v1")
        id_size = 16
    else:
        raise UnsupportedFormatError(
            f"not an AWS Encryption SDK message (version byte 0x{version:02x}; 1 and 2 exist)"
        )
    message_id = take((yield id_size))
    (ctx_len,) = struct.unpack(">H", take((yield 2)))
    context = _parse_context(take((yield ctx_len))) if ctx_len else {}
    (count,) = struct.unpack(">H", take((yield 2)))
    if count == 0:
        raise FormatError("a message must hold at least one encrypted data key")
    if limits.max_encrypted_data_keys is not None and count > limits.max_encrypted_data_keys:
        raise LimitExceededError(
            f"the message holds {count} encrypted data keys, more than "
            f"max_encrypted_data_keys={limits.max_encrypted_data_keys}"
        )
    edks = []
    for _ in range(count):
        parts = []
        for _ in range(3):
            (n,) = struct.unpack(">H", take((yield 2)))
            parts.append(take((yield n)) if n else b"")
        edks.append(EncryptedDataKey(*parts))
    content_type = take((yield 1))[0]
    if content_type not in (1, 2):
        raise FormatError(f"unknown content type {content_type} (1 non-framed, 2 framed)")
    if version == 1:
        if take((yield 4)) != bytes(4):
            raise FormatError("the v1 header's reserved bytes must be zero")
        if take((yield 1))[0] != _IV:
            raise FormatError("the v1 header's IV length must be 12")
    (frame_length,) = struct.unpack(">I", take((yield 4)))
    framed = content_type == 2
    if not framed and frame_length != 0:
        raise FormatError("a non-framed message must have frame length 0")
    if framed and frame_length == 0:
        raise FormatError("a framed message must have a frame length above 0")
    if frame_length > limits.max_frame_length:
        raise LimitExceededError(
            f"frame length {frame_length} is over max_frame_length={limits.max_frame_length}"
        )
    commitment = take((yield 32)) if suite.committing else b""
    header_body = bytes(body)
    auth_iv = (yield _IV) if version == 1 else b""
    auth_tag = yield _TAG
    return AwsHeader(
        suite,
        message_id,
        context,
        tuple(edks),
        framed,
        frame_length,
        commitment,
        header_body,
        auth_iv,
        auth_tag,
    )


class _HeaderParser:
    """Drives :func:`_header_steps` over a growing buffer, in linear time."""

    __slots__ = ("_need", "_pos", "_steps", "header")

    def __init__(self, limits: _Limits) -> None:
        self._steps = _header_steps(limits)
        self._need = next(self._steps)
        self._pos = 0
        self.header: AwsHeader | None = None

    def advance(self, data: Buffer) -> AwsHeader | None:
        """Parse what ``data`` (everything so far) allows; the header once complete."""
        while self.header is None and len(data) - self._pos >= self._need:
            chunk = bytes(data[self._pos : self._pos + self._need])
            self._pos += self._need
            try:
                self._need = self._steps.send(chunk)
            except StopIteration as done:
                self.header = done.value
        return self.header


def parse_header(
    data: Buffer,
    *,
    allow_legacy: bool = False,
    max_encrypted_data_keys: int | None = DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
    max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
) -> AwsHeader | None:
    """Parse (not authenticate) the header at the start of ``data``; ``None`` while short.

    Raises :class:`FormatError`, :class:`UnsupportedFormatError` (version, suite),
    :class:`LimitExceededError`.
    """
    limits = _Limits(allow_legacy, max_encrypted_data_keys, max_header_size, max_frame_length)
    return _HeaderParser(limits).advance(as_bytes(data, "data"))


def header_size(head: Buffer, *, allow_legacy: bool = True) -> int | None:
    """How many bytes the header at the start of ``head`` takes; ``None`` while unknown."""
    header = parse_header(head, allow_legacy=allow_legacy, max_encrypted_data_keys=None)
    return None if header is None else header.size


def is_aws(head: Buffer) -> bool:
    """True when ``head`` starts like an AWS Encryption SDK message (detection by magic:
    ``02 04 78`` / ``02 05 78`` for v2, ``01 80 <legacy suite>`` for v1)."""
    raw = bytes(head[:4])
    if len(raw) >= 3 and raw[0] == 2:
        return int.from_bytes(raw[1:3], "big") in (0x0478, 0x0578)
    if len(raw) >= 4 and raw[:2] == b"\x01\x80":
        suite = _ON_WIRE.get(int.from_bytes(raw[2:4], "big"))
        return suite is not None and not suite.committing
    return False


# ---------------------------------------------------------------------------------------
# Key derivation
# ---------------------------------------------------------------------------------------


def _derive(suite: AwsSuite, data_key: bytes, message_id: bytes) -> tuple[bytes, bytes]:
    """``(AES-GCM key, commitment)`` (the commitment is empty for legacy suites)."""
    if len(data_key) != suite.key_size:
        raise AuthenticationError(
            f"the unwrapped data key is {len(data_key)} bytes, suite {suite.id} needs "
            f"{suite.key_size}"
        )
    if suite.kdf == "identity":
        return data_key, b""
    if suite.committing:
        prk = hkdf_extract(data_key, message_id, algorithm="sha512")
        key = hkdf_expand(prk, suite.id_bytes + b"DERIVEKEY", 32, algorithm="sha512")
        return key, hkdf_expand(prk, b"COMMITKEY", 32, algorithm="sha512")
    info = suite.id_bytes + message_id
    return hkdf(data_key, info=info, length=suite.key_size, algorithm=suite.kdf), b""


def _header_tag(key: bytes, header_body: bytes, iv: bytes) -> bytes:
    return AESGCM(key).encrypt(iv, b"", header_body)
