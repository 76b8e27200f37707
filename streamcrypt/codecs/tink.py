"""Tink streaming AEAD (AES-GCM-HKDF-Streaming and AES-CTR-HMAC-Streaming), byte for byte.

Theory of operation
-------------------
A Tink streaming ciphertext is ``header || segment_0 || ... || segment_n`` with

    header = header_length (1 byte) || salt (derived_key_size bytes) || nonce_prefix (7 bytes)

so ``header_length = derived_key_size + 8``. Nothing in it names the key: a keyset of
several keys is tried key by key, as Tink does. Per stream, HKDF (the key's hash) over the
key value with the header's salt and the *associated data as info* gives the segment key
material; a wrong key or wrong associated data therefore shows up as a failing segment 0.

- AES-GCM-HKDF-Streaming: ``HKDF(len = derived_key_size)`` is the AES-GCM key; segment
  *i* is sealed with nonce ``prefix || uint32_be(i) || last_flag`` (12 bytes), no AAD,
  16-byte tag.
- AES-CTR-HMAC-Streaming: ``HKDF(len = derived_key_size + 32)`` splits into the AES key
  and a 32-byte HMAC key; segment *i* is AES-CTR with the 16-byte initial counter block
  ``nonce = prefix || uint32_be(i) || last_flag || 0x00000000`` and ends with the first
  ``tag_size`` bytes of ``HMAC(hash, nonce || ciphertext)``.

Every ciphertext segment but the last is ``ciphertext_segment_size`` bytes, except that
segment 0 shares that size with the header (its plaintext is ``header_length`` bytes
smaller). The last segment may be full-size, so a decryptor reads one segment ahead; a
stream cut at a segment boundary fails as :class:`AuthenticationError` (the last segment
present was sealed as non-final), a stream cut inside the final segment's tag as
:class:`TruncatedStreamError`.

Keys come from a Tink keyset (the cleartext JSON form, or the binary protobuf form), whose
``keyData.value`` is a serialized ``AesGcmHkdfStreamingKey`` / ``AesCtrHmacStreamingKey``
protobuf read here by a small protobuf reader, or from a raw key value plus parameters.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import ClassVar, Literal, cast

from .._state import Buffer
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidKeySizeError,
    InvalidParameterError,
    TruncatedStreamError,
    UnsupportedFormatError,
)
from ..keys import SecretKey, constant_time_equal, hkdf, random_bytes
from ..primitives import AES128GCM, AES256GCM, AesCtrEncryptor, AesGcm
from ._segmented import (
    SegmentCodec,
    SegmentedDecryptor,
    SegmentedEncryptor,
    SegmentJob,
    SegmentLayout,
)

__all__ = [
    "AES_CTR_HMAC_TYPE_URL",
    "AES_GCM_HKDF_TYPE_URL",
    "GCM_TAG_SIZE",
    "HMAC_KEY_SIZE",
    "MAX_CIPHERTEXT_SEGMENT_SIZE",
    "NONCE_PREFIX_SIZE",
    "TEMPLATES",
    "AesCtrHmacCodec",
    "AesCtrHmacStreamingParams",
    "AesGcmHkdfCodec",
    "AesGcmHkdfStreamingParams",
    "TinkHash",
    "TinkKeyLike",
    "TinkKeyset",
    "TinkStreamDecryptor",
    "TinkStreamEncryptor",
    "TinkStreamingCodec",
    "TinkStreamingKey",
    "TinkStreamingParams",
    "decrypt_bytes",
    "decrypt_range",
    "encrypt_bytes",
    "layout",
    "load_keyset",
]

#: Keyset type URL of AES-GCM-HKDF streaming keys.
AES_GCM_HKDF_TYPE_URL = "type.googleapis.com/google.crypto.tink.AesGcmHkdfStreamingKey"
#: Keyset type URL of AES-CTR-HMAC streaming keys.
AES_CTR_HMAC_TYPE_URL = "type.googleapis.com/google.crypto.tink.AesCtrHmacStreamingKey"

#: Bytes of the random nonce prefix in a ciphertext header.
NONCE_PREFIX_SIZE = 7
#: Bytes of the AES-GCM tag of each segment.
GCM_TAG_SIZE = 16
#: Bytes of the derived HMAC key of AES-CTR-HMAC.
HMAC_KEY_SIZE = 32
#: Tink stores the segment size as an int32; we refuse anything larger.
MAX_CIPHERTEXT_SEGMENT_SIZE = (1 << 31) - 1

#: A hash Tink's streaming key templates name (HKDF and HMAC).
TinkHash = Literal["sha1", "sha256", "sha512"]

#: Tink's ``HashType`` enum (common.proto) for the hashes its streaming AEADs accept.
_HASH_ENUM: dict[int, TinkHash] = {1: "sha1", 3: "sha256", 4: "sha512"}
_HASH_ENUM_NAMES = {0: "UNKNOWN_HASH", 2: "SHA384", 5: "SHA224"}
_HASH_TO_ENUM: dict[str, int] = {v: k for k, v in _HASH_ENUM.items()}
_DIGEST_SIZE: dict[str, int] = {"sha1": 20, "sha256": 32, "sha512": 64}


def _check_hash(name: str, what: str) -> TinkHash:
    if name not in _DIGEST_SIZE:
        raise UnsupportedFormatError(
            f"unsupported {what} {name!r}; Tink streaming AEAD uses sha1, sha256 or sha512"
        )
    return cast(TinkHash, name)


def _hkdf(hash_name: TinkHash, ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 HKDF; SHA-1 (allowed by Tink, not by keys.hkdf) uses the stdlib HMAC."""
    if hash_name != "sha1":
        return hkdf(ikm, salt=salt, info=info, length=length, algorithm=hash_name)
    prk = hmac.new(salt, ikm, hashlib.sha1).digest()
    okm = block = b""
    counter = 1
    while len(okm) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha1).digest()
        okm += block
        counter += 1
    return okm[:length]


