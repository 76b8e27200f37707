"""ECIES: byte-for-byte interop with eciespy, Wycheproof ECDH vectors, bad input."""

from __future__ import annotations

import dataclasses
import itertools
import pickle
import random
import typing
from types import SimpleNamespace
from typing import Any

import coincurve  # eciespy's secp256k1 backend, used here as an independent reference
import ecies as eciespy
import pytest
from ecies.config import Config
from ecies.keys import PrivateKey as EciesPrivateKey
from nacl.signing import SigningKey
from support import record_vectors, wycheproof, wycheproof_cases

from streamcrypt.codecs import ecies
from streamcrypt.errors import (
    AuthenticationError,
    FormatError,
    InvalidKeySizeError,
    InvalidParameterError,
    InvalidPublicKeyError,
    UnsupportedFormatError,
)
from streamcrypt.keys import SecretKey

N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
SIZES = (0, 1, 15, 16, 17, 1000, 70_000)


# --------------------------------------------------------------------------- the matrix


def _eciespy_configs() -> list[Config]:
    """Every Config eciespy can name, enumerated from its own type hints."""
    hints = typing.get_type_hints(Config)
    axes: list[list[tuple[str, Any]]] = []
    for field in dataclasses.fields(Config):
        hint = hints[field.name]
        if hint is bool:
            values: tuple[Any, ...] = (False, True)
        elif typing.get_origin(hint) is typing.Literal:
            values = typing.get_args(hint)
        else:  # a new kind of option: fail loudly rather than skip it
            raise AssertionError(f"eciespy Config field {field.name} has unhandled type {hint}")
        axes.append([(field.name, v) for v in values])
    return [Config(**dict(combo)) for combo in itertools.product(*axes)]


ECIESPY_CONFIGS = _eciespy_configs()


def _opts(cfg: Config) -> dict[str, Any]:
    return {
        "curve": cfg.elliptic_curve,
        "cipher": cfg.symmetric_algorithm,
        "nonce_length": cfg.symmetric_nonce_length,
        "compress_ephemeral": cfg.is_ephemeral_key_compressed,
        "compress_hkdf": cfg.is_hkdf_key_compressed,
    }


def _cfg_id(cfg: Config) -> str:
    o = _opts(cfg)
    return (
        f"{o['curve']}-{o['cipher']}-n{o['nonce_length']}"
        f"-e{int(o['compress_ephemeral'])}-h{int(o['compress_hkdf'])}"
    )


def test_matrix_is_every_eciespy_config() -> None:
    # 3 curves x 2 ciphers x 2 nonce lengths x 2 x 2 compression flags.
    assert len(ECIESPY_CONFIGS) == 48
    ours = {dataclasses.astuple(c) for c in ecies.CONFIGS}
    theirs = {
        (
            c.elliptic_curve,
            c.symmetric_algorithm,
            c.symmetric_nonce_length,
            c.is_ephemeral_key_compressed,
            c.is_hkdf_key_compressed,
        )
        for c in ECIESPY_CONFIGS
    }
    assert ours == theirs
    for cfg in ECIESPY_CONFIGS:
        mine = ecies.EciesConfig(**_opts(cfg))
        assert mine.ephemeral_key_size == cfg.ephemeral_key_size


