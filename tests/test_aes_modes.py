"""AES mode transforms: NIST CAVP and Wycheproof vectors, chunking properties, misuse."""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

import cryptography_vectors
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import random_splits, record_vectors, wycheproof, wycheproof_cases

from streamcrypt.errors import (
    AlreadyFinalizedError,
    AuthenticationError,
    BrokenTransformError,
    FormatError,
    InvalidKeySizeError,
    InvalidNonceSizeError,
    InvalidPaddingError,
    InvalidParameterError,
    InvalidTagSizeError,
    LimitExceededError,
    TruncatedStreamError,
)
from streamcrypt.keys import SecretKey
from streamcrypt.primitives import AesGcmDecryptor, AesGcmEncryptor, AesTransform
from streamcrypt.primitives._aes import XTS_MAX_UNIT, _xts_composed
from streamcrypt.primitives.hazmat import (
    AesCbcDecryptor,
    AesCbcEncryptor,
    AesCfb8Decryptor,
    AesCfb8Encryptor,
    AesCfbDecryptor,
    AesCfbEncryptor,
    AesCtrDecryptor,
    AesCtrEncryptor,
    AesEcbDecryptor,
    AesEcbEncryptor,
    AesOfbDecryptor,
    AesOfbEncryptor,
    AesXtsDecryptor,
    AesXtsEncryptor,
    xts_tweak,
)

# ----------------------------------------------------------------------------- helpers

Factory = Callable[[bytes, bytes], AesTransform]

#: mode -> (encryptor, decryptor) from (key, iv); block modes without padding, as CAVP uses.
MODES: dict[str, tuple[Factory, Factory]] = {
    "ECB": (
        lambda k, _iv: AesEcbEncryptor(k, padding=False),
        lambda k, _iv: AesEcbDecryptor(k, padding=False),
    ),
    "CBC": (
        lambda k, iv: AesCbcEncryptor(k, iv, padding=False),
        lambda k, iv: AesCbcDecryptor(k, iv, padding=False),
    ),
    "CTR": (AesCtrEncryptor, AesCtrDecryptor),
    "CFB": (AesCfbEncryptor, AesCfbDecryptor),
    "CFB8": (AesCfb8Encryptor, AesCfb8Decryptor),
    "OFB": (AesOfbEncryptor, AesOfbDecryptor),
    "XTS": (AesXtsEncryptor, AesXtsDecryptor),
}


def run(t: Any, data: bytes) -> bytes:
    """One update and finalize."""
    out: bytes = t.update(data) + t.finalize()
    return out


def feed(t: Any, pieces: list[bytes], *, into: bool) -> bytes:
    """Feed pieces through update (or update_into a right-sized buffer), then finalize."""
    out = bytearray()
    for i, piece in enumerate(pieces):
        chunk: bytes | bytearray | memoryview = (piece, bytearray(piece), memoryview(piece))[i % 3]
        if into:
            buf = bytearray(t.output_bound(len(piece)))
            n = t.update_into(chunk, buf)
            out += buf[:n]
        else:
            out += t.update(chunk)
    out += t.finalize()
    return bytes(out)


# --------------------------------------------------------------------- NIST CAVP vectors


def cavp_records(path: str) -> tuple[list[dict[str, Any]], int]:
    """Records of a CAVP file (keys lower-cased, with 'section' and bracket params) and the
    number of COUNT lines the file holds, counted independently of the parser."""
    with cryptography_vectors.open_vector_file(path, "r") as f:
        text = f.read()
    expected = len(re.findall(r"^count\s*=", text, re.I | re.M))
    records: list[dict[str, Any]] = []
    params: dict[str, str] = {}
    section = ""
    current: dict[str, Any] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            body = line.strip("[]")
            if "=" in body:
                name, value = (x.strip() for x in body.split("=", 1))
                params[name.lower()] = value
            else:
                section, params = body, {}
            continue
        if line == "FAIL":
            assert current is not None
            current["fail"] = True
            continue
        name, value = (x.strip() for x in line.split("=", 1))
        if name.lower() == "count":
            current = {"section": section, **params}
            records.append(current)
        assert current is not None, f"{path}: value before the first COUNT"
        current[name.lower()] = value
    return records, expected


def h(record: dict[str, Any], name: str) -> bytes:
    return bytes.fromhex(record.get(name, ""))