# ------------------------------------------------------------------------------ parameters


@dataclass(frozen=True, slots=True)
class AesGcmHkdfStreamingParams:
    """Parameters of an AES-GCM-HKDF-Streaming key (``AesGcmHkdfStreamingParams`` in Tink)."""

    derived_key_size: int = 32
    ciphertext_segment_size: int = 1 << 20
    hkdf_hash: TinkHash = "sha256"

    type_url: ClassVar[str] = AES_GCM_HKDF_TYPE_URL

    @property
    def tag_size(self) -> int:
        return GCM_TAG_SIZE

    @property
    def header_length(self) -> int:
        return 1 + self.derived_key_size + NONCE_PREFIX_SIZE

    def validate(self) -> None:
        """Raise :class:`InvalidKeySizeError` / :class:`InvalidParameterError` as Tink would."""
        _validate_common(self)


@dataclass(frozen=True, slots=True)
class AesCtrHmacStreamingParams:
    """Parameters of an AES-CTR-HMAC-Streaming key (``AesCtrHmacStreamingParams`` in Tink)."""

    derived_key_size: int = 32
    ciphertext_segment_size: int = 1 << 20
    hkdf_hash: TinkHash = "sha256"
    hmac_hash: TinkHash = "sha256"
    tag_size: int = 32

    type_url: ClassVar[str] = AES_CTR_HMAC_TYPE_URL

    @property
    def header_length(self) -> int:
        return 1 + self.derived_key_size + NONCE_PREFIX_SIZE

    def validate(self) -> None:
        """Raise :class:`InvalidKeySizeError` / :class:`InvalidParameterError` as Tink would."""
        _check_hash(self.hmac_hash, "HMAC hash")
        if not 10 <= self.tag_size <= _DIGEST_SIZE[self.hmac_hash]:
            raise InvalidParameterError(
                f"HMAC-{self.hmac_hash.upper()} tag size must be 10.."
                f"{_DIGEST_SIZE[self.hmac_hash]} bytes, got {self.tag_size}"
            )
        _validate_common(self)


#: The parameters of either Tink streaming AEAD key type.
TinkStreamingParams = AesGcmHkdfStreamingParams | AesCtrHmacStreamingParams


def _validate_common(params: TinkStreamingParams) -> None:
    _check_hash(params.hkdf_hash, "HKDF hash")
    if params.derived_key_size not in (16, 32):
        raise InvalidKeySizeError(
            f"Tink streaming derived key size must be 16 or 32 bytes, got {params.derived_key_size}"
        )
    low = params.header_length + params.tag_size
    if not low < params.ciphertext_segment_size <= MAX_CIPHERTEXT_SEGMENT_SIZE:
        raise InvalidParameterError(
            f"ciphertext segment size must be {low + 1}..{MAX_CIPHERTEXT_SEGMENT_SIZE} bytes "
            f"for these parameters, got {params.ciphertext_segment_size}"
        )


_4KB = 4096
_1MB = 1 << 20

