"""HKDF, HMAC, BLAKE3, Poly1305, SHA-2/3 and BLAKE2 against official vectors.

HKDF runs through :func:`streamcrypt.keys.hkdf`; everything else through the taps, fed in
random chunks (empty ones included), so each vector also checks the pass-through. Expected
counts come from the files themselves, counted apart from the parsers.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable

import cryptography_vectors
import pytest
from support import random_splits, record_vectors, vector_path, wycheproof, wycheproof_cases

from streamcrypt.errors import AuthenticationError, InvalidKeySizeError, InvalidParameterError
from streamcrypt.keys import (
    SecretKey,
    hkdf,
    hkdf_expand,
    hkdf_extract,
    hmac_digest,
    hmac_digests,
)
from streamcrypt.primitives import (
    Blake2bTap,
    Blake2sTap,
    Blake3Tap,
    HashTap,
    HmacTap,
    Poly1305Tap,
    Sha3_256Tap,
    Sha3_512Tap,
    Sha256Tap,
    Sha384Tap,
    Sha512Tap,
    blake3_keyed,
)

RNG = random.Random(8439)


def _run(tap: HashTap, data: bytes) -> bytes:
    """Feed ``data`` in random pieces; check it passes through; return the digest."""
    through = b"".join(tap.update(piece) for piece in random_splits(data, RNG, 300))
    assert tap.finalize() == b""
    assert through == data
    return tap.digest()


# -------------------------------------------------------------------------- HKDF


@pytest.mark.parametrize("hash_name", ["sha256", "sha512"])
def test_wycheproof_hkdf(hash_name: str) -> None:
    name = f"hkdf_{hash_name}_test.json"
    data = wycheproof(name)
    ran = 0
    for _group, test in wycheproof_cases(data):
        ikm, salt, info = (bytes.fromhex(test[k]) for k in ("ikm", "salt", "info"))
        if test["result"] == "valid":
            okm = hkdf(ikm, salt=salt, info=info, length=test["size"], algorithm=hash_name)  # type: ignore[arg-type]
            assert okm == bytes.fromhex(test["okm"]), test["tcId"]
        else:
            assert test["flags"] == ["SizeTooLarge"], test["tcId"]
            with pytest.raises(InvalidParameterError, match="output must be"):
                hkdf(ikm, salt=salt, info=info, length=test["size"], algorithm=hash_name)  # type: ignore[arg-type]
        ran += 1
    record_vectors(f"wycheproof/{name}", ran, data["numberOfTests"])


def test_hkdf_rfc5869_vectors() -> None:
    """RFC 5869's SHA-256 cases (appendix A.1-A.3; the SHA-1 ones are not taken):
    extract gives the PRK, expand the OKM, :func:`hkdf` both at once."""
    path = "KDF/rfc-5869-HKDF-SHA256.txt"
    records, expected = _nist_blocks(path, ("IKM", "salt", "info", "L", "PRK", "OKM"))
    ran = 0
    for record in records:
        ikm, salt, info, prk, okm = (
            bytes.fromhex(record[k]) for k in ("IKM", "salt", "info", "PRK", "OKM")
        )
        length = int(record["L"])
        assert hkdf_extract(ikm, salt) == prk
        assert hkdf_expand(prk, info, length) == okm
        assert hkdf(ikm, salt=salt, info=info, length=length) == okm
        ran += 1
    record_vectors(f"cryptography_vectors/{path}", ran, expected)


def test_hkdf_and_hmac_are_the_functions_of_cryptography_and_the_stdlib() -> None:
    """keys.hkdf / hkdf_extract / hkdf_expand (cryptography's HKDF behind keys' typed
    arguments) and hmac_digest give the same bytes as ``cryptography``'s HKDF /
    HKDFExpand and the standard library's ``hmac.digest``, for every hash, output length (one block,
    a block and a byte, the 255-block limit), empty and long salts and info, and keys
    as bytes, bytearray, memoryview and SecretKey."""
    import hmac

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF, HKDFExpand

    algorithms = {"sha256": hashes.SHA256(), "sha384": hashes.SHA384(), "sha512": hashes.SHA512()}
    rng = random.Random(5869)
    for name, alg in algorithms.items():
        size = alg.digest_size
        for length in (1, size - 1, size, size + 1, 2 * size, 64, 255 * size):
            for salt_size, info_size in ((0, 0), (32, 74), (size + 1, 300), (200, 1)):
                ikm = rng.randbytes(rng.choice((16, 32, 64, 200)))
                salt, info = rng.randbytes(salt_size), rng.randbytes(info_size)
                want = HKDF(alg, length, salt or None, info).derive(ikm)
                for form in (bytes, bytearray, memoryview, SecretKey):
                    got = hkdf(form(ikm), salt=salt, info=info, length=length, algorithm=name)  # type: ignore[arg-type]
                    assert got == want, (name, length, salt_size, info_size, form)
                prk = hkdf_extract(ikm, bytearray(salt), algorithm=name)  # type: ignore[arg-type]
                assert hkdf_expand(prk, memoryview(info), length, algorithm=name) == want  # type: ignore[arg-type]
                assert hkdf_expand(prk, info, length, algorithm=name) == HKDFExpand(
                    alg, length, info
                ).derive(prk)
                for key in (salt, ikm, rng.randbytes(129)):
                    expected = hmac.digest(key, info, name)
                    assert hmac_digest(key, info, name) == expected  # type: ignore[arg-type]
                    assert hmac_digest(memoryview(key), bytearray(info), name) == expected  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="unsupported"):
        hmac_digest(b"k", b"m", "md5")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: hkdf(b"k", length=32.0), InvalidParameterError, "must be an int, not float"),
        (lambda: hkdf_expand(bytes(32), b"", 32.0), InvalidParameterError, "must be an int"),
        (lambda: hkdf(b"k", algorithm=["sha256"]), InvalidParameterError, "unsupported"),
        (lambda: hkdf_extract(b"k", algorithm=["sha256"]), InvalidParameterError, "unsupported"),
        (lambda: hmac_digest(b"k", b"m", ["sha256"]), InvalidParameterError, "unsupported"),
        (lambda: hmac_digest("a key", b"m"), InvalidParameterError, "HMAC key must be bytes"),
        (lambda: hmac_digest(None, b"m"), InvalidParameterError, "HMAC key must be bytes"),
        (lambda: hkdf(_wiped()), InvalidKeySizeError, "wiped"),
        (lambda: hkdf_extract(_wiped()), InvalidKeySizeError, "wiped"),
        (lambda: hmac_digest(_wiped(), b"m"), InvalidKeySizeError, "wiped"),
        # Not bytes-like: an int was zeros to bytes() (salt=16: sixteen zero bytes), a str a
        # bare TypeError.
        (lambda: hkdf(b"k", salt=16), InvalidParameterError, "salt must be bytes-like, not int"),
        (lambda: hkdf(b"k", info=16), InvalidParameterError, "info must be bytes-like, not int"),
        (lambda: hkdf(b"k", salt="s"), InvalidParameterError, "salt must be bytes-like, not str"),
        (lambda: hkdf_extract(b"k", salt=16), InvalidParameterError, "salt must be bytes-like"),
        (lambda: hkdf_expand(bytes(32), 16), InvalidParameterError, "info must be bytes-like"),
        (lambda: hkdf_expand([0] * 32), InvalidParameterError, "PRK must be bytes-like"),
        (lambda: hmac_digest(b"k", "m"), InvalidParameterError, "message must be bytes-like"),
        (lambda: hmac_digest(b"k", 3), InvalidParameterError, "message must be bytes-like"),
    ],
)
def test_bad_arguments_are_typed_errors(
    call: Callable[[], object], error: type[Exception], match: str
) -> None:
    """Review 6 F4/F5: a float length, an unhashable hash name, a key of the wrong kind,
    a wiped key: typed errors (a float length and a wiped key used to give output)."""
    with pytest.raises(error, match=match):
        call()


def test_int_like_lengths_and_secret_keys_are_taken() -> None:
    assert hkdf(b"k", length=True) == hkdf(b"k", length=1)  # operator.index, as slicing
    assert hmac_digest(SecretKey(b"k"), b"m") == hmac_digest(b"k", b"m")


def _wiped() -> SecretKey:
    key = SecretKey(bytes(32))
    key.wipe()
    return key


def test_hmac_digests_is_one_hmac_per_message_under_one_key() -> None:
    """keys.hmac_digests (one keyed context, copied per message) gives, for each
    message, the standard library's ``hmac.digest``: every hash, none, one and three
    messages (a context reused after its finalize would fail or differ), keys and
    messages of every bytes-like kind; its errors are hmac_digest's."""
    import hmac

    rng = random.Random(4231)
    for name in ("sha256", "sha384", "sha512"):
        for key in (b"", rng.randbytes(32), rng.randbytes(200)):
            for count in (0, 1, 3):
                msgs = [rng.randbytes(rng.choice((0, 7, 100))) for _ in range(count)]
                want = [hmac.digest(key, m, name) for m in msgs]
                assert hmac_digests(key, msgs, name) == want
                forms = [bytearray(m) for m in msgs]
                assert hmac_digests(memoryview(key), iter(forms), name) == want
                if key:
                    assert hmac_digests(SecretKey(key), msgs, name) == want
    with pytest.raises(InvalidParameterError, match="unsupported"):
        hmac_digests(b"k", [b"m"], "md5")  # type: ignore[arg-type]
    for bad in ("md5", ["sha256"]):  # a SecretKey's kept-context lookup names it too
        with pytest.raises(InvalidParameterError, match="unsupported"):
            hmac_digests(SecretKey(bytes(32)), [b"m"], bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="message must be bytes-like"):
        hmac_digests(b"k", [b"m", "m"])  # type: ignore[list-item]
    with pytest.raises(InvalidKeySizeError, match="wiped"):
        hmac_digests(_wiped(), [b"m"])


