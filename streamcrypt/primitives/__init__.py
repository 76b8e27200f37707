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
        AES128GCM as AES128GCM,
        AES256GCM as AES256GCM,
        SUITES as SUITES,
        Aead as Aead,
        AesGcm as AesGcm,
        ChaCha20Poly1305Suite as ChaCha20Poly1305Suite,
        XChaCha20Poly1305 as XChaCha20Poly1305,
        aead_suite as aead_suite,
    )
    from ._aes import (
        AesGcmDecryptor as AesGcmDecryptor,
        AesGcmEncryptor as AesGcmEncryptor,
        AesTransform as AesTransform,
    )
    from ._cdc import (
        CDC_AVG_SIZE as CDC_AVG_SIZE,
        CDC_MAX_SIZE as CDC_MAX_SIZE,
        CDC_MIN_SIZE as CDC_MIN_SIZE,
        ContentChunker as ContentChunker,
    )
    from ._eddsa_blake2b import (
        EDDSA_SIGNATURE_SIZE as EDDSA_SIGNATURE_SIZE,
        EdDsaBlake2bPrivateKey as EdDsaBlake2bPrivateKey,
        EdDsaBlake2bPublicKey as EdDsaBlake2bPublicKey,
        EdDsaBlake2bVerifier as EdDsaBlake2bVerifier,
        eddsa_blake2b_verify as eddsa_blake2b_verify,
    )
    from ._elligator import (
        elligator_key_pair as elligator_key_pair,
        elligator_map as elligator_map,
        elligator_rev as elligator_rev,
    )
    from ._eme import EME_MAX_BLOCKS as EME_MAX_BLOCKS, Eme as Eme
    from ._hchacha import hchacha20 as hchacha20
    from ._highlevel import (
        CHALLENGE_MAC_SIZE as CHALLENGE_MAC_SIZE,
        challenge_mac as challenge_mac,
        open_box as open_box,
        seal_box as seal_box,
        verify_challenge_mac as verify_challenge_mac,
    )
    from ._monocypher_aead import (
        MONOCYPHER_MAC_SIZE as MONOCYPHER_MAC_SIZE,
        MonocypherAead as MonocypherAead,
        MonocypherAeadDecryptor as MonocypherAeadDecryptor,
        MonocypherAeadEncryptor as MonocypherAeadEncryptor,
        aead_lock as aead_lock,
        aead_unlock as aead_unlock,
    )
    from ._salsa import Salsa20Poly1305 as Salsa20Poly1305, hsalsa20 as hsalsa20
    from ._secretbox import (
        SECRETBOX_KEY_SIZE as SECRETBOX_KEY_SIZE,
        SECRETBOX_NONCE_SIZE as SECRETBOX_NONCE_SIZE,
        SECRETBOX_TAG_SIZE as SECRETBOX_TAG_SIZE,
        XSalsa20Poly1305 as XSalsa20Poly1305,
    )
    from ._signing import (
        ED25519_SIGNATURE_SIZE as ED25519_SIGNATURE_SIZE,
        Ed25519phSigner as Ed25519phSigner,
        Ed25519phVerifier as Ed25519phVerifier,
        Ed25519PrivateKey as Ed25519PrivateKey,
        Ed25519PublicKey as Ed25519PublicKey,
        ed25519_verify as ed25519_verify,
    )
    from ._taps import (
        BLAKE3_THREADS_MIN as BLAKE3_THREADS_MIN,
        HMAC_MIN_TAG_LENGTH as HMAC_MIN_TAG_LENGTH,
        TAP_NAMES as TAP_NAMES,
        Blake2bTap as Blake2bTap,
        Blake2sTap as Blake2sTap,
        Blake3Tap as Blake3Tap,
        HashTap as HashTap,
        HmacTap as HmacTap,
        MacTap as MacTap,
        Poly1305Tap as Poly1305Tap,
        Sha3_256Tap as Sha3_256Tap,
        Sha3_512Tap as Sha3_512Tap,
        Sha256Tap as Sha256Tap,
        Sha384Tap as Sha384Tap,
        Sha512Tap as Sha512Tap,
        blake3_keyed as blake3_keyed,
        hash_tap as hash_tap,
    )
    from ._x25519_extras import (
        eddsa_to_x25519 as eddsa_to_x25519,
        eddsa_to_x25519_private as eddsa_to_x25519_private,
        x25519_dirty_fast as x25519_dirty_fast,
        x25519_dirty_small as x25519_dirty_small,
        x25519_inverse as x25519_inverse,
        x25519_to_eddsa as x25519_to_eddsa,
    )

# Where each name is defined: imported from there on first use (a format uses a few
# primitives; importing all of them cost every program ~10 ms).
_TABLE = {
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
}
__all__ = sorted(name for names in _TABLE.values() for name in names)

__getattr__, __dir__ = lazy_exports(__name__, _TABLE)