#: The parameters of Tink's streaming AEAD key templates, by template name.
TEMPLATES: dict[str, TinkStreamingParams] = {
    "AES128_GCM_HKDF_4KB": AesGcmHkdfStreamingParams(16, _4KB),
    "AES128_GCM_HKDF_1MB": AesGcmHkdfStreamingParams(16, _1MB),
    "AES256_GCM_HKDF_4KB": AesGcmHkdfStreamingParams(32, _4KB),
    "AES256_GCM_HKDF_1MB": AesGcmHkdfStreamingParams(32, _1MB),
    "AES128_CTR_HMAC_SHA256_4KB": AesCtrHmacStreamingParams(16, _4KB),
    "AES128_CTR_HMAC_SHA256_1MB": AesCtrHmacStreamingParams(16, _1MB),
    "AES256_CTR_HMAC_SHA256_4KB": AesCtrHmacStreamingParams(32, _4KB),
    "AES256_CTR_HMAC_SHA256_1MB": AesCtrHmacStreamingParams(32, _1MB),
}


# ------------------------------------------------------------------------------------ keys


@dataclass(frozen=True, slots=True)
class TinkStreamingKey:
    """One Tink streaming AEAD key: the key value (initial key material) and its parameters.

    ``key_id`` is the keyset's key id (0 for a raw key); ciphertexts do not carry it. The
    repr hides the key value. Raises :class:`InvalidKeySizeError` for a key value shorter
    than 16 bytes or than the derived key size, :class:`InvalidParameterError` for bad
    parameters, :class:`UnsupportedFormatError` for a hash Tink does not use here.
    """

    value: SecretKey = field(repr=False)
    params: TinkStreamingParams
    key_id: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.value, SecretKey):
            raise InvalidParameterError("TinkStreamingKey.value must be a SecretKey; use .raw()")
        self.params.validate()
        need = max(16, self.params.derived_key_size)
        if len(self.value) < need:
            raise InvalidKeySizeError(
                f"Tink streaming key value must be at least {need} bytes for these "
                f"parameters, got {len(self.value)}"
            )

    @classmethod
    def raw(
        cls, value: Buffer | SecretKey, params: TinkStreamingParams | str, *, key_id: int = 0
    ) -> TinkStreamingKey:
        """A key from its raw value and parameters (or a template name such as
        ``"AES256_GCM_HKDF_1MB"``)."""
        secret = value if isinstance(value, SecretKey) else SecretKey(value) if value else None
        if secret is None:
            raise InvalidKeySizeError("Tink streaming key value cannot be empty")
        return cls(secret, _params(params), key_id)

    @classmethod
    def generate(cls, params: TinkStreamingParams | str, *, key_id: int = 0) -> TinkStreamingKey:
        """A fresh random key; its value is as long as the derived key, as Tink makes it."""
        p = _params(params)
        return cls(SecretKey(random_bytes(p.derived_key_size)), p, key_id)

    def key_data_value(self) -> bytes:
        """The serialized ``AesGcmHkdfStreamingKey`` / ``AesCtrHmacStreamingKey`` protobuf."""
        p = self.params
        fields = _pb_varint(1, p.ciphertext_segment_size) + _pb_varint(2, p.derived_key_size)
        fields += _pb_varint(3, _HASH_TO_ENUM[p.hkdf_hash])
        if isinstance(p, AesCtrHmacStreamingParams):
            hmac_params = _pb_varint(1, _HASH_TO_ENUM[p.hmac_hash]) + _pb_varint(2, p.tag_size)
            fields += _pb_bytes(4, hmac_params)
        return _pb_bytes(2, fields) + _pb_bytes(3, self.value.secret_bytes())


def _params(params: TinkStreamingParams | str) -> TinkStreamingParams:
    if isinstance(params, str):
        try:
            return TEMPLATES[params.upper()]
        except KeyError:
            raise InvalidParameterError(
                f"unknown Tink streaming template {params!r}; known: {', '.join(TEMPLATES)}"
            ) from None
    if not isinstance(params, AesGcmHkdfStreamingParams | AesCtrHmacStreamingParams):
        raise InvalidParameterError(
            "params must be AesGcmHkdfStreamingParams, AesCtrHmacStreamingParams or a "
            f"template name, not {type(params).__name__}"
        )
    return params


