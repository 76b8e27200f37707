"""cipherlib's rows: XOR, Salsa20/XSalsa20 (+ NaCl secretbox AEADs), AES-IGE, AES-PCBC.

Published vectors (cipherlib's and Go's Salsa20/XSalsa20 tests, the Salsa20 specification,
OpenSSL's igetest.c, RustCrypto's pcbc crate) and the real peers both ways: PyNaCl's
SecretBox for XSalsa20-Poly1305, tgcrypto (Telegram's AES-256-IGE).
"""

from __future__ import annotations

import random

import nacl.secret
import pytest
import tgcrypto
from support import random_splits

from streamcrypt.errors import (
    AlreadyFinalizedError,
    AuthenticationError,
    BrokenTransformError,
    FormatError,
    InvalidKeySizeError,
    InvalidNonceSizeError,
    InvalidPaddingError,
    InvalidParameterError,
    LimitExceededError,
)
from streamcrypt.primitives import Salsa20Poly1305, XSalsa20Poly1305, hsalsa20
from streamcrypt.primitives._xor import NATIVE_XOR_MIN, xor_bytes, xor_ints
from streamcrypt.primitives.hazmat import (
    AesCbcEncryptor,
    AesCtrEncryptor,
    AesIgeDecryptor,
    AesIgeEncryptor,
    AesPcbcDecryptor,
    AesPcbcEncryptor,
    ChaCha20,
    Salsa20,
    XorCipher,
    XSalsa20,
    xor,
)


def _run(transform: object, pieces: list[bytes]) -> bytes:
    out = b"".join(transform.update(p) for p in pieces)  # type: ignore[attr-defined]
    return out + transform.finalize()  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------- XOR


def test_xor_one_shot_and_stream_agree_under_any_chunking() -> None:
    rng = random.Random("xor")
    for n in range(0, 300, 7):
        key, data = rng.randbytes(rng.randint(1, 40)), rng.randbytes(n)
        expected = bytes(b ^ key[i % len(key)] for i, b in enumerate(data))
        assert xor(data, key) == expected
        assert _run(XorCipher(key), random_splits(data, rng)) == expected
        assert xor(expected, key) == data


def test_native_and_integer_xor_agree_across_the_threshold() -> None:
    rng = random.Random("xor-paths")
    for n in (0, 1, NATIVE_XOR_MIN - 1, NATIVE_XOR_MIN, NATIVE_XOR_MIN + 1, 100_000):
        a, b = rng.randbytes(n), rng.randbytes(n)
        expected = bytes(x ^ y for x, y in zip(a, b, strict=True))
        assert xor_bytes(a, b) == xor_ints(a, b) == expected


def test_xor_seek_and_errors() -> None:
    key = b"secret"
    data = bytes(range(100))
    cipher = XorCipher(key)
    cipher.seek(37)
    assert cipher.update(data[37:]) == xor(data, key)[37:]
    out = bytearray(10)
    assert XorCipher(key).update_into(data[:10], out) == 10
    assert bytes(out) == xor(data[:10], key)
    with pytest.raises(InvalidKeySizeError):
        XorCipher(b"")
    with pytest.raises(InvalidKeySizeError):
        xor(b"data", b"")
    with pytest.raises(InvalidParameterError):
        XorCipher(key).seek(-1)
    done = XorCipher(key)
    done.finalize()
    with pytest.raises(AlreadyFinalizedError):
        done.update(b"x")
    assert "secret" not in repr(XorCipher(key))


# ------------------------------------------------------------------------ Salsa20

