"""Layer 1: sans-I/O transforms and one-shot suites over native kernels.

Authenticated suites, hashes and MACs, signatures and key agreement. Unauthenticated and
legacy ciphers (raw block modes, ECB, PCBC, IGE, XOR, raw stream ciphers) live apart in
:mod:`streamcrypt.primitives.hazmat`.
"""

from __future__ import annotations

from .._lazy import lazy_exports

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` without importing typing (start-up)
if TYPE_CHECKING:
    from ._aead import (
        AES128GCM,
        AES256GCM,
        SUITES,
        Aead,
        AesGcm,
        ChaCha20Poly1305Suite,
        XChaCha20Poly1305,
        aead_suite,
    )
    from ._aes import (
        AesGcmDecryptor,
        AesGcmEncryptor,
        AesTransform,
    )
    from ._cdc import CDC_AVG_SIZE, CDC_MAX_SIZE, CDC_MIN_SIZE, ContentChunker
    from ._eddsa_blake2b import (
        EDDSA_SIGNATURE_SIZE,
        EdDsaBlake2bPrivateKey,
        EdDsaBlake2bPublicKey,
        EdDsaBlake2bVerifier,
        eddsa_blake2b_verify,
    )
    from ._elligator import elligator_key_pair, elligator_map, elligator_rev
    from ._eme import EME_MAX_BLOCKS, Eme
    from ._hchacha import hchacha20
    from ._highlevel import (
        CHALLENGE_MAC_SIZE,
        challenge_mac,
        open_box,
        seal_box,
        verify_challenge_mac,
    )
    from ._monocypher_aead import (
        MONOCYPHER_MAC_SIZE,
        MonocypherAead,
        MonocypherAeadDecryptor,
        MonocypherAeadEncryptor,
        aead_lock,
        aead_unlock,
    )
    from ._salsa import Salsa20Poly1305, hsalsa20
    from ._secretbox import (
        SECRETBOX_KEY_SIZE,
        SECRETBOX_NONCE_SIZE,
        SECRETBOX_TAG_SIZE,
        XSalsa20Poly1305,
    )
    from ._signing import (
        ED25519_SIGNATURE_SIZE,
        Ed25519phSigner,
        Ed25519phVerifier,
        Ed25519PrivateKey,
        Ed25519PublicKey,
        ed25519_verify,
    )
    from ._taps import (
        BLAKE3_THREADS_MIN,
        HMAC_MIN_TAG_LENGTH,
        TAP_NAMES,
        Blake2bTap,
        Blake2sTap,
        Blake3Tap,
        HashTap,
        HmacTap,
        MacTap,
        Poly1305Tap,
        Sha3_256Tap,
        Sha3_512Tap,
        Sha256Tap,
        Sha384Tap,
        Sha512Tap,
        blake3_keyed,
        hash_tap,
    )
    from ._x25519_extras import (
        eddsa_to_x25519,
        eddsa_to_x25519_private,
        x25519_dirty_fast,
        x25519_dirty_small,
        x25519_inverse,
        x25519_to_eddsa,
    )

__all__ = [
    "AES128GCM",
    "AES256GCM",
    "BLAKE3_THREADS_MIN",
    "CDC_AVG_SIZE",
    "CDC_MAX_SIZE",
    "CDC_MIN_SIZE",
    "CHALLENGE_MAC_SIZE",
    "ED25519_SIGNATURE_SIZE",
    "EDDSA_SIGNATURE_SIZE",
    "EME_MAX_BLOCKS",
    "HMAC_MIN_TAG_LENGTH",
    "MONOCYPHER_MAC_SIZE",
    "SECRETBOX_KEY_SIZE",
    "SECRETBOX_NONCE_SIZE",
    "SECRETBOX_TAG_SIZE",
    "SUITES",
    "TAP_NAMES",
    "Aead",
    "AesGcm",
    "AesGcmDecryptor",
    "AesGcmEncryptor",
    "AesTransform",
    "Blake2bTap",
    "Blake2sTap",
    "Blake3Tap",
    "ChaCha20Poly1305Suite",
    "ContentChunker",
    "Ed25519PrivateKey",
    "Ed25519PublicKey",
    "Ed25519phSigner",
    "Ed25519phVerifier",
    "EdDsaBlake2bPrivateKey",
    "EdDsaBlake2bPublicKey",
    "EdDsaBlake2bVerifier",
    "Eme",
    "HashTap",
    "HmacTap",
    "MacTap",
    "MonocypherAead",
    "MonocypherAeadDecryptor",
    "MonocypherAeadEncryptor",
    "Poly1305Tap",
    "Salsa20Poly1305",
    "Sha3_256Tap",
    "Sha3_512Tap",
    "Sha256Tap",
    "Sha384Tap",
    "Sha512Tap",
    "XChaCha20Poly1305",
    "XSalsa20Poly1305",
    "aead_lock",
    "aead_suite",
    "aead_unlock",
    "blake3_keyed",
    "challenge_mac",
    "ed25519_verify",
    "eddsa_blake2b_verify",
    "eddsa_to_x25519",
    "eddsa_to_x25519_private",
    "elligator_key_pair",
    "elligator_map",
    "elligator_rev",
    "hash_tap",
    "hchacha20",
    "hsalsa20",
    "open_box",
    "seal_box",
    "verify_challenge_mac",
    "x25519_dirty_fast",
    "x25519_dirty_small",
    "x25519_inverse",
    "x25519_to_eddsa",
]

# Where each name is defined: imported from there on first use (a format uses a few
# primitives; importing all of them cost every program ~10 ms).
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "._aead": (
            "AES128GCM",
            "AES256GCM",
            "SUITES",
            "Aead",
            "AesGcm",
            "ChaCha20Poly1305Suite",
            "XChaCha20Poly1305",
            "aead_suite",
        ),
        "._aes": (
            "AesGcmDecryptor",
            "AesGcmEncryptor",
            "AesTransform",
        ),
        "._cdc": ("CDC_AVG_SIZE", "CDC_MAX_SIZE", "CDC_MIN_SIZE", "ContentChunker"),
        "._eddsa_blake2b": (
            "EDDSA_SIGNATURE_SIZE",
            "EdDsaBlake2bPrivateKey",
            "EdDsaBlake2bPublicKey",
            "EdDsaBlake2bVerifier",
            "eddsa_blake2b_verify",
        ),
        "._elligator": ("elligator_key_pair", "elligator_map", "elligator_rev"),
        "._eme": ("EME_MAX_BLOCKS", "Eme"),
        "._hchacha": ("hchacha20",),
        "._highlevel": (
            "CHALLENGE_MAC_SIZE",
            "challenge_mac",
            "open_box",
            "seal_box",
            "verify_challenge_mac",
        ),
        "._monocypher_aead": (
            "MONOCYPHER_MAC_SIZE",
            "MonocypherAead",
            "MonocypherAeadDecryptor",
            "MonocypherAeadEncryptor",
            "aead_lock",
            "aead_unlock",
        ),
        "._salsa": ("Salsa20Poly1305", "hsalsa20"),
        "._secretbox": (
            "SECRETBOX_KEY_SIZE",
            "SECRETBOX_NONCE_SIZE",
            "SECRETBOX_TAG_SIZE",
            "XSalsa20Poly1305",
        ),
        "._signing": (
            "ED25519_SIGNATURE_SIZE",
            "Ed25519phSigner",
            "Ed25519phVerifier",
            "Ed25519PrivateKey",
            "Ed25519PublicKey",
            "ed25519_verify",
        ),
        "._taps": (
            "BLAKE3_THREADS_MIN",
            "HMAC_MIN_TAG_LENGTH",
            "TAP_NAMES",
            "Blake2bTap",
            "Blake2sTap",
            "Blake3Tap",
            "HashTap",
            "HmacTap",
            "MacTap",
            "Poly1305Tap",
            "Sha3_256Tap",
            "Sha3_512Tap",
            "Sha256Tap",
            "Sha384Tap",
            "Sha512Tap",
            "blake3_keyed",
            "hash_tap",
        ),
        "._x25519_extras": (
            "eddsa_to_x25519",
            "eddsa_to_x25519_private",
            "x25519_dirty_fast",
            "x25519_dirty_small",
            "x25519_inverse",
            "x25519_to_eddsa",
        ),
    },
)
