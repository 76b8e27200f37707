"""Hash and MAC taps: pass-through, lifecycle, typed errors, chunking invariance."""

from __future__ import annotations

import hashlib
import hmac
import random
from collections.abc import Callable

import blake3
import pytest
from cryptography.hazmat.primitives import poly1305
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcrypt.abc import Buffer, State, Tap
from streamcrypt.errors import (
    AlreadyFinalizedError,
    AuthenticationError,
    BrokenTransformError,
    InvalidKeySizeError,
    InvalidParameterError,
    InvalidTagSizeError,
    NotFinalizedError,
    UnsupportedFormatError,
)
from streamcrypt.keys import SecretKey
from streamcrypt.primitives import (
    BLAKE3_THREADS_MIN,
    TAP_NAMES,
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
    hash_tap,
)

KEY32 = bytes(range(32))
KEY64 = bytes(range(64))


def _poly(data: bytes) -> bytes:
    p = poly1305.Poly1305(KEY32)
    p.update(data)
    return p.finalize()


#: (tap factory, reference digest of the whole input) for every tap and mode.
CASES: dict[str, tuple[Callable[[], HashTap], Callable[[bytes], bytes]]] = {
    "sha256": (Sha256Tap, lambda d: hashlib.sha256(d).digest()),
    "sha384": (Sha384Tap, lambda d: hashlib.sha384(d).digest()),
    "sha512": (Sha512Tap, lambda d: hashlib.sha512(d).digest()),
    "sha3-256": (Sha3_256Tap, lambda d: hashlib.sha3_256(d).digest()),
    "sha3-512": (Sha3_512Tap, lambda d: hashlib.sha3_512(d).digest()),
    "blake2b": (Blake2bTap, lambda d: hashlib.blake2b(d).digest()),
    "blake2b-keyed": (
        lambda: Blake2bTap(key=KEY64, digest_size=40, salt=b"salt", person=b"me"),
        lambda d: hashlib.blake2b(
            d, key=KEY64, digest_size=40, salt=b"salt", person=b"me"
        ).digest(),
    ),
    "blake2s": (Blake2sTap, lambda d: hashlib.blake2s(d).digest()),
    "blake2s-keyed": (
        lambda: Blake2sTap(key=KEY32, digest_size=20, salt=b"s", person=b"p"),
        lambda d: hashlib.blake2s(d, key=KEY32, digest_size=20, salt=b"s", person=b"p").digest(),
    ),
    "blake3": (Blake3Tap, lambda d: blake3.blake3(d).digest()),
    "blake3-keyed": (
        lambda: Blake3Tap(key=KEY32, length=50),
        lambda d: blake3.blake3(d, key=KEY32).digest(50),
    ),
    "blake3-derive-key": (
        lambda: Blake3Tap(derive_key_context="streamcrypt tests 2025 context"),
        lambda d: blake3.blake3(d, derive_key_context="streamcrypt tests 2025 context").digest(),
    ),
    "hmac-sha256": (
        lambda: HmacTap(KEY32, "sha256"),
        lambda d: hmac.new(KEY32, d, "sha256").digest(),
    ),
    "hmac-sha512-trunc": (
        lambda: HmacTap(KEY32, "sha512", tag_length=32),
        lambda d: hmac.new(KEY32, d, "sha512").digest()[:32],
    ),
    "poly1305": (lambda: Poly1305Tap(KEY32), _poly),
}


def _as(kind: int, piece: bytes) -> Buffer:
    return (piece, bytearray(piece), memoryview(piece))[kind % 3]


@pytest.mark.parametrize("case", list(CASES))
def test_tap_matches_reference_and_passes_data_through(case: str) -> None:
    make, reference = CASES[case]
    data = random.Random(case).randbytes(5000)
    tap = make()
    assert isinstance(tap, Tap)
    out = [tap.update(_as(i, data[i * 700 : (i + 1) * 700])) for i in range(8)]
    assert all(type(piece) is bytes for piece in out)
    assert b"".join(out) == data
    assert tap.finalize() == b""
    assert tap.state is State.FINALIZED
    assert tap.digest() == reference(data)
    assert tap.hexdigest() == reference(data).hex()
    assert tap.digest_size == len(reference(data))