KAT_FILES = [
    (mode, f"ciphers/AES/{folder}/{prefix}{kind}{bits}.rsp")
    for mode, folder, prefix in [
        ("ECB", "ECB", "ECB"),
        ("CBC", "CBC", "CBC"),
        ("CFB8", "CFB", "CFB8"),
        ("CFB", "CFB", "CFB128"),
        ("OFB", "OFB", "OFB"),
    ]
    for kind in ["GFSbox", "KeySbox", "VarKey", "VarTxt", "MMT"]
    for bits in (128, 192, 256)
]


@pytest.mark.parametrize(("mode", "path"), KAT_FILES, ids=[p for _, p in KAT_FILES])
def test_cavp_kat_and_mmt(mode: str, path: str) -> None:
    records, expected = cavp_records(path)
    enc, dec = MODES[mode]
    ran = 0
    for r in records:
        key, iv, pt, ct = h(r, "key"), h(r, "iv"), h(r, "plaintext"), h(r, "ciphertext")
        if r["section"] == "ENCRYPT":
            assert run(enc(key, iv), pt) == ct, f"{path} COUNT {r['count']}"
        else:
            assert r["section"] == "DECRYPT"
            assert run(dec(key, iv), ct) == pt, f"{path} COUNT {r['count']}"
        ran += 1
    record_vectors(f"CAVP {path}", ran, expected)


@pytest.mark.parametrize("bits", [128, 192, 256])
def test_cavp_ctr(bits: int) -> None:
    path = f"ciphers/AES/CTR/aes-{bits}-ctr.txt"
    records, expected = cavp_records(path)
    ran = 0
    for r in records:
        key, iv, pt, ct = h(r, "key"), h(r, "iv"), h(r, "plaintext"), h(r, "ciphertext")
        assert r["section"] == "ENCRYPT"
        assert run(AesCtrEncryptor(key, iv), pt) == ct
        assert run(AesCtrDecryptor(key, iv), ct) == pt
        ran += 1
    record_vectors(f"CAVP {path} (RFC 3686)", ran, expected)


XTS_FILES = [
    f"ciphers/AES/XTS/{tweak}/XTSGenAES{bits}.rsp"
    for tweak in ("tweak-128hexstr", "tweak-dataunitseqno")
    for bits in (128, 256)
]


@pytest.mark.parametrize("path", XTS_FILES)
def test_cavp_xts(path: str) -> None:
    """Byte-aligned data units only: the 130-bit units have no byte-oriented equivalent."""
    records, total = cavp_records(path)
    usable = [r for r in records if int(r["dataunitlen"]) % 8 == 0]
    ran = 0
    for r in usable:
        key, pt, ct = h(r, "key"), h(r, "pt"), h(r, "ct")
        tweak = h(r, "i") if "i" in r else xts_tweak(int(r["dataunitseqnumber"]))
        if r["section"] == "ENCRYPT":
            assert run(AesXtsEncryptor(key, tweak), pt) == ct, f"{path} COUNT {r['count']}"
        else:
            assert run(AesXtsDecryptor(key, tweak), ct) == pt, f"{path} COUNT {r['count']}"
        ran += 1
    assert len(records) == total and 0 < len(usable) < total
    record_vectors(f"CAVP {path} ({len(usable)} byte-aligned of {total})", ran, len(usable))


GCM_FILES = [
    f"ciphers/AES/GCM/{kind}{bits}.rsp"
    for kind in ("gcmEncryptExtIV", "gcmDecrypt")
    for bits in (128, 192, 256)
]


@pytest.mark.parametrize("path", [p for p in GCM_FILES if "Encrypt" in p])
def test_cavp_gcm_encrypt_truncated_tags(path: str) -> None:
    """Encryption against every 96-bit-IV record: the tag is compared on its Taglen bits."""
    records, total = cavp_records(path)
    usable = [r for r in records if r["ivlen"] == "96"]
    ran = 0
    for r in usable:
        key, iv, aad, pt = h(r, "key"), h(r, "iv"), h(r, "aad"), h(r, "pt")
        sealed = run(AesGcmEncryptor(key, iv, aad=aad), pt)
        tag = h(r, "tag")
        assert len(tag) * 8 == int(r["taglen"])
        assert sealed[: len(pt)] == h(r, "ct") and sealed[len(pt) :][: len(tag)] == tag
        ran += 1
    record_vectors(
        f"CAVP {path} ({len(usable)} with 96-bit IV, any tag length, of {total})",
        ran,
        len(usable),
    )


