"""The AWS Encryption SDK message format (v2, and v1 for reading), byte for byte.

Theory of operation
-------------------
A message is ``header || body || footer``.

**Header** (big-endian). v2: version ``02``, suite id (2), message id (32), the encryption
context (``length (2) || count (2) || (key_len, key, value_len, value)*``, sorted by key,
nothing at all when empty), the encrypted data keys (``count (2)`` and per key: provider
id, provider info, ciphertext, each with a 2-byte length), content type (``01``
non-framed, ``02`` framed), frame length (4), and the 32-byte key commitment; then the
header authentication: an AES-GCM tag over the header with an all-zero IV and no
plaintext. v1: version ``01``, type ``80``, suite id, message id (16), context, data
keys, content type, four zero bytes, IV length (12), frame length; its authentication is
the (zero) IV and the tag.

**Keys.** A random data key is wrapped once per keyring (raw AES: AES-GCM under the
wrapping key with the serialized encryption context as AAD, the key name, tag length,
IV length and IV in the provider info; raw RSA: RSA-OAEP or PKCS#1 v1.5, the key name as
provider info). The committing suites 0x0478 / 0x0578 derive ``HKDF-SHA512(salt =
message id, data key)`` with info ``suite id || "DERIVEKEY"`` (the AES-256-GCM key) and
``"COMMITKEY"`` (the 32-byte commitment, checked in constant time before anything else).
Legacy suites use the data key itself or ``HKDF-SHA256/384(zero salt, data key, suite id
|| message id)`` and commit to nothing; they are read only with ``allow_legacy=True``.

**Body.** Framed: regular frames ``seq (4) || IV (12) || ciphertext (frame length) ||
tag (16)`` from seq 1, then one final frame ``FFFFFFFF || seq || IV || length (4) ||
ciphertext || tag`` holding 0..frame-length bytes. Each frame is AES-GCM under the derived
key with AAD ``message id || "AWSKMSEncryptionClient Frame" (or "... Final Frame") ||
seq (4) || content length (8)``; the IV is the sequence number, zero-padded. Frames are
independent, so the engine opens them in parallel (:class:`AwsFrameCodec` on the shared
segmented core) and a framed body can be read by random access (:func:`layout`).
Non-framed: ``IV || length (8) || ciphertext || tag``, one AES-GCM call ("...Single
Block"), so nothing is released before the whole body verified (and it is held in memory,
up to ``max_body_size``).

**Footer** (suites 0x0578, 0x0214, 0x0346, 0x0378): ``length (2) || DER ECDSA signature``
over every byte before it, with P-384/SHA-384 (P-256/SHA-256 for 0x0214); the verifying
key travels in the encryption context (``aws-crypto-public-key``, a compressed point).

**What is released when.** The decryptor releases each regular frame once its tag
verified. The final frame is released only at ``finalize()``, after the footer's signature
verified (signed suites) and after checking that nothing follows the message; so a
truncated message raises :class:`TruncatedStreamError` and a bad signature
:class:`InvalidSignatureError` before the last frame comes out. Frames released before
that were authentic under the data key but not yet proven to come from the signer (any
holder of a wrapping key can forge frames of a signed message): pass
``release="after-signature"`` to hold every byte back until the signature verified
(memory grows with the message, up to ``max_buffered``). Signed suites hash every byte in
order on the thread that feeds the decryptor (SHA-384 cannot be split across cores).

Limits (typed errors, checked as fields are read): ``max_encrypted_data_keys`` (default
64; :class:`LimitExceededError`), ``max_header_size`` (1 MiB), ``max_frame_length``
(64 MiB for reading; the format allows 2**32 - 1), ``max_body_size`` for non-framed
bodies (64 MiB), and the encryption context checks (``encryption_context=`` on decrypt
must be a subset of the message's, else :class:`AuthenticationError`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal, Protocol, TypeAlias, cast, runtime_checkable

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    Prehashed,
    decode_dss_signature,
    encode_dss_signature,
)
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..abc import Buffer, Chain, Lifecycle, Transform
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidKeySizeError,
    InvalidParameterError,
    InvalidSignatureError,
    LimitExceededError,
    TruncatedStreamError,
    UnknownKeyError,
    UnsupportedFormatError,
)
from ..keys import constant_time_equal, hkdf, hkdf_expand, hkdf_extract, random_bytes
from ._format import FormatOptions, ReadAt, SegmentedFormat, or_default
from ._segmented import SegmentCodec, SegmentedEncryptor, SegmentJob, SegmentLayout

__all__ = [
    "DEFAULT_FRAME_LENGTH",
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_MAX_ENCRYPTED_DATA_KEYS",
    "DEFAULT_MAX_FRAME_LENGTH",
    "DEFAULT_MAX_HEADER_SIZE",
    "DEFAULT_SUITE",
    "FORMAT",
    "PUBLIC_KEY_FIELD",
    "SUITES",
    "AwsBodyDecryptor",
    "AwsDecryptor",
    "AwsEncryptor",
    "AwsFrameCodec",
    "AwsHeader",
    "AwsLayout",
    "AwsSuite",
    "EncryptedDataKey",
    "Keyring",
    "RawAesKeyring",
    "RawRsaKeyring",
    "decrypt_bytes",
    "encrypt_bytes",
    "header_size",
    "is_aws",
    "layout",
    "parse_header",
    "read_range",
    "serialize_encryption_context",
]

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
_MAX_FRAMES = (1 << 32) - 1
_FINAL_MARK = b"\xff\xff\xff\xff"
_FRAME_AAD = b"AWSKMSEncryptionClient Frame"
_FINAL_AAD = b"AWSKMSEncryptionClient Final Frame"
_SINGLE_AAD = b"AWSKMSEncryptionClient Single Block"
_MAX_NON_FRAMED = (1 << 36) - 32
_U16 = 0xFFFF

Curve = Literal["P-256", "P-384"]


@dataclass(frozen=True, slots=True)
class AwsSuite:
    """An algorithm suite: AES-GCM key size, key derivation, commitment, signature."""

    id: int
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
        return self.id.to_bytes(2, "big")

    @property
    def signature_size(self) -> int:
        """The DER signature length the AWS SDKs write (71 for P-256, 103 for P-384)."""
        return {"P-256": 71, "P-384": 103, None: 0}[self.curve]


_SUITE_LIST = [
    AwsSuite(0x0014, "AES_128_GCM_IV12_TAG16_NO_KDF", 16, "identity", False),
    AwsSuite(0x0046, "AES_192_GCM_IV12_TAG16_NO_KDF", 24, "identity", False),
    AwsSuite(0x0078, "AES_256_GCM_IV12_TAG16_NO_KDF", 32, "identity", False),
    AwsSuite(0x0114, "AES_128_GCM_IV12_TAG16_HKDF_SHA256", 16, "sha256", False),
    AwsSuite(0x0146, "AES_192_GCM_IV12_TAG16_HKDF_SHA256", 24, "sha256", False),
    AwsSuite(0x0178, "AES_256_GCM_IV12_TAG16_HKDF_SHA256", 32, "sha256", False),
    AwsSuite(0x0214, "AES_128_GCM_IV12_TAG16_HKDF_SHA256_ECDSA_P256", 16, "sha256", False, "P-256"),
    AwsSuite(0x0346, "AES_192_GCM_IV12_TAG16_HKDF_SHA384_ECDSA_P384", 24, "sha384", False, "P-384"),
    AwsSuite(0x0378, "AES_256_GCM_IV12_TAG16_HKDF_SHA384_ECDSA_P384", 32, "sha384", False, "P-384"),
    AwsSuite(0x0478, "AES_256_GCM_HKDF_SHA512_COMMIT_KEY", 32, "sha512", True),
    AwsSuite(0x0578, "AES_256_GCM_HKDF_SHA512_COMMIT_KEY_ECDSA_P384", 32, "sha512", True, "P-384"),
]
#: Every suite of the message format, by id.
SUITES: dict[int, AwsSuite] = {s.id: s for s in _SUITE_LIST}
#: The SDKs' default (and ours): committing, signed.
DEFAULT_SUITE = 0x0578

_CURVES: dict[str, tuple[ec.EllipticCurve, hashes.HashAlgorithm, int]] = {
    "P-256": (
        ec.SECP256R1(),
        hashes.SHA256(),
        0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551,
    ),
    "P-384": (
        ec.SECP384R1(),
        hashes.SHA384(),
        0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFC7634D81F4372DDF581A0DB248B0A77AECEC196ACCC52973,
    ),
}
_HASHLIB = {"P-256": "sha256", "P-384": "sha384"}
#: Longest DER ECDSA signature for each curve (r and s with a sign byte each).
_MAX_SIGNATURE = {"P-256": 72, "P-384": 104}


def _suite(suite_id: int, allow_legacy: bool) -> AwsSuite:
    suite = SUITES.get(suite_id)
    if suite is None:
        raise UnsupportedFormatError(f"unknown AWS Encryption SDK algorithm suite 0x{suite_id:04x}")
    if not suite.committing and not allow_legacy:
        raise UnsupportedFormatError(
            f"algorithm suite 0x{suite_id:04x} ({suite.name}) does not commit to its key; "
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


# ---------------------------------------------------------------------------------------
# Keyrings (raw AES and raw RSA: offline wrapping keys)
# ---------------------------------------------------------------------------------------


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


@runtime_checkable
class Keyring(Protocol):
    """Wraps a data key for a message and unwraps it from the message's data keys."""

    def wrap(self, data_key: bytes, context: bytes) -> EncryptedDataKey: ...

    def unwrap(self, keys: Sequence[EncryptedDataKey], context: bytes) -> bytes | None: ...