@dataclass(frozen=True, slots=True)
class TinkKeyset:
    """The enabled streaming AEAD keys of a Tink keyset and which one is primary.

    Encryption uses the primary key; decryption tries every key in keyset order, because
    Tink streaming ciphertexts carry no key id.
    """

    keys: tuple[TinkStreamingKey, ...]
    primary_key_id: int

    def __post_init__(self) -> None:
        if not self.keys:
            raise InvalidParameterError("a Tink keyset needs at least one enabled key")

    @property
    def primary(self) -> TinkStreamingKey:
        """The primary key; raises :class:`InvalidParameterError` if it is not in the keyset."""
        for key in self.keys:
            if key.key_id == self.primary_key_id:
                return key
        raise InvalidParameterError(
            f"the keyset's primary key id {self.primary_key_id} is not an enabled key"
        )

    @classmethod
    def of(cls, *keys: TinkStreamingKey) -> TinkKeyset:
        """A keyset of ``keys`` (the first is primary); missing key ids are numbered 1, 2, ..."""
        numbered = tuple(
            k if k.key_id else TinkStreamingKey(k.value, k.params, i + 1)
            for i, k in enumerate(keys)
        )
        if len({k.key_id for k in numbered}) != len(numbered):
            raise InvalidParameterError("key ids in a keyset must be distinct")
        return cls(numbered, numbered[0].key_id if numbered else 0)

    def to_json(self) -> str:
        """This keyset as Tink's cleartext JSON keyset (what ``tink.JsonKeysetReader`` reads)."""
        entries = [
            {
                "keyData": {
                    "typeUrl": key.params.type_url,
                    "value": base64.b64encode(key.key_data_value()).decode(),
                    "keyMaterialType": "SYMMETRIC",
                },
                "status": "ENABLED",
                "keyId": key.key_id,
                "outputPrefixType": "RAW",
            }
            for key in self.keys
        ]
        return json.dumps({"primaryKeyId": self.primary_key_id, "key": entries}, indent=2)


#: What the encryptor and decryptor accept as a key.
TinkKeyLike = TinkStreamingKey | TinkKeyset


# ------------------------------------------------------------------------ keyset parsing
#
# Protobuf wire format, only what keysets use: each field is a varint tag
# ``(number << 3) | wire_type``; wire type 0 is a varint, 2 a length-prefixed byte string,
# 1 and 5 fixed 64/32-bit values (skipped). Enums and uint32 are varints.


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise FormatError("malformed protobuf in the keyset (bad varint)")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _pb_fields(data: bytes, what: str) -> dict[int, list[int | bytes]]:
    """Decode one protobuf message into ``{field number: [values]}``."""
    fields: dict[int, list[int | bytes]] = {}
    pos = 0
    while pos < len(data):
        tag, pos = _read_varint(data, pos)
        number, wire = tag >> 3, tag & 7
        value: int | bytes
        if wire == 0:
            value, pos = _read_varint(data, pos)
        elif wire == 2:
            size, pos = _read_varint(data, pos)
            if pos + size > len(data):
                raise FormatError(f"malformed {what} protobuf in the keyset (truncated field)")
            value, pos = data[pos : pos + size], pos + size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
            if pos > len(data):
                raise FormatError(f"malformed {what} protobuf in the keyset (truncated field)")
            continue
        else:
            raise FormatError(f"malformed {what} protobuf in the keyset (wire type {wire})")
        if number == 0:
            raise FormatError(f"malformed {what} protobuf in the keyset (field number 0)")
        fields.setdefault(number, []).append(value)
    return fields


def _pb_int(fields: dict[int, list[int | bytes]], number: int, what: str) -> int:
    values = fields.get(number)
    if not values:
        return 0
    value = values[-1]
    if not isinstance(value, int):
        raise FormatError(f"{what} in the keyset has the wrong protobuf type")
    return value


def _pb_msg(fields: dict[int, list[int | bytes]], number: int, what: str) -> bytes:
    values = fields.get(number)
    if not values:
        return b""
    value = values[-1]
    if not isinstance(value, bytes):
        raise FormatError(f"{what} in the keyset has the wrong protobuf type")
    return value


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _pb_varint(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value) if value else b""


def _pb_bytes(number: int, value: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(value)) + value


def _hash_from_enum(value: int, what: str) -> TinkHash:
    try:
        return _HASH_ENUM[value]
    except KeyError:
        name = _HASH_ENUM_NAMES.get(value, str(value))
        raise UnsupportedFormatError(
            f"{what} {name} is not supported by Tink streaming AEAD (SHA1, SHA256, SHA512)"
        ) from None