def test_a_secret_key_keeps_its_hmac_context_and_a_wipe_drops_it() -> None:
    """A SecretKey's keyed context is set up once and only ever copied: the same HMACs on
    every call, from many threads at once; after wipe() the key raises as any wiped
    key, never an HMAC from the context it kept."""
    import hmac
    from concurrent.futures import ThreadPoolExecutor

    raw = bytes(range(32))
    key = SecretKey(raw)
    msgs = [b"a", b"bb" * 40, b""]
    want = [hmac.digest(raw, m, "sha256") for m in msgs]
    for _ in range(3):
        assert hmac_digests(key, msgs) == want
        assert hmac_digest(key, msgs[1]) == want[1]
    assert hmac_digests(key, [b"a"], "sha512") == [hmac.digest(raw, b"a", "sha512")]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: hmac_digests(key, msgs), range(400)))
    assert all(r == want for r in results)
    key.wipe()
    with pytest.raises(InvalidKeySizeError, match="wiped"):
        hmac_digests(key, msgs)
    with pytest.raises(InvalidKeySizeError, match="wiped"):
        hmac_digest(key, b"a", "sha512")


def test_no_module_reaches_the_standard_librarys_private_hashlib() -> None:
    """Every HMAC of the library takes keys' one public route (cryptography's HMAC):
    no module imports CPython's private ``_hashlib``."""
    import pathlib
    import re

    import streamcrypt

    root = pathlib.Path(streamcrypt.__file__).parent
    imports = re.compile(r"^\s*(from\s+_hashlib\s+import|import\s+_hashlib\b)", re.M)
    users = [p for p in root.rglob("*.py") if imports.search(p.read_text(encoding="utf-8"))]
    assert users == []