def _text(value: str | bytes, what: str) -> bytes:
    raw = value.encode() if isinstance(value, str) else bytes(value)
    if not raw or len(raw) > _U16:
        raise InvalidParameterError(f"a keyring {what} must be 1..65535 bytes")
    return raw


class RawAesKeyring:
    """The raw AES keyring: AES-GCM wrapping under a 128/192/256-bit key you hold.

    Interoperates with the SDKs' raw AES keyring and ``RawMasterKey`` (AES-GCM wrapping):
    ``namespace`` is the provider id, ``name`` the key name. Raises
    :class:`InvalidKeySizeError`.
    """

    __slots__ = ("_aead", "_name", "_namespace")

    def __init__(self, namespace: str | bytes, name: str | bytes, wrapping_key: Buffer) -> None:
        key = bytes(wrapping_key)
        if len(key) not in (16, 24, 32):
            raise InvalidKeySizeError(
                f"a raw AES wrapping key is 16, 24 or 32 bytes, got {len(key)}"
            )
        self._namespace = _text(namespace, "namespace")
        self._name = _text(name, "key name")
        self._aead = AESGCM(key)

    def wrap(self, data_key: bytes, context: bytes) -> EncryptedDataKey:
        iv = random_bytes(_IV)
        info = self._name + struct.pack(">II", _TAG * 8, _IV) + iv
        return EncryptedDataKey(self._namespace, info, self._aead.encrypt(iv, data_key, context))

    def unwrap(self, keys: Sequence[EncryptedDataKey], context: bytes) -> bytes | None:
        n = len(self._name)
        for edk in keys:
            info = edk.provider_info
            if edk.provider_id != self._namespace or len(info) != n + 8 + _IV:
                continue
            if info[:n] != self._name or info[n : n + 8] != struct.pack(">II", _TAG * 8, _IV):
                continue
            try:
                return self._aead.decrypt(info[n + 8 :], edk.ciphertext, context)
            except InvalidTag:
                continue
        return None

    def __repr__(self) -> str:
        return f"RawAesKeyring({self._namespace.decode(errors='replace')!r}, {self._name.decode(errors='replace')!r}, <key hidden>)"


RsaPadding = Literal["oaep-sha1", "oaep-sha256", "oaep-sha384", "oaep-sha512", "pkcs1"]
_OAEP_HASH: dict[str, type[hashes.HashAlgorithm]] = {
    "oaep-sha1": hashes.SHA1,
    "oaep-sha256": hashes.SHA256,
    "oaep-sha384": hashes.SHA384,
    "oaep-sha512": hashes.SHA512,
}


class RawRsaKeyring:
    """The raw RSA keyring: the data key encrypted to an RSA public key you hold.

    Give ``private_key`` to decrypt (and encrypt), or only ``public_key`` to encrypt: a
    ``cryptography`` key object or PEM bytes. ``padding``: ``"oaep-sha256"`` (default),
    ``"oaep-sha1"``, ``"oaep-sha384"``, ``"oaep-sha512"`` (MGF1 with the same hash) or
    ``"pkcs1"`` (v1.5, legacy). Raises :class:`InvalidParameterError`.
    """

    __slots__ = ("_name", "_namespace", "_padding", "_private", "_public")

    def __init__(
        self,
        namespace: str | bytes,
        name: str | bytes,
        *,
        private_key: rsa.RSAPrivateKey | bytes | None = None,
        public_key: rsa.RSAPublicKey | bytes | None = None,
        padding_scheme: RsaPadding = "oaep-sha256",
    ) -> None:
        self._namespace = _text(namespace, "namespace")
        self._name = _text(name, "key name")
        if isinstance(private_key, bytes):
            private_key = serialization.load_pem_private_key(private_key, None)  # type: ignore[assignment]
        if isinstance(public_key, bytes):
            public_key = serialization.load_pem_public_key(public_key)  # type: ignore[assignment]
        if private_key is not None and not isinstance(private_key, rsa.RSAPrivateKey):
            raise InvalidParameterError("private_key must be an RSA private key")
        if public_key is None and private_key is not None:
            public_key = private_key.public_key()
        if not isinstance(public_key, rsa.RSAPublicKey):
            raise InvalidParameterError("a raw RSA keyring needs an RSA public or private key")
        if padding_scheme == "pkcs1":
            self._padding: padding.AsymmetricPadding = padding.PKCS1v15()
        elif padding_scheme in _OAEP_HASH:
            algo = _OAEP_HASH[padding_scheme]
            self._padding = padding.OAEP(mgf=padding.MGF1(algo()), algorithm=algo(), label=None)
        else:
            raise InvalidParameterError(f"unknown RSA padding {padding_scheme!r}")
        self._private = private_key
        self._public = public_key

    def wrap(self, data_key: bytes, context: bytes) -> EncryptedDataKey:
        return EncryptedDataKey(
            self._namespace, self._name, self._public.encrypt(data_key, self._padding)
        )

    def unwrap(self, keys: Sequence[EncryptedDataKey], context: bytes) -> bytes | None:
        if self._private is None:
            return None
        for edk in keys:
            if edk.provider_id != self._namespace or edk.provider_info != self._name:
                continue
            try:
                return self._private.decrypt(edk.ciphertext, self._padding)
            except ValueError:
                continue
        return None

    def __repr__(self) -> str:
        return f"RawRsaKeyring({self._namespace.decode(errors='replace')!r}, {self._name.decode(errors='replace')!r})"