@pytest.mark.parametrize("case", list(CASES))
def test_empty_input(case: str) -> None:
    make, reference = CASES[case]
    tap = make()
    assert tap.update(b"") == b""
    tap.finalize()
    assert tap.digest() == reference(b"")


@settings(max_examples=40, deadline=None)
@given(
    data=st.binary(max_size=2500),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=25),
    kinds=st.lists(st.integers(min_value=0, max_value=2), min_size=1, max_size=8),
)
def test_any_chunking_gives_the_same_digest_and_bytes(
    data: bytes, cuts: list[int], kinds: list[int]
) -> None:
    """Every tap: same digest and same passed-through bytes for any split (empty pieces too)."""
    pieces: list[bytes] = []
    i = 0
    for n in cuts:
        pieces.append(data[i : i + n])  # may be empty, also past the end
        i += n
    pieces.append(data[i:])
    assert b"".join(pieces) == data
    for make, reference in CASES.values():
        tap = make()
        through = b"".join(
            tap.update(_as(kinds[j % len(kinds)], piece)) for j, piece in enumerate(pieces)
        )
        assert tap.finalize() == b""
        assert through == data
        assert tap.digest() == reference(data)


def test_bytes_are_returned_without_a_copy() -> None:
    tap = Sha256Tap()
    data = b"x" * 4096
    assert tap.update(data) is data
    source = bytearray(b"mutable")
    out = tap.update(source)
    source[0] = 0
    assert out == b"mutable"  # a snapshot, not a view of the caller's buffer


def test_update_into_copies_and_digests() -> None:
    tap = Blake2bTap()
    buf = bytearray(10)
    assert tap.update_into(b"abcdef", memoryview(buf)[2:]) == 6
    assert bytes(buf) == b"\0\0abcdef\0\0"
    tap.finalize()
    assert tap.digest() == hashlib.blake2b(b"abcdef").digest()
    short = Sha256Tap()
    with pytest.raises(InvalidParameterError, match="at least 6 bytes"):
        short.update_into(b"abcdef", bytearray(5))
    ro = Sha256Tap()
    with pytest.raises(InvalidParameterError, match="writable"):
        ro.update_into(b"abc", memoryview(b"xyz"))


def test_lifecycle_errors() -> None:
    tap = Sha512Tap()
    tap.update(b"abc")
    with pytest.raises(NotFinalizedError, match="after finalize"):
        tap.digest()
    with pytest.raises(NotFinalizedError):
        tap.hexdigest()
    tap.finalize()
    with pytest.raises(AlreadyFinalizedError):
        tap.update(b"more")
    with pytest.raises(AlreadyFinalizedError):
        tap.update_into(b"more", bytearray(4))
    with pytest.raises(AlreadyFinalizedError):
        tap.finalize()
    assert tap.digest() == hashlib.sha512(b"abc").digest()  # still readable


def test_bad_input_breaks_the_tap() -> None:
    tap = Blake3Tap()
    with pytest.raises(InvalidParameterError, match="bytes, bytearray or memoryview"):
        tap.update("text")  # type: ignore[arg-type]
    assert tap.state is State.BROKEN
    with pytest.raises(BrokenTransformError) as err:
        tap.update(b"ok")
    assert isinstance(err.value.__cause__, InvalidParameterError)
    with pytest.raises(BrokenTransformError):
        tap.digest()
    noncontig = memoryview(bytes(range(20)))[::2]
    tap2 = Sha256Tap()
    with pytest.raises(InvalidParameterError, match="contiguous"):
        tap2.update(noncontig)