class _Deterministic:
    """Hands the same byte stream to both libraries, so their outputs must be equal."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def __call__(self, n: int) -> bytes:
        return self.rng.randbytes(n)


def _patch_randomness(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    ours = _Deterministic(seed)
    theirs = _Deterministic(seed)
    monkeypatch.setattr(ecies, "random_bytes", ours)
    monkeypatch.setattr("ecies.keys.helper.get_random_bytes", theirs)
    monkeypatch.setattr("ecies.utils.symmetric.os", SimpleNamespace(urandom=theirs))


def _check_config(cfg: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = _opts(cfg)
    rng = random.Random(_cfg_id(cfg))
    recipient = EciesPrivateKey(cfg.elliptic_curve, rng.randbytes(32))
    pk = recipient.public_key.to_bytes()
    overhead = ecies.EciesConfig(**opts).overhead
    for size in SIZES:
        message = rng.randbytes(size)
        # streamcrypt -> eciespy
        ours = ecies.encrypt(pk, message, **opts)
        assert len(ours) == overhead + size
        assert eciespy.decrypt(recipient.secret, ours, cfg) == message
        # eciespy -> streamcrypt
        theirs = eciespy.encrypt(pk, message, cfg)
        assert ecies.decrypt(recipient.secret, theirs, **opts) == message
        assert ecies.decrypt(recipient.to_hex(), theirs, **opts) == message
    # Byte for byte: the same randomness gives both libraries the same ciphertext.
    message = rng.randbytes(100)
    seed = rng.getrandbits(64)
    with monkeypatch.context() as patch:
        _patch_randomness(patch, seed)
        ours = ecies.encrypt(pk, message, **opts)
        _patch_randomness(patch, seed)
        theirs = eciespy.encrypt(pk, message, cfg)
    assert ours == theirs


def test_interop_every_eciespy_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both directions and byte-for-byte equality, for all 48 configurations."""
    ran = 0
    for cfg in ECIESPY_CONFIGS:
        try:
            _check_config(cfg, monkeypatch)
        except AssertionError as exc:
            raise AssertionError(f"eciespy interop failed for {_cfg_id(cfg)}") from exc
        ran += 1
    assert ran == len(ECIESPY_CONFIGS) == 48


def test_key_agreement_matches_eciespy_sender() -> None:
    """decapsulate() gives the key eciespy's sender derived, for every curve and flag."""
    rng = random.Random(7)
    curves: tuple[ecies.Curve, ...] = ("secp256k1", "x25519", "ed25519")
    flags = (False, True)
    for curve, ce, ch in itertools.product(curves, flags, flags):
        recipient = EciesPrivateKey(curve, rng.randbytes(32))
        sender = EciesPrivateKey(curve, rng.randbytes(32))
        expected = sender.encapsulate(recipient.public_key, ch)
        wire = sender.public_key.to_bytes(ce)
        key = ecies.decapsulate(recipient.secret, wire, curve=curve, compress_hkdf=ch)
        assert isinstance(key, SecretKey)
        assert key.secret_bytes() == expected
        assert ecies.shared_point(
            curve, sender.secret, recipient.public_key.to_bytes(), compressed=ch
        ) == sender.multiply(recipient.public_key, ch)


@pytest.mark.parametrize("curve", ["secp256k1", "x25519", "ed25519"])
@pytest.mark.parametrize("compress", [False, True])
def test_encapsulate_decapsulate(curve: ecies.Curve, compress: bool) -> None:
    sk, pk = ecies.generate_keypair(curve)
    wire, key = ecies.encapsulate(
        pk, curve=curve, compress_ephemeral=compress, compress_hkdf=not compress
    )
    assert len(wire) == ecies.EciesConfig(curve, compress_ephemeral=compress).ephemeral_key_size
    again = ecies.decapsulate(sk, wire, curve=curve, compress_hkdf=not compress)
    assert again == key and len(key) == 32
    assert key.secret_bytes().hex() not in repr(key)
    # A different recipient derives a different key.
    other, _ = ecies.generate_keypair(curve)
    assert ecies.decapsulate(other, wire, curve=curve, compress_hkdf=not compress) != key


def test_public_keys_match_eciespy() -> None:
    rng = random.Random(3)
    for curve in ("secp256k1", "x25519", "ed25519"):
        secret = rng.randbytes(32)
        theirs = EciesPrivateKey(curve, secret).public_key
        for compressed in (False, True):
            assert ecies.public_key(secret, curve=curve, compressed=compressed) == (
                theirs.to_bytes(compressed)
            )
    # For ed25519 the key is the Ed25519 verification key of the seed.
    seed = rng.randbytes(32)
    assert ecies.public_key(seed, curve="ed25519") == bytes(SigningKey(seed).verify_key)