def _key_from_proto(type_url: str, value: bytes, key_id: int) -> TinkStreamingKey:
    """Parse a serialized ``AesGcmHkdfStreamingKey`` / ``AesCtrHmacStreamingKey``."""
    if type_url not in (AES_GCM_HKDF_TYPE_URL, AES_CTR_HMAC_TYPE_URL):
        raise UnsupportedFormatError(
            f"keyset key {key_id} has type {type_url!r}, not a Tink streaming AEAD key"
        )
    key = _pb_fields(value, "streaming key")
    version = _pb_int(key, 1, "key version")
    if version != 0:
        raise UnsupportedFormatError(f"keyset key {key_id} has version {version}; this reads 0")
    p = _pb_fields(_pb_msg(key, 2, "key params"), "key params")
    segment = _pb_int(p, 1, "ciphertext_segment_size")
    derived = _pb_int(p, 2, "derived_key_size")
    hkdf_hash = _hash_from_enum(_pb_int(p, 3, "hkdf_hash_type"), "HKDF hash")
    params: TinkStreamingParams
    if type_url == AES_GCM_HKDF_TYPE_URL:
        params = AesGcmHkdfStreamingParams(derived, segment, hkdf_hash)
    else:
        hp = _pb_fields(_pb_msg(p, 4, "hmac_params"), "hmac_params")
        hmac_hash = _hash_from_enum(_pb_int(hp, 1, "hmac hash"), "HMAC hash")
        params = AesCtrHmacStreamingParams(
            derived, segment, hkdf_hash, hmac_hash, _pb_int(hp, 2, "tag_size")
        )
    return TinkStreamingKey.raw(_pb_msg(key, 3, "key_value"), params, key_id=key_id)


_STATUS = {"ENABLED": 1, "DISABLED": 2, "DESTROYED": 3}


def _keyset_from_entries(
    primary: int, entries: Iterable[tuple[str, bytes, int, int]]
) -> TinkKeyset:
    keys = tuple(
        _key_from_proto(type_url, value, key_id)
        for type_url, value, key_id, status in entries
        if status == _STATUS["ENABLED"]
    )
    if not keys:
        raise FormatError("the keyset holds no enabled key")
    keyset = TinkKeyset(keys, primary)
    if primary:
        keyset.primary  # noqa: B018  (checks that the primary is present)
    return keyset


def _keyset_from_json(text: str) -> TinkKeyset:
    try:
        doc = json.loads(text)
        primary = int(doc.get("primaryKeyId", 0))
        entries: list[tuple[str, bytes, int, int]] = []
        for entry in doc["key"]:
            data = entry["keyData"]
            value = base64.b64decode(data["value"], validate=True)
            status = _STATUS.get(entry.get("status", ""), 0)
            entries.append((data["typeUrl"], value, int(entry.get("keyId", 0)), status))
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
        raise FormatError(f"not a Tink JSON keyset ({type(exc).__name__})") from None
    return _keyset_from_entries(primary, entries)


def _keyset_from_binary(data: bytes) -> TinkKeyset:
    keyset = _pb_fields(data, "Keyset")
    primary = _pb_int(keyset, 1, "primary_key_id")
    entries: list[tuple[str, bytes, int, int]] = []
    for raw in keyset.get(2, []):
        if not isinstance(raw, bytes):
            raise FormatError("Keyset.key in the keyset has the wrong protobuf type")
        key = _pb_fields(raw, "Keyset.Key")
        key_data = _pb_fields(_pb_msg(key, 1, "key_data"), "KeyData")
        try:
            type_url = _pb_msg(key_data, 1, "type_url").decode()
        except UnicodeDecodeError:
            raise FormatError("KeyData.type_url in the keyset is not UTF-8") from None
        entries.append(
            (
                type_url,
                _pb_msg(key_data, 2, "KeyData.value"),
                _pb_int(key, 3, "key_id"),
                _pb_int(key, 2, "status"),
            )
        )
    return _keyset_from_entries(primary, entries)


def load_keyset(data: str | Buffer) -> TinkKeyset:
    """Read a cleartext Tink keyset: the JSON form (``str`` or bytes starting with ``{``) or
    the binary ``Keyset`` protobuf.

    Only ENABLED keys are kept. Raises :class:`FormatError` for a malformed keyset,
    :class:`UnsupportedFormatError` for a key that is not a streaming AEAD key (or uses a
    hash Tink does not allow here), :class:`InvalidKeySizeError` /
    :class:`InvalidParameterError` for bad key values or parameters.
    """
    if isinstance(data, str):
        return _keyset_from_json(data)
    raw = bytes(data)
    if raw.lstrip()[:1] == b"{":
        try:
            return _keyset_from_json(raw.decode())
        except UnicodeDecodeError:
            raise FormatError("a JSON keyset must be UTF-8") from None
    return _keyset_from_binary(raw)


# ---------------------------------------------------------------------------------- codecs


class TinkStreamingCodec(SegmentCodec):
    """The segments of one Tink stream; ``header_length`` and the geometry come from the key."""

    final_may_be_full = True

    __slots__ = ("_prefix", "ciphertext_segment_size", "first_segment_size", "segment_size")

    def __init__(self, params: TinkStreamingParams, prefix: bytes) -> None:
        self._prefix = prefix
        self.ciphertext_segment_size = params.ciphertext_segment_size
        self.segment_size = params.ciphertext_segment_size - self.overhead
        self.first_segment_size = self.segment_size - params.header_length

    def _segment_nonce(self, index: int, final: bool) -> bytes:
        return self._prefix + struct.pack(">IB", index, final)


