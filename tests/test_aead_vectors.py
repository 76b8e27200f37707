"""AEAD suites against Wycheproof (AES-GCM, ChaCha20-Poly1305, XChaCha20-Poly1305).

Every valid case must seal to exactly ``ct || tag`` (through ``seal`` and ``seal_into``)
and open back (through ``open`` and ``open_into``); every invalid case must be refused
with its typed error. AES-GCM cases whose IV OpenSSL takes natively are also run through
the Python-GHASH fallback, so the fallback is proven on the same vectors (counter wrap
included), not only on the odd IV lengths that need it.
"""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import algorithms
from support import record_vectors, wycheproof, wycheproof_cases

from streamcrypt.errors import (
    AuthenticationError,
    InvalidKeySizeError,
    InvalidNonceSizeError,
    InvalidParameterError,
    UnsupportedFormatError,
)
from streamcrypt.keys import SecretKey
from streamcrypt.primitives import (
    AES128GCM,
    AES256GCM,
    SUITES,
    Aead,
    AesGcm,
    ChaCha20Poly1305Suite,
    XChaCha20Poly1305,
    aead_suite,
)
from streamcrypt.primitives._aead import _GcmAnyIv


def _h(test: dict[str, Any], field: str) -> bytes:
    return bytes.fromhex(test[field])


def _check_valid(suite: Aead, iv: bytes, msg: bytes, aad: bytes, sealed: bytes) -> None:
    """seal / seal_into give exactly ``sealed``; open / open_into give ``msg`` back."""
    assert suite.seal(iv, msg, aad) == sealed
    out = bytearray(len(sealed))
    assert suite.seal_into(iv, memoryview(msg), memoryview(out), aad) == len(sealed)
    assert bytes(out) == sealed
    assert suite.open(iv, sealed, aad) == msg
    plain = bytearray(len(msg))
    assert suite.open_into(iv, memoryview(sealed), memoryview(plain), aad) == len(msg)
    assert bytes(plain) == msg


def _check_rejected(suite: Aead, iv: bytes, msg: bytes, aad: bytes, sealed: bytes) -> None:
    """A tampered case: open and open_into raise AuthenticationError."""
    with pytest.raises(AuthenticationError):
        suite.open(iv, sealed, aad)
    out = bytearray(len(sealed) - suite.tag_size)
    with pytest.raises(AuthenticationError):
        suite.open_into(iv, sealed, out, aad)


def _check_bad_nonce(suite: Aead, iv: bytes, msg: bytes, aad: bytes, sealed: bytes) -> None:
    with pytest.raises(InvalidNonceSizeError):
        suite.seal(iv, msg, aad)
    with pytest.raises(InvalidNonceSizeError):
        suite.open(iv, sealed, aad)
    with pytest.raises(InvalidNonceSizeError):
        suite.seal_into(iv, msg, bytearray(len(msg) + 16), aad)
    with pytest.raises(InvalidNonceSizeError):
        suite.open_into(iv, sealed, bytearray(max(len(sealed) - 16, 0)), aad)


def test_wycheproof_aes_gcm() -> None:
    data = wycheproof("aes_gcm_test.json")
    ran = fallback_ran = native_named = 0
    for _group, test in wycheproof_cases(data):
        key, iv, aad, msg = _h(test, "key"), _h(test, "iv"), _h(test, "aad"), _h(test, "msg")
        sealed = _h(test, "ct") + _h(test, "tag")
        suite = AesGcm(key)
        slow = _GcmAnyIv(algorithms.AES(key))
        flags = set(test["flags"])
        if test["result"] == "valid":
            _check_valid(suite, iv, msg, aad, sealed)
            # The fallback on the same case (for 1..7 and >128-byte IVs it is the path above).
            assert slow.encrypt(iv, msg, aad) == sealed
            assert slow.decrypt(iv, sealed, aad) == msg
            fallback_ran += 1
            if len(iv) == 12 and len(key) in (16, 32):
                named = AES128GCM(key) if len(key) == 16 else AES256GCM(key)
                _check_valid(named, iv, msg, aad, sealed)
                native_named += 1
        elif "ZeroLengthIv" in flags:
            _check_bad_nonce(suite, iv, msg, aad, sealed)
        else:
            assert flags == {"ModifiedTag"}, test["tcId"]
            _check_rejected(suite, iv, msg, aad, sealed)
            with pytest.raises(InvalidTag):
                slow.decrypt(iv, sealed, aad)
            fallback_ran += 1
        ran += 1
    record_vectors("wycheproof/aes_gcm_test.json", ran, data["numberOfTests"])
    # 310 of the 316 cases have a non-empty IV; all of them also ran through the fallback.
    assert fallback_ran == ran - 6
    assert native_named > 0