@pytest.mark.parametrize("path", GCM_FILES)
def test_cavp_gcm(path: str) -> None:
    """96-bit IVs and 128-bit tags only: the transforms take exactly those."""
    records, total = cavp_records(path)
    usable = [r for r in records if r["ivlen"] == "96" and r["taglen"] == "128"]
    ran = rejected = 0
    for r in usable:
        key, iv, aad = h(r, "key"), h(r, "iv"), h(r, "aad")
        ct, tag = h(r, "ct"), h(r, "tag")
        if "Encrypt" in path:
            pt = h(r, "pt")
            assert run(AesGcmEncryptor(key, iv, aad=aad), pt) == ct + tag
        # Inline tag, streamed in two pieces; and a detached tag.
        d = AesGcmDecryptor(key, iv, aad=aad)
        half = len(ct) // 2
        assert d.update(ct[:half]) == b""
        assert d.update(ct[half:] + tag) == b""
        detached = AesGcmDecryptor(key, iv, aad=aad, tag=tag)
        assert detached.update(ct) == b""
        if r.get("fail"):
            with pytest.raises(AuthenticationError):
                d.finalize()
            with pytest.raises(AuthenticationError):
                detached.finalize()
            rejected += 1
        else:
            assert d.finalize() == h(r, "pt")
            assert detached.finalize() == h(r, "pt")
        ran += 1
    assert ran > 0
    if "Decrypt" in path:
        assert rejected > 0
    record_vectors(
        f"CAVP {path} ({len(usable)} with 96-bit IV and 128-bit tag of {total})",
        ran,
        len(usable),
    )


# ---------------------------------------------------------------------- Wycheproof


def test_wycheproof_aes_cbc_pkcs5() -> None:
    data = wycheproof("aes_cbc_pkcs5_test.json")
    ran = 0
    for _group, t in wycheproof_cases(data):
        key, iv, msg, ct = (bytes.fromhex(t[k]) for k in ("key", "iv", "msg", "ct"))
        if t["result"] == "valid":
            assert run(AesCbcEncryptor(key, iv), msg) == ct, t["tcId"]
            assert run(AesCbcDecryptor(key, iv), ct) == msg, t["tcId"]
            assert feed(AesCbcDecryptor(key, iv), [ct[:17], ct[17:]], into=True) == msg
        else:
            assert t["result"] == "invalid"
            assert {"BadPadding", "NoPadding"} & set(t["flags"]), t["tcId"]
            d = AesCbcDecryptor(key, iv)
            released = d.update(ct)
            with pytest.raises(InvalidPaddingError):
                d.finalize()
            assert len(released) == max(0, len(ct) - 16)  # never the padding block
        ran += 1
    record_vectors("wycheproof/aes_cbc_pkcs5_test.json", ran, data["numberOfTests"])


def test_wycheproof_aes_xts() -> None:
    """All 123 cases are valid (flag Pseudorandom: correctness and ciphertext stealing).

    The IV is the tweak's low bytes: a little-endian data-unit number of ``ivSize`` bits,
    so ``xts_tweak`` of its value is the 16-byte tweak. Keys are 2 x 128, 2 x 192 (composed
    from the ECB kernel, as OpenSSL has no AES-192-XTS) and 2 x 256 bits.
    """
    data = wycheproof("aes_xts_test.json")
    ran = invalid = 0
    for _group, t in wycheproof_cases(data):
        key, iv, msg, ct = (bytes.fromhex(t[k]) for k in ("key", "iv", "msg", "ct"))
        tweak = xts_tweak(int.from_bytes(iv, "little"))
        if t["result"] == "valid":
            assert run(AesXtsEncryptor(key, tweak), msg) == ct, t["tcId"]
            assert feed(AesXtsDecryptor(key, tweak), [ct[:5], b"", ct[5:]], into=True) == msg
        else:  # none in this file version; would have to be refused
            invalid += 1
            with pytest.raises((InvalidParameterError, FormatError)):
                run(AesXtsDecryptor(key, tweak), ct)
        ran += 1
    assert invalid == 0
    record_vectors("wycheproof/aes_xts_test.json", ran, data["numberOfTests"])


@pytest.mark.parametrize("key_size", [32, 64])
def test_xts_composed_matches_kernel(key_size: int) -> None:
    """The ECB-composed XTS (used for AES-192) agrees with OpenSSL's XTS on 128 and 256."""
    rng = random.Random(key_size)
    for length in [16, 17, 31, 32, 33, 47, 48, 100, 255, 4096 + 7]:
        key, tweak = rng.randbytes(key_size), rng.randbytes(16)
        pt = rng.randbytes(length)
        ct = run(AesXtsEncryptor(key, tweak), pt)
        assert _xts_composed(key, tweak, pt, True) == ct
        assert _xts_composed(key, tweak, ct, False) == pt


