"""Tink keysets are read exactly as the ``tink`` package reads them (issue 14, finding 5).

Every case is a keyset Tink's own readers either accept or refuse
(``cleartext_keyset_handle.read`` then ``.primitive(StreamingAead)``); each table row
states the verdict, and the test checks it against tink *and* against us, so a row fails
if either side changes. A seeded mutation run then compares the two on random variants.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import random
from collections.abc import Callable
from typing import Any

import pytest
import tink
from tink import aead as tink_aead
from tink import cleartext_keyset_handle, secret_key_access, streaming_aead
from tink.proto import tink_pb2

import streamcrypt
from fuzz import _peers
from fuzz._harness import mutate
from streamcrypt.codecs import tink as T
from streamcrypt.codecs import tink_keyset as K
from streamcrypt.errors import FormatError, StreamCryptError

streaming_aead.register()
tink_aead.register()

TEMPLATES = streaming_aead.streaming_aead_key_templates


def _doc() -> dict[str, Any]:
    handle = tink.new_keyset_handle(TEMPLATES.AES128_GCM_HKDF_4KB)
    doc: dict[str, Any] = json.loads(
        tink.json_proto_keyset_format.serialize(handle, secret_key_access.TOKEN)
    )
    return doc


BASE = _doc()
PRIMARY = BASE["primaryKeyId"]


def tink_accepts_json(text: str) -> bool:
    return _peers.tink_keyset_json(text.encode())


def tink_accepts_binary(data: bytes) -> bool:
    return _peers.tink_keyset_binary(data)


def we_accept(read: Callable[[Any], T.TinkKeyset], data: Any) -> bool:
    try:
        read(data)
    except StreamCryptError:
        return False
    return True


def _with(change: Callable[[dict[str, Any]], object]) -> str:
    doc = copy.deepcopy(BASE)
    change(doc)
    return json.dumps(doc)


def _key(doc: dict[str, Any], i: int = 0) -> dict[str, Any]:
    key: dict[str, Any] = doc["key"][i]
    return key


def _second_key(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        extra = copy.deepcopy(_key(doc))
        extra.update(fields)
        doc["key"].append(extra)

    return change


_SPLICE = json.dumps(BASE)[1:]  # everything after the opening brace

JSON_CASES: dict[str, tuple[bool, str]] = {
    # what Tink accepts and the old reader refused
    "status as enum number": (True, _with(lambda d: _key(d).update(status=1))),
    "status as number string": (True, _with(lambda d: _key(d).update(status="1"))),
    "field names as in the .proto": (
        True,
        _with(lambda d: d.update(primary_key_id=d.pop("primaryKeyId"))),
    ),
    "key id as string": (True, _with(lambda d: _key(d).update(keyId=str(PRIMARY)))),
    "key id as 1.0e0 float": (True, _with(lambda d: _key(d).update(keyId=float(PRIMARY)))),
    "value in the URL-safe alphabet, unpadded": (
        True,
        _with(
            lambda d: _key(d)["keyData"].update(
                value=_key(d)["keyData"]["value"].translate(str.maketrans("+/", "-_")).rstrip("=")
            )
        ),
    ),
    "output prefix TINK": (True, _with(lambda d: _key(d).update(outputPrefixType="TINK"))),
    "output prefix LEGACY": (True, _with(lambda d: _key(d).update(outputPrefixType="LEGACY"))),
    "output prefix CRUNCHY": (True, _with(lambda d: _key(d).update(outputPrefixType="CRUNCHY"))),
    "a disabled key with the primary id": (True, _with(_second_key(status="DISABLED"))),
    "two enabled keys with the same other id": (
        True,
        _with(
            lambda d: (_second_key(keyId=7)(d), _second_key(keyId=7)(d)),
        ),
    ),
    "an unknown status number (not enabled)": (True, _with(_second_key(keyId=9, status=9))),
    "a disabled key of another type": (
        True,
        _with(
            _second_key(
                keyId=9,
                status="DISABLED",
                keyData={"typeUrl": "x", "value": "", "keyMaterialType": "SYMMETRIC"},
            )
        ),
    ),
    "a destroyed key without key data": (
        True,
        _with(lambda d: d["key"].append({"status": "DESTROYED", "keyId": 3})),
    ),
    "key data as an empty list, disabled": (
        True,
        _with(_second_key(keyId=9, status="DISABLED", keyData=[])),
    ),
    # what Tink refuses and the old reader accepted
    "an unknown member": (False, _with(lambda d: d.update(comment="hi"))),
    "a misspelled member": (False, _with(lambda d: d.update(primaryKeyID=d.pop("primaryKeyId")))),
    "an unknown member in a key": (False, _with(lambda d: _key(d).update(note=1))),
    "output prefix WITH_ID_REQUIREMENT": (
        False,
        _with(lambda d: _key(d).update(outputPrefixType="WITH_ID_REQUIREMENT")),
    ),
    "output prefix number 7": (False, _with(lambda d: _key(d).update(outputPrefixType=7))),
    "no output prefix": (False, _with(lambda d: _key(d).pop("outputPrefixType"))),
    "no status": (False, _with(lambda d: _key(d).pop("status"))),
    "an unknown status name": (False, _with(lambda d: _key(d).update(status="ON"))),
    "a member twice": (False, '{"primaryKeyId": 1, ' + _SPLICE),
    "a member twice in key data": (
        False,
        _with(lambda d: _key(d).update(keyData="@")).replace(
            '"keyData": "@"', '"keyData": {"value": "", "value": ""}'
        ),
    ),
    "key id 2**32": (False, _with(lambda d: _key(d).update(keyId=1 << 32))),
    "key id -1": (False, _with(lambda d: _key(d).update(keyId=-1))),
    "key id 1.5": (False, _with(lambda d: _key(d).update(keyId=1.5))),
    "key id with a space": (False, _with(lambda d: _key(d).update(keyId=f" {PRIMARY}"))),
    "two enabled keys with the primary id": (False, _with(_second_key())),
    "no primary key id": (False, _with(lambda d: d.pop("primaryKeyId"))),
    "no keys": (False, _with(lambda d: d.update(key=[]))),
    "a null key": (False, _with(lambda d: d["key"].append(None))),
    "an enabled key of another type": (
        False,
        _with(_second_key(keyId=9, keyData={"typeUrl": "x", "value": ""})),
    ),
    "a lone surrogate in a disabled key's type": (
        False,
        _with(_second_key(keyId=9, status="DISABLED", keyData={"typeUrl": "\ud800"})),
    ),
    "deep nesting (was RecursionError)": (False, '{"a":' + "[" * 5000),
    "top level is a list": (False, "[]"),
}
# Enum numbers outside int32 (issue 27 #13, found by a structure-aware differential fuzz):
# protobuf looks a number up as an int64 cut to 32 bits and keeps one it does not find only
# if it fits an int32.
JSON_ENUM_NUMBERS: dict[str, tuple[bool, str, Any]] = {
    "status 2**32 + 1: its low 32 bits name ENABLED": (True, "status", (1 << 32) + 1),
    "status '4294967297' as a string": (True, "status", str((1 << 32) + 1)),
    "status 2**40 + 1": (True, "status", (1 << 40) + 1),
    "status -(2**32) + 1": (True, "status", -(1 << 32) + 1),
    "status 2**63 - 2**32 + 1": (True, "status", (1 << 63) - (1 << 32) + 1),
    "status 4294967297.0 as a number": (True, "status", float((1 << 32) + 1)),
    "status '4294967297.0' as a string": (False, "status", "4294967297.0"),
    "status 2**31: no such value, not an int32": (False, "status", 1 << 31),
    "status 2**33 + 5: no value 5, not an int32": (False, "status", (1 << 33) + 5),
    "status 2**63 + 1: not an int64": (False, "status", (1 << 63) + 1),
    "status 2**64 + 1": (False, "status", (1 << 64) + 1),
    "output prefix 2**32 + 3 (RAW)": (True, "outputPrefixType", (1 << 32) + 3),
    "output prefix '4294967299'": (True, "outputPrefixType", "4294967299"),
    "key material 2**32 (UNKNOWN_KEYMATERIAL)": (True, "keyMaterialType", 1 << 32),
    "key material -2**63": (True, "keyMaterialType", -(1 << 63)),
    "key material 2**31 - 1 (unknown, kept)": (True, "keyMaterialType", (1 << 31) - 1),
    "key material -2**31 (unknown, kept)": (True, "keyMaterialType", -(1 << 31)),
    "key material 2**31": (False, "keyMaterialType", 1 << 31),
    "key material -2**31 - 1": (False, "keyMaterialType", -(1 << 31) - 1),
    "key material 2**32 + 2**31": (False, "keyMaterialType", (1 << 32) + (1 << 31)),
    "key material 2**63 - 1 (low bits -1, not an int32)": (
        False,
        "keyMaterialType",
        (1 << 63) - 1,
    ),
}


def _enum_number(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        (_key(doc)["keyData"] if field == "keyMaterialType" else _key(doc))[field] = value

    return change


for _name, (_ok, _field, _value) in JSON_ENUM_NUMBERS.items():
    JSON_CASES[_name] = (_ok, _with(_enum_number(_field, _value)))

# json.dumps cannot write 1e400 or Infinity: put them in by hand.
JSON_CASES["key id 1e400 (was OverflowError)"] = (
    False,
    _with(lambda d: _key(d).update(keyId="@")).replace('"keyId": "@"', '"keyId": 1e400'),
)
JSON_CASES["key id Infinity (was OverflowError)"] = (
    False,
    _with(lambda d: _key(d).update(keyId="@")).replace('"keyId": "@"', '"keyId": Infinity'),
)


def _key_value_with(extra: bytes) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        data = _key(doc)["keyData"]
        data["value"] = base64.b64encode(base64.b64decode(data["value"]) + extra).decode()

    return change


# An unknown field of the key whose tag takes five bytes and has bits past 32 (found by
# test_random_variants_get_tinks_verdict): tink's C++ parser drops them, so must we.
JSON_CASES["key field tag with bits past 32, wire type 5"] = (
    True,
    _with(_key_value_with(bytes.fromhex("bdfde6ff53") + bytes(4))),
)
JSON_CASES["key field tag of number 0 after dropping bits past 32"] = (
    False,
    _with(_key_value_with(bytes.fromhex("8580808010") + bytes(4))),
)


@pytest.mark.parametrize("name", list(JSON_CASES))
def test_json_keyset_verdict_matches_tink(name: str) -> None:
    expected, text = JSON_CASES[name]
    assert tink_accepts_json(text) is expected, "tink's verdict changed"
    assert we_accept(K.keyset_from_json, text) is expected
    assert we_accept(T.load_keyset, text) is expected
    assert we_accept(T.load_keyset, text.encode()) is expected


# ------------------------------------------------------------------------------- binary


def _varint(n: int) -> bytes:
    out = b""
    while n > 0x7F:
        out, n = out + bytes([n & 0x7F | 0x80]), n >> 7
    return out + bytes([n])


def _binary() -> bytes:
    data: bytes = tink_pb2.Keyset(
        primary_key_id=5,
        key=[
            tink_pb2.Keyset.Key(
                key_data=tink_pb2.KeyData(
                    type_url=K.AES_GCM_HKDF_TYPE_URL,
                    value=K.TinkStreamingKey.generate("AES128_GCM_HKDF_4KB").key_data_value(),
                    key_material_type=tink_pb2.KeyData.SYMMETRIC,
                ),
                status=tink_pb2.ENABLED,
                key_id=5,
                output_prefix_type=tink_pb2.RAW,
            )
        ],
    ).SerializeToString()
    return data


BIN = _binary()
KEY = tink_pb2.Keyset.FromString(BIN).key[0]
KEY_NO_URL = copy.deepcopy(KEY)
KEY_NO_URL.key_data.type_url = ""
#: key_data sent a second time, holding only the type URL: protobuf merges the two.
_URL = b"\x0a" + _varint(len(K.AES_GCM_HKDF_TYPE_URL) + 2) + b"\x0a"
_URL += _varint(len(K.AES_GCM_HKDF_TYPE_URL)) + K.AES_GCM_HKDF_TYPE_URL.encode()


def _keyset_of(*keys: bytes, primary: bytes = b"\x08\x05") -> bytes:
    return primary + b"".join(b"\x12" + _varint(len(k)) + k for k in keys)


def _key_bytes(key: tink_pb2.Keyset.Key, extra: bytes = b"") -> bytes:
    data: bytes = key.SerializeToString()
    return data + extra


def _key_value(extra: bytes) -> bytes:
    key = copy.deepcopy(KEY)
    key.key_data.value = key.key_data.value + extra
    return _keyset_of(_key_bytes(key))


BINARY_CASES: dict[str, tuple[bool, bytes]] = {
    "as tink writes it": (True, BIN),
    # accepted by Tink, refused by the old reader
    "primary id repeated as a length-delimited field": (True, BIN + b"\x0a\x01\x05"),
    "key id repeated as fixed32": (True, _keyset_of(_key_bytes(KEY, b"\x1d\x01\x02\x03\x04"))),
    "key id repeated as a string": (True, _keyset_of(_key_bytes(KEY, b"\x1a\x00"))),
    "an unknown group": (True, BIN + b"\x7b\x08\x01\x7c"),
    "key parameters repeated as a varint": (True, _key_value(b"\x10\x05")),
    "an unknown group in the key value": (True, _key_value(b"\x2b\x2c")),
    "status 2**32 + 1 (cut to 32 bits: ENABLED)": (
        True,
        _keyset_of(_key_bytes(KEY, b"\x10\x81\x80\x80\x80\x10")),
    ),
    "key id as a 10-byte varint": (
        True,
        _keyset_of(_key_bytes(KEY, b"\x18\x85" + b"\x80" * 8 + b"\x00")),
    ),
    "key data sent in two parts (merged)": (True, _keyset_of(_key_bytes(KEY_NO_URL, _URL))),
    "groups nested 99 deep inside a key": (
        True,
        _keyset_of(_key_bytes(KEY, b"\x2b" * 99 + b"\x2c" * 99)),
    ),
    # refused by Tink, accepted by the old reader
    "an empty input": (False, b""),
    "a trailing zero byte": (False, BIN + b"\x00"),
    "a trailing truncated varint": (False, BIN + b"\x08\x80"),
    "a trailing end-group": (False, BIN + b"\x0c"),
    "a tag of six bytes": (False, BIN + b"\x88\x80\x80\x80\x80\x00\x01"),
    "a varint of eleven bytes": (False, BIN + b"\x08" + b"\xff" * 10 + b"\x01"),
    "groups nested 101 deep": (False, BIN + b"\x2b" * 101 + b"\x2c" * 101),
    "groups nested 100 deep inside a key": (
        False,
        _keyset_of(_key_bytes(KEY, b"\x2b" * 100 + b"\x2c" * 100)),
    ),
    "a mismatched group end": (False, BIN + b"\x2b\x34"),
    "two enabled keys with the primary id": (False, _keyset_of(_key_bytes(KEY), _key_bytes(KEY))),
    "a key without status": (
        False,
        _keyset_of(_key_bytes(KEY), b"\x0a\x00\x18\x09\x20\x03"),
    ),
    "a type URL that is not UTF-8 in a disabled key": (
        False,
        _keyset_of(_key_bytes(KEY), b"\x0a\x03\x0a\x01\xff\x10\x02\x18\x09\x20\x03"),
    ),
    "a truncated key value": (False, _key_value(b"\x1a\x05")),
}


def test_merged_key_data_is_whole() -> None:
    parsed = tink_pb2.Keyset.FromString(BINARY_CASES["key data sent in two parts (merged)"][1])
    assert parsed.key[0].key_data.type_url == K.AES_GCM_HKDF_TYPE_URL
    assert parsed.key[0].key_data.value == KEY.key_data.value


@pytest.mark.parametrize("name", list(BINARY_CASES))
def test_binary_keyset_verdict_matches_tink(name: str) -> None:
    expected, data = BINARY_CASES[name]
    assert tink_accepts_binary(data) is expected, "tink's verdict changed"
    assert we_accept(K.keyset_from_binary, data) is expected
    if data.lstrip()[:1] != b"{":
        assert we_accept(T.load_keyset, data) is expected


class _Sink(io.BytesIO):
    """A BytesIO that keeps its bytes after tink's encrypting stream closes it."""

    data = b""

    def close(self) -> None:
        self.data = self.getvalue()
        super().close()


