"""Layer 0: errors, secret keys, key rings, HKDF basics."""

from __future__ import annotations

import pickle

import pytest

from streamcrypt import errors
from streamcrypt.keys import (
    KeyRing,
    SecretKey,
    as_secret_key,
    constant_time_equal,
    hkdf,
    hkdf_expand,
    key_bytes,
    random_bytes,
    wipe,
)


def test_error_hierarchy_mixes_in_builtin_bases() -> None:
    assert issubclass(errors.InvalidKeySizeError, ValueError)
    assert issubclass(errors.UnknownKeyError, KeyError)
    assert issubclass(errors.LimitExceededError, OverflowError)
    assert issubclass(errors.AlreadyFinalizedError, RuntimeError)
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.StreamCryptError)
        assert isinstance(cls.http_status, int)
    assert errors.LimitExceededError.http_status == 413
    assert errors.UnsupportedFormatError.http_status == 415
    assert errors.AuthenticationError.http_status == 400


def test_unknown_key_error_message_is_not_quoted() -> None:
    assert str(errors.UnknownKeyError("no key k1")) == "no key k1"


def test_secret_key_never_shows_its_bytes() -> None:
    material = bytes(range(32))
    key = SecretKey(material, key_id="k1")
    for text in (repr(key), str(key), f"{key}", repr([key])):
        assert material.hex() not in text
        assert repr(material) not in text
        assert "k1" in repr(key)
    with pytest.raises(TypeError):
        pickle.dumps(key)
    assert key.secret_bytes() == material


def test_secret_key_compare_and_wipe() -> None:
    a = SecretKey(b"\x01" * 32)
    assert a == SecretKey(b"\x01" * 32)
    assert a != SecretKey(b"\x02" * 32)
    wipe(a)
    assert len(a) == 0
    buf = bytearray(b"secret")
    wipe(buf)
    assert buf == bytearray(6)
    with pytest.raises(errors.InvalidParameterError):
        wipe(memoryview(b"readonly"))


def test_as_secret_key_checks_size() -> None:
    with pytest.raises(errors.InvalidKeySizeError, match="32 bytes, got 16"):
        as_secret_key(bytes(16))
    with pytest.raises(errors.InvalidKeySizeError):
        as_secret_key(b"")
    assert len(as_secret_key(bytes(16), 16)) == 16


def test_key_bytes_gives_the_raw_bytes_of_a_key_of_an_allowed_size() -> None:
    """The one check the primitives' key arguments go through: type, then sizes."""
    assert key_bytes(SecretKey(b"k" * 24), "an AES key", (16, 24, 32)) == b"k" * 24
    assert key_bytes(bytearray(3)) == bytes(3)  # no sizes: the caller checks the length
    with pytest.raises(
        errors.InvalidKeySizeError, match="an AES key must be 16, 24 or 32 bytes, got 20"
    ):
        key_bytes(bytes(20), "an AES key", (16, 24, 32))
    with pytest.raises(errors.InvalidKeySizeError, match="a seed must be 32 bytes, got 31"):
        key_bytes(bytes(31), "a seed", 32)
    with pytest.raises(errors.InvalidParameterError, match="a seed must be bytes-like"):
        key_bytes("0" * 32, "a seed", 32)  # type: ignore[arg-type]
    wiped = SecretKey(bytes(32))
    wiped.wipe()  # its material is empty now; a SecretKey is never made empty
    with pytest.raises(errors.InvalidKeySizeError, match="a seed was wiped"):
        key_bytes(wiped, "a seed")


def test_random_and_constant_time() -> None:
    assert len(random_bytes(33)) == 33
    assert random_bytes(16) != random_bytes(16)
    assert constant_time_equal(b"abc", bytearray(b"abc"))
    assert not constant_time_equal(b"abc", b"abd")


def test_keyring_rotation_keeps_old_keys() -> None:
    ring = KeyRing()
    with pytest.raises(errors.UnknownKeyError):
        _ = ring.active
    first = ring.rotate()
    second = ring.rotate()
    assert ring.active is second
    assert ring.get(first.key_id) is first
    assert first.key_id in ring and len(ring) == 2
    with pytest.raises(errors.UnknownKeyError, match="nope"):
        ring.get("nope")
    with pytest.raises(errors.InvalidParameterError):
        ring.remove(second.key_id)
    assert ring.remove(first.key_id) is first
    assert first.secret_bytes().hex() not in repr(ring)


def test_hkdf_rfc5869_case1_and_limits() -> None:
    # RFC 5869 appendix A.1
    okm = hkdf(
        bytes.fromhex("0b" * 22),
        salt=bytes.fromhex("000102030405060708090a0b0c"),
        info=bytes.fromhex("f0f1f2f3f4f5f6f7f8f9"),
        length=42,
    )
    assert okm.hex() == (
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    )
    with pytest.raises(errors.InvalidParameterError, match=r"1\.\.8160"):
        hkdf_expand(bytes(32), b"", 255 * 32 + 1)
    with pytest.raises(errors.InvalidParameterError):
        hkdf(b"k", algorithm="md5")  # type: ignore[arg-type]