# The Salsa20 specification's expansion examples (cipherlib's "Specification example"):
# key (1..16, 201..216) or (1..16), the 16 bytes 101..116 as nonce || counter.
SPEC_IN = bytes(range(101, 117))
SPEC_32 = bytes(
    [69, 37, 68, 39, 41, 15, 107, 193, 255, 139, 122, 6, 170, 233, 217, 98, 89, 144, 182, 106,
     21, 51, 200, 65, 239, 49, 222, 34, 215, 114, 40, 126, 104, 197, 7, 225, 197, 153, 31, 2,
     102, 78, 76, 176, 84, 245, 246, 184, 177, 160, 133, 130, 6, 72, 149, 119, 192, 195, 132,
     236, 234, 103, 246, 74]
)  # fmt: skip
SPEC_16 = bytes(
    [39, 173, 46, 248, 30, 200, 82, 17, 48, 67, 254, 239, 37, 18, 13, 247, 241, 200, 61, 144,
     10, 55, 50, 185, 6, 47, 246, 253, 143, 86, 187, 225, 134, 85, 110, 246, 161, 163, 43, 235,
     231, 94, 171, 51, 145, 214, 112, 29, 14, 232, 5, 16, 151, 140, 183, 141, 171, 9, 122, 181,
     104, 182, 177, 193]
)  # fmt: skip

# XSalsa20 vectors of Go's golang.org/x/crypto/salsa20 tests, as cipherlib carries them.
XKEY = bytes.fromhex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
XNONCE = b"@ABCDEFGHIJKLMNOPQRSTUVW"
SUNSCREEN = (
    b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the "
    b"future, sunscreen would be it."
)
XSALSA_VECTORS = [
    (
        b"this is 32-byte key for xsalsa20",
        b"24-byte nonce for xsalsa",
        b"Hello world!",
        "002d4513843fc240c401e541",
    ),
    (
        b"this is 32-byte key for xsalsa20",
        b"24-byte nonce for xsalsa",
        bytes(64),
        "4848297feb1fb52fb66d81609bd547fabcbe7026edc8b5e5e449d088bfa69c088f5d8da1d791267c2c195a7f8cae9c4b4050d08ce6d3a151ec265f3a58e47648",
    ),
    (
        XKEY,
        XNONCE,
        SUNSCREEN,
        "f19dd4a85bbc672fac7ba3fed500022ef550d633721cea0ee4a241ebe57c3a5491855bab6a8df5a62cd6d942874931652431fb0512fdc1f83dfbc66e83b5a4f6427a817ce982d4f269d043468dbf30222d7a17ccdd05d65568e90f81c1b06ee9ff83df1f1acaaa5e9bba43e4c99ac3094e2e",
    ),
    (
        XKEY,
        XNONCE,
        bytes(128),
        "bdfcb0c13ecf474ec21f83b9b06e7642903db35d52738c2e90ca24cb86105b27e2a534cd4aaacc9f16f69024a70011064b4497613292a79e5889e617ecc084992c16f85c86ecb1d21db93366ebd04202591272ecbb70a2201a8c23a1b2c5009a9cf1ba7a74eadd31eed627c4abffe3603a00a019c3db0622439287d951e3c685",
    ),
]


@pytest.mark.parametrize(
    ("key", "expected"),
    [(bytes(range(1, 17)) + bytes(range(201, 217)), SPEC_32), (bytes(range(1, 17)), SPEC_16)],
    ids=["256-bit", "128-bit"],
)
def test_salsa20_specification_examples(key: bytes, expected: bytes) -> None:
    counter = int.from_bytes(SPEC_IN[8:], "little")
    assert Salsa20(key, SPEC_IN[:8], counter=counter).update(bytes(64)) == expected
    # the same block reached by seeking from counter 0
    stream = Salsa20(key, SPEC_IN[:8])
    stream.seek(counter * 64)
    assert stream.update(bytes(64)) == expected


@pytest.mark.parametrize(("key", "nonce", "plain", "cipher"), XSALSA_VECTORS)
def test_xsalsa20_published_vectors(key: bytes, nonce: bytes, plain: bytes, cipher: str) -> None:
    assert _run(XSalsa20(key, nonce), [plain]).hex() == cipher
    assert _run(XSalsa20(key, nonce), [bytes.fromhex(cipher)]) == plain