def test_tink_prefix_keys_decrypt_like_raw_ones() -> None:
    """Tink accepts TINK/LEGACY/CRUNCHY streaming keys and writes no prefix: nor do we."""
    for prefix in ("TINK", "LEGACY", "CRUNCHY"):
        text = _with(lambda d, p=prefix: _key(d).update(outputPrefixType=p))
        handle = cleartext_keyset_handle.read(tink.JsonKeysetReader(text))
        sink = _Sink()
        with handle.primitive(streaming_aead.StreamingAead).new_encrypting_stream(sink, b"ad") as s:
            s.write(b"hello " * 1000)
        assert (
            streamcrypt.decrypt_bytes(sink.data, K.load_keyset(text), aad=b"ad", format="tink")
            == b"hello " * 1000
        )


def test_errors_are_typed_and_name_no_key_material() -> None:
    secret = _key(BASE)["keyData"]["value"]
    for expected, text in JSON_CASES.values():
        if expected:
            continue
        with pytest.raises(FormatError) as info:
            K.keyset_from_json(text)
        assert secret not in str(info.value)


@pytest.mark.parametrize("seed", range(4))
def test_random_variants_get_tinks_verdict(seed: int) -> None:
    """Mutated JSON and binary keysets: tink and we agree on every one."""
    rng = random.Random(seed)
    seeds_json = [text for _, text in JSON_CASES.values()]
    seeds_bin = [data for _, data in BINARY_CASES.values() if data]
    for _ in range(300):
        data = mutate(rng.choice(seeds_bin), rng)
        if data and data.lstrip()[:1] != b"{":
            assert we_accept(K.keyset_from_binary, data) is tink_accepts_binary(data), data
        raw = mutate(rng.choice(seeds_json).encode(), rng)
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            continue
        assert we_accept(K.keyset_from_json, text) is tink_accepts_json(text), text


