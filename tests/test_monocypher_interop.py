"""Byte for byte against C Monocypher 4, on thousands of random inputs, both directions.

The peer is pymonocypher's Python API where it has the function and Monocypher's C
functions (exported by the same extension, see monocypher_c.py) where it does not. Inputs
come from a seeded generator, so a failure names a reproducible case.
"""

from __future__ import annotations

import hashlib
import random

import monocypher
import monocypher_c as C
import pytest
from nacl import bindings as sodium

from streamcrypt.errors import (
    AuthenticationError,
    BrokenTransformError,
    InvalidKeySizeError,
    InvalidNonceSizeError,
    InvalidParameterError,
    InvalidPublicKeyError,
    InvalidSignatureError,
    InvalidTagSizeError,
)
from streamcrypt.keys import argon2
from streamcrypt.primitives import (
    EdDsaBlake2bPrivateKey,
    EdDsaBlake2bPublicKey,
    MonocypherAead,
    Poly1305Tap,
    XChaCha20Poly1305,
    aead_lock,
    aead_unlock,
    eddsa_to_x25519,
    eddsa_to_x25519_private,
    elligator_key_pair,
    elligator_map,
    elligator_rev,
    x25519_dirty_fast,
    x25519_dirty_small,
    x25519_inverse,
    x25519_to_eddsa,
)
from streamcrypt.primitives.hazmat import ChaCha20, XChaCha20

L = (1 << 252) + 27742317777372353535851937790883648493
P = (1 << 255) - 19

#: [k]T for k = 0..7, T Monocypher's point of order 8 (both coordinates below p/2).
LOW_ORDER_POINTS = [
    bytes.fromhex(h)
    for h in (
        "0100000000000000000000000000000000000000000000000000000000000000",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "0000000000000000000000000000000000000000000000000000000000000000",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
        "0000000000000000000000000000000000000000000000000000000000000080",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    )
]


def _fe(data: bytes) -> int:
    """A field element as Monocypher reads one (top bit ignored, reduced mod p)."""
    return (int.from_bytes(data, "little") & ((1 << 255) - 1)) % P


