"""Noise handshake state machine: cacophony and snow vectors, then the edges by hand.

Vector files: tests/vectors/noise/cacophony.txt and snow.txt (JSON, ``vectors[]``).
Every vector whose DH is 25519 is applicable: every pattern named in them (fundamental,
one-way, deferred, PSK variants including multi-PSK names) are implemented here.

Explicit exclusions: DH 448 (cacophony holds 472 such vectors; X448 is not implemented,
so those names must raise UnsupportedFormatError). snow.txt has no exclusions.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from support import record_vectors, vector_path

from streamcrypt.codecs.noise import (
    MAX_MESSAGE_LEN,
    MAX_NONCE,
    CipherState,
    NoiseHandshake,
    NoiseProtocolName,
    generate_keypair,
    parse_pattern,
    public_key,
)
from streamcrypt.errors import (
    AlreadyFinalizedError,
    AuthenticationError,
    BrokenTransformError,
    FormatError,
    HandshakeError,
    InvalidKeySizeError,
    InvalidParameterError,
    LimitExceededError,
    UnsupportedFormatError,
)
from streamcrypt.keys import SecretKey

#: DH functions whose vectors are excluded, with the reason.
EXCLUDED_DH = {"448": "X448 is not implemented"}
#: Applicable (25519) vectors each file must yield; fewer means vectors went missing.
EXPECTED_APPLICABLE = {"cacophony.txt": 472, "snow.txt": 408}
EXPECTED_TOTAL = {"cacophony.txt": 944, "snow.txt": 408}


def _hex(value: str | None) -> bytes | None:
    return bytes.fromhex(value) if value is not None else None


def _side(vector: dict[str, Any], prefix: str, proto: NoiseProtocolName) -> NoiseHandshake:
    return NoiseHandshake(
        proto,
        prefix == "init",
        s=_hex(vector.get(f"{prefix}_static")),
        rs=_hex(vector.get(f"{prefix}_remote_static")),
        psks=[bytes.fromhex(p) for p in vector.get(f"{prefix}_psks", [])],
        prologue=bytes.fromhex(vector[f"{prefix}_prologue"]),
        e=_hex(vector.get(f"{prefix}_ephemeral")),
    )


def _run_vector(vector: dict[str, Any]) -> int:
    """Run one vector both ways; return the number of messages checked."""
    proto = NoiseProtocolName.parse(vector["protocol_name"])
    init, resp = _side(vector, "init", proto), _side(vector, "resp", proto)
    transport: tuple[tuple[CipherState, CipherState], tuple[CipherState, CipherState]] | None
    transport = None
    for n, message in enumerate(vector["messages"]):
        payload = bytes.fromhex(message["payload"])
        expected = bytes.fromhex(message["ciphertext"])
        if not init.complete:
            sender, receiver = (init, resp) if n % 2 == 0 else (resp, init)
            assert sender.needs_write and not receiver.needs_write
            assert sender.write_message(payload) == expected, f"handshake message {n}"
            assert receiver.read_message(expected) == payload, f"handshake message {n}"
            continue
        if transport is None:
            assert resp.complete
            if "handshake_hash" in vector:
                assert init.handshake_hash == bytes.fromhex(vector["handshake_hash"])
            assert init.handshake_hash == resp.handshake_hash
            transport = (init.split(), resp.split())
        # Transport messages keep alternating; in one-way patterns only the initiator sends.
        from_init = proto.pattern.one_way or n % 2 == 0
        (send, _), (_, recv) = transport if from_init else transport[::-1]
        assert send.encrypt(b"", payload) == expected, f"transport message {n}"
        assert recv.decrypt(b"", expected) == payload, f"transport message {n}"
    assert init.complete and resp.complete
    return len(vector["messages"])


@pytest.mark.parametrize("filename", sorted(EXPECTED_APPLICABLE))
def test_noise_vectors(filename: str) -> None:
    vectors = json.loads(vector_path("noise", filename).read_text())["vectors"]
    assert len(vectors) == EXPECTED_TOTAL[filename]
    applicable = []
    for vector in vectors:
        dh = vector["protocol_name"].split("_")[2]
        if dh in EXCLUDED_DH:
            with pytest.raises(UnsupportedFormatError):
                NoiseProtocolName.parse(vector["protocol_name"])
        else:
            applicable.append(vector)
    assert len(applicable) == EXPECTED_APPLICABLE[filename]
    ran = messages = 0
    failures: list[str] = []
    for vector in applicable:
        try:
            messages += _run_vector(vector)
        except AssertionError as exc:
            failures.append(f"{vector['protocol_name']}: {exc}")
            continue
        ran += 1
    assert not failures, f"{len(failures)} vectors failed, first: {failures[:3]}"
    assert messages >= 2 * ran
    record_vectors(f"noise/{filename} (25519)", ran, len(applicable))


# -- protocol names -------------------------------------------------------------------


def test_parse_names() -> None:
    p = NoiseProtocolName.parse("Noise_XXpsk0+psk3_25519_AESGCM_BLAKE2b")
    assert (p.dh, p.cipher, p.hash, p.hash_len) == ("25519", "AESGCM", "BLAKE2b", 64)
    assert p.pattern.messages == (("psk", "e"), ("e", "ee", "s", "es"), ("s", "se", "psk"))
    assert p.pattern.psk_count == 2
    assert parse_pattern("NNpsk2").messages == (("e",), ("e", "ee", "psk"))
    assert parse_pattern("N").one_way and not parse_pattern("NN").one_way


@pytest.mark.parametrize(
    "name",
    [
        "Noise_XX_448_ChaChaPoly_BLAKE2s",
        "Noise_XXfallback_25519_ChaChaPoly_BLAKE2s",
        "Noise_XXhfs_25519_ChaChaPoly_BLAKE2s",
        "Noise_ZZ_25519_ChaChaPoly_BLAKE2s",
        "Noise_XX_25519_AESGCM_SHA384",
        "Noise_XX_25519_Ascon_SHA256",
        "Noise_NNpsk3_25519_AESGCM_SHA256",
        "Noise_NNpsk0+psk0_25519_AESGCM_SHA256",
    ],
)
def test_unsupported_names(name: str) -> None:
    with pytest.raises(UnsupportedFormatError):
        NoiseProtocolName.parse(name)
    with pytest.raises(UnsupportedFormatError):
        NoiseHandshake(name, True)


@pytest.mark.parametrize("name", ["Noise_XX_25519_ChaChaPoly", "Nois_XX_25519_AESGCM_SHA256", ""])
def test_malformed_names(name: str) -> None:
    with pytest.raises(FormatError):
        NoiseProtocolName.parse(name)


# -- handshakes by hand ----------------------------------------------------------------


def _pair(name: str, psks: int = 0) -> tuple[NoiseHandshake, NoiseHandshake]:
    keys = [bytes([i]) * 32 for i in range(1, psks + 1)]
    i_priv, i_pub = generate_keypair()
    r_priv, r_pub = generate_keypair()
    pattern = NoiseProtocolName.parse(name).pattern
    init_s = i_priv if pattern.uses_local_static(True) else None
    resp_s = r_priv if pattern.uses_local_static(False) else None
    init_rs = r_pub if pattern.remote_static_premessage(True) else None
    resp_rs = i_pub if pattern.remote_static_premessage(False) else None
    init = NoiseHandshake(name, True, s=init_s, rs=init_rs, psks=keys, prologue=b"p")
    resp = NoiseHandshake(name, False, s=resp_s, rs=resp_rs, psks=keys, prologue=b"p")
    return init, resp


def _run(init: NoiseHandshake, resp: NoiseHandshake) -> None:
    sender, receiver = init, resp
    while not init.complete:
        receiver.read_message(sender.write_message(b"hello"))
        sender, receiver = receiver, sender


def test_handshake_and_transport_roundtrip() -> None:
    init, resp = _pair("Noise_IK_25519_ChaChaPoly_BLAKE2s")
    assert init.needs_write and not resp.needs_write
    assert resp.remote_static is None
    assert resp.read_message(init.write_message(b"first")) == b"first"
    assert resp.remote_static == init.local_static  # readable mid-handshake, for a policy check
    assert init.read_message(resp.write_message(b"second")) == b"second"
    assert init.complete and resp.complete
    assert init.handshake_hash == resp.handshake_hash
    (i_send, i_recv), (r_send, r_recv) = init.split(), resp.split()
    for k in range(5):
        assert r_recv.decrypt(b"ad", i_send.encrypt(b"ad", b"ping %d" % k)) == b"ping %d" % k
        assert i_recv.decrypt(b"", r_send.encrypt(b"", b"pong")) == b"pong"
    assert i_send.nonce == 5
    i_send.rekey()
    r_recv.rekey()
    assert r_recv.decrypt(b"", i_send.encrypt(b"", b"after rekey")) == b"after rekey"
    with pytest.raises(AlreadyFinalizedError):
        init.split()
    assert init.handshake_hash == resp.handshake_hash  # still readable after split


def test_secret_key_inputs_and_repr() -> None:
    priv, pub = generate_keypair()
    assert public_key(priv) == pub == public_key(priv.secret_bytes())
    psk = SecretKey(b"\x07" * 32)
    init = NoiseHandshake("Noise_NKpsk0_25519_AESGCM_SHA512", True, rs=pub, psks=[psk])
    resp = NoiseHandshake("Noise_NKpsk0_25519_AESGCM_SHA512", False, s=priv, psks=[psk])
    _run(init, resp)
    text = repr(init) + repr(resp) + repr(init.split()) + repr(resp.split())
    assert priv.secret_bytes().hex() not in text and "07070707" not in text
    assert "hidden" in text


def test_tampered_message_breaks_handshake() -> None:
    init, resp = _pair("Noise_XX_25519_AESGCM_SHA256")
    resp.read_message(init.write_message())
    msg = bytearray(resp.write_message(b"payload"))
    msg[40] ^= 1
    with pytest.raises(HandshakeError) as info:
        init.read_message(bytes(msg))
    assert isinstance(info.value.__cause__, AuthenticationError)
    with pytest.raises(BrokenTransformError):
        init.write_message()


def test_wrong_psk_and_prologue_fail() -> None:
    name = "Noise_NNpsk0_25519_ChaChaPoly_SHA256"
    init = NoiseHandshake(name, True, psks=[b"a" * 32])
    resp = NoiseHandshake(name, False, psks=[b"b" * 32])
    with pytest.raises(HandshakeError):
        resp.read_message(init.write_message())
    init = NoiseHandshake("Noise_NN_25519_ChaChaPoly_SHA256", True, prologue=b"x")
    resp = NoiseHandshake("Noise_NN_25519_ChaChaPoly_SHA256", False, prologue=b"y")
    resp.read_message(init.write_message())  # no key yet: first NN message is clear
    with pytest.raises(HandshakeError):
        init.read_message(resp.write_message())


def test_short_and_oversized_messages() -> None:
    init, resp = _pair("Noise_NN_25519_ChaChaPoly_SHA256")
    with pytest.raises(HandshakeError, match="shorter"):
        resp.read_message(b"\x01" * 31)
    init, resp = _pair("Noise_NN_25519_ChaChaPoly_SHA256")
    with pytest.raises(LimitExceededError):
        resp.read_message(b"\x01" * (MAX_MESSAGE_LEN + 1))
    init, resp = _pair("Noise_NN_25519_ChaChaPoly_SHA256")
    assert init.max_payload() == MAX_MESSAGE_LEN - 32
    assert len(init.write_message(b"x" * init.max_payload())) == MAX_MESSAGE_LEN
    init, resp = _pair("Noise_NN_25519_ChaChaPoly_SHA256")
    with pytest.raises(LimitExceededError):
        init.write_message(b"x" * (MAX_MESSAGE_LEN - 31))
    with pytest.raises(BrokenTransformError):
        init.write_message()


def test_low_order_peer_key_is_a_handshake_error() -> None:
    _init, resp = _pair("Noise_NN_25519_ChaChaPoly_SHA256")
    resp.read_message(bytes(32))  # an all-zero "ephemeral" is of low order
    with pytest.raises(HandshakeError):
        resp.write_message()


def test_out_of_turn_calls() -> None:
    init, resp = _pair("Noise_XX_25519_ChaChaPoly_BLAKE2b")
    with pytest.raises(HandshakeError, match="out of turn"):
        resp.write_message()
    with pytest.raises(BrokenTransformError):
        resp.read_message(b"")
    init, resp = _pair("Noise_NN_25519_ChaChaPoly_BLAKE2b")
    with pytest.raises(HandshakeError):
        init.split()
    with pytest.raises(HandshakeError):
        _ = resp.handshake_hash
    init, resp = _pair("Noise_NN_25519_ChaChaPoly_BLAKE2b")
    _run(init, resp)
    with pytest.raises(HandshakeError, match="complete"):
        init.write_message()


def test_one_way_pattern() -> None:
    init, resp = _pair("Noise_X_25519_ChaChaPoly_SHA512")
    assert resp.read_message(init.write_message(b"only")) == b"only"
    assert init.complete and resp.complete and resp.remote_static == init.local_static
    (send, _), (_, recv) = init.split(), resp.split()
    assert recv.decrypt(b"", send.encrypt(b"", b"more")) == b"more"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, InvalidParameterError),  # XX initiator without s
        ({"s": b"\x01" * 31}, InvalidKeySizeError),
        ({"s": b"\x01" * 32, "rs": b"\x02" * 32}, InvalidParameterError),  # XX takes no rs
        ({"s": b"\x01" * 32, "psks": [b"\x03" * 32]}, InvalidParameterError),
    ],
)
def test_key_checks(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        NoiseHandshake("Noise_XX_25519_ChaChaPoly_SHA256", True, **kwargs)


def test_psk_checks() -> None:
    with pytest.raises(InvalidParameterError):
        NoiseHandshake("Noise_NNpsk0+psk2_25519_ChaChaPoly_SHA256", True, psks=[b"\x01" * 32])
    with pytest.raises(InvalidKeySizeError):
        NoiseHandshake("Noise_NNpsk0_25519_ChaChaPoly_SHA256", True, psks=[b"\x01" * 16])


def test_every_pattern_roundtrips() -> None:
    patterns = [*"NKX", "NN", "NK", "NX", "KN", "KK", "KX", "XN", "XK", "XX", "IN", "IK", "IX"]
    patterns += ["X1X1", "I1K1", "NNpsk0+psk2", "XXpsk3", "Kpsk0"]
    for pattern in patterns:
        init, resp = _pair(f"Noise_{pattern}_25519_AESGCM_BLAKE2s", pattern.count("psk"))
        _run(init, resp)
        assert init.handshake_hash == resp.handshake_hash, pattern


# -- cipher state ----------------------------------------------------------------------


@pytest.mark.parametrize("cipher", ["ChaChaPoly", "AESGCM"])
def test_cipher_state_limits(cipher: str) -> None:
    a, b = CipherState(cipher, b"k" * 32), CipherState(cipher, b"k" * 32)
    with pytest.raises(LimitExceededError):
        a.encrypt(b"", bytes(MAX_MESSAGE_LEN - 15))
    with pytest.raises(BrokenTransformError):
        a.encrypt(b"", b"")
    a = CipherState(cipher, b"k" * 32)
    assert len(a.encrypt(b"", bytes(MAX_MESSAGE_LEN - 16))) == MAX_MESSAGE_LEN
    # nonce exhaustion: 2**64-2 is the last usable nonce, 2**64-1 is reserved for rekey
    a.set_nonce(MAX_NONCE - 1)
    b.set_nonce(MAX_NONCE - 1)
    assert b.decrypt(b"", a.encrypt(b"", b"last")) == b"last"
    assert a.nonce == MAX_NONCE
    with pytest.raises(LimitExceededError):
        a.encrypt(b"", b"one too many")
    with pytest.raises(LimitExceededError):
        b.decrypt(b"", bytes(16))


@pytest.mark.parametrize("cipher", ["ChaChaPoly", "AESGCM"])
def test_cipher_state_nonce_encoding_and_failures(cipher: str) -> None:
    a, b = CipherState(cipher, b"k" * 32), CipherState(cipher, b"k" * 32)
    ct0 = a.encrypt(b"", b"m")
    b.set_nonce(1)
    with pytest.raises(AuthenticationError):  # replayed under the wrong nonce
        b.decrypt(b"", ct0)
    with pytest.raises(BrokenTransformError):
        b.decrypt(b"", ct0)
    c = CipherState(cipher, b"k" * 32)
    with pytest.raises(AuthenticationError):
        c.decrypt(b"", b"short")
    with pytest.raises(InvalidParameterError):
        CipherState("AES256CTR", b"k" * 32)


@pytest.mark.parametrize("cipher", ["ChaChaPoly", "AESGCM"])
def test_a_cipher_state_without_a_key_never_passes_data_in_clear(cipher: str) -> None:
    """Noise's key-less pass-through is the handshake's business (inside SymmetricState):
    a public CipherState with no key is refused, and one whose key is taken away is
    broken, never a clear channel (review 3)."""
    with pytest.raises(InvalidParameterError, match="needs a 32-byte key"):
        CipherState(cipher, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        CipherState(cipher)  # type: ignore[call-arg]
    cs = CipherState(cipher, b"k" * 32)
    with pytest.raises(InvalidParameterError, match="in clear"):
        cs.initialize_key(None)  # type: ignore[arg-type]
    for call in (cs.encrypt, cs.decrypt):
        with pytest.raises(BrokenTransformError):
            call(b"hdr", b"forged, unauthenticated input of some length")


def test_a_loaded_static_key_is_reused_across_handshakes() -> None:
    """``s=`` as a loaded ``X25519PrivateKey`` (a listener's, shared by its handshakes)
    runs the same handshake as the raw bytes: same hash for the same ephemeral."""
    priv, pub = generate_keypair()
    loaded = X25519PrivateKey.from_private_bytes(priv.secret_bytes())
    hashes = []
    for s in (priv, loaded, loaded):
        e = b"\x05" * 32
        init = NoiseHandshake("Noise_NK_25519_AESGCM_BLAKE2s", True, rs=pub, e=e)
        resp = NoiseHandshake("Noise_NK_25519_AESGCM_BLAKE2s", False, s=s, e=b"\x06" * 32)
        _run(init, resp)
        assert init.handshake_hash == resp.handshake_hash
        hashes.append(resp.handshake_hash)
    assert hashes[0] == hashes[1] == hashes[2]