KeyringLike: TypeAlias = Keyring | Sequence[Keyring]


def _keyrings(keyring: KeyringLike) -> list[Keyring]:
    rings = [keyring] if isinstance(keyring, Keyring) else list(keyring)
    if not rings or not all(isinstance(r, Keyring) for r in rings):
        raise InvalidParameterError(
            "give one keyring or a list of keyrings (RawAesKeyring, RawRsaKeyring)"
        )
    return rings


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
        (suite_id,) = struct.unpack(">H", take((yield 2)))
        suite = _suite(suite_id, limits.allow_legacy)
        if suite.version != 2:
            raise FormatError(f"suite 0x{suite_id:04x} belongs to message format v1, not v2")
        id_size = 32
    elif version == 1:
        if take((yield 1)) != b"\x80":
            raise FormatError("a v1 message header must have type 0x80")
        (suite_id,) = struct.unpack(">H", take((yield 2)))
        suite = _suite(suite_id, limits.allow_legacy)
        if suite.version != 1:
            raise FormatError(f"suite 0x{suite_id:04x} belongs to message format v2, not v1")
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

    def advance(self, data: bytes | bytearray) -> AwsHeader | None:
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
    return _HeaderParser(limits).advance(bytes(data))


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
        suite = SUITES.get(int.from_bytes(raw[2:4], "big"))
        return suite is not None and not suite.committing
    return False


# ---------------------------------------------------------------------------------------
# Key derivation
# ---------------------------------------------------------------------------------------


def _derive(suite: AwsSuite, data_key: bytes, message_id: bytes) -> tuple[bytes, bytes]:
    """``(AES-GCM key, commitment)`` (the commitment is empty for legacy suites)."""
    if len(data_key) != suite.key_size:
        raise AuthenticationError(
            f"the unwrapped data key is {len(data_key)} bytes, suite 0x{suite.id:04x} needs "
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


# ---------------------------------------------------------------------------------------
# Body: frames on the segmented core
# ---------------------------------------------------------------------------------------


_FRAME_HEAD = struct.Struct(">I8xI")  # sequence number, then the IV: 8 zeros || seq
_FRAME_AAD_TAIL = struct.Struct(">IQ")  # sequence number, content length
_SEQ = struct.Struct(">I")
_NONCE = struct.Struct(">8xI")  # the IV alone


class AwsFrameCodec(SegmentCodec):
    """Opens frames (regular, or the final frame when ``final``) and seals regular frames.

    Segment *i* is frame sequence number *i + 1*. Opening, a frame's own sequence number
    must match (else :class:`AuthenticationError`: reordered or duplicated).
    """

    __slots__ = (
        "_decrypt",
        "_encrypt",
        "_final_prefix",
        "_frame_prefix",
        "first_segment_size",
        "segment_size",
    )

    overhead: ClassVar[int] = 4 + _IV + _TAG
    final_may_be_full: ClassVar[bool] = False
    max_segments: int = _MAX_FRAMES

    def __init__(self, key: bytes, message_id: bytes, frame_length: int) -> None:
        kernel = AESGCM(key)
        self._encrypt = kernel.encrypt_into
        self._decrypt = kernel.decrypt_into
        self._frame_prefix = message_id + _FRAME_AAD
        self._final_prefix = message_id + _FINAL_AAD
        self.segment_size = self.first_segment_size = frame_length

    @staticmethod
    def _iv(seq: int) -> bytes:
        return bytes(8) + seq.to_bytes(4, "big")

    def seal_segment(self, index: int, plaintext: Buffer, final: bool, out: memoryview) -> int:
        seq = (index + 1).to_bytes(4, "big")
        n = len(plaintext)
        iv = bytes(8) + seq
        out[0:16] = seq + iv
        aad = self._frame_prefix + seq + n.to_bytes(8, "big")
        return 16 + self._encrypt(iv, plaintext, aad, out[16 : 16 + n + _TAG])

    def open_segment(self, index: int, ciphertext: Buffer, final: bool, out: memoryview) -> int:
        frame = memoryview(ciphertext)
        seq = index + 1
        if final:
            if bytes(frame[:4]) != _FINAL_MARK:
                raise FormatError(f"frame {seq} should be the final frame")
            frame = frame[4:]
        if int.from_bytes(frame[:4], "big") != seq:
            raise AuthenticationError(
                f"frame {seq} carries sequence number {int.from_bytes(frame[:4], 'big')}: "
                "frames were reordered, duplicated or dropped"
            )
        iv = bytes(frame[4:16])
        if final:
            n = int.from_bytes(frame[16:20], "big")
            body = frame[20:]
            aad = self._final_prefix + seq.to_bytes(4, "big") + n.to_bytes(8, "big")
        else:
            body = frame[16:]
            n = len(body) - _TAG
            aad = self._frame_prefix + seq.to_bytes(4, "big") + n.to_bytes(8, "big")
        if len(body) != n + _TAG or n > self.segment_size or (not final and n != self.segment_size):
            raise FormatError(f"frame {seq} has the wrong length")
        try:
            return self._decrypt(iv, body, aad, out[:n])
        except InvalidTag:
            raise AuthenticationError(
                f"frame {seq} did not verify: tampered, reordered or truncated message"
            ) from None

    def run_segments(
        self, sealing: bool, first: int, count: int, data: Buffer, final: bool, out: memoryview
    ) -> tuple[int, Exception | None]:
        """Consecutive frames in one tight loop (the engine's hot path at 4 KiB frames):
        the base loop's contract, minus a method call, a few slices and a ``bytes``
        concatenation per regular frame; a final frame goes through the codec's own
        method (so the final-frame sealer, a subclass, seals it as its own)."""
        codec = self
        src = memoryview(data).cast("B")
        size = codec.segment_size
        full = size + AwsFrameCodec.overhead
        prefix = codec._frame_prefix
        tail = _FRAME_AAD_TAIL.pack
        first = seq = first + 1
        stop = first + count - (1 if final else 0)
        pos = written = 0
        try:
            if sealing:
                encrypt = codec._encrypt
                head_into, nonce = _FRAME_HEAD.pack_into, _NONCE.pack
                for seq in range(first, stop):
                    head_into(out, written, seq, seq)
                    encrypt(
                        nonce(seq),
                        src[pos : pos + size],
                        prefix + tail(seq, size),
                        out[written + 16 : written + full],
                    )
                    pos += size
                    written += full
            else:
                decrypt = codec._decrypt
                unpack = _SEQ.unpack_from
                for seq in range(first, stop):
                    if unpack(src, pos)[0] != seq:
                        raise AuthenticationError(
                            f"frame {seq} carries sequence number {unpack(src, pos)[0]}: frames "
                            "were reordered, duplicated or dropped"
                        )
                    decrypt(
                        bytes(src[pos + 4 : pos + 16]),
                        src[pos + 16 : pos + full],
                        prefix + tail(seq, size),
                        out[written : written + size],
                    )
                    pos += full
                    written += size
            if final:
                seq = stop
                work = codec.seal_segment if sealing else codec.open_segment
                written += work(stop - 1, src[pos:], True, out[written:])
        except InvalidTag:
            error = AuthenticationError(
                f"frame {seq} did not verify: tampered, reordered or truncated message"
            )
            return written, error
        except Exception as exc:
            return written, exc
        return written, None

    def __repr__(self) -> str:
        return f"AwsFrameCodec(frame_length={self.segment_size}, <key hidden>)"


class _FinalFrameSealer(AwsFrameCodec):
    """Seals the final frame (8 more bytes of framing: the end marker and the length)."""

    __slots__ = ()
    overhead: ClassVar[int] = 4 + 4 + _IV + 4 + _TAG

    def seal_segment(self, index: int, plaintext: Buffer, final: bool, out: memoryview) -> int:
        seq = index + 1
        n = len(plaintext)
        iv = self._iv(seq)
        out[0:24] = _FINAL_MARK + seq.to_bytes(4, "big") + iv + n.to_bytes(4, "big")
        aad = self._final_prefix + seq.to_bytes(4, "big") + n.to_bytes(8, "big")
        return 24 + self._encrypt(iv, plaintext, aad, out[24 : 24 + n + _TAG])


class _SingleBlockCodec(SegmentCodec):
    """A non-framed body: one AES-GCM call over everything (``IV || length || ct || tag``)."""

    __slots__ = ("_kernel", "_prefix", "first_segment_size", "segment_size")

    overhead: ClassVar[int] = _IV + 8 + _TAG
    final_may_be_full: ClassVar[bool] = False
    max_segments: int = 1

    def __init__(self, key: bytes, message_id: bytes, max_size: int) -> None:
        self._kernel = AESGCM(key)
        self._prefix = message_id + _SINGLE_AAD + (1).to_bytes(4, "big")
        self.segment_size = self.first_segment_size = max_size + 1

    def seal_segment(self, index: int, plaintext: Buffer, final: bool, out: memoryview) -> int:
        n = len(plaintext)
        iv = AwsFrameCodec._iv(1)
        out[0:20] = iv + n.to_bytes(8, "big")
        aad = self._prefix + n.to_bytes(8, "big")
        return 20 + self._kernel.encrypt_into(iv, plaintext, aad, out[20 : 20 + n + _TAG])

    def open_segment(self, index: int, ciphertext: Buffer, final: bool, out: memoryview) -> int:
        body = memoryview(ciphertext)
        n = int.from_bytes(body[_IV:20], "big")
        if len(body) != 20 + n + _TAG:
            raise FormatError("the non-framed body has the wrong length")
        aad = self._prefix + n.to_bytes(8, "big")
        try:
            return self._kernel.decrypt_into(bytes(body[:_IV]), body[20:], aad, out[:n])
        except InvalidTag:
            raise AuthenticationError(
                "the non-framed body did not verify: tampered or truncated message"
            ) from None


# ---------------------------------------------------------------------------------------
# Signatures
# ---------------------------------------------------------------------------------------


def _public_key_text(key: ec.EllipticCurvePublicKey) -> str:
    point = key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint
    )
    return base64.b64encode(point).decode()