def _on_curve(u: int) -> bool:
    """u^3 + A u^2 + u is a square (Euler's criterion), so u is on the curve, not the twist."""
    v = u * (u * u + 486662 * u + 1) % P
    return v == 0 or pow(v, (P - 1) // 2, P) == 1


def _rng(name: str) -> random.Random:
    return random.Random(f"monocypher-interop-{name}")


def _bytes(rng: random.Random, n: int) -> bytes:
    return rng.randbytes(n)


# ------------------------------------------------------------------------- EdDSA


def test_eddsa_sign_here_check_there_and_back() -> None:
    rng = _rng("eddsa")
    for i in range(1000):
        seed, msg = _bytes(rng, 32), _bytes(rng, rng.randrange(0, 300))
        key = EdDsaBlake2bPrivateKey(seed)
        secret64, public = C.eddsa_key_pair(seed)
        assert key.public_bytes() == public, i
        ours = key.sign(msg)
        theirs = monocypher.signature_sign(secret64, msg)
        assert ours == theirs, i
        assert monocypher.signature_check(ours, public, msg)  # sign here, check there
        key.public_key().verify(msg, theirs)  # sign there, check here
        if i % 4:
            continue
        # a flipped bit is refused on both sides
        bad = bytearray(ours)
        bad[rng.randrange(64)] ^= 1 << rng.randrange(8)
        assert not C.eddsa_check(bytes(bad), public, msg)
        with pytest.raises(InvalidSignatureError):
            key.public_key().verify(msg, bytes(bad))


def test_eddsa_check_agrees_on_random_keys_and_signatures() -> None:
    """Random 32-byte keys (about half on the curve, most with a torsion component) and
    random signatures: accept/refuse exactly as crypto_eddsa_check, or refuse the key."""
    rng = _rng("eddsa-random")
    refused = 0
    for _ in range(600):
        pk, sig, msg = _bytes(rng, 32), _bytes(rng, 64), _bytes(rng, 20)
        try:
            key = EdDsaBlake2bPublicKey(pk)
        except InvalidPublicKeyError:
            refused += 1
            continue
        with pytest.raises(InvalidSignatureError):
            key.verify(msg, sig)
        assert not C.eddsa_check(sig, pk, msg)
    assert 200 < refused < 400  # off-curve encodings are about half


def test_eddsa_accepts_what_monocypher_accepts_under_torsioned_keys() -> None:
    """A public key with a low-order component, signed for directly: Monocypher's
    cofactored check accepts, and so does ours (and non-canonical S is refused by both)."""
    rng = _rng("eddsa-torsion")
    for i in range(60):
        a = rng.randrange(1, L)
        torsion = LOW_ORDER_POINTS[1 + i % 7]
        public = sodium.crypto_core_ed25519_add(
            sodium.crypto_scalarmult_ed25519_base_noclamp(a.to_bytes(32, "little")), torsion
        )
        msg = _bytes(rng, 40)
        r = rng.randrange(1, L)
        big_r = sodium.crypto_scalarmult_ed25519_base_noclamp(r.to_bytes(32, "little"))
        h = int.from_bytes(hashlib.blake2b(big_r + public + msg).digest(), "little") % L
        s = (r + h * a) % L
        sig = big_r + s.to_bytes(32, "little")
        assert C.eddsa_check(sig, public, msg)
        EdDsaBlake2bPublicKey(public).verify(msg, sig)
        high = big_r + (s + L).to_bytes(32, "little")  # same point, S >= L
        assert not C.eddsa_check(high, public, msg)
        with pytest.raises(InvalidSignatureError):
            EdDsaBlake2bPublicKey(public).verify(msg, high)


def test_eddsa_refuses_low_order_keys_monocypher_would_accept() -> None:
    for point in LOW_ORDER_POINTS:
        forged = (1).to_bytes(32, "little") + bytes(32)  # R = identity, S = 0
        assert C.eddsa_check(forged, point, b"any message")  # Monocypher: forged
        with pytest.raises(InvalidPublicKeyError):
            EdDsaBlake2bPublicKey(point)


# --------------------------------------------------------------- curve extras


def test_dirty_keys_inverse_and_conversions_match_c() -> None:
    rng = _rng("x25519-extras")
    for i in range(1000):
        sk = _bytes(rng, 32)
        assert x25519_dirty_fast(sk) == C.x25519_dirty_fast(sk), i
        assert x25519_dirty_small(sk) == C.x25519_dirty_small(sk), i
        e = _bytes(rng, 32)
        assert eddsa_to_x25519(e) == C.eddsa_to_x25519(e), i
        assert x25519_to_eddsa(e) == C.x25519_to_eddsa(e), i


def test_dirty_keys_agree_with_clean_x25519() -> None:
    rng = _rng("dirty-clean")
    for _ in range(100):
        sk, other = _bytes(rng, 32), _bytes(rng, 32)
        clean_sk = bytes([sk[0] & 248]) + sk[1:]
        assert x25519_dirty_fast(clean_sk) == monocypher.x25519_public_key(sk)
        # the shared secret is the same with the dirty and the clean public key
        assert C.x25519(other, x25519_dirty_fast(sk)) == C.x25519(
            other, monocypher.x25519_public_key(sk)
        )


def test_x25519_inverse_matches_c_on_curve_and_twist_points() -> None:
    rng = _rng("inverse")
    for i in range(200):  # random u: about half on the twist
        sk, point = _bytes(rng, 32), _bytes(rng, 32)
        assert x25519_inverse(sk, point) == C.x25519_inverse(sk, point), i
    base = monocypher.x25519_public_key(_bytes(rng, 32))
    for _ in range(100):  # the OPRF round trip
        sk = _bytes(rng, 32)
        assert x25519_inverse(sk, C.x25519(sk, base)) == base


LOW_ORDER_U = [
    bytes(32),
    (1).to_bytes(32, "little"),
    bytes.fromhex("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
    bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
]


def test_x25519_inverse_refuses_low_order_points() -> None:
    for point in LOW_ORDER_U:
        assert C.x25519_inverse(bytes(range(32)), point) == bytes(32)
        with pytest.raises(InvalidPublicKeyError):
            x25519_inverse(bytes(range(32)), point)


def test_eddsa_x25519_conversions_round_trip() -> None:
    rng = _rng("conversions")
    for _ in range(100):
        seed = _bytes(rng, 32)
        e_public = EdDsaBlake2bPrivateKey(seed).public_bytes()
        x_private = eddsa_to_x25519_private(seed)
        assert eddsa_to_x25519(e_public) == monocypher.x25519_public_key(x_private.secret_bytes())
        assert x25519_to_eddsa(eddsa_to_x25519(e_public)) == e_public[:31] + bytes(
            [e_public[31] & 0x7F]
        )


def test_elligator_map_and_reverse_match_c_both_ways() -> None:
    rng = _rng("elligator")
    represented = 0
    for i in range(1500):
        hidden = _bytes(rng, 32)
        point = elligator_map(hidden)
        assert point == monocypher.elligator_map(hidden), i
        tweak = rng.randrange(256)
        # reverse here, map there; reverse there, map here
        ours = elligator_rev(point, tweak)
        assert ours == C.elligator_rev(point, tweak), i
        if ours is not None:
            represented += 1
            assert monocypher.elligator_map(ours) == point
            assert ours[31] >> 6 == tweak >> 6
        u = _bytes(rng, 32)
        theirs = C.elligator_rev(u, tweak)
        assert elligator_rev(u, tweak) == theirs, i
        if theirs is not None and _on_curve(_fe(u)):  # the round trip gives the point back
            assert elligator_map(theirs) == _fe(u).to_bytes(32, "little")
    assert represented == 1500  # the image of the map is always representable


def test_elligator_key_pairs_match_c() -> None:
    rng = _rng("elligator-kp")
    for i in range(200):
        seed = _bytes(rng, 32)
        hidden, secret = elligator_key_pair(seed)
        assert (hidden, secret.secret_bytes()) == monocypher.elligator_key_pair(seed), i
        assert elligator_map(hidden) == x25519_dirty_fast(secret)
        other = _bytes(rng, 32)
        assert C.x25519(other, elligator_map(hidden)) == C.x25519(
            other, monocypher.x25519_public_key(secret.secret_bytes())
        )
    hidden, secret = elligator_key_pair()  # a random seed
    assert elligator_map(hidden) == x25519_dirty_fast(secret)


# --------------------------------------------------------------------------- AEAD


@pytest.mark.parametrize("nonce_size", [24, 8, 12], ids=["x", "djb", "ietf"])
def test_incremental_aead_matches_c_both_ways(nonce_size: int) -> None:
    rng = _rng(f"aead-{nonce_size}")
    for i in range(150):
        key, nonce = _bytes(rng, 32), _bytes(rng, nonce_size)
        writer, reader = MonocypherAead(key, nonce), MonocypherAead(key, nonce)
        c_writer, c_reader = C.Aead(key, nonce), C.Aead(key, nonce)
        for _ in range(4):
            msg, ad = _bytes(rng, rng.randrange(0, 200)), _bytes(rng, rng.randrange(0, 40))
            ours = writer.write(msg, ad)
            assert ours == c_writer.write(msg, ad), i
            assert c_reader.read(*ours, ad) == msg  # write here, read there
        c_writer2 = C.Aead(key, nonce)
        for _ in range(4):  # write there, read here
            msg, ad = _bytes(rng, rng.randrange(0, 200)), _bytes(rng, 8)
            mac, ct = c_writer2.write(msg, ad)
            assert reader.read(mac, ct, ad) == msg


def test_incremental_aead_matches_pymonocypher() -> None:
    rng = _rng("aead-pymonocypher")
    for _ in range(100):
        key, nonce = _bytes(rng, 32), _bytes(rng, 24)
        theirs = monocypher.IncrementalAuthenticatedEncryption(key, nonce)
        ours = MonocypherAead(key, nonce)
        for _ in range(3):
            msg = _bytes(rng, rng.randrange(0, 500))
            assert ours.write(msg, b"ad") == theirs.lock(msg, b"ad")


def test_lock_unlock_match_c_both_ways() -> None:
    rng = _rng("lock")
    for i in range(1000):
        key, nonce = _bytes(rng, 32), _bytes(rng, 24)
        msg, ad = _bytes(rng, rng.randrange(0, 300)), _bytes(rng, rng.randrange(0, 20))
        mac, ct = aead_lock(key, nonce, msg, ad)
        assert (mac, ct) == monocypher.lock(key, nonce, msg, ad), i
        assert monocypher.unlock(key, nonce, mac, ct, ad) == msg
        mac2, ct2 = monocypher.lock(key, nonce, msg, ad)
        assert aead_unlock(key, nonce, mac2, ct2, ad) == msg
        # crypto_aead_lock is XChaCha20-Poly1305 with the tag apart
        assert XChaCha20Poly1305(key).seal(nonce, msg, ad) == ct + mac


def test_aead_bad_input_gets_typed_errors() -> None:
    key, nonce = bytes(32), bytes(24)
    mac, ct = aead_lock(key, nonce, b"attack at dawn", b"ad")
    with pytest.raises(AuthenticationError):
        aead_unlock(key, nonce, bytes([mac[0] ^ 1]) + mac[1:], ct, b"ad")
    with pytest.raises(AuthenticationError):
        aead_unlock(key, nonce, mac, ct[:-1], b"ad")  # truncated
    with pytest.raises(AuthenticationError):
        aead_unlock(key, nonce, mac, ct, b"other ad")
    with pytest.raises(InvalidTagSizeError):
        aead_unlock(key, nonce, mac[:15], ct, b"ad")
    with pytest.raises(InvalidKeySizeError):
        MonocypherAead(bytes(31), nonce)
    with pytest.raises(InvalidNonceSizeError):
        MonocypherAead(key, bytes(16))
    with pytest.raises(InvalidNonceSizeError):
        aead_lock(key, bytes(12), b"")
    # messages out of order fail, and a failure is final
    ctx_w, ctx_r = MonocypherAead(key, nonce), MonocypherAead(key, nonce)
    first, second = ctx_w.write(b"one"), ctx_w.write(b"two")
    with pytest.raises(AuthenticationError):
        ctx_r.read(*second)
    with pytest.raises(BrokenTransformError):
        ctx_r.read(*first)


# ----------------------------------------------------------- ChaCha20, Poly1305


def test_chacha20_variants_and_poly1305_match_c() -> None:
    rng = _rng("chacha")
    for i in range(300):
        key, data = _bytes(rng, 32), _bytes(rng, rng.randrange(0, 400))
        n8, n12, n24 = _bytes(rng, 8), _bytes(rng, 12), _bytes(rng, 24)
        ctr = rng.randrange(0, 1 << 30)
        assert ChaCha20(key, n8, counter=ctr).update(data) == C.chacha20_djb(data, key, n8, ctr), i
        assert ChaCha20(key, n12, counter=ctr).update(data) == C.chacha20_ietf(data, key, n12, ctr)
        assert XChaCha20(key, n24, counter=ctr).update(data) == C.chacha20_x(data, key, n24, ctr)
        if not ctr % 3:
            assert XChaCha20(key, n24).update(data) == monocypher.chacha20(key, n24, data)
        tap = Poly1305Tap(key)
        tap.update(data)
        tap.finalize()
        assert tap.digest() == C.poly1305(data, key)


# ------------------------------------------------------------------------- Argon2


def test_argon2_all_variants_match_c() -> None:
    rng = _rng("argon2")
    for i in range(120):
        variant = rng.choice(["argon2d", "argon2i", "argon2id"])
        lanes = rng.randint(1, 4)
        blocks, passes = rng.randint(8 * lanes, 8 * lanes + 40), rng.randint(1, 3)
        pw, salt = _bytes(rng, rng.randint(0, 40)), _bytes(rng, rng.randint(8, 24))
        key, ad = _bytes(rng, rng.choice([0, 16, 32])), _bytes(rng, rng.choice([0, 5, 20]))
        length = rng.randint(4, 80)
        ours = argon2(
            pw,
            salt,
            variant=variant,  # type: ignore[arg-type]
            passes=passes,
            blocks=blocks,
            lanes=lanes,
            length=length,
            key=key,
            ad=ad,
        )
        algorithm = {"argon2d": C.ARGON2_D, "argon2i": C.ARGON2_I, "argon2id": C.ARGON2_ID}
        theirs = C.argon2(
            algorithm[variant],
            pw,
            salt,
            blocks=blocks,
            passes=passes,
            lanes=lanes,
            length=length,
            key=key,
            ad=ad,
        )
        assert ours.secret_bytes() == theirs, (i, variant, lanes, blocks, passes)
    for _ in range(20):
        pw, salt = _bytes(rng, 12), _bytes(rng, 16)
        ours_i = argon2(pw, salt, variant="argon2i", passes=3, blocks=8)
        assert ours_i.secret_bytes() == monocypher.argon2i_32(8, 3, pw, salt)


def test_argon2_bad_parameters_get_typed_errors() -> None:
    with pytest.raises(InvalidParameterError):
        argon2(b"pw", bytes(16), variant="argon2x", passes=1, blocks=8)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        argon2(b"pw", bytes(16), passes=0, blocks=8)
    with pytest.raises(InvalidParameterError):
        argon2(b"pw", bytes(16), passes=1, blocks=15, lanes=2)  # fewer than 8 per lane
    with pytest.raises(InvalidParameterError):
        argon2(b"pw", bytes(7), passes=1, blocks=8)  # short salt
    with pytest.raises(InvalidParameterError):
        argon2(b"pw", bytes(16), passes=1, blocks=8, length=3)


def test_curve_functions_bad_input_gets_typed_errors() -> None:
    with pytest.raises(InvalidPublicKeyError):
        elligator_map(bytes(31))
    with pytest.raises(InvalidPublicKeyError):
        elligator_rev(bytes(33), 0)
    with pytest.raises(InvalidParameterError):
        elligator_rev(bytes(32), 256)
    with pytest.raises(InvalidKeySizeError):
        elligator_key_pair(bytes(31))
    with pytest.raises(InvalidKeySizeError):
        x25519_dirty_fast(bytes(33))
    with pytest.raises(InvalidKeySizeError):
        x25519_inverse(bytes(31), bytes(32))
    with pytest.raises(InvalidPublicKeyError):
        x25519_inverse(bytes(32), bytes(31))
    with pytest.raises(InvalidPublicKeyError):
        eddsa_to_x25519(bytes(16))
    with pytest.raises(InvalidPublicKeyError):
        x25519_to_eddsa(bytes(64))
