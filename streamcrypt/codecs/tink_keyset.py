"""Tink streaming AEAD keys and keysets, read exactly as the ``tink`` package reads them.

Theory of operation
-------------------
A Tink keyset is a ``google.crypto.tink.Keyset`` protobuf (tink.proto)::

    Keyset  { uint32 primary_key_id = 1; repeated Key key = 2; }
    Key     { KeyData key_data = 1; KeyStatusType status = 2; uint32 key_id = 3;
              OutputPrefixType output_prefix_type = 4; }
    KeyData { string type_url = 1; bytes value = 2; KeyMaterialType key_material_type = 3; }

stored in binary or in protobuf's JSON mapping. ``KeyData.value`` of a streaming key is
itself a serialized ``AesGcmHkdfStreamingKey`` / ``AesCtrHmacStreamingKey``. The reader
here gives the verdict ``tink`` gives for ``cleartext_keyset_handle.read(reader)``
followed by ``.primitive(streaming_aead.StreamingAead)``, which is protobuf's parsers
followed by Tink's keyset rules:

- Binary (protobuf wire format, as upb parses it): unknown fields are skipped, groups
  included (nested at most 100 deep, messages counted); a known field sent with another
  wire type is an unknown field; a singular message field sent twice is merged, a scalar
  sent twice keeps the last; uint32 and enum varints are cut to 32 bits; strings must be
  UTF-8; tags above 32 bits, field number 0, wire types 4/6/7 out of place, varints over
  10 bytes and truncated fields are errors, so is an empty input.
- JSON (protobuf's ``json_format.Parse``): unknown members and members named twice are
  errors; a field may be named in lowerCamelCase or as in the .proto; ``null`` means
  absent; integers may be JSON numbers with an integral value or strings of one; enums
  are names or numbers (unknown names are errors; a number whose low 32 bits name a value
  is that value, as protobuf looks numbers up, any other int32 is kept as an unknown
  value); bytes are
  base64 in either alphabet, padding optional; strings must not hold lone surrogates.
- Keyset rules: every key not DESTROYED needs key data, a known status and a known
  prefix type; at least one key not DESTROYED; exactly one ENABLED key carries the
  primary key id (none is allowed only when all key material is ASYMMETRIC_PUBLIC); every
  ENABLED key must be a streaming AEAD key whose parameters Tink accepts, with output
  prefix TINK, LEGACY, RAW or CRUNCHY (streaming ciphertexts carry no prefix, so Tink
  reads all four the same). DISABLED and DESTROYED keys, and keys of a status number Tink
  does not know, are kept out of the result.

One deliberate difference: a keyset that Tink accepts with no ENABLED key at all (all
key material ASYMMETRIC_PUBLIC, no primary) decrypts nothing, and is refused here
(docs/FUZZING.md lists the deliberate differences).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, cast

from ..abc import Buffer, as_bytes
from ..errors import (
    FormatError,
    InvalidKeySizeError,
    InvalidParameterError,
    UnsupportedFormatError,
)
from ..keys import HoldsSecrets, SecretKey, load_json, random_bytes

__all__ = [
    "AES_CTR_HMAC_TYPE_URL",
    "AES_GCM_HKDF_TYPE_URL",
    "GCM_TAG_SIZE",
    "MAX_CIPHERTEXT_SEGMENT_SIZE",
    "NONCE_PREFIX_SIZE",
    "TEMPLATES",
    "AesCtrHmacStreamingParams",
    "AesGcmHkdfStreamingParams",
    "TinkHash",
    "TinkKeyLike",
    "TinkKeyset",
    "TinkStreamingKey",
    "TinkStreamingParams",
    "keyset_from_binary",
    "keyset_from_json",
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
#: Tink stores the segment size as an int32; we refuse anything larger.
MAX_CIPHERTEXT_SEGMENT_SIZE = (1 << 31) - 1

#: A hash Tink's streaming key templates name (HKDF and HMAC).
TinkHash = Literal["sha1", "sha256", "sha512"]

#: Tink's ``HashType`` enum (common.proto) for the hashes its streaming AEADs accept.
_HASH_ENUM: dict[int, TinkHash] = {1: "sha1", 3: "sha256", 4: "sha512"}
_HASH_TO_ENUM: dict[str, int] = {v: k for k, v in _HASH_ENUM.items()}
_DIGEST_SIZE: dict[str, int] = {"sha1": 20, "sha256": 32, "sha512": 64}


def _check_hash(name: str, what: str) -> TinkHash:
    if name not in _DIGEST_SIZE:
        raise UnsupportedFormatError(
            f"unsupported {what} {name!r}; Tink streaming AEAD uses sha1, sha256 or sha512"
        )
    return cast(TinkHash, name)


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
class TinkStreamingKey(HoldsSecrets):
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
class TinkKeyset(HoldsSecrets):
    """The enabled streaming AEAD keys of a Tink keyset and which one is primary.

    Encryption uses the primary key; decryption tries every key in keyset order, because
    Tink streaming ciphertexts carry no key id.
    """

    keys: tuple[TinkStreamingKey, ...]
    primary_key_id: int

    _pickle_advice: ClassVar[str] = "store it with to_json() where keysets belong"

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


# ------------------------------------------------------------------------- the schema
#
# One table describes the messages for both readers: field number, .proto name,
# lowerCamelCase JSON name, kind, and the enum or message type where there is one.

_UINT32, _ENUM, _STRING, _BYTES, _MESSAGE, _REPEATED = range(6)
#: The wire type each kind is sent with (anything else is an unknown field).
_WIRE = {_UINT32: 0, _ENUM: 0, _STRING: 2, _BYTES: 2, _MESSAGE: 2, _REPEATED: 2}


@dataclass(frozen=True, slots=True)
class _Field:
    number: int
    name: str
    json_name: str
    kind: int
    enum: Mapping[str, int] | None = None
    message: str = ""


_STATUS = {"UNKNOWN_STATUS": 0, "ENABLED": 1, "DISABLED": 2, "DESTROYED": 3}
_PREFIX = {
    "UNKNOWN_PREFIX": 0,
    "TINK": 1,
    "LEGACY": 2,
    "RAW": 3,
    "CRUNCHY": 4,
    "WITH_ID_REQUIREMENT": 5,
}
_MATERIAL = {
    "UNKNOWN_KEYMATERIAL": 0,
    "SYMMETRIC": 1,
    "ASYMMETRIC_PRIVATE": 2,
    "ASYMMETRIC_PUBLIC": 3,
    "REMOTE": 4,
}
_HASH_NAMES = {"UNKNOWN_HASH": 0, "SHA1": 1, "SHA384": 2, "SHA256": 3, "SHA512": 4, "SHA224": 5}

_SCHEMA: dict[str, tuple[_Field, ...]] = {
    "Keyset": (
        _Field(1, "primary_key_id", "primaryKeyId", _UINT32),
        _Field(2, "key", "key", _REPEATED, message="Key"),
    ),
    "Key": (
        _Field(1, "key_data", "keyData", _MESSAGE, message="KeyData"),
        _Field(2, "status", "status", _ENUM, _STATUS),
        _Field(3, "key_id", "keyId", _UINT32),
        _Field(4, "output_prefix_type", "outputPrefixType", _ENUM, _PREFIX),
    ),
    "KeyData": (
        _Field(1, "type_url", "typeUrl", _STRING),
        _Field(2, "value", "value", _BYTES),
        _Field(3, "key_material_type", "keyMaterialType", _ENUM, _MATERIAL),
    ),
    # The two streaming keys share field numbers; hmac_params is only in the CTR one.
    "StreamingKey": (
        _Field(1, "version", "version", _UINT32),
        _Field(2, "params", "params", _MESSAGE, message="StreamingParams"),
        _Field(3, "key_value", "keyValue", _BYTES),
    ),
    "StreamingParams": (
        _Field(1, "ciphertext_segment_size", "ciphertextSegmentSize", _UINT32),
        _Field(2, "derived_key_size", "derivedKeySize", _UINT32),
        _Field(3, "hkdf_hash_type", "hkdfHashType", _ENUM, _HASH_NAMES),
        _Field(4, "hmac_params", "hmacParams", _MESSAGE, message="HmacParams"),
    ),
    "HmacParams": (
        _Field(1, "hash", "hash", _ENUM, _HASH_NAMES),
        _Field(2, "tag_size", "tagSize", _UINT32),
    ),
}
_BY_NUMBER = {name: {f.number: f for f in fields} for name, fields in _SCHEMA.items()}

#: A parsed message: field name -> int, str, bytes, message or list of messages.
_Message = dict[str, Any]


# ------------------------------------------------------------------ protobuf wire format

#: upb's default nesting limit: messages and groups together, the top level counting 1.
_MAX_DEPTH = 100


def _read_varint(data: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """A varint of at most ``max_bytes`` bytes at ``pos``; bits past 64 are dropped."""
    value = 0
    for i in range(max_bytes):
        if pos + i >= len(data):
            raise FormatError("malformed protobuf in the keyset (truncated varint)")
        byte = data[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value & 0xFFFF_FFFF_FFFF_FFFF, pos + i + 1
    raise FormatError("malformed protobuf in the keyset (varint too long)")


def _read_field(data: bytes, pos: int) -> tuple[int, int, int | bytes | None, int]:
    """One field at ``pos``: (number, wire type, value, next position).

    The value is an int (wire 0), bytes (wire 2) or None (wire 1, 5, and the group
    markers 3 and 4, which the caller pairs up).
    """
    tag, pos = _read_varint(data, pos, 5)
    tag &= 0xFFFF_FFFF  # as tink's C++ parser reads a tag: bits of a fifth byte past 32 drop
    number, wire = tag >> 3, tag & 7
    if number == 0:
        raise FormatError("malformed protobuf in the keyset (bad field tag)")
    if wire == 0:
        value, pos = _read_varint(data, pos, 10)
        return number, wire, value, pos
    if wire == 2:
        size, pos = _read_varint(data, pos, 5)
        if size > len(data) - pos:
            raise FormatError("malformed protobuf in the keyset (truncated field)")
        return number, wire, data[pos : pos + size], pos + size
    if wire in (1, 5):
        pos += 8 if wire == 1 else 4
        if pos > len(data):
            raise FormatError("malformed protobuf in the keyset (truncated field)")
        return number, wire, None, pos
    if wire in (3, 4):
        return number, wire, None, pos
    raise FormatError(f"malformed protobuf in the keyset (wire type {wire})")


def _skip_group(data: bytes, pos: int, number: int, depth: int) -> int:
    """Skip an unknown group opened with field ``number``; return the position after it."""
    open_groups = [number]
    while open_groups:
        if depth + len(open_groups) > _MAX_DEPTH:
            raise FormatError("malformed protobuf in the keyset (nested too deeply)")
        if pos >= len(data):
            raise FormatError("malformed protobuf in the keyset (unterminated group)")
        inner, wire, _, pos = _read_field(data, pos)
        if wire == 3:
            open_groups.append(inner)
        elif wire == 4:
            if open_groups.pop() != inner:
                raise FormatError("malformed protobuf in the keyset (mismatched group end)")
    return pos


def _to_int32(value: int) -> int:
    """An enum value as protobuf stores it, read from a varint or a JSON number: the low
    32 bits, signed."""
    value &= 0xFFFF_FFFF
    return value - (1 << 32) if value >> 31 else value


def _decode(data: bytes, message: str, into: _Message, depth: int = 0) -> None:
    """Parse one serialized ``message`` into ``into``, merging as protobuf does.

    ``depth`` counts the messages around this one (0 at the top).
    """
    fields = _BY_NUMBER[message]
    pos = 0
    while pos < len(data):
        number, wire, value, pos = _read_field(data, pos)
        if wire == 4:
            raise FormatError("malformed protobuf in the keyset (group end without start)")
        if wire == 3:
            pos = _skip_group(data, pos, number, depth)
            continue
        spec = fields.get(number)
        if spec is None or _WIRE[spec.kind] != wire:
            continue  # an unknown field, or a known one sent with another wire type
        if spec.kind == _UINT32:
            into[spec.name] = cast(int, value) & 0xFFFF_FFFF
        elif spec.kind == _ENUM:
            into[spec.name] = _to_int32(cast(int, value))
        elif spec.kind == _BYTES:
            into[spec.name] = value
        elif spec.kind == _STRING:
            try:
                into[spec.name] = cast(bytes, value).decode("utf-8")
            except UnicodeDecodeError:
                raise FormatError(f"{message}.{spec.name} in the keyset is not UTF-8") from None
        else:
            if depth + 1 > _MAX_DEPTH:
                raise FormatError("malformed protobuf in the keyset (nested too deeply)")
            sub: _Message = {} if spec.kind == _REPEATED else into.setdefault(spec.name, {})
            _decode(cast(bytes, value), spec.message, sub, depth + 1)
            if spec.kind == _REPEATED:
                into.setdefault(spec.name, []).append(sub)


# ------------------------------------------------------------ protobuf JSON mapping

_LONE_SURROGATE = re.compile(
    "[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]"
)


def _json_int(value: Any) -> int:
    """An integer as protobuf's JSON reader takes it: a number with an integral value, or
    a string of one (Python's ``int()`` / ``float()`` syntax, no spaces)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("not an integer")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError("not an integer")
    if isinstance(value, str) and " " in value:
        raise ValueError("not an integer")
    try:
        return int(value)
    except ValueError:
        number = float(value)  # "1e3" and "2.0" are integers too
        if not number.is_integer():
            raise ValueError("not an integer") from None
        return int(number)


def _json_enum(value: Any, names: Mapping[str, int]) -> int:
    """An enum value by name, else by number (numbers Tink does not name are kept)."""
    if isinstance(value, str) and value in names:
        return names[value]
    if isinstance(value, list | dict):
        raise ValueError("not an enum value")
    return int(value)


def _json_scalar(spec: _Field, value: Any) -> int | str | bytes:
    if spec.kind == _UINT32:
        number = _json_int(value)
        if not 0 <= number <= 0xFFFF_FFFF:
            raise ValueError(f"{number} is out of range for uint32")
        return number
    if spec.kind == _ENUM:
        names = cast(Mapping[str, int], spec.enum)
        number = _json_enum(value, names)
        # protobuf looks a number up among the enum's values as an int64 cut to 32 bits,
        # and keeps one it does not find only if it fits an int32
        if -(1 << 63) <= number < 1 << 63 and _to_int32(number) in names.values():
            return _to_int32(number)
        if not -(1 << 31) <= number < 1 << 31:
            raise ValueError(f"{number} is out of range for an enum")
        return number
    if not isinstance(value, str):
        raise ValueError("not a string")
    if spec.kind == _STRING:
        if _LONE_SURROGATE.search(value):
            raise ValueError("a lone surrogate")
        return value
    encoded = value.encode("utf-8")
    return base64.urlsafe_b64decode(encoded + b"=" * (4 - len(encoded) % 4))


def _from_json(doc: Any, message: str, into: _Message) -> None:
    """Fill ``into`` from the JSON value ``doc`` of one ``message``.

    As protobuf's reader does, an empty list or string stands for an empty message.
    """
    if isinstance(doc, list | str) and not doc:
        return
    if not isinstance(doc, dict):
        raise ValueError(f"{message} must be a JSON object")
    by_name: dict[str, _Field] = {}
    for known in _SCHEMA[message]:
        by_name[known.json_name] = by_name[known.name] = known
    for name, value in doc.items():
        spec = by_name.get(name)
        if spec is None:
            raise ValueError(f"{message} has no field {name[:40]!r}")
        if value is None:
            into.pop(spec.name, None)
        elif spec.kind == _MESSAGE:
            _from_json(value, spec.message, into.setdefault(spec.name, {}))
        elif spec.kind == _REPEATED:
            if not isinstance(value, list):
                raise ValueError(f"{message}.{name} must be a JSON array")
            items: list[_Message] = []
            for item in value:
                if item is None:
                    raise ValueError(f"{message}.{name} holds a null")
                items.append({})
                _from_json(item, spec.message, items[-1])
            into[spec.name] = items
        else:
            into[spec.name] = _json_scalar(spec, value)


# ----------------------------------------------------------------------- the readers


def keyset_from_json(text: str | Buffer) -> TinkKeyset:
    """Read a cleartext Tink keyset in JSON (what ``tink.JsonKeysetReader`` reads).

    Raises as :func:`load_keyset`.
    """
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError("a JSON keyset must be UTF-8") from None
    doc = load_json(text, "Tink JSON keyset")
    keyset: _Message = {}
    try:
        _from_json(doc, "Keyset", keyset)
    except (ValueError, OverflowError) as exc:  # binascii.Error is a ValueError
        raise FormatError(f"not a Tink JSON keyset: {str(exc)[:200]}") from None
    return _keyset(keyset)


def keyset_from_binary(data: Buffer) -> TinkKeyset:
    """Read a cleartext Tink keyset in binary (what ``tink.BinaryKeysetReader`` reads).

    Raises as :func:`load_keyset`.
    """
    raw = as_bytes(data, "data")
    if not raw:
        raise FormatError("the binary keyset is empty")
    keyset: _Message = {}
    _decode(raw, "Keyset", keyset)
    return _keyset(keyset)


def load_keyset(data: str | Buffer) -> TinkKeyset:
    """Read a cleartext Tink keyset: the JSON form (``str`` or bytes starting with ``{``) or
    the binary ``Keyset`` protobuf, accepting exactly what ``tink`` accepts.

    Only ENABLED keys are kept. Raises :class:`FormatError` for a malformed keyset or one
    Tink refuses, :class:`UnsupportedFormatError` for an enabled key that is not a
    streaming AEAD key (or uses a hash Tink does not allow here),
    :class:`InvalidKeySizeError` / :class:`InvalidParameterError` for bad key values or
    parameters.
    """
    if isinstance(data, str):
        return keyset_from_json(data)
    raw = as_bytes(data, "data")
    if raw.lstrip()[:1] == b"{":
        return keyset_from_json(raw)
    return keyset_from_binary(raw)


def _keyset(keyset: _Message) -> TinkKeyset:
    """Apply Tink's keyset rules and build the enabled streaming keys."""
    enabled, destroyed = _STATUS["ENABLED"], _STATUS["DESTROYED"]
    primary = keyset.get("primary_key_id", 0)
    entries: list[_Message] = keyset.get("key", [])
    for entry in entries:
        key_id = entry.get("key_id", 0)
        if entry.get("status", 0) == destroyed:
            continue
        if "key_data" not in entry:
            raise FormatError(f"keyset key {key_id} has no key data")
        if entry.get("output_prefix_type", 0) == 0:
            raise FormatError(f"keyset key {key_id} has no (or an unknown) output prefix type")
        if entry.get("status", 0) == 0:
            raise FormatError(f"keyset key {key_id} has no (or an unknown) status")
    if all(entry.get("status", 0) == destroyed for entry in entries):
        raise FormatError("the keyset holds no key that is not destroyed")
    primaries = [
        e for e in entries if e.get("status", 0) == enabled and e.get("key_id", 0) == primary
    ]
    if len(primaries) > 1:
        raise FormatError(f"the keyset has {len(primaries)} enabled keys with the primary id")
    public = _MATERIAL["ASYMMETRIC_PUBLIC"]
    if not primaries and any(
        e.get("key_data", {}).get("key_material_type", 0) != public for e in entries
    ):
        raise FormatError(f"the keyset's primary key id {primary} names no enabled key")
    keys = []
    for entry in entries:
        if entry.get("status", 0) != enabled:
            continue
        key_id = entry.get("key_id", 0)
        prefix = entry.get("output_prefix_type", 0)
        if prefix not in (_PREFIX["TINK"], _PREFIX["LEGACY"], _PREFIX["RAW"], _PREFIX["CRUNCHY"]):
            raise FormatError(f"keyset key {key_id} has output prefix type {prefix}, unusable")
        data = entry["key_data"]
        keys.append(_streaming_key(data.get("type_url", ""), data.get("value", b""), key_id))
    if not keys:
        raise FormatError("the keyset holds no enabled key")
    return TinkKeyset(tuple(keys), primary)


def _hash_from_enum(value: int, what: str) -> TinkHash:
    try:
        return _HASH_ENUM[value]
    except KeyError:
        name = next((k for k, v in _HASH_NAMES.items() if v == value), str(value))
        raise UnsupportedFormatError(
            f"{what} {name} is not supported by Tink streaming AEAD (SHA1, SHA256, SHA512)"
        ) from None


def _streaming_key(type_url: str, value: bytes, key_id: int) -> TinkStreamingKey:
    """Parse a serialized ``AesGcmHkdfStreamingKey`` / ``AesCtrHmacStreamingKey``."""
    if type_url not in (AES_GCM_HKDF_TYPE_URL, AES_CTR_HMAC_TYPE_URL):
        raise UnsupportedFormatError(
            f"keyset key {key_id} has type {type_url[:100]!r}, not a Tink streaming AEAD key"
        )
    key: _Message = {}
    _decode(value, "StreamingKey", key)
    version = key.get("version", 0)
    if version != 0:
        raise UnsupportedFormatError(f"keyset key {key_id} has version {version}; this reads 0")
    p = key.get("params", {})
    segment = p.get("ciphertext_segment_size", 0)
    derived = p.get("derived_key_size", 0)
    hkdf_hash = _hash_from_enum(p.get("hkdf_hash_type", 0), "HKDF hash")
    params: TinkStreamingParams
    if type_url == AES_GCM_HKDF_TYPE_URL:
        params = AesGcmHkdfStreamingParams(derived, segment, hkdf_hash)
    else:
        hp = p.get("hmac_params", {})
        hmac_hash = _hash_from_enum(hp.get("hash", 0), "HMAC hash")
        params = AesCtrHmacStreamingParams(
            derived, segment, hkdf_hash, hmac_hash, hp.get("tag_size", 0)
        )
    return TinkStreamingKey.raw(key.get("key_value", b""), params, key_id=key_id)


# ------------------------------------------------------------------- protobuf writing


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
