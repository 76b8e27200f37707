"""KeyRing: rotation, password-encrypted JSON serialization, constant-time find, bad input."""

from __future__ import annotations

import base64
import json

import pytest

import streamcrypt
from streamcrypt.codecs import FORMATS
from streamcrypt.codecs.container import StreamDecryptor, StreamEncryptor
from streamcrypt.errors import (
    AuthenticationError,
    FormatError,
    InvalidKeySizeError,
    InvalidParameterError,
    LimitExceededError,
    UnknownKeyError,
    UnsupportedFormatError,
)
from streamcrypt.keys import Argon2Params, KeyRing, ScryptParams, SecretKey

FAST = Argon2Params(1, 8192)


def _enc(ring: KeyRing, data: bytes) -> bytes:
    enc = StreamEncryptor(ring)
    return enc.update(data) + enc.finalize()


def _dec(ring: KeyRing, blob: bytes) -> bytes:
    dec = StreamDecryptor(ring)
    return dec.update(blob) + dec.finalize()


def _ring() -> KeyRing:
    return KeyRing([SecretKey.generate(key_id="v1"), SecretKey.generate(16, key_id="small")])


def test_existing_api_still_works() -> None:
    ring = KeyRing()
    with pytest.raises(UnknownKeyError):
        ring.active  # noqa: B018
    k1 = SecretKey.generate(key_id="a")
    ring.add(k1)
    assert ring.active is k1 and ring.active_id == "a"
    new = ring.rotate()
    assert ring.active is new and len(ring) == 2 and "a" in ring
    with pytest.raises(InvalidParameterError):
        ring.remove(new.key_id)
    assert ring.remove("a") is k1
    with pytest.raises(UnknownKeyError):
        ring.get("a")
    with pytest.raises(InvalidParameterError):
        ring.add(SecretKey.generate())  # no id
    with pytest.raises(InvalidParameterError):
        ring.add(b"raw" * 11)  # type: ignore[arg-type]


def test_rotation_without_reencrypting_old_data() -> None:
    ring = KeyRing([SecretKey.generate(key_id="v1")])
    old = _enc(ring, b"written under v1" * 100)
    v2 = ring.rotate()
    new = _enc(ring, b"written under v2")
    text = ring.to_json("s3cret", params=FAST)
    loaded = KeyRing.from_json(text, "s3cret")
    assert loaded.ids() == ["v1", v2.key_id] and loaded.active_id == v2.key_id
    assert _dec(loaded, old) == b"written under v1" * 100
    assert _dec(loaded, new) == b"written under v2"
    # New data from the loaded ring goes under v2 and the original ring reads it.
    assert _dec(ring, _enc(loaded, b"again")) == b"again"


def test_round_trip_keeps_sizes_active_and_bytes() -> None:
    ring = _ring()
    ring.activate("v1")
    for params in (FAST, ScryptParams(16, 1, 1)):
        loaded = KeyRing.from_json(ring.to_json(b"pw", params=params), b"pw")
        assert loaded.active_id == "v1"
        assert [len(k) for k in loaded] == [32, 16]
        assert all(a == b for a, b in zip(ring, loaded, strict=True))
    empty = KeyRing.from_json(KeyRing().to_json("pw", params=FAST), "pw")
    assert len(empty) == 0 and empty.active_id is None


def test_serialized_form_hides_secrets() -> None:
    ring = _ring()
    text = ring.to_json("pw", params=FAST)
    doc = json.loads(text)
    assert doc["kdf"]["alg"] == "argon2id" and doc["kdf"]["ops"] == 1
    assert doc["kdf"]["mem"] == 8192 and doc["cipher"] == "chacha20-poly1305"
    for key in ring:
        assert key.secret_bytes().hex() not in text
        assert key.secret_bytes().hex() not in repr(ring)
    assert repr(ring) == "KeyRing(ids=['v1', 'small'], active='small')"
    assert str(ring) == repr(ring)


def test_refuses_clear_serialization_unless_asked() -> None:
    ring = _ring()
    with pytest.raises(InvalidParameterError):
        ring.to_json()
    with pytest.raises(InvalidParameterError):
        ring.to_json("pw", insecure_plaintext=True)
    clear = ring.to_json(insecure_plaintext=True)
    assert json.loads(clear)["kdf"] is None
    # Loading a clear ring also needs the explicit flag, and never with a password
    # (a clear ring swapped in for an encrypted one must not be trusted).
    with pytest.raises(AuthenticationError):
        KeyRing.from_json(clear)
    with pytest.raises(AuthenticationError):
        KeyRing.from_json(clear, "pw", insecure_plaintext=True)
    loaded = KeyRing.from_json(clear, insecure_plaintext=True)
    assert [k.secret_bytes() for k in loaded] == [k.secret_bytes() for k in ring]


