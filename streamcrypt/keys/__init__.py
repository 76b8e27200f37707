"""Layer 0: key objects, key rings, key derivation and small byte utilities (among them
:func:`load_json`, the one JSON reader for key rings, keysets and other text from outside)."""

from __future__ import annotations

from .._lazy import lazy_exports

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` without importing typing (start-up)
if TYPE_CHECKING:
    from ._argon2 import ARGON2_VARIANTS, Argon2Variant, argon2
    from ._json import load_json
    from ._kdf import HashName, hkdf, hkdf_expand, hkdf_extract
    from ._keyring import KeyRing
    from ._password import (
        ARGON2_SALT_SIZE,
        INTERACTIVE,
        MAX_READ_PARAMS,
        MAX_SCRYPT_READ_PARAMS,
        MODERATE,
        SCRYPT_DEFAULT,
        SENSITIVE,
        Argon2Params,
        PasswordParams,
        ScryptParams,
        check_read_params,
        derive_key_from_password,
        hash_password,
        password_needs_rehash,
        verify_password,
        x25519_key_pair_from_password,
    )
    from ._secret import (
        HoldsSecrets,
        SecretKey,
        as_secret_key,
        constant_time_equal,
        key_bytes,
        random_bytes,
        wipe,
    )

__all__ = [
    "ARGON2_SALT_SIZE",
    "ARGON2_VARIANTS",
    "INTERACTIVE",
    "MAX_READ_PARAMS",
    "MAX_SCRYPT_READ_PARAMS",
    "MODERATE",
    "SCRYPT_DEFAULT",
    "SENSITIVE",
    "Argon2Params",
    "Argon2Variant",
    "HashName",
    "HoldsSecrets",
    "KeyRing",
    "PasswordParams",
    "ScryptParams",
    "SecretKey",
    "argon2",
    "as_secret_key",
    "check_read_params",
    "constant_time_equal",
    "derive_key_from_password",
    "hash_password",
    "hkdf",
    "hkdf_expand",
    "hkdf_extract",
    "key_bytes",
    "load_json",
    "password_needs_rehash",
    "random_bytes",
    "verify_password",
    "wipe",
    "x25519_key_pair_from_password",
]

# Where each name is defined: imported from there on first use (the password KDFs
# and the key ring cost most of the package's import time, and most programs use one).
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "._argon2": ("ARGON2_VARIANTS", "Argon2Variant", "argon2"),
        "._json": ("load_json",),
        "._kdf": ("HashName", "hkdf", "hkdf_expand", "hkdf_extract"),
        "._keyring": ("KeyRing",),
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
            "wipe",
        ),
    },
)