# -------------------------------------------------------------------------- HMAC


@pytest.mark.parametrize("hash_name,full", [("sha256", 32), ("sha512", 64)])
def test_wycheproof_hmac(hash_name: str, full: int) -> None:
    """Truncated groups state their tag length up front (``tag_length``); a tap built for
    full tags must refuse the same truncated tag."""
    name = f"hmac_{hash_name}_test.json"
    data = wycheproof(name)
    ran = truncated = 0
    for group, test in wycheproof_cases(data):
        tag_len = group["tagSize"] // 8
        key, msg, tag = (bytes.fromhex(test[k]) for k in ("key", "msg", "tag"))
        assert len(tag) == tag_len
        tap = HmacTap(key, hash_name, tag_length=None if tag_len == full else tag_len)
        digest = _run(tap, msg)
        if test["result"] == "valid":
            assert digest == tag, test["tcId"]
            tap.verify(tag)
            if tag_len < full:
                untruncated = HmacTap(key, hash_name)
                _run(untruncated, msg)
                with pytest.raises(AuthenticationError):
                    untruncated.verify(tag)
                truncated += 1
        else:
            assert test["flags"] == ["ModifiedTag"], test["tcId"]
            assert digest != tag
            with pytest.raises(AuthenticationError):
                tap.verify(tag)
        ran += 1
    record_vectors(f"wycheproof/{name}", ran, data["numberOfTests"])
    assert truncated > 0


# -------------------------------------------------------------------------- BLAKE3