def test_wrong_password() -> None:
    text = _ring().to_json("right", params=FAST)
    with pytest.raises(AuthenticationError):
        KeyRing.from_json(text, "wrong")
    with pytest.raises(InvalidParameterError):
        KeyRing.from_json(text)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("active", "v1"),
        ("keys", [{"id": "small", "size": 16}, {"id": "v1", "size": 32}]),
        ("keys", [{"id": "v1", "size": 32}, {"id": "renamed", "size": 16}]),
        ("keys", [{"id": "v1", "size": 16}, {"id": "small", "size": 32}]),
        ("nonce", "AAAAAAAAAAAAAAAA"),
    ],
)
def test_tampered_metadata_fails_authentication(field: str, value: object) -> None:
    doc = json.loads(_ring().to_json("pw", params=FAST))
    doc[field] = value
    with pytest.raises(AuthenticationError):
        KeyRing.from_json(json.dumps(doc), "pw")


def test_tampered_secrets_and_kdf() -> None:
    doc = json.loads(_ring().to_json("pw", params=FAST))
    sealed = bytearray(base64.b64decode(doc["secrets"]))
    sealed[3] ^= 1
    bad = dict(doc, secrets=base64.b64encode(bytes(sealed)).decode())
    with pytest.raises(AuthenticationError):
        KeyRing.from_json(json.dumps(bad), "pw")
    # Other KDF parameters derive another key: authentication fails.
    bad = dict(doc, kdf=dict(doc["kdf"], ops=2))
    with pytest.raises(AuthenticationError):
        KeyRing.from_json(json.dumps(bad), "pw")
    truncated = dict(doc, secrets=doc["secrets"][:-8])
    with pytest.raises((AuthenticationError, FormatError)):
        KeyRing.from_json(json.dumps(truncated), "pw")


def test_hostile_kdf_parameters_are_refused_before_work() -> None:
    doc = json.loads(_ring().to_json("pw", params=FAST))
    doc["kdf"]["mem"] = 64 << 30  # 64 GiB
    with pytest.raises(LimitExceededError):
        KeyRing.from_json(json.dumps(doc), "pw")
    doc["kdf"]["mem"] = 8192
    doc["kdf"]["ops"] = 1 << 31
    with pytest.raises(LimitExceededError):
        KeyRing.from_json(json.dumps(doc), "pw")
    doc["kdf"]["ops"] = 2
    with pytest.raises(LimitExceededError):
        KeyRing.from_json(json.dumps(doc), "pw", max_params=FAST)
    sdoc = json.loads(_ring().to_json("pw", params=ScryptParams(16, 1, 1)))
    sdoc["kdf"]["n"] = 1 << 30
    with pytest.raises(FormatError, match="below 2"):  # RFC 7914: n < 2**(16 r) = 2**16
        KeyRing.from_json(json.dumps(sdoc), "pw")
    sdoc["kdf"]["r"] = 8
    with pytest.raises(LimitExceededError):
        KeyRing.from_json(json.dumps(sdoc), "pw")
    # Passes an estimate of 128 r (n + p) (1 GiB - 1 KiB); OpenSSL would take 2 GiB.
    sdoc["kdf"].update(n=2, r=2796202, p=1)
    with pytest.raises(LimitExceededError):
        KeyRing.from_json(json.dumps(sdoc), "pw")


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        "{}",
        '{"streamcrypt_keyring": 1}',
        '{"streamcrypt_keyring": 1, "keys": [{"id": 1, "size": 32}]}',
        '{"streamcrypt_keyring": 1, "keys": [], "active": null, "kdf": {"alg": "argon2id"},'
        ' "cipher": "chacha20-poly1305", "nonce": "", "secrets": ""}',
        '{"streamcrypt_keyring": 1, "keys": [], "active": null, "kdf": {"alg": "argon2id",'
        ' "ops": 0, "mem": 8192, "salt": "AAAAAAAAAAAAAAAAAAAAAA=="},'
        ' "cipher": "chacha20-poly1305", "nonce": "", "secrets": ""}',
        '{"streamcrypt_keyring": 1, "keys": [], "active": null, "kdf": {"alg": "argon2id",'
        ' "ops": 1, "mem": 8192, "salt": "not base64!"},'
        ' "cipher": "chacha20-poly1305", "nonce": "", "secrets": ""}',
    ],
)
def test_malformed_json(text: str) -> None:
    with pytest.raises(FormatError):
        KeyRing.from_json(text, "pw")