def test_secp256k1_key_forms() -> None:
    recipient = EciesPrivateKey("secp256k1", bytes(range(1, 33)))
    full = recipient.public_key.to_bytes(False)
    short = recipient.public_key.to_bytes(True)
    forms: list[Any] = [
        full,
        short,
        full[1:],  # 64-byte Ethereum form
        full.hex(),
        "0x" + short.hex(),
        "0X" + full[1:].hex(),
        bytearray(full),
        memoryview(short),
        coincurve.PublicKey(full).format(False),
    ]
    for form in forms:
        ct = ecies.encrypt(form, b"forms")
        assert ecies.decrypt(recipient.secret, ct) == b"forms"
        assert ecies.decrypt("0x" + recipient.to_hex(), ct) == b"forms"
        assert ecies.decrypt(SecretKey(recipient.secret), ct) == b"forms"
        assert ecies.decrypt(bytearray(recipient.secret), ct) == b"forms"


@pytest.mark.parametrize("d", [1, 2, N - 2, N - 1])
def test_secp256k1_shared_point_edge_scalars(d: int) -> None:
    """The y recovery has special cases for d = +-1; check them against libsecp256k1."""
    other = coincurve.PrivateKey(bytes(range(7, 39)))
    pk = other.public_key.format(False)
    secret = d.to_bytes(32, "big")
    for compressed in (False, True):
        expected = coincurve.PublicKey(pk).multiply(secret).format(compressed)
        assert ecies.shared_point("secp256k1", secret, pk, compressed=compressed) == expected


def test_cipher_alias_and_nonce_length_ignored_for_xchacha() -> None:
    sk, pk = ecies.generate_keypair("x25519")
    ct = ecies.encrypt(pk, b"m", curve="x25519", cipher="xchacha20-poly1305", nonce_length=24)
    assert len(ct) == 32 + 24 + 16 + 1
    assert ecies.decrypt(sk, ct, curve="x25519", cipher="xchacha20", nonce_length=12) == b"m"


# --------------------------------------------------------------------------- Wycheproof


def test_wycheproof_x25519() -> None:
    """Policy: valid and `acceptable` cases give the RFC 7748 result (twist points and
    non-canonical encodings are accepted, as RFC 7748 section 5 asks), except those whose
    shared secret is all zeros (low-order points, flag ZeroSharedSecret), which raise
    InvalidPublicKeyError (RFC 7748 section 6.1 check)."""
    data = wycheproof("x25519_test.json")
    ran = accepted = rejected = 0
    for group, test in wycheproof_cases(data):
        assert group["curve"] == "curve25519"
        sk, pk = bytes.fromhex(test["private"]), bytes.fromhex(test["public"])
        must_reject = test["result"] == "invalid" or "ZeroSharedSecret" in test["flags"]
        if must_reject:
            with pytest.raises(InvalidPublicKeyError):
                ecies.ecdh("x25519", sk, pk)
            rejected += 1
        else:
            assert ecies.ecdh("x25519", sk, pk).hex() == test["shared"], test["tcId"]
            accepted += 1
        ran += 1
    assert rejected == 31 and accepted == 487
    record_vectors("wycheproof/x25519_test.json", ran, data["numberOfTests"])


def test_wycheproof_secp256k1() -> None:
    """Policy: valid cases and the compressed-point `acceptable` case give the shared x;
    every invalid case raises InvalidPublicKeyError. The other `acceptable` cases (lax
    DER, explicit curve parameters) are refused by the strict DER parser, also with
    InvalidPublicKeyError. Valid cases also check the full shared point (what eciespy's
    HKDF uses) against libsecp256k1 through coincurve."""
    data = wycheproof("ecdh_secp256k1_test.json")
    ran = 0
    outcomes: dict[str, int] = {"valid": 0, "acceptable-ok": 0, "acceptable-no": 0, "invalid": 0}
    for group, test in wycheproof_cases(data):
        assert group["curve"] == "secp256k1" and group["encoding"] == "asn"
        secret = int(test["private"], 16).to_bytes(32, "big")
        public = bytes.fromhex(test["public"])
        if test["result"] == "invalid":
            with pytest.raises(InvalidPublicKeyError):
                ecies.ecdh("secp256k1", secret, public)
            outcomes["invalid"] += 1
        elif test["result"] == "acceptable" and "CompressedPublic" not in test["flags"]:
            with pytest.raises(InvalidPublicKeyError):
                ecies.ecdh("secp256k1", secret, public)
            outcomes["acceptable-no"] += 1
        else:
            assert ecies.ecdh("secp256k1", secret, public).hex() == test["shared"], test["tcId"]
            compressed = ecies.shared_point("secp256k1", secret, public, compressed=True)
            full = ecies.shared_point("secp256k1", secret, public)
            assert compressed[1:].hex() == full[1:33].hex() == test["shared"]
            point = coincurve.PublicKey.from_point(
                int.from_bytes(full[1:33], "big"), int.from_bytes(full[33:], "big")
            )
            assert point.format(True) == compressed
            outcomes["valid" if test["result"] == "valid" else "acceptable-ok"] += 1
        ran += 1
    assert outcomes == {"valid": 473, "acceptable-ok": 1, "acceptable-no": 229, "invalid": 49}
    record_vectors("wycheproof/ecdh_secp256k1_test.json", ran, data["numberOfTests"])