def test_hmac_verify_and_truncation() -> None:
    key = SecretKey(b"k" * 32)
    msg = b"message" * 100
    full = hmac.new(b"k" * 32, msg, "sha256").digest()
    tap = HmacTap(key, "sha256")
    with pytest.raises(NotFinalizedError):
        tap.verify(full)
    tap.update(msg)
    tap.finalize()
    tap.verify(full)
    tap.verify(bytearray(full))
    with pytest.raises(AuthenticationError, match="did not verify"):
        tap.verify(full[:16])  # a truncated tag needs tag_length stated up front
    with pytest.raises(AuthenticationError):
        tap.verify(full[:-1] + bytes([full[-1] ^ 1]))
    with pytest.raises(AuthenticationError):
        tap.verify(b"")
    short = HmacTap(key, "sha256", tag_length=16)
    short.update(msg)
    short.finalize()
    assert short.digest() == full[:16]
    assert short.digest_size == 16
    short.verify(full[:16])
    with pytest.raises(AuthenticationError):
        short.verify(full)  # a longer tag is not the stated length either
    with pytest.raises(AuthenticationError):
        short.verify(full[:15])
    for bad in (0, 15, 33, True):
        with pytest.raises(InvalidTagSizeError, match=r"16\.\.32 bytes") as err:
            HmacTap(key, "sha256", tag_length=bad)
        assert isinstance(err.value, ValueError)
    HmacTap(key, "sha512", tag_length=64)
    with pytest.raises(InvalidParameterError, match="unsupported HMAC hash"):
        HmacTap(key, "md5")
    with pytest.raises(InvalidKeySizeError, match="empty"):
        HmacTap(b"", "sha256")
    assert "6b6b6b" not in repr(tap) and "kkkk" not in repr(tap)


def test_poly1305_tap() -> None:
    msg = b"Cryptographic Forum Research Group"
    tag = _poly(msg)
    tap = Poly1305Tap(KEY32)
    tap.update(msg)
    tap.finalize()
    tap.verify(tag)
    with pytest.raises(AuthenticationError):
        tap.verify(bytes(16))
    with pytest.raises(AuthenticationError):
        tap.verify(tag[:15])
    for size in (0, 16, 31, 33):
        with pytest.raises(InvalidKeySizeError, match=f"32 bytes, got {size}"):
            Poly1305Tap(bytes(size))


def test_blake2_parameters() -> None:
    with pytest.raises(InvalidKeySizeError, match=r"0\.\.64 bytes, got 65"):
        Blake2bTap(key=bytes(65))
    with pytest.raises(InvalidKeySizeError, match=r"0\.\.32 bytes, got 33"):
        Blake2sTap(key=bytes(33))
    for bad in (0, 65):
        with pytest.raises(InvalidParameterError, match=r"digest_size must be 1\.\.64"):
            Blake2bTap(digest_size=bad)
    with pytest.raises(InvalidParameterError, match=r"digest_size must be 1\.\.32"):
        Blake2sTap(digest_size=33)
    with pytest.raises(InvalidParameterError, match="salt must be at most 16"):
        Blake2bTap(salt=bytes(17))
    with pytest.raises(InvalidParameterError, match="person must be at most 8"):
        Blake2sTap(person=bytes(9))
    assert Blake2bTap(key=b"k").name == "blake2b-keyed"
    assert Blake2sTap().name == "blake2s"