class AesGcmHkdfCodec(TinkStreamingCodec):
    """AES-GCM-HKDF-Streaming segments: AES-GCM, nonce ``prefix || u32be(i) || last``."""

    overhead = GCM_TAG_SIZE

    __slots__ = ("_aead",)

    def __init__(self, params: AesGcmHkdfStreamingParams, key: bytes, prefix: bytes) -> None:
        super().__init__(params, prefix)
        self._aead: AesGcm = (AES128GCM if len(key) == 16 else AES256GCM)(key)

    def seal_segment(self, index: int, plaintext: Buffer, final: bool, out: memoryview) -> int:
        return self._aead.seal_into(self._segment_nonce(index, final), plaintext, out)

    def open_segment(self, index: int, ciphertext: Buffer, final: bool, out: memoryview) -> int:
        return self._aead.open_into(self._segment_nonce(index, final), ciphertext, out)


class AesCtrHmacCodec(TinkStreamingCodec):
    """AES-CTR-HMAC-Streaming segments: AES-CTR then a truncated HMAC over nonce || ciphertext.

    ``overhead`` (the tag size) is a class attribute, so :meth:`create` returns an instance
    of a cached subclass per tag size.
    """

    __slots__ = ("_aes_key", "_mac")

    def __init__(
        self, params: AesCtrHmacStreamingParams, aes_key: bytes, mac_key: bytes, prefix: bytes
    ) -> None:
        if params.tag_size != self.overhead:
            raise InvalidParameterError("use AesCtrHmacCodec.create() for this tag size")
        super().__init__(params, prefix)
        self._aes_key = aes_key
        self._mac = hmac.new(mac_key, digestmod=params.hmac_hash)

    @staticmethod
    def create(
        params: AesCtrHmacStreamingParams, aes_key: bytes, mac_key: bytes, prefix: bytes
    ) -> AesCtrHmacCodec:
        return _ctr_codec_class(params.tag_size)(params, aes_key, mac_key, prefix)

    def _tag(self, nonce: bytes, ciphertext: Buffer) -> bytes:
        mac = self._mac.copy()
        mac.update(nonce)
        mac.update(ciphertext)
        return mac.digest()[: self.overhead]

    def _ctr(self, nonce: bytes, data: Buffer, out: memoryview) -> int:
        return AesCtrEncryptor(self._aes_key, nonce).update_into(data, out)

    def seal_segment(self, index: int, plaintext: Buffer, final: bool, out: memoryview) -> int:
        nonce = self._segment_nonce(index, final) + bytes(4)
        n = len(plaintext)
        if len(out) != n + self.overhead:
            raise InvalidParameterError(
                f"AES-CTR-HMAC segment output must be {n + self.overhead} bytes, got {len(out)}"
            )
        self._ctr(nonce, plaintext, out[:n])
        out[n:] = self._tag(nonce, out[:n])
        return n + self.overhead

    def open_segment(self, index: int, ciphertext: Buffer, final: bool, out: memoryview) -> int:
        nonce = self._segment_nonce(index, final) + bytes(4)
        view = memoryview(ciphertext).cast("B")
        n = len(view) - self.overhead
        if n < 0 or not constant_time_equal(self._tag(nonce, view[:n]), view[n:]):
            raise AuthenticationError(
                "AES-CTR-HMAC segment tag did not verify: wrong key or associated data, "
                "or a tampered, reordered or truncated stream"
            )
        return self._ctr(nonce, view[:n], out[:n])


@cache
def _ctr_codec_class(tag_size: int) -> type[AesCtrHmacCodec]:
    return type(
        f"AesCtrHmacCodec{tag_size}",
        (AesCtrHmacCodec,),
        {"overhead": tag_size, "__slots__": (), "__module__": __name__},
    )


def _codec(key: TinkStreamingKey, salt: bytes, prefix: bytes, aad: bytes) -> TinkStreamingCodec:
    """The keyed codec of one stream: HKDF(key value, salt, info = associated data)."""
    p = key.params
    ikm = key.value.secret_bytes()
    if isinstance(p, AesGcmHkdfStreamingParams):
        return AesGcmHkdfCodec(p, _hkdf(p.hkdf_hash, ikm, salt, aad, p.derived_key_size), prefix)
    okm = _hkdf(p.hkdf_hash, ikm, salt, aad, p.derived_key_size + HMAC_KEY_SIZE)
    dks = p.derived_key_size
    return AesCtrHmacCodec.create(p, okm[:dks], okm[dks:], prefix)


# --------------------------------------------------------------------------- the header