def test_aes_gcm_odd_iv_lengths_use_the_fallback_and_round_trip() -> None:
    """IVs of 1..7 and >128 bytes (which OpenSSL refuses) seal and open through AesGcm."""
    key = bytes(range(32))
    suite = AesGcm(key)
    msg, aad = b"odd iv lengths" * 5, b"hdr"
    for n in (1, 2, 7, 129, 257):
        iv = bytes([n % 256]) * n
        sealed = suite.seal(iv, msg, aad)
        assert suite.open(iv, sealed, aad) == msg
        tampered = bytearray(sealed)
        tampered[-1] ^= 1
        with pytest.raises(AuthenticationError):
            suite.open(iv, bytes(tampered), aad)
        with pytest.raises(AuthenticationError):
            suite.open(iv, sealed[:15], aad)
        with pytest.raises(AuthenticationError):
            suite.open_into(iv, sealed[:15], bytearray(0), aad)
        out = bytearray(len(sealed))
        assert suite.seal_into(iv, msg, memoryview(out), aad) == len(sealed)
        assert bytes(out) == sealed
        with pytest.raises(InvalidParameterError, match="exactly"):
            suite.seal_into(iv, msg, bytearray(len(sealed) + 1), aad)
        with pytest.raises(InvalidParameterError, match="exactly"):
            suite.open_into(iv, sealed, bytearray(len(msg) - 1), aad)
        with pytest.raises(InvalidNonceSizeError, match="no native kernel"):
            suite.native(iv)  # the hot-loop kernel is OpenSSL's only
    assert suite._slow is not None  # the fallback was built and used


def test_gcm_fallback_wraps_only_the_low_32_counter_bits() -> None:
    """A J0 whose low word is 0xFFFFFFFF must wrap to 0 without carrying into byte 11."""
    key = bytes(16)
    slow = _GcmAnyIv(algorithms.AES(key))
    native = AesGcm(key)
    # inc32(J0) = ...FFFFFFFF: the keystream must go on with ...00000000, ...00000001.
    j0 = bytes(12) + b"\xff\xff\xff\xfe"
    stream = slow._gctr(j0, bytes(48))
    blocks = [stream[i : i + 16] for i in range(0, 48, 16)]
    expect = [slow._block(bytes(12) + w) for w in (b"\xff\xff\xff\xff", bytes(4), b"\0\0\0\1")]
    assert blocks == expect
    # and the whole fallback agrees with OpenSSL across IV lengths 8..128 bytes
    data = bytes(range(200))
    for n in (8, 9, 13, 16, 31, 64, 128):
        iv = bytes([n]) * n
        assert slow.encrypt(iv, data, b"a") == native.seal(iv, data, b"a")


def _run_chacha_file(name: str, suite_cls: type[Aead]) -> None:
    data = wycheproof(name)
    ran = 0
    for _group, test in wycheproof_cases(data):
        key, iv, aad, msg = _h(test, "key"), _h(test, "iv"), _h(test, "aad"), _h(test, "msg")
        sealed = _h(test, "ct") + _h(test, "tag")
        suite = suite_cls(key)
        flags = set(test["flags"])
        if test["result"] == "valid":
            _check_valid(suite, iv, msg, aad, sealed)
        elif "InvalidNonceSize" in flags:
            _check_bad_nonce(suite, iv, msg, aad, sealed)
        else:
            assert flags == {"ModifiedTag"}, test["tcId"]
            _check_rejected(suite, iv, msg, aad, sealed)
        ran += 1
    record_vectors(f"wycheproof/{name}", ran, data["numberOfTests"])


def test_wycheproof_chacha20_poly1305() -> None:
    _run_chacha_file("chacha20_poly1305_test.json", ChaCha20Poly1305Suite)


def test_wycheproof_xchacha20_poly1305() -> None:
    _run_chacha_file("xchacha20_poly1305_test.json", XChaCha20Poly1305)