def _verifying_key(suite: AwsSuite, context: Mapping[str, str]) -> ec.EllipticCurvePublicKey:
    assert suite.curve is not None
    text = context.get(PUBLIC_KEY_FIELD)
    if text is None:
        raise FormatError(f"a signed message must carry {PUBLIC_KEY_FIELD!r} in its context")
    try:
        point = base64.b64decode(text, validate=True)
        return ec.EllipticCurvePublicKey.from_encoded_point(_CURVES[suite.curve][0], point)
    except ValueError:
        raise FormatError(
            f"the message's {PUBLIC_KEY_FIELD!r} is not a {suite.curve} point"
        ) from None


def _sign(key: ec.EllipticCurvePrivateKey, suite: AwsSuite, digest: bytes) -> bytes:
    """A DER signature of the length the AWS SDKs write (negating s when it is longer)."""
    assert suite.curve is not None
    _, hash_alg, order = _CURVES[suite.curve]
    algorithm = ec.ECDSA(Prehashed(hash_alg))
    while True:
        signature = key.sign(digest, algorithm)
        if len(signature) != suite.signature_size:
            r, s = decode_dss_signature(signature)
            signature = encode_dss_signature(r, order - s)
        if len(signature) == suite.signature_size:
            return signature


class _Signer(Lifecycle):
    """Passes the message through, hashing it; ``finalize`` appends the signature footer."""

    __slots__ = ("_hash", "_key", "_suite")

    def __init__(self, key: ec.EllipticCurvePrivateKey, suite: AwsSuite) -> None:
        self._init_lifecycle()
        assert suite.curve is not None
        self._key = key
        self._suite = suite
        self._hash = hashlib.new(_HASHLIB[suite.curve])

    def update(self, data: Buffer, /) -> bytes:
        self._check()
        self._hash.update(data)
        return data if isinstance(data, bytes) else bytes(data)

    def finalize(self) -> bytes:
        self._check()
        signature = _sign(self._key, self._suite, self._hash.digest())
        self._finish()
        return struct.pack(">H", len(signature)) + signature


# ---------------------------------------------------------------------------------------
# Encryption
# ---------------------------------------------------------------------------------------


class _BodyEncryptor(SegmentedEncryptor):
    """The header and the body; the final frame is sealed with its own framing."""

    __slots__ = ("_final_codec",)

    def __init__(self, codec: SegmentCodec, final_codec: SegmentCodec, header: bytes) -> None:
        super().__init__(codec, header)
        self._final_codec = final_codec

    def finish(self) -> list[SegmentJob]:
        self._check()
        try:
            first = self._claim(self._final_codec, 1)
        except Exception as exc:
            raise self._break(exc) from None
        job = SegmentJob(self._final_codec, True, first, 1, self._take_held(), True)
        self._finish()
        return [job]