def test_full_point_matches_coincurve_on_random_keys() -> None:
    rng = random.Random(11)
    for _ in range(40):
        a = coincurve.PrivateKey(rng.randbytes(32))
        b = coincurve.PrivateKey(rng.randbytes(32))
        expected = b.public_key.multiply(a.secret).format(False)
        assert ecies.shared_point("secp256k1", a.secret, b.public_key.format(True)) == expected


# --------------------------------------------------------------------------- bad input


def _flip(data: bytes, i: int) -> bytes:
    out = bytearray(data)
    out[i] ^= 0x01
    return bytes(out)


@pytest.mark.parametrize("curve", ["secp256k1", "x25519", "ed25519"])
@pytest.mark.parametrize("cipher", ["aes-256-gcm", "xchacha20"])
def test_tampering_and_wrong_key(curve: ecies.Curve, cipher: str) -> None:
    sk, pk = ecies.generate_keypair(curve)
    opts: dict[str, Any] = {"curve": curve, "cipher": cipher}
    cfg = ecies.EciesConfig(curve, cipher)  # type: ignore[arg-type]
    ct = ecies.encrypt(pk, b"attack at dawn", **opts)
    wrong, _ = ecies.generate_keypair(curve)
    with pytest.raises(AuthenticationError):
        ecies.decrypt(wrong, ct, **opts)
    k = cfg.ephemeral_key_size
    for i in (k, k + cfg.symmetric_nonce_size, len(ct) - 1):  # nonce, tag, ciphertext
        with pytest.raises(AuthenticationError):
            ecies.decrypt(sk, _flip(ct, i), **opts)
    # A changed ephemeral key is either not a valid point or gives another key.
    with pytest.raises((AuthenticationError, InvalidPublicKeyError)):
        ecies.decrypt(sk, _flip(ct, 5), **opts)
    with pytest.raises(FormatError):
        ecies.decrypt(sk, ct[: cfg.overhead - 1], **opts)
    # Other options than the sender's fail closed.
    other_cipher = "xchacha20" if cipher == "aes-256-gcm" else "aes-256-gcm"
    with pytest.raises((AuthenticationError, FormatError)):
        ecies.decrypt(sk, ct, curve=curve, cipher=other_cipher)


def test_tampered_ciphertext_of_empty_message() -> None:
    sk, pk = ecies.generate_keypair()
    ct = ecies.encrypt(pk, b"")
    assert ecies.decrypt(sk, ct) == b""
    with pytest.raises(AuthenticationError):
        ecies.decrypt(sk, _flip(ct, len(ct) - 1))


SECP_OFF_CURVE = b"\x04" + (1).to_bytes(32, "big") + (1).to_bytes(32, "big")
# Ed25519 points of small order: the identity and a point of order 4 (0, -1 encoded).
ED_IDENTITY = (1).to_bytes(32, "little")
ED_ORDER4 = ((1 << 255) - 19 - 1).to_bytes(32, "little")