ALL = [AES256GCM, AES128GCM, ChaCha20Poly1305Suite, XChaCha20Poly1305]


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.name)
def test_into_buffers_and_tampering(cls: type[Aead]) -> None:
    key = SecretKey(bytes(range(cls.key_size)))
    suite = cls(key)
    nonce = bytes(cls.nonce_size)
    msg, aad = b"attack at dawn" * 7, b"header"
    sealed = suite.seal(nonce, msg, aad)
    assert len(sealed) == len(msg) + cls.tag_size
    # memoryview into a larger bytearray (a slice of a reusable buffer)
    backing = bytearray(len(sealed) + 10)
    assert suite.seal_into(nonce, msg, memoryview(backing)[5 : 5 + len(sealed)], aad) == len(sealed)
    assert bytes(backing[5 : 5 + len(sealed)]) == sealed
    assert backing[:5] == bytes(5) and backing[-5:] == bytes(5)
    # wrong-size and read-only outputs: typed errors, nothing written
    for size in (len(sealed) - 1, len(sealed) + 1, 0):
        with pytest.raises(InvalidParameterError, match=f"exactly {len(sealed)} bytes"):
            suite.seal_into(nonce, msg, bytearray(size), aad)
    with pytest.raises(InvalidParameterError, match=f"exactly {len(msg)} bytes"):
        suite.open_into(nonce, sealed, bytearray(len(msg) + 1), aad)
    with pytest.raises(InvalidParameterError, match="read-only"):
        suite.seal_into(nonce, msg, memoryview(bytes(len(sealed))), aad)
    with pytest.raises(InvalidParameterError, match="bytearray"):
        suite.seal_into(nonce, msg, bytes(len(sealed)), aad)  # type: ignore[arg-type]
    # tampered tag, ciphertext, aad; short input
    for i in (len(sealed) - 1, 0):
        bad = bytearray(sealed)
        bad[i] ^= 0x80
        with pytest.raises(AuthenticationError, match="did not verify"):
            suite.open(nonce, bytes(bad), aad)
        plain = bytearray(len(msg))
        with pytest.raises(AuthenticationError):
            suite.open_into(nonce, bytes(bad), plain, aad)
    with pytest.raises(AuthenticationError):
        suite.open(nonce, sealed, aad + b"x")
    with pytest.raises(AuthenticationError):
        suite.open_into(nonce, sealed[: cls.tag_size - 1], bytearray(0), aad)
    with pytest.raises(AuthenticationError):
        suite.open(nonce, sealed[: cls.tag_size - 1], aad)
    # wrong nonce sizes name the expected size
    with pytest.raises(InvalidNonceSizeError, match=f"{cls.nonce_size} bytes, got 5"):
        suite.seal(bytes(5), msg)
    assert key.secret_bytes().hex() not in repr(suite)


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.name)
def test_wrong_key_sizes_name_the_expected_size(cls: type[Aead]) -> None:
    for size in (0, cls.key_size - 1, cls.key_size + 1):
        with pytest.raises(InvalidKeySizeError, match=f"{cls.key_size} bytes, got {size}") as err:
            cls(bytes(size))
        assert isinstance(err.value, ValueError)
    with pytest.raises(InvalidParameterError, match="bytes-like"):
        cls("not a key")  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", SUITES.values(), ids=lambda c: c.name)
def test_bind_takes_and_refuses_what_the_suite_object_does(cls: type[Aead]) -> None:
    """Review 6 F4: ``bind`` (the per-message fast path) takes its shortcut for ``bytes``
    only; any other key goes through the object, typed errors and all."""
    key, nonce = bytes(range(cls.key_size)), bytes(cls.nonce_size)
    msg = b"message"

    def seal(bound: tuple[Any, bytes]) -> bytes:
        kernel, kernel_nonce = bound
        return bytes(kernel.encrypt(kernel_nonce, msg, b""))

    want = cls(key).seal(nonce, msg)
    for form in (bytes, bytearray, memoryview, SecretKey):
        assert seal(cls.bind(form(key), nonce)) == want, form  # type: ignore[arg-type]
    assert seal(cls.bind(key, bytearray(nonce))) == want  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="bytes-like"):
        cls.bind("k" * cls.key_size, nonce)  # type: ignore[arg-type]
    wiped = SecretKey(key)
    wiped.wipe()
    with pytest.raises(InvalidKeySizeError, match="wiped"):
        cls.bind(wiped, nonce)  # type: ignore[arg-type]
    with pytest.raises(InvalidKeySizeError, match=f"{cls.key_size} bytes, got 3"):
        cls.bind(bytes(3), nonce)


def test_aes_gcm_key_sizes_and_empty_iv() -> None:
    for size in (16, 24, 32):
        suite = AesGcm(bytes(size))
        assert suite.open(bytes(12), suite.seal(bytes(12), b"x")) == b"x"
    for size in (0, 15, 20, 33, 64):
        with pytest.raises(InvalidKeySizeError, match=f"16, 24 or 32 bytes, got {size}"):
            AesGcm(bytes(size))
    with pytest.raises(InvalidNonceSizeError, match="at least 1 byte"):
        AesGcm(bytes(16)).seal(b"", b"x")
    # the named suites keep their fixed 12-byte nonce
    with pytest.raises(InvalidNonceSizeError, match="12 bytes, got 16"):
        AES256GCM(bytes(32)).seal(bytes(16), b"x")
    with pytest.raises(InvalidNonceSizeError, match="12 bytes, got 3"):
        AES128GCM(bytes(16)).open(bytes(3), bytes(20))


def test_aead_suite_lookup() -> None:
    assert set(SUITES) == {"aes-256-gcm", "aes-128-gcm", "chacha20-poly1305", "xchacha20-poly1305"}
    assert aead_suite("AES-256-GCM") is AES256GCM
    with pytest.raises(UnsupportedFormatError, match="supported"):
        aead_suite("aes-512-gcm")
    with pytest.raises(InvalidParameterError):
        aead_suite(3)  # type: ignore[arg-type]