class _NonFramedEncryptor(_BodyEncryptor):
    """Holds the whole plaintext (up to a limit) and seals it at the end."""

    __slots__ = ("_limit",)

    def __init__(self, codec: SegmentCodec, header: bytes, limit: int) -> None:
        super().__init__(codec, codec, header)
        self._limit = limit

    def feed(self, data: Buffer) -> list[SegmentJob]:
        self._check()
        if self._held_len + len(data) > self._limit:
            raise self._break(
                LimitExceededError(
                    f"a non-framed message holds at most {self._limit} bytes here "
                    "(max_body_size); use framing (frame_length > 0) for streams"
                )
            )
        self._hold(memoryview(data).cast("B"))
        return []


class AwsEncryptor(Chain):
    """Encrypt to the AWS Encryption SDK message format (sans-I/O transform).

    ``keyring``: one keyring or several (the data key is wrapped by each). ``suite``:
    0x0578 (default: committing, ECDSA P-384 signed) or 0x0478 (committing, unsigned);
    legacy suites only with ``allow_legacy=True``. ``frame_length``: plaintext bytes per
    frame (4096 by default; 0 for a non-framed body held in memory). A chain of the body
    encryptor (segmented: frames sealed in parallel by the engine) and, for signed
    suites, the signer appending the footer. Raises :class:`InvalidParameterError`,
    :class:`UnsupportedFormatError`, :class:`LimitExceededError`.
    """

    __slots__ = ("header",)

    def __init__(
        self,
        keyring: KeyringLike,
        *,
        encryption_context: Mapping[str, str] | None = None,
        suite: int = DEFAULT_SUITE,
        frame_length: int = DEFAULT_FRAME_LENGTH,
        allow_legacy: bool = False,
        max_encrypted_data_keys: int | None = None,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    ) -> None:
        chosen = _suite(suite, allow_legacy)
        rings = _keyrings(keyring)
        if max_encrypted_data_keys is not None and len(rings) > max_encrypted_data_keys:
            raise LimitExceededError(
                f"{len(rings)} keyrings would write more than max_encrypted_data_keys="
                f"{max_encrypted_data_keys} data keys"
            )
        if not 0 <= frame_length <= (1 << 32) - 1:
            raise InvalidParameterError("frame_length must be 0 (non-framed) .. 2**32 - 1")
        context = dict(encryption_context or {})
        if any(k.startswith(_RESERVED_PREFIX) for k in context):
            raise InvalidParameterError(
                f"encryption context keys starting with {_RESERVED_PREFIX!r} are reserved"
            )
        signer: Transform | None = None
        if chosen.curve is not None:
            private = ec.generate_private_key(_CURVES[chosen.curve][0])
            context[PUBLIC_KEY_FIELD] = _public_key_text(private.public_key())
            signer = _Signer(private, chosen)
        ctx_bytes = serialize_encryption_context(context)
        data_key = random_bytes(chosen.key_size)
        message_id = random_bytes(32 if chosen.version == 2 else 16)
        edks = [ring.wrap(data_key, ctx_bytes) for ring in rings]
        key, commitment = _derive(chosen, data_key, message_id)
        framed = frame_length > 0
        head = bytearray()
        if chosen.version == 2:
            head += b"\x02" + chosen.id_bytes
        else:
            head += b"\x01\x80" + chosen.id_bytes
        head += message_id + struct.pack(">H", len(ctx_bytes)) + ctx_bytes
        head += struct.pack(">H", len(edks)) + b"".join(e.encode() for e in edks)
        head += bytes([2 if framed else 1])
        if chosen.version == 1:
            head += bytes(4) + bytes([_IV])
        head += struct.pack(">I", frame_length) + commitment
        iv = bytes(_IV)
        auth = (iv if chosen.version == 1 else b"") + _header_tag(key, bytes(head), iv)
        body_header = bytes(head) + auth
        self.header = parse_header(body_header, allow_legacy=True, max_encrypted_data_keys=None)
        if framed:
            body: Transform = _BodyEncryptor(
                AwsFrameCodec(key, message_id, frame_length),
                _FinalFrameSealer(key, message_id, frame_length),
                body_header,
            )
        else:
            limit = min(max_body_size, _MAX_NON_FRAMED)
            body = _NonFramedEncryptor(
                _SingleBlockCodec(key, message_id, limit), body_header, limit
            )
        super().__init__(*([body, signer] if signer is not None else [body]))


# ---------------------------------------------------------------------------------------
# Decryption
# ---------------------------------------------------------------------------------------

Release = Literal["verified-frames", "after-signature"]


def _open_header(header: AwsHeader, rings: Sequence[Keyring], expected: Mapping[str, str]) -> bytes:
    """Unwrap the data key, check the commitment, the header tag and the expected context;
    the derived AES-GCM key."""
    for k, v in expected.items():
        if header.encryption_context.get(k) != v:
            raise AuthenticationError(
                f"the message's encryption context does not hold the expected {k!r} entry"
            )
    ctx = header.context_bytes
    data_key = None
    for ring in rings:
        data_key = ring.unwrap(header.encrypted_data_keys, ctx)
        if data_key is not None:
            break
    if data_key is None:
        raise UnknownKeyError(
            "none of the message's encrypted data keys opens with the given keyrings: "
            "check the keyring namespace, key name and wrapping key"
        )
    key, commitment = _derive(header.suite, data_key, header.message_id)
    if header.suite.committing and not constant_time_equal(commitment, header.commitment):
        raise AuthenticationError("the key commitment does not match: a wrong or forged data key")
    iv = header.auth_iv or bytes(_IV)
    if not hmac.compare_digest(_header_tag(key, header.body, iv), header.auth_tag):
        raise AuthenticationError("the message header did not verify: tampered header")
    return key


