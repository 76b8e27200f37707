"""The fixed keys every target, seed and peer shares (public test keys: never use them)."""

from __future__ import annotations

import functools
import importlib.util
import os

from streamcrypt.codecs import age, envelope
from streamcrypt.codecs import tink_keyset as tk
from streamcrypt.codecs.ecies import Cipher, Curve, NonceLength
from streamcrypt.keys import Argon2Params, KeyRing, Pkcs11Key, ScryptParams, SecretKey
from streamcrypt.testing import SOFTHSM_MODULES, softhsm_token

KEY = bytes(range(32))
KEY16 = bytes(range(16))
AAD = b"fuzz"
PASSPHRASE = "fuzz"
RING = KeyRing([SecretKey(KEY, key_id="fuzz")])


def token_available() -> bool:
    """Whether a SoftHSM2 token can be made here (python-pkcs11 and Debian's softhsm2)."""
    has_binding = importlib.util.find_spec("pkcs11") is not None
    return has_binding and any(os.path.exists(p) for p in SOFTHSM_MODULES)


@functools.cache
def token_ring() -> KeyRing:
    """A ring of one token key, "fuzz-token", holding :data:`KEY` (imported into this
    process's SoftHSM2 token, so the committed seeds open in any process)."""
    hsm = softhsm_token()
    uri = hsm.uri("fuzz-token")
    return KeyRing([Pkcs11Key.import_key(uri, KEY, pin=hsm.pin_source)])


AGE_X25519 = age.X25519Identity(bytes(range(1, 33)))
AGE_PQ = age.MLKEM768X25519Identity(bytes(range(2, 34)))
AGE_IDENTITIES: list[age.IdentityLike] = [AGE_X25519, AGE_PQ]
ENVELOPE_X25519 = envelope.X25519Identity(bytes(range(3, 35)))
PLUGIN_RECIPIENT = age.plugin_recipient("fuzz", b"recipient data")
PLUGIN_IDENTITY = age.plugin_identity("fuzz", b"identity data")

#: Password-KDF caps the targets read with. The library's defaults (1 GiB, several
#: seconds) would make every hostile stanza a deliberate second of work; lowered, a call
#: measures the parser. The defaults themselves are tested in tests/test_password.py.
MAX_WORK_FACTOR = 12
MAX_ARGON2 = Argon2Params(2, 1 << 20)
MAX_SCRYPT = ScryptParams(1 << 12)

#: Four keys, three of one header length, so the decryptor tries keys on segment 0 (and,
#: for the 1 MB key, holds up to a megabyte of it first).
TINK_KEYSET = tk.TinkKeyset(
    (
        tk.TinkStreamingKey.raw(bytes(range(16)), "AES128_GCM_HKDF_4KB", key_id=1),
        tk.TinkStreamingKey.raw(bytes(range(5, 21)), "AES128_CTR_HMAC_SHA256_4KB", key_id=2),
        tk.TinkStreamingKey.raw(bytes(range(9, 41)), "AES256_GCM_HKDF_4KB", key_id=3),
        tk.TinkStreamingKey.raw(bytes(range(7, 23)), "AES128_CTR_HMAC_SHA256_1MB", key_id=4),
    ),
    1,
)

SECRETSTREAM_CHUNK = 64

#: (curve, cipher, nonce length, compress ephemeral, compress HKDF), chosen by input[0].
ECIES_CONFIGS: tuple[tuple[Curve, Cipher, NonceLength, bool, bool], ...] = (
    ("secp256k1", "aes-256-gcm", 16, False, False),
    ("secp256k1", "xchacha20", 16, True, True),
    ("x25519", "aes-256-gcm", 12, False, False),
    ("ed25519", "xchacha20", 16, False, False),
)
ECIES_PRIVATE = {
    "secp256k1": bytes([7]) * 32,
    "x25519": bytes([8]) * 32,
    "ed25519": bytes([9]) * 32,
}

NOISE_STATIC_I = bytes(range(10, 42))
NOISE_STATIC_R = bytes(range(11, 43))
NOISE_EPHEMERAL_I = bytes(range(12, 44))
NOISE_EPHEMERAL_R = bytes(range(13, 45))
NOISE_PSK = bytes(range(14, 46))
#: (protocol name, which side reads, how many messages it wrote first), by input[0].
NOISE_SCENARIOS = (
    ("Noise_XX_25519_ChaChaPoly_BLAKE2s", "responder", 0),
    ("Noise_IK_25519_ChaChaPoly_BLAKE2s", "responder", 0),
    ("Noise_NK_25519_AESGCM_SHA256", "responder", 0),
    ("Noise_NNpsk0_25519_ChaChaPoly_SHA512", "responder", 0),
    ("Noise_XX_25519_ChaChaPoly_BLAKE2s", "initiator", 1),
)