def test_a_keyset_without_an_enabled_key_is_the_one_deliberate_difference() -> None:
    """Tink reads a keyset with no ENABLED key when all its material is public (it then
    decrypts nothing); we refuse it, and the fuzz harness knows this difference by name."""

    def only_public_disabled(doc: dict[str, Any]) -> None:
        _key(doc)["status"] = "DISABLED"
        _key(doc)["keyData"]["keyMaterialType"] = "ASYMMETRIC_PUBLIC"

    text = _with(only_public_disabled)
    assert tink_accepts_json(text)
    assert not we_accept(K.keyset_from_json, text)
    found = _peers.deliberate("tink-keyset-json", text.encode(), False)
    assert found is not None and found.id == "tink-keyset-no-enabled-key"
    handle = tink.json_proto_keyset_format.parse(text, secret_key_access.TOKEN)
    binary = bytes(tink.proto_keyset_format.serialize(handle, secret_key_access.TOKEN))
    assert tink_accepts_binary(binary)
    assert not we_accept(K.keyset_from_binary, binary)
    found = _peers.deliberate("tink-keyset-binary", binary, False)
    assert found is not None and found.id == "tink-keyset-no-enabled-key"
    assert _peers.deliberate("tink-keyset-binary", BIN, False) is None  # an enabled key


def test_old_module_reexports_everything() -> None:
    for name in ("TinkKeyset", "TinkStreamingKey", "load_keyset", "TEMPLATES", "TinkHash"):
        assert getattr(T, name) is getattr(K, name)