_KDF_LIST_ALG = (
    '{"streamcrypt_keyring": 1, "keys": [], "active": null, "kdf": {"alg": []},'
    ' "cipher": "chacha20-poly1305", "nonce": "", "secrets": ""}'
)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 979,  # RecursionError inside json under pytest's stack
        "[" * 100_000 + "]" * 100_000,  # RecursionError at any stack depth
        '{"a":' * 50_000 + "1" + "}" * 50_000,
        _KDF_LIST_ALG,  # TypeError: unhashable type: 'list'
        '{"streamcrypt_keyring": 1, "streamcrypt_keyring": 1}',  # a member twice
    ],
)
def test_hostile_json_gives_format_errors(text: str) -> None:
    """Regressions from issue 14: each of these escaped as an untyped exception."""
    with pytest.raises(FormatError):
        KeyRing.from_json(text, "pw")
    with pytest.raises(FormatError):
        KeyRing.from_json(text.encode(), b"pw")


@pytest.mark.parametrize("key_id", ["\ud800", "a\udfffb"])
def test_lone_surrogate_key_id_is_a_format_error(key_id: str) -> None:
    """A clear ring naming a key ``"\ud800"`` gave UnicodeEncodeError (issue 14)."""
    doc = json.loads(_ring().to_json(insecure_plaintext=True))
    doc["keys"][0]["id"] = key_id
    text = json.dumps(doc)
    assert "\\ud" in text  # JSON escapes: the text itself is plain ASCII
    with pytest.raises(FormatError, match="surrogate"):
        KeyRing.from_json(text, insecure_plaintext=True)


def test_unsupported_versions() -> None:
    doc = json.loads(_ring().to_json("pw", params=FAST))
    with pytest.raises(UnsupportedFormatError):
        KeyRing.from_json(json.dumps(dict(doc, streamcrypt_keyring=2)), "pw")
    with pytest.raises(UnsupportedFormatError):
        KeyRing.from_json(json.dumps(dict(doc, kdf=dict(doc["kdf"], alg="pbkdf2"))), "pw")
    with pytest.raises(UnsupportedFormatError):
        KeyRing.from_json(json.dumps(dict(doc, cipher="rot13")), "pw")


def test_find_is_by_material() -> None:
    ring = _ring()
    v1 = ring.get("v1")
    assert ring.find(v1) == "v1"
    assert ring.find(v1.secret_bytes()) == "v1"
    assert ring.find(bytes(32)) is None
    assert ring.find(b"") is None


def test_wipe() -> None:
    ring = _ring()
    key = ring.get("v1")
    ring.wipe()
    assert len(ring) == 0 and len(key) == 0
    with pytest.raises(UnknownKeyError):
        ring.active  # noqa: B018


# A ring's keys reach a format through the format's own key-size check: a key of the
# wrong size in a ring is refused as a bare key of that size is, never used.

WRONG_SIZES = (1, 8, 15, 16, 24, 31, 32, 33, 64)


def _sized_ring(size: int, key_id: str = "k") -> KeyRing:
    return KeyRing([SecretKey(bytes(range(1, size + 1)), key_id=key_id)])


def _ring_size(name: str) -> int | None:
    """The key size format ``name`` keys a ring with, or None if it takes no ring."""
    for size in (32, 16):
        try:
            streamcrypt.encrypt_bytes(b"x", _sized_ring(size), format=name)
        except InvalidParameterError:
            continue
        return size
    return None


def test_the_formats_that_take_a_ring() -> None:
    taking = {name: _ring_size(name) for name in FORMATS}
    assert {name: size for name, size in taking.items() if size} == {"native": 32, "ece": 16}


@pytest.mark.parametrize("name", ["native", "ece"])
def test_a_ring_key_of_the_wrong_size_is_refused_by_every_ring_format(name: str) -> None:
    good = _ring_size(name)
    assert good is not None
    sealed = streamcrypt.encrypt_bytes(b"secret", _sized_ring(good), format=name)
    for size in WRONG_SIZES:
        if size == good:
            continue
        ring = _sized_ring(size)
        with pytest.raises(InvalidKeySizeError, match=f"{good}"):
            streamcrypt.encrypt_bytes(b"secret", ring, format=name)
        with pytest.raises(InvalidKeySizeError, match=f"{good}"):
            streamcrypt.decrypt_bytes(sealed, ring, format=name)  # the same id, short key


def test_a_ring_of_16_byte_keys_gives_no_128_bit_container_key() -> None:
    """The README's HTTP ring (``ring.rotate(16)``) is refused by the native container."""
    ring = KeyRing()
    ring.rotate(16)
    with pytest.raises(InvalidKeySizeError, match="32 bytes, got 16"):
        StreamEncryptor(ring)
    ring.rotate()
    blob = _enc(ring, b"data")  # the 32-byte key, now active, encrypts
    assert _dec(ring, blob) == b"data"