def test_blake3_official_vectors() -> None:
    path = vector_path("blake3", "test_vectors.json")
    data = json.loads(path.read_text())
    key = data["key"].encode()
    context = data["context_string"]
    assert len(key) == 32
    modes: dict[str, Callable[[], Blake3Tap]] = {
        "hash": Blake3Tap,
        "keyed_hash": lambda: Blake3Tap(key=key),
        "derive_key": lambda: Blake3Tap(derive_key_context=context),
    }
    ran = 0
    for case in data["cases"]:
        message = bytes(i % 251 for i in range(case["input_len"]))
        for mode, make in modes.items():
            expected = bytes.fromhex(case[mode])
            tap = make()
            assert _run(tap, message) == expected[:32]
            assert tap.digest(len(expected)) == expected  # extended output
            assert tap.hexdigest(len(expected) // 2) == expected[: len(expected) // 2].hex()
            if mode == "keyed_hash":  # the one-shot path gives the same digest
                assert blake3_keyed(key, message) == expected[:32]
            ran += 1
    record_vectors(
        "blake3/test_vectors.json (hash, keyed, derive-key)", ran, 3 * len(data["cases"])
    )


# -------------------------------------------------------------------------- NIST-form files


def _nist_blocks(path: str, fields: tuple[str, ...]) -> tuple[list[dict[str, str]], int]:
    """Records of a NIST-form vector file holding every name in ``fields``, and the number
    of records the file holds (counted from its last field's lines, apart from the parser)."""
    with cryptography_vectors.open_vector_file(path, "r") as f:
        text = f.read()
    expected = len(re.findall(rf"^{fields[-1]}\s*=", text, re.M))
    records: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "[")) or "=" not in line:
            continue
        name, _, value = (part.strip() for part in line.partition("="))
        if name in fields:
            current[name] = value
            if all(k in current for k in fields):
                records.append(current)
                current = {}
    return records, expected


def _msg(record: dict[str, str]) -> bytes:
    bits = int(record["Len"])
    assert bits % 8 == 0
    return bytes.fromhex(record["Msg"])[: bits // 8]  # Len = 0 comes with "Msg = 00"


def test_poly1305_rfc8439_vectors() -> None:
    """The RFC 7539/8439 Poly1305 vectors (section 2.5.2 and appendix A.3)."""
    path = "poly1305/rfc7539.txt"
    records, expected = _nist_blocks(path, ("KEY", "MSG", "TAG"))
    ran = 0
    for record in records:
        key, msg, tag = (bytes.fromhex(record[k]) for k in ("KEY", "MSG", "TAG"))
        tap = Poly1305Tap(key)
        assert _run(tap, msg) == tag
        tap.verify(tag)
        bad = bytearray(tag)
        bad[0] ^= 1
        with pytest.raises(AuthenticationError):
            tap.verify(bytes(bad))
        ran += 1
    record_vectors(f"cryptography_vectors/{path}", ran, expected)


SHA_FILES: dict[str, Callable[[], HashTap]] = {
    "hashes/SHA2/SHA256ShortMsg.rsp": Sha256Tap,
    "hashes/SHA2/SHA384ShortMsg.rsp": Sha384Tap,
    "hashes/SHA2/SHA512ShortMsg.rsp": Sha512Tap,
    "hashes/SHA3/SHA3_256ShortMsg.rsp": Sha3_256Tap,
    "hashes/SHA3/SHA3_512ShortMsg.rsp": Sha3_512Tap,
    "hashes/blake2/blake2b.txt": Blake2bTap,
    "hashes/blake2/blake2s.txt": Blake2sTap,
}


@pytest.mark.parametrize("path", list(SHA_FILES))
def test_hash_known_answers(path: str) -> None:
    """NIST CAVP byte-oriented ShortMsg files for SHA-2/SHA-3; the BLAKE2 reference vectors."""
    records, expected = _nist_blocks(path, ("Len", "Msg", "MD"))
    ran = 0
    for record in records:
        assert _run(SHA_FILES[path](), _msg(record)) == bytes.fromhex(record["MD"])
        ran += 1
    record_vectors(f"cryptography_vectors/{path}", ran, expected)


def test_a_few_known_answers_against_hashlib() -> None:
    """Fixed answers, and the same through hashlib, for keyed and parameterised BLAKE2."""
    abc = b"abc"
    sha = Sha256Tap()
    assert _run(sha, abc).hex() == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    # RFC 7693 appendix A: BLAKE2b-512("abc")
    assert _run(Blake2bTap(), abc).hex().startswith("ba80a53f981c4d0d6a2797b69f12f6e9")
    # RFC 7693 appendix B: BLAKE2s-256("abc")
    assert _run(Blake2sTap(), abc).hex().startswith("508c5e8c327c14e2e1a72ba34eeb452f")
    long = bytes(range(256)) * 40
    for key, size, salt, person in ((b"k" * 64, 64, b"s" * 16, b"p" * 16), (b"key", 7, b"", b"x")):
        tap = Blake2bTap(key=key, digest_size=size, salt=salt, person=person)
        ref = hashlib.blake2b(long, key=key, digest_size=size, salt=salt, person=person)
        assert _run(tap, long) == ref.digest()
        tap_s = Blake2sTap(
            key=key[:32], digest_size=min(size, 32), salt=salt[:8], person=person[:8]
        )
        ref_s = hashlib.blake2s(
            long, key=key[:32], digest_size=min(size, 32), salt=salt[:8], person=person[:8]
        )
        assert _run(tap_s, long) == ref_s.digest()