# ---------------------------------------------------------------- chunking properties

KEY_SIZES = (16, 24, 32)

#: name -> (encryptor, decryptor, plaintext shaping) for every AES transform.
ROUNDTRIP: dict[str, tuple[Factory, Factory, Callable[[bytes], bytes]]] = {
    "ECB-pad": (lambda k, _iv: AesEcbEncryptor(k), lambda k, _iv: AesEcbDecryptor(k), lambda p: p),
    "CBC-pad": (AesCbcEncryptor, AesCbcDecryptor, lambda p: p),
    "ECB-raw": (*MODES["ECB"], lambda p: p[: len(p) // 16 * 16]),
    "CBC-raw": (*MODES["CBC"], lambda p: p[: len(p) // 16 * 16]),
    "CTR": (*MODES["CTR"], lambda p: p),
    "CFB": (*MODES["CFB"], lambda p: p),
    "CFB8": (*MODES["CFB8"], lambda p: p),
    "OFB": (*MODES["OFB"], lambda p: p),
    "XTS": (*MODES["XTS"], lambda p: p + bytes(max(0, 16 - len(p)))),
}


@pytest.mark.parametrize("name", list(ROUNDTRIP))
@settings(max_examples=40, deadline=None)
@given(size=st.integers(0, 300), seed=st.integers(0, 2**32), ks=st.sampled_from([0, 1, 2]))
def test_any_chunking_same_bytes(name: str, size: int, seed: int, ks: int) -> None:
    """Any cut of the input (empty pieces included) gives the bytes of one call.

    Hypothesis picks the length (its byte strings stay short) and the seed of the data,
    keys and cuts.
    """
    rng = random.Random(seed)
    data = rng.randbytes(size)
    enc, dec, shape = ROUNDTRIP[name]
    pt = shape(data)
    key_size = KEY_SIZES[ks] * (2 if name == "XTS" else 1)
    key, iv = rng.randbytes(key_size), rng.randbytes(0 if name.startswith("ECB") else 16)
    if name == "XTS":
        key = key[: key_size // 2] + bytes(b ^ 0xFF for b in key[: key_size // 2])
    ct = run(enc(key, iv), pt)
    assert run(dec(key, iv), ct) == pt
    for into in (False, True):
        assert feed(enc(key, iv), random_splits(pt, rng, 40), into=into) == ct
        assert feed(dec(key, iv), random_splits(ct, rng, 40), into=into) == pt


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(0, 300),
    aad=st.binary(max_size=40),
    seed=st.integers(0, 2**32),
    ks=st.sampled_from(KEY_SIZES),
)
def test_gcm_any_chunking(size: int, aad: bytes, seed: int, ks: int) -> None:
    rng = random.Random(seed)
    pt = rng.randbytes(size)
    key, nonce = rng.randbytes(ks), rng.randbytes(12)
    sealed = run(AesGcmEncryptor(key, nonce, aad=aad), pt)
    assert len(sealed) == len(pt) + 16
    for into in (False, True):
        assert (
            feed(AesGcmEncryptor(key, nonce, aad=aad), random_splits(pt, rng, 40), into=into)
            == sealed
        )
        # Default: nothing before the tag verifies, everything at finalize.
        d = AesGcmDecryptor(key, nonce, aad=aad)
        for piece in random_splits(sealed, rng, 40):
            if into:
                assert d.update_into(piece, bytearray(d.output_bound(len(piece)))) == 0
            else:
                assert d.update(piece) == b""
        assert d.finalize() == pt
        # Detached tag.
        d = AesGcmDecryptor(key, nonce, aad=aad, tag=sealed[-16:])
        assert feed(d, random_splits(sealed[:-16], rng, 40), into=into) == pt
        # Opt-in early release: same bytes, whatever the cuts.
        for tag in (None, sealed[-16:]):
            body = sealed if tag is None else sealed[:-16]
            d = AesGcmDecryptor(key, nonce, aad=aad, tag=tag, release_unverified_plaintext=True)
            assert feed(d, random_splits(body, rng, 40), into=into) == pt


# ------------------------------------------------------------------------- negatives


def every_constructor() -> Iterator[tuple[str, Callable[..., Any], int, int]]:
    """(name, constructor taking (key, iv), good key size, good iv size)."""
    for mode, (enc, dec) in MODES.items():
        ks, ivs = (64, 16) if mode == "XTS" else (32, 0 if mode == "ECB" else 16)
        yield f"{mode}-enc", enc, ks, ivs
        yield f"{mode}-dec", dec, ks, ivs
    yield "GCM-enc", AesGcmEncryptor, 32, 12
    yield "GCM-dec", AesGcmDecryptor, 32, 12


CONSTRUCTORS = list(every_constructor())


@pytest.mark.parametrize(
    ("name", "make", "ks", "ivs"), CONSTRUCTORS, ids=[c[0] for c in CONSTRUCTORS]
)
def test_wrong_key_size_names_expected(
    name: str, make: Callable[..., Any], ks: int, ivs: int
) -> None:
    for bad in (0, 15, 17, 33, 128):
        with pytest.raises(InvalidKeySizeError) as info:
            make(bytes(range(bad)), bytes(ivs))
        assert isinstance(info.value, ValueError)
        expected = "32, 48 or 64 bytes" if name.startswith("XTS") else "16, 24 or 32 bytes"
        assert expected in str(info.value)
        assert f"got {bad}" in str(info.value)


@pytest.mark.parametrize(
    ("name", "make", "ks", "ivs"), CONSTRUCTORS, ids=[c[0] for c in CONSTRUCTORS]
)
def test_wrong_iv_size_names_expected(
    name: str, make: Callable[..., Any], ks: int, ivs: int
) -> None:
    if name.startswith("ECB"):  # ECB takes no IV at all
        with pytest.raises(TypeError):
            AesEcbEncryptor(bytes(32), bytes(16))  # type: ignore[misc]
        return
    key = bytes(range(ks))
    for bad in (0, ivs - 1, ivs + 1, 32 if ivs != 32 else 33):
        with pytest.raises(InvalidNonceSizeError) as info:
            make(key, bytes(bad))
        assert f"must be {ivs} bytes, got {bad}" in str(info.value)


def test_secret_key_and_repr() -> None:
    raw = bytes(range(100, 132))
    t = AesCbcEncryptor(SecretKey(raw), bytes(16))
    assert t.name == "AES-256-CBC"
    assert raw.hex() not in repr(t) and "state=open" in repr(t)
    assert AesXtsEncryptor(bytes(range(64)), bytes(16)).name == "AES-256-XTS"
    assert AesXtsEncryptor(bytes(range(48)), bytes(16)).name == "AES-192-XTS"
    assert AesGcmEncryptor(bytes(16), bytes(12)).name == "AES-128-GCM"


@pytest.mark.parametrize(
    ("name", "make", "ks", "ivs"), CONSTRUCTORS, ids=[c[0] for c in CONSTRUCTORS]
)
def test_use_after_finalize(name: str, make: Callable[..., Any], ks: int, ivs: int) -> None:
    t = make(bytes(range(ks)), bytes(ivs))
    if name == "GCM-dec":
        t.update(run(AesGcmEncryptor(bytes(range(ks)), bytes(ivs)), b"x" * 32))
    else:
        t.update(bytes(32))
    t.finalize()
    with pytest.raises(AlreadyFinalizedError):
        t.update(b"x")
    with pytest.raises(AlreadyFinalizedError):
        t.update_into(b"x", bytearray(64))
    with pytest.raises(AlreadyFinalizedError):
        t.finalize()
    assert "state=finalized" in repr(t)


def test_bad_padding_breaks_the_transform() -> None:
    key, iv = bytes(16), bytes(16)
    ct = run(AesCbcEncryptor(key, iv, padding=False), bytes(15) + b"\x11")  # pad byte 17
    d = AesCbcDecryptor(key, iv)
    assert d.update(ct) == b""
    with pytest.raises(InvalidPaddingError) as first:
        d.finalize()
    assert "PKCS#7" in str(first.value)
    with pytest.raises(BrokenTransformError) as later:
        d.update(b"more")
    assert later.value.__cause__ is first.value
    with pytest.raises(BrokenTransformError):
        d.finalize()


def test_block_length_errors() -> None:
    key, iv = bytes(16), bytes(16)
    e = AesCbcEncryptor(key, iv, padding=False)
    e.update(bytes(20))
    with pytest.raises(InvalidParameterError, match="multiple of 16"):
        e.finalize()
    for pad in (True, False):
        d = AesCbcDecryptor(key, iv, padding=pad)
        d.update(bytes(33))
        with pytest.raises(FormatError, match="whole number of 16-byte blocks"):
            d.finalize()
    with pytest.raises(InvalidPaddingError, match="empty"):
        AesEcbDecryptor(key).finalize()
    assert run(AesEcbDecryptor(key, padding=False), b"") == b""
    assert len(run(AesEcbEncryptor(key), b"")) == 16  # a whole padding block


def test_update_into_too_small_buffer() -> None:
    t = AesCbcEncryptor(bytes(16), bytes(16))
    assert t.output_bound(16) == 31
    with pytest.raises(InvalidParameterError, match="31 bytes"):
        t.update_into(bytes(16), bytearray(16))
    with pytest.raises(BrokenTransformError):
        t.update(b"")
    d = AesCbcDecryptor(bytes(16), bytes(16))
    assert d.output_bound(16) == 47


def test_xts_limits() -> None:
    key = bytes(range(32))
    with pytest.raises(InvalidParameterError, match="halves must differ"):
        AesXtsEncryptor(bytes(32), bytes(16))
    for cls, err in ((AesXtsEncryptor, InvalidParameterError), (AesXtsDecryptor, FormatError)):
        t = cls(key, bytes(16))
        assert t.update(bytes(15)) == b""
        with pytest.raises(err, match="at least 16 bytes"):
            t.finalize()
    t = AesXtsEncryptor(key, bytes(16))
    t.update(bytes(XTS_MAX_UNIT))
    with pytest.raises(LimitExceededError, match="2\\*\\*20 blocks"):
        t.update(b"x")
    with pytest.raises(InvalidParameterError):
        xts_tweak(-1)
    assert xts_tweak(0x0102) == b"\x02\x01" + bytes(14)


def test_gcm_tampering_releases_nothing() -> None:
    key, nonce, aad = os.urandom(32), os.urandom(12), b"header"
    pt = os.urandom(100)
    sealed = run(AesGcmEncryptor(key, nonce, aad=aad), pt)
    variants = {
        "tag": sealed[:-1] + bytes([sealed[-1] ^ 1]),
        "ciphertext": bytes([sealed[0] ^ 0x80]) + sealed[1:],
        "truncated-by-one": sealed[:-1] + b"",
    }
    for what, bad in variants.items():
        d = AesGcmDecryptor(key, nonce, aad=aad)
        released = b"".join(d.update(bad[i : i + 7]) for i in range(0, len(bad), 7))
        assert released == b"", what
        with pytest.raises(AuthenticationError):
            d.finalize()
        with pytest.raises(BrokenTransformError):
            d.finalize()
    for wrong in ({"aad": b"other"}, {"aad": aad, "nonce": os.urandom(12)}):
        d = AesGcmDecryptor(key, wrong.get("nonce", nonce), aad=wrong["aad"])
        assert d.update(sealed) == b""
        with pytest.raises(AuthenticationError):
            d.finalize()
    # Detached tag, tampered.
    d = AesGcmDecryptor(key, nonce, aad=aad, tag=bytes(16))
    assert d.update(sealed[:-16]) == b""
    with pytest.raises(AuthenticationError, match="did not verify"):
        d.finalize()


def test_gcm_release_unverified_is_opt_in() -> None:
    key, nonce = os.urandom(16), os.urandom(12)
    pt = os.urandom(64)
    sealed = run(AesGcmEncryptor(key, nonce), pt)
    bad = sealed[:-16] + bytes(16)
    d = AesGcmDecryptor(key, nonce, release_unverified_plaintext=True)
    got = d.update(bad)
    assert got == pt  # released before the check: that is what the flag means
    with pytest.raises(AuthenticationError):
        d.finalize()
    assert "release_unverified=True" in repr(d)


def test_gcm_short_input_and_tag_size() -> None:
    key, nonce = bytes(16), bytes(12)
    d = AesGcmDecryptor(key, nonce)
    d.update(bytes(15))
    with pytest.raises(TruncatedStreamError, match="before the 16-byte tag"):
        d.finalize()
    for bad in (0, 12, 15, 17):
        with pytest.raises(InvalidTagSizeError, match="must be 16 bytes"):
            AesGcmDecryptor(key, nonce, tag=bytes(bad))
    # An empty message is just the tag.
    sealed = run(AesGcmEncryptor(key, nonce), b"")
    assert len(sealed) == 16
    assert run(AesGcmDecryptor(key, nonce), sealed) == b""