@pytest.mark.parametrize("cls", [Salsa20, XSalsa20])
def test_salsa_any_chunking_seek_and_update_into(cls: type[Salsa20]) -> None:
    rng = random.Random(cls.__name__)
    key, nonce = rng.randbytes(32), rng.randbytes(cls.nonce_size)
    data = rng.randbytes(5000)
    whole = cls(key, nonce).update(data)
    assert _run(cls(key, nonce), random_splits(data, rng)) == whole
    for offset in (0, 1, 63, 64, 65, 4097):
        stream = cls(key, nonce)
        stream.seek(offset)
        assert stream.update(data[offset:]) == whole[offset:]
    out = bytearray(len(data))
    assert cls(key, nonce).update_into(data, out) == len(data)
    assert bytes(out) == whole


def test_xsalsa20_is_secretbox_keystream_and_hsalsa20() -> None:
    """XSalsa20 = Salsa20 under the HSalsa20 subkey; its keystream from byte 32 is what
    libsodium's secretbox XORs in."""
    rng = random.Random("xsalsa-secretbox")
    for n in range(0, 400, 13):
        key, nonce, msg = rng.randbytes(32), rng.randbytes(24), rng.randbytes(n)
        box = nacl.secret.SecretBox(key).encrypt(msg, nonce).ciphertext
        assert XSalsa20(key, nonce).update(bytes(32) + msg)[32:] == box[16:]
        sub = hsalsa20(key, nonce[:16])
        assert Salsa20(sub, nonce[16:]).update(msg) == XSalsa20(key, nonce).update(msg)


def test_salsa_limits_and_errors() -> None:
    with pytest.raises(InvalidKeySizeError):
        Salsa20(bytes(24), bytes(8))
    with pytest.raises(InvalidKeySizeError):
        XSalsa20(bytes(16), bytes(24))
    with pytest.raises(InvalidNonceSizeError):
        Salsa20(bytes(32), bytes(12))
    with pytest.raises(InvalidNonceSizeError):
        XSalsa20(bytes(32), bytes(8))
    with pytest.raises(InvalidParameterError):
        Salsa20(bytes(32), bytes(8), counter=1 << 64)
    last = Salsa20(bytes(32), bytes(8), counter=(1 << 64) - 1)
    assert len(last.update(bytes(64))) == 64  # the very last block
    with pytest.raises(LimitExceededError):
        last.update(b"x")  # the counter would wrap: refused, never reused
    with pytest.raises(InvalidParameterError):
        Salsa20(bytes(32), bytes(8)).seek(-1)


# ------------------------------------------------------------ secretbox AEADs


def test_xsalsa20_poly1305_is_nacl_secretbox_both_ways() -> None:
    rng = random.Random("secretbox")
    for n in range(0, 1200, 11):
        key, nonce, msg = rng.randbytes(32), rng.randbytes(24), rng.randbytes(n)
        box = nacl.secret.SecretBox(key)
        sealed = XSalsa20Poly1305(key).seal(nonce, msg)
        assert sealed == box.encrypt(msg, nonce).ciphertext
        assert box.decrypt(sealed, nonce) == msg  # seal here, open there
        assert XSalsa20Poly1305(key).open(nonce, box.encrypt(msg, nonce).ciphertext) == msg
        # the composed Salsa20-Poly1305 under the HSalsa20 subkey is the same construction
        salsa = Salsa20Poly1305(hsalsa20(key, nonce[:16]))
        assert salsa.seal(nonce[16:], msg) == sealed
        assert salsa.open(nonce[16:], sealed) == msg


@pytest.mark.parametrize("cls", [Salsa20Poly1305, XSalsa20Poly1305])
def test_secretbox_bad_input_gets_typed_errors(cls: type[Salsa20Poly1305]) -> None:
    key, nonce = bytes(range(32)), bytes(cls.nonce_size)
    sealed = cls(key).seal(nonce, b"attack at dawn")
    for bad in (
        bytes([sealed[0] ^ 1]) + sealed[1:],  # tag
        sealed[:-1] + bytes([sealed[-1] ^ 1]),  # ciphertext
        sealed[:-1],  # truncated
        sealed[:15],  # shorter than a tag
    ):
        with pytest.raises(AuthenticationError):
            cls(key).open(nonce, bad)
    with pytest.raises(AuthenticationError):
        cls(bytes(32)).open(nonce, sealed)
    with pytest.raises(InvalidParameterError):
        cls(key).seal(nonce, b"x", b"aad")  # secretbox has no associated data
    with pytest.raises(InvalidNonceSizeError):
        cls(key).seal(bytes(12), b"x")
    with pytest.raises(InvalidKeySizeError):
        cls(bytes(31))
    assert "hidden" in repr(cls(key))