@pytest.mark.parametrize(
    ("curve", "public"),
    [
        ("secp256k1", SECP_OFF_CURVE),
        ("secp256k1", b"\x02" + b"\xff" * 32),  # x >= p
        ("secp256k1", b"\x05" + bytes(64)),
        ("secp256k1", bytes(33)),
        ("secp256k1", b"\x04" + bytes(32)),  # prefix and length disagree
        ("secp256k1", b"\x30\x03\x02\x01\x00"),  # DER, but not a public key
        ("secp256k1", b""),
        ("x25519", bytes(32)),  # low order: all-zero shared secret
        ("x25519", (1).to_bytes(32, "little")),
        ("x25519", bytes(31)),
        ("ed25519", ED_IDENTITY),
        ("ed25519", ED_ORDER4),
        ("ed25519", b"\xff" * 32),
        ("ed25519", bytes(33)),
    ],
)
def test_invalid_public_keys(curve: ecies.Curve, public: bytes) -> None:
    with pytest.raises(InvalidPublicKeyError):
        ecies.encrypt(public, b"x", curve=curve)
    sk, _ = ecies.generate_keypair(curve)
    with pytest.raises(InvalidPublicKeyError):
        ecies.ecdh(curve, sk, public)


@pytest.mark.parametrize("curve", ["x25519", "ed25519"])
def test_low_order_ephemeral_key_is_refused(curve: ecies.Curve) -> None:
    sk, pk = ecies.generate_keypair(curve)
    ct = ecies.encrypt(pk, b"hello", curve=curve)
    bad = (bytes(32) if curve == "x25519" else ED_IDENTITY) + ct[32:]
    with pytest.raises(InvalidPublicKeyError):
        ecies.decrypt(sk, bad, curve=curve)


def test_invalid_private_keys_and_options() -> None:
    _, pk = ecies.generate_keypair()
    ct = ecies.encrypt(pk, b"x")
    with pytest.raises(InvalidKeySizeError):
        ecies.decrypt(bytes(31), ct)
    for d in (0, N, N + 1):
        with pytest.raises(InvalidParameterError):
            ecies.decrypt(d.to_bytes(32, "big"), ct)
    with pytest.raises(InvalidParameterError):
        ecies.decrypt("not hex", ct)
    with pytest.raises(InvalidPublicKeyError):
        ecies.encrypt("0xzz", b"x")
    with pytest.raises(InvalidPublicKeyError):
        ecies.encrypt(12345, b"x")  # type: ignore[arg-type]
    with pytest.raises(InvalidKeySizeError):
        ecies.public_key(bytes(16), curve="ed25519")
    with pytest.raises(UnsupportedFormatError):
        ecies.encrypt(pk, b"x", curve="p256")  # type: ignore[arg-type]
    with pytest.raises(UnsupportedFormatError):
        ecies.encrypt(pk, b"x", cipher="aes-128-cbc")
    with pytest.raises(InvalidParameterError):
        ecies.encrypt(pk, b"x", nonce_length=24)


def test_errors_do_not_leak_secrets() -> None:
    sk, pk = ecies.generate_keypair()
    raw = sk.secret_bytes()
    assert raw.hex() not in repr(sk)
    ct = ecies.encrypt(pk, b"secret plaintext")
    wrong = bytes(raw[:-1]) + bytes([raw[-1] ^ 1])
    with pytest.raises(AuthenticationError) as info:
        ecies.decrypt(wrong, ct)
    text = str(info.value)
    assert wrong.hex() not in text and "secret plaintext" not in text
    with pytest.raises(TypeError):
        pickle.dumps(sk)


def test_config_is_frozen_value() -> None:
    cfg = ecies.EciesConfig("x25519", "xchacha20-poly1305")  # type: ignore[arg-type]
    assert cfg.cipher == "xchacha20"
    assert cfg.overhead == 32 + 24 + 16
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.curve = "secp256k1"  # type: ignore[misc]
    assert not hasattr(cfg, "__dict__")


def test_message_for_one_curve_does_not_open_as_another() -> None:
    recipient = EciesPrivateKey("x25519", bytes(range(32)))
    ct = eciespy.encrypt(recipient.public_key.to_bytes(), b"m", Config("x25519"))
    assert ecies.decrypt(recipient.secret, ct, curve="x25519") == b"m"
    with pytest.raises((AuthenticationError, InvalidPublicKeyError)):
        ecies.decrypt(recipient.secret, ct, curve="ed25519")
