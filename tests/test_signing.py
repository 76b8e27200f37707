"""Ed25519 and Ed25519ph taps: Wycheproof, RFC 8032 vectors, round trips, bad input."""

from __future__ import annotations

import pickle
import random

import pytest
from support import random_splits, record_vectors, wycheproof, wycheproof_cases

from streamcrypt.abc import State, Tap, Transform
from streamcrypt.errors import (
    AlreadyFinalizedError,
    AuthenticationError,
    BrokenTransformError,
    InvalidKeySizeError,
    InvalidParameterError,
    InvalidPublicKeyError,
    InvalidSignatureError,
    NotFinalizedError,
)
from streamcrypt.keys import SecretKey
from streamcrypt.primitives import (
    ED25519_SIGNATURE_SIZE,
    Ed25519phSigner,
    Ed25519phVerifier,
    Ed25519PrivateKey,
    Ed25519PublicKey,
    ed25519_verify,
)

# RFC 8032 section 7.1, TEST 1 (Ed25519, empty message).
RFC_ED25519_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC_ED25519_PK = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC_ED25519_SIG = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
    "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)

# RFC 8032 section 7.3, TEST abc (Ed25519ph, empty context).
RFC_PH_SEED = bytes.fromhex("833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42")
RFC_PH_PK = bytes.fromhex("ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf")
RFC_PH_MSG = bytes.fromhex("616263")
RFC_PH_SIG = bytes.fromhex(
    "98a70222f0b8121aa9d30f813d683f809e462b469c7ff87639499bb94e6dae41"
    "31f85042463c2a355a2003d062adf5aaa10b8c61e636062aaad11c2a26083406"
)


# --------------------------------------------------------------------------- Ed25519


def test_wycheproof_ed25519() -> None:
    data = wycheproof("ed25519_test.json")
    ran = valid = invalid = 0
    for group, test in wycheproof_cases(data):
        pk = bytes.fromhex(group["publicKey"]["pk"])
        msg, sig = bytes.fromhex(test["msg"]), bytes.fromhex(test["sig"])
        assert test["result"] in ("valid", "invalid"), test["tcId"]
        if test["result"] == "valid":
            ed25519_verify(pk, msg, sig)
            Ed25519PublicKey(pk).verify(memoryview(msg), bytearray(sig))
            valid += 1
        else:
            with pytest.raises((InvalidSignatureError, InvalidPublicKeyError)):
                ed25519_verify(pk, msg, sig)
            invalid += 1
        ran += 1
    assert (valid, invalid) == (88, 63)
    record_vectors("wycheproof/ed25519_test.json", ran, data["numberOfTests"])


def test_rfc8032_ed25519_test1() -> None:
    key = Ed25519PrivateKey(RFC_ED25519_SEED)
    assert key.public_bytes() == RFC_ED25519_PK
    assert key.sign(b"") == RFC_ED25519_SIG
    ed25519_verify(RFC_ED25519_PK, b"", RFC_ED25519_SIG)
    with pytest.raises(InvalidSignatureError):
        ed25519_verify(RFC_ED25519_PK, b"\x00", RFC_ED25519_SIG)


def test_sign_verify_round_trip() -> None:
    key = Ed25519PrivateKey.generate()
    msg = random.Random(1).randbytes(1000)
    sig = key.sign(msg)
    assert len(sig) == ED25519_SIGNATURE_SIZE == 64
    key.public_key().verify(msg, sig)
    ed25519_verify(key.public_key(), msg, sig)
    assert Ed25519PublicKey(key.public_bytes()) == key.public_key()
    assert bytes(key.public_key()) == key.public_bytes()
    assert Ed25519PrivateKey(SecretKey(key.secret_bytes())).public_key() == key.public_key()
    other = Ed25519PrivateKey.generate()
    with pytest.raises(InvalidSignatureError) as info:
        ed25519_verify(other.public_bytes(), msg, sig)
    assert isinstance(info.value, AuthenticationError)
    bad = bytearray(sig)
    bad[10] ^= 1
    with pytest.raises(InvalidSignatureError):
        ed25519_verify(key.public_bytes(), msg, bytes(bad))
    with pytest.raises(InvalidSignatureError):
        ed25519_verify(key.public_bytes(), msg + b"!", sig)
    for size in (0, 63, 65):
        with pytest.raises(InvalidSignatureError):
            ed25519_verify(key.public_bytes(), msg, (sig * 2)[:size])


def test_bad_keys() -> None:
    with pytest.raises(InvalidPublicKeyError):
        Ed25519PublicKey(bytes(31))
    with pytest.raises(InvalidPublicKeyError):
        ed25519_verify(bytes(33), b"", bytes(64))
    with pytest.raises(InvalidKeySizeError):
        Ed25519PrivateKey(bytes(64))
    with pytest.raises(InvalidParameterError):
        Ed25519PrivateKey("00" * 32)  # type: ignore[arg-type]