def test_salsa20_poly1305_takes_128_bit_keys() -> None:
    aead = Salsa20Poly1305(bytes(range(16)))
    sealed = aead.seal(bytes(8), b"hello")
    assert aead.open(bytes(8), sealed) == b"hello"
    stream = Salsa20(bytes(range(16)), bytes(8))
    mac_key = stream.update(bytes(32))
    assert sealed[16:] == bytes(
        a ^ b for a, b in zip(stream.update(bytes(5)), b"hello", strict=True)
    )
    assert len(mac_key) == 32


# ------------------------------------------------------------------------ AES-IGE

# OpenSSL's test/igetest.c (the IGE specification's vectors), AES-128.
IGE_VECTORS = [
    (
        bytes(range(16)),
        bytes(range(32)),
        bytes(32),
        "1a8519a6557be652e9da8e43da4ef4453cf456b4ca488aa383c79c98b34797cb",
    ),
    (
        b"This is an imple",
        b"mentation of IGE mode for OpenSS",
        bytes.fromhex("99706487a1cde613bc6de0b6f24b1c7aa448c8b9c3403e3467a8cad89340f53b"),
        b"L. Let's hope Ben got it right!\n".hex(),
    ),
]


@pytest.mark.parametrize(("key", "iv", "plain", "cipher"), IGE_VECTORS)
def test_ige_openssl_vectors(key: bytes, iv: bytes, plain: bytes, cipher: str) -> None:
    assert _run(AesIgeEncryptor(key, iv, padding=False), [plain]).hex() == cipher
    assert _run(AesIgeDecryptor(key, iv, padding=False), [bytes.fromhex(cipher)]) == plain


def test_ige_256_matches_tgcrypto_both_ways() -> None:
    rng = random.Random("ige-tgcrypto")
    for i in range(400):
        key, iv = rng.randbytes(32), rng.randbytes(32)
        data = rng.randbytes(16 * rng.randint(1, 60))
        theirs = tgcrypto.ige256_encrypt(data, key, iv)
        ours = _run(AesIgeEncryptor(key, iv, padding=False), random_splits(data, rng))
        assert ours == theirs, i
        assert tgcrypto.ige256_decrypt(ours, key, iv) == data  # encrypt here, decrypt there
        assert _run(AesIgeDecryptor(key, iv, padding=False), random_splits(theirs, rng)) == data


# ----------------------------------------------------------------------- AES-PCBC

# RustCrypto's pcbc crate: tests/data/aes128.blb and its documentation example.
PCBC_VECTORS = [
    (
        bytes(range(16)),
        bytes(range(16, 32)),
        bytes(32)
        + bytes.fromhex("99706487a1cde613bc6de0b6f24b1c7aa448c8b9c3403e3467a8cad89340f53b"),
        "07feef74e1d5036e900eee118e94929389cf8408250bf8c4ac9a44865364b837"
        "54e0432cead98fa7ca5db40858ed9e27532dd30e15e74d9a0c8483a6d8b73268",
        False,
    ),
    (
        bytes([0x42]) * 16,
        bytes([0x24]) * 16,
        b"hello world! this is my plaintext.",
        "c7fe247ef97b21f07cbdd26cb5d346bfab13156d0b2f05f91c4837db5157bad5"
        "62cb0b6fa7816e254a2fc8d852fb4315",
        True,
    ),
]


@pytest.mark.parametrize(("key", "iv", "plain", "cipher", "padding"), PCBC_VECTORS)
def test_pcbc_published_vectors(
    key: bytes, iv: bytes, plain: bytes, cipher: str, padding: bool
) -> None:
    assert _run(AesPcbcEncryptor(key, iv, padding=padding), [plain]).hex() == cipher
    assert _run(AesPcbcDecryptor(key, iv, padding=padding), [bytes.fromhex(cipher)]) == plain


