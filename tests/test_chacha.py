"""ChaCha20 (RFC 8439 and original) and XChaCha20 keystream transforms.

Vectors: RFC 7539/8439 appendix A.2 (cryptography_vectors), the RFC 8439 section 2.8.2
AEAD example and Wycheproof (X)ChaCha20-Poly1305 (their ciphertext is the keystream XOR
from block counter 1), the XChaCha20 vector of draft-irtf-cfrg-xchacha appendix A.3.2.
The counter layout is checked against a small pure-Python ChaCha20 block function
written from RFC 8439 section 2.3.
"""

from __future__ import annotations

import random
import re
import struct
from typing import Any

import cryptography_vectors
import nacl.bindings
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import random_splits, record_vectors, wycheproof, wycheproof_cases

from streamcrypt.errors import (
    AlreadyFinalizedError,
    BrokenTransformError,
    InvalidKeySizeError,
    InvalidNonceSizeError,
    InvalidParameterError,
    LimitExceededError,
)
from streamcrypt.keys import SecretKey
from streamcrypt.primitives import hchacha20
from streamcrypt.primitives.hazmat import ChaCha20, XChaCha20

# ------------------------------------------------- reference block function (RFC 8439 2.3)

_M = 0xFFFFFFFF


def _quarter(s: list[int], a: int, b: int, c: int, d: int) -> None:
    for x, y, z, r in ((a, b, d, 16), (c, d, b, 12), (a, b, d, 8), (c, d, b, 7)):
        s[x] = (s[x] + s[y]) & _M
        v = s[z] ^ s[x]
        s[z] = ((v << r) | (v >> (32 - r))) & _M


def ref_block(key: bytes, words12_15: tuple[int, int, int, int]) -> bytes:
    state = [*struct.unpack("<4I", b"expand 32-byte k"), *struct.unpack("<8I", key), *words12_15]
    w = list(state)
    for _ in range(10):
        for q in ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15)):
            _quarter(w, *q)
        for q in ((0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14)):
            _quarter(w, *q)
    return struct.pack("<16I", *((a + b) & _M for a, b in zip(w, state, strict=True)))


def ref_ietf(key: bytes, nonce12: bytes, counter: int, blocks: int) -> bytes:
    n = struct.unpack("<3I", nonce12)
    return b"".join(ref_block(key, (counter + i, *n)) for i in range(blocks))


def ref_djb(key: bytes, nonce8: bytes, counter: int, blocks: int) -> bytes:
    n = struct.unpack("<2I", nonce8)
    out = []
    for i in range(blocks):
        c = (counter + i) % (1 << 64)
        out.append(ref_block(key, (c & _M, c >> 32, *n)))
    return b"".join(out)


def test_reference_block_matches_rfc_2_3_2() -> None:
    """The reference itself, against the RFC 8439 section 2.3.2 block."""
    key = bytes(range(32))
    nonce = bytes.fromhex("000000090000004a00000000")
    expected = bytes.fromhex(
        "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
        "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e"
    )
    assert ref_ietf(key, nonce, 1, 1) == expected
    assert ChaCha20(key, nonce, counter=1).update(bytes(64)) == expected


# ------------------------------------------------------------------------------ vectors