def _encryption_key(key: TinkKeyLike) -> TinkStreamingKey:
    if isinstance(key, TinkKeyset):
        return key.primary
    if isinstance(key, TinkStreamingKey):
        return key
    raise InvalidParameterError(
        f"a Tink key must be a TinkStreamingKey or TinkKeyset, not {type(key).__name__}"
    )


def _decryption_keys(key: TinkKeyLike | Sequence[TinkStreamingKey]) -> tuple[TinkStreamingKey, ...]:
    if isinstance(key, TinkKeyset):
        return key.keys
    if isinstance(key, TinkStreamingKey):
        return (key,)
    keys = tuple(key)
    if not keys or not all(isinstance(k, TinkStreamingKey) for k in keys):
        raise InvalidParameterError(
            "a Tink key must be a TinkStreamingKey, a TinkKeyset or a sequence of keys"
        )
    return keys


def _open_header(
    keys: Sequence[TinkStreamingKey],
    aad: bytes,
    data: bytes,
    *,
    at_end: bool,
    stream_size: int | None = None,
) -> tuple[TinkStreamingCodec, int] | None:
    """Pick the key and build the codec for the stream starting with ``data``.

    Returns ``None`` while more bytes are needed. With one key that matches the header
    length, only the header is read. With several, segment 0 is opened under each in turn,
    so segment 0 must be present and known final or not: from ``stream_size`` when given,
    else from ``at_end`` (``data`` is the whole stream), else by buffering one byte past
    the largest candidate's segment 0. The first key that opens it wins, as in Tink.
    """
    if not data:
        return None
    candidates = [k for k in keys if k.params.header_length == data[0]]
    if not candidates:
        expected = sorted({k.params.header_length for k in keys})
        raise FormatError(
            f"Tink stream header length byte is {data[0]}, expected "
            f"{' or '.join(map(str, expected))}: not a Tink streaming ciphertext for this key, "
            "or it is misaligned"
        )
    hl = data[0]
    if len(data) < hl:
        return None
    dks = hl - 1 - NONCE_PREFIX_SIZE
    salt, prefix = data[1 : 1 + dks], data[1 + dks : hl]
    if len(candidates) == 1:
        return _codec(candidates[0], salt, prefix, aad), hl
    body = memoryview(data)[hl:]
    need = max(k.params.ciphertext_segment_size - hl for k in candidates)
    # ``total``: the length of everything after the header, or more than ``need`` if unknown.
    if stream_size is not None:
        total = stream_size - hl
        if len(body) < min(total, need):
            return None
    elif at_end:
        total = len(body)
    elif len(body) <= need:
        return None
    else:
        total = len(body)
    if total < min(k.params.tag_size for k in candidates):
        raise TruncatedStreamError("the stream ended before its first segment was complete")
    for key in candidates:
        codec = _codec(key, salt, prefix, aad)
        full = codec.full_ciphertext(0)
        final = total <= full
        segment = body[: total if final else full]
        if len(segment) < codec.overhead:
            continue
        try:
            scratch = memoryview(bytearray(len(segment) - codec.overhead))
            codec.open_segment(0, segment, final, scratch)
        except AuthenticationError:
            continue
        return codec, hl
    raise AuthenticationError(
        f"no key of the keyset ({len(candidates)} tried) opens the stream's first segment: "
        "wrong keyset or associated data, or a tampered stream"
    )


# ---------------------------------------------------------------------------- transforms


class TinkStreamEncryptor(SegmentedEncryptor):
    """Encrypt into a Tink streaming AEAD ciphertext (sans-I/O transform).

    ``key`` is a :class:`TinkStreamingKey` or a :class:`TinkKeyset` (its primary key);
    ``aad`` is Tink's associated data. ``salt`` and ``nonce_prefix`` are for test vectors
    only. Raises :class:`InvalidParameterError`, :class:`LimitExceededError` (2**32
    segments).
    """

    __slots__ = ("header",)

    def __init__(
        self,
        key: TinkKeyLike,
        *,
        aad: Buffer = b"",
        salt: bytes | None = None,
        nonce_prefix: bytes | None = None,
    ) -> None:
        k = _encryption_key(key)
        dks = k.params.derived_key_size
        salt = random_bytes(dks) if salt is None else bytes(salt)
        prefix = random_bytes(NONCE_PREFIX_SIZE) if nonce_prefix is None else bytes(nonce_prefix)
        if len(salt) != dks or len(prefix) != NONCE_PREFIX_SIZE:
            raise InvalidParameterError(
                f"salt must be {dks} bytes and nonce prefix {NONCE_PREFIX_SIZE} bytes"
            )
        self.header = bytes([k.params.header_length]) + salt + prefix
        super().__init__(_codec(k, salt, prefix, bytes(aad)), self.header)