def _pcbc_reference(key: bytes, iv: bytes, data: bytes) -> bytes:
    """PCBC by its definition, block by block on AES-ECB (the reference for the test)."""
    out, prev = [], iv
    for off in range(0, len(data), 16):
        block = data[off : off + 16]
        x = bytes(a ^ b for a, b in zip(block, prev, strict=True))
        c = _run(AesCbcEncryptor(key, bytes(16), padding=False), [x])
        out.append(c)
        prev = bytes(a ^ b for a, b in zip(block, c, strict=True))
    return b"".join(out)


@pytest.mark.parametrize("key_size", [16, 24, 32])
def test_legacy_modes_any_chunking_all_key_sizes(key_size: int) -> None:
    rng = random.Random(f"legacy-{key_size}")
    for n in [*range(70), 1000, 4096]:
        key, iv32, data = rng.randbytes(key_size), rng.randbytes(32), rng.randbytes(n)
        for enc, dec, iv in (
            (AesIgeEncryptor, AesIgeDecryptor, iv32),
            (AesPcbcEncryptor, AesPcbcDecryptor, iv32[:16]),
        ):
            ct = _run(enc(key, iv), random_splits(data, rng))
            assert len(ct) == (n // 16 + 1) * 16  # PKCS#7 always pads
            assert _run(dec(key, iv), random_splits(ct, rng)) == data
        whole = data[: n - n % 16]
        assert _run(AesPcbcEncryptor(key, iv32[:16], padding=False), [whole]) == _pcbc_reference(
            key, iv32[:16], whole
        )


@pytest.mark.parametrize(
    ("enc", "dec", "iv_size"),
    [(AesIgeEncryptor, AesIgeDecryptor, 32), (AesPcbcEncryptor, AesPcbcDecryptor, 16)],
)
def test_legacy_modes_bad_input_gets_typed_errors(enc: type, dec: type, iv_size: int) -> None:
    key, iv = bytes(range(32)), bytes(iv_size)
    with pytest.raises(InvalidKeySizeError):
        enc(bytes(20), iv)
    with pytest.raises(InvalidNonceSizeError):
        enc(key, bytes(iv_size - 1))
    with pytest.raises(InvalidParameterError):
        _run(enc(key, iv, padding=False), [b"not whole blocks"[:15]])
    ct = _run(enc(key, iv), [b"attack at dawn"])
    with pytest.raises(FormatError):
        _run(dec(key, iv), [ct[:-1]])  # truncated
    with pytest.raises(InvalidPaddingError):
        _run(dec(bytes(32), iv), [ct])  # wrong key: garbage padding (1 in ~256 passes)
    with pytest.raises(InvalidPaddingError):
        _run(dec(key, iv), [b""])  # empty
    assert enc(key, iv).name == f"AES-256-{enc.mode}"


@pytest.mark.parametrize(
    "make",
    [
        lambda: AesCtrEncryptor(bytes(32), bytes(16)),
        lambda: ChaCha20(bytes(32), bytes(12)),
        lambda: Salsa20(bytes(32), bytes(8)),
        lambda: XorCipher(b"k"),
    ],
    ids=["aes-ctr", "chacha20", "salsa20", "xor"],
)
def test_the_stream_ciphers_share_one_set_of_verbs(make: object) -> None:
    """AES's modes, ChaCha20, Salsa20 and XOR run one update/update_into/finalize: a short
    ``out`` is refused naming the size and breaks the cipher; finalize ends it."""
    cipher = make()  # type: ignore[operator]
    assert len(cipher.update(b"abc")) == 3
    with pytest.raises(InvalidParameterError, match="output buffer of 4 bytes"):
        cipher.update_into(b"four", bytearray(3))
    with pytest.raises(BrokenTransformError):
        cipher.update(b"x")
    done = make()  # type: ignore[operator]
    out = bytearray(4)
    assert done.update_into(b"four", out) == 4
    assert done.finalize() == b""
    with pytest.raises(AlreadyFinalizedError):
        done.update(b"x")
