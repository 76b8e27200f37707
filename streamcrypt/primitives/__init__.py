"""Layer 1: sans-I/O transforms and one-shot suites over native kernels.

Authenticated suites, hashes and MACs, signatures and key agreement. Unauthenticated and
legacy ciphers (raw block modes, ECB, PCBC, IGE, XOR, raw stream ciphers) live apart in
:mod:`streamcrypt.primitives.hazmat`.
"""

from __future__ import annotations

from .._lazy import lazy_exports

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` without importing typing (start-up)
if TYPE_CHECKING:
    from ._aead import AES128GCM as AES128GCM
    from ._aead import AES256GCM as AES256GCM
    from ._aead import SUITES as SUITES
    from ._aead import Aead as Aead
    from ._aead import AesGcm as AesGcm
    from ._aead import ChaCha20Poly1305Suite as ChaCha20Poly1305Suite
    from ._aead import XChaCha20Poly1305 as XChaCha20Poly1305
    from ._aead import aead_suite as aead_suite
    from ._aes import AesGcmDecryptor as AesGcmDecryptor
    from ._aes import AesGcmEncryptor as AesGcmEncryptor
    from ._aes import AesTransform as AesTransform
    from ._cdc import CDC_AVG_SIZE as CDC_AVG_SIZE
    from ._cdc import CDC_MAX_SIZE as CDC_MAX_SIZE
    from ._cdc import CDC_MIN_SIZE as CDC_MIN_SIZE
    from ._cdc import ContentChunker as ContentChunker
    from ._eddsa_blake2b import EDDSA_SIGNATURE_SIZE as EDDSA_SIGNATURE_SIZE
    from ._eddsa_blake2b import EdDsaBlake2bPrivateKey as EdDsaBlake2bPrivateKey
    from ._eddsa_blake2b import EdDsaBlake2bPublicKey as EdDsaBlake2bPublicKey
    from ._eddsa_blake2b import EdDsaBlake2bVerifier as EdDsaBlake2bVerifier
    from ._eddsa_blake2b import eddsa_blake2b_verify as eddsa_blake2b_verify
    from ._elligator import elligator_key_pair as elligator_key_pair
    from ._elligator import elligator_map as elligator_map
    from ._elligator import elligator_rev as elligator_rev
    from ._eme import EME_MAX_BLOCKS as EME_MAX_BLOCKS
    from ._eme import Eme as Eme
    from ._hchacha import hchacha20 as hchacha20
    from ._highlevel import CHALLENGE_MAC_SIZE as CHALLENGE_MAC_SIZE
    from ._highlevel import challenge_mac as challenge_mac
    from ._highlevel import open_box as open_box
    from ._highlevel import seal_box as seal_box
    from ._highlevel import verify_challenge_mac as verify_challenge_mac
    from ._monocypher_aead import MONOCYPHER_MAC_SIZE as MONOCYPHER_MAC_SIZE
    from ._monocypher_aead import MonocypherAead as MonocypherAead
    from ._monocypher_aead import MonocypherAeadDecryptor as MonocypherAeadDecryptor
    from ._monocypher_aead import MonocypherAeadEncryptor as MonocypherAeadEncryptor
    from ._monocypher_aead import aead_lock as aead_lock
    from ._monocypher_aead import aead_unlock as aead_unlock
    from ._salsa import Salsa20Poly1305 as Salsa20Poly1305
    from ._salsa import hsalsa20 as hsalsa20
    from ._secretbox import SECRETBOX_KEY_SIZE as SECRETBOX_KEY_SIZE
    from ._secretbox import SECRETBOX_NONCE_SIZE as SECRETBOX_NONCE_SIZE
    from ._secretbox import SECRETBOX_TAG_SIZE as SECRETBOX_TAG_SIZE
    from ._secretbox import XSalsa20Poly1305 as XSalsa20Poly1305
    from ._signing import ED25519_SIGNATURE_SIZE as ED25519_SIGNATURE_SIZE
    from ._signing import Ed25519phSigner as Ed25519phSigner
    from ._signing import Ed25519phVerifier as Ed25519phVerifier
    from ._signing import Ed25519PrivateKey as Ed25519PrivateKey
    from ._signing import Ed25519PublicKey as Ed25519PublicKey
    from ._signing import ed25519_verify as ed25519_verify
    from ._taps import BLAKE3_THREADS_MIN as BLAKE3_THREADS_MIN
    from ._taps import HMAC_MIN_TAG_LENGTH as HMAC_MIN_TAG_LENGTH
    from ._taps import TAP_NAMES as TAP_NAMES
    from ._taps import Blake2bTap as Blake2bTap
    from ._taps import Blake2sTap as Blake2sTap
    from ._taps import Blake3Tap as Blake3Tap
    from ._taps import HashTap as HashTap
    from ._taps import HmacTap as HmacTap
    from ._taps import MacTap as MacTap
    from ._taps import Poly1305Tap as Poly1305Tap
    from ._taps import Sha3_256Tap as Sha3_256Tap
    from ._taps import Sha3_512Tap as Sha3_512Tap
    from ._taps import Sha256Tap as Sha256Tap
    from ._taps import Sha384Tap as Sha384Tap
    from ._taps import Sha512Tap as Sha512Tap
    from ._taps import blake3_keyed as blake3_keyed
    from ._taps import hash_tap as hash_tap
    from ._x25519_extras import eddsa_to_x25519 as eddsa_to_x25519
    from ._x25519_extras import eddsa_to_x25519_private as eddsa_to_x25519_private
    from ._x25519_extras import x25519_dirty_fast as x25519_dirty_fast
    from ._x25519_extras import x25519_dirty_small as x25519_dirty_small
    from ._x25519_extras import x25519_inverse as x25519_inverse
    from ._x25519_extras import x25519_to_eddsa as x25519_to_eddsa

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