def test_private_key_never_shown() -> None:
    key = Ed25519PrivateKey(RFC_ED25519_SEED)
    for text in (repr(key), str(key), repr(Ed25519phSigner(key))):
        assert RFC_ED25519_SEED.hex() not in text
        assert RFC_ED25519_PK.hex() in text
    with pytest.raises(TypeError):
        pickle.dumps(key)


# --------------------------------------------------------------------------- Ed25519ph


def test_rfc8032_ed25519ph_abc() -> None:
    signer = Ed25519phSigner(RFC_PH_SEED)
    assert signer.public_key().public_bytes() == RFC_PH_PK
    assert signer.update(b"a") == b"a"
    assert signer.update(memoryview(b"bc")) == b"bc"
    assert signer.finalize() == b""
    assert signer.signature() == RFC_PH_SIG
    assert signer.digest() == RFC_PH_SIG and signer.hexdigest() == RFC_PH_SIG.hex()

    verifier = Ed25519phVerifier(RFC_PH_PK, RFC_PH_SIG)
    assert verifier.update(bytearray(RFC_PH_MSG)) == RFC_PH_MSG
    assert verifier.finalize() == b""
    assert verifier.verified()


def test_ed25519ph_is_not_ed25519() -> None:
    key = Ed25519PrivateKey(RFC_PH_SEED)
    with pytest.raises(InvalidSignatureError):
        ed25519_verify(RFC_PH_PK, RFC_PH_MSG, RFC_PH_SIG)
    verifier = Ed25519phVerifier(RFC_PH_PK, key.sign(RFC_PH_MSG))
    verifier.update(RFC_PH_MSG)
    with pytest.raises(InvalidSignatureError):
        verifier.finalize()


@pytest.mark.parametrize("size", [0, 1, 1000, 200_003])
def test_ed25519ph_round_trip_any_chunking(size: int) -> None:
    rng = random.Random(size)
    data = rng.randbytes(size)
    key = Ed25519PrivateKey.generate()
    signer = Ed25519phSigner(key)
    out = b"".join(signer.update(p) for p in random_splits(data, rng, 5000))
    assert out == data and signer.finalize() == b""
    sig = signer.signature()
    # Deterministic: other chunking, same signature.
    again = Ed25519phSigner(key.secret_bytes())
    again.update(data)
    again.finalize()
    assert again.signature() == sig

    verifier = Ed25519phVerifier(key.public_key())
    passed = b"".join(verifier.update(p) for p in random_splits(data, rng, 7000))
    assert passed == data
    verifier.finalize(sig)
    assert verifier.verified()


def test_ed25519ph_verifier_rejects() -> None:
    key = Ed25519PrivateKey.generate()
    data = b"stream of bytes" * 100
    signer = Ed25519phSigner(key)
    signer.update(data)
    signer.finalize()
    sig = signer.signature()

    def verify(pk: bytes, stream: bytes, signature: bytes) -> Ed25519phVerifier:
        v = Ed25519phVerifier(pk, signature)
        v.update(stream)
        with pytest.raises(InvalidSignatureError):
            v.finalize()
        assert v.state is State.BROKEN and not v.verified()
        return v

    tampered = bytearray(data)
    tampered[7] ^= 1
    verify(key.public_bytes(), bytes(tampered), sig)
    verify(key.public_bytes(), data[:-1], sig)  # truncated stream
    verify(key.public_bytes(), data + b"x", sig)  # extended stream
    bad_sig = bytearray(sig)
    bad_sig[40] ^= 1
    broken = verify(key.public_bytes(), data, bytes(bad_sig))
    verify(Ed25519PrivateKey.generate().public_bytes(), data, sig)
    verify(key.public_bytes(), data, sig[:63])
    with pytest.raises(BrokenTransformError) as info:
        broken.update(b"more")
    assert isinstance(info.value.__cause__, InvalidSignatureError)

    missing = Ed25519phVerifier(key.public_bytes())
    missing.update(data)
    with pytest.raises(InvalidParameterError):
        missing.finalize()


def test_ed25519ph_lifecycle() -> None:
    signer = Ed25519phSigner(Ed25519PrivateKey.generate())
    assert isinstance(signer, Tap)
    with pytest.raises(NotFinalizedError):
        signer.signature()
    signer.update(b"x")
    signer.finalize()
    assert signer.state is State.FINALIZED
    with pytest.raises(AlreadyFinalizedError):
        signer.update(b"y")
    with pytest.raises(AlreadyFinalizedError):
        signer.finalize()
    verifier = Ed25519phVerifier(signer.public_key(), signer.signature())
    assert isinstance(verifier, Transform)
    verifier.update(b"x")
    verifier.finalize()
    with pytest.raises(AlreadyFinalizedError):
        verifier.update(b"x")
    with pytest.raises(InvalidParameterError):
        Ed25519phSigner(Ed25519PrivateKey.generate()).update("text")  # type: ignore[arg-type]