class AwsBodyDecryptor(Lifecycle):
    """The segmented part of :class:`AwsDecryptor`: header, frames, footer.

    Provides the engine's segmented protocol (``feed`` / ``finish`` jobs opened in
    parallel) and ``update`` / ``finalize`` as a plain transform.
    """

    __slots__ = (
        "_codec",
        "_expected",
        "_final",
        "_footer",
        "_hash",
        "_index",
        "_key",
        "_limits",
        "_max_body",
        "_parser",
        "_pending",
        "_phase",
        "_rings",
        "header",
        "signature_verified",
    )

    def __init__(
        self,
        rings: Sequence[Keyring],
        expected: Mapping[str, str],
        limits: _Limits,
        max_body_size: int,
    ) -> None:
        self._init_lifecycle()
        self._rings = rings
        self._expected = expected
        self._limits = limits
        self._max_body = max_body_size
        self._parser: _HeaderParser | None = _HeaderParser(limits)
        self._pending = bytearray()
        self._phase = "header"
        self._codec: SegmentCodec | None = None
        self._index = 0
        self._final: bytes | None = None
        self._footer = bytearray()
        self._hash: hashlib._Hash | None = None
        self._key = b""
        self.header: AwsHeader | None = None
        self.signature_verified = False

    @property
    def header_pending(self) -> bool:
        return self._phase == "header"

    def take_header(self) -> bytes:
        return b""

    def fail(self, exc: BaseException) -> BaseException:
        return self._break(exc)

    # -- parsing ------------------------------------------------------------------------
    def feed(self, data: Buffer) -> list[SegmentJob]:
        self._check()
        try:
            return self._feed(memoryview(data).cast("B"))
        except Exception as exc:
            raise self._break(exc) from None

    def _hashed(self, view: memoryview) -> None:
        if self._hash is not None:
            self._hash.update(view)

    def _feed(self, view: memoryview) -> list[SegmentJob]:
        if self._phase == "header":
            assert self._parser is not None
            self._pending += view
            header = self._parser.advance(self._pending)
            if header is None:
                return []
            self._key = _open_header(header, self._rings, self._expected)
            self.header = header
            self._parser = None
            if header.suite.curve is not None:
                _verifying_key(header.suite, header.encryption_context)
                self._hash = hashlib.new(_HASHLIB[header.suite.curve])
                self._hash.update(self._pending[: header.size])
            rest = bytes(self._pending[header.size :])
            self._pending.clear()
            if header.framed:
                self._codec = AwsFrameCodec(self._key, header.message_id, header.frame_length)
                self._phase = "frames"
            else:
                self._codec = _SingleBlockCodec(self._key, header.message_id, self._max_body)
                self._phase = "single"
            return self._feed(memoryview(rest)) if rest else []
        if self._phase == "frames":
            return self._frames(view)
        if self._phase == "single":
            return self._single(view)
        if self._phase == "footer":
            self._footer_bytes(view)
            return []
        raise FormatError("bytes after the end of the message")

    def _frames(self, view: memoryview) -> list[SegmentJob]:
        assert self.header is not None
        regular = self.header.frame_length + AwsFrameCodec.overhead
        jobs: list[SegmentJob] = []
        pending = self._pending
        if pending:
            # Complete the held frame from the new bytes (its size shows as they come).
            while len(pending) < (need := self._frame_size(pending)):
                if not view:
                    return jobs
                take = min(len(view), need - len(pending))
                pending += view[:take]
                view = view[take:]
            frame = bytes(pending)
            pending.clear()
            self._hashed(memoryview(frame))
            if frame[:4] == _FINAL_MARK:
                return self._end_frames(frame, view)
            jobs.append(self._job(frame, 1))
        # Whole regular frames straight from the caller's buffer, no copy.
        pos = regular * self._regular_frames(view, regular)
        if pos:
            self._hashed(view[:pos])
            jobs.append(self._job(view[:pos], pos // regular))
        rest = view[pos:]
        if len(rest) >= self._frame_size(rest) and rest[:4] == _FINAL_MARK:
            frame = bytes(rest[: self._frame_size(rest)])
            self._hashed(memoryview(frame))
            self._end_frames(frame, rest[len(frame) :])
        else:
            pending += rest
        return jobs

    @staticmethod
    def _regular_frames(view: memoryview, regular: int) -> int:
        """How many whole regular frames ``view`` starts with (it ends before the final
        frame's ``FFFFFFFF`` mark). Frame starts are read in one strided copy: only a
        frame whose first byte is FF needs a closer look."""
        n = len(view) // regular
        firsts = view[: n * regular : regular].tobytes()
        at = firsts.find(0xFF)
        while at >= 0:
            if view[at * regular : at * regular + 4] == _FINAL_MARK:
                return at
            at = firsts.find(0xFF, at + 1)
        return n

    def _frame_size(self, head: Buffer) -> int:
        """The length of the frame starting with ``head``, or of as much of its start as
        shows that length (4 bytes, then the final frame's 24)."""
        assert self.header is not None
        if len(head) < 4:
            return 4
        if bytes(head[:4]) != _FINAL_MARK:
            return self.header.frame_length + AwsFrameCodec.overhead
        if len(head) < 24:
            return 24
        n = int.from_bytes(head[20:24], "big")
        if n > self.header.frame_length:
            raise FormatError(
                f"the final frame claims {n} bytes, more than the frame length "
                f"{self.header.frame_length}"
            )
        return 24 + n + _TAG

    def _job(self, data: Buffer, count: int) -> SegmentJob:
        assert self._codec is not None
        first = self._index
        if first + count > _MAX_FRAMES:
            raise LimitExceededError("the message has more than 2**32 - 1 frames")
        self._index += count
        return SegmentJob(self._codec, False, first, count, data, False)

    def _end_frames(self, frame: bytes, rest: memoryview) -> list[SegmentJob]:
        self._final = frame
        assert self.header is not None
        self._phase = "footer" if self.header.suite.signed else "done"
        if len(rest):
            self._feed(rest)
        return []

    def _single(self, view: memoryview) -> list[SegmentJob]:
        pending = self._pending
        pending += view
        if len(pending) >= 20:
            n = int.from_bytes(pending[_IV:20], "big")
            if n > self._max_body:
                raise LimitExceededError(
                    f"the non-framed body holds {n} bytes, over max_body_size={self._max_body}"
                )
            end = 20 + n + _TAG
            if len(pending) >= end:
                self._final = bytes(pending[:end])
                rest = bytes(pending[end:])
                pending.clear()
                self._hashed(memoryview(self._final))
                assert self.header is not None
                self._phase = "footer" if self.header.suite.signed else "done"
                if rest:
                    self._feed(memoryview(rest))
        return []

    def _footer_bytes(self, view: memoryview) -> None:
        self._footer += view
        assert self.header is not None and self.header.suite.curve is not None
        if len(self._footer) >= 2:
            n = int.from_bytes(self._footer[:2], "big")
            if n > _MAX_SIGNATURE[self.header.suite.curve]:
                raise FormatError(f"the footer claims a {n}-byte signature, too long for the curve")
            if len(self._footer) > 2 + n:
                raise FormatError("bytes after the end of the message")

    # -- the end ------------------------------------------------------------------------
    def finish(self) -> list[SegmentJob]:
        self._check()
        try:
            return self._finish_jobs()
        except Exception as exc:
            raise self._break(exc) from None

    def _finish_jobs(self) -> list[SegmentJob]:
        header = self.header
        if self._phase == "header" or header is None:
            raise TruncatedStreamError("the message ended inside its header")
        if self._final is None:
            raise TruncatedStreamError(
                f"the message ended after {self._index} frame(s), before its final frame"
            )
        if header.suite.curve is not None:
            n = int.from_bytes(self._footer[:2], "big") if len(self._footer) >= 2 else -1
            if n < 0 or len(self._footer) != 2 + n:
                raise TruncatedStreamError(
                    "the message ended before the end of its signature footer"
                )
            assert self._hash is not None
            digest = self._hash.digest()
            key = _verifying_key(header.suite, header.encryption_context)
            algorithm = ec.ECDSA(Prehashed(_CURVES[header.suite.curve][1]))
            try:
                key.verify(bytes(self._footer[2:]), digest, algorithm)
            except InvalidSignature:
                raise InvalidSignatureError(
                    "the message signature did not verify: the message was altered or was not "
                    "written by the holder of the signing key"
                ) from None
            self.signature_verified = True
        assert self._codec is not None
        final = self._final
        self._final = None
        self._finish()
        job = SegmentJob(self._codec, False, self._index, 1, final, True)
        return [job]

    # -- as a plain transform -----------------------------------------------------------
    def update(self, data: Buffer, /) -> bytes:
        jobs = self.feed(data)
        try:
            return b"".join(bytes(job.run()) for job in jobs)
        except Exception as exc:
            raise self._break(exc) from None

    def finalize(self) -> bytes:
        jobs = self.finish()
        try:
            return b"".join(bytes(job.run()) for job in jobs)
        except Exception as exc:
            raise self._break(exc) from None


class _Gate(Lifecycle):
    """Holds every plaintext byte back until the body decryptor verified the signature."""

    __slots__ = ("_body", "_held", "_limit")

    def __init__(self, body: AwsBodyDecryptor, limit: int) -> None:
        self._init_lifecycle()
        self._body = body
        self._held = bytearray()
        self._limit = limit

    def update(self, data: Buffer, /) -> bytes:
        self._check()
        if len(self._held) + len(data) > self._limit:
            raise self._break(
                LimitExceededError(
                    f"release='after-signature' holds at most {self._limit} bytes (max_buffered)"
                )
            )
        self._held += memoryview(data).cast("B")
        return b""

    def finalize(self) -> bytes:
        self._check()
        header = self._body.header
        if header is not None and header.suite.signed and not self._body.signature_verified:
            raise self._break(InvalidSignatureError("the message signature was not verified"))
        out = bytes(self._held)
        self._held.clear()
        self._finish()
        return out


class AwsDecryptor(Chain):
    """Decrypt an AWS Encryption SDK message (sans-I/O transform).

    ``keyring``: one keyring or several, tried in order. ``encryption_context``: entries
    the message must carry (else :class:`AuthenticationError`). ``allow_legacy``: read the
    non-committing suites (v1 messages). ``release``: ``"verified-frames"`` (default:
    each frame once its tag verified, the last one after the signature) or
    ``"after-signature"`` (nothing before the signature verified; holds up to
    ``max_buffered`` bytes). Raises :class:`FormatError`, :class:`UnsupportedFormatError`,
    :class:`UnknownKeyError`, :class:`AuthenticationError`, :class:`InvalidSignatureError`,
    :class:`TruncatedStreamError`, :class:`LimitExceededError`.
    """

    __slots__ = ("body",)

    def __init__(
        self,
        keyring: KeyringLike,
        *,
        encryption_context: Mapping[str, str] | None = None,
        allow_legacy: bool = False,
        release: Release = "verified-frames",
        max_encrypted_data_keys: int | None = DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        max_buffered: int = 1 << 30,
    ) -> None:
        if release not in ("verified-frames", "after-signature"):
            raise InvalidParameterError("release must be 'verified-frames' or 'after-signature'")
        limits = _Limits(allow_legacy, max_encrypted_data_keys, max_header_size, max_frame_length)
        self.body = AwsBodyDecryptor(
            _keyrings(keyring), dict(encryption_context or {}), limits, max_body_size
        )
        stages: list[Transform] = [self.body]
        if release == "after-signature":
            stages.append(_Gate(self.body, max_buffered))
        super().__init__(*stages)

    @property
    def header(self) -> AwsHeader | None:
        """The header once it authenticated."""
        return self.body.header


def encrypt_bytes(plaintext: Buffer, keyring: KeyringLike, **options: object) -> bytes:
    """Encrypt a whole message in one call (options as :class:`AwsEncryptor`)."""
    enc = AwsEncryptor(keyring, **options)  # type: ignore[arg-type]
    return enc.update(plaintext) + enc.finalize()


def decrypt_bytes(ciphertext: Buffer, keyring: KeyringLike, **options: object) -> bytes:
    """Decrypt a whole message in one call (options as :class:`AwsDecryptor`)."""
    dec = AwsDecryptor(keyring, **options)  # type: ignore[arg-type]
    return dec.update(ciphertext) + dec.finalize()


# ---------------------------------------------------------------------------------------
# Random access (framed bodies)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AwsLayout(SegmentLayout):
    """Where the frames of a framed message lie: the basis of random access.

    ``body_end`` is where the footer starts (the stream size for unsigned suites);
    ``final_index`` the final frame's segment index, ``final_plain`` its plaintext size.
    """

    final_index: int = 0
    final_plain: int = 0
    body_end: int = 0

    @property
    def segment_count(self) -> int:
        return self.final_index + 1

    @property
    def plaintext_size(self) -> int:
        return self.final_index * self.codec.segment_size + self.final_plain

    def plan(self, start: int, stop: int) -> tuple[SegmentJob, int, int, int] | None:
        """As :meth:`SegmentLayout.plan`, ending at the footer rather than the stream end."""
        size = self.plaintext_size
        start, stop = max(0, start), min(stop, size)
        if start >= stop:
            return None
        first = self.segment_of(start)
        last = min(self.segment_of(stop - 1), self.final_index)
        if stop >= size:
            last = self.final_index
        offset = self.ciphertext_offset(first)
        end = self.body_end if last == self.final_index else self.ciphertext_offset(last + 1)
        job = SegmentJob(self.codec, False, first, last - first + 1, b"", last == self.final_index)
        return job, offset, end - offset, start - self.plaintext_offset(first)

    def final_segment(self) -> tuple[SegmentJob, int, int]:
        offset = self.ciphertext_offset(self.final_index)
        job = SegmentJob(self.codec, False, self.final_index, 1, b"", True)
        return job, offset, self.body_end - offset


def layout(
    keyring: KeyringLike,
    read_at: Callable[[int, int], bytes],
    stream_size: int,
    *,
    encryption_context: Mapping[str, str] | None = None,
    allow_legacy: bool = False,
    verify_signature: bool = True,
    max_encrypted_data_keys: int | None = DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
) -> AwsLayout:
    """Authenticate the header and map a framed message of ``stream_size`` bytes.

    ``read_at(offset, length)`` reads the message. The final frame is located and opened
    (proving the length). For signed suites the whole message is read once, hashed and its
    signature verified, unless ``verify_signature=False`` (then range reads are authentic
    under the data key only). Non-framed messages cannot be read by random access
    (:class:`UnsupportedFormatError`). Raises as :class:`AwsDecryptor`.
    """
    limits = _Limits(
        allow_legacy, max_encrypted_data_keys, DEFAULT_MAX_HEADER_SIZE, DEFAULT_MAX_FRAME_LENGTH
    )
    parser = _HeaderParser(limits)
    head = b""
    want = min(stream_size, 4096)
    while True:
        head = read_at(0, want)
        header = parser.advance(head)
        if header is not None:
            break
        if len(head) >= stream_size:
            raise TruncatedStreamError("the message ends inside its header")
        want = min(stream_size, 2 * want)
    key = _open_header(header, _keyrings(keyring), dict(encryption_context or {}))
    if not header.framed:
        raise UnsupportedFormatError("a non-framed message cannot be read by random access")
    codec = AwsFrameCodec(key, header.message_id, header.frame_length)
    regular = header.frame_length + AwsFrameCodec.overhead
    found = None
    footers = (
        range(0, 1)
        if not header.suite.signed
        else range(2, 2 + 1 + _MAX_SIGNATURE[header.suite.curve or "P-384"])
    )
    tried: set[int] = set()
    for footer in footers:
        space = stream_size - header.size - footer - 24 - _TAG
        if space < 0:
            continue
        k = space // regular
        if k in tried:
            continue
        tried.add(k)
        offset = header.size + k * regular
        head24 = read_at(offset, 24)
        if len(head24) < 24 or head24[:4] != _FINAL_MARK:
            continue
        n = int.from_bytes(head24[20:24], "big")
        end = offset + 24 + n + _TAG
        if n > header.frame_length or end > stream_size:
            continue
        if header.suite.signed:
            sig = read_at(end, 2)
            if len(sig) != 2 or end + 2 + int.from_bytes(sig, "big") != stream_size:
                continue
        elif end != stream_size:
            continue
        found = (k, n, end)
        break
    if found is None:
        raise TruncatedStreamError(
            "no final frame where the message length puts it: truncated or extended message"
        )
    k, n, end = found
    lay = AwsLayout(codec, header.size, stream_size, k, n, end)
    lay.verify_end(read_at)
    if header.suite.signed and verify_signature:
        _verify_whole(header, read_at, stream_size, end)
    return lay


def read_range(
    keyring: KeyringLike,
    read_at: Callable[[int, int], bytes],
    stream_size: int,
    start: int,
    stop: int,
    **options: object,
) -> bytes:
    """Plaintext ``[start, stop)`` of a framed message, opening only the frames covering
    it (options and errors as :func:`layout`)."""
    lay = layout(keyring, read_at, stream_size, **options)  # type: ignore[arg-type]
    return lay.read(read_at, start, stop)


def _verify_whole(
    header: AwsHeader, read_at: Callable[[int, int], bytes], size: int, end: int
) -> None:
    assert header.suite.curve is not None
    digest = hashlib.new(_HASHLIB[header.suite.curve])
    pos = 0
    while pos < end:
        chunk = read_at(pos, min(1 << 20, end - pos))
        if not chunk:
            raise TruncatedStreamError("the message is shorter than its layout says")
        digest.update(chunk)
        pos += len(chunk)
    footer = read_at(end, size - end)
    key = _verifying_key(header.suite, header.encryption_context)
    try:
        key.verify(footer[2:], digest.digest(), ec.ECDSA(Prehashed(_CURVES[header.suite.curve][1])))
    except InvalidSignature:
        raise InvalidSignatureError("the message signature did not verify") from None


def _suite_option(text: str | None) -> int:
    """The suite id ``suite=`` names: ``"0x0578"``, ``"0478"`` or a suite name."""
    if text is None:
        return DEFAULT_SUITE
    for suite in _SUITE_LIST:
        if text.strip().upper() == suite.name:
            return suite.id
    try:
        return int(text, 16)
    except ValueError:
        raise InvalidParameterError(
            f"unknown AWS algorithm suite {text!r}: give an id such as '0x0578' or a name"
        ) from None


def _check(options: FormatOptions, mode: str) -> None:
    if options.recipients or options.identities or options.passphrase is not None or options.aad:
        raise InvalidParameterError(
            'format="aws" takes key= (a keyring, or a list of them), and encryption_context=; '
            "drop recipients=, identities=, passphrase= and aad="
        )
    _keyrings(cast("KeyringLike", options.key))
    context = dict(options.encryption_context or {})
    serialize_encryption_context(context)  # types and sizes
    if mode == "rb":
        if options.suite is not None or options.segment_size is not None:
            raise InvalidParameterError(
                "the message header names its suite and frame length: drop suite= and "
                "segment_size= when reading"
            )
        return
    suite = SUITES.get(_suite_option(options.suite))
    if suite is None or not (suite.committing or options.allow_legacy):
        raise InvalidParameterError(
            f'format="aws" writes the committing suites 0x0578 and 0x0478 (the legacy ones '
            f"with allow_legacy=True), not {options.suite!r}"
        )
    frame = options.segment_size
    if frame is not None and not 0 < frame <= DEFAULT_MAX_FRAME_LENGTH:
        raise InvalidParameterError(
            f"segment_size= (the frame length) must be 1 .. {DEFAULT_MAX_FRAME_LENGTH} (what "
            "readers accept); non-framed messages: codecs.aws.AwsEncryptor(frame_length=0)"
        )
    if any(k.startswith(_RESERVED_PREFIX) for k in context):
        raise InvalidParameterError(
            f"encryption context keys starting with {_RESERVED_PREFIX!r} are reserved"
        )


def _encryptor(options: FormatOptions) -> AwsEncryptor:
    return AwsEncryptor(
        cast("KeyringLike", options.key),
        encryption_context=options.encryption_context,
        suite=_suite_option(options.suite),
        frame_length=or_default(options.segment_size, DEFAULT_FRAME_LENGTH),
        allow_legacy=options.allow_legacy,
        max_encrypted_data_keys=options.max_encrypted_data_keys,
    )


def _decryptor(options: FormatOptions) -> AwsDecryptor:
    return AwsDecryptor(
        cast("KeyringLike", options.key),
        encryption_context=options.encryption_context,
        allow_legacy=options.allow_legacy,
        release=options.release,
        max_encrypted_data_keys=or_default(
            options.max_encrypted_data_keys, DEFAULT_MAX_ENCRYPTED_DATA_KEYS
        ),
    )


def _layout(options: FormatOptions, read_at: ReadAt, stream_size: int) -> SegmentLayout:
    return layout(
        cast("KeyringLike", options.key),
        read_at,
        stream_size,
        encryption_context=options.encryption_context,
    )


#: The AWS Encryption SDK's format descriptor, framed (``key``: a keyring or a list of
#: them; ``suite``: ``"0x0578"`` (default) or ``"0x0478"``; ``segment_size``: the frame
#: length; ``encryption_context``). Its layout reads past the header: it locates the final
#: frame from the message's end, and for signed suites reads the whole message once to
#: verify the signature before any range is released.
FORMAT = SegmentedFormat(
    "aws",
    encryptor=_encryptor,
    decryptor=_decryptor,
    writes=frozenset(
        {"key", "suite", "segment_size", "encryption_context", "allow_legacy"}
        | {"max_encrypted_data_keys"}
    ),
    reads=frozenset(
        {"key", "encryption_context", "allow_legacy", "release", "max_encrypted_data_keys"}
    ),
    check=_check,
    detect=is_aws,
    header_size=header_size,
    max_header_size=DEFAULT_MAX_HEADER_SIZE,
    layout=_layout,
    opens_files=True,
)
