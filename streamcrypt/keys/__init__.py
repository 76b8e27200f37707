"""Layer 0: key objects (in memory, or held in a PKCS#11 token: :class:`Pkcs11Key`), key
rings, key derivation and small byte utilities (among them :func:`load_json`, the one
JSON reader for key rings, keysets and other text from outside)."""

from __future__ import annotations

from .._lazy import lazy_exports

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` without importing typing (start-up)
if TYPE_CHECKING:
    from ._argon2 import ARGON2_VARIANTS as ARGON2_VARIANTS
    from ._argon2 import Argon2Variant as Argon2Variant
    from ._argon2 import argon2 as argon2
    from ._json import load_json as load_json
    from ._kdf import HashName as HashName
    from ._kdf import hkdf as hkdf
    from ._kdf import hkdf_expand as hkdf_expand
    from ._kdf import hkdf_extract as hkdf_extract
    from ._kdf import hmac_digest as hmac_digest
    from ._kdf import hmac_digests as hmac_digests
    from ._keyring import KeyRing as KeyRing
    from ._password import ARGON2_SALT_SIZE as ARGON2_SALT_SIZE
    from ._password import INTERACTIVE as INTERACTIVE
    from ._password import MAX_READ_PARAMS as MAX_READ_PARAMS
    from ._password import MAX_SCRYPT_READ_PARAMS as MAX_SCRYPT_READ_PARAMS
    from ._password import MODERATE as MODERATE
    from ._password import SCRYPT_DEFAULT as SCRYPT_DEFAULT
    from ._password import SENSITIVE as SENSITIVE
    from ._password import Argon2Params as Argon2Params
    from ._password import PasswordParams as PasswordParams
    from ._password import ScryptParams as ScryptParams
    from ._password import check_read_params as check_read_params
    from ._password import derive_key_from_password as derive_key_from_password
    from ._password import hash_password as hash_password
    from ._password import password_needs_rehash as password_needs_rehash
    from ._password import verify_password as verify_password
    from ._password import x25519_key_pair_from_password as x25519_key_pair_from_password
    from ._pkcs11 import Pkcs11Key as Pkcs11Key
    from ._secret import HoldsSecrets as HoldsSecrets
    from ._secret import SecretKey as SecretKey
    from ._secret import as_secret_key as as_secret_key
    from ._secret import constant_time_equal as constant_time_equal
    from ._secret import key_bytes as key_bytes
    from ._secret import random_bytes as random_bytes
    from ._secret import secret_text_bytes as secret_text_bytes
    from ._secret import wipe as wipe

# Where each name is defined: imported from there on first use (the password KDFs
# and the key ring cost most of the package's import time, and most programs use one).
_TABLE = {
    "._argon2": ("ARGON2_VARIANTS", "Argon2Variant", "argon2"),
    "._json": ("load_json",),
    "._kdf": ("HashName", "hkdf", "hkdf_expand", "hkdf_extract", "hmac_digest", "hmac_digests"),
    "._keyring": ("KeyRing",),
    "._pkcs11": ("Pkcs11Key",),
    "._password": (
        "ARGON2_SALT_SIZE",
        "INTERACTIVE",
        "MAX_READ_PARAMS",
        "MAX_SCRYPT_READ_PARAMS",
        "MODERATE",
        "SCRYPT_DEFAULT",
        "SENSITIVE",
        "Argon2Params",
        "PasswordParams",
        "ScryptParams",
        "check_read_params",
        "derive_key_from_password",
        "hash_password",
        "password_needs_rehash",
        "verify_password",
        "x25519_key_pair_from_password",
    ),
    "._secret": (
        "HoldsSecrets",
        "SecretKey",
        "as_secret_key",
        "constant_time_equal",
        "key_bytes",
        "random_bytes",
        "secret_text_bytes",
        "wipe",
    ),
}
__all__ = sorted(name for names in _TABLE.values() for name in names)

__getattr__, __dir__ = lazy_exports(__name__, _TABLE)