def kv_records(path: str) -> tuple[list[dict[str, str]], int]:
    with cryptography_vectors.open_vector_file(path, "r") as f:
        text = f.read()
    expected = len(re.findall(r"^count\s*=", text, re.I | re.M))
    records: list[dict[str, str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, value = (x.strip() for x in line.split("=", 1))
        if name.lower() == "count":
            records.append({})
        records[-1][name.lower()] = value
    return records, expected


def test_rfc7539_appendix_a2() -> None:
    path = "ciphers/ChaCha20/rfc7539.txt"
    records, expected = kv_records(path)
    ran = 0
    for r in records:
        key, nonce = bytes.fromhex(r["key"]), bytes.fromhex(r["nonce"])
        pt, ct = bytes.fromhex(r["plaintext"]), bytes.fromhex(r["ciphertext"])
        counter = int(r["initial_block_counter"])
        assert ChaCha20(key, nonce, counter=counter).update(pt) == ct
        assert ChaCha20(key, nonce, counter=counter).update(ct) == pt
        ran += 1
    record_vectors(f"cryptography_vectors {path}", ran, expected)


def test_rfc8439_aead_example_ciphertext() -> None:
    """RFC 8439 section 2.8.2 (boringssl.txt COUNT 1): ciphertext = ChaCha20 from block 1."""
    path = "ciphers/ChaCha20Poly1305/boringssl.txt"
    records, _ = kv_records(path)
    r = records[0]
    key, nonce, ct = (bytes.fromhex(r[k]) for k in ("key", "nonce", "ct"))
    pt = r["in"].strip('"').encode()
    assert pt.startswith(b"Ladies and Gentlemen")
    assert ChaCha20(key, nonce, counter=1).update(pt) == ct
    record_vectors(f"cryptography_vectors {path} (RFC 8439 2.8.2 ciphertext)", 1, 1)


@pytest.mark.parametrize(
    ("name", "cls", "nonce_bits"),
    [
        ("chacha20_poly1305_test.json", ChaCha20, 96),
        ("xchacha20_poly1305_test.json", XChaCha20, 192),
    ],
)
def test_wycheproof_aead_ciphertexts(name: str, cls: type[ChaCha20], nonce_bits: int) -> None:
    """Every valid case's ciphertext is the keystream XOR from block counter 1."""
    data = wycheproof(name)
    ran = valid = 0
    for group, t in wycheproof_cases(data):
        if t["result"] != "valid":
            continue
        valid += 1
        assert group["ivSize"] == nonce_bits
        key, iv, msg, ct = (bytes.fromhex(t[k]) for k in ("key", "iv", "msg", "ct"))
        assert cls(key, iv, counter=1).update(msg) == ct, t["tcId"]
        ran += 1
    total = data["numberOfTests"]
    record_vectors(f"wycheproof/{name} (ciphertext of {valid} valid of {total})", ran, valid)


# draft-irtf-cfrg-xchacha-03 appendix A.3.2 (data; keystream starts at block counter 1).
XCHACHA_KEY = bytes(range(0x80, 0xA0))
XCHACHA_NONCE = bytes.fromhex("404142434445464748494a4b4c4d4e4f5051525354555658")
XCHACHA_PLAINTEXT = (
    b'The dhole (pronounced "dole") is also known as the Asiatic wild dog, red dog, and '
    b"whistling dog. It is about the size of a German shepherd but looks more like a "
    b"long-legged fox. This highly elusive and skilled jumper is classified with wolves, "
    b"coyotes, jackals, and foxes in the taxonomic family Canidae."
)
XCHACHA_KEYSTREAM = bytes.fromhex(
    "29624b4b1b140ace53740e405b2168540fd7d630c1f536fecd722fc3cddba7f4"
    "cca98cf9e47e5e64d115450f9b125b54449ff76141ca620a1f9cfcab2a1a8a25"
    "5e766a5266b878846120ea64ad99aa479471e63befcbd37cd1c22a221fe46221"
    "5cf32c74895bf505863ccddd48f62916dc6521f1ec50a5ae08903aa259d9bf60"
    "7cd8026fba548604f1b6072d91bc91243a5b845f7fd171b02edc5a0a84cf28dd"
    "241146bc376e3f48df5e7fee1d11048c190a3d3deb0feb64b42d9c6fdeee290f"
    "a0e6ae2c26c0249ea8c181f7e2ffd100cbe5fd3c4f8271d62b15330cb8fdcf00"
    "b3df507ca8c924f7017b7e712d15a2eb5c50484451e54e1b4b995bd8fdd94597"
    "bb94d7af0b2c04df10ba0890899ed9293a0f55b8bafa999264035f1d4fbe7fe0"
    "aafa109a62372027e50e10cdfecca127"
)
XCHACHA_CIPHERTEXT = bytes.fromhex(
    "7d0a2e6b7f7c65a236542630294e063b7ab9b555a5d5149aa21e4ae1e4fbce87"
    "ecc8e08a8b5e350abe622b2ffa617b202cfad72032a3037e76ffdcdc4376ee05"
    "3a190d7e46ca1de04144850381b9cb29f051915386b8a710b8ac4d027b8b050f"
    "7cba5854e028d564e453b8a968824173fc16488b8970cac828f11ae53cabd201"
    "12f87107df24ee6183d2274fe4c8b1485534ef2c5fbc1ec24bfc3663efaa08bc"
    "047d29d25043532db8391a8a3d776bf4372a6955827ccb0cdd4af403a7ce4c63"
    "d595c75a43e045f0cce1f29c8b93bd65afc5974922f214a40b7c402cdb91ae73"
    "c0b63615cdad0480680f16515a7ace9d39236464328a37743ffc28f4ddb324f4"
    "d0f5bbdc270c65b1749a6efff1fbaa09536175ccd29fb9e6057b307320d31683"
    "8a9c71f70b5b5907a66f7ea49aadc409"
)


def test_xchacha20_draft_vector() -> None:
    assert len(XCHACHA_PLAINTEXT) == len(XCHACHA_KEYSTREAM) == len(XCHACHA_CIPHERTEXT) == 304
    assert XChaCha20(XCHACHA_KEY, XCHACHA_NONCE, counter=1).update(bytes(304)) == XCHACHA_KEYSTREAM
    assert XChaCha20(XCHACHA_KEY, XCHACHA_NONCE, counter=1).update(XCHACHA_PLAINTEXT) == (
        XCHACHA_CIPHERTEXT
    )
    # Counter 0 then skipping one block is the same stream.
    x = XChaCha20(XCHACHA_KEY, XCHACHA_NONCE)
    x.update(bytes(64))
    assert x.update(XCHACHA_CIPHERTEXT) == XCHACHA_PLAINTEXT
    record_vectors("draft-irtf-cfrg-xchacha A.3.2 (keystream and ciphertext)", 2, 2)


def test_xchacha20_matches_libsodium_aead() -> None:
    """PyNaCl has no raw XChaCha20 binding; its XChaCha20-Poly1305 ciphertext is the stream."""
    rng = random.Random(7)
    for length in (0, 1, 63, 64, 65, 1000):
        key, nonce, msg = rng.randbytes(32), rng.randbytes(24), rng.randbytes(length)
        sealed = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(msg, None, nonce, key)
        assert XChaCha20(key, nonce, counter=1).update(msg) == sealed[:-16]


# ------------------------------------------------------------------------ counter layout


def test_ietf_counter_layout() -> None:
    rng = random.Random(1)
    for counter in (0, 1, 0x01020304, 2**32 - 3):
        key, nonce = rng.randbytes(32), rng.randbytes(12)
        assert ChaCha20(key, nonce, counter=counter).update(bytes(192)) == ref_ietf(
            key, nonce, counter, 3
        )


@pytest.mark.parametrize(
    "counter", [0, 5, 2**32 - 2, 2**32 - 1, 2**32, 0x0000_0001_FFFF_FFFF, 2**64 - 3]
)
def test_djb_64_bit_counter_carries(counter: int) -> None:
    """Word 12 carries into word 13 (the kernel refuses to, so a new run starts there)."""
    rng = random.Random(counter)
    key, nonce = rng.randbytes(32), rng.randbytes(8)
    expected = ref_djb(key, nonce, counter, 3)
    assert ChaCha20(key, nonce, counter=counter).update(bytes(192)) == expected
    # Byte-granular pieces across the run boundary, and update_into.
    t = ChaCha20(key, nonce, counter=counter)
    out = bytearray(192)
    t.update_into(bytes(70), out)
    t.update_into(bytes(122), memoryview(out)[70:])
    assert bytes(out) == expected
    pieces = ChaCha20(key, nonce, counter=counter)
    assert b"".join(pieces.update(bytes(1)) for _ in range(192)) == expected


def test_xchacha20_counter_carries() -> None:
    key, nonce = bytes(range(32)), bytes(range(24))
    sub = hchacha20(key, nonce[:16])
    c = 2**32 - 1
    assert XChaCha20(key, nonce, counter=c).update(bytes(128)) == ref_djb(sub, nonce[16:], c, 2)


def test_ietf_limit() -> None:
    key, nonce = bytes(32), bytes(12)
    t = ChaCha20(key, nonce, counter=2**32 - 1)
    assert len(t.update(bytes(60))) == 60
    assert len(t.update(bytes(4))) == 4  # exactly the last block
    with pytest.raises(LimitExceededError, match="32-bit block counter") as first:
        t.update(b"x")
    assert isinstance(first.value, OverflowError)
    with pytest.raises(BrokenTransformError) as later:
        t.update(b"")
    assert later.value.__cause__ is first.value
    # A call that would cross the limit processes nothing.
    t = ChaCha20(key, nonce, counter=2**32 - 1)
    with pytest.raises(LimitExceededError):
        t.update_into(bytes(65), bytearray(65))
    assert ChaCha20(key, nonce, counter=2**32 - 2).update(bytes(128)) == ref_ietf(
        key, nonce, 2**32 - 2, 2
    )


def test_djb_limit() -> None:
    t = ChaCha20(bytes(32), bytes(8), counter=2**64 - 1)
    assert len(t.update(bytes(64))) == 64
    with pytest.raises(LimitExceededError, match="64-bit block counter"):
        t.update(b"x")


# ------------------------------------------------------------------ chunking properties


@pytest.mark.parametrize("kind", ["ietf", "djb", "xchacha"])
@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(0, 400),
    seed=st.integers(0, 2**32),
    near_run_end=st.booleans(),
)
def test_any_chunking_same_bytes(kind: str, size: int, seed: int, near_run_end: bool) -> None:
    """Any cut of the input (empty pieces included) gives the reference keystream XOR.

    Hypothesis picks the length (its byte strings stay short) and the seed; the bytes
    themselves do not matter to a keystream XOR.
    """
    rng = random.Random(seed)
    data = rng.randbytes(size)
    key, nonce12 = rng.randbytes(32), rng.randbytes(12)
    # Near the end of a 2**32-block run the 64-bit variants cross into the next run.
    counter = (2**32 - 1) if near_run_end and kind != "ietf" else rng.randrange(2**20)
    if kind == "ietf":
        factory = lambda: ChaCha20(key, nonce12, counter=counter)  # noqa: E731
    elif kind == "djb":
        nonce8 = rng.randbytes(8)
        factory = lambda: ChaCha20(key, nonce8, counter=counter)  # noqa: E731
    else:
        nonce24 = rng.randbytes(24)
        factory = lambda: XChaCha20(key, nonce24, counter=counter)  # noqa: E731
    whole = factory().update(data)
    assert factory().update(whole) == data
    blocks = -(-len(data) // 64)
    if kind == "ietf":
        keystream = ref_ietf(key, nonce12, counter, blocks)
    elif kind == "djb":
        keystream = ref_djb(key, nonce8, counter, blocks)
    else:
        keystream = ref_djb(hchacha20(key, nonce24[:16]), nonce24[16:], counter, blocks)
    assert whole == bytes(a ^ b for a, b in zip(data, keystream, strict=False))
    for into in (False, True):
        t = factory()
        out = bytearray()
        for i, piece in enumerate(random_splits(data, rng, 70)):
            chunk = (piece, bytearray(piece), memoryview(piece))[i % 3]
            if into:
                buf = bytearray(t.output_bound(len(piece)))
                assert t.update_into(chunk, buf) == len(piece)
                out += buf
            else:
                out += t.update(chunk)
        assert t.finalize() == b""
        assert bytes(out) == whole


# ----------------------------------------------------------------------------- misuse


def test_wrong_sizes_name_expected() -> None:
    for bad in (0, 16, 31, 33):
        with pytest.raises(InvalidKeySizeError, match=f"must be 32 bytes, got {bad}"):
            ChaCha20(bytes(bad), bytes(12))
        with pytest.raises(InvalidKeySizeError, match=f"must be 32 bytes, got {bad}"):
            XChaCha20(bytes(bad), bytes(24))
    for bad in (0, 7, 11, 13, 16, 24):
        with pytest.raises(InvalidNonceSizeError, match=f"12 bytes or 8 bytes, got {bad}"):
            ChaCha20(bytes(32), bytes(bad))
    for bad in (0, 8, 12, 23, 25):
        with pytest.raises(InvalidNonceSizeError, match=f"must be 24 bytes, got {bad}"):
            XChaCha20(bytes(32), bytes(bad))
    with pytest.raises(InvalidParameterError, match=re.escape("0..2**32-1")):
        ChaCha20(bytes(32), bytes(12), counter=2**32)
    with pytest.raises(InvalidParameterError, match=re.escape("0..2**64-1")):
        ChaCha20(bytes(32), bytes(8), counter=-1)
    with pytest.raises(InvalidParameterError):
        XChaCha20(bytes(32), bytes(24), counter=2**64)
    with pytest.raises(InvalidParameterError, match="output buffer of 10 bytes"):
        ChaCha20(bytes(32), bytes(12)).update_into(bytes(10), bytearray(9))


@pytest.mark.parametrize(
    "factory",
    [
        lambda: ChaCha20(bytes(32), bytes(12)),
        lambda: ChaCha20(bytes(32), bytes(8)),
        lambda: XChaCha20(bytes(32), bytes(24)),
    ],
)
def test_use_after_finalize(factory: Any) -> None:
    t = factory()
    t.update(b"abc")
    assert t.finalize() == b""
    with pytest.raises(AlreadyFinalizedError):
        t.update(b"x")
    with pytest.raises(AlreadyFinalizedError):
        t.update_into(b"x", bytearray(1))
    with pytest.raises(AlreadyFinalizedError):
        t.finalize()


def test_secret_key_names_and_repr() -> None:
    raw = bytes(range(7, 39))
    t = ChaCha20(SecretKey(raw), bytes(12))
    assert t.update(bytes(64)) == ChaCha20(raw, bytes(12)).update(bytes(64))
    assert t.name == "ChaCha20 (RFC 8439)"
    assert ChaCha20(raw, bytes(8)).name == "ChaCha20"
    x = XChaCha20(raw, bytes(24))
    assert x.name == "XChaCha20"
    for obj in (t, x):
        assert raw.hex() not in repr(obj) and "state=open" in repr(obj)
