"""NimCypher's high-level conveniences and Argon2d/Argon2i/Argon2id against their peers."""

from __future__ import annotations

import random

import argon2.low_level as argon2_cffi
import monocypher
import monocypher_c as C
import nacl.pwhash
import pytest

from streamcrypt.errors import AuthenticationError, InvalidKeySizeError, InvalidParameterError
from streamcrypt.keys import (
    ARGON2_VARIANTS,
    Argon2Params,
    SecretKey,
    argon2,
    x25519_key_pair_from_password,
)
from streamcrypt.primitives import (
    AES256GCM,
    XChaCha20Poly1305,
    challenge_mac,
    open_box,
    seal_box,
    verify_challenge_mac,
)

FAST = Argon2Params(ops=1, mem=8192)
TYPES = {
    "argon2d": argon2_cffi.Type.D,
    "argon2i": argon2_cffi.Type.I,
    "argon2id": argon2_cffi.Type.ID,
}


@pytest.mark.parametrize("variant", sorted(ARGON2_VARIANTS))
def test_argon2_variants_match_argon2_cffi(variant: str) -> None:
    rng = random.Random(variant)
    for _ in range(40):
        pw, salt = rng.randbytes(rng.randint(0, 30)), rng.randbytes(rng.randint(8, 32))
        passes, lanes = rng.randint(1, 3), rng.randint(1, 4)
        blocks, length = rng.randint(8 * lanes, 64), rng.randint(4, 64)
        ours = argon2(
            pw, salt, variant=variant, passes=passes, blocks=blocks, lanes=lanes, length=length
        )  # type: ignore[arg-type]
        theirs = argon2_cffi.hash_secret_raw(
            pw, salt, passes, blocks, lanes, length, TYPES[variant]
        )
        assert ours.secret_bytes() == theirs


def test_argon2id_matches_libsodium_and_argon2i_matches_monocypher() -> None:
    salt = bytes(range(16))
    ours = argon2("correct horse", salt, passes=2, blocks=1024)
    assert ours.secret_bytes() == nacl.pwhash.argon2id.kdf(
        32, b"correct horse", salt, opslimit=2, memlimit=1024 * 1024
    )
    assert argon2(b"pw", salt, variant="argon2i", passes=1, blocks=8).secret_bytes() == (
        monocypher.argon2i_32(8, 1, b"pw", salt)
    )
    assert "hidden" in repr(ours)


def test_seal_box_both_suites_and_bad_input() -> None:
    key = SecretKey.generate()
    for suite, cls in (("xchacha20-poly1305", XChaCha20Poly1305), ("aes-256-gcm", AES256GCM)):
        box = seal_box(key, b"attack at dawn", b"ad", suite=suite)
        assert len(box) == cls.nonce_size + 14 + 16
        assert box != seal_box(key, b"attack at dawn", b"ad", suite=suite)  # fresh nonces
        assert open_box(key, box, b"ad", suite=suite) == b"attack at dawn"
        nonce = box[: cls.nonce_size]
        assert cls(key).open(nonce, box[cls.nonce_size :], b"ad") == b"attack at dawn"
        for bad in (box[:-1], box[: cls.nonce_size + 15], bytes([box[0] ^ 1]) + box[1:]):
            with pytest.raises(AuthenticationError):
                open_box(key, bad, b"ad", suite=suite)
        with pytest.raises(AuthenticationError):
            open_box(key, box, b"other", suite=suite)
    # XChaCha20-Poly1305 boxes are Monocypher's crypto_aead_lock under the carried nonce
    box = seal_box(key, b"hello")
    mac, ct = box[-16:], box[24:-16]
    assert monocypher.unlock(key.secret_bytes(), box[:24], mac, ct) == b"hello"
    with pytest.raises(InvalidParameterError):
        seal_box(key, b"x", suite="chacha20-poly1305")
    with pytest.raises(InvalidKeySizeError):
        seal_box(bytes(16), b"x")


def test_challenge_mac_is_keyed_blake2b_16() -> None:
    rng = random.Random("challenge")
    for _ in range(200):
        secret, challenge = rng.randbytes(32), rng.randbytes(16)
        mac = challenge_mac(secret, challenge)
        assert mac == C.blake2b_keyed(16, secret, challenge)
        verify_challenge_mac(secret, challenge, mac)
        with pytest.raises(AuthenticationError):
            verify_challenge_mac(secret, challenge, bytes([mac[0] ^ 1]) + mac[1:])
        with pytest.raises(AuthenticationError):
            verify_challenge_mac(rng.randbytes(32), challenge, mac)
    with pytest.raises(InvalidKeySizeError):
        challenge_mac(bytes(16), bytes(16))


def test_x25519_key_pair_from_password() -> None:
    salt = bytes(range(16))
    secret, public = x25519_key_pair_from_password("alice-passphrase", salt, params=FAST)
    raw = nacl.pwhash.argon2id.kdf(32, b"alice-passphrase", salt, opslimit=1, memlimit=8192)
    assert secret.secret_bytes() == raw
    assert public == monocypher.x25519_public_key(raw)
    assert x25519_key_pair_from_password("alice-passphrase", salt, params=FAST)[1] == public
    bob_secret, bob_public = x25519_key_pair_from_password("bob", salt, params=FAST)
    assert bob_public != public
    assert monocypher.x25519(secret.secret_bytes(), bob_public) == monocypher.x25519(
        bob_secret.secret_bytes(), public
    )
    with pytest.raises(InvalidParameterError):
        x25519_key_pair_from_password("pw", bytes(8), params=FAST)