class TinkStreamDecryptor(SegmentedDecryptor):
    """Decrypt a Tink streaming AEAD ciphertext, releasing only verified segments.

    With a keyset of several keys each key is tried on the first segment (Tink ciphertexts
    name no key), so output starts one segment later. Raises :class:`FormatError` (bad
    header length byte), :class:`AuthenticationError` (wrong key or associated data,
    tampering, reordering, a stream cut at a segment boundary),
    :class:`TruncatedStreamError` (a stream cut inside its header or final segment).
    """

    __slots__ = ("_aad", "_keys")

    def __init__(self, key: TinkKeyLike | Sequence[TinkStreamingKey], *, aad: Buffer = b"") -> None:
        self._keys = _decryption_keys(key)
        self._aad = bytes(aad)
        keys, ad = self._keys, self._aad

        def reader(data: bytes) -> tuple[SegmentCodec, int] | None:
            return _open_header(keys, ad, data, at_end=False)

        super().__init__(reader)

    def finish(self) -> list[SegmentJob]:
        """The job opening the final segment; see :class:`SegmentedDecryptor`."""
        self._check()
        jobs: list[SegmentJob] = []
        if self._codec is None:
            # Several keys, and the stream ended before the reader could pick one: pick now.
            try:
                seen = bytes(self._take_held())
                opened = _open_header(self._keys, self._aad, seen, at_end=True)
                if opened is None:
                    self._hold(memoryview(seen))
                else:
                    self._codec, used = opened
                    jobs = self._cut(memoryview(seen)[used:])
            except Exception as exc:
                raise self._break(exc) from None
        return jobs + super().finish()


# ------------------------------------------------------------------------------ one-shot


def encrypt_bytes(plaintext: Buffer, key: TinkKeyLike, *, aad: Buffer = b"") -> bytes:
    """Encrypt ``plaintext`` into one Tink streaming ciphertext."""
    enc = TinkStreamEncryptor(key, aad=aad)
    return enc.update(plaintext) + enc.finalize()


def decrypt_bytes(
    ciphertext: Buffer, key: TinkKeyLike | Sequence[TinkStreamingKey], *, aad: Buffer = b""
) -> bytes:
    """Decrypt a whole Tink streaming ciphertext; errors as :class:`TinkStreamDecryptor`."""
    dec = TinkStreamDecryptor(key, aad=aad)
    return dec.update(ciphertext) + dec.finalize()


def layout(
    key: TinkKeyLike | Sequence[TinkStreamingKey],
    head: Buffer,
    stream_size: int,
    *,
    aad: Buffer = b"",
) -> SegmentLayout:
    """Map a Tink ciphertext of ``stream_size`` bytes for random access.

    ``head`` is the start of the stream: the header suffices for one key; for several keys
    pass the first ``min(stream_size, ciphertext_segment_size)`` bytes (header plus segment
    0), which are opened to pick the key. Only the segments a read touches are
    authenticated; the stream's end is checked only by a read of the last segment.
    """
    keys = _decryption_keys(key)
    head = bytes(head)
    opened = _open_header(keys, bytes(aad), head, at_end=True, stream_size=stream_size)
    if opened is None:
        raise TruncatedStreamError(
            "head is too short: pass the header (one key) or the first ciphertext segment "
            "(several keys)"
        )
    codec, size = opened
    return SegmentLayout(codec, size, stream_size)


def decrypt_range(
    ciphertext: Buffer | Callable[[int, int], bytes],
    key: TinkKeyLike | Sequence[TinkStreamingKey],
    start: int,
    stop: int,
    *,
    aad: Buffer = b"",
    stream_size: int | None = None,
) -> bytes:
    """Plaintext bytes ``[start, stop)`` of a Tink ciphertext, opening only the segments
    that cover them.

    ``ciphertext`` is the whole ciphertext, or ``read_at(offset, length) -> bytes`` together
    with ``stream_size``. Raises as :class:`TinkStreamDecryptor`.
    """
    if callable(ciphertext):
        if stream_size is None:
            raise InvalidParameterError("decrypt_range with a read_at function needs stream_size")
        read_at = ciphertext
        size = stream_size
    else:
        whole = memoryview(ciphertext).cast("B")
        size = len(whole)

        def read_at(offset: int, length: int) -> bytes:
            return bytes(whole[offset : offset + length])

    keys = _decryption_keys(key)
    head = read_at(0, min(size, max(k.params.ciphertext_segment_size for k in keys)))
    return layout(keys, head, size, aad=aad).read(read_at, start, stop)