def test_blake3_modes_and_extended_output() -> None:
    data = b"extendable output" * 50
    tap = Blake3Tap(key=SecretKey(KEY32), length=16)
    tap.update(data)
    tap.finalize()
    long = tap.digest(200)
    assert long == blake3.blake3(data, key=KEY32).digest(200)
    assert tap.digest() == long[:16]
    assert tap.hexdigest(40) == long[:40].hex()
    with pytest.raises(InvalidParameterError, match=">= 1 byte"):
        tap.digest(0)
    with pytest.raises(InvalidParameterError, match="not both"):
        Blake3Tap(key=KEY32, derive_key_context="ctx")
    with pytest.raises(InvalidKeySizeError, match="32 bytes, got 16"):
        Blake3Tap(key=bytes(16))
    with pytest.raises(InvalidParameterError, match="must be a str"):
        Blake3Tap(derive_key_context=b"bytes")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="output length"):
        Blake3Tap(length=0)
    with pytest.raises(InvalidParameterError, match="max_threads"):
        Blake3Tap(max_threads=0)
    fresh = Blake3Tap()
    with pytest.raises(NotFinalizedError):
        fresh.digest(64)
    assert blake3_keyed(SecretKey(KEY32), data) == long[:32]
    with pytest.raises(InvalidKeySizeError, match="32 bytes, got 16"):
        blake3_keyed(bytes(16), data)


def test_blake3_threads_are_chosen_by_the_first_large_update() -> None:
    big = random.Random(3).randbytes(BLAKE3_THREADS_MIN + 4096)
    auto = Blake3Tap()
    assert auto.max_threads is None
    auto.update(b"")  # empty updates do not decide
    assert auto.max_threads is None
    assert auto.update(big) is big
    assert auto.max_threads == blake3.blake3.AUTO
    auto.update(b"tail")
    auto.finalize()
    small = Blake3Tap()
    small.update(big[:1000])
    small.update(big[1000:])
    small.update(b"tail")
    small.finalize()
    assert small.max_threads == 1
    explicit = Blake3Tap(max_threads=blake3.blake3.AUTO)
    explicit.update(big + b"tail")
    explicit.finalize()
    expected = blake3.blake3(big + b"tail").digest()
    assert auto.digest() == small.digest() == explicit.digest() == expected
    never_fed = Blake3Tap()
    never_fed.finalize()
    assert never_fed.digest() == blake3.blake3(b"").digest()


def test_hash_tap_factory() -> None:
    assert set(TAP_NAMES) >= {
        "sha256",
        "sha384",
        "sha512",
        "sha3-256",
        "sha3-512",
        "blake2b",
        "blake2s",
        "blake3",
        "hmac-sha256",
        "hmac-sha512",
        "poly1305",
    }
    for name in TAP_NAMES:
        key = KEY32 if name.startswith(("hmac", "poly", "blake")) else None
        tap = hash_tap(name.upper(), key)
        tap.update(b"abc")
        tap.finalize()
        assert len(tap.digest()) == tap.digest_size
    assert isinstance(hash_tap("sha3-512"), Sha3_512Tap)
    assert isinstance(hash_tap("sha384"), Sha384Tap)
    assert hash_tap("blake3", derive_key_context="c").name == "blake3-derive-key"
    tap = hash_tap("hmac-sha512", KEY32, tag_length=16)
    assert isinstance(tap, HmacTap) and tap.digest_size == 16
    with pytest.raises(UnsupportedFormatError, match="supported"):
        hash_tap("md5")
    with pytest.raises(InvalidParameterError, match="needs a key"):
        hash_tap("hmac-sha256")
    with pytest.raises(InvalidParameterError, match="needs a key"):
        hash_tap("poly1305")
    with pytest.raises(InvalidParameterError, match="takes no key"):
        hash_tap("sha256", KEY32)
    with pytest.raises(InvalidParameterError, match="bad options"):
        hash_tap("sha256", colour="blue")
    with pytest.raises(InvalidParameterError):
        hash_tap(None)  # type: ignore[arg-type]


def test_repr_never_shows_keys() -> None:
    for tap in (
        Blake3Tap(key=KEY32),
        Blake2bTap(key=KEY64),
        HmacTap(KEY32),
        Poly1305Tap(KEY32),
    ):
        text = repr(tap)
        assert KEY32.hex()[:16] not in text and repr(KEY32)[:20] not in text
        assert "state=open" in text
