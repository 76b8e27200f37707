"""rclone crypt: rclone's own vectors, EME-32 vectors, round trips, truncation, names, fuzz.

The vectors in tests/data/rclone_vectors.json come from rclone's cipher_test.go and
obscure_test.go; tests/data/eme_vectors.json from rfjakob/eme (IEEE P1619.2 EME-32).
Interop with the real rclone binary is in test_rclone_interop.py.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import REPO, random_splits, record_vectors, round_trip_peak_memory

import streamcrypt
from streamcrypt.codecs import FormatOptions
from streamcrypt.codecs import rclone as rc
from streamcrypt.codecs._base32768 import decode as b32k_decode
from streamcrypt.codecs._base32768 import encode as b32k_encode
from streamcrypt.errors import (
    AuthenticationError,
    BrokenTransformError,
    FormatError,
    InvalidKeySizeError,
    InvalidPaddingError,
    InvalidParameterError,
    LimitExceededError,
    StreamCryptError,
    TruncatedStreamError,
)
from streamcrypt.primitives import Eme, XSalsa20Poly1305

VECTORS: dict[str, Any] = json.loads((REPO / "tests/data/rclone_vectors.json").read_text())
EME: dict[str, Any] = json.loads((REPO / "tests/data/eme_vectors.json").read_text())
ZERO = rc.RcloneKeys.from_material(bytes(80))
KEYS = rc.RcloneKeys.from_password("streamcrypt", "pepper")
SIZES = [0, 1, 16, 65535, 65536, 65537, 3 * 65536, 3 * 65536 + 7]


# ------------------------------------------------------------------------------ vectors


def test_eme32_vectors() -> None:
    ran = 0
    for vec in EME["vectors"]:
        eme = Eme(bytes.fromhex(vec["key"]))
        tweak = bytes.fromhex(vec["tweak"])
        data = bytes.fromhex(vec["in"])
        forward, back = (eme.encrypt, eme.decrypt) if vec["encrypt"] else (eme.decrypt, eme.encrypt)
        for _ in range(vec["repeat"]):
            data = forward(tweak, data)
        assert data.hex() == vec["out"], vec["name"]
        for _ in range(vec["repeat"]):
            data = back(tweak, data)
        assert data.hex() == vec["in"], vec["name"]
        ran += 1
    record_vectors("tests/data/eme_vectors.json (EME-32, rfjakob/eme)", ran, len(EME["vectors"]))


def test_eme_rejects_bad_sizes() -> None:
    eme = Eme(bytes(32))
    for bad in (b"", bytes(15), bytes(17), bytes(2064)):
        with pytest.raises(InvalidParameterError):
            eme.encrypt(bytes(16), bad)
    with pytest.raises(InvalidParameterError):
        eme.encrypt(bytes(15), bytes(16))
    with pytest.raises(InvalidKeySizeError):
        Eme(bytes(31))
    assert "key hidden" in repr(eme)


def test_secretbox_matches_pynacl_and_refuses_tampering() -> None:
    from nacl.bindings import crypto_secretbox_easy

    box = XSalsa20Poly1305(bytes(range(32)))
    nonce = bytes(range(24))
    for n in (0, 1, 1000, 65536):
        data = random.Random(n).randbytes(n)
        sealed = box.seal(nonce, data)
        assert sealed == crypto_secretbox_easy(data, nonce, bytes(range(32)))
        assert box.open(nonce, sealed) == data
        bad = bytearray(sealed)
        bad[len(bad) // 2] ^= 1
        with pytest.raises(AuthenticationError):
            box.open(nonce, bytes(bad))
    with pytest.raises(AuthenticationError):
        box.open(nonce, bytes(15))
    with pytest.raises(InvalidParameterError, match="exactly 19 bytes, got 18"):
        box.seal_into(nonce, b"abc", bytearray(18))
    with pytest.raises(InvalidParameterError, match="read-only"):  # as every AEAD suite says
        box.open_into(nonce, box.seal(nonce, b"abc"), memoryview(bytes(3)))
    assert "key hidden" in repr(box)


def test_key_derivation_vectors() -> None:
    ran = 0
    for case in VECTORS["keys"]:
        name = f"{case['password']}/{case['salt']}"
        keys = rc.RcloneKeys.from_password(case["password"], case["salt"])
        assert keys.data_key.hex() == case["data_key"], name
        assert keys.name_key.hex() == case["name_key"], name
        assert keys.name_tweak.hex() == case["name_tweak"], name
        assert case["data_key"] not in repr(keys)
        obscured = (rc.obscure(case["password"]), rc.obscure(case["salt"]) if case["salt"] else "")
        assert rc.RcloneKeys.from_config(*obscured) == keys, name
        ran += 1
    record_vectors("tests/data/rclone_vectors.json (keys)", ran, len(VECTORS["keys"]))


def test_empty_password_is_refused() -> None:
    with pytest.raises(InvalidParameterError):
        rc.RcloneKeys.from_password("")
    with pytest.raises(InvalidKeySizeError):
        rc.RcloneKeys.from_material(bytes(79))


def test_obscure_vectors() -> None:
    ran = 0
    for plain, obscured, iv in VECTORS["obscure"]:
        assert rc.obscure(plain, iv=iv.encode()) == obscured
        assert rc.reveal(obscured) == plain
        assert rc.reveal(rc.obscure(plain)) == plain
        ran += 1
    record_vectors("tests/data/rclone_vectors.json (obscure)", ran, len(VECTORS["obscure"]))


@pytest.mark.parametrize("bad", ["!!", "YWFh", "YWFhYWFhYWFhYWFhYWFhY", "YWFhYWFhYWFhYWFhYWFhYR"])
def test_reveal_refuses_non_obscured(bad: str) -> None:
    with pytest.raises(FormatError):
        rc.reveal(bad)


def test_rclone_data_vectors() -> None:
    nonce = bytes.fromhex(VECTORS["data"]["nonce"])
    ran = 0
    for plain, expected in VECTORS["data"]["files"]:
        data = bytes.fromhex(plain)
        enc = rc.RcloneEncryptor(ZERO, nonce=nonce)
        assert (enc.update(data) + enc.finalize()).hex() == expected
        assert streamcrypt.decrypt_bytes(bytes.fromhex(expected), ZERO, format="rclone") == data
        ran += 1
    record_vectors("tests/data/rclone_vectors.json (file data)", ran, len(VECTORS["data"]["files"]))


def test_name_segment_vectors() -> None:
    ran = expected = 0
    for encoding, cases in VECTORS["segments"].items():
        names = rc.RcloneNameCipher(ZERO, "standard", encoding)
        expected += len(cases)
        for plain, stored in cases:
            assert names.encrypt_segment(plain) == stored
            assert names.decrypt_segment(stored) == plain
            if encoding == "base32" and stored:
                assert names.decrypt_segment(stored.upper()) == plain  # case-insensitive
            ran += 1
    record_vectors("tests/data/rclone_vectors.json (name segments)", ran, expected)


def test_name_path_vectors() -> None:
    ran = expected = 0
    for encoding, table in VECTORS["paths"].items():
        for dirs, cases in ((True, table["dirs"]), (False, table["no_dirs"])):
            names = rc.RcloneNameCipher(ZERO, "standard", encoding, directory_name_encryption=dirs)
            expected += len(cases)
            for plain, stored in cases:
                assert names.encrypt_path(plain) == stored
                assert names.decrypt_path(stored) == plain
                ran += 1
    record_vectors("tests/data/rclone_vectors.json (paths)", ran, expected)


def test_obfuscate_and_off_vectors() -> None:
    ran = 0
    for dirs in (True, False):
        names = rc.RcloneNameCipher(ZERO, "obfuscate", directory_name_encryption=dirs)
        for plain, stored in VECTORS["obfuscate"]["dirs" if dirs else "no_dirs"]:
            assert names.encrypt_path(plain) == stored
            assert names.decrypt_path(stored) == plain
            ran += 1
    for suffix, plain, stored in VECTORS["off"]:
        names = rc.RcloneNameCipher(ZERO, "off", suffix=suffix)
        assert names.encrypt_path(plain) == stored
        assert names.decrypt_path(stored) == plain
        assert names.encrypt_dir("a/b") == "a/b"
        ran += 1
    expected = sum(map(len, VECTORS["obfuscate"].values())) + len(VECTORS["off"])
    record_vectors("tests/data/rclone_vectors.json (obfuscate, off)", ran, expected)
    with pytest.raises(FormatError):
        rc.RcloneNameCipher(ZERO, "off").decrypt_path("name.txt")
    with pytest.raises(FormatError):
        rc.RcloneNameCipher(ZERO, "off").decrypt_path(".bin")


def test_base32768_vectors_and_strictness() -> None:
    for plain, stored in zip(
        ["", "1", "12", "123", "1234567890123456"],
        ["", "㼿", "㻙ɟ", "㻙ⲿ", "㻙ⲍ⍆觓栩朤諆媕䆿"],
        strict=True,
    ):
        assert b32k_encode(plain.encode()) == stored
        assert b32k_decode(stored) == plain.encode()
    for bad in ["㼿c", "!", "㻙ⲿ=㻙ⲿ", "ɟ㻙", "㻙ɠ"]:
        with pytest.raises(FormatError):
            b32k_decode(bad)


@given(st.binary(max_size=300))
@settings(max_examples=200, deadline=None)
def test_base32768_round_trip(data: bytes) -> None:
    assert b32k_decode(b32k_encode(data)) == data


@given(st.text(min_size=1, max_size=60).filter(lambda s: "/" not in s))
@settings(max_examples=150, deadline=None)
def test_names_round_trip_every_mode(name: str) -> None:
    for mode, encoding in [
        ("standard", "base32"),
        ("standard", "base64"),
        ("standard", "base32768"),
        ("obfuscate", "base32"),
    ]:
        names = rc.RcloneNameCipher(KEYS, mode, encoding)  # type: ignore[arg-type]
        assert names.decrypt_segment(names.encrypt_segment(name)) == name


def test_name_errors_are_typed() -> None:
    names = rc.RcloneNameCipher(ZERO, "standard", "base32")
    other = rc.RcloneNameCipher(KEYS, "standard", "base32")
    stored = names.encrypt_segment("hello")
    with pytest.raises(InvalidPaddingError):
        other.decrypt_segment(stored)
    for bad in ["64=", "!", "hello=hello", "p0e52nreeaj0a5ea7s64m4j72", "w" * 8]:
        with pytest.raises(FormatError):
            names.decrypt_segment(bad)
    with pytest.raises(FormatError):  # 1 block + 1 byte: not a multiple of 16
        names.decrypt_segment(names._encode(b"1") + stored)
    with pytest.raises(LimitExceededError):
        names.encrypt_segment("x" * 2048)
    assert names.decrypt_segment(names.encrypt_segment("x" * 2047)) == "x" * 2047
    with pytest.raises(FormatError):
        rc.RcloneNameCipher(ZERO, "obfuscate").decrypt_segment("noversion")
    with pytest.raises(InvalidParameterError):
        rc.RcloneNameCipher(ZERO, "potato")  # type: ignore[arg-type]


# ----------------------------------------------------------------------- file contents


def _data(n: int) -> bytes:
    return random.Random(n).randbytes(n)


@pytest.mark.parametrize("size", SIZES)
def test_round_trip_and_sizes(size: int) -> None:
    data = _data(size)
    ct = streamcrypt.encrypt_bytes(data, KEYS, format="rclone")
    assert len(ct) == rc.encrypted_size(size)
    assert rc.decrypted_size(len(ct)) == size
    assert streamcrypt.decrypt_bytes(ct, KEYS, format="rclone") == data
    assert streamcrypt.decrypt_bytes(ct, KEYS, expected_size=size, format="rclone") == data
    rng = random.Random(size)
    dec = rc.RcloneDecryptor(KEYS)
    out = b"".join(dec.update(p) for p in random_splits(ct, rng, max_piece=70000)) + dec.finalize()
    assert out == data
    enc = rc.RcloneEncryptor(KEYS)
    ct2 = (
        b"".join(enc.update(p) for p in random_splits(data, rng, max_piece=70000)) + enc.finalize()
    )
    assert streamcrypt.decrypt_bytes(ct2, KEYS, format="rclone") == data


def test_truncation_at_a_block_boundary_needs_expected_size() -> None:
    data = _data(3 * 65536 + 5)
    ct = streamcrypt.encrypt_bytes(data, KEYS, format="rclone")
    cut = ct[: rc.HEADER_SIZE + 2 * rc.BLOCK_SIZE]
    # The format cannot show it: a valid, shorter file.
    assert streamcrypt.decrypt_bytes(cut, KEYS, format="rclone") == data[: 2 * 65536]
    with pytest.raises(TruncatedStreamError):
        streamcrypt.decrypt_bytes(cut, KEYS, expected_size=len(data), format="rclone")
    with pytest.raises(TruncatedStreamError):
        rc.layout(KEYS, cut, len(cut), expected_size=len(data))
    with pytest.raises(FormatError):
        streamcrypt.decrypt_bytes(ct, KEYS, expected_size=len(data) - 1, format="rclone")
    # Cut inside a block: that block no longer opens, or the tail is shorter than a tag.
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(ct[:-1], KEYS, format="rclone")
    with pytest.raises(TruncatedStreamError):
        streamcrypt.decrypt_bytes(ct[: rc.HEADER_SIZE + rc.BLOCK_SIZE + 10], KEYS, format="rclone")
    with pytest.raises(TruncatedStreamError):
        streamcrypt.decrypt_bytes(ct[:20], KEYS, format="rclone")


def test_tampering_reordering_and_wrong_keys_fail_typed() -> None:
    data = _data(3 * 65536)
    ct = streamcrypt.encrypt_bytes(data, KEYS, format="rclone")
    blocks = [ct[32 + i * rc.BLOCK_SIZE : 32 + (i + 1) * rc.BLOCK_SIZE] for i in range(3)]
    swapped = ct[:32] + blocks[1] + blocks[0] + blocks[2]
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(swapped, KEYS, format="rclone")
    dup = ct[:32] + blocks[0] + blocks[0]
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(dup, KEYS, format="rclone")
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(ct, ZERO, format="rclone")
    with pytest.raises(FormatError):
        streamcrypt.decrypt_bytes(b"RCLONE\x00\x01" + ct[8:], KEYS, format="rclone")
    # Streaming releases the blocks before the bad one, then stays broken.
    bad = bytearray(ct)
    bad[32 + rc.BLOCK_SIZE + 100] ^= 1
    dec = rc.RcloneDecryptor(KEYS)
    assert dec.update(bytes(bad[: 32 + rc.BLOCK_SIZE + 1])) == data[:65536]
    with pytest.raises(AuthenticationError):
        dec.update(bytes(bad[32 + rc.BLOCK_SIZE + 1 :]))
    with pytest.raises(BrokenTransformError):
        dec.update(b"x")


@pytest.mark.parametrize("size", [0, 1, 65536, 65537, 5 * 65536 + 3])
def test_random_access(size: int) -> None:
    data = _data(size)
    ct = streamcrypt.encrypt_bytes(data, KEYS, format="rclone")

    def read_at(offset: int, length: int) -> bytes:
        return ct[offset : offset + length]

    lay = rc.layout(KEYS, ct[:32], len(ct))
    assert lay.plaintext_size == size
    lay.verify_end(read_at)
    rng = random.Random(size)
    for _ in range(30):
        start = rng.randint(0, size)
        stop = rng.randint(start, size + 10)
        got = rc.FORMAT.read_range(FormatOptions(key=KEYS), read_at, len(ct), start, stop)
        assert got == data[start:stop]


def test_wrong_argument_types() -> None:
    with pytest.raises(InvalidParameterError):
        rc.RcloneEncryptor(b"k" * 80)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        rc.RcloneEncryptor(KEYS, nonce=bytes(23))


# ------------------------------------------------------------------------------- fuzz


def test_fuzz_headers_and_bodies_give_typed_errors() -> None:
    rng = random.Random(16)
    good = streamcrypt.encrypt_bytes(_data(70000), KEYS, format="rclone")
    for _ in range(300):
        blob = bytearray(good[: rng.randint(0, len(good))])
        for _ in range(rng.randint(0, 4)):
            if blob:
                blob[rng.randrange(len(blob))] = rng.randrange(256)
        try:
            streamcrypt.decrypt_bytes(bytes(blob), KEYS, format="rclone")
        except StreamCryptError:
            pass


def test_memory_is_bounded_by_a_block() -> None:
    assert round_trip_peak_memory(rc.RcloneEncryptor(KEYS), rc.RcloneDecryptor(KEYS)) < 8 << 20


_NAME_CIPHERS = [
    rc.RcloneNameCipher(KEYS, mode, encoding, directory_name_encryption=dirs)  # type: ignore[arg-type]
    for mode, encoding, dirs in [
        ("standard", "base32", True),
        ("standard", "base64", False),
        ("standard", "base32768", True),
        ("obfuscate", "base32", True),
        ("off", "base32", True),
    ]
]


@given(st.text(max_size=80))
@settings(max_examples=300, deadline=None)
def test_fuzz_name_decoders_on_any_text(text: str) -> None:
    """Names listed from a remote are untrusted: any text either decodes or fails typed."""
    for names in _NAME_CIPHERS:
        for call in (names.decrypt_segment, names.decrypt_path, names.decrypt_dir):
            try:
                assert isinstance(call(text), str)
            except StreamCryptError:
                pass
    for call in (rc.reveal, b32k_decode):
        try:
            call(text)
        except StreamCryptError:
            pass


@given(st.binary(max_size=200), st.integers(min_value=0, max_value=1 << 40))
@settings(max_examples=300, deadline=None)
def test_fuzz_header_parsers_on_any_bytes(blob: bytes, size: int) -> None:
    for head in (blob, rc.MAGIC + blob):
        try:
            size_hint = rc.header_size(head)
        except FormatError:
            assert head[:8] != rc.MAGIC[: len(head)]
        else:
            assert size_hint == (rc.HEADER_SIZE if len(head) >= 8 else None)
        rc.is_rclone(head)
        try:
            rc.layout(KEYS, head, max(size, len(head)))
        except StreamCryptError:
            pass


@given(st.binary(max_size=3000), st.integers(min_value=0, max_value=2**32 - 1))
@settings(max_examples=100, deadline=None)
def test_fuzz_streaming_decryptor_on_any_body(body: bytes, seed: int) -> None:
    dec = rc.RcloneDecryptor(KEYS)
    try:
        for piece in random_splits(rc.MAGIC + bytes(24) + body, random.Random(seed)):
            assert dec.update(piece) == b""  # nothing forged ever opens
        dec.finalize()
    except StreamCryptError:
        with pytest.raises(BrokenTransformError):
            dec.update(b"x")
